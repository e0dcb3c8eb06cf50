"""Checkers for the exercises of notebook 09 (from GPT to generation): top-k, top-p and one
attention step with a key-value cache.

Each checker runs the student's function on cases whose right answer comes from the package
(:mod:`minitransformer.sampling`) or from attention over the whole sequence, recognises the
usual mistakes and names them without writing the code. ``solution_<exercise>`` is a worked
answer each checker accepts.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from ..attention import scaled_dot_product_attention
from ..i18n import decimal
from ..sampling import top_k_filter, top_p_filter
from ._core import Feedback, attempt, checker, close, correct, not_a_tensor, not_yet, num
from .registry import explain

__all__ = [
    "check_top_k",
    "check_top_p",
    "check_cached_attention",
    "solution_my_top_k",
    "solution_my_top_p",
    "solution_my_cached_attention",
]

NEG_INF = float("-inf")


# ---------------------------------------------------------------------------------------
# Worked solutions
# ---------------------------------------------------------------------------------------


@explain(
    "Ordena cada fila de mayor a menor y toma el k-ésimo logit: todo lo que queda por debajo pasa a -inf y "
    "la softmax le dará probabilidad 0. Los empates con el k-ésimo se quedan, como en la función del paquete.",
    "Sort each row from largest to smallest and take the k-th logit: everything below it becomes -inf and the "
    "softmax gives it probability 0. Ties with the k-th stay, as in the package's function.",
)
def solution_my_top_k(logits: Tensor, k: int) -> Tensor:
    """Keep the k largest logits of each row (ties with the k-th too), -inf elsewhere."""
    kth = logits.sort(dim=-1, descending=True).values[..., k - 1 : k]  # (B, 1) the k-th largest
    return logits.masked_fill(logits < kth, float("-inf"))


@explain(
    "Ordena las probabilidades de mayor a menor y suma: un token se queda si la masa de los más probables que "
    "él aún no llega a p. Así el primero siempre se queda y el conjunto es el más pequeño cuya masa alcanza p. "
    "`scatter` devuelve la decisión al orden del vocabulario.",
    "Sort the probabilities from largest to smallest and add them up: a token stays if the mass of the tokens "
    "more likely than it has not reached p yet. So the first one always stays and the set is the smallest whose "
    "mass reaches p. `scatter` puts the decision back in vocabulary order.",
)
def solution_my_top_p(logits: Tensor, p: float) -> Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches p, -inf elsewhere."""
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)  # (B, V)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass of the more likely tokens
    keep_sorted = mass_before < p  # the first token always stays (mass before it: 0)
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)  # back to vocabulary order
    return logits.masked_fill(~keep, float("-inf"))


@explain(
    "Las claves y los valores nuevos se añaden al final de la caché (dimensión 2, la de las posiciones); las "
    "consultas nuevas miran a todo lo guardado y, entre las nuevas, solo hacia atrás: la consulta i ve las "
    "posiciones 0 … S + i, una máscara triangular desplazada S columnas.",
    "The new keys and values go at the end of the cache (dimension 2, the positions); the new queries look at "
    "everything stored and, among the new ones, only backwards: query i sees positions 0 … S + i, a triangular "
    "mask shifted by S columns.",
)
def solution_my_cached_attention(q: Tensor, k: Tensor, v: Tensor, k_cache: Tensor, v_cache: Tensor):
    """Append the new keys and values to the cache; the new queries attend causally."""
    k_cache = torch.cat([k_cache, k], dim=2)  # (B, H, S + T, Dh)
    v_cache = torch.cat([v_cache, v], dim=2)  # (B, H, S + T, Dh)
    T, L = q.size(2), k_cache.size(2)
    scores = q @ k_cache.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T, S + T)
    allowed = torch.ones(T, L, dtype=torch.bool, device=q.device).tril(diagonal=L - T)  # new token i sees 0 … S + i
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v_cache, k_cache, v_cache


# ---------------------------------------------------------------------------------------
# Shared checks of what a filter returns
# ---------------------------------------------------------------------------------------


