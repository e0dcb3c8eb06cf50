"""Byte n-grams: Kneser-Ney worked by hand, the readers that keep counting against fitting again, the choice of
order and discount on training data, a real file coded with one, and the errors in both languages."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from bilingual_errors import assert_refused

from minitransformer.arithmetic_coder import decode, encode, frequencies
from minitransformer.course.prose import prose
from minitransformer.ngram import MAX_ORDER, ByteNGram, NGramReader, choose_ngram, choose_order

D = 0.75


@pytest.fixture(scope="module")
def text() -> bytes:
    """About 20 KB of the course's Spanish prose, enough for n-grams to have something to learn."""
    return prose("es", "train").encode("utf-8")[:20_000]


# --------------------------------------------------------------------------- Kneser-Ney


def test_kneser_ney_on_abracadabra_by_hand():
    model = ByteNGram(2).fit(b"abracadabra")
    # bigrams: ab 2, br 2, ra 2, ac 1, ca 1, ad 1, da 1 (7 different)
    # continuation counts N1+(·w): a after r, c, d -> 3; b, r, c, d -> 1 each; 7 in all, 5 bytes seen
    uniform = 1 / 256
    lower = {w: max(n - D, 0) / 7 + D * 5 / 7 * uniform for w, n in {"a": 3, "b": 1, "r": 1, "c": 1, "d": 1}.items()}
    unseen = D * 5 / 7 * uniform
    p = model.probs(b"")
    for w, expected in lower.items():
        assert p[ord(w)] == pytest.approx(expected, rel=1e-12)
    assert p[ord("z")] == pytest.approx(unseen, rel=1e-12)
    # after "a": ab 2, ac 1, ad 1 -> c(a·) = 4, N1+(a·) = 3
    p = model.probs(b"xa")
    assert p[ord("b")] == pytest.approx((2 - D) / 4 + D * 3 / 4 * lower["b"], rel=1e-12)
    assert p[ord("c")] == pytest.approx((1 - D) / 4 + D * 3 / 4 * lower["c"], rel=1e-12)
    assert p[ord("a")] == pytest.approx(D * 3 / 4 * lower["a"], rel=1e-12)
    assert p[ord("z")] == pytest.approx(D * 3 / 4 * unseen, rel=1e-12)
    # after "r": ra 2 -> c(r·) = 2, N1+(r·) = 1
    assert model.probs(b"r")[ord("a")] == pytest.approx((2 - D) / 2 + D * 1 / 2 * lower["a"], rel=1e-12)
    # a context never seen backs off to the lower order entirely
    np.testing.assert_allclose(model.probs(b"z"), model.probs(b""), rtol=1e-15)


def test_order_one_is_the_counts_interpolated_with_uniform():
    model = ByteNGram(1).fit("abracadabra")
    counts = {"a": 5, "b": 2, "r": 2, "c": 1, "d": 1}  # 11 bytes, 5 different
    expected = np.full(256, D * 5 / 11 / 256)
    for w, n in counts.items():
        expected[ord(w)] += (n - D) / 11
    for context in (b"", b"a", b"zzz"):
        np.testing.assert_allclose(model.probs(context), expected, rtol=1e-12)


@pytest.mark.parametrize("order", range(1, MAX_ORDER + 1))
@pytest.mark.parametrize("discount", [0.75, 0.3, 1.0])
def test_probabilities_sum_to_one_and_are_never_zero(order, discount, text):
    model = ByteNGram(order, discount).fit(text[:5000])
    rng = random.Random(order)
    contexts = [b"", b"a", b"\xff" * 8, bytes(rng.randrange(256) for _ in range(12)), "la atención ".encode()]
    contexts += [text[i : i + rng.randrange(0, 10)] for i in rng.sample(range(4990), 30)]
    for context in contexts:
        p = model.probs(context)
        assert p.shape == (256,)
        assert p.sum() == pytest.approx(1, abs=1e-12)
        assert (p > 0).all()


