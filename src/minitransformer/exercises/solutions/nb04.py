"""The answer key of notebook 04, in notebook order: ``04.layer_norm``, ``04.sublayer_connection``, ``04.rms_norm``."""

from __future__ import annotations

import torch

from ..registry import solution


@solution(
    "04.layer_norm",
    "Cada token se normaliza con sus propias D características: media y varianza sobre la última dimensión "
    "(con `keepdim=True` para restar y dividir por difusión). La varianza es la sesgada, dividida entre D "
    "(`unbiased=False`), como en `nn.LayerNorm`; ε va dentro de la raíz, así un token constante no da 0/0. "
    "Al final, la transformación afín: · γ + β.",
    "Each token is normalised with its own D features: mean and variance over the last dimension (with "
    "`keepdim=True` so that subtracting and dividing broadcast). The variance is the biased one, divided by D "
    "(`unbiased=False`), as in `nn.LayerNorm`; ε goes inside the square root, so a constant token does not "
    "give 0/0. Last, the affine step: · γ + β.",
)
def solution_layer_norm(x, gamma, beta, eps):
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = x.var(dim=-1, keepdim=True, unbiased=False)  # (..., 1)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


@solution(
    "04.sublayer_connection",
    "Post-LN, como en el artículo: primero la subcapa sobre `x`, luego la conexión residual (sumar `x`) y "
    "por último la normalización de la suma: LayerNorm(x + Subcapa(x)). En pre-LN la norma iría antes de la "
    "subcapa: x + Subcapa(LayerNorm(x)).",
    "Post-LN, as in the paper: first the sublayer on `x`, then the residual connection (add `x`) and last the "
    "normalisation of the sum: LayerNorm(x + Sublayer(x)). In pre-LN the norm would come before the sublayer: "
    "x + Sublayer(LayerNorm(x)).",
)
def solution_sublayer_connection(x, sublayer, norm):
    return norm(x + sublayer(x))  # (B, T, D)


@solution(
    "04.rms_norm",
    "RMSNorm no centra: divide cada token entre la raíz de la media de sus cuadrados (sobre la última "
    "dimensión), con ε dentro de la raíz, y multiplica por γ. No hay β.",
    "RMSNorm does not centre: it divides each token by the root of the mean of its squares (over the last "
    "dimension), with ε inside the root, and multiplies by γ. There is no β.",
)
def solution_rms_norm(x, gamma, eps):
    rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps)  # (..., 1)
    return x / rms * gamma
