"""Checkers for the exercises of notebook 07 (training on toy data).

Each checker runs every case first and names a mistake only when it explains all of them:
a learning rate with one branch matches the right one on part of the schedule, a smoothing
with a hard-coded ε or V matches it for one (ε, V) pair.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Integral
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ..i18n import tr
from ..train import noam_lr
from ._core import (
    Feedback,
    Hints,
    attempt,
    close,
    correct,
    diagnose,
    dtype_name,
    exercise,
    not_a_tensor,
    num,
    stop,
    type_name,
)

__all__ = ["HINTS", "check_noam_lr", "check_shift_targets", "check_smoothed_targets"]

HINTS = Hints(
    {
        # Noam's learning rate
        "noam_not_a_number": (
            "tu función devuelve {got}; debe devolver un número.",
            "your function returns {got}; it must return a number.",
        ),
        "noam_no_d_model": (
            "falta el factor d_model^-0,5 delante del mínimo.",
            "the factor d_model^-0.5 in front of the minimum is missing.",
        ),
        "noam_decay_only": (
            "solo tienes la rama que decrece (step^-0,5): falta el calentamiento, en el que la tasa sube en línea "
            "recta hasta step = warmup.",
            "you only have the decaying branch (step^-0.5): the warm-up is missing, during which the rate rises in a "
            "straight line up to step = warmup.",
        ),
        "noam_warmup_only": (
            "solo tienes la rama del calentamiento (step · warmup^-1,5), que sube sin parar: después de warmup la "
            "tasa debe bajar como step^-0,5.",
            "you only have the warm-up branch (step · warmup^-1.5), which rises for ever: after warmup the rate must "
            "fall as step^-0.5.",
        ),
        "noam_larger_branch": (
            "tomas la mayor de las dos ramas; con la menor, la tasa sube durante el calentamiento y luego baja.",
            "you take the larger of the two branches; with the smaller one the rate rises during warm-up, then falls.",
        ),
        "noam_warmup_power": (
            "en la rama de calentamiento el exponente de warmup es -1,5, no -0,5.",
            "in the warm-up branch the exponent of warmup is -1.5, not -0.5.",
        ),
        "noam_fixed_d_model": (
            "no usas el argumento `d_model` (¿escribiste 512 a mano?): con otro d_model tu tasa no cambia.",
            "you do not use the `d_model` argument (did you write 512 by hand?): with another d_model your rate does "
            "not change.",
        ),
        "noam_fixed_warmup": (
            "no usas el argumento `warmup` (¿escribiste 4000 a mano?): con otro warmup tu tasa no cambia.",
            "you do not use the `warmup` argument (did you write 4000 by hand?): with another warmup your rate does "
            "not change.",
        ),
        "noam_d_model_power": (
            "el factor de d_model es d_model^-0,5 (se divide), no d_model^0,5.",
            "the d_model factor is d_model^-0.5 (a division), not d_model^0.5.",
        ),
        "noam_wrong": (
            "para step={step}, d_model={d_model}, warmup={warmup} se esperaba {want} y devuelves {got}.",
            "for step={step}, d_model={d_model}, warmup={warmup} the expected value is {want}, you return {got}.",
        ),
        # shifted targets
        "targets_modifies": (
            "tu función modifica la lista `ids` (¿`insert`, `append`?): construye listas "
            "nuevas y deja `ids` como estaba.",
            "your function modifies the list `ids` (`insert`, `append`?): build new lists and leave `ids` as it was.",
        ),
        "targets_not_a_pair": (
            "devuelve una pareja (tgt_in, tgt_out) de listas.",
            "return a pair (tgt_in, tgt_out) of lists.",
        ),
        "targets_tensor": (
            "`{which}` es un tensor; devuelve listas de enteros, como la lista `ids` que recibes (los "
            "tensores del lote se forman después, al rellenar).",
            "`{which}` is a tensor; return lists of integers, like the list `ids` you get (the batch's tensors "
            "are built later, when padding).",
        ),
        "targets_odd_id": (
            "`{which}` debe ser una lista de ids enteros, pero contiene {odd} ({kind}).",
            "`{which}` must be a list of integer ids, but it holds {odd} ({kind}).",
        ),
        "targets_not_a_list": (
            "`{which}` debe ser una lista de ids enteros, no {got}.{extra}",
            "`{which}` must be a list of integer ids, not {got}.{extra}",
        ),
        "targets_swapped": (
            "están al revés: la entrada empieza con <bos> y la salida termina con <eos>.",
            "they are swapped: the input starts with <bos> and the output ends with <eos>.",
        ),
        "targets_equal": (
            "entrada y salida son iguales: el decodificador copiaría su entrada. "
            "La salida va desplazada una posición respecto a la entrada.",
            "input and output are equal: the decoder would copy its input. "
            "The output is shifted by one position with respect to the input.",
        ),
        "targets_both_special": (
            "cada secuencia lleva un solo token especial: <bos> en la entrada, <eos> en la salida.",
            "each sequence carries one special token: <bos> in the input, <eos> in the output.",
        ),
        "targets_lengths": (
            "la entrada y la salida deben tener la misma longitud (tienes {n_in} y "
            "{n_out}): la posición t de la entrada predice la posición t de la salida.",
            "input and output must have the same length (yours: {n_in} and {n_out}): "
            "position t of the input predicts position t of the output.",
        ),
        "targets_fixed_ids": (
            "usa los argumentos `bos_id` y `eos_id` (aquí {bos} y {eos}), no números fijos.",
            "use the arguments `bos_id` and `eos_id` (here {bos} and {eos}), not fixed numbers.",
        ),
        "targets_wrong": (
            "con ids={ids}, bos_id={bos}, eos_id={eos} devuelves ({tgt_in}, {tgt_out}): revisa "
            "dónde va cada token especial.",
            "with ids={ids}, bos_id={bos}, eos_id={eos} you return ({tgt_in}, {tgt_out}): check where "
            "each special token goes.",
        ),
        # smoothed targets
        "smooth_shape": (
            "la forma debe ser (N, V) = {want}; tienes {got}{why}.",
            "the shape must be (N, V) = {want}; yours is {got}{why}.",
        ),
        "smooth_not_float": (
            "devuelve probabilidades (decimales), no {dtype}.",
            "return probabilities (floats), not {dtype}.",
        ),
        "smooth_fixed_eps": (
            "no usas el argumento `eps`: con otro ε tu resultado no cambia (¿escribiste 0,1 a mano?).",
            "you do not use the `eps` argument: with another ε your result does not change (did you write 0.1 by hand?).",
        ),
        "smooth_fixed_vocab": (
            "el reparto de ε usa un tamaño de vocabulario fijo (¿5?): usa el argumento `vocab_size`.",
            "the share of ε uses a fixed vocabulary size (5?): use the `vocab_size` argument.",
        ),
        "smooth_not_shared": (
            "cada fila suma 1 − ε: quitas ε a la clase correcta pero no lo repartes. Ese ε se reparte a partes "
            "iguales entre todas las clases del vocabulario.",
            "each row sums to 1 − ε: you take ε away from the right class but do not share it out. That ε is shared "
            "equally among all the classes of the vocabulary.",
        ),
        "smooth_one_hot_kept": (
            "cada fila suma 1 + ε: repartes ε, pero la clase correcta sigue teniendo 1; a la distribución one-hot se "
            "le quita ε antes de repartirlo.",
            "each row sums to 1 + ε: you share ε out, but the right class still has 1; the one-hot distribution gives "
            "up ε before it is shared out.",
        ),
        "smooth_wrong_classes": (
            "repartes ε entre las V − 1 clases incorrectas; PyTorch lo reparte entre las V clases (también la correcta).",
            "you spread ε over the V − 1 wrong classes; PyTorch spreads it over all V classes (the right one too).",
        ),
        "smooth_one_hot": (
            "esto es la distribución one-hot sin suavizar: falta mezclarla con la uniforme.",
            "this is the unsmoothed one-hot distribution: it must be mixed with the uniform one.",
        ),
        "smooth_not_normalised": (
            "cada fila debe sumar 1: es una distribución sobre el vocabulario.",
            "each row must sum to 1: it is a distribution over the vocabulary.",
        ),
        "smooth_wrong": (
            "las filas suman 1 pero los valores no coinciden: revisa cuánto recibe la clase correcta "
            "y cuánto cada una de las demás.",
            "the rows sum to 1 but the values do not match: check how much the right class gets and how "
            "much each of the others.",
        ),
    }
)


# ---- 07.noam_lr ----------------------------------------------------------------------------------


_NOAM_CASES = [
    (1, 512, 4000),
    (100, 512, 4000),
    (4000, 512, 4000),
    (4001, 512, 4000),
    (20000, 512, 4000),
    (50, 64, 200),
    (200, 64, 200),
    (1000, 64, 200),
]

# Typical mistakes, each a formula of (step, d_model, warmup), by its hint's key.
_NOAM_MISTAKES: dict[str, Callable[[int, int, int], float]] = {
    "noam_no_d_model": lambda s, d, w: min(s**-0.5, s * w**-1.5),
    "noam_decay_only": lambda s, d, w: d**-0.5 * s**-0.5,
    "noam_warmup_only": lambda s, d, w: d**-0.5 * s * w**-1.5,
    "noam_larger_branch": lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5),
    "noam_warmup_power": lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5),
    "noam_fixed_d_model": lambda s, d, w: 512**-0.5 * min(s**-0.5, s * w**-1.5),
    "noam_fixed_warmup": lambda s, d, w: d**-0.5 * min(s**-0.5, s * 4000**-1.5),
    "noam_d_model_power": lambda s, d, w: d**0.5 * min(s**-0.5, s * w**-1.5),
}


def _number(lang: str, got: Any) -> float:
    try:
        if isinstance(got, (str, bytes, bool)):
            raise TypeError
        return float(got)
    except (TypeError, ValueError, RuntimeError, OverflowError):
        raise stop(HINTS(lang, "noam_not_a_number", got=type_name(got))) from None


@exercise("07.noam_lr")
def check_noam_lr(fn: Callable[[int, int, int], float], lang: str | None = None) -> Feedback:
    """``fn(step, d_model, warmup)`` must return the paper's learning rate
    d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)."""
    values = [_number(lang, attempt(lang, fn, *case)) for case in _NOAM_CASES]

    def same(got: float, want: float) -> bool:
        return math.isfinite(got) and math.isclose(got, want, rel_tol=1e-6)

    if all(same(v, noam_lr(*case)) for v, case in zip(values, _NOAM_CASES)):
        return correct(lang, "El pico está exactamente en step = warmup.", "The peak is exactly at step = warmup.")
    mistakes = {key: [formula(*case) for case in _NOAM_CASES] for key, formula in _NOAM_MISTAKES.items()}
    key = diagnose(values, mistakes, same=same)
    if key is not None:
        return HINTS(lang, key)
    (step, d_model, warmup), got = next((c, v) for c, v in zip(_NOAM_CASES, values) if not same(v, noam_lr(*c)))
    want = noam_lr(step, d_model, warmup)
    shown = {"want": num(lang, want, 6), "got": num(lang, got, 6)}
    return HINTS(lang, "noam_wrong", step=step, d_model=d_model, warmup=warmup, **shown)


# ---- 07.shift_targets ----------------------------------------------------------------------------


_TARGET_CASES = [([7, 8, 9], 1, 2), ([5], 1, 2), ([4, 4, 6, 10], 3, 9)]


def _ids(lang: str, x: Any, which: str) -> list[int]:
    """One of the student's two sequences as a list of ints; anything else stops the check."""
    if isinstance(x, Tensor):
        raise stop(HINTS(lang, "targets_tensor", which=which))
    if not isinstance(x, (list, tuple)) or not all(isinstance(i, Integral) and not isinstance(i, bool) for i in x):
        extra = (
            tr(
                lang,
                " `list.insert` y `list.append` modifican la lista y devuelven `None`.",
                " `list.insert` and `list.append` change the list in place and return `None`.",
            )
            if x is None
            else ""
        )
        if isinstance(x, (list, tuple)):
            odd = next(i for i in x if not isinstance(i, Integral) or isinstance(i, bool))
            raise stop(HINTS(lang, "targets_odd_id", which=which, odd=repr(odd), kind=type_name(odd)))
        raise stop(HINTS(lang, "targets_not_a_list", which=which, got=type_name(x), extra=extra))
    return [int(i) for i in x]


