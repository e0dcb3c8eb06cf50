"""The key-value cache gives the same logits and tokens as recomputing everything."""

from __future__ import annotations

import pytest
import torch
from generation_runs import generation_runs, padded_prompt

from minitransformer.attention import MultiHeadAttention, causal_mask
from minitransformer.decoding import greedy_decode
from minitransformer.generation import generate
from minitransformer.gpt import GPT, GPTConfig
from minitransformer.kv_cache import AttentionCache, KVCache, cache_bytes
from minitransformer.model import Transformer, TransformerConfig


def gpt(seed=0, **kw) -> GPT:
    torch.manual_seed(seed)
    base = dict(vocab_size=30, max_len=80, d_model=32, n_heads=4, n_layers=3, d_ff=64, dropout=0.0, pad_id=0)
    return GPT(GPTConfig(**{**base, **kw})).eval()


def translator(norm_first: bool, seed=0) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(
        TransformerConfig(
            src_vocab_size=25,
            tgt_vocab_size=27,
            d_model=32,
            n_heads=4,
            d_ff=64,
            n_layers=2,
            n_decoder_layers=3,
            dropout=0.0,
            max_len=80,
            norm_first=norm_first,
        )
    ).eval()


def test_attention_cache_one_token_at_a_time():
    torch.manual_seed(0)
    mha = MultiHeadAttention(24, 3).eval()
    x = torch.randn(2, 9, 24)
    full, _ = mha(x, x, x, causal_mask(9))
    cache = AttentionCache()
    steps = [mha(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache=cache)[0] for t in range(9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    assert cache.k.shape == (2, 9, 3, 8)


def test_static_cache_computes_cross_attention_keys_once():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2).eval()
    memory, cache = torch.randn(2, 5, 16), AttentionCache(static=True)
    q = torch.randn(2, 1, 16)
    first, _ = mha(q, memory, memory, cache=cache)
    k = cache.k
    again, _ = mha(q, memory * 0, memory * 0, cache=cache)  # memory is not looked at again
    torch.testing.assert_close(again, first)
    assert cache.k is k and k.shape == (2, 5, 2, 8)


@pytest.mark.parametrize("lengths", [(1, 1, 1), (4, 1, 1, 1), (3, 2, 5), (7,)])
def test_gpt_cache_logits_equal_full_forward(lengths):
    model = gpt()
    x = torch.randint(1, 30, (3, sum(lengths)))
    with torch.no_grad():
        full = model(x)
        cache, start, pieces = model.new_cache(), 0, []
        for n in lengths:
            pieces.append(model(x[:, start : start + n], cache=cache))
            start += n
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=1e-5)
    assert len(cache) == sum(lengths)


@pytest.mark.parametrize("new_tokens", [1, 8, 40])
@pytest.mark.parametrize("temperature, top_k, top_p", [(0.0, None, None), (1.0, None, None), (0.8, 5, 0.9)])
def test_gpt_generation_identical_with_and_without_cache(new_tokens, temperature, top_k, top_p):
    model = gpt(seed=new_tokens)
    prompt = padded_prompt()
    variants = (dict(use_cache=True), dict(use_cache=False))
    runs = generation_runs(model, prompt, new_tokens, 1, variants, temperature=temperature, top_k=top_k, top_p=top_p)
    assert torch.equal(runs[0], runs[1])
    assert runs[0].shape == (4, 6 + new_tokens)
    assert not bool((runs[0][:, 6:] == 0).any())  # padding is never generated


def test_padded_prompt_generates_like_the_unpadded_one():
    model = gpt()
    short = torch.randint(1, 30, (1, 4))
    long = torch.randint(1, 30, (1, 9))
    batch = torch.cat([torch.cat([torch.zeros(1, 5, dtype=torch.long), short], 1), long])
    out = generate(model, batch, 10, temperature=0)
    assert torch.equal(out[0, 5:], generate(model, short, 10, temperature=0)[0])
    assert torch.equal(out[1], generate(model, long, 10, temperature=0)[0])


def test_eos_stops_and_pads():
    model = gpt()
    with torch.no_grad():
        eos = int(model(torch.tensor([[5, 6, 7]]))[0, -1, 1:].argmax()) + 1  # greedy's next token
    out = generate(model, torch.tensor([[5, 6, 7], [8, 9, 10]]), 20, temperature=0, eos_id=eos)
    assert out[0, 3] == eos and bool((out[0, 4:] == 0).all())


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_translator_greedy_identical_with_and_without_cache(norm_first, seed):
    model = translator(norm_first, seed)
    src = torch.randint(4, 25, (5, 9))
    src[1, 4:] = 0  # padded sources
    src[3, 6:] = 0
    a = greedy_decode(model, src, 1, 2, max_len=30)
    b = greedy_decode(model, src, 1, 2, max_len=30, use_cache=True)
    assert torch.equal(a.tokens, b.tokens)
    torch.testing.assert_close(a.scores, b.scores, atol=1e-4, rtol=1e-5)


