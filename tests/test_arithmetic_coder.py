"""The arithmetic coder: random and adversarial messages round trip within the size bound, a model given as a
function, the counts, damaged data, and the errors in both languages."""

from __future__ import annotations

import math
import random
import time

import pytest
import torch

from minitransformer.arithmetic_coder import (
    FREQUENCY_TOTAL,
    ArithmeticDecoder,
    ArithmeticEncoder,
    decode,
    encode,
    frequencies,
    narrow,
)
from minitransformer.i18n import CourseError


def random_counts(n: int, V: int, sharpness: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(n, V, generator=g, dtype=torch.float64) * sharpness, -1)
    return frequencies(probs)


def ideal_bits(symbols, counts) -> float:
    return -sum(math.log2(counts[i, s].item() / counts[i].sum().item()) for i, s in enumerate(symbols))


def share_bits(symbols, counts) -> float:
    """The symbols' shares of the coder's interval, in bits: an interval of more than 2^30 integers cut at integers,
    so each symbol's share is off by less than one integer: at most -log2(count / total − 2^-30) bits (and never
    more than 32, the interval's width)."""
    return sum(
        -math.log2(max(counts[i, s].item() / counts[i].sum().item() - 2**-30, 2**-32)) for i, s in enumerate(symbols)
    )


def size_bound(symbols, counts) -> int:
    """The coder's promise, in bytes: the shares, 2 bits to end, rounded up to whole bytes."""
    return math.ceil((share_bits(symbols, counts) + 2) / 8)


@pytest.mark.parametrize("seed", range(12))
def test_random_symbols_round_trip_within_the_size_bound(seed):
    rng = random.Random(seed)
    V, n = rng.choice([2, 3, 17, 256, 2000]), rng.choice([1, 5, 200, 1500])
    counts = random_counts(n, V, rng.choice([0.5, 3.0, 12.0]), seed)
    symbols = [rng.randrange(V) for _ in range(n)]  # often symbols the model finds unlikely
    data = encode(symbols, counts)
    assert decode(data, n, counts) == symbols
    assert len(data) <= size_bound(symbols, counts)
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
    assert len(data) <= size_bound(symbols, counts), name
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


# --------------------------------------------------------------------------- what the coder refuses (issue 55)


def test_the_coder_ends_within_2_bits_rounded_up_to_the_byte_not_always_under_a_byte():
    """Short messages, as notebook 12's files end: the bytes are at most the shares plus 2 bits, rounded up to whole
    bytes, so up to 9 bits past the ideal; past 8 happens (about one message in twelve), so "under one byte" is not
    what holds."""
    over = []
    for seed in range(300):
        rng = random.Random(seed)
        n = rng.randrange(1, 40)
        counts = random_counts(n, 50, 2.0, seed)
        symbols = [rng.randrange(50) for _ in range(n)]
        data = encode(symbols, counts)
        assert decode(data, n, counts) == symbols
        assert len(data) <= size_bound(symbols, counts)
        over.append(8 * len(data) - ideal_bits(symbols, counts))
    assert -0.01 < min(over) and max(over) <= 9 + 0.01
    assert sum(o > 8 for o in over) >= 5


BAD_SHARES = [
    (3, 3, 10),  # no width: before the issue the encoder looped for ever, its memory growing
    (5, 3, 10),  # start after stop: the same
    (0, 11, 10),  # past the total: garbage bytes
    (-1, 3, 10),  # before 0: garbage bytes
    (0, 1, 2**30 + 1),  # a total the interval cannot hold
    (0, 1.5, 10),
    (True, 2, 10),
]


@pytest.mark.parametrize("lang", ["es", "en"])
@pytest.mark.parametrize("start, stop, total", BAD_SHARES)
def test_a_share_that_is_not_one_is_refused_by_the_encoder_the_decoder_and_narrow(start, stop, total, lang, language):
    language(lang)
    data = encode([1, 2], torch.ones(2, 3, dtype=torch.long))
    begin = time.process_time()
    for call in (
        lambda: ArithmeticEncoder().encode(start, stop, total),
        lambda: ArithmeticDecoder(data).decode(start, stop, total),
        lambda: narrow(0, 2**32 - 1, start, stop, total),
    ):
        with pytest.raises(CourseError) as info:
            call()
        assert ("0 ≤ start < stop ≤ total ≤ 2^30" in str(info.value)) and ("hacen falta" in str(info.value)) == (
            lang == "es"
        )
    assert time.process_time() - begin < 1


def test_the_encoder_asks_the_model_with_one_growing_list_as_the_decoder_does():
    """Before the issue the encoder copied symbols[:i] for every symbol: quadratic (100 000 symbols, 12 CPU
    seconds against the decoder's 3). Now both sides hand the model the same kind of list: one, growing."""
    asked = {"encoder": [], "decoder": []}

    def counts_of(side):
        def counts(previous):
            asked[side].append((previous, len(previous)))
            return torch.tensor([1, 2, 3, 4, 5])

        return counts

    symbols = [i * 7 % 5 for i in range(3000)]
    data = encode(symbols, counts_of("encoder"))
    assert decode(data, len(symbols), counts_of("decoder")) == symbols
    for side, calls in asked.items():
        assert [n for _, n in calls] == list(range(len(symbols))), side
        assert all(previous is calls[0][0] for previous, _ in calls), side  # the same list each time, never a copy
    assert asked["encoder"][0][0] == symbols


