"""Checkers for the exercises of notebook 09 (from GPT to generation): top-k, top-p and one
attention step with a key-value cache.

Each checker runs the student's function on cases whose right answer comes from the package
(:mod:`minitransformer.sampling`) or from attention over the whole sequence. A wrong answer is
first compared with what the usual mistakes give; otherwise the hint says which check failed
(the values of the kept tokens, the fill of the removed ones, how many tokens a row keeps, ...),
without writing the code. The filters must be written by hand: the package's filters and
``transformers``' warpers are switched off while the student's function runs.
The worked solutions are in the answer key :mod:`.solutions.nb09`.
"""

from __future__ import annotations

import importlib.util
import math
from typing import Any

import torch
from torch import Tensor

from ..attention import scaled_dot_product_attention
from ..sampling import top_k_filter, top_p_filter
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
    not_a_tensor,
    num,
    stop,
)

__all__ = [
    "HINTS",
    "check_top_k",
    "check_top_p",
    "check_cached_attention",
]


HINTS = Hints(
    {
        **COMMON_HINTS,
        # what a filter returns
        "filter_shape": (
            "devuelve logits con la misma forma que la entrada, {expected}; tu función devuelve {got}.",
            "return logits of the same shape as the input, {expected}; your function returns {got}.",
        ),
        "bool_mask": (
            "devuelves una máscara booleana: devuelve los logits, con -inf en los tokens que quitas.",
            "you return a boolean mask: return the logits, with -inf on the tokens you remove.",
        ),
        "not_float": (
            "devuelve un tensor de coma flotante, como los logits, no {dtype}.",
            "return a floating-point tensor, as the logits are, not {dtype}.",
        ),
        "low_precision": (
            "devuelve los logits en su tipo ({want}); en {dtype} sus valores cambian al redondearse.",
            "return the logits in their own type ({want}); in {dtype} their values change when rounded.",
        ),
        "filter_nan": ("el resultado contiene NaN.", "the result contains NaN."),
        "plus_inf": (
            "los tokens que quitas deben valer -inf, no +inf: la softmax da probabilidad 0 a -inf, "
            "pero con +inf el token se lleva toda la masa (o da NaN).",
            "the tokens you remove must be -inf, not +inf: the softmax gives -inf probability 0, "
            "but a +inf token takes all the mass (or gives NaN).",
        ),
        "probabilities": (
            "devuelves probabilidades: el ejercicio pide los logits filtrados (la softmax se aplica "
            "después, al muestrear).",
            "you return probabilities: the exercise asks for the filtered logits (the softmax comes "
            "later, when sampling).",
        ),
        "log_probabilities": (
            "devuelves log-probabilidades (los logits que quedan, renormalizados): el ejercicio pide los "
            "logits que quedan tal como llegan; la softmax renormaliza después, al muestrear.",
            "you return log-probabilities (the kept logits, renormalised): the exercise asks for the kept "
            "logits as they come in; the softmax renormalises later, when sampling.",
        ),
        "magic_fill": (
            "los tokens que quitas deben valer -inf, no {value}: -inf es exacto en cualquier precisión, "
            "mientras que un número finito puede quedarse corto con logits grandes (y se desborda en media "
            "precisión).",
            "the tokens you remove must be -inf, not {value}: -inf is exact in any precision, while a finite "
            "number can fall short with large logits (and overflows in half precision).",
        ),
        "finite_removed": (
            "los tokens que quitas deben valer -inf en los logits: con {value} (o cualquier número finito) "
            "la softmax les sigue dando probabilidad.",
            "the tokens you remove must become -inf in the logits: with {value} (or any finite number) the "
            "softmax still gives them probability.",
        ),
        "kept_changed": (
            "en la fila {row} el logit del token {token} debía quedarse como estaba ({want}) y vale {got}: "
            "los logits que quedan no se tocan; solo los quitados pasan a -inf.",
            "in row {row} the logit of token {token} had to stay as it was ({want}) and is {got}: the logits "
            "that stay are not changed; only the removed ones become -inf.",
        ),
        # top-k
        "k_smallest": (
            "te quedas con los k logits más pequeños: ordena de mayor a menor.",
            "you keep the k smallest logits: sort from largest to smallest.",
        ),
        "k_ties": (
            "en la fila {row} hay logits empatados con el k-ésimo y te quedas solo con k: los empatados se "
            "quedan todos (compara con el valor del k-ésimo, no con su posición).",
            "in row {row} some logits tie with the k-th one and you keep only k: the tied ones all stay "
            "(compare with the k-th value, not with its position).",
        ),
        "k_not_per_row": (
            "el umbral no es el de cada fila: para k = {k} cada fila se queda con **sus** k mayores "
            "logits, así que el k-ésimo se busca en la última dimensión, fila a fila.",
            "the threshold is not each row's own: for k = {k} each row keeps **its own** k largest "
            "logits, so the k-th is looked for along the last dimension, row by row.",
        ),
        "k_off_by_one": (
            "con k = {k} te quedas con {got} tokens en la fila {row} y deben ser {want}: revisa el índice "
            "del k-ésimo mayor (los índices empiezan en 0) o la comparación (< frente a ≤).",
            "with k = {k} you keep {got} tokens in row {row} and it must be {want}: check the index of the "
            "k-th largest (indices start at 0) or the comparison (< against ≤).",
        ),
        "k_count": (
            "con k = {k} te quedas con {got} tokens en la fila {row} y deben quedar {want}: los k mayores "
            "y los empatados con el k-ésimo.",
            "with k = {k} you keep {got} tokens in row {row} and {want} must stay: the k largest and any "
            "tied with the k-th.",
        ),
        "k_not_largest": (
            "con k = {k} te quedas con el número justo de tokens, pero en la fila {row} no son los de logits mayores.",
            "with k = {k} you keep the right number of tokens, but in row {row} they are not the ones "
            "with the largest logits.",
        ),
        # top-p
        "p_empty_row": (
            "con p = {p} la fila {row} se queda sin tokens: el token con el que la suma llega a p "
            "también se queda, así que el más probable se queda siempre.",
            "with p = {p} row {row} keeps no token: the token with which the sum reaches p stays too, "
            "so the most likely one always stays.",
        ),
        "p_not_unsorted": (
            "decides bien qué tokens quedan en el orden de más a menos probable, pero aplicas esa "
            "decisión en el orden del vocabulario: devuélvela a su sitio (con los índices del `sort`) "
            "antes de poner -inf.",
            "you decide right which tokens stay in the order from most to least likely, but you apply "
            "that decision in the vocabulary's order: put it back in place (with the `sort` indices) "
            "before setting -inf.",
        ),
        "p_on_logits": (
            "acumulas los logits: la suma que se compara con p es la de las **probabilidades** (la "
            "softmax de los logits), ordenadas de mayor a menor.",
            "you accumulate the logits: the sum compared with p is that of the **probabilities** (the "
            "softmax of the logits), sorted from largest to smallest.",
        ),
        "p_not_most_likely": (
            "en la fila {row} quitas un token más probable que otro que dejas: acumula la probabilidad "
            "recorriendo los tokens de más a menos probable.",
            "in row {row} you remove a token more likely than one you keep: accumulate the probability "
            "going from the most to the least likely token.",
        ),
        "p_short": (
            "con p = {p} la masa que conservas en la fila {row} ({mass}) no llega a p: el token con el "
            "que la suma alcanza o pasa p también se queda.",
            "with p = {p} the mass you keep in row {row} ({mass}) does not reach p: the token with which "
            "the sum reaches or passes p stays too.",
        ),
        "p_extra": (
            "con p = {p} te quedas con {got} tokens en la fila {row}, más de los necesarios: el conjunto "
            "más pequeño de tokens más probables que llega a p tiene {want}.",
            "with p = {p} you keep {got} tokens in row {row}, more than needed: the smallest set of most "
            "likely tokens that reaches p has {want}.",
        ),
        # cached attention
        "not_a_triple": (
            "devuelve una tupla de tres tensores: (out, k_cache, v_cache).",
            "return a tuple of three tensors: (out, k_cache, v_cache).",
        ),
        "order": (
            "el orden de lo que devuelves no es (out, k_cache, v_cache).",
            "what you return is not in the order (out, k_cache, v_cache).",
        ),
        "old_cache": (
            "la caché que devuelves tiene {S} posiciones, las de antes: añade las claves y valores nuevos "
            "para que el siguiente paso los encuentre.",
            "the cache you return has {S} positions, the old ones: append the new keys and values so that "
            "the next step finds them.",
        ),
        "cache_shape": (
            "la caché actualizada debe tener forma (B, H, S + T, d_head) = {expected}; tienes {k_shape} y "
            "{v_shape}: ¿concatenaste en la dimensión de las posiciones?",
            "the updated cache must have shape (B, H, S + T, d_head) = {expected}; yours are {k_shape} and "
            "{v_shape}: did you concatenate along the positions' dimension?",
        ),
        "out_shape": (
            "la salida debe tener forma (B, H, T, d_head) = {expected}; tienes {got}.",
            "the output must have shape (B, H, T, d_head) = {expected}; yours is {got}.",
        ),
        "not_float_triple": ("devuelve tensores de coma flotante.", "return floating-point tensors."),
        "out_nan": (
            "la salida contiene NaN (una softmax sobre una fila que es toda -inf da NaN: ¿hay alguna "
            "consulta que no vea ninguna clave?).",
            "the output contains NaN (a softmax over a row that is all -inf gives NaN: is there a query "
            "that sees no key?).",
        ),
        "prepended": (
            "las claves nuevas van **después** de las guardadas: la caché sigue el orden de las posiciones.",
            "the new keys go **after** the stored ones: the cache follows the order of the positions.",
        ),
        "swapped_caches": (
            "has intercambiado la caché de claves y la de valores.",
            "you swapped the key cache and the value cache.",
        ),
        "cache_keys": (
            "la caché de claves no es la de antes seguida de las claves nuevas.",
            "the key cache is not the old one followed by the new keys.",
        ),
        "cache_values": (
            "la caché de valores no es la de antes seguida de los valores nuevos.",
            "the value cache is not the old one followed by the new values.",
        ),
        "new_only": (
            "las consultas nuevas solo atienden a las claves nuevas: también deben ver las de la caché.",
            "the new queries only attend to the new keys: they must also see the cached ones.",
        ),
        "no_causal": (
            "con varios tokens nuevos, cada uno no debe ver los nuevos que vienen después: hace falta una "
            "máscara causal entre ellos.",
            "with several new tokens, none may see the new tokens after it: a causal mask is needed among them.",
        ),
        "unshifted": (
            "la máscara causal no tiene en cuenta las S posiciones guardadas: el token nuevo i está en la "
            "posición S + i y ve todas las claves hasta ella.",
            "the causal mask ignores the S stored positions: new token i sits at position S + i and sees "
            "every key up to it.",
        ),
        "no_scale": ("falta dividir las puntuaciones entre √d_head.", "the scores must be divided by √d_head."),
        "scale_length": (
            "escala por √d_head (la última dimensión de q), no por la longitud.",
            "scale by √d_head (the last dimension of q), not by the length.",
        ),
        "scale_width": ("escala por √d_head, no por √(H·d_head).", "scale by √d_head, not by √(H·d_head)."),
        "attention_values": (
            "con S = {S} posiciones guardadas y T = {T} nuevas, las cachés están bien pero la salida no "
            "coincide con la atención sobre la secuencia completa: softmax(q·Kᵀ/√d_head) sobre todas las "
            "claves permitidas, por V.",
            "with S = {S} stored positions and T = {T} new ones, the caches are right but the output does "
            "not match attention over the whole sequence: softmax(q·Kᵀ/√d_head) over every allowed key, "
            "times V.",
        ),
    }
)


