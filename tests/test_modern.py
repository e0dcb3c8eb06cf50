"""The modern decoder-only model: RoPE, RMSNorm, SwiGLU, grouped-query attention, Llama
equality, and the attention fast path."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from minitransformer.attention import (
    MultiHeadAttention,
    attention_weights_needed,
    causal_mask,
    fast_attention,
    scaled_dot_product_attention,
)
from minitransformer.attention_cost import online_softmax
from minitransformer.hf_import import from_llama
from minitransformer.i18n import CourseError
from minitransformer.modern import (
    GroupedQueryAttention,
    ModernConfig,
    ModernTransformer,
    RMSNorm,
    RotaryEmbedding,
    SwiGLU,
    apply_rope,
    rope_cos_sin,
    rope_frequencies,
)

transformers = pytest.importorskip("transformers")


# --- RoPE -------------------------------------------------------------------------------


def rotate_pairs_by_hand(x, base=10000.0):
    """RoPE with explicit 2 × 2 rotations of the pairs (x_2i, x_2i+1). x (T, Dh)."""
    T, Dh = x.shape
    out = torch.empty_like(x)
    for p in range(T):
        for i in range(Dh // 2):
            angle = p * base ** (-2 * i / Dh)
            c, s = math.cos(angle), math.sin(angle)
            rot = torch.tensor([[c, -s], [s, c]])
            out[p, 2 * i : 2 * i + 2] = rot @ x[p, 2 * i : 2 * i + 2]
    return out


def test_rope_interleaved_is_a_rotation_of_each_pair():
    x = torch.randn(7, 8)
    cos, sin = rope_cos_sin(torch.arange(7), 8)
    torch.testing.assert_close(apply_rope(x, cos, sin, interleaved=True), rotate_pairs_by_hand(x))


def test_rope_layouts_differ_by_a_permutation_of_dimensions():
    x = torch.randn(2, 5, 12)
    cos, sin = rope_cos_sin(torch.arange(5), 12)
    perm = torch.cat([torch.arange(0, 12, 2), torch.arange(1, 12, 2)])  # interleaved -> halves
    half = apply_rope(x[..., perm], cos, sin)
    torch.testing.assert_close(half, apply_rope(x, cos, sin, interleaved=True)[..., perm])


def test_rope_frequencies_are_the_sinusoidal_ones():
    torch.testing.assert_close(rope_frequencies(16), 10000 ** (-torch.arange(0, 16, 2) / 16))
    assert rope_frequencies(16, base=500.0)[-1] > rope_frequencies(16)[-1]


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_keeps_norms_and_position_zero(interleaved):
    x = torch.randn(3, 2, 10, 8)
    rope = RotaryEmbedding(8, 32, interleaved=interleaved)
    y = rope(x)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(y[..., 0, :], x[..., 0, :])


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_score_depends_only_on_the_distance(interleaved):
    torch.manual_seed(0)
    q, k = torch.randn(16), torch.randn(16)
    rope = RotaryEmbedding(16, 64, interleaved=interleaved)
    qs = rope(q.expand(64, 16))  # q at every position
    ks = rope(k.expand(64, 16))
    scores = qs @ ks.T  # (64, 64): q at m, k at n
    for d in (-5, 0, 3, 20):
        diag = torch.diagonal(scores, offset=d)  # every pair with n - m = d
        torch.testing.assert_close(diag, diag[:1].expand_as(diag), atol=1e-4, rtol=1e-4)
    assert (scores[0, 0] - scores[0, 3]).abs() > 1e-3  # but it does depend on the distance


def test_rope_offset_continues_the_positions():
    rope = RotaryEmbedding(8, 20)
    x = torch.randn(1, 6, 8)
    torch.testing.assert_close(rope(x)[:, 4:], rope(x[:, 4:], offset=4))


# --- RMSNorm, SwiGLU --------------------------------------------------------------------


def test_rms_norm_matches_torch():
    ours, theirs = RMSNorm(12, eps=1e-5), nn.RMSNorm(12, eps=1e-5)
    with torch.no_grad():
        ours.weight.normal_()
        theirs.weight.copy_(ours.weight)
    x = torch.randn(3, 4, 12) * 5 + 2
    torch.testing.assert_close(ours(x), theirs(x))
    torch.testing.assert_close(ours(x), F.rms_norm(x, (12,), ours.weight, 1e-5))
    z = torch.zeros(2, 12)
    assert torch.equal(ours(z), z)  # ε keeps 0 / 0 away


def test_rms_norm_is_layer_norm_of_a_centred_input():
    x = torch.randn(5, 16)
    x = x - x.mean(-1, keepdim=True)
    torch.testing.assert_close(RMSNorm(16, eps=1e-5)(x), F.layer_norm(x, (16,), eps=1e-5))


def test_swiglu_matches_a_reference():
    torch.manual_seed(0)
    ff = SwiGLU(8, 20)
    x = torch.randn(2, 3, 8)
    a = x @ ff.W_gate.weight.T
    reference = ((a * torch.sigmoid(a)) * (x @ ff.W_up.weight.T)) @ ff.W_down.weight.T
    torch.testing.assert_close(ff(x), reference)
    assert all(m.bias is None for m in (ff.W_gate, ff.W_up, ff.W_down))
    assert sum(p.numel() for p in ff.parameters()) == 3 * 8 * 20


# --- grouped-query attention ------------------------------------------------------------


@pytest.mark.parametrize("n_kv", [1, 2, 4])
def test_gqa_fast_path_equals_einsum_and_repeated_heads(n_kv):
    torch.manual_seed(0)
    attn = GroupedQueryAttention(32, 4, n_kv, rope=RotaryEmbedding(8, 16)).eval()
    x = torch.randn(2, 9, 32)
    mask = causal_mask(9)
    fast, none = attn(x, mask)
    slow, weights = attn(x, mask, need_weights=True)
    assert none is None and weights.shape == (2, 4, 9, 9)
    torch.testing.assert_close(fast, slow)
    # the same as ordinary multi-head attention with each key/value head repeated G times
    q = attn.rope(attn.W_q(x).view(2, 9, 4, 8).transpose(1, 2))
    k = attn.rope(attn.W_k(x).view(2, 9, n_kv, 8).transpose(1, 2)).repeat_interleave(4 // n_kv, dim=1)
    v = attn.W_v(x).view(2, 9, n_kv, 8).transpose(1, 2).repeat_interleave(4 // n_kv, dim=1)
    out, w = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(weights, w)
    torch.testing.assert_close(slow, attn.W_o(out.transpose(1, 2).reshape(2, 9, 32)))
    assert attn.W_k.weight.shape == (n_kv * 8, 32)


# --- equality with transformers' Llama --------------------------------------------------

LLAMA_CONFIGS = [
    dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4),
    dict(hidden_size=32, intermediate_size=40, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2),
    dict(
        hidden_size=48,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=6,
        num_key_value_heads=1,
        rope_theta=500000.0,
        rms_norm_eps=1e-5,
    ),
    dict(
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    ),
]


def random_llama(seed, attn="eager", **sizes):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=61, max_position_embeddings=40, attn_implementation=attn, **sizes)
    hf = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # weights far from the tiny initialisation, so that differences show
        for name, p in hf.named_parameters():
            p.copy_(1 + 0.2 * torch.randn_like(p) if "norm" in name else 0.2 * torch.randn_like(p))
    return hf


@pytest.mark.parametrize("sizes", LLAMA_CONFIGS)
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_llama_logits_are_equal(sizes, attn):
    hf = random_llama(1, attn, **sizes)
    ours = from_llama(hf).eval()
    assert ours.num_parameters() == sum(p.numel() for p in hf.parameters())
    assert ours.config.kv_heads == sizes["num_key_value_heads"]
    tokens = torch.randint(0, 61, (3, 37), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        theirs = hf(tokens).logits
        fast = ours(tokens)
        slow, maps = ours(tokens, return_attention=True)
    assert theirs.abs().max() > 1.0
    torch.testing.assert_close(fast, theirs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(slow, theirs, atol=1e-5, rtol=1e-5)
    assert len(maps) == sizes["num_hidden_layers"] and maps[0].shape == (3, sizes["num_attention_heads"], 37, 37)


def test_llama_equality_needs_rope():
    hf = random_llama(3, **LLAMA_CONFIGS[0])
    ours = from_llama(hf).eval()
    tokens = torch.randint(0, 61, (2, 20))
    with torch.no_grad():
        theirs = hf(tokens).logits
        for block in ours.blocks:
            block.attn.rope = None
        assert (ours(tokens) - theirs).abs().max() > 1e-2


def hf_llama(**fields):
    """A tiny LlamaForCausalLM with spread-out random weights (biases too, when it has them)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    base = dict(
        vocab_size=41,
        hidden_size=32,
        intermediate_size=40,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=48,
        attn_implementation="eager",
    )
    torch.manual_seed(5)
    hf = LlamaForCausalLM(LlamaConfig(**{**base, **fields})).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            p.copy_(1 + 0.2 * torch.randn_like(p) if "norm" in name else 0.2 * torch.randn_like(p))
    return hf