def test_frequencies_refuse_rows_that_are_not_distributions_and_take_float32_softmax_rows():
    for row in ([0.9, 0.9], [1.0, 1.0], [0.25, 0.25], [0.5, 0.5015]):
        with pytest.raises(CourseError, match="adding up to 1|sumar 1"):
            frequencies(torch.tensor(row, dtype=torch.float64))
    g = torch.Generator().manual_seed(0)
    for V, sharpness in ((50_257, 1.0), (50_257, 8.0), (300, 20.0)):  # GPT-2's vocabulary; a peaked small one
        probs = torch.softmax(torch.randn(16, V, generator=g) * sharpness, -1)  # float32
        counts = frequencies(probs)
        assert (counts.sum(-1) == FREQUENCY_TOTAL).all() and (counts >= 1).all()
        mixed = 0.3 * probs[:8] + 0.7 * probs[8:]  # a mixture's rows, as the coder mixes models
        assert (frequencies(mixed).sum(-1) == FREQUENCY_TOTAL).all()
    # a flat row a hair over 1 (within the tolerance): the floors take more than the likeliest count holds, so what
    # is owed is taken from the largest counts, each left at 1 at least (before, this row raised)
    V = 2**14
    flat = torch.full((V,), (FREQUENCY_TOTAL / V + 1e-4) / (FREQUENCY_TOTAL - V), dtype=torch.float64)
    assert abs(flat.sum().item() - 1) < 1e-3
    assert frequencies(flat).tolist() == [FREQUENCY_TOTAL // V] * V


def test_a_decoder_refuses_what_is_left_after_the_coder_s_end():
    """Before the issue, two messages one after the other decoded as the first, the second dropped silently."""
    counts = random_counts(60, 20, 2.0, 5)
    symbols = [int(s) for s in torch.randint(0, 20, (60,), generator=torch.Generator().manual_seed(5))]
    first, second = encode(symbols[:30], counts[:30]), encode(symbols[30:], counts[30:])
    assert decode(first, 30, counts[:30]) == symbols[:30]
    for bad in (first + second, first + b"\x00", first[:-1] + bytes([first[-1] | 1])):
        with pytest.raises(CourseError, match="do not end where the encoder ends"):
            decode(bad, 30, counts[:30])
    with pytest.raises(CourseError, match="do not end where the encoder ends"):
        decode(first, 29, counts[:29])  # fewer symbols than were written
    for bit in range(8):  # every flip of the last byte: the ending, or the padding
        with pytest.raises(CourseError):
            decode(first[:-1] + bytes([first[-1] ^ (1 << bit)]), 30, counts[:30])


def test_a_finished_encoder_refuses_more():
    encoder = ArithmeticEncoder()
    encoder.encode(0, 1, 2)
    encoder.finish()
    for call in (lambda: encoder.encode(0, 1, 2), encoder.finish):
        with pytest.raises(CourseError, match="already finished"):
            call()


# --------------------------------------------------------------------------- errors in both languages

BAD = [
    (lambda: frequencies(torch.tensor([0.5, float("nan")])), "NaN", "NaN"),
    (lambda: frequencies(torch.tensor([1, 2])), "probabilidades", "probabilities"),
    (lambda: encode([0], torch.zeros(1, 3, dtype=torch.long)), "≥ 1", "≥ 1"),
    (lambda: encode([5], torch.ones(1, 3, dtype=torch.long)), "símbolo 5", "symbol 5"),
    (lambda: encode(5, torch.ones(1, 3, dtype=torch.long)), "lista de enteros", "list of integers"),
    (lambda: encode([1], "abc"), "counts_of debe", "counts_of must"),
    (lambda: decode(b"\x40", 2, torch.ones(1, 3, dtype=torch.long)), "N = 2", "N = 2"),
    (lambda: ArithmeticDecoder(5), "data deben ser bytes", "data must be bytes"),
    (lambda: ArithmeticDecoder(b"\x40").target(0), "0 ≤ start < stop ≤ total", "0 ≤ start < stop ≤ total"),
    (lambda: narrow(5, 3, 0, 1, 2), "0 ≤ low ≤ high", "0 ≤ low ≤ high"),
    (lambda: narrow(0, 2**32, 0, 1, 2), "0 ≤ low ≤ high", "0 ≤ low ≤ high"),
    (lambda: narrow(0, 9, 0, 1, 11), "anchura", "width"),
    (lambda: frequencies(torch.tensor([0.9, 0.9])), "sumar 1", "adding up to 1"),
]  # fmt: skip


@pytest.mark.parametrize("lang", ["es", "en"])
@pytest.mark.parametrize("call, es, en", BAD)
def test_bad_arguments_raise_in_the_current_language(lang, call, es, en, language):
    language(lang)
    begin = time.process_time()
    with pytest.raises(CourseError) as info:
        call()
    assert time.process_time() - begin < 1
    assert (es if lang == "es" else en) in str(info.value)
    assert str(info.value) == (info.value.es if lang == "es" else info.value.en)
