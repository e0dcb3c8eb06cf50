"""The arithmetic coder: random and adversarial messages round trip within the size bound, a model given as a
function, the counts, damaged data, and the errors in both languages."""

from __future__ import annotations

import math
import random

import pytest
import torch

from minitransformer.arithmetic_coder import FREQUENCY_TOTAL, decode, encode, frequencies
from minitransformer.i18n import CourseError


def random_counts(n: int, V: int, sharpness: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(n, V, generator=g, dtype=torch.float64) * sharpness, -1)
    return frequencies(probs)


def ideal_bits(symbols, counts) -> float:
    return -sum(math.log2(counts[i, s].item() / counts[i].sum().item()) for i, s in enumerate(symbols))


def size_bound(symbols, counts) -> float:
    """The coder's promise, in bits: each symbol's share of an interval of more than 2^30 integers is off by
    less than one integer, so it costs at most -log2(count / total − 2^-30) bits (and never more than 32, the
    interval's width); then 2 bits to end and 7 of padding."""
    return 9 + sum(
        -math.log2(max(counts[i, s].item() / counts[i].sum().item() - 2**-30, 2**-32)) for i, s in enumerate(symbols)
    )


@pytest.mark.parametrize("seed", range(12))
def test_random_symbols_round_trip_within_the_size_bound(seed):
    rng = random.Random(seed)
    V, n = rng.choice([2, 3, 17, 256, 2000]), rng.choice([1, 5, 200, 1500])
    counts = random_counts(n, V, rng.choice([0.5, 3.0, 12.0]), seed)
    symbols = [rng.randrange(V) for _ in range(n)]  # often symbols the model finds unlikely
    data = encode(symbols, counts)
    assert decode(data, n, counts) == symbols
    assert len(data) * 8 <= size_bound(symbols, counts)
    likely = counts.argmax(-1).tolist()  # and the symbols the model expects
    assert decode(encode(likely, counts), n, counts) == likely


def adversarial_cases():
    near_one = torch.full((3000, 256), 1e-12, dtype=torch.float64)
    near_one[:, 7] = 1.0
    yield "empty text", [], torch.zeros(0, 256, dtype=torch.long)
    yield "one symbol of one", [0] * 50, torch.ones(50, 1, dtype=torch.long)
    yield "a symbol of probability near 1", [7] * 3000, frequencies(near_one)
    yield "symbols of probability near 0", [3] * 200, frequencies(near_one[:200])
    yield "the likely and the unlikely in turn", [7, 200] * 300, frequencies(near_one[:600])
    yield "every byte value", list(range(256)) * 2, torch.ones(512, 256, dtype=torch.long)
    yield "the first and the last symbol", [0, 255] * 100, random_counts(200, 256, 8.0, 1)
    yield "the largest total the coder takes", [1, 0, 2] * 30, torch.tensor([[1, 2**30 - 3, 2]] * 90)


@pytest.mark.parametrize(
    "name, symbols, counts", list(adversarial_cases()), ids=lambda x: x if isinstance(x, str) else ""
)
def test_adversarial_symbols_round_trip_within_the_size_bound(name, symbols, counts):
    data = encode(symbols, counts)
    assert decode(data, len(symbols), counts) == symbols, name
    assert len(data) * 8 <= size_bound(symbols, counts), name
    if name == "every byte value":
        assert len(data) == 512 + 1  # 8 bits each, and the ending's 2 bits padded to a byte
    if name == "a symbol of probability near 1":
        assert len(data) <= 2


def test_a_model_given_as_a_function_is_asked_with_the_symbols_so_far():
    """A byte bigram: the counts of each symbol depend on the one before; the decoder asks with what it has
    decoded, the encoder with what it has coded, and the two lists are the same."""
    text = b"abracadabra, abracadabra"
    bigram = torch.ones(256, 256, dtype=torch.long)
    for a, b in zip(text, text[1:]):
        bigram[a, b] += 100
    asked = {"encoder": [], "decoder": []}

    def counts_of(side):
        def counts(previous):
            asked[side].append(list(previous))
            return bigram[previous[-1]] if previous else torch.ones(256, dtype=torch.long)

        return counts

    data = encode(list(text), counts_of("encoder"))
    assert bytes(decode(data, len(text), counts_of("decoder"))) == text
    assert asked["encoder"] == asked["decoder"] == [list(text[:i]) for i in range(len(text))]
    assert len(data) < len(text) / 2


def test_frequencies_are_at_least_one_sum_to_the_total_and_follow_the_probabilities():
    probs = torch.softmax(torch.randn(7, 2000, generator=torch.Generator().manual_seed(0)) * 6, -1)  # float32
    counts = frequencies(probs)
    assert counts.dtype == torch.int64 and (counts >= 1).all() and (counts.sum(-1) == FREQUENCY_TOTAL).all()
    ratio = counts.double() / FREQUENCY_TOTAL / probs.double()
    likely = probs > 1e-3
    assert (ratio[likely] - 1).abs().max() < 1e-3  # close to the model's probabilities where it matters
    for i in range(7):  # each row on its own, or all together: the same integers
        assert torch.equal(frequencies(probs[i]), counts[i])
    assert torch.equal(frequencies(torch.tensor([0.0, 1.0, 0.0])), torch.tensor([1, FREQUENCY_TOTAL - 2, 1]))
    assert frequencies(torch.tensor([0.25, 0.75]), total=8).tolist() == [2, 6]
    over = torch.tensor([0.5 + 1e-7, 0.5 + 1e-7], dtype=torch.float64)  # a hair over 1: taken from the likeliest
    assert frequencies(over).sum() == FREQUENCY_TOTAL


def test_a_decoder_given_too_few_bytes_says_so_instead_of_reading_on():
    counts = random_counts(400, 256, 0.5, 3)
    symbols = list(range(200)) * 2
    data = encode(symbols, counts)
    with pytest.raises(CourseError, match="cut short or damaged|cortados o dañados"):
        decode(data[: len(data) // 2], 400, counts)


# --------------------------------------------------------------------------- errors in both languages

BAD = [
    (lambda: frequencies(torch.tensor([0.5, float("nan")])), "NaN", "NaN"),
    (lambda: frequencies(torch.tensor([1, 2])), "probabilidades", "probabilities"),
    (lambda: encode([0], torch.zeros(1, 3, dtype=torch.long)), "≥ 1", "≥ 1"),
    (lambda: encode([5], torch.ones(1, 3, dtype=torch.long)), "símbolo 5", "symbol 5"),
]  # fmt: skip


@pytest.mark.parametrize("lang", ["es", "en"])
@pytest.mark.parametrize("call, es, en", BAD)
def test_bad_arguments_raise_in_the_current_language(lang, call, es, en, language):
    language(lang)
    with pytest.raises(CourseError) as info:
        call()
    assert (es if lang == "es" else en) in str(info.value)
    assert str(info.value) == (info.value.es if lang == "es" else info.value.en)
