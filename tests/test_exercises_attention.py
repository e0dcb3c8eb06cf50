"""The attention exercises' checkers accept right answers and name the typical mistakes.

Each wrong answer below is a mistake students make; the checker must reject it with the
hint written for it, in both languages.
"""

from __future__ import annotations

import math

import pytest
import torch
from feedback_asserts import assert_correct
from feedback_asserts import assert_hint as shared_assert_hint

from minitransformer.exercises import Feedback
from minitransformer.exercises.attention import (
    HINTS,
    check_attention_weights,
    check_decoder_mask,
    check_masked_attention,
    check_self_attention,
    check_softmax,
    check_split_heads,
)

LANGS = ("es", "en")


def assert_hint(feedback: Feedback, lang: str, key: str) -> None:
    shared_assert_hint(feedback, lang, key, HINTS)


def unfinished(*args):
    raise NotImplementedError


# --------------------------------------------------------------------------- softmax


def softmax_right(x):
    e = torch.exp(x - x.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)


def softmax_overflow(x):
    e = torch.exp(x)
    return e / e.sum(dim=-1, keepdim=True)


def softmax_global(x):
    e = torch.exp(x - x.max())
    return e / e.sum()


def softmax_axis(x):
    e = torch.exp(x - x.max(dim=-2, keepdim=True).values)
    return e / e.sum(dim=-2, keepdim=True)


def softmax_unnormalised(x):
    return torch.exp(x)


def softmax_2d_only(x):
    e = torch.exp(x - x.max(dim=1, keepdim=True).values)
    return e / e.sum(dim=1, keepdim=True)


def softmax_minus_min(x):
    e = torch.exp(x - x.min(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)


def softmax_minus_mean(x):
    e = torch.exp(x - x.mean(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def softmax_global_max(x):
    e = torch.exp(x - x.max())
    return e / e.sum(dim=-1, keepdim=True)


def softmax_one_hot(x):
    return torch.nn.functional.one_hot(x.argmax(-1), x.size(-1))


@pytest.mark.parametrize("lang", LANGS)
def test_softmax_checker(lang):
    assert_correct(check_softmax(softmax_right, lang=lang), lang)
    assert_hint(check_softmax(softmax_minus_min, lang=lang), lang, "softmax_shift_not_max")
    assert_hint(check_softmax(softmax_minus_mean, lang=lang), lang, "softmax_shift_not_max")
    assert_hint(check_softmax(softmax_global_max, lang=lang), lang, "softmax_global_max")
    assert_hint(check_softmax(softmax_one_hot, lang=lang), lang, "softmax_not_float")
    assert_hint(check_softmax(softmax_overflow, lang=lang), lang, "softmax_overflow")
    assert_hint(check_softmax(softmax_global, lang=lang), lang, "softmax_global_sum")
    assert_hint(check_softmax(softmax_axis, lang=lang), lang, "wrong_axis")
    assert_hint(check_softmax(softmax_unnormalised, lang=lang), lang, "softmax_no_normalise")
    assert_hint(check_softmax(softmax_2d_only, lang=lang), lang, "softmax_batched")


@pytest.mark.parametrize("lang", LANGS)
def test_unfinished_and_crashing_code(lang):
    fb = check_softmax(unfinished, lang=lang)
    assert not fb.ok and fb.hint == "not_written"
    fb = check_attention_weights(lambda q, k: None, lang=lang)
    assert not fb.ok and fb.hint == "returns_none"
    fb = check_masked_attention(lambda q, k, v, m: q @ v, lang=lang)  # shapes do not match
    assert not fb.ok and fb.hint == "crashed" and "RuntimeError" in fb.message  # it names the error
    fb = check_softmax(lambda x: x.tolist(), lang=lang)
    assert not fb.ok and fb.hint == "not_a_tensor"


CAPTURED_SOFTMAX = torch.Tensor.softmax  # kept by a student's earlier cell
from torch import softmax as imported_softmax  # noqa: E402


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize(
    "tool",
    [
        lambda x: torch.softmax(x, dim=-1),
        lambda x: x.softmax(-1),
        lambda x: torch.nn.functional.softmax(x, dim=-1),
        lambda x: torch.nn.Softmax(dim=-1)(x),
        lambda x: torch.special.softmax(x, -1),
        lambda x: torch.log_softmax(x, -1).exp(),
        lambda x: torch.nn.functional.log_softmax(x, dim=-1).exp(),
        lambda x: CAPTURED_SOFTMAX(x, -1),
        lambda x: imported_softmax(x, -1),
        lambda x: torch._log_softmax(x, -1, False).exp(),
        lambda x: torch.ops.aten._softmax(x, -1, False),
    ],
    ids=[
        "torch.softmax",
        "Tensor.softmax",
        "F.softmax",
        "nn.Softmax",
        "special.softmax",
        "log_softmax",
        "F.log_softmax",
        "captured Tensor.softmax",
        "from torch import softmax",
        "torch._log_softmax",
        "aten._softmax",
    ],
)
def test_softmax_forbids_pytorchs_softmax(tool, lang):
    fb = check_softmax(tool, lang=lang)
    assert not fb.ok and fb.hint == "forbidden"
    assert "torch.exp" in fb.message  # why: the statement's reason


# --------------------------------------------------------------------------- attention weights


def weights_with(scale=None, dim=-1, transpose=False):
    def weights(q, k):
        s = q @ k.transpose(-2, -1)
        if scale == "sqrt":
            s = s / math.sqrt(q.size(-1))
        elif scale == "d_k":
            s = s / q.size(-1)
        w = torch.softmax(s, dim=dim)
        return w.transpose(-2, -1) if transpose else w

    return weights


def weights_2d_only(q, k):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=1)


def weights_shape_index(q, k):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[1]), dim=-1)


