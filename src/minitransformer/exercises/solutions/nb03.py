"""The answer key of notebook 03, in notebook order:
``03.sinusoidal``, ``03.interleaved_to_concat``, ``03.shift_matrix_concat``.
"""

from __future__ import annotations

import torch

from ..registry import solution


@solution(
    "03.sinusoidal",
    "Sin bucles: las posiciones como columna (max_len, 1) y las frecuencias 1/10000^(2i/d_model) como fila "
    "(d_model/2,) se multiplican por difusión (broadcasting) y dan todos los ángulos a la vez, "
    "(max_len, d_model/2). El seno de cada ángulo va a las columnas pares y el coseno a las impares; los dos "
    "miembros de un par comparten frecuencia.",
    "No loops: the positions as a column (max_len, 1) and the frequencies 1/10000^(2i/d_model) as a row "
    "(d_model/2,) multiply by broadcasting into every angle at once, (max_len, d_model/2). The sine of each "
    "angle goes to the even columns and the cosine to the odd ones; both members of a pair share a frequency.",
)
def solution_sinusoidal_vectorised(max_len, d_model):
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (d_model/2,)
    angles = position / 10000 ** (two_i / d_model)  # (max_len, d_model/2)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


@solution(
    "03.interleaved_to_concat",
    "`interleaved[:, perm]` pone en la columna j la columna `perm[j]` de la intercalada. La concatenada "
    "tiene primero los senos (la intercalada los guarda en las columnas pares 0, 2, 4, …) y después los "
    "cosenos (columnas impares 1, 3, 5, …): `perm` es la lista de los pares seguida de la de los impares, "
    "como enteros para poder indexar.",
    "`interleaved[:, perm]` puts column `perm[j]` of the interleaved table in column j. The concatenated table "
    "has the sines first (the interleaved one keeps them in the even columns 0, 2, 4, …) and then the cosines "
    "(odd columns 1, 3, 5, …): `perm` is the even indices followed by the odd ones, as integers so that they "
    "can index.",
)
def solution_interleaved_to_concat(d_model):
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])  # (d_model,), long


@solution(
    "03.shift_matrix_concat",
    "Con ω_i = 1/10000^(2i/d_model), las fórmulas de la suma dan sin((p+k)ω_i) = cos(kω_i)·sin(pω_i) + "
    "sin(kω_i)·cos(pω_i) y cos((p+k)ω_i) = −sin(kω_i)·sin(pω_i) + cos(kω_i)·cos(pω_i). En la disposición "
    "concatenada los senos ocupan la mitad de arriba del vector y los cosenos la de abajo, así que M_k tiene "
    "cuatro bloques diagonales: [[C, S], [−S, C]] con C = diag(cos kω_i) y S = diag(sin kω_i). No depende de p.",
    "With ω_i = 1/10000^(2i/d_model), the sum formulas give sin((p+k)ω_i) = cos(kω_i)·sin(pω_i) + "
    "sin(kω_i)·cos(pω_i) and cos((p+k)ω_i) = −sin(kω_i)·sin(pω_i) + cos(kω_i)·cos(pω_i). In the concatenated "
    "layout the sines fill the top half of the vector and the cosines the bottom half, so M_k has four "
    "diagonal blocks: [[C, S], [−S, C]] with C = diag(cos kω_i) and S = diag(sin kω_i). It does not depend on p.",
)
def solution_shift_matrix_concat(k, d_model):
    omega = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d_model/2,)
    C, S = torch.diag(torch.cos(k * omega)), torch.diag(torch.sin(k * omega))
    return torch.cat([torch.cat([C, S], dim=1), torch.cat([-S, C], dim=1)], dim=0)  # (d_model, d_model)