@exercise("07.shift_targets")
def check_shift_targets(fn: Callable[[list[int], int, int], Any], lang: str | None = None) -> Feedback:
    """``fn(ids, bos_id, eos_id)`` must return two lists ``(tgt_in, tgt_out)``:
    ``[bos] + ids`` (the decoder's input) and ``ids + [eos]`` (what it must predict)."""
    for ids, bos, eos in _TARGET_CASES:
        given = list(ids)
        got = attempt(lang, fn, given, bos, eos)
        if given != ids:
            return HINTS(lang, "targets_modifies")
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            return HINTS(lang, "targets_not_a_pair")
        tgt_in, tgt_out = _ids(lang, got[0], "tgt_in"), _ids(lang, got[1], "tgt_out")
        want_in, want_out = [bos] + ids, ids + [eos]
        if (tgt_in, tgt_out) == (want_in, want_out):
            continue
        if (tgt_in, tgt_out) == (want_out, want_in):
            return HINTS(lang, "targets_swapped")
        if tgt_in == tgt_out:
            return HINTS(lang, "targets_equal")
        if tgt_in == [bos] + ids + [eos] or tgt_out == [bos] + ids + [eos]:
            return HINTS(lang, "targets_both_special")
        if len(tgt_in) != len(tgt_out):
            return HINTS(lang, "targets_lengths", n_in=len(tgt_in), n_out=len(tgt_out))
        if tgt_in[1:] == ids and tgt_in[0] != bos or tgt_out[:-1] == ids and tgt_out[-1] != eos:
            return HINTS(lang, "targets_fixed_ids", bos=bos, eos=eos)
        return HINTS(lang, "targets_wrong", ids=ids, bos=bos, eos=eos, tgt_in=tgt_in, tgt_out=tgt_out)
    return correct(lang, "Es el forzado del profesor (teacher forcing).", "This is teacher forcing.")


