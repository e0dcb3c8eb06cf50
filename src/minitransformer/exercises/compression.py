"""Checkers for notebook 12's exercises: the interval narrowing of an arithmetic coder, the decoder's step (where
the value falls, which symbol, the narrowing), and sampling with the key-value cache.

Each checker compares the student's answer with the package's own (computed before the student's code
runs, the package's own function switched off while it runs), on cases where the usual mistakes give different
answers (products past 2^53 where a float is not exact, values at the start and the end of a symbol's share,
symbols with no count, temperatures and top-p values that change the draws), and names the mistake without writing
the code. The narrowing is then proved by a round trip: the package's encoder narrows with the student's function
and its decoder must give the message back. A student's exception becomes a "not yet" that shows the failing line.
``12.sample_with_cache`` also watches every call of the model (its forward, replaced on the model while the
student's code runs): the prompt must go in once, then only the new token each step, always into the same cache;
and the model must be left as it was (its mode, dtype, ``requires_grad``), as must PyTorch's global switches. The
worked solutions are in the answer key :mod:`.solutions.nb12`.
"""

from __future__ import annotations

import inspect
import numbers
import random
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from .. import arithmetic_coder
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

__all__ = ["HINTS", "check_narrow", "check_decoder_step", "check_sample"]

# Every hint these checkers give, (Spanish, English), by key.
HINTS = Hints(
    {
        **STATE_HINTS,
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
        # ---- 12.decoder_step
        "dec_triple": (
            "devuelve un trío de enteros, `(símbolo, nuevo_low, nuevo_high)`, no {got}.",
            "return a triple of integers, `(symbol, new_low, new_high)`, not {got}.",
        ),
        "dec_target": (
            "al principio de la parte de un símbolo eliges el anterior: tu `target` se queda uno corto. ¿Lo "
            "calculas como (value − low) · total // anchura? `value` es el último de los `value − low + 1` primeros "
            "enteros del intervalo, que en cuentas son (value − low + 1) · total / anchura: resta 1 antes de dividir "
            "con `//`, y caes en la cuenta que contiene a `value`.",
            "at the start of a symbol's share you pick the one before it: your `target` is one short. Do you compute "
            "it as (value − low) · total // width? `value` is the last of the first `value − low + 1` integers of "
            "the interval, which in counts are (value − low + 1) · total / width: take 1 away before dividing with "
            "`//`, and you land on the count that holds `value`.",
        ),
        "dec_boundary": (
            "cuando `target` cae justo en el final de la parte de un símbolo (target = stop) eliges ese símbolo, y ese "
            "punto ya es del siguiente: un símbolo tiene las cuentas [start, stop), sin stop. Compara "
            "`target < stop`, no `<=` (con `<=` llegas a elegir símbolos de cuenta 0, que no tienen parte).",
            "when `target` falls exactly at the end of a symbol's share (target = stop) you pick that symbol, and that "
            "point is already the next one's: a symbol owns the counts [start, stop), stop excluded. Compare "
            "`target < stop`, not `<=` (with `<=` you even pick symbols whose count is 0, which have no share).",
        ),
        "dec_width": (
            "la anchura del intervalo es `high - low + 1`: los dos extremos están incluidos (con `high - low` "
            "pierdes un entero, y al final de la parte de un símbolo `target` ya cae en el siguiente).",
            "the interval's width is `high - low + 1`: both ends are included (with `high - low` you lose one "
            "integer, and at the end of a symbol's share `target` already falls in the next one).",
        ),
        "dec_no_low": (
            "olvidas restar `low`: `value` se mide desde el principio del intervalo, `value - low`, no desde 0 "
            "(con low = {low}).",
            "you forget to subtract `low`: `value` is measured from the start of the interval, `value - low`, not "
            "from 0 (with low = {low}).",
        ),
        "dec_no_scale": (
            "comparas `value - low` con las cuentas tal cual: `value` vive en el intervalo de {width} enteros y las "
            "cuentas suman {total}. Pásalo a cuentas: `target` = ((value − low + 1) · total − 1) // anchura.",
            "you compare `value - low` with the counts as it is: `value` lives in the interval of {width} integers "
            "and the counts add up to {total}. Bring it to counts: `target` = ((value − low + 1) · total − 1) // "
            "width.",
        ),
        "dec_zero_count": (
            "eliges el símbolo {symbol}, cuya cuenta es 0: no tiene parte del intervalo y el codificador nunca lo "
            "escribió. El símbolo es el que cumple start ≤ target < stop, y con cuenta 0 start = stop.",
            "you pick symbol {symbol}, whose count is 0: it has no share of the interval and the encoder never wrote "
            "it. The symbol is the one with start ≤ target < stop, and with a count of 0, start = stop.",
        ),
        "dec_narrow_neighbour": (
            "el símbolo es el bueno, pero estrechas con las cuentas de su vecino: estrecha con las del símbolo que "
            "devuelves, start = suma de las cuentas anteriores, stop = start + su cuenta.",
            "the symbol is right, but you narrow with its neighbour's counts: narrow with those of the symbol you "
            "return, start = the sum of the counts before it, stop = start + its count.",
        ),
        "dec_narrow_prefix": (
            "el símbolo es el bueno, pero tu `start` ya incluye su propia cuenta: start es la suma de las cuentas "
            "*anteriores* al símbolo, `sum(counts[:symbol])`, y stop = start + `counts[symbol]`.",
            "the symbol is right, but your `start` already includes its own count: start is the sum of the counts "
            "*before* the symbol, `sum(counts[:symbol])`, and stop = start + `counts[symbol]`.",
        ),
        "dec_narrow": (
            "el símbolo es el bueno en todos los casos, pero el nuevo intervalo no (con low = {low}, high = {high} "
            "devuelves {got}, y es {want}): estrecha como en el ejercicio 1, con las cuentas [start, stop) del "
            "símbolo.",
            "the symbol is right in every case, but the new interval is not (with low = {low}, high = {high} you "
            "return {got}, and it is {want}): narrow as in exercise 1, with the symbol's counts [start, stop).",
        ),
        "dec_other": (
            "con low = {low}, high = {high}, value = {value} y las cuentas {counts} devuelves {got}, y es {want}. "
            "Tres pasos: dónde cae `value` en cuentas (`target`), qué símbolo tiene esas cuentas, y el intervalo "
            "estrechado a su parte.",
            "with low = {low}, high = {high}, value = {value} and the counts {counts} you return {got}, and it is "
            "{want}. Three steps: where `value` falls in counts (`target`), which symbol owns those counts, and the "
            "interval narrowed to its share.",
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


# ---- 12.interval_narrowing -----------------------------------------------------------------------

_WHOLE = 1 << arithmetic_coder.CODER_BITS

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
        want = arithmetic_coder.narrow(*case)
        with watch() as left, forbid(_NARROW_TOOLS, *_NARROW_WHY):
            got = _pair(lang, attempt(lang, narrow, *case))
        if left.left(lang, HINTS) is not None:
            raise stop(left.left(lang, HINTS))
        if got != want or _has_float(got):
            low, high, start, end, total = case
            raise stop(
                HINTS(lang, "narrow_other", low=low, high=high, start=start, stop=end, total=total, got=got, want=want)
            )
        return got

    class Encoder(arithmetic_coder.ArithmeticEncoder):
        pass

    Encoder.narrow = staticmethod(checked)
    rng = random.Random(12)
    counts = arithmetic_coder.frequencies(
        torch.softmax(torch.randn(300, 50, generator=torch.Generator().manual_seed(12)) * 3, -1)
    )
    symbols = [rng.randrange(50) if rng.random() < 0.3 else int(counts[i].argmax()) for i in range(300)]
    encoder = Encoder()
    for i, s in enumerate(symbols):
        start = int(counts[i, :s].sum())
        encoder.encode(start, start + int(counts[i, s]), int(counts[i].sum()))
    data = encoder.finish()
    back = arithmetic_coder.decode(data, len(symbols), counts)
    if back != symbols:
        first = next(i for i, (a, b) in enumerate(zip(back, symbols)) if a != b)
        return tr(
            lang, f"el símbolo {first} sale distinto.", f"symbol {first} comes back different."
        )  # pragma: no cover
    return None


_NARROW_TOOLS = (("minitransformer.arithmetic_coder.narrow", "arithmetic_coder.narrow"),)
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
    right = [arithmetic_coder.narrow(*case) for case in _NARROW_CASES]  # before the student's code runs
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


# ---- 12.decoder_step -----------------------------------------------------------------------------


def _decoded(low: int, high: int, value: int, counts: list[int]) -> tuple[int, int, int]:
    """The package's decoder, one step: ``ArithmeticDecoder.target``, the symbol whose counts hold it (as
    ``arithmetic_coder.decode`` finds it) and ``narrow``."""
    decoder = arithmetic_coder.ArithmeticDecoder.__new__(arithmetic_coder.ArithmeticDecoder)  # its state, not its bits
    decoder.low, decoder.high, decoder.value = low, high, value
    cumulative = torch.tensor(counts).cumsum(0)
    total = int(cumulative[-1])
    symbol = int(torch.searchsorted(cumulative, decoder.target(total), right=True))
    stop = int(cumulative[symbol])
    return (symbol, *arithmetic_coder.narrow(low, high, stop - counts[symbol], stop, total))


def _dec_cases() -> list[tuple[int, int, int, list[int]]]:
    """(low, high, value, counts): the whole interval and narrow ones (just over a quarter of 2^32), the value at the
    start of a symbol's share, at its end, inside it, at high (the last symbol); zero counts before, between and after
    the symbol (a symbol with no share); a row of the notebook's size (V = 50, total 2^24)."""
    W = _WHOLE
    quarter = W // 4
    row = arithmetic_coder.frequencies(
        torch.softmax(torch.randn(50, generator=torch.Generator().manual_seed(12)) * 3, -1)
    )
    big = row.tolist()
    specs = [
        (0, W - 1, [6, 3, 1], "start", 1),  # section 6's toy model
        (1_000_003, 1_000_003 + quarter + 12_345, [5, 0, 7, 2, 0, 9], "start", 2),  # a zero count just before
        (2_000_000_000, 2_000_000_000 + quarter + 777, [3, 8, 0, 0, 4, 1], "end", 1),  # zero counts just after
        (123_456_789, 3_210_987_654, big, "inside", int(row.argmax())),
        (0, W - 1, [0, 0, 4, 4, 0], "start", 2),  # value = low, the first symbols empty
        (7_777_777, 7_777_777 + 2 * quarter + 3, [1, 2, 3, 4, 5, 6, 0], "high", 5),  # value = high: the last symbol
        (3 * quarter - 5, W - 2, [2, 9, 1, 1, 7], "end", 2),  # a one-count symbol, at the end of its share
        (400_000_001, 400_000_001 + quarter + 1, big, "start", 7),  # the narrowest interval, a big total
    ]
    cases = []
    for low, high, counts, where, s in specs:
        start = sum(counts[:s])
        first, last = arithmetic_coder.narrow(low, high, start, start + counts[s], sum(counts))
        value = {"start": first, "end": last, "inside": (first + last) // 2, "high": high}[where]
        cases.append((low, high, value, counts))
    return cases


_DEC_CASES = _dec_cases()


def _dec_by_hand(
    low: int,
    high: int,
    value: int,
    counts: list[int],
    *,
    target_of: Callable[[int, int, int, int], int] | None = None,
    at_or_before: bool = False,
    width_less_one: bool = False,
    narrow_with: int = 0,
    prefix: bool = False,
) -> tuple[int, int, int]:
    """A decoder's step as a student would write it, with one thing changed: how the target is computed, ``<=``
    at a boundary, a width of ``high - low``, narrowing with a neighbour's counts or a start that includes the
    symbol's own count. Without changes: the package's step."""
    total = sum(counts)
    width = high - low + (0 if width_less_one else 1)
    target = ((value - low + 1) * total - 1) // width if target_of is None else target_of(low, value, width, total)
    cum, symbol = 0, len(counts) - 1  # a loop that finds nothing ends on the last symbol
    for s, c in enumerate(counts):
        if (target <= cum + c) if at_or_before else (target < cum + c):
            symbol = s
            break
        cum += c
    s = min(max(symbol + narrow_with, 0), len(counts) - 1)
    start = sum(counts[: s + 1]) if prefix else sum(counts[:s])
    stop = start + counts[s]
    return (symbol, low + width * start // total, low + width * stop // total - 1)


def _dec_mistakes(low: int, high: int, value: int, counts: list[int]) -> list[tuple[str, Any]]:
    """What each typical mistake gives on one case; two ways to make one mistake share its key."""
    case = (low, high, value, counts)
    return [
        ("dec_target", _dec_by_hand(*case, target_of=lambda lo, v, w, t: (v - lo) * t // w)),
        ("dec_boundary", _dec_by_hand(*case, at_or_before=True)),
        ("dec_width", _dec_by_hand(*case, width_less_one=True)),
        ("dec_no_low", _dec_by_hand(*case, target_of=lambda lo, v, w, t: ((v + 1) * t - 1) // w)),
        ("dec_no_scale", _dec_by_hand(*case, target_of=lambda lo, v, w, t: v - lo)),
        ("dec_narrow_neighbour", _dec_by_hand(*case, narrow_with=1)),
        ("dec_narrow_neighbour", _dec_by_hand(*case, narrow_with=-1)),
        ("dec_narrow_prefix", _dec_by_hand(*case, prefix=True)),
    ]


def _triple(lang: str, got: Any) -> tuple[int, ...]:
    """The answer as (symbol, new_low, new_high), ints; anything else stops the check with its hint."""
    if isinstance(got, Tensor):
        got = got.tolist()
    if not isinstance(got, (tuple, list)) or len(got) != 3:
        raise stop(HINTS(lang, "dec_triple", got=type_name(got)))
    out = []
    for x in got:
        if isinstance(x, Tensor) and x.numel() == 1 and not x.is_floating_point() and x.dtype != torch.bool:
            x = x.item()
        if isinstance(x, bool) or not isinstance(x, numbers.Integral):
            raise stop(HINTS(lang, "dec_triple", got=f"{type_name(got)} ({type_name(x)}, …)"))
        out.append(int(x))
    return tuple(out)


_DEC_TOOLS = (
    ("minitransformer.arithmetic_coder.ArithmeticDecoder.target", "ArithmeticDecoder.target"),
    ("minitransformer.arithmetic_coder.ArithmeticDecoder.decode", "ArithmeticDecoder.decode"),
    ("minitransformer.arithmetic_coder.decode", "arithmetic_coder.decode"),
    ("minitransformer.exercises.compression._decoded", "_decoded"),
    ("minitransformer.exercises.compression._dec_by_hand", "_dec_by_hand"),
)
_DEC_WHY = (
    "escribe tú el paso del decodificador (dónde cae `value`, qué símbolo, el estrechamiento); `narrow` o tu "
    "`narrow_interval` del ejercicio 1 sí valen para estrechar.",
    "write the decoder's step yourself (where `value` falls, which symbol, the narrowing); `narrow` or your "
    "`narrow_interval` from exercise 1 are fine for narrowing.",
)


@exercise("12.decoder_step")
def check_decoder_step(decoder_step: Callable[..., Any], lang: str | None = None) -> Feedback:
    """Check ``decoder_step(low, high, value, counts)`` -> ``(symbol, new_low, new_high)``: the symbol whose share of
    [low, high] holds ``value`` (the one whose counts [start, stop) hold the target, in counts out of the total)
    and the interval narrowed to that share, as the package's ``ArithmeticDecoder`` and ``narrow`` give them
    (its ``target`` and ``decode`` switched off while the student's function runs). Every case is run first; a
    mistake is named when it explains every case."""
    right = [_decoded(*case) for case in _DEC_CASES]  # before the student's code runs
    answers = []
    with watch() as left, forbid(_DEC_TOOLS, *_DEC_WHY):
        for low, high, value, counts in _DEC_CASES:
            answers.append(_triple(lang, attempt(lang, decoder_step, low, high, value, list(counts))))
    if answers == right:
        done = correct(
            lang,
            "Es lo que hace el decodificador del paquete con cada símbolo: con el mismo estrechamiento en los dos "
            "lados, sigue al codificador entero a entero.",
            "It is what the package's decoder does with each symbol: with the same narrowing on both sides, it "
            "follows the encoder integer for integer.",
        )
        return left.left(lang, HINTS, done)
    key = diagnose(answers, by_key([_dec_mistakes(*case) for case in _DEC_CASES]), same=lambda a, b: a == b)
    first = next(i for i, (got, want) in enumerate(zip(answers, right)) if got != want)
    low, high, value, counts = _DEC_CASES[first]
    shown = counts if len(counts) <= 8 else f"[{', '.join(map(str, counts[:6]))}, … ({len(counts)})]"
    fields = {"low": low, "high": high, "value": value, "counts": shown, "got": answers[first], "want": right[first]}
    fields |= {"width": high - low + 1, "total": sum(counts)}
    if key is None:
        empty = next(
            ((a[0], c) for a, (*_, c) in zip(answers, _DEC_CASES) if 0 <= a[0] < len(c) and c[a[0]] == 0), None
        )
        if empty is not None:
            return HINTS(lang, "dec_zero_count", symbol=empty[0])
        if all(a[0] == r[0] for a, r in zip(answers, right)):
            key = "dec_narrow"
    return HINTS(lang, key or "dec_other", **fields)


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
