"""Temperature, top-k and top-p: their properties, and the errors they raise in both languages."""

from __future__ import annotations

import pytest
import torch

from minitransformer.sampling import (
    apply_temperature,
    next_token_probs,
    sample_next_token,
    top_k_filter,
    top_p_filter,
)


@pytest.fixture
def logits():
    return torch.randn(6, 50, generator=torch.Generator().manual_seed(0)) * 3


def test_temperature_tends_to_greedy(logits):
    greedy = next_token_probs(logits, temperature=0)
    assert torch.equal(greedy.argmax(-1), logits.argmax(-1))
    assert torch.equal(greedy.sum(-1), torch.ones(6))
    torch.testing.assert_close(next_token_probs(logits, temperature=1e-3), greedy, atol=1e-6, rtol=0)
    assert torch.equal(sample_next_token(logits, temperature=0), logits.argmax(-1))
    # a lower temperature never lowers the top token's probability
    tops = [next_token_probs(logits, temperature=t).max(-1).values for t in (2.0, 1.0, 0.5, 0.1)]
    assert all(bool((a <= b + 1e-6).all()) for a, b in zip(tops, tops[1:]))


def test_temperature_one_is_the_softmax_and_high_is_flat(logits):
    torch.testing.assert_close(next_token_probs(logits), torch.softmax(logits, -1))
    torch.testing.assert_close(apply_temperature(logits, 2.0), logits / 2)
    flat = next_token_probs(logits, temperature=1e4)
    torch.testing.assert_close(flat, torch.full_like(flat, 1 / 50), atol=1e-3, rtol=0)


@pytest.mark.parametrize("k", [1, 3, 10, 50, 80])
def test_top_k_keeps_the_k_largest(logits, k):
    kept = top_k_filter(logits, k).isfinite()
    assert torch.equal(kept.sum(-1), torch.full((6,), min(k, 50)))
    # every kept logit is larger than every removed one
    smallest_kept = logits.masked_fill(~kept, float("inf")).min(-1).values
    largest_removed = logits.masked_fill(kept, float("-inf")).max(-1).values
    assert bool((smallest_kept > largest_removed).all())
    assert torch.equal(top_k_filter(logits, k)[kept], logits[kept])


def test_top_k_keeps_ties():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0]])
    assert top_k_filter(x, 1).isfinite().tolist() == [[False, True, True, False]]


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.9, 0.99])
def test_top_p_keeps_the_smallest_set_reaching_p(logits, p):
    probs = torch.softmax(logits, -1)
    kept = top_p_filter(logits, p).isfinite()
    for row in range(6):
        mass = probs[row][kept[row]].sum()
        assert mass >= p - 1e-6 or bool(kept[row].all())
        # dropping the least likely kept token falls below p: the set is the smallest
        least = probs[row][kept[row]].min()
        assert mass - least < p
        # the kept tokens are the most likely ones
        removed = probs[row][~kept[row]]
        assert removed.numel() == 0 or probs[row][kept[row]].min() >= removed.max()
    assert torch.equal(top_p_filter(logits, p)[kept], logits[kept])


@pytest.mark.parametrize("vocab", [10, 1000, 50257])
def test_top_p_of_one_keeps_every_token(vocab):
    """A float32 cumulative sum reaches 1.0 before the tail of a large vocabulary: p = 1 must not cut it."""
    logits = torch.randn(3, vocab, generator=torch.Generator().manual_seed(vocab)) * 5
    assert bool(top_p_filter(logits, 1.0).isfinite().all())
    assert torch.equal(top_p_filter(logits, 1.0), logits)
    assert bool((next_token_probs(logits, top_p=1.0) > 0).sum(-1).eq(vocab).all())


def test_top_p_by_hand():
    probs = torch.tensor([[0.5, 0.05, 0.3, 0.15]])
    kept = lambda p: top_p_filter(probs.log(), p).isfinite().tolist()[0]  # noqa: E731
    assert kept(0.5) == [True, False, False, False]
    assert kept(0.51) == [True, False, True, False]
    assert kept(0.8) == [True, False, True, False]
    assert kept(0.81) == [True, False, True, True]
    assert kept(1.0) == [True, True, True, True]


def test_filters_compose_and_renormalise(logits):
    probs = next_token_probs(logits, temperature=0.7, top_k=10, top_p=0.8)
    torch.testing.assert_close(probs.sum(-1), torch.ones(6))
    assert bool(((probs > 0).sum(-1) <= 10).all())
    manual = torch.softmax(top_p_filter(top_k_filter(logits / 0.7, 10), 0.8), -1)
    torch.testing.assert_close(probs, manual)


def test_same_generator_same_draws(logits):
    a = [sample_next_token(logits, 1.0, generator=torch.Generator().manual_seed(5)) for _ in range(2)]
    assert torch.equal(a[0], a[1])
    g = torch.Generator().manual_seed(5)
    draws = torch.stack([sample_next_token(logits, 1.0, top_k=5, generator=g) for _ in range(200)])
    assert len(draws.unique()) > 6  # different draws from a moving generator
    assert bool((top_k_filter(logits, 5).isfinite().gather(1, draws.T)).all())  # all within the top 5


