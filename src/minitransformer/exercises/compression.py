"""Checkers for notebook 12's exercises: a model's loss in bits per byte, the interval narrowing of an
arithmetic coder, and sampling with the key-value cache.

Each checker compares the student's answer with the package's own (computed before the student's code
runs, the package's own function switched off while it runs), on cases where the usual mistakes give different
answers (a Spanish text whose characters are not its bytes, products past 2^53 where a float is not exact,
temperatures and top-p values that change the draws), and names the mistake without writing the code. The
narrowing is then proved by a round trip: the package's encoder narrows with the student's function and its
decoder must give the message back. A student's exception becomes a "not yet" that shows the failing line.
``12.sample_with_cache`` also watches every call of the model (its forward, replaced on the model while the
student's code runs): the prompt must go in once, then only the new token each step, always into the same cache;
and the model must be left as it was (its mode, dtype, ``requires_grad``), as must PyTorch's global switches. The worked solutions are in the answer
key :mod:`.solutions.nb12`.
"""

from __future__ import annotations

import inspect
import math
import numbers
import random
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from .. import compression
from ..generation import generate
from ..i18n import tr
from ..modern import ModernConfig, ModernTransformer
from ..sampling import next_token_probs, top_p_filter
from ._core import (
    STATE_HINTS,
    Feedback,
    Hints,
    attempt,
    by_key,
    correct,
    diagnose,
    exercise,
    forbid,
    stop,
    type_name,
    watch,
)

__all__ = ["HINTS", "check_bits_per_byte", "check_narrow", "check_sample"]

