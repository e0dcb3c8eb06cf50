"""Measurements on what a trained model outputs: the mistakes a translator makes, its accuracy
by the length of the number, and where its attention heads look. No figures (``viz`` draws them).

Letters: L layers, H heads, T query length, S key length, K keys.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from .i18n import error, integer, tr

__all__ = [
    "accuracy_by_digits",
    "classify_mistake",
    "mistake_kind",
    "mistake_kinds_text",
    "MISTAKE_KIND_NAMES",
    "mistakes_table",
    "stack_maps",
    "attention_to",
    "attention_specificity",
    "top_heads",
]


def accuracy_by_digits(numbers: Sequence[int], correct: Sequence[bool]) -> dict[int, tuple[int, int]]:
    """Number of digits -> (right, total), from the fewest digits to the most."""
    right: Counter[int] = Counter()
    total: Counter[int] = Counter()
    for n, ok in zip(numbers, correct):
        d = len(str(n))
        total[d] += 1
        right[d] += bool(ok)
    return {d: (right[d], total[d]) for d in sorted(total)}


def _diff(predicted: str, expected: str) -> tuple[list[str], list[str]]:
    """The words that differ, after removing the common beginning and end."""
    p, e = predicted.split(), expected.split()
    start = 0
    while start < min(len(p), len(e)) and p[start] == e[start]:
        start += 1
    end = 0
    while end < min(len(p), len(e)) - start and p[-1 - end] == e[-1 - end]:
        end += 1
    return p[start : len(p) - end], e[start : len(e) - end]


def mistake_kind(predicted: str, expected: str) -> str:
    """How ``predicted`` differs from ``expected`` once their common beginning and end are set aside:
    ``"missing"`` (only words left out), ``"extra"`` (only words added), ``"changed"`` (other words,
    as many as the right ones) or ``"changed_count"`` (other words, and more or fewer of them)."""
    wrong, right = _diff(predicted, expected)
    if not wrong:
        return "missing"
    if not right:
        return "extra"
    return "changed" if len(wrong) == len(right) else "changed_count"


# What each kind of :func:`mistake_kind` is called when printed (the code keeps the English keys).
MISTAKE_KIND_NAMES = {
    "missing": ("faltan palabras", "missing words"),
    "extra": ("sobran palabras", "extra words"),
    "changed": ("cambian palabras", "words changed"),
    "changed_count": ("cambian palabras y su número", "words and their number changed"),
}


def mistake_kinds_text(counts: Mapping[str, int], lang: str = "es") -> str:
    """How many mistakes of each kind, in the reader's language:
    ``{"extra": 2, "missing": 5}`` -> ``"faltan palabras: 5 · sobran palabras: 2"``."""
    order = [k for k in MISTAKE_KIND_NAMES if k in counts]
    return " · ".join(f"{tr(lang, *MISTAKE_KIND_NAMES[k])}: {counts[k]}" for k in order)


def classify_mistake(predicted: str, expected: str, lang: str = "es") -> str:
    """A short description of how ``predicted`` differs from ``expected`` (word by word)."""
    wrong, right = _diff(predicted, expected)
    kind = mistake_kind(predicted, expected)
    if kind == "missing":
        return tr(lang, f"falta «{' '.join(right)}»", f"missing “{' '.join(right)}”")
    if kind == "extra":
        return tr(lang, f"sobra «{' '.join(wrong)}»", f"extra “{' '.join(wrong)}”")
    return tr(
        lang,
        f"«{' '.join(wrong)}» en vez de «{' '.join(right)}»",
        f"“{' '.join(wrong)}” instead of “{' '.join(right)}”",
    )


def mistakes_table(mistakes: Sequence[tuple[int, str, str, str]], lang: str = "es", limit: int = 20) -> str:
    """A plain-text table of (number, Spanish, predicted, expected) rows, with the kind of
    each mistake; at most ``limit`` rows."""
    head = tr(lang, ("número", "español", "predicción", "error"), ("number", "Spanish", "predicted", "mistake"))
    if not mistakes:
        return tr(lang, "(ningún error)", "(no mistakes)")
    rows = [(integer(n), es, pred, classify_mistake(pred, exp, lang)) for n, es, pred, exp in mistakes[:limit]]
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(4)]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    out = [line(head), line(["-" * w for w in widths])] + [line(r) for r in rows]
    if len(mistakes) > limit:
        out.append(tr(lang, f"… y {len(mistakes) - limit} más", f"… and {len(mistakes) - limit} more"))
    return "\n".join(out)


def stack_maps(maps: Sequence[Tensor], index: int = 0) -> Tensor:
    """One example's attention maps, every layer in one tensor: L maps of shape (B, H, T, S) or
    (H, T, S) -> (L, H, T, S)."""
    out = []
    for w in maps:
        if w.dim() == 4:
            w = w[index]
        if w.dim() != 3:
            raise error(
                f"se esperaban mapas de forma (B, H, T, S) o (H, T, S), no {tuple(w.shape)}",
                f"expected maps of shape (B, H, T, S) or (H, T, S), got {tuple(w.shape)}",
            )
        out.append(w.detach())
    if not out:
        raise error("no se ha dado ningún mapa de atención", "no attention maps given")
    return torch.stack(out)  # (L, H, T, S)


def attention_to(maps: Sequence[Tensor], query: int, keys: int | Sequence[int], index: int = 0) -> Tensor:
    """How much one query position attends to some key positions, in every layer and head.

    Args:
        maps: one map per layer, (B, H, T, S) or (H, T, S).
        query: position of the query token.
        keys: position (or positions) of the key tokens.
        index: which example of the batch.

    Shapes: -> (L, H) for one key, (L, H, K) for K keys.
    """
    w = stack_maps(maps, index)  # (L, H, T, S)
    if isinstance(keys, int):
        return w[:, :, query, keys]  # (L, H)
    return w[:, :, query, list(keys)]  # (L, H, K)


def attention_specificity(maps: Sequence[Tensor], query: int, key: int, index: int = 0) -> tuple[Tensor, Tensor]:
    """How much more ``query`` attends to ``key`` than the other tokens do, in every layer and head.

    Returns ``(specificity, baseline)``, both (L, H): the weight from ``query`` to ``key`` minus
    ``baseline``, the mean weight to ``key`` of every token other than ``query`` and ``key``.
    A head that makes every token look at ``key`` (a column) has a high baseline and a low specificity.
    """
    w = stack_maps(maps, index)  # (L, H, T, S)
    others = [j for j in range(w.size(2)) if j not in (query, key)]
    baseline = w[:, :, others, key].mean(-1)  # (L, H)
    return w[:, :, query, key] - baseline, baseline


def top_heads(scores: Tensor, k: int = 3) -> list[tuple[int, int]]:
    """The ``k`` (layer, head) pairs with the largest scores, largest first.

    Shapes: scores (L, H). Ties go to the lower layer, then the lower head.
    """
    if scores.dim() != 2:
        raise error(
            f"scores debe tener forma (L, H), no {tuple(scores.shape)}",
            f"scores must have shape (L, H), got {tuple(scores.shape)}",
        )
    L, H = scores.shape
    flat = scores.detach().flatten().cpu()
    order = sorted(range(L * H), key=lambda i: (-float(flat[i]), i))[:k]
    return [divmod(i, H) for i in order]
