"""Checkers for the encoder block's exercises: layer norm, post-LN sublayer, RMSNorm.

The right answers come from PyTorch (``F.layer_norm``, ``F.rms_norm``, ``nn.LayerNorm``), which the
student may not use (they are switched off while the answer runs); the hints recognise the usual mistakes by
comparing the student's output with what each mistake would give.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..layers import FeedForward
from ._core import (
    COMMON_HINTS,
    Feedback,
    Hints,
    attempt,
    by_key,
    close,
    correct,
    diagnose,
    exercise,
    forbid,
    randn,
    tensor,
)

__all__ = ["HINTS", "check_layer_norm", "check_post_ln_sublayer", "check_rms_norm"]


HINTS = Hints(
    {
        **COMMON_HINTS,
        # layer norm
        "ln_not_finite": (
            "con un token constante (varianza 0) tu resultado no es finito: suma `eps` a la varianza antes de la raíz.",
            "with a constant token (variance 0) your result is not finite: add `eps` to the variance "
            "before the square root.",
        ),
        "ln_unbiased": (
            "usas la varianza insesgada (dividida entre D − 1). La normalización de capa divide entre D: "
            "`x.var(dim=-1, unbiased=False)`.",
            "you use the unbiased variance (divided by D − 1). Layer normalisation divides by D: "
            "`x.var(dim=-1, unbiased=False)`.",
        ),
        "ln_no_affine": (
            "falta la transformación afín final: multiplica por `gamma` y suma `beta`.",
            "the final affine step is missing: multiply by `gamma` and add `beta`.",
        ),
        "ln_eps_outside": (
            "`eps` va dentro de la raíz: √(σ² + ε), no √σ² + ε.",
            "`eps` goes inside the square root: √(σ² + ε), not √σ² + ε.",
        ),
        "fixed_eps": (
            "no usas el argumento `eps` (¿escribiste 1e-5 a mano?).",
            "you do not use the `eps` argument (did you write 1e-5 by hand?).",
        ),
        "ln_over_batch": (
            "normalizas a lo largo del lote (dim=0). Cada token se normaliza con sus propias "
            "características: usa `dim=-1`.",
            "you normalise across the batch (dim=0). Each token is normalised over its own features: use `dim=-1`.",
        ),
        "ln_wrong": (
            "el resultado no coincide con la normalización de capa. Revisa la fórmula del cuaderno: "
            "sobre qué dimensión van la media y la varianza, dónde va ε, y el orden de γ y β.",
            "the result does not match layer normalisation. Check the notebook's formula: over which "
            "dimension the mean and the variance run, where ε goes, and the order of γ and β.",
        ),
        # post-LN sublayer
        "post_pre_ln": (
            "eso es pre-LN, x + Subcapa(LayerNorm(x)). En post-LN (el artículo) la norma va después de la suma.",
            "that is pre-LN, x + Sublayer(LayerNorm(x)). In post-LN (the paper) the norm comes after the sum.",
        ),
        "post_no_residual": (
            "falta la conexión residual: suma la entrada `x` a la salida de la subcapa antes de normalizar.",
            "the residual connection is missing: add the input `x` to the sublayer's output before normalising.",
        ),
        "post_no_norm": (
            "falta la normalización: aplica `norm` a la suma.",
            "the normalisation is missing: apply `norm` to the sum.",
        ),
        "post_norm_x_only": (
            "normaliza la suma x + Subcapa(x), no solo `x`.",
            "normalise the sum x + Sublayer(x), not just `x`.",
        ),
        "post_norm_before": (
            "en post-LN la subcapa recibe `x` directamente: no normalices antes de la subcapa, solo después de "
            "la suma.",
            "in post-LN the sublayer takes `x` directly: do not normalise before the sublayer, only after the sum.",
        ),
        "post_wrong": (
            "el resultado no coincide con la conexión post-LN del artículo: revisa qué recibe la "
            "subcapa, qué se suma en la conexión residual y qué se normaliza.",
            "the result does not match the paper's post-LN connection: check what the sublayer takes, what "
            "the residual connection adds and what is normalised.",
        ),
        # RMSNorm
        "rms_not_finite": (
            "con un token de ceros tu resultado no es finito: suma `eps` dentro de la raíz.",
            "with a token of zeros your result is not finite: add `eps` inside the square root.",
        ),
        "rms_centred": (
            "restas la media: eso es la normalización de capa. RMSNorm solo divide entre la raíz de la media de "
            "los cuadrados, sin centrar.",
            "you subtract the mean: that is layer normalisation. RMSNorm only divides by the root of the mean of "
            "the squares, without centring.",
        ),
        "rms_no_gamma": ("falta multiplicar por `gamma`.", "multiplying by `gamma` is missing."),
        "rms_eps_outside": (
            "`eps` va dentro de la raíz: √(media(x²) + ε).",
            "`eps` goes inside the square root: √(mean(x²) + ε).",
        ),
        "rms_sum": (
            "usa la media de los cuadrados (`mean`), no su suma.",
            "use the mean of the squares (`mean`), not their sum.",
        ),
        "rms_no_sqrt": (
            "falta la raíz cuadrada: divide entre √(media(x²) + ε).",
            "the square root is missing: divide by √(mean(x²) + ε).",
        ),
        "rms_wrong": (
            "el resultado no coincide con `F.rms_norm`: x / √(media(x²) + ε) · γ, con la media sobre la "
            "última dimensión.",
            "the result does not match `F.rms_norm`: x / √(mean(x²) + ε) · γ, with the mean over the last dimension.",
        ),
    }
)


# ---- shared by the exercises below ---------------------------------------------------------------


def _not_finite(got, x: Tensor) -> bool:
    """A float tensor of ``x``'s shape holding inf or NaN: the ε the statement asks for is missing."""
    return (
        isinstance(got, Tensor)
        and got.shape == x.shape
        and got.is_floating_point()
        and not bool(torch.isfinite(got).all())
    )


