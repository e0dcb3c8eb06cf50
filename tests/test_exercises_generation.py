"""The checkers of notebook 09 accept the worked solutions and reject, without crashing, the
wrong answers students write, naming the mistake in both languages."""

from __future__ import annotations

import math
import re

import pytest
import torch
from feedback_asserts import assert_correct, assert_rejected

from minitransformer.exercises import Feedback
from minitransformer.exercises.generation import (
    check_cached_attention,
    check_top_k,
    check_top_p,
    solution_my_cached_attention,
    solution_my_top_k,
    solution_my_top_p,
)

LANGS = ["es", "en"]
INF = float("-inf")


def stub(*args):
    raise NotImplementedError


@pytest.mark.parametrize("lang", LANGS)
def test_solutions_are_accepted(lang):
    assert_correct(check_top_k(solution_my_top_k, lang=lang), lang)
    assert_correct(check_top_p(solution_my_top_p, lang=lang), lang)
    assert_correct(check_cached_attention(solution_my_cached_attention, lang=lang), lang)


@pytest.mark.parametrize("lang", LANGS)
def test_stubs_are_not_yet(lang):
    for check in (check_top_k, check_top_p, check_cached_attention):
        fb = check(stub, lang=lang)
        assert not fb and "NotImplementedError" in str(fb)


# --- top-k: realistic wrong answers -------------------------------------------------------


def top_k_softmax(z, k):
    return torch.softmax(solution_my_top_k(z, k), -1)


def top_k_zeros(z, k):
    kth = z.sort(dim=-1, descending=True).values[..., k - 1 : k]
    return z.masked_fill(z < kth, 0.0)


def top_k_off_by_one(z, k):
    kth = z.sort(dim=-1, descending=True).values[..., k : k + 1] if k < z.size(-1) else z.min(-1, keepdim=True).values
    return z.masked_fill(z < kth, INF)


def top_k_smallest(z, k):
    kth = z.sort(dim=-1).values[..., k - 1 : k]
    return z.masked_fill(z > kth, INF)


def top_k_drops_ties(z, k):
    idx = z.topk(k, dim=-1).indices
    keep = torch.zeros_like(z, dtype=torch.bool).scatter(-1, idx, True)
    return z.masked_fill(~keep, INF)


def top_k_wrong_axis(z, k):
    kth = z.sort(descending=True).values[min(k - 1, z.size(0) - 1)]  # a row, not a column
    return z.masked_fill(z < kth, INF)


def top_k_global(z, k):
    kth = z.flatten().sort(descending=True).values[k - 1]
    return z.masked_fill(z < kth, INF)


def top_k_mask(z, k):
    return solution_my_top_k(z, k).isfinite()


TOP_K_WRONG = [
    (top_k_softmax, {"es": "probabilidades", "en": "probabilities"}),
    (top_k_zeros, {"es": "-inf", "en": "-inf"}),
    (top_k_off_by_one, {"es": "índice del k-ésimo", "en": "index of the k-th"}),
    (top_k_smallest, {"es": "más pequeños", "en": "smallest"}),
    (top_k_drops_ties, {"es": "empate", "en": "tie"}),
    (top_k_wrong_axis, {"es": "esa fila", "en": "that row"}),
    (top_k_global, {"es": "esa fila", "en": "that row"}),
    (top_k_mask, {"es": "máscara booleana", "en": "boolean mask"}),
    (lambda z, k: z[:, :k], {"es": "misma forma", "en": "same shape"}),
    (lambda z, k: z.tolist(), {"es": "tensor", "en": "tensor"}),
    (lambda z, k: z, {"es": "k mayores", "en": "k largest"}),
]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer, hint", TOP_K_WRONG, ids=lambda x: getattr(x, "__name__", None))
def test_top_k_rejects_wrong_answers(lang, answer, hint):
    fb = check_top_k(answer, lang=lang)
    assert_rejected(fb, lang, hint)
    if lang == "es":
        assert not re.search(r"\d\.\d", fb.message), fb.message  # decimal commas in Spanish


# --- top-p: realistic wrong answers -------------------------------------------------------


def _sorted(z):
    probs = torch.softmax(z, -1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    return sorted_probs, order


def _unsort(keep_sorted, order):
    return torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)


def top_p_stops_before_p(z, p):
    sorted_probs, order = _sorted(z)
    return z.masked_fill(~_unsort(sorted_probs.cumsum(-1) < p, order), INF)