def weights_dot_t(q, k):
    return torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1)


def weights_scale_length(q, k):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(k.size(-2)), dim=-1)


@pytest.mark.filterwarnings("ignore:The use of `x.T`")  # a student's `k.T` on a batch
@pytest.mark.parametrize("lang", LANGS)
def test_attention_weights_checker(lang):
    assert_correct(check_attention_weights(weights_with("sqrt"), lang=lang), lang)
    assert_hint(check_attention_weights(weights_with(None), lang=lang), lang, "no_scale")
    assert_hint(check_attention_weights(weights_with("d_k"), lang=lang), lang, "scale_d_k")
    assert_hint(check_attention_weights(weights_with("sqrt", dim=-2), lang=lang), lang, "wrong_axis")
    assert_hint(check_attention_weights(weights_with("sqrt", transpose=True), lang=lang), lang, "weights_transposed")
    assert_hint(check_attention_weights(weights_2d_only, lang=lang), lang, "batched")
    assert_hint(check_attention_weights(weights_shape_index, lang=lang), lang, "scale_shape_index")
    assert_hint(check_attention_weights(weights_scale_length, lang=lang), lang, "scale_length")
    fb = check_attention_weights(weights_dot_t, lang=lang)  # `.T` on a batch: the matmul fails
    assert not fb.ok and fb.hint == "batched"  # the error, then why a batch broke it
    assert "RuntimeError" in fb.message and "return torch.softmax(q @ k.T" in fb.message


# --------------------------------------------------------------------------- self-attention


def self_attention_with(scale="d_k", values="V", dim=-1, project=True, swap=False, weights_only=False):
    def self_attention(x, W_q, W_k, W_v):
        if swap:
            W_q, W_k = W_k, W_q
        Q, K = (x @ W_q, x @ W_k) if project else (x, x)
        V = x @ W_v if values == "V" else x
        s = Q @ K.T
        if scale == "d_k":
            s = s / math.sqrt(W_q.shape[1])
        elif scale == "d_model":
            s = s / math.sqrt(x.shape[1])
        elif scale == "T":
            s = s / math.sqrt(x.shape[0])
        elif scale == "d_v":
            s = s / math.sqrt(W_v.shape[1])
        w = torch.softmax(s, dim=dim)
        return w if weights_only else w @ V

    return self_attention