# ---- shared by the exercises below ---------------------------------------------------------------

NEG_INF = float("-inf")


# The package's filters and transformers' warpers do the exercise: switched off while the student's code runs.
_FILTERS = [
    ("minitransformer.sampling.top_k_filter", "top_k_filter"),
    ("minitransformer.sampling.top_p_filter", "top_p_filter"),
    ("minitransformer.sampling.next_token_probs", "next_token_probs"),
    ("minitransformer.sampling.sample_next_token", "sample_next_token"),
]
if importlib.util.find_spec("transformers") is not None:
    _FILTERS += [
        ("transformers.generation.logits_process.TopKLogitsWarper.__call__", "TopKLogitsWarper"),
        ("transformers.generation.logits_process.TopPLogitsWarper.__call__", "TopPLogitsWarper"),
    ]
_WHY = (
    "el ejercicio es escribir el filtro tú, con operaciones de PyTorch (`sort`, `topk`, `cumsum`, `masked_fill`, …).",
    "the exercise is to write the filter yourself, with PyTorch operations (`sort`, `topk`, `cumsum`, `masked_fill`, …).",
)


def _run_filter(lang: str, fn: Any, logits: Tensor, arg: float) -> Tensor:
    """The student's filtered logits as a float64 tensor (the filters switched off while it runs);
    anything that is not logits of the input's shape and type stops the check with its hint."""
    with forbid(_FILTERS, *_WHY):
        got = attempt(lang, fn, logits.clone(), arg)
    if not isinstance(got, Tensor):
        raise stop(not_a_tensor(lang, got))
    if tuple(got.shape) != tuple(logits.shape):
        raise stop(HINTS(lang, "filter_shape", expected=tuple(logits.shape), got=tuple(got.shape)))
    if got.dtype == torch.bool:
        raise stop(HINTS(lang, "bool_mask"))
    if not got.is_floating_point():
        raise stop(HINTS(lang, "not_float", dtype=str(got.dtype).removeprefix("torch.")))
    if got.dtype not in (torch.float32, torch.float64):
        want = str(logits.dtype).removeprefix("torch.")
        raise stop(HINTS(lang, "low_precision", want=want, dtype=str(got.dtype).removeprefix("torch.")))
    got = got.detach().to("cpu", torch.float64)
    if bool(torch.isnan(got).any()):
        raise stop(HINTS(lang, "filter_nan"))
    return got


