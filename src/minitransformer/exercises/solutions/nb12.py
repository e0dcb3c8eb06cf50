"""The answer key of notebook 12, in notebook order:
``12.interval_narrowing``, ``12.decoder_step``, ``12.sample_with_cache``.
"""

from __future__ import annotations

import torch

from ...sampling import sample_next_token
from ..registry import solution


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
    "12.decoder_step",
    "El codificador cortó el intervalo en partes proporcionales a las cuentas, con el suelo; el decodificador "
    "deshace el corte: `value` es el último de `value - low + 1` enteros del intervalo, que en cuentas son "
    "`(value - low + 1) * total / width`, y restando 1 antes del suelo el punto cae en la cuenta que contiene a "
    "`value`, `target`, entre 0 y total − 1. El símbolo es el primero cuyas cuentas acumuladas pasan de `target` "
    "(start ≤ target < stop: un símbolo de cuenta 0 nunca lo cumple), y el intervalo se estrecha a su parte con "
    "el mismo `narrow` que el codificador.",
    "The encoder cut the interval into shares proportional to the counts, with the floor; the decoder undoes the "
    "cut: `value` is the last of `value - low + 1` integers of the interval, which in counts are "
    "`(value - low + 1) * total / width`, and taking 1 away before the floor the point falls in the count that "
    "holds `value`, `target`, between 0 and total − 1. The symbol is the first whose running count goes past "
    "`target` (start ≤ target < stop: a symbol with a count of 0 never passes), and the interval is narrowed to its "
    "share with the same `narrow` as the encoder.",
)
def solution_decoder_step(low, high, value, counts):
    total = sum(counts)
    width = high - low + 1  # «los dos extremos incluidos|both ends included»
    target = ((value - low + 1) * total - 1) // width  # «0 ≤ target < total|0 ≤ target < total»
    symbol, start = 0, 0
    while target >= start + counts[symbol]:  # «hasta start ≤ target < stop|until start ≤ target < stop»
        start += counts[symbol]
        symbol += 1
    stop = start + counts[symbol]
    return symbol, low + width * start // total, low + width * stop // total - 1


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
