"""The checkers of notebook 05 accept right answers and reject typical mistakes with a useful hint."""

from __future__ import annotations

import math

import pytest
import torch
from feedback_asserts import assert_bank, assert_rejected, bank
from feedback_asserts import assert_correct as assert_accepted

from minitransformer.exercises.decoder import check_cross_attention, check_decoder_layer, check_shift_right

LANGS = ["es", "en"]


def stub(*args):
    raise NotImplementedError


# ---- decoder layer -----------------------------------------------------------------------------


def layer_right(layer, x, memory, tgt_mask, memory_mask):
    x = layer.norm1(x + layer.self_attn(x, x, x, tgt_mask)[0])
    x = layer.norm2(x + layer.cross_attn(x, memory, memory, memory_mask)[0])
    return layer.norm3(x + layer.feed_forward(x))


def _post(
    layer,
    x,
    memory,
    tgt_mask,
    memory_mask,
    kv_from_x=False,
    query_from_input=False,
    self_mask=True,
    same_norm=False,
    cross_mask=True,
):
    n1, n2, n3 = (layer.norm1,) * 3 if same_norm else (layer.norm1, layer.norm2, layer.norm3)
    x1 = n1(x + layer.self_attn(x, x, x, tgt_mask if self_mask else None)[0])
    q = x if query_from_input else x1
    kv, mask = (x1, tgt_mask) if kv_from_x else (memory, memory_mask if cross_mask else None)
    x2 = n2(x1 + layer.cross_attn(q, kv, kv, mask)[0])
    return n3(x2 + layer.feed_forward(x2))


def layer_pre_ln(layer, x, memory, tgt_mask, memory_mask):
    h = layer.norm1(x)
    x = x + layer.self_attn(h, h, h, tgt_mask)[0]
    x = x + layer.cross_attn(layer.norm2(x), memory, memory, memory_mask)[0]
    return x + layer.feed_forward(layer.norm3(x))


def layer_no_residual(layer, x, memory, tgt_mask, memory_mask):
    x = layer.norm1(layer.self_attn(x, x, x, tgt_mask)[0])
    x = layer.norm2(layer.cross_attn(x, memory, memory, memory_mask)[0])
    return layer.norm3(layer.feed_forward(x))


def layer_no_cross(layer, x, memory, tgt_mask, memory_mask):
    x = layer.norm1(x + layer.self_attn(x, x, x, tgt_mask)[0])
    return layer.norm3(x + layer.feed_forward(x))


def layer_no_last_norm(layer, x, memory, tgt_mask, memory_mask):
    x = layer.norm1(x + layer.self_attn(x, x, x, tgt_mask)[0])
    x = layer.norm2(x + layer.cross_attn(x, memory, memory, memory_mask)[0])
    return x + layer.feed_forward(x)


LAYER_MISTAKES = {
    "keys and values from the decoder": (lambda *a: _post(*a, kv_from_x=True), "layer_kv_from_x"),
    "cross query from the input": (lambda *a: _post(*a, query_from_input=True), "layer_query_from_input"),
    "no causal mask": (lambda *a: _post(*a, self_mask=False), "layer_no_tgt_mask"),
    "one LayerNorm for all": (lambda *a: _post(*a, same_norm=True), "layer_one_norm"),
    "pre-LN": (layer_pre_ln, "layer_pre_ln"),
    "no residual": (layer_no_residual, "layer_no_residual"),
    "no cross-attention": (layer_no_cross, "layer_no_cross"),
    "no last LayerNorm": (layer_no_last_norm, "layer_no_last_norm"),
    "returns the package's tuple": (lambda layer, *a: layer(*a), "layer_tuple"),
    "attention tuple added": (
        lambda layer, x, *a: x + layer.self_attn(x, x, x),
        "crashed",
    ),
    "wrong shape": (lambda *a: layer_right(*a)[:, :-1], "shape"),
    "no memory mask": (
        lambda *a: _post(*a, cross_mask=False),
        "layer_no_memory_mask",
    ),
    "no masks at all": (
        lambda *a: _post(*a, self_mask=False, cross_mask=False),
        "layer_no_masks",
    ),
    "something else": (lambda layer, x, *a: x * 2, "layer_wrong"),
}


@pytest.mark.parametrize("lang", LANGS)
def test_decoder_layer_accepts_right_answer(lang):
    assert_accepted(check_decoder_layer(layer_right, lang=lang), lang)


def test_decoder_layer_accepts_the_package_layer_output():
    assert check_decoder_layer(lambda layer, *a: layer(*a)[0], lang="en").ok


def test_decoder_layer_leaves_the_global_random_stream_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check_decoder_layer(layer_right, lang="en")
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("lang", LANGS)
def test_decoder_layer_unfinished(lang):
    assert_rejected(check_decoder_layer(stub, lang=lang), lang, "not_written")


# ---- shift right -------------------------------------------------------------------------------


def shift_right(y, bos_id):
    return torch.cat([torch.full((y.size(0), 1), bos_id, dtype=y.dtype), y[:, :-1]], dim=1)


def shift_in_place(y, bos_id):
    y[:, 1:] = y[:, :-1].clone()
    y[:, 0] = bos_id
    return y