def test_sampling_follows_the_distribution():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).expand(20000, 4)
    draws = sample_next_token(logits, 1.0, generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(draws, minlength=4).float() / len(draws)
    torch.testing.assert_close(freq, torch.softmax(logits[0], -1), atol=0.015, rtol=0)


BAD = [
    (lambda x: apply_temperature(x, 0), "temperatura 0", "temperature of 0"),
    (lambda x: apply_temperature(x, -1.0), "≥ 0", "≥ 0"),
    (lambda x: next_token_probs(x, temperature=-0.5), "temperatura", "temperature"),
    (lambda x: next_token_probs(x, temperature=float("nan")), "temperatura", "temperature"),
    (lambda x: next_token_probs(x, temperature="hot"), "temperatura", "temperature"),
    (lambda x: top_k_filter(x, 0), "top_k", "top_k"),
    (lambda x: top_k_filter(x, -3), "top_k", "top_k"),
    (lambda x: top_k_filter(x, 2.5), "top_k", "top_k"),
    (lambda x: next_token_probs(x, top_k=0), "top_k", "top_k"),
    (lambda x: top_p_filter(x, 0.0), "(0, 1]", "(0, 1]"),
    (lambda x: top_p_filter(x, 1.5), "(0, 1]", "(0, 1]"),
    (lambda x: top_p_filter(x, -0.2), "(0, 1]", "(0, 1]"),
    (lambda x: sample_next_token(x, top_p=2), "(0, 1]", "(0, 1]"),
    (lambda x: top_k_filter(x.long(), 2), "coma flotante", "floating-point"),
]


@pytest.mark.parametrize("lang", ["es", "en"])
@pytest.mark.parametrize("call, es, en", BAD)
def test_bad_arguments_raise_in_the_current_language(lang, call, es, en, logits, language):
    language(lang)
    with pytest.raises(ValueError) as info:
        call(logits)
    assert (es if lang == "es" else en) in str(info.value)
    assert str(info.value) == (info.value.es if lang == "es" else info.value.en)


# --------------------------------------------------------------------------- the peers: transformers' warpers

warpers = pytest.importorskip("transformers.generation.logits_process")


@pytest.mark.parametrize("vocab", [10, 97, 1000, 50257])
@pytest.mark.parametrize("scale", [1.0, 3.0, 10.0])
def test_top_p_keeps_what_transformers_keeps(vocab, scale):
    """The kept set equals TopPLogitsWarper's (its convention: remove the least likely tokens while their
    cumulative mass is ≤ 1 - p, always keep the most likely), on small and GPT-2-sized vocabularies."""
    g = torch.Generator().manual_seed(vocab + int(scale))
    logits = torch.randn(4, vocab, generator=g) * scale
    logits[1] = logits[1].round()  # ties
    for p in (0.01, 0.1, 0.5, 0.9, 0.95, 0.99, 0.999):
        theirs = warpers.TopPLogitsWarper(p)(None, logits.clone())
        assert torch.equal(top_p_filter(logits, p).isfinite(), theirs.isfinite()), p
        assert torch.equal(top_p_filter(logits, p), theirs), p


@pytest.mark.parametrize("vocab", [1, 2, 10, 50257])
@pytest.mark.parametrize("k", [1, 2, 5, 50, 60000])
def test_top_k_and_temperature_equal_transformers_warpers(vocab, k):
    """TopKLogitsWarper keeps ties with the k-th too, and a k larger than the vocabulary keeps everything."""
    g = torch.Generator().manual_seed(vocab + k)
    logits = torch.randn(3, vocab, generator=g) * 4
    logits[0] = logits[0].round()  # ties with the k-th
    assert torch.equal(top_k_filter(logits, k), warpers.TopKLogitsWarper(k)(None, logits.clone()))
    for tau in (0.1, 0.7, 1.0, 2.5):
        assert torch.equal(apply_temperature(logits, tau), warpers.TemperatureLogitsWarper(tau)(None, logits.clone()))


@pytest.mark.parametrize("batch", [1, 5])
def test_the_three_filters_compose_as_transformers_generate_does(batch):
    """Temperature, then top-k, then top-p: the order of transformers' generate, the same distribution."""
    logits = torch.randn(batch, 300, generator=torch.Generator().manual_seed(batch)) * 3
    scores = logits.clone()
    for warp in (warpers.TemperatureLogitsWarper(0.8), warpers.TopKLogitsWarper(40), warpers.TopPLogitsWarper(0.9)):
        scores = warp(None, scores)
    torch.testing.assert_close(next_token_probs(logits, temperature=0.8, top_k=40, top_p=0.9), scores.softmax(-1))