_TOL = {"atol": 1e-4, "rtol": 1e-4}


def _close(a, b: Tensor) -> bool:
    return close(a, b, **_TOL)


def _same_shape(lang: str, got, expected: Tensor) -> Tensor:
    """The answer as a tensor of the input's shape; anything else stops the check."""
    return tensor(lang, got, expected.shape, ", la misma que la entrada", ", the same as the input")


_LAYER_NORM = (
    "torch.nn.functional.layer_norm",
    "torch.layer_norm",
    "torch.native_layer_norm",
    "torch.nn.LayerNorm.forward",
)
_RMS_NORM = ("torch.nn.functional.rms_norm", "torch.rms_norm", "torch.nn.RMSNorm.forward")


def _run(lang: str, fn: Callable[..., Tensor], tools: tuple[str, ...], *args):
    """Run the student's norm with PyTorch's own switched off: the statement asks to write it by hand."""
    with forbid(
        tools,
        "el ejercicio es escribir la normalización tú, con operaciones elementales (media, varianza, raíz).",
        "the exercise is to write the normalisation yourself, with elementary operations (mean, "
        "variance, square root).",
    ):
        return attempt(lang, fn, *args)


# ---- 04.layer_norm -------------------------------------------------------------------------------


def _layer_norm_cases() -> tuple[tuple[Tensor, Tensor, Tensor], list[tuple[Tensor, Tensor, Tensor, float]]]:
    """(x, gamma, beta) of a token whose features are all equal (σ² = 0, only ε keeps the division finite),
    then the (x, gamma, beta, eps) the answer must match."""
    flat = (torch.full((1, 2, 4), 3.0), torch.ones(4), torch.arange(4.0))
    cases = [
        (randn(2, 5, 8, seed=1) * 3 + 1, randn(8, seed=2), randn(8, seed=3), 1e-5),
        (randn(3, 6, seed=4) * 0.3, randn(6, seed=5), randn(6, seed=6), 0.5),
    ]
    return flat, cases