def _filtered(lang: str, got: Any, logits: Tensor) -> Tensor | Feedback:
    """The student's filtered logits as a float tensor, or the feedback saying what is wrong."""
    if not isinstance(got, Tensor):
        return not_a_tensor(lang, got)
    if tuple(got.shape) != tuple(logits.shape):
        return not_yet(
            lang,
            f"devuelve logits con la misma forma que la entrada, {tuple(logits.shape)}; "
            f"tu función devuelve {tuple(got.shape)}.",
            f"return logits of the same shape as the input, {tuple(logits.shape)}; "
            f"your function returns {tuple(got.shape)}.",
        )
    if got.dtype == torch.bool:
        return not_yet(
            lang,
            "devuelves una máscara booleana: devuelve los logits, con -inf en los tokens que quitas.",
            "you return a boolean mask: return the logits, with -inf on the tokens you remove.",
        )
    if not got.is_floating_point():
        return not_yet(
            lang,
            f"devuelve un tensor de coma flotante, no {got.dtype}.",
            f"return a floating-point tensor, not {got.dtype}.",
        )
    got = got.detach().to("cpu", torch.float64)
    if bool(torch.isnan(got).any()):
        return not_yet(lang, "el resultado contiene NaN.", "the result contains NaN.")
    return got


def _removed_wrongly(lang: str, got: Tensor, logits: Tensor, want: Tensor) -> Feedback | None:
    """Feedback when the kept tokens are right but the removed ones are not -inf, or when
    the student returned probabilities; ``None`` otherwise."""
    kept = want.isfinite()
    probs = torch.softmax(want, dim=-1)
    if close(got, probs, atol=1e-5):
        return not_yet(
            lang,
            "devuelves probabilidades: el ejercicio pide los logits filtrados (el softmax se aplica "
            "después, al muestrear).",
            "you return probabilities: the exercise asks for the filtered logits (the softmax comes "
            "later, when sampling).",
        )
    removed = got[~kept]
    if (
        close(got[kept], logits[kept].double(), atol=1e-5)
        and bool(removed.isfinite().all())
        and not close(removed, logits[~kept].double(), atol=1e-5)
    ):
        return not_yet(
            lang,
            "los tokens que quitas deben valer -inf en los logits: con 0 (o cualquier número finito) "
            "el softmax les sigue dando probabilidad.",
            "the tokens you remove must become -inf in the logits: with 0 (or any finite number) the "
            "softmax still gives them probability.",
        )
    return None


# ---------------------------------------------------------------------------------------
# Exercise 1: top-k
# ---------------------------------------------------------------------------------------


def _top_k_cases() -> list[tuple[Tensor, int]]:
    g = torch.Generator().manual_seed(9)
    wide = torch.randn(3, 11, generator=g) * 4  # (B, V) with B ≠ V ≠ k
    ties = torch.tensor([[1.0, 3.0, 3.0, 0.0, 2.0, -1.0], [5.0, 5.0, 5.0, 1.0, 0.0, 2.0]])
    spread = torch.tensor([[900.0, -50.0, 0.0, 12.0, 400.0, -700.0, 3.0]])
    return [(wide, 3), (wide, 1), (wide, 11), (ties, 1), (ties, 2), (spread, 4), (torch.randn(5, 40, generator=g), 7)]


