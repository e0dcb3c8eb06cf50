"""The answer key of notebook 13, in notebook order:
``13.previous_token_score``, ``13.induction_score``, ``13.ablate_head``.
"""

from __future__ import annotations

import torch

from .._core import exercise
from ..registry import explain


@exercise("13.previous_token_score")
@explain(
    "La atención de la posición t a la t − 1 es `pattern[h, t, t - 1]`: las filas son quien mira y las columnas a "
    "quién mira, así que esos valores forman la diagonal justo debajo de la principal, `diagonal(offset=-1)`, con "
    "T − 1 valores por cabeza (t = 1 … T − 1: la posición 0 no tiene token anterior). Su media sobre las posiciones "
    "es la puntuación de cada cabeza: 1 si siempre mira al token anterior.",
    "The attention from position t to t − 1 is `pattern[h, t, t - 1]`: rows are who looks and columns whom it "
    "looks at, so those values make the diagonal just below the main one, `diagonal(offset=-1)`, with T − 1 "
    "values per head (t = 1 … T − 1: position 0 has no previous token). Their mean over the positions is each "
    "head's score: 1 if it always looks at the previous token.",
)
def solution_my_previous_token_score(pattern):
    below = pattern.diagonal(offset=-1, dim1=-2, dim2=-1)  # (H, T-1): pattern[h, t, t - 1]
    return below.mean(dim=-1)  # (H,): «media sobre t = 1 … T − 1|mean over t = 1 … T − 1»


@exercise("13.induction_score")
@explain(
    "Desde la posición P, el token t ya apareció en t − P, t − 2P, …, y tras cada aparición vino el token de "
    "t − P + 1, t − 2P + 1, …: ahí mira una cabeza de inducción. Para cada t ≥ P se suma la atención a esas "
    "posiciones (las que son ≥ 1), y la suma se promedia sobre las T − P posiciones t = P … T − 1. "
    "`torch.arange(t - period + 1, 0, -period)` da esas posiciones, de la más cercana hacia atrás.",
    "From position P on, token t has already appeared at t − P, t − 2P, …, and after each appearance came the "
    "token at t − P + 1, t − 2P + 1, …: that is where an induction head looks. For each t ≥ P the attention to "
    "those positions (the ones ≥ 1) is added up, and the sum is averaged over the T − P positions "
    "t = P … T − 1. `torch.arange(t - period + 1, 0, -period)` gives those positions, from the nearest backwards.",
)
def solution_my_induction_score(pattern, period):
    H, T, _ = pattern.shape
    total = pattern.new_zeros(H)  # (H,)
    for t in range(period, T):
        after_copies = torch.arange(t - period + 1, 0, -period)  # t − P + 1, t − 2P + 1, … ≥ 1
        total += pattern[:, t, after_copies].sum(dim=-1)  # (H,)
    return total / (T - period)  # «media sobre t = P … T − 1|mean over t = P … T − 1»


@exercise("13.ablate_head")
@explain(
    "W_o recibe las salidas de las cabezas una tras otra, (B, T, H · Dh), y la cabeza `head` ocupa las posiciones "
    "`head * Dh` a `(head + 1) * Dh`. Un gancho previo en W_o (`register_forward_pre_hook`) recibe esa entrada "
    "antes de la proyección y devuelve una copia con ese trozo a cero: la cabeza no escribe nada en el flujo "
    "residual. El `finally` quita el gancho pase lo que pase, y el modelo queda como estaba.",
    "W_o receives the heads' outputs one after another, (B, T, H · Dh), and head `head` takes positions "
    "`head * Dh` to `(head + 1) * Dh`. A pre-hook on W_o (`register_forward_pre_hook`) gets that input before "
    "the projection and returns a copy with that slice set to zero: the head writes nothing into the residual "
    "stream. The `finally` removes the hook whatever happens, and the model is left as it was.",
)
def solution_my_ablate_head(model, tokens, layer, head):
    attn = model.blocks[layer].attn
    start, stop = head * attn.d_head, (head + 1) * attn.d_head

    def zero_head(module, args):
        z = args[0].clone()  # (B, T, H · Dh): «las salidas de las cabezas|the heads' outputs»
        z[..., start:stop] = 0.0
        return (z,)

    handle = attn.W_o.register_forward_pre_hook(zero_head)
    try:
        with torch.no_grad():
            return model(tokens)  # (B, T, V)
    finally:
        handle.remove()  # «el modelo queda como estaba|the model is left as it was»