# ---- 07.smoothed_targets -------------------------------------------------------------------------


# Several (ε, V) pairs, and targets that do not reach the last id: a hard-coded ε or V, or a
# one-hot whose width comes from the targets instead of V, all show.
_SMOOTH_CASES = [
    (torch.tensor([0, 3, 1, 4]), 5, 0.1),
    (torch.tensor([2, 0, 4]), 7, 0.25),
    (torch.tensor([1, 1, 0, 0, 1]), 3, 0.3),
]


def _smooth(target: Tensor, V: int, eps: float) -> Tensor:
    return (1 - eps) * F.one_hot(target, V).double() + eps / V


# Typical mistakes, each a formula of (target, V, ε), by its hint's key.
_SMOOTH_MISTAKES: dict[str, Callable[[Tensor, int, float], Tensor]] = {
    "smooth_fixed_eps": lambda t, V, e: _smooth(t, V, 0.1),
    "smooth_fixed_vocab": lambda t, V, e: (1 - e) * F.one_hot(t, V).double() + e / 5,
    "smooth_not_shared": lambda t, V, e: (1 - e) * F.one_hot(t, V).double(),
    "smooth_one_hot_kept": lambda t, V, e: F.one_hot(t, V).double() + e / V,
    "smooth_wrong_classes": lambda t, V, e: (
        (1 - e) * F.one_hot(t, V).double() + e / (V - 1) * (1 - F.one_hot(t, V).double())
    ),
    "smooth_one_hot": lambda t, V, e: F.one_hot(t, V).double(),
}


