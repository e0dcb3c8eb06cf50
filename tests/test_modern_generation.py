"""The modern model generates: its key-value cache (RoPE at the true position, Hkv heads), one
``generate`` for both models, and token-for-token equality with Hugging Face's Llama."""

from __future__ import annotations

import pytest
import torch
from generation_runs import generation_runs, padded_prompt

from minitransformer.generation import generate
from minitransformer.hf_import import from_llama
from minitransformer.kv_cache import cache_bytes
from minitransformer.modern import ModernConfig, ModernTransformer, with_rope_layout


def modern(seed=0, **kw) -> ModernTransformer:
    torch.manual_seed(seed)
    base = dict(vocab_size=30, d_model=48, n_heads=6, n_kv_heads=2, n_layers=3, d_ff=64, max_len=96, pad_id=0)
    model = ModernTransformer(ModernConfig(**{**base, **kw})).eval()
    with torch.no_grad():  # weights far from the tiny initialisation, so that a wrong position shows
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(10)
    return model


def run_in_pieces(model, x, lengths, capacity=None):
    cache, start, pieces = model.new_cache(capacity), 0, []
    with torch.no_grad():
        for n in lengths:
            pieces.append(model(x[:, start : start + n], cache=cache))
            start += n
    return torch.cat(pieces, dim=1), cache


@pytest.mark.parametrize("lengths", [(1,) * 12, (5, 1, 1, 1, 1, 1, 1, 1), (4, 3, 5)])
@pytest.mark.parametrize("kv_heads", [6, 2, 1])  # multi-head, grouped-query, multi-query
@pytest.mark.parametrize("capacity", [None, 20])
def test_cache_gives_the_full_forwards_logits(lengths, kv_heads, capacity):
    model = modern(n_kv_heads=kv_heads)
    x = torch.randint(1, 30, (3, 12))
    x[1, :3] = 0  # left padding
    with torch.no_grad():
        full = model(x)
    pieces, cache = run_in_pieces(model, x, lengths, capacity)
    real = x != 0
    assert full.abs().max() > 1.0
    torch.testing.assert_close(pieces[real], full[real], atol=1e-4, rtol=1e-5)
    assert len(cache) == 12 and cache.count.tolist() == [12, 9, 12]
    for layer in cache.layers:
        assert layer.self_attn.k.shape == (3, 12, kv_heads, 8)  # Hkv heads, not H
    if capacity is None:
        assert cache.nbytes() == cache_bytes(3, 3, 12, kv_heads * 8)


@pytest.mark.parametrize("layout", ["halves", "interleaved"])
@pytest.mark.parametrize("positional", ["rope", "learned", "sinusoidal"])
def test_cache_with_every_position_kind_and_layout(layout, positional):
    model = modern(rope_layout=layout, positional=positional, pad_id=None)
    x = torch.randint(0, 30, (2, 10))
    with torch.no_grad():
        full = model(x)
    pieces, _ = run_in_pieces(model, x, (3, 1, 1, 1, 1, 1, 1, 1))
    torch.testing.assert_close(pieces, full, atol=1e-4, rtol=1e-5)


def test_a_new_token_is_turned_at_the_caches_length():
    model = modern(pad_id=None)
    x = torch.randint(1, 30, (2, 9))
    _, cache = run_in_pieces(model, x, (6, 1, 1, 1))
    block = model.blocks[0]
    with torch.no_grad():
        k = block.attn.W_k(block.norm1(model.token(x))).view(2, 9, 2, 8).transpose(1, 2)  # (B, Hkv, T, Dh)
        turned = model.rope(k, positions=torch.arange(9))
        at_zero = model.rope(k, positions=torch.zeros(9, dtype=torch.long))
    cached = cache.layers[0].self_attn.k.transpose(1, 2)  # (B, Hkv, S, Dh)
    torch.testing.assert_close(cached, turned)
    assert (cached[:, :, 8] - at_zero[:, :, 8]).abs().max() > 1e-2  # a different position shows