def _kept(lang: str, got: Tensor, logits: Tensor, want: Tensor) -> Tensor:
    """Which tokens the answer keeps (their logit unchanged); stops the check with its hint when a
    value is neither the logit as it came nor -inf."""
    logits = logits.double()
    if bool(torch.isposinf(got).any()):
        raise stop(HINTS(lang, "plus_inf"))
    same = torch.isclose(got, logits, rtol=1e-6, atol=1e-6)
    changed = ~same & (got != NEG_INF)
    if not bool(changed.any()):
        return same
    if close(got, torch.softmax(want, dim=-1)):
        raise stop(HINTS(lang, "probabilities"))
    log_probs = torch.log_softmax(want, dim=-1)
    if torch.equal(got.isfinite(), want.isfinite()) and close(got[want.isfinite()], log_probs[want.isfinite()]):
        raise stop(HINTS(lang, "log_probabilities"))
    wrong_kept = changed & want.isfinite()
    if bool(wrong_kept.any()):
        row, token = (int(i) for i in wrong_kept.nonzero()[0])
        raise stop(
            HINTS(
                lang,
                "kept_changed",
                row=row,
                token=token,
                want=num(lang, logits[row, token].item()),
                got=num(lang, got[row, token].item()),
            )
        )
    value = got[changed][0].item()
    raise stop(HINTS(lang, "magic_fill" if value < -1e4 else "finite_removed", value=num(lang, value)))


