"""Attention and masks against PyTorch's own implementations and against the formula.

Our masks say True = may attend; ``nn.MultiheadAttention`` says True = blocked, while
``F.scaled_dot_product_attention`` (boolean mask) says True = may attend, like us.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

from minitransformer.attention import (
    MultiHeadAttention,
    attention_weights_needed,
    causal_mask,
    combine_masks,
    padding_mask,
    scaled_dot_product_attention,
)
from minitransformer.reference import to_torch_mha, torch_mask

PAD = 0


def make_tokens(lengths: list[int], max_len: int, vocab: int = 9) -> torch.Tensor:
    """Right-padded token ids (B, max_len): each row has ``lengths[b]`` ids in 1..vocab-1."""
    tokens = torch.randint(1, vocab, (len(lengths), max_len))
    for b, n in enumerate(lengths):
        tokens[b, n:] = PAD
    return tokens


def copy_by_hand(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    """An ``nn.MultiheadAttention`` with our weights, copied here without reference.py."""
    theirs = nn.MultiheadAttention(ours.d_model, ours.n_heads, batch_first=True)
    with torch.no_grad():
        D = ours.d_model
        theirs.in_proj_weight[:D] = ours.W_q.weight
        theirs.in_proj_weight[D : 2 * D] = ours.W_k.weight
        theirs.in_proj_weight[2 * D :] = ours.W_v.weight
        theirs.in_proj_bias[:D] = ours.W_q.bias
        theirs.in_proj_bias[D : 2 * D] = ours.W_k.bias
        theirs.in_proj_bias[2 * D :] = ours.W_v.bias
        theirs.out_proj.weight.copy_(ours.W_o.weight)
        theirs.out_proj.bias.copy_(ours.W_o.bias)
    return theirs.eval()


# ---------------------------------------------------------------- MultiHeadAttention vs PyTorch

B, H, D, T = 3, 4, 16, 6  # batch size different from the number of heads on purpose


@pytest.mark.parametrize("kind", ["none", "padding", "causal", "padding+causal"])
def test_self_attention_matches_torch(kind):
    torch.manual_seed(0)
    ours = MultiHeadAttention(D, H).eval()
    theirs = to_torch_mha(ours).eval()
    x = torch.randn(B, T, D)
    tokens = make_tokens([6, 4, 2], T)

    pad = padding_mask(tokens, PAD) if "padding" in kind else None  # (B, 1, 1, T)
    causal = causal_mask(T) if "causal" in kind else None  # (1, 1, T, T)
    mask = combine_masks(pad, causal)
    # PyTorch receives the two masks its own way: key_padding_mask (B, S), attn_mask (T, S).
    key_padding = torch_mask(pad[:, 0, 0, :]) if pad is not None else None
    attn_mask = torch_mask(causal[0, 0]) if causal is not None else None

    out, w = ours(x, x, x, mask)
    ref_out, ref_w = theirs(x, x, x, key_padding_mask=key_padding, attn_mask=attn_mask, average_attn_weights=False)
    assert w.shape == (B, H, T, T)
    assert_close(out, ref_out)
    assert_close(w, ref_w)
    if pad is not None:  # padded keys get exactly zero weight
        assert (w.masked_select(~pad.expand_as(w)) == 0).all()
    if causal is not None:  # no weight on the future
        assert (w.triu(diagonal=1) == 0).all()


def test_cross_attention_with_different_lengths_matches_torch():
    torch.manual_seed(1)
    T_, S_ = 4, 7
    ours = MultiHeadAttention(D, H).eval()
    theirs = to_torch_mha(ours).eval()
    query = torch.randn(B, T_, D)
    memory = torch.randn(B, S_, D)
    src = make_tokens([7, 5, 1], S_)
    mask = padding_mask(src, PAD)  # (B, 1, 1, S)

    out, w = ours(query, memory, memory, mask)
    ref_out, ref_w = theirs(
        query,
        memory,
        memory,
        key_padding_mask=torch_mask(mask[:, 0, 0, :]),
        average_attn_weights=False,
    )
    assert out.shape == (B, T_, D) and w.shape == (B, H, T_, S_)
    assert_close(out, ref_out)
    assert_close(w, ref_w)


def test_weights_copied_by_hand_give_the_same_function():
    """Does not rely on reference.py: the weights are copied slice by slice here."""
    torch.manual_seed(2)
    ours = MultiHeadAttention(D, H).eval()
    theirs = copy_by_hand(ours)
    query, memory = torch.randn(B, 5, D), torch.randn(B, 3, D)
    mask = torch.tensor([[True, True, False]]).expand(5, 3)  # (T, S): key 2 blocked for all
    out, w = ours(query, memory, memory, mask)
    ref_out, ref_w = theirs(query, memory, memory, attn_mask=~mask, average_attn_weights=False)
    assert_close(out, ref_out)
    assert_close(w, ref_w)
    # The averaged weights that PyTorch returns by default are the mean over our heads.
    _, ref_mean = theirs(query, memory, memory, attn_mask=~mask)
    assert_close(w.mean(dim=1), ref_mean)


def test_without_bias_matches_torch():
    torch.manual_seed(3)
    ours = MultiHeadAttention(D, H, bias=False).eval()
    theirs = to_torch_mha(ours).eval()
    assert theirs.in_proj_bias is None
    x = torch.randn(2, 5, D)
    assert_close(ours(x, x, x)[0], theirs(x, x, x)[0])


def test_float64_copy_agrees_to_rounding_error():
    torch.manual_seed(13)
    ours = MultiHeadAttention(D, H).double().eval()
    theirs = to_torch_mha(ours).eval()
    assert theirs.in_proj_weight.dtype == torch.float64  # the copy follows our dtype and device
    x, memory = torch.randn(B, 5, D, dtype=torch.float64), torch.randn(B, 7, D, dtype=torch.float64)
    mask = padding_mask(make_tokens([7, 2, 5], 7), PAD)
    out, w = ours(x, memory, memory, mask)
    ref_out, ref_w = theirs(x, memory, memory, key_padding_mask=torch_mask(mask[:, 0, 0]), average_attn_weights=False)
    assert_close(out, ref_out, atol=1e-12, rtol=1e-12)
    assert_close(w, ref_w, atol=1e-12, rtol=1e-12)


def test_per_head_scores_are_scaled_by_sqrt_d_head():
    """Recompute one head from the projections: softmax(q_h k_hᵀ / √(D/H))."""
    torch.manual_seed(4)
    ours = MultiHeadAttention(D, H).eval()
    x = torch.randn(2, 5, D)
    _, w = ours(x, x, x)
    Dh = D // H
    for h in range(H):
        rows = slice(h * Dh, (h + 1) * Dh)  # the rows of W_q, W_k that make head h
        q = x @ ours.W_q.weight[rows].T + ours.W_q.bias[rows]  # (B, T, Dh)
        k = x @ ours.W_k.weight[rows].T + ours.W_k.bias[rows]  # (B, S, Dh)
        expected = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(Dh), dim=-1)
        assert_close(w[:, h], expected)


def test_output_is_concatenated_heads_through_W_o():
    torch.manual_seed(5)
    ours = MultiHeadAttention(D, H).eval()
    x = torch.randn(2, 5, D)
    out, w = ours(x, x, x)
    Dh = D // H
    v = ours.W_v(x).view(2, 5, H, Dh).transpose(1, 2)  # (B, H, S, Dh)
    heads = (w @ v).transpose(1, 2).reshape(2, 5, D)  # (B, T, D)
    assert_close(out, ours.W_o(heads))


# ---------------------------------------------------------------- scaled_dot_product_attention


def reference_attention(q, k, v, mask=None):
    """The formula with Python floats, one query row at a time (float64 throughout)."""
    q, k, v = q.double().tolist(), k.double().tolist(), v.double().tolist()
    out, weights = [], []
    d = len(q[0])
    for t, q_row in enumerate(q):
        allowed = [s for s in range(len(k)) if mask is None or bool(mask[t][s])]
        scores = {s: sum(a * b for a, b in zip(q_row, k[s])) / math.sqrt(d) for s in allowed}
        top = max(scores.values(), default=0.0)
        exp = {s: math.exp(x - top) for s, x in scores.items()}
        total = sum(exp.values())
        w = [exp[s] / total if s in exp else 0.0 for s in range(len(k))]
        weights.append(w)
        out.append([sum(w[s] * v[s][j] for s in range(len(k))) for j in range(len(v[0]))])
    return torch.tensor(out, dtype=torch.float64), torch.tensor(weights, dtype=torch.float64)


def test_sdpa_matches_the_formula():
    torch.manual_seed(6)
    q, k, v = torch.randn(4, 8), torch.randn(6, 8), torch.randn(6, 3)
    mask = torch.rand(4, 6) > 0.4
    mask[:, 0] = True  # every row keeps at least one key
    for m in (None, mask):
        out, w = scaled_dot_product_attention(q.double(), k.double(), v.double(), m)
        ref_out, ref_w = reference_attention(q, k, v, m)
        assert_close(w, ref_w)
        assert_close(out, ref_out)


@pytest.mark.parametrize("masked", [False, True])
def test_sdpa_matches_torch_functional(masked):
    torch.manual_seed(7)
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)
    mask = None
    if masked:
        band = torch.ones(5, 7, dtype=torch.bool).tril(2)[None, None]  # (1, 1, T, S)
        mask = combine_masks(padding_mask(make_tokens([7, 3], 7), PAD), band)
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert out.shape == (2, 3, 5, 4) and w.shape == (2, 3, 5, 7)
    # PyTorch's boolean attn_mask has our convention: True = takes part in attention.
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_sdpa_accepts_3d_inputs_with_a_2d_mask():
    torch.manual_seed(8)
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 8)
    out, w = scaled_dot_product_attention(q, k, v, causal_mask(4)[0, 0])
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_close(out, ref)
    assert (w.triu(1) == 0).all()


# ---------------------------------------------------------------- properties


def test_rows_sum_to_one_and_masked_entries_are_zero():
    torch.manual_seed(9)
    mha = MultiHeadAttention(D, H).eval()
    x = torch.randn(B, T, D)
    mask = combine_masks(padding_mask(make_tokens([6, 3, 1], T), PAD), causal_mask(T))
    _, w = mha(x, x, x, mask)
    assert_close(w.sum(-1), torch.ones(B, H, T))
    assert (w >= 0).all()
    assert (w[~mask.expand_as(w)] == 0).all()


def test_fully_masked_row_gives_zeros_without_nan_forward_and_backward():
    torch.manual_seed(10)
    q = torch.randn(2, 2, 4, 8, requires_grad=True)
    k = torch.randn(2, 2, 5, 8, requires_grad=True)
    v = torch.randn(2, 2, 5, 8, requires_grad=True)
    mask = torch.ones(2, 1, 4, 5, dtype=torch.bool)
    mask[0, 0, 1] = False  # query 1 of batch element 0 sees no key at all
    mask[1] = False  # batch element 1 sees nothing anywhere

    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert (w[0, :, 1] == 0).all() and (out[0, :, 1] == 0).all()
    assert (w[1] == 0).all() and (out[1] == 0).all()
    assert_close(w[0, :, [0, 2, 3]].sum(-1), torch.ones(2, 3))  # the other rows still sum to 1

    (out.square().sum() + w.square().sum()).backward()
    for g in (q.grad, k.grad, v.grad):
        assert g is not None and torch.isfinite(g).all()
    assert (q.grad[0, :, 1] == 0).all()  # the empty row does not depend on its query
    assert (k.grad[1] == 0).all() and (v.grad[1] == 0).all()


def test_fully_masked_row_in_multi_head_attention_backward():
    torch.manual_seed(11)
    mha = MultiHeadAttention(D, H)
    x = torch.randn(2, 3, D, requires_grad=True)
    tokens = torch.tensor([[5, 6, 7], [PAD, PAD, PAD]])  # the second sequence is all padding
    out, w = mha(x, x, x, padding_mask(tokens, PAD))
    assert torch.isfinite(out).all()
    assert (w[1] == 0).all()
    # No allowed key: every head outputs zero, so only W_o's bias is left.
    assert_close(out[1], mha.W_o.bias.expand(3, D))
    out.sum().backward()
    grads = [x.grad] + [p.grad for p in mha.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_dropout_only_in_training_mode():
    torch.manual_seed(12)
    mha = MultiHeadAttention(D, H, dropout=0.5)
    x = torch.randn(2, 5, D)
    mha.eval()
    out1, _ = mha(x, x, x)
    out2, _ = mha(x, x, x)
    assert torch.equal(out1, out2)
    mha.train()
    out3, _ = mha(x, x, x)
    out4, _ = mha(x, x, x)
    assert not torch.allclose(out3, out1)
    assert not torch.allclose(out3, out4)


# ---------------------------------------------------------------- masks


def test_mask_builders():
    tokens = torch.tensor([[4, 5, PAD], [6, PAD, PAD]])
    pad = padding_mask(tokens, PAD)
    assert pad.dtype == torch.bool and pad.shape == (2, 1, 1, 3)
    assert pad[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]

    causal = causal_mask(3)
    assert causal.dtype == torch.bool and causal.shape == (1, 1, 3, 3)
    assert causal[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, True]]

    both = combine_masks(pad, None, causal)
    assert both.shape == (2, 1, 3, 3)
    assert torch.equal(both, pad & causal)
    assert combine_masks(None, None) is None


def test_masks_are_built_on_the_input_device():
    tokens = torch.zeros(2, 3, dtype=torch.long, device="meta")
    assert padding_mask(tokens, PAD).device.type == "meta"
    assert causal_mask(3, device="meta").device.type == "meta"
    assert causal_mask(3, device=tokens.device).device == tokens.device


# ---------------------------------------------------------------- bad input


def test_d_model_not_divisible_by_n_heads():
    with pytest.raises(ValueError, match=r"d_model \(10\) must be divisible by n_heads \(3\)"):
        MultiHeadAttention(10, 3)


def test_mask_that_does_not_broadcast():
    mha = MultiHeadAttention(D, H)
    x = torch.randn(2, 5, D)
    with pytest.raises(ValueError, match="does not broadcast"):
        mha(x, x, x, torch.ones(2, 1, 1, 4, dtype=torch.bool))  # S = 4, not 5
    with pytest.raises(ValueError, match="does not broadcast"):
        mha(x, x, x, torch.ones(3, 1, 1, 5, dtype=torch.bool))  # 3 sequences for a batch of 2


def test_3d_mask_for_4d_scores_is_refused_even_when_it_would_broadcast():
    # With B == H a (B, 1, S) mask broadcasts silently, batch against heads: refuse it.
    mha = MultiHeadAttention(D, H)
    x = torch.randn(H, 5, D)
    with pytest.raises(ValueError, match="dimensions"):
        mha(x, x, x, torch.ones(H, 1, 5, dtype=torch.bool))


def test_non_boolean_mask():
    mha = MultiHeadAttention(D, H)
    x = torch.randn(2, 5, D)
    with pytest.raises(ValueError, match="boolean"):
        mha(x, x, x, torch.ones(2, 1, 1, 5))
    with pytest.raises(ValueError, match="boolean"):
        scaled_dot_product_attention(x, x, x, torch.ones(5, 5, dtype=torch.long))


def test_input_of_the_wrong_width():
    mha = MultiHeadAttention(D, H)
    with pytest.raises(ValueError, match="d_model"):
        mha(torch.randn(2, 5, D + 1), torch.randn(2, 5, D), torch.randn(2, 5, D))


# ---------------------------------------------------------------- one attention, two kernels


def test_multi_head_attention_calls_the_function(monkeypatch):
    """Attention is written once: the module's weights are those of scaled_dot_product_attention."""
    import minitransformer.attention as attention

    calls = []
    original = attention.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(args[0].shape)
        return original(*args, **kwargs)

    monkeypatch.setattr(attention, "scaled_dot_product_attention", spy)
    torch.manual_seed(13)
    mha = MultiHeadAttention(D, H).eval()
    x = torch.randn(2, 5, D)
    out, weights = mha(x, x, x, causal_mask(5))
    assert calls == [torch.Size((2, H, 5, D // H))]
    assert weights.shape == (2, H, 5, 5)
    with attention.attention_weights_needed(False):
        fast, none = mha(x, x, x, causal_mask(5))
    assert none is None and len(calls) == 1  # the fused kernel, not the function
    assert_close(fast, out, atol=1e-6, rtol=1e-5)


def test_forward_hooks_on_the_projections_see_every_call():
    """The projections are called as modules (hooks on W_q, W_k, W_v fire), with or without gradients."""
    torch.manual_seed(14)
    mha = MultiHeadAttention(D, H).eval()
    seen = []
    for name in ("W_q", "W_k", "W_v"):
        getattr(mha, name).register_forward_hook(lambda m, i, o, name=name: seen.append(name))
    x = torch.randn(2, 5, D)
    mha(x, x, x)
    with torch.no_grad():
        mha(x, x, x)
    assert seen == ["W_q", "W_k", "W_v"] * 2


# ---------------------------------------------------------------- edge shapes against the peers
#
# The course's convention: a query row with no allowed key gives zero weights and a zero attention
# output, never NaN. F.scaled_dot_product_attention on the CPU (PyTorch 2.13) gives zeros too (older
# releases and other devices may give NaN); nn.MultiheadAttention gives NaN for the whole output row.
# Both are compared on every other row, and ours is checked against the convention on the empty ones.

SDPA_SHAPES = [  # (B, H, T, S, Dh): batch 1 and more, length 1, odd lengths, one head, many heads
    (1, 1, 1, 1, 4),
    (1, 1, 1, 7, 3),
    (3, 1, 5, 5, 8),
    (2, 8, 7, 3, 2),
    (2, 16, 9, 9, 1),
    (1, 4, 13, 17, 5),
]


def _mask_with_an_empty_row(B: int, T: int, S: int, seed: int) -> torch.Tensor:
    mask = torch.rand(B, 1, T, S, generator=torch.Generator().manual_seed(seed)) > 0.4
    mask[..., 0] = True  # every row sees a key...
    mask[0, 0, T // 2] = False  # ...but one, which sees none
    return mask


@pytest.mark.parametrize("masked", ["none", "causal", "empty row"])
@pytest.mark.parametrize("B, H, T, S, Dh", SDPA_SHAPES)
def test_sdpa_equals_torch_functional_on_edge_shapes(B, H, T, S, Dh, masked):
    g = torch.Generator().manual_seed(B * 100 + T * 10 + S)
    q, k, v = (torch.randn(B, H, n, Dh, generator=g) for n in (T, S, S))
    mask = {
        "none": None,
        "causal": torch.ones(T, S, dtype=torch.bool).tril(diagonal=S - T)[None, None],
        "empty row": _mask_with_an_empty_row(B, T, S, seed=T + S),
    }[masked]
    out, w = scaled_dot_product_attention(q, k, v, mask)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert out.shape == (B, H, T, Dh) and w.shape == (B, H, T, S)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    empty = torch.zeros(B, 1, T, dtype=torch.bool) if mask is None else ~mask.any(-1)  # (B, 1, T)
    empty = empty.expand(B, H, T)
    assert_close(out[~empty], ref[~empty])
    assert (out[empty] == 0).all() and (w[empty] == 0).all()  # the course's convention on empty rows
    assert_close(w.sum(-1)[~empty], torch.ones(int((~empty).sum())))


MHA_SHAPES = [  # (B, T, S, D, H)
    (1, 1, 1, 8, 1),
    (1, 5, 5, 8, 8),
    (3, 7, 3, 12, 3),
    (2, 1, 9, 16, 16),
    (4, 9, 9, 6, 1),
]


@pytest.mark.parametrize("B, T, S, D_, H_", MHA_SHAPES)
def test_multi_head_attention_equals_torch_on_edge_shapes_and_empty_rows(B, T, S, D_, H_):
    torch.manual_seed(B + T + S + D_ + H_)
    ours = MultiHeadAttention(D_, H_).eval()
    theirs = to_torch_mha(ours).eval()
    query, memory = torch.randn(B, T, D_), torch.randn(B, S, D_)
    keys = torch.ones(B, S, dtype=torch.bool)  # True = a real key
    if B > 1:
        keys[-1] = False  # the last sequence has no key at all
    rows = torch.ones(T, S, dtype=torch.bool)
    if T > 1:
        rows[T // 2] = False  # one query sees no key in any sequence
    mask = keys[:, None, None, :] & rows[None, None]  # (B, 1, T, S)

    out, w = ours(query, memory, memory, mask)
    ref_out, ref_w = theirs(
        query,
        memory,
        memory,
        key_padding_mask=torch_mask(keys),
        attn_mask=torch_mask(rows),
        average_attn_weights=False,
    )
    empty = ~mask.any(-1)[:, 0]  # (B, T)
    assert out.shape == (B, T, D_) and w.shape == (B, H_, T, S)
    assert torch.isfinite(out).all()
    assert_close(out[~empty], ref_out[~empty])
    assert_close(w.transpose(1, 2)[~empty], ref_w.transpose(1, 2)[~empty])
    # ours: zero weights and a zero attention, so only W_o's bias is left; PyTorch's row is NaN
    assert (w.transpose(1, 2)[empty] == 0).all()
    assert_close(out[empty], ours.W_o.bias.expand(int(empty.sum()), D_))
    assert bool(ref_out[empty].isnan().all())
    with attention_weights_needed(False):  # the fused kernel the models use when no weights are asked for
        fused, none = ours(query, memory, memory, mask)
    assert none is None
    assert_close(fused, out)