@pytest.mark.parametrize("lang", ["es", "en"])
def test_a_cached_forward_refuses_a_mask_or_positions(lang, language):
    language(lang)
    model = modern()
    x = torch.randint(1, 30, (1, 4))
    for kwargs in (dict(mask=torch.ones(1, 1, 4, 4, dtype=torch.bool)), dict(positions=torch.arange(4))):
        with pytest.raises(ValueError) as info:
            model(x, cache=model.new_cache(), **kwargs)
        assert ("la caché" if lang == "es" else "the cache") in str(info.value)
    with pytest.raises(ValueError, match="pad_id"):
        ModernConfig(vocab_size=10, pad_id=10)


@pytest.mark.parametrize(
    "temperature, top_k, top_p", [(0.0, None, None), (1.0, None, None), (0.8, 5, 0.9), (1.3, None, 0.7)]
)
def test_generation_identical_with_and_without_the_cache(temperature, top_k, top_p):
    model = modern(seed=1)
    prompt = padded_prompt()
    variants = (dict(use_cache=True), dict(use_cache=False), dict(preallocate=True))
    runs = generation_runs(model, prompt, 30, 2, variants, temperature=temperature, top_k=top_k, top_p=top_p)
    assert torch.equal(runs[0], runs[1]) and torch.equal(runs[0], runs[2])
    assert runs[0].shape == (4, 36) and not bool((runs[0][:, 6:] == 0).any())  # padding is never generated


@pytest.mark.parametrize("norm_first", [True, False])
def test_attention_only_generation_identical_with_and_without_the_cache(norm_first):
    model = modern(seed=3, feed_forward="none", norm_first=norm_first)
    prompt = padded_prompt()
    variants = (dict(use_cache=True), dict(use_cache=False), dict(preallocate=True))
    runs = generation_runs(model, prompt, 30, 2, variants, temperature=1.0)
    assert torch.equal(runs[0], runs[1]) and torch.equal(runs[0], runs[2])
    assert model.blocks[0].feed_forward is None


def test_padded_prompt_generates_like_the_unpadded_one_and_eos_stops():
    model = modern(seed=2)
    short, long = torch.randint(1, 30, (1, 4)), torch.randint(1, 30, (1, 9))
    batch = torch.cat([torch.cat([torch.zeros(1, 5, dtype=torch.long), short], 1), long])
    out = generate(model, batch, 12, temperature=0)
    assert torch.equal(out[0, 5:], generate(model, short, 12, temperature=0)[0])
    assert torch.equal(out[1], generate(model, long, 12, temperature=0)[0])
    eos = int(out[0, 9])  # the short row's first new token
    stopped = generate(model, batch, 12, temperature=0, eos_id=eos)
    assert stopped[0, 9] == eos and bool((stopped[0, 10:] == 0).all())
    first = (out[1, 9:] == eos).nonzero()
    if len(first):  # the long row runs until it produces eos too
        assert bool((stopped[1, 9 + int(first[0]) + 1 :] == 0).all())
    else:
        assert torch.equal(stopped[1], out[1])


# --- Hugging Face's Llama -------------------------------------------------------------------

LLAMAS = {
    "gqa": dict(hidden_size=48, num_attention_heads=6, num_key_value_heads=2, rope_theta=31415.0),
    "mqa": dict(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=1, rope_theta=500000.0, tie_word_embeddings=True
    ),
}


def random_llama(**fields):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(5)
    config = LlamaConfig(
        vocab_size=53,
        intermediate_size=64,
        num_hidden_layers=2,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        attn_implementation="eager",
        **fields,
    )
    hf = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # weights far from the tiny initialisation, so that differences show
        for name, p in hf.named_parameters():
            p.copy_(1 + 0.2 * torch.randn_like(p) if "norm" in name else 0.2 * torch.randn_like(p))
    return hf


def left_padded_prompt():
    prompt = torch.randint(3, 53, (3, 9), generator=torch.Generator().manual_seed(3))
    prompt[1, :4] = 0  # rows of 9, 5 and 7 tokens
    prompt[2, :2] = 0
    return prompt