# ---- 09.top_k ------------------------------------------------------------------------------------


def _top_k_cases() -> list[tuple[Tensor, int]]:
    g = torch.Generator().manual_seed(9)
    wide = torch.randn(3, 11, generator=g) * 4  # (B, V) with B ≠ V ≠ k
    ties = torch.tensor([[1.0, 3.0, 3.0, 0.0, 2.0, -1.0], [5.0, 5.0, 5.0, 1.0, 0.0, 2.0]])
    spread = torch.tensor([[900.0, -50.0, 0.0, 12.0, 400.0, -700.0, 3.0]])
    shifted = torch.randn(4, 9, generator=g) + torch.tensor([[0.0], [30.0], [-30.0], [5.0]])  # rows on other scales
    return [
        (wide, 3),
        (wide, 1),
        (wide, 11),
        (ties, 1),
        (ties, 2),
        (spread, 4),
        (shifted, 3),
        (torch.randn(5, 40, generator=g), 7),
    ]


def _kept_top_k_mistakes(logits: Tensor, k: int) -> list[Tensor]:
    """Which tokens a threshold not taken row by row keeps: the whole tensor's k-th, the k-th down each
    column, or the sorted row number k - 1 (``sort(...).values[k - 1]`` without ``...,``)."""
    B = logits.size(0)
    whole = logits.flatten().sort(descending=True).values[min(k, logits.numel()) - 1]
    column = logits.sort(dim=0, descending=True).values[min(k, B) - 1]  # (V,) one per column
    row = logits.sort(dim=-1, descending=True).values[min(k, B) - 1]  # (V,) a sorted row, not a threshold
    kept = [logits >= whole, logits >= column, logits >= row]
    return [m for m in kept if not bool(m.all())]  # keeping everything is not this mistake