def assert_same_logits(hf, ours, tokens, **kwargs):
    with torch.no_grad():
        theirs = hf(tokens, **kwargs).logits
        mine = ours(tokens)
    assert theirs.abs().max() > 1.0
    torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "fields",
    [
        {"attention_bias": True, "mlp_bias": True},  # biases everywhere: ModernConfig(bias=True)
        {"head_dim": 16},  # 4 heads of 16 on a width of 32
        {"head_dim": 6, "hidden_size": 30, "num_attention_heads": 5, "num_key_value_heads": 5},  # 30 / 5 = 6
        {"head_dim": 8, "hidden_size": 30, "num_attention_heads": 6, "num_key_value_heads": 3},  # 30 not divisible
        {"tie_word_embeddings": True},
        {"pad_token_id": 0},
        {"rope_theta": 500000.0, "rms_norm_eps": 1e-5},
    ],
)
def test_from_llama_carries_every_field_it_accepts_exactly(fields):
    hf = hf_llama(**fields)
    ours = from_llama(hf)
    assert not ours.training  # eval mode, as from_gpt2 and Hugging Face's from_pretrained
    assert ours.config.rope_layout == "halves"
    assert ours.num_parameters() == sum(p.numel() for p in hf.parameters())
    assert_same_logits(hf, ours, torch.randint(0, 41, (2, 11), generator=torch.Generator().manual_seed(1)))