# Every hint these checkers give, (Spanish, English), by key.
HINTS = Hints(
    {
        **STATE_HINTS,
        "nan": ("el resultado es NaN o infinito.", "the result is NaN or infinite."),
        "not_a_number": (
            "devuelve un número (float), no {got}.",
            "return a number (float), not {got}.",
        ),
        "too_large": (
            "devuelves un entero tan grande que no cabe en un float (Python dice: «{said}»): ¿elevas a una potencia "
            "o multiplicas donde había que dividir?",
            'you return an integer too large to fit in a float (Python says: "{said}"): do you raise to a power or '
            "multiply where you should divide?",
        ),
        # ---- 12.bits_per_byte
        "bpb_times_ln2": (
            "multiplicas por ln 2 (o divides entre log₂ e), y es al revés: un bit vale ln 2 ≈ 0,693 nats, así que "
            "los nats se pasan a bits dividiendo entre `math.log(2)`.",
            "you multiply by ln 2 (or divide by log₂ e), and it is the other way round: one bit is ln 2 ≈ 0.693 "
            "nats, so nats become bits when divided by `math.log(2)`.",
        ),
        "bpb_log10": (
            "usas el logaritmo en base 10 (`math.log10` o ln 10): los bits son logaritmos en base 2, y la pérdida "
            "está en nats (base e). Divide entre `math.log(2)`.",
            "you use the base-10 logarithm (`math.log10` or ln 10): bits are base-2 logarithms, and the loss is in "
            "nats (base e). Divide by `math.log(2)`.",
        ),
        "bpb_nats": (
            "devuelves nats por byte: falta pasar los nats a bits, dividiendo entre ln 2 (`math.log(2)`).",
            "you return nats per byte: the nats still have to become bits, divided by ln 2 (`math.log(2)`).",
        ),
        "bpb_per_token": (
            "devuelves una cantidad por token ({got}): la pérdida media es por token, y aquí se pide por byte. "
            "Multiplica por `n_tokens` para tener los nats de todo el texto y divide entre sus bytes.",
            "you return an amount per token ({got}): the mean loss is per token, and this asks for it per byte. "
            "Multiply by `n_tokens` to get the nats of the whole text and divide by its bytes.",
        ),
        "bpb_total": (
            "devuelves los bits de todo el texto ({got}): falta dividir entre su número de bytes.",
            "you return the bits of the whole text ({got}): it still has to be divided by its number of bytes.",
        ),
        "bpb_swapped": (
            "multiplicas por los bytes y divides entre los tokens: los nats de todo el texto son "
            "`nats_per_token * n_tokens`, y se reparten entre sus bytes.",
            "you multiply by the bytes and divide by the tokens: the nats of the whole text are "
            "`nats_per_token * n_tokens`, shared among its bytes.",
        ),
        "bpb_characters": (
            "divides entre los caracteres del texto (`len(text)` = {chars}), no entre sus bytes: con «{text}» "
            "son {bytes} bytes en UTF-8, porque letras como «ñ» o «é» ocupan dos. Cuenta "
            '`len(text.encode("utf-8"))`.',
            "you divide by the text's characters (`len(text)` = {chars}), not its bytes: “{text}” is {bytes} "
            "bytes in UTF-8, because letters such as “ñ” or “é” take two. Count "
            '`len(text.encode("utf-8"))`.',
        ),
        "bpb_eight": (
            "multiplicas o divides entre 8: aquí no hay que pasar de bits a bytes. «Bits por byte» son los bits "
            "del modelo repartidos entre los bytes del texto; el 8 solo aparece al compararlo con 8 bits por byte "
            "sin comprimir.",
            "you multiply or divide by 8: nothing is converted from bits to bytes here. “Bits per byte” are the "
            "model's bits shared among the text's bytes; the 8 only appears when comparing with 8 bits per byte "
            "uncompressed.",
        ),
        "bpb_rounded": (
            "el resultado sale redondeado o truncado ({got}): ¿usas `//`, `round` o `int`? Usa la división "
            "normal, `/`, y no redondees.",
            "the result comes out rounded or truncated ({got}): do you use `//`, `round` or `int`? Use ordinary "
            "division, `/`, and do not round.",
        ),
        "bpb_other": (
            "con nats_per_token = {nats}, n_tokens = {tokens} y el texto «{text}» devuelves {got}. Los nats de "
            "todo el texto son nats_per_token · n_tokens; en bits, ÷ ln 2; por byte, ÷ los bytes UTF-8 del texto.",
            "with nats_per_token = {nats}, n_tokens = {tokens} and the text “{text}” you return {got}. The nats of "
            "the whole text are nats_per_token · n_tokens; in bits, ÷ ln 2; per byte, ÷ the text's UTF-8 bytes.",
        ),
        # ---- 12.interval_narrowing
        "narrow_pair": (
            "devuelve una pareja de enteros, `(nuevo_low, nuevo_high)`, no {got}.",
            "return a pair of integers, `(new_low, new_high)`, not {got}.",
        ),
        "narrow_float": (
            "tus extremos, {got}, se desvían de {want}: ¿calculas con floats (`/`, o una anchura `float(...)`)? Con "
            "un intervalo de 2^32 enteros y un total de 2^24 los productos pasan de 2^53, donde un float ya no los "
            "guarda exactos. Calcula solo con enteros y la división entera, `//`.",
            "your ends, {got}, are off from {want}: do you compute with floats (`/`, or a `float(...)` width)? With "
            "an interval of 2^32 integers and a total of 2^24 the products go past 2^53, where a float no longer "
            "holds them exactly. Compute with integers only and integer division, `//`.",
        ),
        "narrow_not_int": (
            "devuelves decimales ({got}), y los extremos son enteros: ¿pasas algo a float (`float(...)`, `/`) antes "
            "de dividir? Aunque aquí salgan bien, pasado 2^53 un float ya no guarda los productos exactos y un "
            "extremo se desvía en uno. Calcula solo con enteros, `//`, y devuelve enteros.",
            "you return floats ({got}), and the ends are integers: do you turn something into a float (`float(...)`, "
            "`/`) before dividing? Even where they come out right here, past 2^53 a float no longer holds the "
            "products exactly and an end is off by one. Compute with integers only, `//`, and return integers.",
        ),
        "narrow_round": (
            "redondeas al entero más cercano (`round`): la parte del símbolo empieza y acaba donde dice el suelo, "
            "`//`, y así la calcula también el decodificador.",
            "you round to the nearest integer (`round`): the symbol's share starts and ends where the floor, `//`, "
            "says, which is how the decoder computes it too.",
        ),
        "narrow_no_low": (
            "olvidas sumar `low`: la parte del símbolo se mide desde el principio del intervalo, no desde 0.",
            "you forget to add `low`: the symbol's share is measured from the start of the interval, not from 0.",
        ),
        "narrow_width": (
            "la anchura del intervalo es `high - low + 1`: los dos extremos están incluidos (con `high - low` "
            "pierdes un entero).",
            "the interval's width is `high - low + 1`: both ends are included (with `high - low` you lose one "
            "integer).",
        ),
        "narrow_high_end": (
            "el nuevo `high` es el último entero de la parte del símbolo, uno menos que donde empieza la del "
            "siguiente: te falta el `- 1`.",
            "the new `high` is the last integer of the symbol's share, one less than where the next symbol's "
            "starts: the `- 1` is missing.",
        ),
        "narrow_new_low": (
            "calculas el nuevo `high` a partir del `low` que acabas de cambiar: los dos extremos salen del intervalo "
            "de antes. Guarda `low` y la anchura antes de cambiar nada.",
            "you compute the new `high` from the `low` you have just changed: both ends come from the interval "
            "before. Keep `low` and the width before changing anything.",
        ),
        "narrow_swapped": (
            "devuelves los extremos al revés: primero el nuevo `low` y después el nuevo `high`.",
            "you return the ends the other way round: first the new `low`, then the new `high`.",
        ),
        "narrow_start_stop": (
            "cambias `start` por `stop`: `low` sale de `start` (donde empiezan las cuentas del símbolo) y `high` de "
            "`stop` (donde acaban).",
            "you swap `start` and `stop`: `low` comes from `start` (where the symbol's counts begin) and `high` from "
            "`stop` (where they end).",
        ),
        "narrow_total": (
            "repartes `total` en vez del intervalo: lo que se reparte entre los símbolos son los `high - low + 1` "
            "enteros del intervalo, en proporción a sus cuentas.",
            "you share out `total` instead of the interval: what is shared among the symbols are the interval's "
            "`high - low + 1` integers, in proportion to their counts.",
        ),
        "narrow_other": (
            "con low = {low}, high = {high}, start = {start}, stop = {stop} y total = {total} devuelves {got}, y es "
            "{want}. La anchura es high − low + 1; el nuevo low, low + anchura·start // total; el nuevo high, "
            "low + anchura·stop // total − 1.",
            "with low = {low}, high = {high}, start = {start}, stop = {stop} and total = {total} you return {got}, "
            "and it is {want}. The width is high − low + 1; the new low, low + width·start // total; the new high, "
            "low + width·stop // total − 1.",
        ),
        "narrow_round_trip": (
            "tus extremos coinciden en los casos de prueba, pero el mensaje que comprime el codificador con tu "
            "función no vuelve igual: {why}",
            "your ends agree on the test cases, but the message the encoder compresses with your function does not "
            "come back the same: {why}",
        ),
        # ---- 12.sample_with_cache
        "sample_ids": (
            "devuelve una lista de ids (enteros), uno por token nuevo, no {got}.",
            "return a list of ids (ints), one per new token, not {got}.",
        ),
        "sample_includes_prompt": (
            "devuelves el prompt y los tokens nuevos: devuelve solo los {n} nuevos (el prompt ya lo tiene quien "
            "llama).",
            "you return the prompt and the new tokens: return only the {n} new ones (the caller already has the "
            "prompt).",
        ),
        "sample_length": (
            "devuelves {got} ids y se piden {n}, uno por token nuevo.",
            "you return {got} ids and {n} are asked for, one per new token.",
        ),
        "sample_not_called": (
            "tu función no llama al modelo: cada token sale de los logits que da `model(tokens, cache=cache)` en "
            "la última posición.",
            "your function does not call the model: each token comes from the logits `model(tokens, cache=cache)` "
            "gives at the last position.",
        ),
        "sample_no_cache": (
            "llamas al modelo sin caché (`cache=None` o sin `cache=`), y cada paso recalcula toda la secuencia. "
            "Crea una con `cache = model.new_cache()` antes del bucle y pásala en cada llamada: "
            "`model(tokens, cache=cache)`.",
            "you call the model without a cache (`cache=None` or no `cache=`), and each step recomputes the whole "
            "sequence. Make one with `cache = model.new_cache()` before the loop and pass it on every call: "
            "`model(tokens, cache=cache)`.",
        ),
        "sample_cache_each_step": (
            "creas una caché nueva en cada paso: así no guarda nada entre pasos. Crea una sola con "
            "`model.new_cache()` antes del bucle.",
            "you make a new cache at each step: then it keeps nothing between steps. Make one with "
            "`model.new_cache()` before the loop.",
        ),
        "sample_prompt_once": (
            "la primera llamada recibe {got} tokens y el prompt tiene {T}: pasa el prompt entero de una vez, "
            "con forma (1, {T}), en la primera llamada.",
            "the first call gets {got} tokens and the prompt has {T}: pass the whole prompt at once, with shape "
            "(1, {T}), in the first call.",
        ),
        "sample_refeed": (
            "tras la primera llamada vuelves a pasar la secuencia entera ({got} tokens) con la caché: la caché ya "
            "guarda las claves y los valores de lo visto, y esos tokens se añaden otra vez en posiciones nuevas. "
            "Pasa solo el token nuevo, con forma (1, 1).",
            "after the first call you pass the whole sequence again ({got} tokens) with the cache: the cache "
            "already holds the keys and values of what it saw, and those tokens are appended again at new "
            "positions. Pass only the new token, with shape (1, 1).",
        ),
        "sample_not_appended": (
            "en cada paso vuelves a pasar el último token del prompt, no el que acabas de muestrear: el token "
            "nuevo es la entrada del paso siguiente.",
            "at each step you pass the prompt's last token again, not the one you just sampled: the new token is "
            "the next step's input.",
        ),
        "sample_fed_other": (
            "en el paso {step} pasas al modelo el token {fed}, y el que acababas de muestrear (y devuelves) es "
            "{sampled}: cada paso recibe el token que sacó el anterior.",
            "at step {step} you pass token {fed} to the model, and the one you had just sampled (and return) is "
            "{sampled}: each step takes the token the previous one drew.",
        ),
        "sample_greedy": (
            "eliges siempre el token más probable (argmax): eso es la decodificación voraz. Muestrea de la "
            "distribución con `torch.multinomial(probs, 1, generator=generator)` o `sample_next_token`.",
            "you always pick the most likely token (argmax): that is greedy decoding. Sample from the "
            "distribution with `torch.multinomial(probs, 1, generator=generator)` or `sample_next_token`.",
        ),
        "sample_first_position": (
            "muestreas con los logits de la primera posición (`[:, 0]`): la predicción del token siguiente está "
            "en la última, `logits[:, -1]`.",
            "you sample from the first position's logits (`[:, 0]`): the prediction of the next token is in the "
            "last one, `logits[:, -1]`.",
        ),
        "sample_no_temperature": (
            "no usas la temperatura: divide los logits entre `temperature` antes de la softmax (o pásala a "
            "`next_token_probs`/`sample_next_token`).",
            "you do not use the temperature: divide the logits by `temperature` before the softmax (or pass it to "
            "`next_token_probs`/`sample_next_token`).",
        ),
        "sample_temperature_times": (
            "multiplicas los logits por la temperatura: se dividen entre ella (τ < 1 afila la distribución).",
            "you multiply the logits by the temperature: they are divided by it (τ < 1 sharpens the distribution).",
        ),
        "sample_no_top_p": (
            "no usas top-p: quédate con los tokens más probables cuya masa llega a `top_p` antes de muestrear "
            "(`top_p_filter`, o `top_p=` en `next_token_probs`/`sample_next_token`).",
            "you do not use top-p: keep the most likely tokens whose mass reaches `top_p` before sampling "
            "(`top_p_filter`, or `top_p=` in `next_token_probs`/`sample_next_token`).",
        ),
        "sample_top_p_boundary": (
            "con top-p te quedas con los tokens cuya masa acumulada no pasa de `top_p`, y dejas fuera el que la "
            "cruza: top-p guarda el conjunto más pequeño de tokens cuya masa *llega* a `top_p`, con el que la "
            "cruza incluido (`top_p_filter`).",
            "with top-p you keep the tokens whose running mass does not go past `top_p`, and leave out the one that "
            "crosses it: top-p keeps the smallest set of tokens whose mass *reaches* `top_p`, the crossing token "
            "included (`top_p_filter`).",
        ),
        "sample_prompt_changed": (
            "tu función cambia la lista `prompt_ids` que recibe (¿le añades los tokens nuevos con `append`?): quien "
            "llama ya no tiene su prompt. Copia la lista antes (`list(prompt_ids)`) o crea una nueva.",
            "your function changes the `prompt_ids` list it is given (do you `append` the new tokens to it?): the "
            "caller no longer has its prompt. Copy the list first (`list(prompt_ids)`) or make a new one.",
        ),
        "sample_top_p_first": (
            "aplicas top-p antes que la temperatura: el orden es temperatura primero y top-p después, como en "
            "`next_token_probs` y en `generate`.",
            "you apply top-p before the temperature: the order is temperature first, then top-p, as in "
            "`next_token_probs` and `generate`.",
        ),
        "sample_generator": (
            "no usas el `generator` que recibes (¿creas uno nuevo, o usas el azar global de PyTorch?): pásalo a "
            "cada sorteo, `torch.multinomial(probs, 1, generator=generator)`, para que el mismo estado dé el mismo "
            "texto.",
            "you do not use the `generator` you are given (do you make a new one, or use PyTorch's global "
            "randomness?): pass it to every draw, `torch.multinomial(probs, 1, generator=generator)`, so that the "
            "same state gives the same text.",
        ),
        "sample_other": (
            "con el prompt {prompt}, temperatura {temperature} y top_p {top_p}, tus tokens son {got} y los de "
            "`generate` con el mismo generador, {want}. Cada paso: logits de la última posición, temperatura, "
            "top-p, un sorteo con `generator`.",
            "with the prompt {prompt}, temperature {temperature} and top_p {top_p}, your tokens are {got} and "
            "`generate`'s with the same generator, {want}. Each step: the last position's logits, temperature, "
            "top-p, one draw with `generator`.",
        ),
    }
)