def _top_k_mistake(lang: str, kept: Tensor, want_kept: Tensor, logits: Tensor, k: int) -> tuple[Feedback, bool]:
    """The hint for a wrong set of kept tokens, and whether it names a mistake (rather than a fact)."""
    counts, want_counts = kept.sum(dim=-1), want_kept.sum(dim=-1)
    if k < logits.size(-1) and torch.equal(kept, top_k_filter(-logits, k).isfinite()):
        return HINTS(lang, "k_smallest"), True
    tied = [r for r in range(len(kept)) if int(want_counts[r]) > k and int(counts[r]) == k]
    if tied and bool((kept <= want_kept).all()):
        return HINTS(lang, "k_ties", row=tied[0]), True
    not_per_row = by_key([[("k_not_per_row", m) for m in _kept_top_k_mistakes(logits, k)]])
    if diagnose([kept], not_per_row, same=torch.equal):
        return HINTS(lang, "k_not_per_row", k=k), True
    wrong_rows = [r for r in range(len(kept)) if int(counts[r]) != int(want_counts[r])]
    if wrong_rows:
        r, one_off = wrong_rows[0], bool(((counts - want_counts).abs() == 1).all())
        key = "k_off_by_one" if one_off else "k_count"
        return HINTS(lang, key, k=k, row=r, got=int(counts[r]), want=int(want_counts[r])), one_off
    r = next(r for r in range(len(kept)) if not torch.equal(kept[r], want_kept[r]))
    return HINTS(lang, "k_not_largest", k=k, row=r), False


def _named_in_any_case(diagnoses: list[tuple[Feedback, bool]], success: Feedback) -> Feedback:
    """How the cases' diagnoses combine (ladders of checks, not :func:`~._core.diagnose`'s banks): every case
    is run first, and a hint that names a mistake, from any case, wins over a fact from an earlier one, because
    a filter that fails only on ties, or only on one scale, shows its mistake in that case alone; the first
    failing case's fact otherwise; ``success`` when no case failed."""
    named = [fb for fb, is_named in diagnoses if is_named]
    return (named or [fb for fb, _ in diagnoses] or [success])[0]


def _filter_diagnoses(lang, fn, cases, reference, mistake) -> list[tuple[Feedback, bool]]:
    """For each case (logits, k or p) where the student's filter keeps other tokens than the
    package's ``reference``, the diagnosis ``mistake`` gives (with whether it names the mistake)."""
    diagnoses = []
    for logits, knob in cases:
        got = _run_filter(lang, fn, logits, knob)
        want = reference(logits, knob).double()
        kept = _kept(lang, got, logits, want)
        if not torch.equal(kept, want.isfinite()):
            diagnoses.append(mistake(lang, kept, want.isfinite(), logits, knob))
    return diagnoses


@exercise("09.top_k")
def check_top_k(fn, lang: str | None = None) -> Feedback:
    """``fn(logits, k)``: logits (B, V) -> logits with all but the k largest of each row
    (and ties with the k-th) set to -inf."""
    return _named_in_any_case(
        _filter_diagnoses(lang, fn, _top_k_cases(), top_k_filter, _top_k_mistake),
        correct(
            lang,
            "Los logits que quedan no cambian: la softmax los renormaliza al muestrear.",
            "The logits that stay are unchanged: the softmax renormalises them when sampling.",
        ),
    )


# ---- 09.top_p ------------------------------------------------------------------------------------


def _top_p_cases() -> list[tuple[Tensor, float]]:
    probs = torch.tensor([[0.15, 0.5, 0.05, 0.3], [0.3, 0.05, 0.15, 0.5]])  # not in sorted order
    known = probs.log()
    g = torch.Generator().manual_seed(4)
    wide = torch.randn(3, 13, generator=g) * 2
    return [
        (known, 0.45),
        (known, 0.55),
        (known, 0.85),
        (known, 0.97),
        (known, 1.0),
        (wide, 0.6),
        (wide, 0.9),
        (torch.tensor([[30.0, 0.0, -10.0, 1.0, 2.0]]), 0.5),
        (torch.tensor([[-2.0, 3.0, 1.0, 0.5, 3.5, -1.0, 2.0]]) + 40.0, 0.9),  # large logits: probabilities, not logits
    ]