@pytest.mark.parametrize("lang", ["es", "en"])
@pytest.mark.parametrize(
    "fields,named",
    [
        ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope_type"),
        ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, "rope_type"),
        (
            {
                "rope_scaling": {
                    "rope_type": "llama3",
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 16,
                }
            },
            "rope_type",
        ),
        ({"attention_bias": True}, "attention_bias"),
        ({"mlp_bias": True}, "mlp_bias"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"attention_dropout": 0.1}, "attention_dropout"),
    ],
)
def test_from_llama_refuses_what_it_cannot_represent_naming_the_field(fields, named, lang, language):
    hf = hf_llama(**fields)
    language(lang)
    with pytest.raises(ValueError, match=named) as refused:
        from_llama(hf)
    assert isinstance(refused.value, CourseError)
    assert ("no puede representar" if lang == "es" else "cannot represent") in str(refused.value)


def test_from_llama_refuses_other_models_and_a_model_without_its_head():
    from transformers import MistralConfig, MistralForCausalLM

    mistral = MistralForCausalLM(
        MistralConfig(vocab_size=20, hidden_size=16, intermediate_size=8, num_hidden_layers=1, num_attention_heads=2)
    )
    with pytest.raises(ValueError, match="model_type"):
        from_llama(mistral)
    with pytest.raises(ValueError, match="LlamaForCausalLM"):
        from_llama(hf_llama().model)


@pytest.mark.parametrize(
    "B,T,H,Hkv",
    [
        (1, 1, 4, 2),  # one token
        (1, 7, 4, 4),  # batch 1, odd length, no grouping
        (3, 5, 1, 1),  # one head
        (2, 9, 8, 1),  # many heads, multi-query
        (2, 6, 8, 2),  # groups of 4
        (2, 13, 8, 4),  # groups of 2
        (4, 3, 2, 1),
    ],
)
def test_llama_equality_on_edge_shapes(B, T, H, Hkv):
    hf = hf_llama(hidden_size=32, num_attention_heads=H, num_key_value_heads=Hkv)
    ours = from_llama(hf)
    assert_same_logits(hf, ours, torch.randint(0, 41, (B, T), generator=torch.Generator().manual_seed(B * T)))


