"""The checkers of notebook 09 accept the worked solutions (and other right ways of writing them) and
reject, without crashing, the wrong answers students write, each with the hint of the check it fails,
in both languages."""

from __future__ import annotations

import math
import re

import pytest
import torch
from feedback_asserts import assert_correct, assert_hint, assert_rejected

from minitransformer import sampling
from minitransformer.exercises.generation import HINTS, check_cached_attention, check_top_k, check_top_p
from minitransformer.exercises.solutions.nb09 import solution_my_cached_attention, solution_my_top_k, solution_my_top_p

LANGS = ["es", "en"]
INF = float("-inf")


def _assert(check, answer, expected, lang):
    """``expected``: a hint key of HINTS, or {lang: text} for a message from _core (errors, forbidden tools)."""
    fb = check(answer, lang=lang)
    if isinstance(expected, str):
        assert_hint(fb, lang, expected, HINTS)
    else:
        assert_rejected(fb, lang, expected)
    if lang == "es":
        assert not re.search(r"\d\.\d", fb.message), fb.message  # decimal commas in Spanish


# --- top-k: other right answers ----------------------------------------------------------------


def top_k_with_topk(z, k):
    return z.masked_fill(z < z.topk(k, dim=-1).values[:, -1:], INF)


def top_k_with_kthvalue(z, k):
    kth = (-z).kthvalue(k, dim=-1, keepdim=True).values.neg()  # the k-th largest
    return torch.where(z >= kth, z, torch.full_like(z, INF))


def top_k_row_by_row(z, k):
    out = z.clone()
    for row in out:
        row[row < sorted(row.tolist(), reverse=True)[k - 1]] = INF
    return out


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer", [top_k_with_topk, top_k_with_kthvalue, top_k_row_by_row])
def test_other_right_top_k_answers_are_accepted(answer, lang):
    assert_correct(check_top_k(answer, lang=lang), lang)


# --- top-k: realistic wrong answers -------------------------------------------------------


def top_k_softmax(z, k):
    return torch.softmax(solution_my_top_k(z, k), -1)


def top_k_log_softmax(z, k):
    return torch.log_softmax(solution_my_top_k(z, k), -1)


def top_k_zeros(z, k):
    kth = z.sort(dim=-1, descending=True).values[..., k - 1 : k]
    return z.masked_fill(z < kth, 0.0)


def top_k_magic_fill(z, k):
    kth = z.sort(dim=-1, descending=True).values[..., k - 1 : k]
    return z.masked_fill(z < kth, -1e9)


def top_k_plus_inf(z, k):
    kth = z.sort(dim=-1, descending=True).values[..., k - 1 : k]
    return z.masked_fill(z < kth, float("inf"))


def top_k_calls_the_package(z, k):
    return sampling.top_k_filter(z, k)


def top_k_imports_the_package(z, k):
    from minitransformer.sampling import top_k_filter as filter_

    return filter_(z, k)


def top_k_through_next_token_probs(z, k):
    return sampling.next_token_probs(z, top_k=k).log()


def top_k_with_the_warper(z, k):
    from transformers.generation.logits_process import TopKLogitsWarper

    return TopKLogitsWarper(k)(None, z)


def top_k_off_by_one(z, k):
    kth = z.sort(dim=-1, descending=True).values[..., k : k + 1] if k < z.size(-1) else z.min(-1, keepdim=True).values
    return z.masked_fill(z < kth, INF)


def top_k_strict(z, k):
    kth = z.sort(dim=-1, descending=True).values[..., k - 1 : k]
    return z.masked_fill(z <= kth, INF)  # removes the k-th itself


def top_k_smallest(z, k):
    kth = z.sort(dim=-1).values[..., k - 1 : k]
    return z.masked_fill(z > kth, INF)


def top_k_drops_ties(z, k):
    idx = z.topk(k, dim=-1).indices
    keep = torch.zeros_like(z, dtype=torch.bool).scatter(-1, idx, True)
    return z.masked_fill(~keep, INF)


def top_k_sorted_row(z, k):
    kth = z.sort(descending=True).values[min(k - 1, z.size(0) - 1)]  # a whole sorted row, not a threshold per row
    return z.masked_fill(z < kth, INF)


def top_k_down_the_columns(z, k):
    kth = z.sort(dim=0, descending=True).values[min(k - 1, z.size(0) - 1)]
    return z.masked_fill(z < kth, INF)