@pytest.mark.parametrize("lang", LANGS)
def test_self_attention_checker(lang):
    assert_correct(check_self_attention(self_attention_with(), lang=lang), lang)
    cases = {
        "scale_d_model": self_attention_with(scale="d_model"),
        "no_scale": self_attention_with(scale=None),
        "values_are_x": self_attention_with(values="x"),
        "returns_weights": self_attention_with(weights_only=True),
        "wrong_axis": self_attention_with(dim=-2),
        "swapped_qk": self_attention_with(swap=True),
        "no_projection": self_attention_with(project=False, scale="d_model"),
        "scale_length": self_attention_with(scale="T"),
        "scale_d_v": self_attention_with(scale="d_v"),
    }
    for key, fn in cases.items():
        assert_hint(check_self_attention(fn, lang=lang), lang, key)

    def no_transpose(x, W_q, W_k, W_v):
        Q, K, V = x @ W_q, x @ W_k, x @ W_v
        return torch.softmax(Q @ K / math.sqrt(K.shape[-1]), dim=-1) @ V

    fb = check_self_attention(no_transpose, lang=lang)  # (T, d_k) @ (T, d_k): T ≠ d_k, so it raises
    assert not fb.ok and "RuntimeError" in fb.message and "Q @ K" in fb.message


# --------------------------------------------------------------------------- split heads


def split_right(x, n_heads):
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)


def split_no_transpose(x, n_heads):
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads)