@checker
def check_top_k(fn, lang: str = "es") -> Feedback:
    """``fn(logits, k)``: logits (B, V) -> logits with all but the k largest of each row
    (and ties with the k-th) set to -inf."""
    for logits, k in _top_k_cases():
        got = _filtered(lang, attempt(lang, fn, logits.clone(), k), logits)
        if isinstance(got, Feedback):
            return got
        want = top_k_filter(logits, k).double()
        if torch.equal(got.isfinite(), want.isfinite()) and close(got[want.isfinite()], want[want.isfinite()]):
            continue
        wrong = _removed_wrongly(lang, got, logits, want)
        if wrong is not None:
            return wrong
        kept = got.isfinite()
        counts, want_counts = kept.sum(dim=-1), want.isfinite().sum(dim=-1)
        if k < logits.size(-1) and torch.equal(kept, top_k_filter(-logits, k).isfinite()):
            return not_yet(
                lang,
                "te quedas con los k logits más pequeños: ordena de mayor a menor.",
                "you keep the k smallest logits: sort from largest to smallest.",
            )
        if bool((counts == k).all()) and bool((want_counts > k).any()) and bool((kept <= want.isfinite()).all()):
            return not_yet(
                lang,
                "en caso de empate con el k-ésimo logit, todos los empatados se quedan "
                "(compara con el valor del k-ésimo, no con su posición).",
                "when logits tie with the k-th one, all the tied ones stay "
                "(compare with the k-th value, not with its position).",
            )
        if k < logits.size(-1) and (torch.equal(counts, want_counts + 1) or torch.equal(counts, want_counts - 1)):
            return not_yet(
                lang,
                f"te quedas con {int(counts[0])} tokens por fila y deben ser {int(want_counts[0])}: "
                "revisa el índice del k-ésimo mayor (los índices empiezan en 0).",
                f"you keep {int(counts[0])} tokens per row and it must be {int(want_counts[0])}: check the "
                "index of the k-th largest (indices start at 0).",
            )
        if logits.size(0) > 1 and not torch.equal(counts, want_counts):
            return not_yet(
                lang,
                f"para k = {k} cada fila debe quedarse con sus k mayores logits: el umbral es el "
                "k-ésimo valor de **esa fila**, en la última dimensión.",
                f"for k = {k} each row must keep its own k largest logits: the threshold is the k-th value "
                "of **that row**, along the last dimension.",
            )
        return not_yet(
            lang,
            f"para k = {k} y logits de forma {tuple(logits.shape)} no quedan los tokens esperados: "
            "cada fila conserva sus k mayores logits y el resto pasa a -inf.",
            f"for k = {k} and logits of shape {tuple(logits.shape)} the right tokens do not stay: each "
            "row keeps its k largest logits and the rest become -inf.",
        )
    return correct(
        lang,
        "Los logits que quedan no cambian: el softmax los renormaliza al muestrear.",
        "The logits that stay are unchanged: the softmax renormalises them when sampling.",
    )


# ---------------------------------------------------------------------------------------
# Exercise 2: top-p
# ---------------------------------------------------------------------------------------


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
    ]


@checker
def check_top_p(fn, lang: str = "es") -> Feedback:
    """``fn(logits, p)``: logits (B, V) -> logits where, in each row, only the smallest set of
    most likely tokens whose probability reaches p stays; the rest are -inf."""
    for logits, p in _top_p_cases():
        got = _filtered(lang, attempt(lang, fn, logits.clone(), p), logits)
        if isinstance(got, Feedback):
            return got
        want = top_p_filter(logits, p).double()
        kept, want_kept = got.isfinite(), want.isfinite()
        if torch.equal(kept, want_kept) and close(got[want_kept], want[want_kept]):
            continue
        wrong = _removed_wrongly(lang, got, logits, want)
        if wrong is not None:
            return wrong
        p_es = num("es", p, 6)  # a decimal comma in Spanish; the English text writes p as Python does
        probs = torch.softmax(logits.double(), dim=-1)
        mass = (probs * kept).sum(dim=-1)
        if bool((kept.sum(dim=-1) == 0).any()):
            return not_yet(
                lang,
                f"con p = {p_es} alguna fila se queda sin tokens: el token con el que la suma llega a p "
                "también se queda, así que el más probable se queda siempre.",
                f"with p = {p} some row keeps no token: the token with which the sum reaches p stays too, "
                "so the most likely one always stays.",
            )
        # the kept set is not the most likely tokens: not sorted, or sorted the wrong way
        most_likely = all(
            probs[r][kept[r]].min() >= probs[r][~kept[r]].max() if bool((~kept[r]).any()) else True
            for r in range(len(probs))
        )
        if not most_likely:
            return not_yet(
                lang,
                "los tokens que quedan no son los más probables: acumula la probabilidad recorriendo los "
                "tokens de más a menos probable, y devuelve el resultado en el orden del vocabulario.",
                "the tokens that stay are not the most likely ones: accumulate the probability going from "
                "the most to the least likely token, and return the result in the vocabulary's order.",
            )
        if bool((mass < p - 1e-6).any()):
            kept_es = decimal(mass.min().item(), 2, "es")
            return not_yet(
                lang,
                f"con p = {p_es} la masa que conservas ({kept_es}) no llega a p: el token "
                "con el que la suma alcanza o pasa p también se queda.",
                f"with p = {p} the mass you keep ({mass.min().item():.2f}) does not reach p: the token with "
                "which the sum reaches or passes p stays too.",
            )
        return not_yet(
            lang,
            f"con p = {p_es} te quedas con más tokens de los necesarios: el conjunto debe ser el más "
            "pequeño cuya masa llega a p (para en cuanto la suma alcanza p).",
            f"with p = {p} you keep more tokens than needed: the set must be the smallest whose mass "
            "reaches p (stop as soon as the sum reaches p).",
        )
    return correct(
        lang,
        "El tamaño del núcleo cambia con la forma de cada distribución.",
        "The size of the nucleus changes with the shape of each distribution.",
    )