def test_llama_equality_with_left_padding_and_positions():
    """Left-padded rows: our mask (causal and padding) and positions counting only real tokens give
    Hugging Face's logits (attention_mask and position_ids) on every real token; rows of padding
    queries see no key at all and give finite numbers."""
    hf = hf_llama()
    ours = from_llama(hf)
    tokens = torch.randint(1, 41, (3, 8), generator=torch.Generator().manual_seed(3))
    real = torch.tensor([[1] * 8, [0] * 3 + [1] * 5, [0] * 7 + [1]], dtype=torch.bool)  # (B, T)
    positions = (real.long().cumsum(-1) - 1).clamp(min=0)  # (B, T): 0 at the first real token
    mask = causal_mask(8) & real[:, None, None, :]  # (B, 1, T, T)
    with torch.no_grad():
        theirs = hf(tokens, attention_mask=real.long(), position_ids=positions).logits
        mine = ours(tokens, mask=mask, positions=positions)
        slow, _ = ours(tokens, mask=mask, positions=positions, return_attention=True)
    assert torch.isfinite(mine).all() and torch.isfinite(slow).all()
    torch.testing.assert_close(mine[real], theirs[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(slow[real], theirs[real], atol=1e-5, rtol=1e-5)
    # the same rows without their padding give the same logits
    with torch.no_grad():
        for b in range(3):
            alone = ours(tokens[b : b + 1, real[b]])  # (1, real tokens of row b)
            torch.testing.assert_close(alone[0], mine[b, real[b]], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layout", ["halves", "interleaved"])
def test_both_rope_layouts_give_the_same_logits_once_the_rows_are_permuted(layout):
    """Meta's reference layout (pairs 2i, 2i+1) and Hugging Face's (halves) are one model: the
    permutation of W_q and W_k rows, package function, takes one to the other and back."""
    from minitransformer.modern import with_rope_layout

    hf = hf_llama(attention_bias=True, mlp_bias=True)
    ours = from_llama(hf)
    other = with_rope_layout(ours, "interleaved")
    assert other.config.rope_layout == "interleaved" and other.rope.interleaved
    tokens = torch.randint(0, 41, (2, 10), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        torch.testing.assert_close(other(tokens), ours(tokens), atol=1e-5, rtol=1e-5)
        back = with_rope_layout(other, "halves")
        assert all(torch.equal(a, b) for a, b in zip(back.state_dict().values(), ours.state_dict().values()))
        # the layout alone, without permuting the rows, is another model
        unpermuted = ModernTransformer(replace(ours.config, rope_layout="interleaved")).eval()
        unpermuted.load_state_dict(ours.state_dict())
        assert (unpermuted(tokens) - ours(tokens)).abs().max() > 0.1


def test_permute_rope_rows_is_the_pair_order_within_each_head():
    from minitransformer.modern import permute_rope_rows, rope_pair_order

    assert rope_pair_order(8).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    w = torch.arange(2 * 8 * 3).reshape(16, 3)  # two heads of 8 rows
    halves = permute_rope_rows(w, 8)
    assert torch.equal(halves[:8], w[:8][rope_pair_order(8)]) and torch.equal(halves[8:], w[8:][rope_pair_order(8)])
    assert torch.equal(permute_rope_rows(halves, 8, to="interleaved"), w)
    x = torch.randn(3, 5, 8)
    cos, sin = rope_cos_sin(torch.arange(5), 8)
    order = rope_pair_order(8)
    torch.testing.assert_close(
        apply_rope(x[..., order], cos, sin), apply_rope(x, cos, sin, interleaved=True)[..., order]
    )
    with pytest.raises(ValueError):
        permute_rope_rows(torch.zeros(12, 3), 8)
    with pytest.raises(ValueError):
        permute_rope_rows(w, 8, to="pairs")


@pytest.mark.parametrize("shape", [(5, 12), (1, 1, 12), (2, 3, 12), (2, 3, 4, 12), (1, 12)])
def test_rms_norm_matches_llama_and_torch_on_every_shape(shape):
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    ours, theirs = RMSNorm(12, eps=1e-5), LlamaRMSNorm(12, eps=1e-5)
    with torch.no_grad():
        ours.weight.normal_()
        theirs.weight.copy_(ours.weight)
    x = torch.randn(*shape) * 4 + 1
    torch.testing.assert_close(ours(x), theirs(x))
    torch.testing.assert_close(ours(x), F.rms_norm(x, (12,), ours.weight, 1e-5))
    torch.testing.assert_close(ours(torch.zeros(*shape)), torch.zeros(*shape))


@pytest.mark.parametrize("shape", [(5, 8), (1, 1, 8), (2, 3, 8), (2, 3, 4, 8)])
def test_swiglu_matches_llama_mlp_on_every_shape(shape):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaMLP

    theirs = LlamaMLP(LlamaConfig(hidden_size=8, intermediate_size=20, num_attention_heads=2, num_key_value_heads=2))
    ours = SwiGLU(8, 20)
    with torch.no_grad():
        ours.W_gate.weight.copy_(theirs.gate_proj.weight)
        ours.W_up.weight.copy_(theirs.up_proj.weight)
        ours.W_down.weight.copy_(theirs.down_proj.weight)
    x = torch.randn(*shape) * 3
    torch.testing.assert_close(ours(x), theirs(x))


@pytest.mark.parametrize(
    "B,T,H,Hkv", [(1, 1, 1, 1), (1, 7, 4, 1), (3, 5, 4, 2), (2, 9, 8, 8), (2, 6, 8, 4), (1, 11, 6, 3)]
)
@pytest.mark.parametrize("padding", [False, True])
def test_gqa_equals_torch_sdpa_with_repeated_keys(B, T, H, Hkv, padding):
    """GroupedQueryAttention (both paths) against F.scaled_dot_product_attention with each key/value
    head repeated G times; with padding, rows whose queries see no key give zeros, not NaN."""
    torch.manual_seed(B + T + H)
    Dh = 4
    attn = GroupedQueryAttention(H * Dh, H, Hkv, rope=RotaryEmbedding(Dh, 16)).eval()
    x = torch.randn(B, T, H * Dh)
    mask = causal_mask(T)
    if padding:
        real = torch.ones(B, T, dtype=torch.bool)
        real[0, : T // 2 + 1] = False  # the first row padded on the left (its first queries see nothing)
        mask = mask & real[:, None, None, :]
    fast, _ = attn(x, mask)
    slow, _ = attn(x, mask, need_weights=True)
    q = attn.rope(attn.W_q(x).view(B, T, H, Dh).transpose(1, 2))
    k = attn.rope(attn.W_k(x).view(B, T, Hkv, Dh).transpose(1, 2)).repeat_interleave(H // Hkv, dim=1)
    v = attn.W_v(x).view(B, T, Hkv, Dh).transpose(1, 2).repeat_interleave(H // Hkv, dim=1)
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, T, Dh); NaN where no key
    empty = ~mask.any(-1, keepdim=True).expand(B, H, T, 1)
    reference = attn.W_o(reference.masked_fill(empty, 0.0).transpose(1, 2).reshape(B, T, H * Dh))
    for out in (fast, slow):
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out, reference, atol=1e-5, rtol=1e-4)


def test_positions_turn_each_row_at_its_own_positions():
    rope = RotaryEmbedding(8, 32)
    x = torch.randn(2, 3, 5, 8)  # (B, H, T, Dh)
    positions = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])
    out = rope(x, positions=positions)
    torch.testing.assert_close(out[0], rope(x[0]))
    torch.testing.assert_close(out[1], rope(x[1], offset=7))
    torch.testing.assert_close(rope(x[0], positions=torch.arange(3, 8)), rope(x[0], offset=3))
    torch.testing.assert_close(rope(x[:, 0], positions=positions), out[:, 0])  # (B, T, Dh) too
    for bad in (torch.tensor([0, 1]), torch.tensor([[0.0] * 5] * 2), torch.tensor([[40, 1, 2, 3, 4]] * 2)):
        with pytest.raises(ValueError):
            rope(x, positions=bad)


def test_model_positions_default_to_0_to_T_minus_1():
    """Positions 0 … T − 1 by default; moving them all changes an added position table but not
    RoPE, whose scores depend only on the distance between positions."""
    torch.manual_seed(0)
    for positional in ("rope", "learned", "sinusoidal"):
        model = ModernTransformer(ModernConfig(vocab_size=20, d_model=16, n_heads=2, d_ff=24, positional=positional))
        tokens = torch.randint(0, 20, (2, 6))
        with torch.no_grad():
            torch.testing.assert_close(model(tokens, positions=torch.arange(6)), model(tokens))
            moved = (model(tokens, positions=torch.arange(6) + 3) - model(tokens)).abs().max()
        assert moved < 1e-5 if positional == "rope" else moved > 1e-4


# --- the model --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"positional": "sinusoidal"},
        {"positional": "learned"},
        {"norm": "layer"},
        {"feed_forward": "relu"},
        {"feed_forward": "none"},
        {"feed_forward": "none", "norm_first": False},
        {"norm_first": False},
        {"scale_scores": False},
        {"n_kv_heads": 2},
        {"bias": True},
        {"tie_output": True},
    ],
)
def test_every_variant_is_causal_and_fast_path_equal(change):
    torch.manual_seed(0)
    model = ModernTransformer(ModernConfig(vocab_size=30, d_model=32, n_heads=4, d_ff=40, max_len=16, **change)).eval()
    tokens = torch.randint(0, 30, (2, 12))
    changed = tokens.clone()
    changed[:, 8] = (changed[:, 8] + 1) % 30
    with torch.no_grad():
        a, b = model(tokens), model(changed)
        slow, _ = model(tokens, return_attention=True)
    torch.testing.assert_close(a[:, :8], b[:, :8])  # the future does not change the past
    assert (a[:, 8:] - b[:, 8:]).abs().max() > 0
    torch.testing.assert_close(a, slow, atol=1e-5, rtol=1e-5)
    if change.get("bias"):
        assert model.blocks[0].attn.W_q.bias is not None
    else:
        assert all(not n.endswith("bias") for n, _ in model.named_parameters())


def test_attention_only_blocks_have_no_feed_forward_and_no_second_norm():
    common = dict(vocab_size=30, d_model=32, n_heads=4, d_ff=40, max_len=16, n_layers=2)
    full = ModernTransformer(ModernConfig(**common))
    bare = ModernTransformer(ModernConfig(**common, feed_forward="none"))
    D, F_ = 32, 40
    per_block_ffn = 3 * D * F_ + D  # SwiGLU's three matrices and norm2's gain
    assert full.num_parameters() - bare.num_parameters() == 2 * per_block_ffn
    attention = 4 * D * D + D  # W_q, W_k, W_v, W_o and norm1's gain
    assert bare.num_parameters() == 30 * D + 2 * attention + D + D * 30  # embedding, blocks, final norm, head
    for block in bare.blocks:
        assert block.feed_forward is None and block.norm2 is None
        assert not any("feed_forward" in n or "norm2" in n for n, _ in block.named_parameters())


@pytest.mark.parametrize("norm_first", [True, False])
def test_attention_only_forward_is_the_hand_composition(norm_first):
    torch.manual_seed(0)
    config = ModernConfig(
        vocab_size=30, d_model=32, n_heads=4, max_len=16, n_layers=2, feed_forward="none", norm_first=norm_first
    )
    model = ModernTransformer(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))  # norms' gains away from 1
    tokens = torch.randint(0, 30, (3, 11))
    mask = causal_mask(11)
    with torch.no_grad():
        x = model.token(tokens)
        for block in model.blocks:
            if norm_first:
                x = x + block.attn(block.norm1(x), mask)[0]
            else:
                x = block.norm1(x + block.attn(x, mask)[0])
        if model.norm is not None:
            x = model.norm(x)
        torch.testing.assert_close(model(tokens), model.lm_head(x))