def _number(lang: str, got: Any) -> float:
    """The answer as a finite float; anything else stops the check with its hint."""
    if isinstance(got, Tensor) and got.numel() == 1 and not got.is_complex() and got.dtype != torch.bool:
        got = got.item()
    if isinstance(got, bool) or not isinstance(got, numbers.Real):
        raise stop(HINTS(lang, "not_a_number", got=type_name(got)))
    try:
        got = float(got)
    except OverflowError as exc:  # an integer beyond a float's range: Python's words, quoted as Python's
        raise stop(HINTS(lang, "too_large", said=str(exc))) from None
    if not math.isfinite(got):
        raise stop(HINTS(lang, "nan"))
    return got


def _same(a: float, b: float | None) -> bool:
    return b is not None and math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def _short(text: str, size: int = 40) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


# ---- 12.bits_per_byte ----------------------------------------------------------------------------

# (nats_per_token, n_tokens, text): an English text first (its characters are its bytes), then Spanish ones
# where they are not («ñ», «é», «ü», «¿», «—»), with fewer tokens than bytes and non-integer answers.
_BPB_FIXED = [
    (3.17, 11, "The cat sat on the mat, and then it slept."),
    (2.71, 14, "El niño soñó que la cigüeña volaba sobre el año."),
    (4.05, 12, "¿Qué pasó? «Mañana» — dijo él, sin más."),
]
_BPB_WORDS = "año niño señal código máquina pérdida atención byte token modelo texto bits the of model text".split()


