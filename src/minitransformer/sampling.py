"""Choosing the next token from a model's logits: greedy, temperature, top-k and top-p.

Each filter takes logits (..., V) and returns logits of the same shape, with the tokens it
removes set to -inf, so filters compose: temperature first, then top-k, then top-p
(:func:`next_token_probs`), the order Hugging Face's ``generate`` uses.

* temperature τ: logits / τ. τ < 1 sharpens the distribution, τ > 1 flattens it; as τ → 0
  it tends to greedy decoding (all the mass on the argmax), which is what τ = 0 means in
  :func:`next_token_probs` and :func:`sample_next_token`.
* top-k: keep the k largest logits (ties with the k-th are kept too).
* top-p (nucleus sampling): sort by probability and keep the smallest set of tokens whose
  mass reaches p; the most likely token always stays, and p = 1 keeps every token.

The filters keep the same tokens as ``transformers``' ``TemperatureLogitsWarper``,
``TopKLogitsWarper`` and ``TopPLogitsWarper`` (tested).

Bad arguments raise :class:`~minitransformer.i18n.CourseError` (a ``ValueError``) in the
language of the package's messages.

Letters: B batch, V vocabulary.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

from .i18n import error

__all__ = [
    "check_temperature",
    "check_top_k",
    "check_top_p",
    "apply_temperature",
    "top_k_filter",
    "top_p_filter",
    "next_token_probs",
    "sample_next_token",
]


def check_temperature(temperature: float, allow_zero: bool = True) -> float:
    """Return ``temperature`` as a float if it is a finite number ≥ 0 (> 0 when
    ``allow_zero`` is False); raise a ``ValueError`` otherwise."""
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) or math.isnan(temperature):
        raise error(
            f"la temperatura debe ser un número, no {temperature!r}",
            f"the temperature must be a number, got {temperature!r}",
        )
    if temperature < 0 or math.isinf(temperature):
        raise error(
            f"la temperatura debe ser un número finito ≥ 0, no {temperature!r}",
            f"the temperature must be a finite number ≥ 0, got {temperature!r}",
        )
    if temperature == 0 and not allow_zero:
        raise error(
            "no se puede dividir los logits entre una temperatura 0: la temperatura 0 es la "
            "decodificación voraz (usa sample_next_token(..., temperature=0) o argmax)",
            "logits cannot be divided by a temperature of 0: temperature 0 is greedy decoding "
            "(use sample_next_token(..., temperature=0) or argmax)",
        )
    return float(temperature)


def check_top_k(k: int) -> int:
    """Return ``k`` if it is an integer ≥ 1; raise a ``ValueError`` otherwise."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise error(f"top_k debe ser un número entero ≥ 1, no {k!r}", f"top_k must be an integer ≥ 1, got {k!r}")
    if k < 1:
        raise error(
            f"top_k debe ser ≥ 1 (quedarse con al menos un token), no {k}",
            f"top_k must be ≥ 1 (keep at least one token), got {k}",
        )
    return int(k)


def check_top_p(p: float) -> float:
    """Return ``p`` if it is a number in (0, 1]; raise a ``ValueError`` otherwise."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or math.isnan(p):
        raise error(f"top_p debe ser un número en (0, 1], no {p!r}", f"top_p must be a number in (0, 1], got {p!r}")
    if not 0 < p <= 1:
        raise error(
            f"top_p es una probabilidad acumulada: debe estar en (0, 1], no {p}",
            f"top_p is a cumulative probability: it must lie in (0, 1], got {p}",
        )
    return float(p)


def _check_logits(logits: Tensor) -> None:
    if not isinstance(logits, Tensor) or not logits.is_floating_point() or logits.dim() == 0:
        raise error(
            "los logits deben ser un tensor de coma flotante de forma (..., V)",
            "the logits must be a floating-point tensor of shape (..., V)",
        )


def apply_temperature(logits: Tensor, temperature: float) -> Tensor:
    """logits / τ, for τ > 0. Shapes: (..., V) -> (..., V)."""
    _check_logits(logits)
    return logits / check_temperature(temperature, allow_zero=False)


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the ``k`` largest logits of each row (and any tied with the k-th); the rest
    become -inf. Shapes: (..., V) -> (..., V)."""
    _check_logits(logits)
    k = min(check_top_k(k), logits.size(-1))
    kth = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1) the k-th largest
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Keep, in each row, the smallest set of most likely tokens whose probability mass
    reaches ``p``; the rest become -inf. ``p = 1`` keeps every token.

    The set is found as ``transformers``' ``TopPLogitsWarper`` finds it, so both keep the
    same tokens: the least likely tokens are removed while their cumulative mass (summed from
    the least likely up, in at least float32) is ≤ 1 - p; the most likely token always stays.
    Tokens with equal logits at the boundary are split by the sort's order.
    Shapes: (..., V) -> (..., V)."""
    _check_logits(logits)
    p = check_top_p(p)
    if p >= 1:  # everything reaches p = 1; a float32 sum could reach 1.0 before the tail
        return logits.clone()
    scores = logits if logits.dtype == torch.float64 else logits.float()
    sorted_logits, order = scores.sort(dim=-1)  # (..., V) from the least likely up
    mass_up_to = sorted_logits.softmax(dim=-1).cumsum(dim=-1)  # (..., V) mass of it and the less likely
    remove_sorted = mass_up_to <= 1 - p  # the tail whose mass is at most 1 - p goes
    remove_sorted[..., -1] = False  # the most likely token always stays
    remove = remove_sorted.scatter(-1, order, remove_sorted)  # back to vocabulary order
    return logits.masked_fill(remove, float("-inf"))


def next_token_probs(
    logits: Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> Tensor:
    """The distribution the next token is drawn from: temperature, then top-k, then top-p.

    ``temperature=0`` puts all the mass on the most likely token (greedy decoding).
    Shapes: (..., V) -> probabilities (..., V).
    """
    _check_logits(logits)
    temperature = check_temperature(temperature)
    if top_k is not None:
        check_top_k(top_k)
    if top_p is not None:
        check_top_p(top_p)
    if temperature == 0:
        best = logits.argmax(dim=-1, keepdim=True)  # (..., 1)
        return torch.zeros_like(logits, dtype=torch.float).scatter(-1, best, 1.0)
    logits = apply_temperature(logits.float(), temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return torch.softmax(logits, dim=-1)


def sample_next_token(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Draw one token per row from :func:`next_token_probs`; ``temperature=0`` is the argmax.

    The same ``generator`` state gives the same tokens. Shapes: logits (B, V) -> ids (B,).
    """
    probs = next_token_probs(logits, temperature, top_k, top_p)  # (B, V)
    if probs.dim() != 2:
        raise error(
            f"sample_next_token espera logits de forma (B, V), no {tuple(logits.shape)}",
            f"sample_next_token expects logits of shape (B, V), got {tuple(logits.shape)}",
        )
    if temperature == 0:
        return probs.argmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)