def top_p_stops_before_p_le(z, p):
    sorted_probs, order = _sorted(z)
    keep = sorted_probs.cumsum(-1) <= p
    keep[..., 0] = True
    return z.masked_fill(~_unsort(keep, order), INF)


def top_p_unsorted(z, p):
    probs = torch.softmax(z, -1)
    keep = probs.cumsum(-1) - probs < p
    return z.masked_fill(~keep, INF)


def top_p_ascending(z, p):
    probs = torch.softmax(z, -1)
    sorted_probs, order = probs.sort(dim=-1)
    keep = sorted_probs.cumsum(-1) - sorted_probs < p
    return z.masked_fill(~_unsort(keep, order), INF)


def top_p_not_unsorted(z, p):
    sorted_probs, order = _sorted(z)
    keep = sorted_probs.cumsum(-1) - sorted_probs < p
    return z.masked_fill(~keep, INF)  # forgot to put the mask back in vocabulary order


def top_p_on_logits(z, p):
    sorted_z, order = z.sort(dim=-1, descending=True)
    keep = sorted_z.cumsum(-1) - sorted_z < p
    return z.masked_fill(~_unsort(keep, order), INF)


def top_p_one_more(z, p):
    sorted_probs, order = _sorted(z)
    before = sorted_probs.cumsum(-1) - sorted_probs
    keep = torch.cat([torch.ones_like(before[..., :1], dtype=torch.bool), before[..., :-1] < p], dim=-1)
    return z.masked_fill(~_unsort(keep, order), INF)


def top_p_zeros(z, p):
    return solution_my_top_p(z, p).nan_to_num(neginf=0.0)


TOP_P_WRONG = [
    (top_p_stops_before_p, {"es": "llega a p", "en": "reach"}),
    (top_p_stops_before_p_le, {"es": "llega a p", "en": "reach"}),
    (top_p_unsorted, {"es": "más probables", "en": "most likely"}),
    (top_p_ascending, {"es": "más probables", "en": "most likely"}),
    (top_p_not_unsorted, {"es": "orden del vocabulario", "en": "vocabulary's order"}),
    (top_p_on_logits, {"es": "", "en": ""}),
    (top_p_one_more, {"es": "más tokens de los necesarios", "en": "more tokens than needed"}),
    (top_p_zeros, {"es": "-inf", "en": "-inf"}),
    (lambda z, p: torch.softmax(solution_my_top_p(z, p), -1), {"es": "probabilidades", "en": "probabilities"}),
    (lambda z, p: z, {"es": "más tokens", "en": "more tokens"}),
    (lambda z, p: torch.full_like(z, INF), {"es": "sin tokens", "en": "no token"}),
]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer, hint", TOP_P_WRONG, ids=lambda x: getattr(x, "__name__", None))
def test_top_p_rejects_wrong_answers(lang, answer, hint):
    fb = check_top_p(answer, lang=lang)
    assert_rejected(fb, lang, hint)
    if lang == "es":
        assert not re.search(r"\d\.\d", fb.message), fb.message  # decimal commas in Spanish


# --- cached attention: realistic wrong answers --------------------------------------------


def _causal(T, L):
    return torch.ones(T, L, dtype=torch.bool).tril(diagonal=L - T)


def attention_new_only(q, k, v, kc, vc):
    T = q.size(2)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(~_causal(T, T), INF)
    return torch.softmax(scores, -1) @ v, torch.cat([kc, k], 2), torch.cat([vc, v], 2)


def attention_old_cache(q, k, v, kc, vc):
    out, _, _ = solution_my_cached_attention(q, k, v, kc, vc)
    return out, kc, vc


def attention_prepends(q, k, v, kc, vc):
    out, _, _ = solution_my_cached_attention(q, k, v, kc, vc)
    return out, torch.cat([k, kc], 2), torch.cat([v, vc], 2)


def attention_wrong_dim(q, k, v, kc, vc):
    out, _, _ = solution_my_cached_attention(q, k, v, kc, vc)
    return out, torch.cat([kc, k], 1), torch.cat([vc, v], 1)


def attention_no_mask(q, k, v, kc, vc):
    K, V = torch.cat([kc, k], 2), torch.cat([vc, v], 2)
    return torch.softmax(q @ K.transpose(-2, -1) / math.sqrt(q.size(-1)), -1) @ V, K, V