def test_model_trains():
    torch.manual_seed(0)
    model = ModernTransformer(ModernConfig(vocab_size=10, d_model=32, n_heads=4, n_kv_heads=2, d_ff=48, max_len=16))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    tokens = torch.arange(12).remainder(10).repeat(8, 1)  # 0 1 2 … 9 0 1
    for _ in range(60):
        loss = F.cross_entropy(model(tokens[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1


# --- bad input: a ValueError naming the problem, in the current language -----------------


@pytest.mark.parametrize("lang", ["es", "en"])
@pytest.mark.parametrize(
    "make,es,en",
    [
        (lambda: ModernConfig(d_model=30, n_heads=4), "divisible", "divisible"),
        (lambda: ModernConfig(n_heads=4, n_kv_heads=3), "múltiplo de n_kv_heads", "multiple of n_kv_heads"),
        (lambda: ModernConfig(d_model=12, n_heads=4), "debe ser par", "must be even"),
        (lambda: ModernConfig(norm="batch"), "norm debe ser uno de", "norm must be one of"),
        (lambda: ModernConfig(positional="alibi"), "positional debe ser", "positional must be"),
        (lambda: ModernConfig(dropout=1.5), "dropout", "dropout"),
        (
            lambda: ModernTransformer(ModernConfig(vocab_size=10, max_len=8))(torch.zeros(1, 9, dtype=torch.long)),
            "max_len = 8",
            "max_len = 8",
        ),
        (
            lambda: ModernTransformer(ModernConfig(vocab_size=10))(torch.full((1, 3), 10)),
            "fuera del vocabulario",
            "outside the vocabulary",
        ),
        (lambda: ModernTransformer(ModernConfig(vocab_size=10))(torch.zeros(1, 3)), "ids enteros", "integer token ids"),
        (lambda: ModernTransformer(ModernConfig(vocab_size=10))(torch.zeros(3, dtype=torch.long)), "(B, T)", "(B, T)"),
        (lambda: RotaryEmbedding(8, 4)(torch.randn(6, 8)), "se salen de la tabla", "outside the RoPE table"),
        (lambda: rope_frequencies(7), "par", "even"),
        (lambda: online_softmax(torch.randn(3, 4), block_size=0), "block_size", "block_size"),
        (lambda: GroupedQueryAttention(32, 4)(torch.randn(1, 3, 16)), "d_model = 32", "d_model = 32"),
    ],
)
def test_bad_input_raises_in_the_current_language(lang, make, es, en, language):
    language(lang)
    with pytest.raises(ValueError) as info:
        make()
    assert isinstance(info.value, CourseError)
    assert (es if lang == "es" else en) in str(info.value)


# --- the fast path of the course's MultiHeadAttention -----------------------------------


@pytest.fixture(params=["kernel", "guard"])
def empty_rows(request, monkeypatch):
    """Both ways to empty rows: PyTorch's CPU kernel zeroes them itself, or the package's guard."""
    from minitransformer import attention

    if request.param == "guard":
        monkeypatch.setattr(attention, "_kernel_zeroes_empty_rows", lambda: False)
    return request.param


def test_fast_path_equals_einsum_with_masks_and_empty_rows(empty_rows):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    x, mem = torch.randn(3, 5, 16), torch.randn(3, 7, 16)
    pad = torch.tensor([[1] * 7, [1] * 3 + [0] * 4, [0] * 7]).bool()[:, None, None, :]  # (B, 1, 1, S): last row empty
    slow, weights = mha(x, mem, mem, pad)
    with attention_weights_needed(False):
        fast, none = mha(x, mem, mem, pad)
    assert none is None and weights is not None
    torch.testing.assert_close(fast, slow)
    assert torch.isfinite(fast).all()
    torch.testing.assert_close(fast[2], mha.W_o.bias.expand(5, 16))  # empty rows: zero attention output
    out = fast_attention(
        torch.randn(2, 4, 5, 8, requires_grad=True),
        torch.randn(2, 4, 5, 8),
        torch.randn(2, 4, 5, 8),
        torch.zeros(5, 5, dtype=torch.bool),
    )
    assert torch.equal(out, torch.zeros_like(out))


def test_fast_path_gradients_equal_and_finite(empty_rows):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2)
    x = torch.randn(2, 6, 16, requires_grad=True)
    mask = causal_mask(6) & torch.tensor([[True] * 6, [False] * 6]).view(2, 1, 1, 6)
    grads = []
    for needed in (True, False):
        with attention_weights_needed(needed):
            out, _ = mha(x, x, x, mask)
        (gx,) = torch.autograd.grad(out.pow(2).sum(), x)
        grads.append(gx)
    torch.testing.assert_close(grads[0], grads[1])
    assert torch.isfinite(grads[1]).all()


def test_transformer_uses_the_fast_path_only_without_maps(monkeypatch):
    from minitransformer import attention
    from minitransformer.model import Transformer, TransformerConfig

    calls = []
    original = attention.fast_attention
    monkeypatch.setattr(attention, "fast_attention", lambda *a, **k: calls.append(1) or original(*a, **k))
    model = Transformer(
        TransformerConfig(src_vocab_size=11, tgt_vocab_size=13, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0)
    ).eval()
    src, tgt = torch.randint(1, 11, (2, 5)), torch.randint(1, 13, (2, 4))
    with torch.no_grad():
        logits, maps = model(src, tgt, return_attention=True)
        assert not calls and maps.encoder[0] is not None
        torch.testing.assert_close(model(src, tgt), logits)
    assert len(calls) == 3  # encoder self, decoder self, cross