# ---------------------------------------------------------------------------------------
# Exercise 3: one attention step with a cache
# ---------------------------------------------------------------------------------------


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


@checker
def check_cached_attention(fn, lang: str = "es") -> Feedback:
    """``fn(q, k, v, k_cache, v_cache)`` -> ``(out, k_cache, v_cache)``: the new tokens'
    causal attention over the cached and new keys, and the cache with the new keys and
    values appended."""
    for q, k, v, k_cache, v_cache in _attention_cases():
        B, H, T, Dh = q.shape
        S = k_cache.size(2)
        got = attempt(lang, fn, q.clone(), k.clone(), v.clone(), k_cache.clone(), v_cache.clone())
        if not isinstance(got, (tuple, list)) or len(got) != 3:
            return not_yet(
                lang,
                "devuelve una tupla de tres tensores: (out, k_cache, v_cache).",
                "return a tuple of three tensors: (out, k_cache, v_cache).",
            )
        if not all(isinstance(x, Tensor) for x in got):
            bad = next(x for x in got if not isinstance(x, Tensor))
            return not_a_tensor(lang, bad)
        out, new_k, new_v = got
        L = S + T
        want_k, want_v = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
        causal = torch.ones(T, L, dtype=torch.bool).tril(diagonal=S)  # new token i sees 0 … S + i
        want_out = scaled_dot_product_attention(q, want_k, want_v, causal)[0]
        shapes = (tuple(out.shape), tuple(new_k.shape), tuple(new_v.shape))
        expected = ((B, H, T, Dh), (B, H, S + T, Dh), (B, H, S + T, Dh))
        if S and shapes != expected and sorted(shapes) == sorted(expected):
            return not_yet(
                lang,
                "el orden de lo que devuelves no es (out, k_cache, v_cache).",
                "what you return is not in the order (out, k_cache, v_cache).",
            )
        if shapes[1] == (B, H, S, Dh) and S:
            return not_yet(
                lang,
                f"la caché que devuelves tiene {S} posiciones, las de antes: añade las claves y valores "
                "nuevos para que el siguiente paso los encuentre.",
                f"the cache you return has {S} positions, the old ones: append the new keys and values so "
                "that the next step finds them.",
            )
        if shapes[1] != (B, H, S + T, Dh) or shapes[2] != (B, H, S + T, Dh):
            return not_yet(
                lang,
                f"la caché actualizada debe tener forma (B, H, S + T, d_head) = {(B, H, S + T, Dh)}; "
                f"tienes {shapes[1]} y {shapes[2]}: ¿concatenaste en la dimensión de las posiciones?",
                f"the updated cache must have shape (B, H, S + T, d_head) = {(B, H, S + T, Dh)}; yours are "
                f"{shapes[1]} and {shapes[2]}: did you concatenate along the positions' dimension?",
            )
        if shapes[0] != (B, H, T, Dh):
            return not_yet(
                lang,
                f"la salida debe tener forma (B, H, T, d_head) = {(B, H, T, Dh)}; tienes {shapes[0]}.",
                f"the output must have shape (B, H, T, d_head) = {(B, H, T, Dh)}; yours is {shapes[0]}.",
            )
        if not all(x.is_floating_point() for x in got):
            return not_yet(lang, "devuelve tensores de coma flotante.", "return floating-point tensors.")
        out, new_k, new_v = (x.detach().to("cpu", torch.float32) for x in got)
        if bool(torch.isnan(out).any()):
            return not_yet(
                lang,
                "la salida contiene NaN: ¿alguna fila de la máscara no deja pasar ninguna clave?",
                "the output contains NaN: does some row of the mask let no key through?",
            )
        if not (close(new_k, want_k) and close(new_v, want_v)):
            if S and close(new_k, torch.cat([k, k_cache], dim=2)):
                return not_yet(
                    lang,
                    "las claves nuevas van **después** de las guardadas: la caché sigue el orden de las posiciones.",
                    "the new keys go **after** the stored ones: the cache follows the order of the positions.",
                )
            if close(new_k, want_v) and close(new_v, want_k):
                return not_yet(
                    lang,
                    "has intercambiado la caché de claves y la de valores.",
                    "you swapped the key cache and the value cache.",
                )
            return not_yet(
                lang,
                "la caché actualizada debe ser la de antes seguida de las claves (y valores) nuevas.",
                "the updated cache must be the old one followed by the new keys (and values).",
            )
        if close(out, want_out, atol=1e-5):
            continue
        if close(out, scaled_dot_product_attention(q, k, v, torch.ones(T, T, dtype=torch.bool).tril())[0], atol=1e-5):
            return not_yet(
                lang,
                "las consultas nuevas solo atienden a las claves nuevas: también deben ver las de la caché.",
                "the new queries only attend to the new keys: they must also see the cached ones.",
            )
        if T > 1 and close(out, scaled_dot_product_attention(q, want_k, want_v)[0], atol=1e-5):
            return not_yet(
                lang,
                "con varios tokens nuevos, cada uno no debe ver los nuevos que vienen después: "
                "hace falta una máscara causal entre ellos.",
                "with several new tokens, none may see the new tokens after it: a causal mask is needed among them.",
            )
        if S and close(
            out,
            scaled_dot_product_attention(q, want_k, want_v, torch.ones(T, L, dtype=torch.bool).tril())[0],
            atol=1e-5,
        ):
            return not_yet(
                lang,
                "la máscara causal no tiene en cuenta las S posiciones guardadas: el token nuevo i está "
                "en la posición S + i y ve todas las claves hasta ella.",
                "the causal mask ignores the S stored positions: new token i sits at position S + i and "
                "sees every key up to it.",
            )
        for scale, (es, en) in [
            (1.0, ("falta dividir las puntuaciones entre √d_head.", "the scores must be divided by √d_head.")),
            (
                math.sqrt(L),
                (
                    "escala por √d_head (la última dimensión de q), no por la longitud.",
                    "scale by √d_head (the last dimension of q), not by the length.",
                ),
            ),
            (math.sqrt(H * Dh), ("escala por √d_head, no por √(H·d_head).", "scale by √d_head, not by √(H·d_head).")),
        ]:
            if scale != math.sqrt(Dh) and close(out, _attend(q, want_k, want_v, causal, scale), atol=1e-5):
                return not_yet(lang, es, en)
        return not_yet(
            lang,
            f"con S = {S} posiciones guardadas y T = {T} nuevas la salida no coincide con la atención "
            "sobre la secuencia completa: softmax(q·Kᵀ/√d_head) sobre todas las claves permitidas, por V.",
            f"with S = {S} stored positions and T = {T} new ones the output does not match attention over "
            "the whole sequence: softmax(q·Kᵀ/√d_head) over every allowed key, times V.",
        )
    return correct(
        lang,
        "Es lo que hace cada capa de GPT en cada paso de la generación con caché.",
        "This is what every GPT layer does at every step of cached generation.",
    )