def attention_unshifted_mask(q, k, v, kc, vc):
    K, V = torch.cat([kc, k], 2), torch.cat([vc, v], 2)
    allowed = torch.ones(q.size(2), K.size(2), dtype=torch.bool).tril()
    scores = (q @ K.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(~allowed, INF)
    return torch.softmax(scores, -1) @ V, K, V


def attention_scaled(scale_of):
    def answer(q, k, v, kc, vc):
        K, V = torch.cat([kc, k], 2), torch.cat([vc, v], 2)
        scores = (q @ K.transpose(-2, -1) / scale_of(q, K)).masked_fill(~_causal(q.size(2), K.size(2)), INF)
        return torch.softmax(scores, -1) @ V, K, V

    return answer


def attention_swapped_return(q, k, v, kc, vc):
    out, K, V = solution_my_cached_attention(q, k, v, kc, vc)
    return K, V, out


def attention_swapped_caches(q, k, v, kc, vc):
    out, K, V = solution_my_cached_attention(q, k, v, kc, vc)
    return out, V, K


ATTENTION_WRONG = [
    (attention_new_only, {"es": "también deben ver las de la caché", "en": "must also see the cached ones"}),
    (attention_old_cache, {"es": "añade las claves y valores nuevos", "en": "append the new keys and values"}),
    (attention_prepends, {"es": "**después**", "en": "**after**"}),
    (attention_wrong_dim, {"es": "RuntimeError", "en": "RuntimeError"}),  # the student's cat fails: its error is shown
    (attention_no_mask, {"es": "máscara causal entre ellos", "en": "causal mask is needed"}),
    (attention_unshifted_mask, {"es": "S posiciones guardadas", "en": "S stored positions"}),
    (attention_scaled(lambda q, K: 1.0), {"es": "√d_head", "en": "√d_head"}),
    (attention_scaled(lambda q, K: math.sqrt(K.size(2))), {"es": "no por la longitud", "en": "not by the length"}),
    (attention_swapped_return, {"es": "orden", "en": "order"}),
    (attention_swapped_caches, {"es": "intercambiado", "en": "swapped"}),
    (lambda q, k, v, kc, vc: solution_my_cached_attention(q, k, v, kc, vc)[0], {"es": "tupla", "en": "tuple"}),
    (lambda q, k, v, kc, vc: (None, kc, vc), {"es": "tensor", "en": "tensor"}),
]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer, hint", ATTENTION_WRONG, ids=lambda x: getattr(x, "__name__", None))
def test_cached_attention_rejects_wrong_answers(lang, answer, hint):
    fb = check_cached_attention(answer, lang=lang)
    assert_rejected(fb, lang, hint)
    if lang == "es":
        assert not re.search(r"\d\.\d", fb.message), fb.message  # decimal commas in Spanish


# --- junk never crashes ---------------------------------------------------------------------

JUNK = [
    None,
    "text",
    {"a": 1},
    [],
    (),
    3,
    float("nan"),
    torch.tensor([]),
    torch.tensor(float("nan")),
    torch.zeros(2, 2, dtype=torch.complex64),
    torch.zeros(3, 11, dtype=torch.long),
    (None, None, None),
    (torch.zeros(1), torch.zeros(1), torch.zeros(1)),
]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("check", [check_top_k, check_top_p, check_cached_attention])
def test_junk_never_crashes(lang, check):
    for junk in JUNK:
        fb = check(lambda *args, junk=junk: junk, lang=lang)
        assert isinstance(fb, Feedback) and not fb.ok
        assert fb.message.startswith("❌ Todavía no:" if lang == "es" else "❌ Not yet:")

    def raises(*args):
        raise RuntimeError("boom")

    fb = check(raises, lang=lang)
    assert not fb and "RuntimeError" in fb.message


@pytest.mark.parametrize("lang", LANGS)
def test_nan_outputs_are_named(lang):
    fb = check_top_k(lambda z, k: torch.full_like(z, float("nan")), lang=lang)
    assert not fb and "NaN" in fb.message
    fb = check_cached_attention(
        lambda q, k, v, kc, vc: (torch.full_like(q, float("nan")),) + solution_my_cached_attention(q, k, v, kc, vc)[1:],
        lang=lang,
    )
    assert not fb and "NaN" in fb.message