def _kept_top_p_mistakes(logits: Tensor, p: float, want_kept: Tensor) -> dict[str, Tensor]:
    """Which tokens two usual mistakes keep: the decision left in sorted order, and a sum of logits."""
    sorted_logits, order = logits.double().sort(dim=-1, descending=True)
    in_sorted_order = want_kept.gather(-1, order)  # the right decision, not put back in place
    before = sorted_logits.cumsum(dim=-1) - sorted_logits
    on_logits = torch.zeros_like(want_kept).scatter(-1, order, before < p)
    mistakes = {"p_not_unsorted": in_sorted_order, "p_on_logits": on_logits}
    return {key: m for key, m in mistakes.items() if not bool(m.all())}  # keeping everything is not these


def _top_p_mistake(lang: str, kept: Tensor, want_kept: Tensor, logits: Tensor, p: float) -> tuple[Feedback, bool]:
    """The hint for a wrong set of kept tokens, and whether it names a mistake (rather than a fact)."""
    p_text = num(lang, p, 6)
    counts, want_counts = kept.sum(dim=-1), want_kept.sum(dim=-1)
    empty = [r for r in range(len(kept)) if int(counts[r]) == 0]
    if empty:
        return HINTS(lang, "p_empty_row", p=p_text, row=empty[0]), True
    key = diagnose([kept], by_key([_kept_top_p_mistakes(logits, p, want_kept)]), same=torch.equal)
    if key is not None:
        return HINTS(lang, key), True
    probs = torch.softmax(logits.double(), dim=-1)
    for r in range(len(kept)):
        if bool((~kept[r]).any()) and probs[r][kept[r]].min() < probs[r][~kept[r]].max():
            return HINTS(lang, "p_not_most_likely", row=r), False
    mass = (probs * kept).sum(dim=-1)
    short = [r for r in range(len(kept)) if float(mass[r]) < p - 1e-6]
    if short:
        r = short[0]
        return HINTS(lang, "p_short", p=p_text, row=r, mass=num(lang, float(mass[r]), 3)), False
    r = next(r for r in range(len(kept)) if int(counts[r]) != int(want_counts[r]))
    return HINTS(lang, "p_extra", p=p_text, row=r, got=int(counts[r]), want=int(want_counts[r])), False


@exercise("09.top_p")
def check_top_p(fn, lang: str | None = None) -> Feedback:
    """``fn(logits, p)``: logits (B, V) -> logits where, in each row, only the smallest set of
    most likely tokens whose probability reaches p stays; the rest are -inf."""
    return _named_in_any_case(
        _filter_diagnoses(lang, fn, _top_p_cases(), top_p_filter, _top_p_mistake),
        correct(
            lang,
            "El tamaño del conjunto que queda cambia con la forma de cada distribución.",
            "The size of the set that stays changes with the shape of each distribution.",
        ),
    )


# ---- 09.cached_attention -------------------------------------------------------------------------


def _attention_cases() -> list[tuple[Tensor, ...]]:
    g = torch.Generator().manual_seed(3)
    cases = []
    for B, H, S, T, Dh in [(2, 3, 5, 1, 4), (1, 2, 4, 3, 6), (2, 1, 0, 3, 5), (1, 2, 7, 2, 8)]:
        q, k, v = (torch.randn(B, H, T, Dh, generator=g) for _ in range(3))
        k_cache, v_cache = (torch.randn(B, H, S, Dh, generator=g) for _ in range(2))
        cases.append((q, k, v, k_cache, v_cache))
    return cases


def _attend(q: Tensor, keys: Tensor, values: Tensor, allowed: Tensor | None, scale: float) -> Tensor:
    scores = q @ keys.transpose(-2, -1) / scale
    if allowed is not None:
        scores = scores.masked_fill(~allowed, NEG_INF)
    return torch.softmax(scores, dim=-1) @ values


def _cache_mistakes(q: Tensor, k: Tensor, v: Tensor, keys: Tensor, values: Tensor, S: int) -> dict[str, list[Tensor]]:
    """The output (B, H, T, Dh) each typical mistake gives, where it differs from the right one: ``keys``
    and ``values`` (B, H, S + T, Dh) are the right caches, ``k`` and ``v`` the new tokens' alone."""
    B, H, T, Dh = q.shape
    L = S + T
    causal = torch.ones(T, L, dtype=torch.bool).tril(diagonal=S)  # new token i sees 0 … S + i
    mistakes = {"new_only": scaled_dot_product_attention(q, k, v, torch.ones(T, T, dtype=torch.bool).tril())[0]}
    if T > 1:  # one new token sees everything anyway
        mistakes["no_causal"] = scaled_dot_product_attention(q, keys, values)[0]
    if S:  # without a cache the mask needs no shift
        mistakes["unshifted"] = scaled_dot_product_attention(
            q, keys, values, torch.ones(T, L, dtype=torch.bool).tril()
        )[0]
    for scale, key in [(1.0, "no_scale"), (math.sqrt(L), "scale_length"), (math.sqrt(H * Dh), "scale_width")]:
        if scale != math.sqrt(Dh):
            mistakes[key] = _attend(q, keys, values, causal, scale)
    return {key: [out] for key, out in mistakes.items()}