def split_direct_view(x, n_heads):
    B, T, D = x.shape
    return x.reshape(B, n_heads, T, D // n_heads)


def split_interleaved(x, n_heads):
    B, T, D = x.shape
    return x.view(B, T, D // n_heads, n_heads).permute(0, 3, 1, 2)


@pytest.mark.parametrize("lang", LANGS)
def test_split_heads_checker(lang):
    assert_correct(check_split_heads(split_right, lang=lang), lang)
    assert_correct(
        check_split_heads(lambda x, h: torch.einsum("bthd->bhtd", x.unflatten(-1, (h, -1))), lang=lang), lang
    )
    assert_hint(check_split_heads(split_no_transpose, lang=lang), lang, "heads_no_transpose")
    assert_hint(check_split_heads(split_direct_view, lang=lang), lang, "heads_direct_view")
    assert_hint(check_split_heads(split_interleaved, lang=lang), lang, "heads_interleaved")


# --------------------------------------------------------------------------- masked attention


def masked_with(scale="d_head", invert=False, use_mask=True, fill=float("-inf"), guard=True, dim=-1, output_factor=1.0):
    def masked_attention(q, k, v, mask):
        d = q.size(-1) if scale == "d_head" else q.size(-1) * q.size(1) if scale == "d_model" else 1
        s = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(d)
        allowed = ~mask if invert else mask
        if use_mask:
            s = s.masked_fill(~allowed, fill)
        w = torch.softmax(s, dim=dim)
        if guard:
            w = w.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)
        return output_factor * (w @ v), w

    return masked_attention


@pytest.mark.parametrize("lang", LANGS)
def test_masked_attention_checker(lang):
    assert_correct(check_masked_attention(masked_with(), lang=lang), lang)
    cases = {
        "mask_inverted": masked_with(invert=True),
        "mask_ignored": masked_with(use_mask=False, guard=False),
        "scale_d_model_heads": masked_with(scale="d_model"),
        "no_scale": masked_with(scale=None),
        "wrong_axis": masked_with(dim=-2, guard=False),
        "empty_row_nan": masked_with(guard=False),
        "empty_row_uniform": masked_with(fill=-1e9, guard=False),
        "not_tuple": lambda q, k, v, m: masked_with()(q, k, v, m)[0],
        "output_wrong": masked_with(output_factor=2.0),
        "swapped_outputs": lambda q, k, v, m: masked_with()(q, k, v, m)[::-1],
    }
    for key, fn in cases.items():
        assert_hint(check_masked_attention(fn, lang=lang), lang, key)
    assert_hint(check_masked_attention(masked_with(invert=True, guard=False), lang=lang), lang, "mask_inverted")


def test_masked_attention_accepts_the_package():
    from minitransformer.attention import scaled_dot_product_attention

    for lang in LANGS:
        assert_correct(check_masked_attention(scaled_dot_product_attention, lang=lang), lang)


# --------------------------------------------------------------------------- decoder mask


def decoder_right(tokens, pad_id):
    T = tokens.size(1)
    keys = (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, T)
    return keys & torch.ones(T, T, dtype=torch.bool).tril()  # (B, 1, T, T)


def decoder_3d(tokens, pad_id):
    T = tokens.size(1)
    return (tokens != pad_id)[:, None, :] & torch.ones(T, T, dtype=torch.bool).tril()  # (B, T, T)


def decoder_future(tokens, pad_id):
    T = tokens.size(1)
    return (tokens != pad_id)[:, None, None, :] & torch.ones(T, T, dtype=torch.bool).triu()


def decoder_no_padding(tokens, pad_id):
    T = tokens.size(1)
    return torch.ones(T, T, dtype=torch.bool).tril()


def decoder_no_causal(tokens, pad_id):
    return (tokens != pad_id)[:, None, None, :]


def decoder_rows(tokens, pad_id):
    T = tokens.size(1)
    return (tokens != pad_id)[:, None, :, None] & torch.ones(T, T, dtype=torch.bool).tril()


def decoder_tri(tokens, pad_id, triangle):
    T = tokens.size(1)
    return (tokens != pad_id)[:, None, None, :] & triangle(torch.ones(T, T, dtype=torch.bool))


def decoder_pad_zero(tokens, pad_id):
    return decoder_right(tokens, 0)


@pytest.mark.parametrize("lang", LANGS)
def test_decoder_mask_checker(lang):
    assert_correct(check_decoder_mask(decoder_right, lang=lang), lang)
    from minitransformer.attention import causal_mask, combine_masks, padding_mask

    package = lambda t, p: combine_masks(padding_mask(t, p), causal_mask(t.size(1)))  # noqa: E731
    assert_correct(check_decoder_mask(package, lang=lang), lang)
    cases = {
        "mask_inverted": lambda t, p: ~decoder_right(t, p),
        "mask_not_bool": lambda t, p: decoder_right(t, p).float(),
        "mask_3d": decoder_3d,
        "mask_future": decoder_future,
        "mask_no_padding": decoder_no_padding,
        "mask_no_causal": decoder_no_causal,
        "mask_padding_rows": decoder_rows,
        "mask_pad_zero": decoder_pad_zero,
        "mask_shape": lambda t, p: decoder_right(t, p)[..., None],
        "mask_no_diagonal": lambda t, p: decoder_tri(t, p, lambda o: o.tril(-1)),
        "mask_sees_next": lambda t, p: decoder_tri(t, p, lambda o: o.tril(1)),
    }
    assert_hint(
        check_decoder_mask(lambda t, p: decoder_tri(t, p, lambda o: ~o.triu()), lang=lang), lang, "mask_no_diagonal"
    )
    for key, fn in cases.items():
        assert_hint(check_decoder_mask(fn, lang=lang), lang, key)


@pytest.mark.parametrize("lang", LANGS)
def test_hints_do_not_write_the_answer(lang):
    """A first hint points at the mistake; the code is in the worked solution, shown on request."""
    for key, pair in HINTS.items():
        text = pair[0 if lang == "es" else 1]
        for code in ("masked_fill(", "k.transpose(-2, -1)", "keepdim=True", "weights @ v", "view(B, T"):
            assert code not in text, (key, code)


def test_every_hint_in_both_languages():
    for key, (es, en) in HINTS.items():
        assert es.strip() and en.strip() and es != en, key
        assert es.count("{") == en.count("{"), key
