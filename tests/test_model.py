"""The whole Transformer: against nn.Transformer, its properties, bad input, saving and devices."""

from __future__ import annotations

import copy
import dataclasses
import io
import math
import pickle

import pytest
import torch
from torch.testing import assert_close

from minitransformer.attention import causal_mask
from minitransformer.model import AttentionMaps, Transformer, TransformerConfig
from minitransformer.positional import sinusoidal_encoding
from minitransformer.reference import to_torch_transformer, torch_mask

PAD = 0
SMALL = dict(
    src_vocab_size=11,
    tgt_vocab_size=13,
    d_model=16,
    n_heads=4,
    d_ff=32,
    n_layers=2,
    dropout=0.1,
    max_len=24,
    pad_id=PAD,
)


def config(**changes) -> TransformerConfig:
    return TransformerConfig(**{**SMALL, **changes})


def model(seed: int = 0, **changes) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(config(**changes)).eval()


def batch(lengths: list[int], length: int, vocab: int) -> torch.Tensor:
    """Right-padded ids (B, length) with ``lengths[b]`` real tokens in 1..vocab-1."""
    tokens = torch.randint(1, vocab, (len(lengths), length))
    for b, n in enumerate(lengths):
        tokens[b, n:] = PAD
    return tokens


def src_tgt(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    src = batch([7, 5, 2], 7, SMALL["src_vocab_size"])  # (3, 7)
    tgt = batch([6, 3, 4], 6, SMALL["tgt_vocab_size"])  # (3, 6)
    return src, tgt


# ---------------------------------------------------------------- against nn.Transformer


@pytest.mark.parametrize(
    "norm_first, activation",
    [(False, "relu"), (True, "relu"), (True, "gelu")],
    ids=["postLN-relu", "preLN-relu", "preLN-gelu"],
)
def test_transformer_matches_torch(norm_first, activation):
    ours = model(norm_first=norm_first, activation=activation, n_decoder_layers=3)
    theirs = to_torch_transformer(ours).eval()
    src, tgt = src_tgt(1)
    T = tgt.size(1)

    logits = ours(src, tgt)
    # Ours: embeddings -> stacks -> generator. PyTorch's stacks in the middle, masks its way.
    h = theirs(
        ours.encoder.embeddings(src),
        ours.decoder.embeddings(tgt),
        tgt_mask=torch_mask(causal_mask(T)[0, 0]),
        src_key_padding_mask=src == PAD,
        tgt_key_padding_mask=tgt == PAD,
        memory_key_padding_mask=src == PAD,
    )
    ref = ours.generator(h)
    assert logits.shape == (3, T, SMALL["tgt_vocab_size"])
    real = tgt != PAD
    assert_close(logits[real], ref[real])


def test_transformer_matches_torch_in_float64():
    ours = model(norm_first=True).double()
    theirs = to_torch_transformer(ours).eval()
    src, tgt = src_tgt(15)
    h = theirs(
        ours.encoder.embeddings(src),
        ours.decoder.embeddings(tgt),
        tgt_mask=torch_mask(causal_mask(tgt.size(1))[0, 0]),
        src_key_padding_mask=src == PAD,
        tgt_key_padding_mask=tgt == PAD,
        memory_key_padding_mask=src == PAD,
    )
    real = tgt != PAD
    assert_close(ours(src, tgt)[real], ours.generator(h)[real], atol=1e-10, rtol=1e-10)


# ---------------------------------------------------------------- properties


def test_causality_future_target_tokens_do_not_change_earlier_logits():
    ours = model()
    src, tgt = src_tgt(2)
    tgt = torch.randint(1, SMALL["tgt_vocab_size"], tgt.shape)  # no padding here
    k = 3
    changed = tgt.clone()
    changed[:, k:] = (tgt[:, k:] % (SMALL["tgt_vocab_size"] - 1)) + 1  # every future id differs
    assert (changed[:, k:] != tgt[:, k:]).all()
    a, b = ours(src, tgt), ours(src, changed)
    assert_close(a[:, :k], b[:, :k])
    assert not torch.allclose(a[:, k:], b[:, k:])  # the change did reach the later positions


def test_padding_invariance_extra_pad_tokens_in_src_and_tgt():
    ours = model()
    src, tgt = src_tgt(3)
    logits, maps = ours(src, tgt, return_attention=True)
    longer_src = torch.cat([src, torch.full((3, 4), PAD)], dim=1)
    longer_tgt = torch.cat([tgt, torch.full((3, 2), PAD)], dim=1)
    assert_close(ours(longer_src, tgt), logits)
    logits2, maps2 = ours(longer_src, longer_tgt, return_attention=True)
    assert_close(logits2[:, : tgt.size(1)], logits)
    for w in maps2.encoder + maps2.cross:  # the appended pads get no weight at all
        assert (w[..., src.size(1) :] == 0).all()


def test_attention_maps_per_layer():
    ours = model(n_decoder_layers=3)
    src, tgt = src_tgt(4)
    logits, maps = ours(src, tgt, return_attention=True)
    assert isinstance(maps, AttentionMaps)
    assert_close(logits, ours(src, tgt))
    assert len(maps.encoder) == 2 and len(maps.decoder_self) == 3 and len(maps.cross) == 3
    B, H, S, T = 3, 4, src.size(1), tgt.size(1)
    for w in maps.encoder:
        assert w.shape == (B, H, S, S)
        assert_close(w.sum(-1), torch.ones(B, H, S))
        assert (w[(src == PAD)[:, None, None, :].expand_as(w)] == 0).all()
    for w in maps.decoder_self:
        assert w.shape == (B, H, T, T)
        assert (w.triu(1) == 0).all()
        assert_close(w.sum(-1), torch.ones(B, H, T))
    for w in maps.cross:
        assert w.shape == (B, H, T, S)
        assert_close(w.sum(-1), torch.ones(B, H, T))


def test_encode_then_decode_equals_forward():
    ours = model()
    src, tgt = src_tgt(5)
    memory, src_mask, _ = ours.encode(src)
    assert memory.shape == (3, src.size(1), SMALL["d_model"])
    assert_close(ours.decode(tgt, memory, src_mask)[0], ours(src, tgt))


def test_fully_masked_rows_give_finite_logits_and_gradients():
    ours = model()
    ours.train()
    src = torch.tensor([[3, 4, 5], [PAD, PAD, PAD]])  # the second source is only padding
    tgt = torch.tensor([[PAD, 2, 3], [4, 5, 6]])  # a pad first token: an empty causal row
    logits, maps = ours(src, tgt, return_attention=True)
    assert torch.isfinite(logits).all()
    assert (maps.cross[0][1] == 0).all() and (maps.decoder_self[0][0, :, 0] == 0).all()
    logits.logsumexp(-1).sum().backward()
    for name, p in ours.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


def test_dropout_only_in_training_mode():
    ours = model(dropout=0.3)
    src, tgt = src_tgt(6)
    assert torch.equal(ours(src, tgt), ours(src, tgt))
    ours.train()
    a, b = ours(src, tgt), ours(src, tgt)
    assert not torch.allclose(a, b)


def test_embeddings_scale_tokens_then_add_positions():
    """The paper: token vector × √d_model, plus the sinusoidal encoding (dropout off in eval)."""
    ours = model()
    emb = ours.encoder.embeddings
    src, _ = src_tgt(14)
    expected = emb.token.weight[src] * SMALL["d_model"] ** 0.5 + sinusoidal_encoding(24, 16)[:7]
    assert_close(emb(src), expected)
    unscaled = model(scale_embeddings=False).encoder.embeddings
    assert_close(unscaled(src), unscaled.token.weight[src] + sinusoidal_encoding(24, 16)[:7])


def test_bert_style_options_run():
    ours = model(positional="learned", embedding_norm=True, n_token_types=2, scale_embeddings=False)
    src, tgt = src_tgt(7)
    assert ours(src, tgt).shape == (3, tgt.size(1), SMALL["tgt_vocab_size"])
    x = ours.encoder.embeddings(src, torch.ones_like(src))  # segment ids change the vectors
    assert not torch.allclose(x, ours.encoder.embeddings(src))


# ---------------------------------------------------------------- configuration and weights


def test_config_is_frozen():
    cfg = config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 32
    assert dataclasses.replace(cfg, d_model=32).d_model == 32 and cfg.d_model == 16
    assert cfg.d_head == 4 and cfg.decoder_layers == 2


def test_weight_tying_and_shared_embeddings_share_the_tensor():
    untied = model()
    tied = model(tie_output=True)
    assert tied.generator.weight is tied.decoder.embeddings.token.weight
    V, Dm = SMALL["tgt_vocab_size"], SMALL["d_model"]
    assert tied.num_parameters() == untied.num_parameters() - V * Dm  # counted once
    with torch.no_grad():
        tied.decoder.embeddings.token.weight[5].fill_(0.25)
    assert (tied.generator.weight[5] == 0.25).all()

    shared = model(src_vocab_size=13, share_embeddings=True)
    assert shared.encoder.embeddings is shared.decoder.embeddings
    with pytest.raises(ValueError, match="share_embeddings"):
        config(share_embeddings=True)  # 11 vs 13 words


def test_state_dict_round_trip_with_weights_only_load():
    ours = model(seed=1, tie_output=True)
    buffer = io.BytesIO()
    torch.save(ours.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    fresh = model(seed=2, tie_output=True)
    src, tgt = src_tgt(8)
    assert not torch.allclose(fresh(src, tgt), ours(src, tgt))
    fresh.load_state_dict(state)
    assert_close(fresh(src, tgt), ours(src, tgt))
    assert fresh.generator.weight is fresh.decoder.embeddings.token.weight
    # Nothing unpicklable (lambdas, local functions) hangs on the modules.
    clone = pickle.loads(pickle.dumps(ours))
    assert_close(clone(src, tgt), ours(src, tgt))
    assert_close(copy.deepcopy(ours)(src, tgt), ours(src, tgt))


def test_float64_and_meta_device():
    ours = model()
    src, tgt = src_tgt(9)
    logits = ours(src, tgt)
    wide = copy.deepcopy(ours).to(dtype=torch.float64)
    logits64 = wide(src, tgt)
    assert logits64.dtype == torch.float64
    assert_close(logits64.float(), logits, atol=1e-4, rtol=1e-4)

    with torch.device("meta"):
        ghost = Transformer(config())
    out, maps = ghost(src.to("meta"), tgt.to("meta"), return_attention=True)
    assert out.device.type == "meta" and out.shape == logits.shape
    assert maps.cross[0].shape == (3, 4, tgt.size(1), src.size(1))


# ---------------------------------------------------------------- bad input


def test_config_d_model_not_divisible_by_n_heads():
    with pytest.raises(ValueError, match=r"d_model \(18\) must be divisible by n_heads \(4\)"):
        config(d_model=18)


def test_sequence_longer_than_max_len():
    ours = model(max_len=8)
    ok = torch.ones(1, 8, dtype=torch.long)
    ours(ok, ok)
    too_long = torch.ones(1, 9, dtype=torch.long)
    with pytest.raises(ValueError, match="longer than max_len=8"):
        ours(too_long, ok)
    with pytest.raises(ValueError, match="longer than max_len=8"):
        ours(ok, too_long)


@pytest.mark.parametrize("bad", [-1, 11, 100])
def test_source_token_outside_the_vocabulary(bad):
    src, tgt = src_tgt(10)
    src[1, 2] = bad
    message = rf"src has token id {bad}, outside the vocabulary \[0, 11\)"
    with pytest.raises(ValueError, match=message):
        model()(src, tgt)


@pytest.mark.parametrize("bad", [-3, 13])
def test_target_token_outside_the_vocabulary(bad):
    src, tgt = src_tgt(11)
    tgt[0, 1] = bad
    message = rf"tgt has token id {bad}, outside the vocabulary \[0, 13\)"
    with pytest.raises(ValueError, match=message):
        model()(src, tgt)


def test_empty_batch_or_sequence():
    ours = model()
    src, tgt = src_tgt(12)
    with pytest.raises(ValueError, match="src is empty"):
        ours(src[:0], tgt[:0])
    with pytest.raises(ValueError, match="src is empty"):
        ours(src[:, :0], tgt)
    with pytest.raises(ValueError, match="tgt is empty"):
        ours(src, tgt[:, :0])


def test_mismatched_batches_and_float_ids():
    ours = model()
    src, tgt = src_tgt(13)
    with pytest.raises(ValueError, match="batch sizes differ"):
        ours(src, tgt[:2])
    with pytest.raises(ValueError, match="integer token ids"):
        ours(src.float(), tgt)


def test_token_embeddings_start_at_the_scale_the_sqrt_d_model_factor_assumes():
    config = TransformerConfig(src_vocab_size=4000, tgt_vocab_size=3000, d_model=128, n_heads=4, d_ff=64, n_layers=1)
    model = Transformer(config)
    for emb in (model.encoder.embeddings.token.weight, model.decoder.embeddings.token.weight):
        assert abs(emb.std().item() - 128**-0.5) < 0.02 * 128**-0.5  # N(0, 1/d_model)
        # times √d_model, a token has about the norm √d_model; the positional encoding √(d_model/2)
        ratio = math.sqrt(64) / (emb.norm(dim=-1).mean().item() * math.sqrt(128))
        assert 0.68 < ratio < 0.73
    w = model.encoder.layers[0].self_attn.W_q.weight  # other matrices keep Xavier's bound
    assert w.abs().max() <= math.sqrt(6 / (w.size(0) + w.size(1))) + 1e-6


def test_token_ids_are_checked_once_per_input_per_forward(monkeypatch):
    """Each check reads the ids back (a GPU synchronisation): one per input tensor."""
    import minitransformer.gpt as gpt
    import minitransformer.model as model_module
    import minitransformer.modern as modern

    checked = []

    def counting(tokens, vocab_size, name="tokens", **kwargs):
        checked.append(name)

    for module in (model_module, gpt, modern):
        monkeypatch.setattr(module, "check_tokens", counting)
    src, tgt = src_tgt(14)
    model()(src, tgt)
    assert checked == ["src", "tgt"]
    checked.clear()
    model()(src, tgt, return_attention=True)
    assert checked == ["src", "tgt"]
    checked.clear()
    tokens = torch.randint(0, 11, (2, 6))
    gpt.GPT(gpt.GPTConfig(vocab_size=11, max_len=8, d_model=16, n_heads=2, n_layers=2, d_ff=32))(tokens)
    assert checked == ["tokens"]
    checked.clear()
    modern.ModernTransformer(modern.ModernConfig(vocab_size=11, d_model=16, n_heads=2, n_layers=2, d_ff=32))(tokens)
    assert checked == ["tokens"]
