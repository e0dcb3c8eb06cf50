"""The answer key of notebook 13, in notebook order:
``13.ov_circuit``, ``13.smeared_keys``, ``13.ablate_head``.
"""

from __future__ import annotations

import torch

from ..registry import solution


@solution(
    "13.ov_circuit",
    "La fila s sigue el camino del token s cuando la cabeza lo atiende: su embedding `W_E[s]`, la ganancia γ de la "
    "norma del bloque (RMSNorm multiplica cada dimensión por la suya; su 1/rms es un número positivo por posición "
    "que no cambia qué logit sube más), las filas de la cabeza en `W_v` (lo que lee), sus columnas en `W_o` (lo "
    "que escribe), la ganancia de la norma final y `W_U`. Con las filas como el token atendido, todo el camino es "
    "un producto de matrices que empieza por `W_E` y acaba en `W_Uᵀ`.",
    "Row s follows token s's path when the head attends to it: its embedding `W_E[s]`, the gain γ of the block's "
    "norm (RMSNorm multiplies each dimension by its own; its 1/rms is a positive number per position that does not "
    "change which logit rises most), the head's rows of `W_v` (what it reads), its columns of `W_o` (what it "
    "writes), the final norm's gain and `W_U`. With rows as the token attended to, the whole path is a product of "
    "matrices that starts with `W_E` and ends with `W_Uᵀ`.",
)
def solution_my_ov_circuit(model, layer, head):
    block = model.blocks[layer]
    Dh = block.attn.d_head
    part = slice(head * Dh, (head + 1) * Dh)  # «la cabeza: D_h de las H · D_h|the head: D_h of the H · D_h»
    with torch.no_grad():
        x = model.token.weight * block.norm1.weight  # (V, D): «W_E ⊙ γ₁|W_E ⊙ γ₁»
        z = x @ block.attn.W_v.weight[part].T  # (V, Dh): «lo que la cabeza lee|what the head reads»
        out = z @ block.attn.W_o.weight[:, part].T  # (V, D): «lo que escribe|what it writes»
        return (out * model.norm.weight) @ model.lm_head.weight.T  # (V, V)


@solution(
    "13.smeared_keys",
    "Olsson et al. (2022) dan a cada cabeza un número aprendido, alpha, y σ(alpha), entre 0 y 1, dice cuánto se queda "
    "cada clave de sí misma; el resto lo toma de la clave de la posición anterior. Con `k[..., 1:, :]` (las claves "
    "de t = 1 … T − 1) y `k[..., :-1, :]` (las de t − 1) se mezclan todas a la vez, a partir de las claves de "
    "entrada, sin cambiarlas; la posición 0 no tiene anterior y se queda igual. El peso de cada cabeza va en el eje "
    "de las cabezas, el 1: `view(1, -1, 1, 1)`.",
    "Olsson et al. (2022) give each head a learned number, alpha, and σ(alpha), between 0 and 1, says how much of "
    "each key stays its own; the rest it takes from the previous position's key. With `k[..., 1:, :]` (the keys of "
    "t = 1 … T − 1) and `k[..., :-1, :]` (those of t − 1) all are mixed at once, from the input keys, without "
    "changing them; position 0 has no previous one and stays as it is. Each head's weight goes on the heads' axis, "
    "axis 1: `view(1, -1, 1, 1)`.",
)
def solution_my_smear_keys(k, alpha):
    w = torch.sigmoid(alpha).view(1, -1, 1, 1)  # (1, H, 1, 1): «una por cabeza|one per head»
    smeared = w * k[..., 1:, :] + (1 - w) * k[..., :-1, :]  # (B, H, T − 1, Dh): «t y t − 1|t and t − 1»
    return torch.cat([k[..., :1, :], smeared], dim=-2)  # «la posición 0 queda igual|position 0 stays»


@solution(
    "13.ablate_head",
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