SHIFT_MISTAKES = {
    "keeps the last token": (
        lambda y, b: torch.cat([torch.full((y.size(0), 1), b, dtype=y.dtype), y], dim=1),
        "shift_keeps_last",
    ),
    "unshifted": (lambda y, b: y.clone(), "shift_unshifted"),
    "torch.roll": (lambda y, b: torch.roll(y, 1, dims=1), "shift_roll"),
    "shifted left": (
        lambda y, b: torch.cat([y[:, 1:], torch.full((y.size(0), 1), b, dtype=y.dtype)], dim=1),
        "shift_left",
    ),
    "hard-coded bos 1": (
        lambda y, b: torch.cat([torch.full((y.size(0), 1), 1, dtype=y.dtype), y[:, :-1]], dim=1),
        "shift_fixed_bos",
    ),
    "float ids": (lambda y, b: shift_right(y, b).float(), "shift_float_ids"),
    "modifies y": (shift_in_place, "shift_modifies_y"),
    "wrong length": (lambda y, b: y[:, :-1], "shift_shape"),
}


@pytest.mark.parametrize("lang", LANGS)
def test_shift_right_accepts_right_answer(lang):
    assert_accepted(check_shift_right(shift_right, lang=lang), lang)


@pytest.mark.parametrize("lang", LANGS)
def test_shift_right_reports_crash_and_missing_return(lang):
    def crashes(y, bos_id):
        return y[:, :-1] + torch.ones(3)

    def forgets_return(y, bos_id):
        shift_right(y, bos_id)

    assert_rejected(check_shift_right(crashes, lang=lang), lang, "crashed")
    assert_rejected(check_shift_right(forgets_return, lang=lang), lang, "returns_none")


# ---- cross-attention ---------------------------------------------------------------------------


def cross_right(x, memory, src, pad_id):
    keys = (src != pad_id)[:, None, :]  # (B, 1, S)
    scores = x @ memory.transpose(1, 2) / math.sqrt(x.size(-1))  # (B, T, S)
    weights = torch.softmax(scores.masked_fill(~keys, float("-inf")), dim=-1)
    return weights @ memory, weights


def _scores(x, memory, scale=True):
    s = x @ memory.transpose(1, 2)
    return s / math.sqrt(x.size(-1)) if scale else s


def _masked(scores, keep, dim=-1):
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=dim)


def _finish(weights, memory):
    return weights @ memory, weights


CROSS_MISTAKES = {
    "roles swapped": (
        lambda x, m, s, p: _finish_swapped(x, m),
        "cross_roles_swapped",
    ),
    "no mask": (
        lambda x, m, s, p: _finish(torch.softmax(_scores(x, m), dim=-1), m),
        "cross_no_mask",
    ),
    "causal mask": (
        lambda x, m, s, p: _finish(
            _masked(_scores(x, m), (s != p)[:, None, :] & torch.ones(x.size(1), m.size(1), dtype=torch.bool).tril()), m
        ),
        "cross_causal",
    ),
    "no scaling": (
        lambda x, m, s, p: _finish(_masked(_scores(x, m, False), (s != p)[:, None, :]), m),
        "cross_no_scale",
    ),
    "scaled by D": (
        lambda x, m, s, p: _finish(_masked(_scores(x, m, False) / x.size(-1), (s != p)[:, None, :]), m),
        "cross_scale_d",
    ),
    "fill with 0": (
        lambda x, m, s, p: _finish(torch.softmax(_scores(x, m).masked_fill(~(s != p)[:, None, :], 0.0), dim=-1), m),
        "cross_fill_zero",
    ),
    "softmax over queries": (
        lambda x, m, s, p: _finish(_masked(_scores(x, m), (s != p)[:, None, :], dim=-2), m),
        "cross_wrong_axis",
    ),
    "hard-coded pad 0": (
        lambda x, m, s, p: _finish(_masked(_scores(x, m), (s != 0)[:, None, :]), m),
        "cross_fixed_pad",
    ),
    "values from x": (
        lambda x, m, s, p: (x, cross_right(x, m, s, p)[1]),
        "cross_wrong_output",
    ),
    "swapped outputs": (
        lambda x, m, s, p: cross_right(x, m, s, p)[::-1],
        "cross_swapped_outputs",
    ),
    "only the weights": (
        lambda x, m, s, p: cross_right(x, m, s, p)[1],
        "cross_not_a_pair",
    ),
    "wrong weights shape": (lambda x, m, s, p: (x, cross_right(x, m, s, p)[1][:, :1]), "cross_weights_shape"),
    "something else": (
        lambda x, m, s, p: _finish(torch.full((x.size(0), x.size(1), m.size(1)), 1.0 / m.size(1)), m),
        "cross_wrong_weights",
    ),
}


def _finish_swapped(x, memory):
    weights = torch.softmax(_scores(memory, x), dim=-1)  # (B, S, T): queries from the memory
    return weights @ x, weights


@pytest.mark.parametrize("lang", LANGS)
def test_cross_attention_accepts_right_answer(lang):
    assert_accepted(check_cross_attention(cross_right, lang=lang), lang)


def test_cross_attention_accepts_the_package():
    from minitransformer.attention import scaled_dot_product_attention

    def with_package(x, memory, src, pad_id):
        return scaled_dot_product_attention(x, memory, memory, (src != pad_id)[:, None, :])

    assert check_cross_attention(with_package, lang="en").ok


@pytest.mark.parametrize("lang", LANGS)
def test_cross_attention_unfinished(lang):
    assert_rejected(check_cross_attention(stub, lang=lang), lang, "not_written")


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize(
    "check,fn,hint",
    [
        *bank(check_decoder_layer, LAYER_MISTAKES),
        *bank(check_shift_right, SHIFT_MISTAKES),
        *bank(check_cross_attention, CROSS_MISTAKES),
    ],
)
def test_wrong_answers_are_named_in_both_languages(check, fn, hint, lang):
    assert_bank(check, fn, hint, lang)