def test_translator_decoder_cache_logits_and_cross_attention_once():
    model = translator(False)
    src = torch.randint(4, 25, (2, 7))
    tgt = torch.randint(4, 27, (2, 10))
    with torch.no_grad():
        memory, src_mask, _ = model.encode(src)
        full, _, _ = model.decode(tgt, memory, src_mask)
        cache = model.new_cache()
        steps = [model.decode(tgt[:, t : t + 1], memory, src_mask, cache=cache)[0] for t in range(10)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    for layer in cache.layers:
        assert layer.self_attn.k.shape == (2, 10, 4, 8)  # grew one position per step
        assert layer.cross_attn.k.shape == (2, 7, 4, 8)  # the source's, computed once
    assert cache.nbytes() == cache_bytes(3, 2, 10, 32) + cache_bytes(3, 2, 7, 32)


def test_cache_memory_formula():
    model = gpt()
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.randint(1, 30, (2, 11)), cache=cache)
    assert cache.nbytes() == cache_bytes(3, 2, 11, 32) == 2 * 3 * 2 * 11 * 32 * 4


def test_cache_mask_and_positions():
    cache = KVCache(1)
    positions, mask = cache.extend(torch.tensor([[False, True, True], [True, True, True]]))
    assert positions.tolist() == [[0, 0, 1], [0, 1, 2]]
    assert mask.shape == (2, 1, 3, 3)
    assert mask[0, 0].tolist() == [[False, False, False], [False, True, False], [False, True, True]]
    positions, mask = cache.extend(torch.tensor([[True], [True]]))
    assert positions.tolist() == [[2], [3]] and mask.shape == (2, 1, 1, 4)
    assert mask[0, 0, 0].tolist() == [False, True, True, True]


@pytest.mark.parametrize("lengths", [(1, 1, 1), (4, 1, 1, 1), (3, 2, 5)])
def test_preallocated_cache_gives_the_growing_caches_logits_and_writes_in_place(lengths):
    model = gpt()
    x = torch.randint(1, 30, (3, sum(lengths)))
    x[1, :2] = 0  # left padding
    with torch.no_grad():
        runs = []
        for capacity in (None, sum(lengths) + 4):
            cache, start, pieces = model.new_cache(capacity), 0, []
            for n in lengths:
                pieces.append(model(x[:, start : start + n], cache=cache))
                start += n
            runs.append((torch.cat(pieces, dim=1), cache))
    (grown, growing), (written, fixed) = runs
    torch.testing.assert_close(written, grown, atol=1e-6, rtol=1e-6)
    assert len(fixed) == len(growing) == sum(lengths)
    layer = fixed.layers[0].self_attn
    assert layer.k.shape == growing.layers[0].self_attn.k.shape == (3, sum(lengths), 4, 8)
    assert layer.k.data_ptr() == layer._k.data_ptr()  # a view of the tensor allocated once
    assert torch.equal(fixed.key_mask, growing.key_mask) and torch.equal(fixed.count, growing.count)
    assert fixed.nbytes() == cache_bytes(3, 3, sum(lengths) + 4, 32)  # what it holds: the whole capacity
    assert growing.nbytes() == cache_bytes(3, 3, sum(lengths), 32)


@pytest.mark.parametrize("lang", ["es", "en"])
def test_preallocated_cache_refuses_what_does_not_fit(lang, language):
    language(lang)
    model = gpt()
    cache = model.new_cache(capacity=5)
    with torch.no_grad():
        model(torch.randint(1, 30, (2, 4)), cache=cache)
        with pytest.raises(ValueError, match="5") as info:
            model(torch.randint(1, 30, (2, 2)), cache=cache)
    assert ("no caben" if lang == "es" else "do not fit") in str(info.value)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="capacity"):
            KVCache(2, capacity=bad)
    with pytest.raises(ValueError, match="capacity"):
        AttentionCache(static=True, capacity=4)
    small = AttentionCache(capacity=3)
    small.update(torch.randn(2, 3, 4, 8), torch.randn(2, 3, 4, 8))
    with pytest.raises(ValueError, match="3"):
        small.update(torch.randn(2, 1, 4, 8), torch.randn(2, 1, 4, 8))


@pytest.mark.parametrize("preallocate", [False, True])
def test_gpt_generation_preallocated_equals_growing_and_uncached(preallocate):
    model = gpt(seed=3)
    prompt = torch.randint(1, 30, (3, 5))
    prompt[0, :2] = 0
    runs = [
        generate(model, prompt, 20, temperature=0.9, top_k=8, generator=torch.Generator().manual_seed(4), **kw)
        for kw in (dict(use_cache=False), dict(preallocate=preallocate))
    ]
    assert torch.equal(runs[0], runs[1])
