"""The answer key of notebook 12, in notebook order:
``12.bits_per_byte``, ``12.interval_narrowing``, ``12.sample_with_cache``.
"""

from __future__ import annotations

import math

import torch

from ...sampling import sample_next_token
from ..registry import solution


@solution(
    "12.bits_per_byte",
    "La pérdida media por token por el número de tokens da los nats de todo el texto; entre ln 2, sus bits (un "
    "bit son ln 2 ≈ 0,693 nats); entre los bytes UTF-8 del texto, los bits por byte. Los bytes se cuentan con "
    '`len(text.encode("utf-8"))`, no con `len(text)`: en español, «ñ» o «é» son un carácter y dos bytes.',
    "The mean loss per token times the number of tokens gives the nats of the whole text; divided by ln 2, its "
    "bits (one bit is ln 2 ≈ 0.693 nats); divided by the text's UTF-8 bytes, the bits per byte. The bytes are "
    'counted with `len(text.encode("utf-8"))`, not `len(text)`: in Spanish, “ñ” or “é” are one character and two '
    "bytes.",
)
def solution_bits_per_byte(nats_per_token, n_tokens, text):
    total_nats = nats_per_token * n_tokens  # «los nats de todo el texto|the nats of the whole text»
    n_bytes = len(text.encode("utf-8"))  # «bytes, no caracteres|bytes, not characters»
    return total_nats / math.log(2) / n_bytes


@solution(
    "12.interval_narrowing",
    "El intervalo tiene `high - low + 1` enteros (los dos extremos cuentan). Al símbolo le toca la parte que sus "
    "cuentas ocupan en el total: empieza `width * start // total` enteros después de `low` y acaba justo antes "
    "de donde empezaría el siguiente símbolo, `width * stop // total`. Los dos extremos salen del intervalo de "
    "antes, y con `//`: enteros exactos, los mismos que calculará el decodificador.",
    "The interval has `high - low + 1` integers (both ends count). The symbol gets the part its counts take up "
    "of the total: it starts `width * start // total` integers after `low` and ends just before where the next "
    "symbol would start, `width * stop // total`. Both ends come from the interval before, and with `//`: exact "
    "integers, the same ones the decoder will compute.",
)
def solution_narrow_interval(low, high, start, stop, total):
    width = (
        high - low + 1
    )  # «enteros del intervalo, los dos extremos incluidos|the interval's integers, both ends included»
    new_low = low + width * start // total
    new_high = low + width * stop // total - 1  # «desde el low de antes|from the low before»
    return new_low, new_high


@solution(
    "12.sample_with_cache",
    "La caché se crea una vez. El primer paso pasa el prompt entero, de forma (1, T), y guarda sus claves y "
    "valores; cada paso siguiente pasa solo el token que acaba de salir, de forma (1, 1). De los logits se usa la "
    "última posición, y `sample_next_token` aplica la temperatura, después top-p, y sortea con `generator`: los "
    "mismos pasos que `generate`, así que el mismo estado del generador da los mismos tokens.",
    "The cache is made once. The first step passes the whole prompt, of shape (1, T), and stores its keys and "
    "values; each later step passes only the token that just came out, of shape (1, 1). The last position of the "
    "logits is used, and `sample_next_token` applies the temperature, then top-p, and draws with `generator`: the "
    "same steps as `generate`, so the same generator state gives the same tokens.",
)
def solution_sample(model, prompt_ids, n_new, temperature, top_p, generator):
    cache = model.new_cache()
    new = torch.tensor([prompt_ids])  # (1, T): «el prompt, una sola vez|the prompt, once»
    out = []
    with torch.no_grad():
        for _ in range(n_new):
            logits = model(new, cache=cache)[:, -1]  # (1, V): «la última posición|the last position»
            token = sample_next_token(logits, temperature, top_p=top_p, generator=generator)  # (1,)
            out.append(int(token))
            new = token[:, None]  # (1, 1): «solo el token nuevo|only the new token»
    return out