@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_bits_are_the_sum_of_minus_log2_probs(order, text):
    model = ByteNGram(order).fit(text[:8000])
    data, context = text[9000:9300], text[8990:9000]
    brute = sum(-math.log2(model.probs(data[:i])[data[i]]) for i in range(len(data)))
    assert model.bits(data) == pytest.approx(brute, rel=1e-12)
    full = context + data
    brute = sum(-math.log2(model.probs(full[: len(context) + i])[data[i]]) for i in range(len(data)))
    assert model.bits(data, context) == pytest.approx(brute, rel=1e-12)
    assert model.bits_per_byte(data, context) == pytest.approx(brute / len(data), rel=1e-12)
    assert model.bits(data.decode("utf-8", "ignore")) == pytest.approx(
        model.bits(data.decode("utf-8", "ignore").encode())
    )


@pytest.mark.parametrize("order", [2, 5, MAX_ORDER])
def test_a_text_shorter_than_the_grams_backs_off_to_what_was_counted(order):
    model = ByteNGram(order).fit(b"ab")
    np.testing.assert_allclose(model.probs(b"xyzab"), ByteNGram(min(order, 2)).fit(b"ab").probs(b"b"), rtol=1e-12)
    brute = sum(-math.log2(model.probs(b"abcab"[:i])[b"abcab"[i]]) for i in range(5))
    assert model.bits(b"abcab") == pytest.approx(brute, rel=1e-12)


def test_a_higher_order_fits_its_training_text_better(text):
    fitted = [ByteNGram(order).fit(text).bits_per_byte(text) for order in range(1, 7)]
    assert all(a > b for a, b in zip(fitted, fitted[1:])), fitted
    assert fitted[0] < 5 and fitted[-1] < 1.5


def test_choose_order_picks_the_lowest_validation_loss(text):
    orders = range(1, MAX_ORDER + 1)
    chosen = choose_order(text)
    cut = round(len(text) * 0.9)
    brute = {o: ByteNGram(o).fit(text[:cut]).bits_per_byte(text[cut:], text[:cut]) for o in orders}
    assert chosen in orders
    assert brute[chosen] == min(brute.values())
    assert chosen >= 3  # prose is more than letter and pair frequencies
    assert brute[1] > brute[2] > brute[3]
    assert choose_order(text, [3]) == 3


def test_sampling_is_reproducible_and_follows_the_counts():
    model = ByteNGram(3).fit(b"ab" * 200)
    assert model.sample(20, random.Random(0), b"ab") == model.sample(20, random.Random(0), b"ab")
    drawn = model.sample(200, random.Random(1), "ab")
    assert len(drawn) == 200
    assert sum(x != y for x, y in zip(drawn, b"ab" * 100)) < 10  # "ab" again and again, nearly always
    assert model.sample(0, random.Random(0)) == b""


# --------------------------------------------------------------------------- n-grams that keep counting


@pytest.mark.parametrize("order", [1, 2, 4])
def test_a_reader_that_does_not_adapt_is_the_fitted_model(order, text):
    model = ByteNGram(order, 0.8).fit(text[:6000])
    context, data = text[5990:6000], text[6000:6400]
    reader = NGramReader(model, context)
    for i, byte in enumerate(data):
        full = model.probs(context + data[:i])
        np.testing.assert_allclose(reader.probs(), full, rtol=1e-13)
        assert reader.probability(byte) == pytest.approx(full[byte], rel=1e-13)
        reader.read(byte)
    assert model.bits(data, context, adapt=False) == pytest.approx(model.bits(data, context), rel=1e-12)


@pytest.mark.parametrize("order", [1, 3, 5])
def test_a_reader_that_adapts_is_the_model_fitted_again_on_everything_it_has_read(order, text):
    """Counting as it reads = fitting on the training text followed by the bytes read so far, at every byte."""
    train, data = text[:4000], text[4000:4150]
    reader = NGramReader(ByteNGram(order, 0.7).fit(train), train, adapt=True)
    brute = 0.0
    for i, byte in enumerate(data):
        refit = ByteNGram(order, 0.7).fit(train + data[:i])
        expected = refit.probs(train + data[:i])
        np.testing.assert_allclose(reader.probs(), expected, rtol=1e-12)
        assert reader.probability(byte) == pytest.approx(expected[byte], rel=1e-12)
        brute -= math.log2(expected[byte])
        reader.read(byte)
    assert ByteNGram(order, 0.7).fit(train).bits(data, train, adapt=True) == pytest.approx(brute, rel=1e-12)