def _cache_step(
    lang: str, got: Any, q: Tensor, k: Tensor, v: Tensor, k_cache: Tensor, v_cache: Tensor
) -> tuple[Feedback, bool] | None:
    """``None`` if ``(out, k_cache, v_cache)`` is right; else the hint of the check it fails and whether
    the hint names a mistake (rather than a fact). What is wrong in every case stops the check at once."""
    B, H, T, Dh = q.shape
    S = k_cache.size(2)
    L = S + T
    if not isinstance(got, (tuple, list)) or len(got) != 3:
        raise stop(HINTS(lang, "not_a_triple"))
    for x in got:
        if not isinstance(x, Tensor):
            raise stop(not_a_tensor(lang, x))
    out, new_k, new_v = got
    shapes = (tuple(out.shape), tuple(new_k.shape), tuple(new_v.shape))
    expected = ((B, H, T, Dh), (B, H, L, Dh), (B, H, L, Dh))
    if S and shapes != expected and sorted(shapes) == sorted(expected):
        raise stop(HINTS(lang, "order"))
    if S and (B, H, S, Dh) in shapes[1:]:
        raise stop(HINTS(lang, "old_cache", S=S))
    if shapes[1:] != expected[1:]:
        raise stop(HINTS(lang, "cache_shape", expected=expected[1], k_shape=shapes[1], v_shape=shapes[2]))
    if shapes[0] != expected[0]:
        raise stop(HINTS(lang, "out_shape", expected=expected[0], got=shapes[0]))
    if not all(x.is_floating_point() for x in got):
        raise stop(HINTS(lang, "not_float_triple"))
    out, new_k, new_v = (x.detach().to("cpu", torch.float32) for x in got)
    want_k, want_v = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
    if not (close(new_k, want_k) and close(new_v, want_v)):
        if S and (close(new_k, torch.cat([k, k_cache], dim=2)) or close(new_v, torch.cat([v, v_cache], dim=2))):
            raise stop(HINTS(lang, "prepended"))
        if close(new_k, want_v) and close(new_v, want_k):
            raise stop(HINTS(lang, "swapped_caches"))
        raise stop(HINTS(lang, "cache_values" if close(new_k, want_k) else "cache_keys"))
    if bool(torch.isnan(out).any()):
        return HINTS(lang, "out_nan"), True
    causal = torch.ones(T, L, dtype=torch.bool).tril(diagonal=S)  # new token i sees 0 … S + i
    if close(out, scaled_dot_product_attention(q, want_k, want_v, causal)[0], atol=1e-5):
        return None
    key = diagnose([out], _cache_mistakes(q, k, v, want_k, want_v, S), atol=1e-5)
    if key is not None:
        return HINTS(lang, key), True
    return HINTS(lang, "attention_values", S=S, T=T), False


@exercise("09.cached_attention")
def check_cached_attention(fn, lang: str | None = None) -> Feedback:
    """``fn(q, k, v, k_cache, v_cache)`` -> ``(out, k_cache, v_cache)``: the new tokens'
    causal attention over the cached and new keys, and the cache with the new keys and
    values appended."""
    diagnoses = []
    for q, k, v, k_cache, v_cache in _attention_cases():
        got = attempt(lang, fn, q.clone(), k.clone(), v.clone(), k_cache.clone(), v_cache.clone())
        diagnosis = _cache_step(lang, got, q, k, v, k_cache, v_cache)
        if diagnosis is not None:
            diagnoses.append(diagnosis)
    return _named_in_any_case(
        diagnoses,
        correct(
            lang,
            "Es lo que hace cada capa de GPT en cada paso de la generación con caché.",
            "This is what every GPT layer does at every step of cached generation.",
        ),
    )
