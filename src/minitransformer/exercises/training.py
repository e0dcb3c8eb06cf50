"""Checkers for the exercises of notebook 07 (training on toy data)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..train import noam_lr
from ._core import Feedback, attempt, checker, correct, not_yet

__all__ = ["check_noam_lr", "check_shift_targets", "check_smoothed_targets"]


@checker
def check_noam_lr(fn, lang: str = "es") -> Feedback:
    """``fn(step, d_model, warmup)`` must return the paper's learning rate
    d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)."""
    cases = [(1, 512, 4000), (100, 512, 4000), (4000, 512, 4000), (4001, 512, 4000),
             (20000, 512, 4000), (50, 64, 200), (200, 64, 200), (1000, 64, 200)]
    for step, d_model, warmup in cases:
        got = attempt(lang, fn, step, d_model, warmup)
        try:
            got = float(got)
        except (TypeError, ValueError):
            return not_yet(lang, f"tu función devuelve {type(got).__name__}; debe devolver un número.",
                           f"your function returns {type(got).__name__}; it must return a number.")
        want = noam_lr(step, d_model, warmup)
        if math.isclose(got, want, rel_tol=1e-6):
            continue
        without_d = min(step**-0.5, step * warmup**-1.5)
        if math.isclose(got, without_d, rel_tol=1e-6):
            return not_yet(lang, "falta el factor d_model^-0.5 delante del mínimo.",
                           "the factor d_model^-0.5 in front of the minimum is missing.")
        if math.isclose(got, d_model**-0.5 * max(step**-0.5, step * warmup**-1.5), rel_tol=1e-6):
            return not_yet(lang, "usa el mínimo (min), no el máximo: así sube durante el calentamiento y luego baja.",
                           "use the minimum (min), not the maximum: that way it rises during warm-up, then falls.")
        if math.isclose(got, d_model**-0.5 * min(step**-0.5, step * warmup**-0.5), rel_tol=1e-6):
            return not_yet(lang, "en la rama de calentamiento el exponente de warmup es -1.5, no -0.5.",
                           "in the warm-up branch the exponent of warmup is -1.5, not -0.5.")
        return not_yet(
            lang, f"para step={step}, d_model={d_model}, warmup={warmup} se esperaba {want:.6g} y devuelves {got:.6g}.",
            f"for step={step}, d_model={d_model}, warmup={warmup} the expected value is {want:.6g}, you return {got:.6g}.",
        )
    return correct(lang, "El pico está exactamente en step = warmup.", "The peak is exactly at step = warmup.")


@checker
def check_shift_targets(fn, lang: str = "es") -> Feedback:
    """``fn(ids, bos_id, eos_id)`` must return ``(tgt_in, tgt_out)``:
    ``[bos] + ids`` (the decoder's input) and ``ids + [eos]`` (what it must predict)."""
    for ids, bos, eos in [([7, 8, 9], 1, 2), ([5], 1, 2), ([4, 4, 6, 10], 3, 9)]:
        got = attempt(lang, fn, list(ids), bos, eos)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            return not_yet(lang, "devuelve una pareja (tgt_in, tgt_out).", "return a pair (tgt_in, tgt_out).")
        tgt_in, tgt_out = (list(x.tolist() if isinstance(x, torch.Tensor) else x) for x in got)
        want_in, want_out = [bos] + ids, ids + [eos]
        if (tgt_in, tgt_out) == (want_in, want_out):
            continue
        if (tgt_in, tgt_out) == (want_out, want_in):
            return not_yet(lang, "están al revés: la entrada empieza con <bos> y la salida termina con <eos>.",
                           "they are swapped: the input starts with <bos> and the output ends with <eos>.")
        if tgt_in == tgt_out:
            return not_yet(lang, "entrada y salida son iguales: el decodificador copiaría su entrada. "
                           "La salida va desplazada una posición respecto a la entrada.",
                           "input and output are equal: the decoder would copy its input. "
                           "The output is shifted by one position with respect to the input.")
        if tgt_in == [bos] + ids + [eos] or tgt_out == [bos] + ids + [eos]:
            return not_yet(lang, "cada secuencia lleva un solo token especial: <bos> delante en la entrada, "
                           "<eos> al final en la salida.",
                           "each sequence carries one special token: <bos> in front of the input, "
                           "<eos> at the end of the output.")
        if len(tgt_in) != len(tgt_out):
            return not_yet(lang, f"la entrada y la salida deben tener la misma longitud (tienes {len(tgt_in)} y "
                           f"{len(tgt_out)}): la posición t de la entrada predice la posición t de la salida.",
                           f"input and output must have the same length (yours: {len(tgt_in)} and {len(tgt_out)}): "
                           f"position t of the input predicts position t of the output.")
        return not_yet(lang, f"para ids={ids} se esperaba ({want_in}, {want_out}) y devuelves ({tgt_in}, {tgt_out}).",
                       f"for ids={ids} the expected answer is ({want_in}, {want_out}), you return ({tgt_in}, {tgt_out}).")
    return correct(lang, "Es el forzado del profesor (teacher forcing).", "This is teacher forcing.")


@checker
def check_smoothed_targets(fn, lang: str = "es") -> Feedback:
    """``fn(target, vocab_size, eps)`` must return the smoothed target distribution
    (1 - ε)·one_hot + ε/V of shape (N, V), the one ``F.cross_entropy(label_smoothing=ε)`` uses."""
    target, V, eps = torch.tensor([0, 3, 1, 4]), 5, 0.1
    got = attempt(lang, fn, target.clone(), V, eps)
    if not isinstance(got, torch.Tensor):
        return not_yet(lang, "devuelve un tensor.", "return a tensor.")
    if tuple(got.shape) != (len(target), V):
        return not_yet(lang, f"la forma debe ser (N, V) = {(len(target), V)}; tienes {tuple(got.shape)}.",
                       f"the shape must be (N, V) = {(len(target), V)}; yours is {tuple(got.shape)}.")
    got = got.float()
    one_hot = F.one_hot(target, V).float()
    want = (1 - eps) * one_hot + eps / V
    if torch.allclose(got, want, atol=1e-6):
        return correct(lang, "Con esta distribución, la entropía cruzada coincide con "
                       "F.cross_entropy(..., label_smoothing=ε).",
                       "With this distribution the cross-entropy equals F.cross_entropy(..., label_smoothing=ε).")
    if not torch.allclose(got.sum(-1), torch.ones(len(target)), atol=1e-5):
        return not_yet(lang, "cada fila debe sumar 1 (es una distribución): ¿restaste ε a la clase correcta?",
                       "each row must sum to 1 (it is a distribution): did you take ε away from the right class?")
    if torch.allclose(got, (1 - eps) * one_hot + eps / (V - 1) * (1 - one_hot), atol=1e-6):
        return not_yet(lang, "repartes ε entre las V-1 clases incorrectas; PyTorch lo reparte entre las V clases "
                       "(también la correcta): ε/V a cada una.",
                       "you spread ε over the V-1 wrong classes; PyTorch spreads it over all V classes "
                       "(the right one too): ε/V each.")
    if torch.allclose(got, one_hot, atol=1e-6):
        return not_yet(lang, "esto es la distribución one-hot sin suavizar: falta mezclarla con la uniforme.",
                       "this is the unsmoothed one-hot distribution: mix it with the uniform one.")
    return not_yet(lang, "compara tu resultado con (1 - ε)·one_hot + ε/V.",
                   "compare your result with (1 - ε)·one_hot + ε/V.")