def _layer_norm_mistakes(x: Tensor, gamma: Tensor, beta: Tensor, eps: float) -> dict[str, Tensor]:
    """What each typical mistake gives, by its hint's key."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    mean_first = x.mean(dim=0, keepdim=True)
    std_first = x.var(dim=0, keepdim=True, unbiased=False).add(eps).sqrt()
    return {
        "ln_unbiased": (x - mean) / torch.sqrt(x.var(dim=-1, keepdim=True, unbiased=True) + eps) * gamma + beta,
        "ln_no_affine": (x - mean) / torch.sqrt(var + eps),
        "ln_eps_outside": (x - mean) / (torch.sqrt(var) + eps) * gamma + beta,
        "fixed_eps": F.layer_norm(x, x.shape[-1:], gamma, beta, 1e-5),
        "ln_over_batch": (x - mean_first) / std_first * gamma + beta,
    }


@exercise("04.layer_norm")
def check_layer_norm(layer_norm: Callable[..., Tensor], lang: str | None = None) -> Feedback:
    """Check ``layer_norm(x, gamma, beta, eps)`` against ``torch.nn.functional.layer_norm``.

    x: (..., D); gamma, beta: (D,); the result has the shape of x.
    """
    (x, gamma, beta), cases = _layer_norm_cases()
    # a token whose features are all equal: σ² = 0, only ε keeps the division finite
    got = _run(lang, layer_norm, _LAYER_NORM, x.clone(), gamma.clone(), beta.clone(), 1e-5)
    if _not_finite(got, x):
        return HINTS(lang, "ln_not_finite")
    for x, gamma, beta, eps in cases:
        expected = F.layer_norm(x, x.shape[-1:], gamma, beta, eps)
        got = _run(lang, layer_norm, _LAYER_NORM, x.clone(), gamma.clone(), beta.clone(), eps)
        got = _same_shape(lang, got, expected)
        if _close(got, expected):
            continue
        mistakes = by_key([_layer_norm_mistakes(x, gamma, beta, eps)])
        return HINTS(lang, diagnose([got], mistakes, **_TOL) or "ln_wrong")
    return correct(
        lang, "Coincide con `F.layer_norm` (y con `nn.LayerNorm`).", "It matches `F.layer_norm` (and `nn.LayerNorm`)."
    )


# ---- 04.sublayer_connection ----------------------------------------------------------------------


def _sublayer_case() -> tuple[Tensor, FeedForward, nn.LayerNorm]:
    """(x, sublayer, norm): x (2, 4, D), a feed-forward sublayer and a LayerNorm, D = 8, every parameter
    drawn from its own seed (the LayerNorm's weight around 1)."""
    D = 8
    with torch.random.fork_rng(devices=[]):  # leave the notebook's random state alone
        sublayer = FeedForward(D, 16)
    norm = nn.LayerNorm(D)
    with torch.no_grad():
        for i, p in enumerate(list(sublayer.parameters()) + list(norm.parameters())):
            p.copy_(randn(*p.shape, seed=40 + i) * 0.5 + (1.0 if p is norm.weight else 0.0))
    x = randn(2, 4, D, seed=50) * 2 + 0.5
    return x, sublayer, norm


@exercise("04.sublayer_connection")
def check_post_ln_sublayer(sublayer_connection: Callable[..., Tensor], lang: str | None = None) -> Feedback:
    """Check ``sublayer_connection(x, sublayer, norm)`` = norm(x + sublayer(x)) (post-LN).

    x: (B, T, D); ``sublayer`` and ``norm`` are modules (B, T, D) -> (B, T, D).
    """
    x, sublayer, norm = _sublayer_case()
    with torch.no_grad():
        expected = norm(x + sublayer(x))
        got = attempt(lang, sublayer_connection, x.clone(), sublayer, norm)
        got = _same_shape(lang, got, expected)
        if _close(got, expected):
            return correct(
                lang,
                "Es la conexión post-LN del artículo: LayerNorm(x + Subcapa(x)).",
                "It is the paper's post-LN connection: LayerNorm(x + Sublayer(x)).",
            )
        mistakes = {
            "post_pre_ln": [x + sublayer(norm(x))],
            "post_no_residual": [norm(sublayer(x))],
            "post_no_norm": [x + sublayer(x)],
            "post_norm_x_only": [norm(x) + sublayer(x)],
            "post_norm_before": [norm(x + sublayer(norm(x)))],
        }
    return HINTS(lang, diagnose([got], mistakes, **_TOL) or "post_wrong")


# ---- 04.rms_norm ---------------------------------------------------------------------------------


def _rms_norm_cases() -> tuple[Tensor, list[tuple[Tensor, Tensor, float]]]:
    """x, a token of zeros (only ε keeps 0 / 0 away), then the (x, gamma, eps) the answer must match."""
    cases = [
        (randn(2, 5, 8, seed=60) * 2 + 0.7, randn(8, seed=61), 1e-6),
        (randn(3, 6, seed=62) * 0.4, randn(6, seed=63), 0.5),
    ]
    return torch.zeros(1, 2, 4), cases


def _rms_norm_mistakes(x: Tensor, gamma: Tensor, eps: float) -> dict[str, Tensor]:
    """What each typical mistake gives, by its hint's key."""
    mean_sq = (x**2).mean(dim=-1, keepdim=True)
    return {
        "rms_centred": F.layer_norm(x, x.shape[-1:], gamma, None, eps),
        "rms_no_gamma": x / torch.sqrt(mean_sq + eps),
        "rms_eps_outside": x / (torch.sqrt(mean_sq) + eps) * gamma,
        "rms_sum": x / torch.sqrt((x**2).sum(dim=-1, keepdim=True) + eps) * gamma,
        "rms_no_sqrt": x / (mean_sq + eps) * gamma,
        "fixed_eps": F.rms_norm(x, x.shape[-1:], gamma, 1e-5),
    }


@exercise("04.rms_norm")
def check_rms_norm(rms_norm: Callable[..., Tensor], lang: str | None = None) -> Feedback:
    """Check ``rms_norm(x, gamma, eps)`` = x / √(mean(x²) + ε) · γ against ``F.rms_norm``.

    x: (..., D); gamma: (D,); the result has the shape of x.
    """
    x, cases = _rms_norm_cases()  # x: a token of zeros, only ε keeps 0 / 0 away
    got = _run(lang, rms_norm, _RMS_NORM, x.clone(), torch.ones(4), 1e-6)
    if _not_finite(got, x):
        return HINTS(lang, "rms_not_finite")
    for x, gamma, eps in cases:
        expected = F.rms_norm(x, x.shape[-1:], gamma, eps)
        got = _run(lang, rms_norm, _RMS_NORM, x.clone(), gamma.clone(), eps)
        got = _same_shape(lang, got, expected)
        if _close(got, expected):
            continue
        return HINTS(lang, diagnose([got], by_key([_rms_norm_mistakes(x, gamma, eps)]), **_TOL) or "rms_wrong")
    return correct(
        lang, "Coincide con `F.rms_norm` (y con `nn.RMSNorm`).", "It matches `F.rms_norm` (and `nn.RMSNorm`)."
    )