def test_counting_as_it_reads_helps_on_a_text_that_repeats_itself(text):
    model = ByteNGram(4).fit(text[:3000])
    new = b"Una frase que el modelo no ha visto nunca, repetida. " * 6
    assert model.bits(new, text[:3000], adapt=True) < 0.5 * model.bits(new, text[:3000])
    assert model.levels[0].counts.sum() == ByteNGram(4).fit(text[:3000]).levels[0].counts.sum()  # left as it was


def test_choose_ngram_tries_every_order_and_discount_on_training_text_only(text):
    orders, discounts = [2, 3, 4], [0.6, 0.9]
    fit, validation = text[:15_000], [(text[:15_000], text[15_000:17_000]), (b"", text[18_000:19_000])]
    for adapt in (False, True):
        chosen = choose_ngram(fit, validation, orders, discounts, adapt=adapt)
        brute = {
            (o, d): sum(ByteNGram(o, d).fit(fit).bits(t, c, adapt=adapt) for c, t in validation)
            for o in orders
            for d in discounts
        }
        assert brute[chosen] == min(brute.values())
    cut = round(len(text) * 0.9)
    assert choose_order(text) == choose_ngram(text[:cut], [(text[:cut], text[cut:])], discounts=[0.75])[0]


def test_an_n_gram_that_keeps_counting_codes_a_real_file_of_its_ideal_size(text):
    """The n-gram rows of notebook 12 are ideal sums; coded for real, the file is that sum, give or take a byte."""
    model = ByteNGram(5, 0.9).fit(text[:12_000])
    data = text[12_000:13_500]

    def counts_of(side):
        readers[side] = NGramReader(model, text[:12_000], adapt=True)

        def counts(previous):
            if previous:
                readers[side].read(previous[-1])
            return frequencies(torch.from_numpy(readers[side].probs()))

        return counts

    readers = {}
    blob = encode(list(data), counts_of("encoder"))
    assert bytes(decode(blob, len(data), counts_of("decoder"))) == data
    ideal = model.bits(data, text[:12_000], adapt=True)
    assert abs(len(blob) * 8 - ideal) < 16


# --------------------------------------------------------------------------- errors in both languages

BAD = [
    (lambda: ByteNGram(0), "entre 1 y 8", "from 1 to 8"),
    (lambda: ByteNGram(MAX_ORDER + 1), "entre 1 y 8", "from 1 to 8"),
    (lambda: ByteNGram(2.5), "entre 1 y 8", "from 1 to 8"),
    (lambda: ByteNGram(3, discount=0), "(0, 1]", "(0, 1]"),
    (lambda: ByteNGram(3, discount=1.5), "(0, 1]", "(0, 1]"),
    (lambda: ByteNGram(3).probs(b"ab"), "llama antes a fit", "call fit(text) first"),
    (lambda: ByteNGram(3).fit(b""), "data está vacío", "data is empty"),
    (lambda: ByteNGram(3).fit(b"abc").sample(-1, random.Random(0)), "entero ≥ 0", "integer ≥ 0"),
    (lambda: ByteNGram(3).fit(b"abc").sample(3, 0), "random.Random", "random.Random"),
    (lambda: choose_order(b"abcdef", []), "orders está vacío", "orders is empty"),
    (lambda: choose_ngram(b"abcdef", []), "no pueden estar vacíos", "cannot be empty"),
    (lambda: choose_ngram(b"abcdef", [(b"", b"ab")], discounts=[2.0]), "(0, 1]", "(0, 1]"),
    (lambda: choose_order(b"abcdef", validation=1.0), "(0, 1)", "(0, 1)"),
    (lambda: choose_order(b"ab", validation=0.1), "demasiado corto", "too short"),
]  # fmt: skip


@pytest.mark.parametrize("lang", ["es", "en"])
@pytest.mark.parametrize("call, es, en", BAD)
def test_bad_arguments_raise_in_the_current_language(lang, call, es, en, language):
    language(lang)
    assert_refused(call, lang, es, en)