@exercise("07.smoothed_targets")
def check_smoothed_targets(fn: Callable[[Tensor, int, float], Tensor], lang: str | None = None) -> Feedback:
    """``fn(target, vocab_size, eps)`` must return the smoothed target distribution
    (1 − ε)·one_hot + ε/V of shape (N, V), the one ``F.cross_entropy(label_smoothing=ε)`` uses.
    Several (ε, V) pairs, so that a hard-coded ε or V shows."""
    answers = []
    for target, V, eps in _SMOOTH_CASES:
        got = attempt(lang, fn, target.clone(), V, eps)
        if not isinstance(got, Tensor):
            return not_a_tensor(lang, got)
        N = len(target)
        if tuple(got.shape) != (N, V):
            why = ""
            if got.dim() == 2 and got.size(0) == N:
                why = tr(
                    lang,
                    f" (con vocab_size = {V}: ¿usas el argumento `vocab_size`?)",
                    f" (with vocab_size = {V}: do you use the `vocab_size` argument?)",
                )
            return HINTS(lang, "smooth_shape", want=(N, V), got=tuple(got.shape), why=why)
        if not got.is_floating_point():
            return HINTS(lang, "smooth_not_float", dtype=dtype_name(got))
        answers.append(got.detach())
    if all(close(a, _smooth(*case), atol=1e-6) for a, case in zip(answers, _SMOOTH_CASES)):
        return correct(
            lang,
            "Con esta distribución, la entropía cruzada coincide con F.cross_entropy(..., label_smoothing=ε).",
            "With this distribution the cross-entropy equals F.cross_entropy(..., label_smoothing=ε).",
        )
    mistakes = {key: [formula(*case) for case in _SMOOTH_CASES] for key, formula in _SMOOTH_MISTAKES.items()}
    key = diagnose(answers, mistakes, atol=1e-6)
    if key is not None:
        return HINTS(lang, key)
    sums_ok = all(close(a.double().sum(-1), torch.ones(len(a), dtype=torch.float64), atol=1e-5) for a in answers)
    return HINTS(lang, "smooth_wrong" if sums_ok else "smooth_not_normalised")
