"""Encoder and decoder layers against nn.TransformerEncoderLayer / nn.TransformerDecoderLayer."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from minitransformer.attention import causal_mask, combine_masks, padding_mask
from minitransformer.layers import DecoderLayer, EncoderLayer, FeedForward, make_activation
from minitransformer.reference import to_torch_decoder_layer, to_torch_encoder_layer, torch_mask

PAD = 0
D, H, F_ = 16, 4, 32
MODES = [
    pytest.param(norm_first, act, id=f"{'pre' if norm_first else 'post'}LN-{act}")
    for norm_first in (False, True)
    for act in ("relu", "gelu")
]


def tokens_with_lengths(lengths: list[int], length: int) -> torch.Tensor:
    tokens = torch.randint(1, 9, (len(lengths), length))
    for b, n in enumerate(lengths):
        tokens[b, n:] = PAD
    return tokens


@pytest.mark.parametrize("norm_first, activation", MODES)
def test_encoder_layer_matches_torch(norm_first, activation):
    torch.manual_seed(0)
    ours = EncoderLayer(D, H, F_, dropout=0.1, norm_first=norm_first, activation=activation).eval()
    theirs = to_torch_encoder_layer(ours).eval()
    assert theirs.norm_first == norm_first
    x = torch.randn(3, 6, D)
    src = tokens_with_lengths([6, 4, 2], 6)
    mask = padding_mask(src, PAD)  # (B, 1, 1, S)

    out, w = ours(x, mask)
    ref = theirs(x, src_key_padding_mask=torch_mask(mask[:, 0, 0, :]))
    assert out.shape == (3, 6, D) and w.shape == (3, H, 6, 6)
    assert_close(out, ref)


@pytest.mark.parametrize("norm_first, activation", MODES)
def test_decoder_layer_matches_torch(norm_first, activation):
    torch.manual_seed(1)
    ours = DecoderLayer(D, H, F_, dropout=0.1, norm_first=norm_first, activation=activation).eval()
    theirs = to_torch_decoder_layer(ours).eval()
    T, S = 5, 7
    x, memory = torch.randn(3, T, D), torch.randn(3, S, D)
    tgt = tokens_with_lengths([5, 3, 2], T)
    src = tokens_with_lengths([7, 6, 1], S)
    tgt_mask = combine_masks(padding_mask(tgt, PAD), causal_mask(T))  # (B, 1, T, T)
    memory_mask = padding_mask(src, PAD)  # (B, 1, 1, S)

    out, w_self, w_cross = ours(x, memory, tgt_mask, memory_mask)
    ref = theirs(
        x,
        memory,
        tgt_mask=torch_mask(causal_mask(T)[0, 0]),
        tgt_key_padding_mask=torch_mask(padding_mask(tgt, PAD)[:, 0, 0, :]),
        memory_key_padding_mask=torch_mask(memory_mask[:, 0, 0, :]),
    )
    assert out.shape == (3, T, D)
    assert w_self.shape == (3, H, T, T) and w_cross.shape == (3, H, T, S)
    assert_close(out, ref)
    assert (w_self.triu(1) == 0).all()
    assert (w_cross[2, :, :, 1:] == 0).all()  # the third source has one real token


def test_encoder_layer_with_weights_copied_by_hand():
    """Post-LN encoder layer without reference.py: parameters copied by name here."""
    torch.manual_seed(2)
    ours = EncoderLayer(D, H, F_, dropout=0.0).eval()
    theirs = nn.TransformerEncoderLayer(D, H, F_, dropout=0.0, batch_first=True).eval()
    a = ours.self_attn
    with torch.no_grad():
        theirs.self_attn.in_proj_weight.copy_(torch.cat([a.W_q.weight, a.W_k.weight, a.W_v.weight]))
        theirs.self_attn.in_proj_bias.copy_(torch.cat([a.W_q.bias, a.W_k.bias, a.W_v.bias]))
        theirs.self_attn.out_proj.weight.copy_(a.W_o.weight)
        theirs.self_attn.out_proj.bias.copy_(a.W_o.bias)
        theirs.linear1.weight.copy_(ours.feed_forward.W_1.weight)
        theirs.linear1.bias.copy_(ours.feed_forward.W_1.bias)
        theirs.linear2.weight.copy_(ours.feed_forward.W_2.weight)
        theirs.linear2.bias.copy_(ours.feed_forward.W_2.bias)
        for n in ("norm1", "norm2"):  # random affine parameters, so that a swap would show
            getattr(ours, n).weight.uniform_(0.5, 1.5)
            getattr(ours, n).bias.normal_()
            getattr(theirs, n).weight.copy_(getattr(ours, n).weight)
            getattr(theirs, n).bias.copy_(getattr(ours, n).bias)
    x = torch.randn(2, 5, D)
    assert_close(ours(x)[0], theirs(x))


def test_post_ln_output_is_normalised_and_pre_ln_keeps_the_residual_stream():
    torch.manual_seed(3)
    x = 5 + 3 * torch.randn(2, 5, D)
    post, _ = EncoderLayer(D, H, F_, dropout=0.0).eval()(x)
    assert_close(post.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)  # ends in LayerNorm
    pre_layer = EncoderLayer(D, H, F_, dropout=0.0, norm_first=True).eval()
    with torch.no_grad():  # zero sublayers: pre-LN passes x through untouched
        for lin in (pre_layer.self_attn.W_o, pre_layer.feed_forward.W_2):
            lin.weight.zero_()
            lin.bias.zero_()
    assert_close(pre_layer(x)[0], x)


def test_feed_forward_is_position_wise():
    torch.manual_seed(4)
    ff = FeedForward(D, F_, activation="gelu").eval()
    x = torch.randn(2, 5, D)
    out = ff(x)
    hidden = torch.nn.functional.gelu(x @ ff.W_1.weight.T + ff.W_1.bias)  # (B, T, d_ff)
    expected = hidden @ ff.W_2.weight.T + ff.W_2.bias
    assert_close(out, expected)
    assert_close(ff(x[:, 2:3]), out[:, 2:3])  # one position alone gives the same vector


def test_unknown_activation():
    with pytest.raises(ValueError, match="activation must be one of"):
        make_activation("tanh")
    assert isinstance(make_activation("relu"), nn.ReLU)


def test_layer_dropout_only_in_training_mode():
    torch.manual_seed(5)
    layer = DecoderLayer(D, H, F_, dropout=0.3)
    x, memory = torch.randn(2, 4, D), torch.randn(2, 6, D)
    layer.eval()
    a, b = layer(x, memory)[0], layer(x, memory)[0]
    assert torch.equal(a, b)
    layer.train()
    c, d = layer(x, memory)[0], layer(x, memory)[0]
    assert not torch.allclose(a, c) and not torch.allclose(c, d)
