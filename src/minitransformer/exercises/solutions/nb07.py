"""The answer key of notebook 07, in notebook order: ``07.noam_lr``, ``07.shift_targets``, ``07.smoothed_targets``."""

from __future__ import annotations

import torch.nn.functional as F

from ..registry import solution


@solution(
    "07.noam_lr",
    "Dos rectas en escala log-log: durante el calentamiento la tasa crece como step · warmup^-1,5 y después "
    "decrece como step^-0,5; `min` elige la menor, y las dos se cruzan justo en step = warmup. El factor "
    "d_model^-0,5 hace la tasa más pequeña en modelos más anchos.",
    "Two straight lines on a log-log scale: during warm-up the rate grows as step · warmup^-1.5 and afterwards "
    "it decays as step^-0.5; `min` picks the smaller one, and the two cross exactly at step = warmup. The "
    "factor d_model^-0.5 makes the rate smaller for wider models.",
)
def solution_my_noam_lr(step, d_model, warmup):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@solution(
    "07.shift_targets",
    "La entrada del decodificador empieza con <bos> y la salida que debe predecir termina con <eos>: en la "
    "posición t lee tgt_in[t] y debe predecir tgt_out[t], el token siguiente. Las dos son listas nuevas de la "
    "misma longitud, len(ids) + 1; `ids` no cambia (`insert` o `append` la modificarían y devuelven `None`).",
    "The decoder's input starts with <bos> and the output it must predict ends with <eos>: at position t it "
    "reads tgt_in[t] and must predict tgt_out[t], the next token. Both are new lists of the same length, "
    "len(ids) + 1; `ids` does not change (`insert` or `append` would modify it, and return `None`).",
)
def solution_my_shift_targets(ids, bos_id, eos_id):
    return [bos_id] + ids, ids + [eos_id]


@solution(
    "07.smoothed_targets",
    "El suavizado quita ε a la clase correcta y lo reparte a partes iguales entre las V clases (la correcta "
    "incluida): la correcta recibe 1 − ε + ε/V y cada una de las demás ε/V. Es exactamente la distribución "
    "con la que `F.cross_entropy(..., label_smoothing=ε)` calcula la pérdida.",
    "Smoothing takes ε away from the right class and shares it equally among the V classes (the right one "
    "included): the right class gets 1 − ε + ε/V and each of the others ε/V. It is exactly the distribution "
    "with which `F.cross_entropy(..., label_smoothing=ε)` computes the loss.",
)
def solution_my_smoothed_targets(target, vocab_size, eps):
    one_hot = F.one_hot(target, vocab_size).float()  # (N, V)
    return (1 - eps) * one_hot + eps / vocab_size