def _bpb_drawn(n: int = 3) -> list[tuple[float, int, str]]:
    """More cases, drawn from a fixed seed (the same every run, so the stored feedback is too) and written nowhere
    a student can copy them from: a table of the statement's cases does not pass."""
    rng = random.Random(2012)
    cases = []
    for _ in range(n):
        text = " ".join(rng.choice(_BPB_WORDS) for _ in range(rng.randint(6, 12)))
        cases.append((round(rng.uniform(1.5, 5.0), 3), rng.randint(3, len(text) // 3), text))
    return cases


_BPB_CASES = _BPB_FIXED + _bpb_drawn()
_BPB_TOOLS = (("minitransformer.compression.bits_per_byte", "compression.bits_per_byte"),)
_BPB_WHY = (
    "escribe tú la cuenta: es lo que el ejercicio practica.",
    "write the sum yourself: it is what the exercise practises.",
)


def _bpb(nats: float, tokens: int, text: str) -> float:
    return compression.bits_per_byte(nats * tokens, len(text.encode("utf-8")))


def _bpb_mistakes(nats: float, tokens: int, text: str) -> list[tuple[str, float | None]]:
    """What each typical mistake gives on one case; two ways to make one mistake share its key. A mistake whose
    program is right on a case gives the right answer there."""
    B, C, right = len(text.encode("utf-8")), len(text), _bpb(nats, tokens, text)
    ln2, ln10 = math.log(2), math.log(10)
    return [
        ("bpb_times_ln2", nats * tokens * ln2 / B),
        ("bpb_log10", nats * tokens / ln10 / B),
        ("bpb_log10", nats * tokens / math.log10(2) / B),
        ("bpb_nats", nats * tokens / B),
        ("bpb_per_token", nats / ln2),
        ("bpb_per_token", nats),
        ("bpb_total", nats * tokens / ln2),
        ("bpb_total", nats * tokens),
        ("bpb_swapped", nats * B / tokens / ln2),
        ("bpb_characters", nats * tokens / ln2 / C),  # right where characters are bytes
        ("bpb_eight", right / 8),
        ("bpb_eight", right * 8),
        ("bpb_rounded", float(round(right))),
        ("bpb_rounded", float(math.floor(right))),
        ("bpb_rounded", round(right, 1)),
        ("bpb_rounded", round(right, 2)),
        ("bpb_rounded", round(right, 3)),  # the statement's own example is written to 3 decimals
        ("bpb_rounded", round(right, 4)),
        ("bpb_rounded", (nats * tokens // B) / ln2),
        ("bpb_rounded", nats * (tokens // B) / ln2),
    ]


@exercise("12.bits_per_byte")
def check_bits_per_byte(bits_per_byte: Callable[[float, int, str], float], lang: str | None = None) -> Feedback:
    """Check ``bits_per_byte(nats_per_token, n_tokens, text)`` -> the model's bits per UTF-8 byte of ``text``:
    nats_per_token · n_tokens / ln 2 / len(text.encode("utf-8")).

    The text, not its byte count, is passed, so that counting characters instead of bytes is a mistake the
    student can make, and the checker can name. Every case is run; a mistake is named when it explains every
    case, and the hint quotes the first case the answer gets wrong.
    """
    right = [_bpb(*case) for case in _BPB_CASES]  # before the student's code runs: the package's own sum
    with forbid(_BPB_TOOLS, *_BPB_WHY):
        got = [attempt(lang, bits_per_byte, *case) for case in _BPB_CASES]
    answers = [_number(lang, g) for g in got]
    if not all(_same(got, want) for got, want in zip(answers, right)):
        key = diagnose(answers, by_key([_bpb_mistakes(*case) for case in _BPB_CASES]), same=_same)
        first = next(i for i, (got, want) in enumerate(zip(answers, right)) if not _same(got, want))
        if key == "bpb_characters":  # named where characters are not bytes
            first = next(i for i, (_, _, text) in enumerate(_BPB_CASES) if len(text) != len(text.encode("utf-8")))
        nats, tokens, text = _BPB_CASES[first]
        fields = {
            "got": answers[first],
            "text": _short(text),
            "chars": len(text),
            "bytes": len(text.encode("utf-8")),
            "nats": nats,
            "tokens": tokens,
        }
        return HINTS(lang, key or "bpb_other", **fields)
    return correct(
        lang,
        "Con bits por byte puedes comparar modelos con tokenizadores distintos, y con gzip, bz2 y xz.",
        "With bits per byte you can compare models with different tokenizers, and with gzip, bz2 and xz.",
    )


# ---- 12.interval_narrowing -----------------------------------------------------------------------

_WHOLE = 1 << compression.CODER_BITS

# (low, high, start, stop, total): the coder's first, whole interval; intervals that start past 0; the first and
# the last symbol; and a width near 2^32 times counts near 2^24, past 2^53, chosen where the exact quotient falls
# just short of an integer, so that `/` (rounded to a float) and `//` give different ends.
_NARROW_CASES = [
    (0, _WHOLE - 1, 3, 7, 10),
    (1_000_003, 3_000_000_017, 0, 5, 11),
    (2_147_483_000, 4_294_000_000, 9, 13, 13),
    (249_024_353, 4_107_933_480, 4_718_221, 14_154_663, 16_777_213),
    (7, _WHOLE - 5, 12_345_671, 12_345_672, 1 << 24),
    # width · start ≡ 1 (mod total), and width · stop ≡ 1: a product rounded to a float, even with `//` after it,
    # falls below the multiple of total it passes, and an end is off by one
    (475_037_531, 3_819_929_764, 9_000_001, 9_000_008, 16_777_213),
    (355_140_135, 3_584_687_025, 12_995_680, 13_000_001, 16_776_215),
]


def _narrow_mistakes(low: int, high: int, start: int, stop: int, total: int) -> list[tuple[str, Any]]:
    """What each typical narrowing gives on one case; two ways to make one mistake share its key."""
    width = high - low + 1
    new_low = low + width * start // total
    return [
        ("narrow_float", (int(low + width * start / total), int(low + width * stop / total) - 1)),
        ("narrow_float", (low + int(width * start / total), low + int(width * stop / total) - 1)),
        ("narrow_float", (low + float(width) * start // total, low + float(width) * stop // total - 1)),
        ("narrow_float", (int(low + float(width) * start // total), int(low + float(width) * stop // total - 1))),
        ("narrow_round", (low + round(width * start / total), low + round(width * stop / total) - 1)),
        ("narrow_no_low", (width * start // total, width * stop // total - 1)),
        ("narrow_width", (low + (width - 1) * start // total, low + (width - 1) * stop // total - 1)),
        ("narrow_high_end", (new_low, low + width * stop // total)),
        ("narrow_new_low", (new_low, new_low + width * stop // total - 1)),
        ("narrow_new_low", (new_low, new_low + (high - new_low + 1) * stop // total - 1)),
        ("narrow_swapped", (low + width * stop // total - 1, new_low)),
        ("narrow_start_stop", (low + width * stop // total, low + width * start // total - 1)),
        ("narrow_total", (low + total * start // total, low + total * stop // total - 1)),
        ("narrow_total", (low + high * start // total, low + high * stop // total - 1)),
    ]


def _pair(lang: str, got: Any) -> tuple[int, int] | tuple[float, float]:
    """The answer as a pair of numbers: integers, or floats the checker can name; anything else stops."""
    if isinstance(got, Tensor):
        got = got.tolist()
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise stop(HINTS(lang, "narrow_pair", got=type_name(got)))
    pair = []
    for x in got:
        if isinstance(x, Tensor) and x.numel() == 1:
            x = x.item()
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            raise stop(HINTS(lang, "narrow_pair", got=f"{type_name(got)} ({type_name(x)}, …)"))
        pair.append(int(x) if isinstance(x, numbers.Integral) else x)
    return tuple(pair)


def _has_float(pair: tuple) -> bool:
    """An end that is not an integer: exact past 2^53 only by luck."""
    return any(not isinstance(x, numbers.Integral) for x in pair)


def _round_trip(lang: str, narrow: Callable[..., Any]) -> str | None:
    """Compress a message with the package's encoder narrowing with ``narrow``, decode it with the package's
    decoder: None when it comes back, else why not. Every interval ``narrow`` gives is checked first (a wrong one
    could send the encoder's loop on for ever)."""

    def checked(*case: int) -> tuple[int, int]:  # (low, high, start, stop, total)
        want = compression.narrow(*case)
        with forbid(_NARROW_TOOLS, *_NARROW_WHY):
            got = _pair(lang, attempt(lang, narrow, *case))
        if got != want or _has_float(got):
            low, high, start, end, total = case
            raise stop(
                HINTS(lang, "narrow_other", low=low, high=high, start=start, stop=end, total=total, got=got, want=want)
            )
        return got

    class Encoder(compression.ArithmeticEncoder):
        pass

    Encoder.narrow = staticmethod(checked)
    rng = random.Random(12)
    counts = compression.frequencies(
        torch.softmax(torch.randn(300, 50, generator=torch.Generator().manual_seed(12)) * 3, -1)
    )
    symbols = [rng.randrange(50) if rng.random() < 0.3 else int(counts[i].argmax()) for i in range(300)]
    encoder = Encoder()
    for i, s in enumerate(symbols):
        start = int(counts[i, :s].sum())
        encoder.encode(start, start + int(counts[i, s]), int(counts[i].sum()))
    data = encoder.finish()
    back = compression.decode(data, len(symbols), counts)
    if back != symbols:
        first = next(i for i, (a, b) in enumerate(zip(back, symbols)) if a != b)
        return tr(
            lang, f"el símbolo {first} sale distinto.", f"symbol {first} comes back different."
        )  # pragma: no cover
    return None


_NARROW_TOOLS = (("minitransformer.compression.narrow", "compression.narrow"),)
_NARROW_WHY = (
    "escribe tú el estrechamiento: es lo que el ejercicio practica.",
    "write the narrowing yourself: it is what the exercise practises.",
)


@exercise("12.interval_narrowing")
def check_narrow(narrow: Callable[[int, int, int, int, int], tuple[int, int]], lang: str | None = None) -> Feedback:
    """Check ``narrow(low, high, start, stop, total)`` -> ``(new_low, new_high)``: the interval [low, high] narrowed
    to the share of a symbol that owns the counts [start, stop) of ``total``, in integers.

    Every case is run first; a mistake is named when it explains every case (floats are named as such). Then the
    proof: the package's encoder, narrowing with the student's function, compresses a message of 300 symbols,
    and the package's decoder must give it back.
    """
    right = [compression.narrow(*case) for case in _NARROW_CASES]  # before the student's code runs
    with watch() as left, forbid(_NARROW_TOOLS, *_NARROW_WHY):
        answers = [_pair(lang, attempt(lang, narrow, *case)) for case in _NARROW_CASES]
    if answers != right or any(_has_float(pair) for pair in answers):
        bank = by_key([_narrow_mistakes(*case) for case in _NARROW_CASES])
        key = diagnose(answers, bank, same=lambda a, b: tuple(a) == tuple(b))
        if key is None and any(_has_float(pair) for pair in answers):
            key = "narrow_float" if answers != right else "narrow_not_int"
        first = next(i for i, (got, want) in enumerate(zip(answers, right)) if got != want or _has_float(got))
        low, high, start, stop_, total = _NARROW_CASES[first]
        fields = {"low": low, "high": high, "start": start, "stop": stop_, "total": total}
        return HINTS(lang, key or "narrow_other", got=answers[first], want=right[first], **fields)
    if left.left(lang, HINTS) is not None:
        return left.left(lang, HINTS)
    why = _round_trip(lang, narrow)
    if why is not None:
        return HINTS(lang, "narrow_round_trip", why=why)
    return correct(
        lang,
        "El codificador del paquete, estrechando con tu función, comprimió 300 símbolos y su decodificador los "
        "recuperó: el mismo estrechamiento, entero a entero, en los dos lados.",
        "The package's encoder, narrowing with your function, compressed 300 symbols and its decoder gave them "
        "back: the same narrowing, integer for integer, on both sides.",
    )


# ---- 12.sample_with_cache ------------------------------------------------------------------------

_VOCAB = 48

# (prompt, n_new, temperature, top_p, seed, flat): temperatures below and above 1, top-p that removes tokens, a
# one-token prompt; and a flat model, whose top-p set holds many tokens, so that the token crossing top_p matters
# (with the sharp model the likeliest token alone passes top_p).
_SAMPLE_CASES = [
    ([5, 17, 3, 22], 8, 0.7, 0.9, 1, False),
    ([1, 2, 3, 4, 5, 6, 7], 10, 1.3, 0.8, 2, False),
    ([30], 6, 0.5, 0.95, 3, False),
    ([9, 9, 12, 40, 2], 12, 1.0, 0.6, 4, False),
    ([3, 8, 1], 12, 1.0, 0.5, 5, True),
    ([4, 11], 12, 2.0, 0.5, 6, True),  # a hot, flat case: top-p before the temperature keeps other tokens
]


def _tiny_model(flat: bool = False) -> ModernTransformer:
    """A tiny ModernTransformer from a fixed seed (the notebook's random state is left alone), its output scaled
    up so that its distributions are far from uniform and temperature and top-p change the draws; ``flat``: scaled
    up only a little, so that its distributions spread over many tokens."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(12)
        config = ModernConfig(vocab_size=_VOCAB, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=64)
        model = ModernTransformer(config)
    with torch.no_grad():
        model.lm_head.weight.mul_(2.0 if flat else 12.0)
    return model.eval()


def _top_p_below(logits: Tensor, p: float) -> Tensor:
    """The top-p mistake: keep the tokens whose running mass, from the likeliest down, stays ≤ p (the token that
    crosses p dropped), at least the likeliest."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    keep = sorted_logits.softmax(-1).cumsum(-1) <= p
    keep[..., 0] = True
    return logits.masked_fill(~keep.scatter(-1, order, keep), float("-inf"))


def _reference(model: ModernTransformer, prompt: list[int], n: int, temperature: float, top_p: float, seed: int):
    gen = torch.Generator().manual_seed(seed)
    out = generate(model, torch.tensor([prompt]), n, temperature=temperature, top_p=top_p, generator=gen)
    return out[0, len(prompt) :].tolist()


@torch.no_grad()
def _variant(
    model: ModernTransformer,
    prompt: list[int],
    n: int,
    temperature: float,
    top_p: float | None,
    seed: int,
    *,
    position: int = -1,
    greedy: bool = False,
    fresh: bool = False,
    top_p_first: bool = False,
    top_p_below: bool = False,
) -> list[int]:
    """What a sampling loop with one mistake draws (with the cache: without it, the same tokens)."""
    gen = torch.Generator().manual_seed(seed)
    cache, new, out = model.new_cache(), torch.tensor([prompt]), []
    for _ in range(n):
        logits = model(new, cache=cache)[:, position].float()  # (1, V)
        if greedy:
            nxt = logits.argmax(dim=-1)
        else:
            if top_p_first:
                probs = torch.softmax(top_p_filter(logits, top_p) / temperature, dim=-1)
            elif top_p_below:
                probs = torch.softmax(_top_p_below(logits / temperature, top_p), dim=-1)
            else:
                probs = next_token_probs(logits, temperature, None, top_p)
            nxt = torch.multinomial(probs, 1, generator=torch.Generator() if fresh else gen).squeeze(-1)
        out.append(int(nxt))
        new = nxt[:, None]
    return out


def _sample_mistakes(model: ModernTransformer, prompt: list[int], n: int, t: float, p: float, seed: int):
    """What each typical mistake draws on one case."""
    return [
        ("sample_greedy", _variant(model, prompt, n, t, p, seed, greedy=True)),
        ("sample_first_position", _variant(model, prompt, n, t, p, seed, position=0)),
        ("sample_no_temperature", _variant(model, prompt, n, 1.0, p, seed)),
        ("sample_temperature_times", _variant(model, prompt, n, 1 / t, p, seed)),
        ("sample_no_top_p", _variant(model, prompt, n, t, None, seed)),
        ("sample_top_p_first", _variant(model, prompt, n, t, p, seed, top_p_first=True)),
        ("sample_top_p_boundary", _variant(model, prompt, n, t, p, seed, top_p_below=True)),
        ("sample_generator", _variant(model, prompt, n, t, p, seed, fresh=True)),
    ]


def _ids(lang: str, got: Any, prompt: list[int], n: int) -> list[int]:
    """The answer as a list of ints; a wrong type or length stops the check with its hint."""
    if isinstance(got, Tensor):
        if got.dim() == 2 and got.size(0) == 1:
            got = got[0]
        if got.dim() != 1 or got.is_floating_point() or got.is_complex() or got.dtype == torch.bool:
            raise stop(HINTS(lang, "sample_ids", got=f"{type_name(got)} {tuple(got.shape)} {got.dtype}"))
        got = got.tolist()
    if not isinstance(got, (list, tuple)):
        raise stop(HINTS(lang, "sample_ids", got=type_name(got)))
    ids = []
    for item in got:
        if isinstance(item, Tensor) and item.numel() == 1 and not item.is_floating_point() and item.dtype != torch.bool:
            item = item.item()
        if isinstance(item, bool) or not isinstance(item, numbers.Integral):
            raise stop(HINTS(lang, "sample_ids", got=f"{type_name(got)} [{type_name(item)}, …]"))
        ids.append(int(item))
    if len(ids) == len(prompt) + n and ids[: len(prompt)] == prompt:
        raise stop(HINTS(lang, "sample_includes_prompt", n=n))
    if len(ids) != n:
        raise stop(HINTS(lang, "sample_length", got=len(ids), n=n))
    return ids


def _check_calls(lang: str, calls: list[tuple[Any, Any, int | None]], prompt: list[int], ids: list[int]) -> None:
    """The model's calls, (tokens, cache, its length before the call), show the cache used as it should be:
    the whole prompt first into an empty cache, then only the last sampled token, always into that cache."""
    if not calls:
        raise stop(HINTS(lang, "sample_not_called"))
    if any(cache is None for _, cache, _ in calls):
        raise stop(HINTS(lang, "sample_no_cache"))
    if len({id(cache) for _, cache, _ in calls}) > 1:
        raise stop(HINTS(lang, "sample_cache_each_step"))
    first = calls[0][0]
    width = first.size(-1) if isinstance(first, Tensor) and first.dim() > 0 else 0
    if width != len(prompt):
        raise stop(HINTS(lang, "sample_prompt_once", got=width, T=len(prompt)))
    for tokens, _, _ in calls[1:]:
        if not isinstance(tokens, Tensor) or tokens.numel() != 1:
            size = tokens.size(-1) if isinstance(tokens, Tensor) and tokens.dim() else "?"
            raise stop(HINTS(lang, "sample_refeed", got=size))
    fed = [int(tokens.reshape(-1)[0]) for tokens, _, _ in calls[1:]]
    if fed and fed[: len(ids)] != ids[: len(fed)]:
        if all(f == prompt[-1] for f in fed):
            raise stop(HINTS(lang, "sample_not_appended"))
        step = next(i for i, (f, s) in enumerate(zip(fed, ids)) if f != s)
        raise stop(HINTS(lang, "sample_fed_other", step=step + 2, fed=fed[step], sampled=ids[step]))


_FORWARD = inspect.signature(ModernTransformer.forward)


def _recording(model: ModernTransformer, calls: list[tuple[Any, Any, int | None]]) -> Callable[..., Any]:
    """The model's own forward, recording each call's (tokens, cache, the cache's length before the call) in
    ``calls``: set on the model itself, so that a call through ``model(...)`` and one through ``model.forward(...)``
    are both seen."""
    forward = type(model).forward.__get__(model)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        try:
            given = _FORWARD.bind(model, *args, **kwargs).arguments
        except TypeError:  # the model's own call raises it, with Python's words
            given = {}
        tokens, cache = given.get("tokens"), given.get("cache")
        tokens = tokens.detach().clone() if isinstance(tokens, Tensor) else tokens
        calls.append((tokens, cache, len(cache) if cache is not None else None))
        return forward(*args, **kwargs)

    return recorded


# generate (and the checker's own loop) are wrapped by torch.no_grad: their inner functions are switched off, so
# every reference to them is.
_SAMPLE_TOOLS = (
    ("minitransformer.generation.generate.__wrapped__", "generate"),
    ("minitransformer.exercises.compression._variant.__wrapped__", "_variant"),
)
_SAMPLE_WHY = (
    "escribe tú el bucle de generación; `sample_next_token` o `next_token_probs` sí valen para cada sorteo.",
    "write the generation loop yourself; `sample_next_token` or `next_token_probs` are fine for each draw.",
)


@exercise("12.sample_with_cache")
def check_sample(sample: Callable[..., list[int]], lang: str | None = None) -> Feedback:
    """Check ``sample(model, prompt_ids, n_new, temperature, top_p, generator)`` -> the ``n_new`` new ids (a
    list of ints; a 1-D or (1, n_new) integer tensor is taken too), the same tokens as
    ``generate(model, torch.tensor([prompt_ids]), n_new, temperature=..., top_p=..., generator=...)`` from the
    same generator state, drawn with the cache: the prompt once, then one new token per call.

    The model's forward, replaced on the model itself while the student's function runs, records each call (through
    ``model(...)`` or ``model.forward(...)``); the model and PyTorch's global switches must be left as they were
    (:func:`~._core.watch`). The cases run in order, and the first one the answer gets wrong decides.
    """
    # the flat model handed over in train mode (a model in the middle of training): a mode left changed shows
    models = {flat: _tiny_model(flat).train(flat) for flat in (False, True)}
    for prompt, n, t, p, seed, flat in _SAMPLE_CASES:
        model = models[flat]
        want = _reference(model, prompt, n, t, p, seed)
        calls: list[tuple[Any, Any, int | None]] = []
        generator = torch.Generator().manual_seed(seed)
        before = generator.get_state().clone()
        prompt_ids = list(prompt)  # the caller's list: it must be left as it was
        model.forward = _recording(model, calls)  # `model(...)` and `model.forward(...)` both go through it
        try:
            with watch(model) as left, forbid(_SAMPLE_TOOLS, *_SAMPLE_WHY):
                got = attempt(lang, sample, model, prompt_ids, n, t, p, generator)
        finally:
            del model.forward
        if prompt_ids != prompt:
            return HINTS(lang, "sample_prompt_changed")
        ids = _ids(lang, got, prompt, n)
        _check_calls(lang, calls, prompt, ids)
        if ids == want:
            if left.left(lang, HINTS) is not None:
                return left.left(lang, HINTS)
            continue
        key = diagnose(  # the mistakes drawn by a model the student's code never touched
            [ids],
            by_key([_sample_mistakes(_tiny_model(flat), prompt, n, t, p, seed)]),
            same=lambda a, b: a == b,
        )
        if key is None and torch.equal(before, generator.get_state()):
            key = "sample_generator"
        if key is None and left.left(lang, HINTS) is not None:
            return left.left(lang, HINTS)
        return HINTS(lang, key or "sample_other", prompt=prompt, temperature=t, top_p=p, got=ids, want=want)
    return correct(
        lang,
        "Los mismos tokens que `generate` con el mismo generador, con un solo token por paso tras el prompt.",
        "The same tokens as `generate` with the same generator, with one token per step after the prompt.",
    )