def top_k_global(z, k):
    kth = z.flatten().sort(descending=True).values[k - 1]
    return z.masked_fill(z < kth, INF)


def top_k_sorted_values(z, k):
    values = z.sort(dim=-1, descending=True).values  # in sorted order, not the vocabulary's
    return values.masked_fill(torch.arange(z.size(-1)) >= k, INF)


def top_k_divided(z, k):
    return solution_my_top_k(z, k) / 2  # the kept logits change


def top_k_mask(z, k):
    return solution_my_top_k(z, k).isfinite()


TOP_K_WRONG = {
    "probabilities": (top_k_softmax, "probabilities"),
    "log-probabilities": (top_k_log_softmax, "log_probabilities"),
    "zeros": (top_k_zeros, "finite_removed"),
    "-1e9": (top_k_magic_fill, "magic_fill"),
    "+inf": (top_k_plus_inf, "plus_inf"),
    "the package's filter": (top_k_calls_the_package, "forbidden"),
    "the package's filter, imported": (top_k_imports_the_package, "forbidden"),
    "next_token_probs": (top_k_through_next_token_probs, "forbidden"),
    "transformers' warper": (top_k_with_the_warper, "forbidden"),
    "off by one": (top_k_off_by_one, "k_off_by_one"),
    "≤ instead of <": (top_k_strict, "k_off_by_one"),
    "smallest": (top_k_smallest, "k_smallest"),
    "drops ties": (top_k_drops_ties, "k_ties"),
    "a sorted row as threshold": (top_k_sorted_row, "k_not_per_row"),
    "down the columns": (top_k_down_the_columns, "k_not_per_row"),
    "the whole tensor's k-th": (top_k_global, "k_not_per_row"),
    "sorted values": (top_k_sorted_values, "kept_changed"),
    "kept logits divided": (top_k_divided, "kept_changed"),
    "the k first tokens": (lambda z, k: z.masked_fill(torch.arange(z.size(-1)) >= k, INF), "k_not_largest"),
    "boolean mask": (top_k_mask, "bool_mask"),
    "the k first columns": (lambda z, k: z[:, :k], "filter_shape"),
    "the indices": (lambda z, k: z.topk(k).indices, "filter_shape"),
    "a mask as integers": (lambda z, k: solution_my_top_k(z, k).isfinite().long(), "not_float"),
    "half precision": (lambda z, k: solution_my_top_k(z, k).half(), "low_precision"),
    "NaN": (lambda z, k: torch.full_like(z, float("nan")), "filter_nan"),
    "a list": (lambda z, k: z.tolist(), "not_a_tensor"),
    "nothing removed": (lambda z, k: z, "k_count"),
    "a crash": (lambda z, k: z.topk(k + 100), "crashed"),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer, expected", TOP_K_WRONG.values(), ids=TOP_K_WRONG.keys())
def test_top_k_rejects_wrong_answers_with_the_hint_of_the_failed_check(lang, answer, expected):
    _assert(check_top_k, answer, expected, lang)


def test_the_filters_are_back_after_a_check():
    check_top_k(top_k_calls_the_package, lang="en")
    z = torch.tensor([[1.0, 3.0, 2.0]])
    assert sampling.top_k_filter(z, 1).isfinite().tolist() == [[False, True, False]]
    assert sampling.top_p_filter(z, 0.5).isfinite().sum() == 1


# --- top-p: other right answers ----------------------------------------------------------------


def top_p_like_transformers(z, p):
    sorted_z, order = z.sort(dim=-1)  # from the least likely up
    remove = sorted_z.softmax(-1).cumsum(-1) <= 1 - p
    remove[..., -1] = False
    return z.masked_fill(remove.scatter(-1, order, remove), INF)


def top_p_row_by_row(z, p):
    out = torch.full_like(z, INF)
    for r, row in enumerate(torch.softmax(z, -1)):
        mass = 0.0
        for i in row.argsort(descending=True).tolist():
            out[r, i] = z[r, i]
            mass += row[i].item()
            if mass >= p:
                break
    return out


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer", [top_p_like_transformers, top_p_row_by_row])
def test_other_right_top_p_answers_are_accepted(answer, lang):
    assert_correct(check_top_p(answer, lang=lang), lang)


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


def top_p_plus_inf(z, p):
    return solution_my_top_p(z, p).nan_to_num(neginf=float("inf"))


def top_p_calls_the_package(z, p):
    return sampling.top_p_filter(z, p)


def top_p_with_the_warper(z, p):
    from transformers.generation.logits_process import TopPLogitsWarper

    return TopPLogitsWarper(p)(None, z)


TOP_P_WRONG = {
    "stops before p": (top_p_stops_before_p, "p_empty_row"),
    "stops at ≤ p": (top_p_stops_before_p_le, "p_short"),
    "not sorted": (top_p_unsorted, "p_not_most_likely"),
    "sorted ascending": (top_p_ascending, "p_not_most_likely"),
    "decision left in sorted order": (top_p_not_unsorted, "p_not_unsorted"),
    "a sum of logits": (top_p_on_logits, "p_on_logits"),
    "one token more": (top_p_one_more, "p_extra"),
    "zeros": (top_p_zeros, "finite_removed"),
    "+inf": (top_p_plus_inf, "plus_inf"),
    "the package's filter": (top_p_calls_the_package, "forbidden"),
    "transformers' warper": (top_p_with_the_warper, "forbidden"),
    "probabilities": (lambda z, p: torch.softmax(solution_my_top_p(z, p), -1), "probabilities"),
    "log-probabilities": (lambda z, p: torch.log_softmax(solution_my_top_p(z, p), -1), "log_probabilities"),
    "nothing removed": (lambda z, p: z, "p_extra"),
    "everything removed": (lambda z, p: torch.full_like(z, INF), "p_empty_row"),
    "boolean mask": (lambda z, p: solution_my_top_p(z, p).isfinite(), "bool_mask"),
    "a list": (lambda z, p: solution_my_top_p(z, p).tolist(), "not_a_tensor"),
    "a crash": (lambda z, p: z.sort(dim=2), "crashed"),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer, expected", TOP_P_WRONG.values(), ids=TOP_P_WRONG.keys())
def test_top_p_rejects_wrong_answers_with_the_hint_of_the_failed_check(lang, answer, expected):
    _assert(check_top_p, answer, expected, lang)


# --- cached attention: other right answers -----------------------------------------------------


def attention_with_torch_sdpa(q, k, v, kc, vc):
    K, V = torch.cat([kc, k], dim=-2), torch.cat([vc, v], dim=-2)
    allowed = torch.ones(q.size(-2), K.size(-2), dtype=torch.bool).tril(diagonal=K.size(-2) - q.size(-2))
    return torch.nn.functional.scaled_dot_product_attention(q, K, V, attn_mask=allowed), K, V


@pytest.mark.parametrize("lang", LANGS)
def test_other_right_cached_attention_answers_are_accepted(lang):
    assert_correct(check_cached_attention(attention_with_torch_sdpa, lang=lang), lang)
    listed = lambda *a: list(solution_my_cached_attention(*a))  # noqa: E731
    assert_correct(check_cached_attention(listed, lang=lang), lang)


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


def attention_old_value_cache(q, k, v, kc, vc):
    out, K, _ = solution_my_cached_attention(q, k, v, kc, vc)
    return out, K, vc


def attention_value_cache_of_keys(q, k, v, kc, vc):
    out, K, _ = solution_my_cached_attention(q, k, v, kc, vc)
    return out, K, torch.cat([vc, k], 2)


def attention_key_cache_of_values(q, k, v, kc, vc):
    out, _, V = solution_my_cached_attention(q, k, v, kc, vc)
    return out, torch.cat([kc, v], 2), V


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


def attention_is_causal(q, k, v, kc, vc):
    K, V = torch.cat([kc, k], 2), torch.cat([vc, v], 2)
    return torch.nn.functional.scaled_dot_product_attention(q, K, V, is_causal=True), K, V  # top-left aligned


def attention_cannot_see_itself(q, k, v, kc, vc):
    K, V = torch.cat([kc, k], 2), torch.cat([vc, v], 2)
    allowed = torch.ones(q.size(2), K.size(2), dtype=torch.bool).tril(diagonal=K.size(2) - q.size(2) - 1)
    scores = (q @ K.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(~allowed, INF)
    return torch.softmax(scores, -1) @ V, K, V  # with no cache, the first new token sees nothing: NaN


def attention_scaled(scale_of):
    def answer(q, k, v, kc, vc):
        K, V = torch.cat([kc, k], 2), torch.cat([vc, v], 2)
        scores = (q @ K.transpose(-2, -1) / scale_of(q, K)).masked_fill(~_causal(q.size(2), K.size(2)), INF)
        return torch.softmax(scores, -1) @ V, K, V

    return answer


def attention_softmax_over_queries(q, k, v, kc, vc):
    K, V = torch.cat([kc, k], 2), torch.cat([vc, v], 2)
    scores = (q @ K.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(~_causal(q.size(2), K.size(2)), -1e4)
    return torch.softmax(scores, -2) @ V, K, V


def attention_returns_weights(q, k, v, kc, vc):
    K, V = torch.cat([kc, k], 2), torch.cat([vc, v], 2)
    scores = (q @ K.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(~_causal(q.size(2), K.size(2)), INF)
    return torch.softmax(scores, -1), K, V  # forgot "@ V"


def attention_swapped_return(q, k, v, kc, vc):
    out, K, V = solution_my_cached_attention(q, k, v, kc, vc)
    return K, V, out


def attention_swapped_caches(q, k, v, kc, vc):
    out, K, V = solution_my_cached_attention(q, k, v, kc, vc)
    return out, V, K


ATTENTION_WRONG = {
    "new keys only": (attention_new_only, "new_only"),
    "old cache": (attention_old_cache, "old_cache"),
    "old value cache": (attention_old_value_cache, "old_cache"),
    "keys in the value cache": (attention_value_cache_of_keys, "cache_values"),
    "values in the key cache": (attention_key_cache_of_values, "cache_keys"),
    "prepends": (attention_prepends, "prepended"),
    "wrong dimension": (attention_wrong_dim, "crashed"),  # the student's cat fails
    "no mask": (attention_no_mask, "no_causal"),
    "unshifted mask": (attention_unshifted_mask, "unshifted"),
    "is_causal=True": (attention_is_causal, "unshifted"),
    "cannot see itself": (attention_cannot_see_itself, "out_nan"),
    "no scale": (attention_scaled(lambda q, K: 1.0), "no_scale"),
    "scaled by the length": (attention_scaled(lambda q, K: math.sqrt(K.size(2))), "scale_length"),
    "scaled by H·d_head": (attention_scaled(lambda q, K: math.sqrt(q.size(1) * q.size(-1))), "scale_width"),
    "softmax over the queries": (attention_softmax_over_queries, "attention_values"),
    "swapped return": (attention_swapped_return, "order"),
    "the new keys as the cache": (
        lambda q, k, v, kc, vc: (solution_my_cached_attention(q, k, v, kc, vc)[0], k, v),
        "cache_shape",
    ),
    "the weights as the output": (attention_returns_weights, "out_shape"),
    "swapped caches": (attention_swapped_caches, "swapped_caches"),
    "the output alone": (lambda q, k, v, kc, vc: solution_my_cached_attention(q, k, v, kc, vc)[0], "not_a_triple"),
    "None inside": (lambda q, k, v, kc, vc: (None, kc, vc), "not_a_tensor"),
    "integer output": (
        lambda q, k, v, kc, vc: (q.long(),) + solution_my_cached_attention(q, k, v, kc, vc)[1:],
        "not_float_triple",
    ),
    "NaN output": (
        lambda q, k, v, kc, vc: (torch.full_like(q, float("nan")),) + solution_my_cached_attention(q, k, v, kc, vc)[1:],
        "out_nan",
    ),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer, expected", ATTENTION_WRONG.values(), ids=ATTENTION_WRONG.keys())
def test_cached_attention_rejects_wrong_answers_with_the_hint_of_the_failed_check(lang, answer, expected):
    _assert(check_cached_attention, answer, expected, lang)


@pytest.mark.parametrize("lang", LANGS)
def test_every_hint_is_used_by_a_wrong_answer_of_the_bank(lang):
    """No hint is dead code: each one is what some realistic wrong answer gets."""
    used = {e for bank in (TOP_K_WRONG, TOP_P_WRONG, ATTENTION_WRONG) for _, e in bank.values() if isinstance(e, str)}
    unused = set(HINTS) - used - {"nan", "shape"}  # the two shared hints of _core
    assert not unused, unused