@pytest.fixture(scope="module", params=sorted(LLAMAS))
def llama_run(request):
    """A random Llama, a left-padded batch, and Hugging Face's greedy continuation with the logits of every step."""
    hf = random_llama(**LLAMAS[request.param])
    prompt = left_padded_prompt()
    out = hf.generate(
        prompt,
        attention_mask=(prompt != 0).long(),
        max_new_tokens=32,
        do_sample=False,
        suppress_tokens=[0],  # as ours: padding is never generated
        eos_token_id=None,
        pad_token_id=0,
        output_logits=True,
        return_dict_in_generate=True,
    )
    return hf, prompt, out.sequences, torch.stack(out.logits, dim=1)  # (B, 9 + 32), (B, 32, V)


@pytest.mark.parametrize("layout", ["halves", "interleaved"])
@pytest.mark.parametrize("use_cache, preallocate", [(True, False), (True, True), (False, False)])
def test_greedy_generation_equals_hugging_faces_token_for_token(llama_run, layout, use_cache, preallocate):
    hf, prompt, theirs, _ = llama_run
    ours = with_rope_layout(from_llama(hf), layout)
    assert ours.config.rope_layout == layout and ours.config.kv_heads == hf.config.num_key_value_heads
    mine = generate(ours, prompt, 32, temperature=0, use_cache=use_cache, preallocate=preallocate)
    assert mine.shape == theirs.shape == (3, 41)
    assert torch.equal(mine, theirs)
    assert len(set(theirs[:, 9:].flatten().tolist())) > 5  # a real continuation, not one repeated token


@pytest.mark.parametrize("layout", ["halves", "interleaved"])
def test_the_logits_of_every_step_equal_hugging_faces(llama_run, layout):
    hf, prompt, tokens, theirs = llama_run
    ours = with_rope_layout(from_llama(hf), layout)
    with torch.no_grad():
        uncached = ours(tokens[:, :-1])[:, 8:]  # (B, 32, V): the logits that chose tokens 9 … 40
        cache = ours.new_cache()
        steps = [ours(prompt, cache=cache)[:, -1]]
        steps += [ours(tokens[:, t : t + 1], cache=cache)[:, -1] for t in range(9, 40)]
    assert theirs.abs().max() > 1.0
    torch.testing.assert_close(uncached, theirs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.stack(steps, dim=1), theirs, atol=1e-5, rtol=1e-5)


def test_from_llama_carries_the_padding_as_hugging_faces_attention_mask():
    hf = random_llama(**LLAMAS["gqa"])
    ours = from_llama(hf)
    assert ours.config.pad_id == 0 and ours.token.padding_idx == 0
    tokens = left_padded_prompt()
    real = tokens != 0
    with torch.no_grad():
        theirs = hf(tokens, attention_mask=real.long(), position_ids=(real.long().cumsum(1) - 1).clamp(min=0)).logits
        mine = ours(tokens)
    torch.testing.assert_close(mine[real], theirs[real], atol=1e-5, rtol=1e-5)


def test_config_cache_bytes_is_what_the_cache_holds_and_llamas_arithmetic():
    for kv_heads in (6, 2, 1):
        model = modern(n_kv_heads=kv_heads)
        cache = model.new_cache()
        with torch.no_grad():
            model(torch.randint(1, 30, (2, 17)), cache=cache)
        assert cache.nbytes() == model.config.cache_bytes(17, batch=2) == 2 * 3 * 2 * 17 * kv_heads * 8 * 4
    llama2_7b = ModernConfig(vocab_size=32000, d_model=4096, n_heads=32, n_layers=32, d_ff=11008, max_len=4096)
    llama2_70b = ModernConfig(
        vocab_size=32000, d_model=8192, n_heads=64, n_kv_heads=8, n_layers=80, d_ff=28672, max_len=4096
    )
    assert llama2_7b.cache_bytes(4096, bytes_per_number=2) == 2 * 2**30  # 2 GiB in fp16
    assert llama2_70b.cache_bytes(4096, bytes_per_number=2) == 1.25 * 2**30
    assert llama2_70b.cache_bytes(128 * 1024, bytes_per_number=2) == 40 * 2**30
