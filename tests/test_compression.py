"""Compression baselines and bits per byte: Kneser-Ney worked by hand, the compressors' formula, the sliding
window against per-token brute force, and the errors in both languages."""

from __future__ import annotations

import bz2
import copy
import gzip
import lzma
import math
import random

import numpy as np
import pytest
import torch

from minitransformer.compression import (
    COMPRESSORS,
    FREQUENCY_TOTAL,
    MAX_ORDER,
    UNIFORM_BITS,
    ByteNGram,
    CodingReport,
    CodingSettings,
    NGramReader,
    _sliding_windows,
    bits_per_byte,
    choose_ngram,
    choose_order,
    compress,
    compress_with_model,
    compressed_bits_per_byte,
    decode,
    decompress_with_model,
    encode,
    frequencies,
    model_bits_per_byte,
    uniform_bits_per_byte,
    unigram_bits_per_byte,
    window_probabilities,
)
from minitransformer.course.prose import prose
from minitransformer.gpt import GPT, GPTConfig
from minitransformer.i18n import CourseError

D = 0.75


@pytest.fixture(scope="module")
def text() -> bytes:
    """About 20 KB of the course's Spanish prose, enough for n-grams to have something to learn."""
    return prose("es", "train").encode("utf-8")[:20_000]


# --------------------------------------------------------------------------- bits per byte and the baselines


@pytest.mark.parametrize("n", [1, 29, 1000, 123_457])
def test_eight_bits_of_nats_per_byte_are_eight_bits(n):
    assert bits_per_byte(math.log(2) * 8 * n, n) == pytest.approx(8, rel=1e-12)
    assert bits_per_byte(0, n) == 0


def test_uniform_is_eight_bits_and_the_unigram_is_its_formula(text):
    assert uniform_bits_per_byte() == UNIFORM_BITS == 8.0
    train, held = b"aaab", b"abz"
    expected = -(math.log2(4 / 260) + math.log2(2 / 260) + math.log2(1 / 260)) / 3
    assert unigram_bits_per_byte(train, held) == pytest.approx(expected, rel=1e-12)
    assert unigram_bits_per_byte("", held) == pytest.approx(8.0, rel=1e-12)  # nothing counted: uniform
    assert unigram_bits_per_byte(text[:15_000], text[15_000:]) < 5  # letters are far from uniform
    assert unigram_bits_per_byte("ñ", "ñ") == unigram_bits_per_byte("ñ".encode(), "ñ".encode())


@pytest.mark.parametrize("method", COMPRESSORS)
def test_compressed_bits_per_byte_is_its_formula(method, text):
    context, held = text[:15_000], text[15_000:]
    strongest = {
        "gzip": lambda d: gzip.compress(d, compresslevel=9, mtime=0),
        "bz2": lambda d: bz2.compress(d, 9),
        "xz": lambda d: lzma.compress(d, preset=9 | lzma.PRESET_EXTREME),
    }[method]
    assert compress(held, method) == strongest(held)
    assert lzma.decompress(compress(held, "xz")) == held
    expected = (len(strongest(context + held)) - len(strongest(context))) * 8 / len(held)
    assert compressed_bits_per_byte(held, context, method) == expected
    # with no context, the empty text's compressed size (the format's header and trailer) is taken off
    no_context = (len(strongest(held)) - len(strongest(b""))) * 8 / len(held)
    assert compressed_bits_per_byte(held, method=method) == no_context
    # a related context (the same prose) helps; str is its UTF-8 bytes
    assert compressed_bits_per_byte(held, context, method) < compressed_bits_per_byte(held, method=method)
    assert compressed_bits_per_byte(held.decode("utf-8", "ignore"), context, method) == pytest.approx(
        compressed_bits_per_byte(held.decode("utf-8", "ignore").encode(), context, method)
    )


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


# --------------------------------------------------------------------------- a token model with a sliding window


def small_gpt(vocab: int = 40, max_len: int = 32) -> GPT:
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=vocab, max_len=max_len, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.2)
    return GPT(config).train()  # left in training mode: the measurement must switch dropout off itself


def nats_of(model, window: torch.Tensor, target: int) -> float:
    """-log p(target | window), the model run on the window alone."""
    with torch.no_grad():
        model.eval()
        logits = model(window[None])[0, -1]
    return -torch.log_softmax(logits.float(), -1)[target].item()


def brute_force(model, ids, context, stride, start):
    """Each target p predicted from the window that scores it: pair q = p - 1 belongs to the first window
    (begin k·stride, end min(k·stride + context, N - 1)) that ends after q."""
    pairs = len(ids) - 1
    total = 0.0
    for p in range(max(start, 1), len(ids)):
        k = 0
        while min(k * stride + context, pairs) <= p - 1:
            k += 1
        total += nats_of(model, ids[k * stride : p], int(ids[p]))
    return total


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, 40, (75,), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("start", [0, 1, 5])
def test_a_context_longer_than_the_text_is_the_full_computation(ids, start):
    model = small_gpt(max_len=80)
    with torch.no_grad():
        logits = model.eval()(ids[None, :-1])[0]
    model.train()
    nats = -torch.log_softmax(logits, -1).gather(-1, ids[1:, None])[:, 0][max(start, 1) - 1 :].double().sum().item()
    for context, stride in [(74, 74), (80, 3), (74, 1)]:
        got = model_bits_per_byte(model, ids, 100, context=context, stride=stride, start=start, batch_size=2)
        assert got == pytest.approx(nats / math.log(2) / 100, rel=1e-5)
    assert model.training  # the model's own mode is given back


@pytest.mark.parametrize("context, stride", [(8, 1), (8, 8), (8, 3), (5, 4), (16, 16), (16, 5)])
@pytest.mark.parametrize("start", [0, 7])
def test_the_sliding_window_equals_per_token_windows(ids, context, stride, start):
    model = small_gpt()
    expected = brute_force(model, ids, context, stride, start) / math.log(2) / 50
    for batch_size in (1, 3, 64):
        got = model_bits_per_byte(
            model, ids.tolist(), 50, context=context, stride=stride, start=start, batch_size=batch_size
        )
        assert got == pytest.approx(expected, rel=1e-5)


def test_stride_one_gives_every_token_the_full_context(ids):
    model = small_gpt()
    context = 8
    naive = sum(nats_of(model, ids[max(0, p - context) : p], int(ids[p])) for p in range(1, len(ids)))
    got = model_bits_per_byte(model, ids, 1, context=context, stride=1)
    assert got == pytest.approx(naive / math.log(2), rel=1e-5)


class Fixed(torch.nn.Module):
    """Logits that ignore the input: the same vector at every position, so the loss of a target depends only
    on which token it is. With ids 0 .. N-1, the total shows which positions were scored, and how often."""

    def __init__(self, weights: torch.Tensor):
        super().__init__()
        self.weights = weights

    def forward(self, tokens):
        return self.weights.expand(*tokens.shape, -1)


@pytest.mark.parametrize("n", [2, 10, 33, 64, 65])
@pytest.mark.parametrize("context, stride", [(1, 1), (4, 1), (4, 4), (7, 3), (32, 32), (32, 31)])
@pytest.mark.parametrize("start", [0, 1, 2, 9])
def test_each_token_is_scored_exactly_once(n, context, stride, start):
    if start >= n:
        return
    weights = torch.randn(n, generator=torch.Generator().manual_seed(n), dtype=torch.float64)
    loss = torch.logsumexp(weights, 0) - weights  # (n,) the loss of each token
    got = model_bits_per_byte(Fixed(weights), torch.arange(n), 1, context=context, stride=stride, start=start)
    expected = loss[max(start, 1) :].sum().item() / math.log(2)
    assert got == pytest.approx(expected, rel=1e-6)


# --------------------------------------------------------------------------- errors in both languages

BAD = [
    (lambda: bits_per_byte(1.0, 0), "n_bytes debe ser un entero ≥ 1", "n_bytes must be an integer ≥ 1"),
    (lambda: bits_per_byte(-1.0, 3), "debe ser un número ≥ 0", "must be a number ≥ 0"),
    (lambda: bits_per_byte(float("nan"), 3), "debe ser un número ≥ 0", "must be a number ≥ 0"),
    (lambda: compress(b"x", "zip"), "gzip, bz2, xz", "gzip, bz2, xz"),
    (lambda: compressed_bits_per_byte(b"", b"abc"), "held está vacío", "held is empty"),
    (lambda: compressed_bits_per_byte(b"x", method="lz4"), "desconocido", "unknown"),
    (lambda: unigram_bits_per_byte(b"abc", ""), "held está vacío", "held is empty"),
    (lambda: unigram_bits_per_byte(3, b"a"), "str) o bytes", "str) or bytes"),
    (lambda: model_bits_per_byte([], range(9), 9, context=4, stride=2), "lista de ellos", "list of them"),
    (
        lambda: model_bits_per_byte([Fixed(torch.zeros(9))] * 2, range(9), 9, context=4, stride=2, weights=[1.0]),
        "2 números > 0",
        "2 numbers > 0",
    ),
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
    (lambda: model_bits_per_byte(Fixed(torch.zeros(9)), range(9), 9, context=4, stride=0), "entero ≥ 1", "integer ≥ 1"),
    (lambda: model_bits_per_byte(Fixed(torch.zeros(9)), range(9), 9, context=4, stride=5), "entre 1 y context (4)", "between 1 and context (4)"),
    (lambda: model_bits_per_byte(Fixed(torch.zeros(9)), range(9), 0, context=4, stride=2), "n_bytes", "n_bytes"),
    (lambda: model_bits_per_byte(Fixed(torch.zeros(9)), range(9), 9, context=4, stride=2, start=9), "ningún token", "no token"),
    (lambda: model_bits_per_byte(Fixed(torch.zeros(9)), [0], 9, context=4, stride=2), "ningún token", "no token"),
    (lambda: model_bits_per_byte(Fixed(torch.zeros(9)), torch.zeros(9), 9, context=4, stride=2), "enteros", "integers"),
]  # fmt: skip


@pytest.mark.parametrize("lang", ["es", "en"])
@pytest.mark.parametrize("call, es, en", BAD)
def test_bad_arguments_raise_in_the_current_language(lang, call, es, en, language):
    language(lang)
    with pytest.raises(ValueError) as info:
        call()
    assert (es if lang == "es" else en) in str(info.value)
    assert str(info.value) == (info.value.es if lang == "es" else info.value.en)


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


# --------------------------------------------------------------------------- the arithmetic coder


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


# --------------------------------------------------------------------------- a language model as a compressor


@pytest.fixture(scope="module")
def tiny():
    """A small tokenizer and a small random modern decoder: the coder's behaviour, in a fraction of a second."""
    from minitransformer.modern import ModernConfig, ModernTransformer
    from minitransformer.tokenizer import train_bpe

    tokenizer = train_bpe(prose("es", "train")[:20_000], 300)
    torch.manual_seed(0)
    model = ModernTransformer(ModernConfig(vocab_size=300, d_model=32, n_heads=2, n_layers=2, d_ff=64, max_len=16))
    return model.eval(), tokenizer


SAMPLE = prose("es", "test")[:600]  # «ñ», «á»: characters that are two bytes
STATIC = CodingSettings(context=16, stride=8)
ADAPTING = CodingSettings(context=16, stride=8, lr=0.5, steps=2)


@pytest.mark.parametrize("settings", [STATIC, ADAPTING], ids=["static", "adapting"])
def test_a_text_round_trips_and_both_sides_use_the_same_probability_rows(tiny, settings):
    model, tokenizer = tiny
    before = {k: v.clone() for k, v in model.state_dict().items()}
    sent, got = CodingReport(), CodingReport()
    blob = compress_with_model(SAMPLE, model, tokenizer, settings, report=sent)
    assert decompress_with_model(blob, model, tokenizer, settings, report=got) == SAMPLE
    n = len(tokenizer.encode(SAMPLE))
    assert len(sent.row_hashes) == n and sent.row_hashes == got.row_hashes  # every row, bit for bit
    windows = _sliding_windows(len(tokenizer.encode("\n\n")) + n - 1, len(tokenizer.encode("\n\n")) - 1, 16, 8)
    assert sent.updates == got.updates == (settings.steps * len(windows) if settings.lr else 0)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())  # the caller's model untouched
    # the file: a 17-byte header and the coder's bytes, within 2 bits and a byte's padding of the counts' ideal
    assert len(blob) * 8 <= 17 * 8 + sent.count_bits + 2 + 7 + 0.01 * n
    assert sent.count_bits == pytest.approx(sent.model_bits, rel=1e-3)


def test_learning_as_it_codes_changes_the_probabilities_and_the_file(tiny):
    model, tokenizer = tiny
    static, adapting = CodingReport(), CodingReport()
    compress_with_model(SAMPLE, model, tokenizer, STATIC, report=static)
    compress_with_model(SAMPLE, model, tokenizer, ADAPTING, report=adapting)
    begin, end, scored_from = _sliding_windows(10**6, len(tokenizer.encode("\n\n")) - 1, 16, 8)[0]
    first_window = end - scored_from  # the tokens the first window codes, before any step
    assert static.row_hashes[:first_window] == adapting.row_hashes[:first_window]
    assert static.row_hashes[first_window + 1 :] != adapting.row_hashes[first_window + 1 :]
    assert adapting.model_bits < static.model_bits  # a random model learns the text's tokens as it goes


def test_the_static_files_ideal_is_the_sliding_window_measure(tiny):
    model, tokenizer = tiny
    report = CodingReport()
    compress_with_model(SAMPLE, model, tokenizer, STATIC, report=report)
    ids = tokenizer.encode("\n\n") + tokenizer.encode(SAMPLE)
    n_bytes = len(SAMPLE.encode())
    measured = model_bits_per_byte(model, ids, n_bytes, context=16, stride=8, start=len(tokenizer.encode("\n\n")))
    assert report.model_bits / n_bytes == pytest.approx(measured, rel=1e-5)


def test_a_mixtures_static_ideal_is_the_sliding_window_measure_of_the_mixture(tiny):
    """Several models: model_bits_per_byte mixes their probabilities as the coder does, with the same weights."""
    model, tokenizer = tiny
    other = copy.deepcopy(model)
    with torch.no_grad():
        for p in other.parameters():
            p.mul_(1.5)  # another model: sharper where the first is flat
    ids = tokenizer.encode("\n\n") + tokenizer.encode(SAMPLE)
    n_bytes, start = len(SAMPLE.encode()), len(tokenizer.encode("\n\n"))
    measured = {}
    for weights in (None, [0.2, 0.8]):
        report = CodingReport()
        compress_with_model(SAMPLE, [model, other], tokenizer, STATIC, weights=weights, report=report)
        measured[weights is None] = model_bits_per_byte(
            [model, other], ids, n_bytes, context=16, stride=8, start=start, weights=weights
        )
        assert report.model_bits / n_bytes == pytest.approx(measured[weights is None], rel=1e-5)
    assert measured[True] != pytest.approx(measured[False], rel=1e-3)  # the weights are used
    alone = model_bits_per_byte(model, ids, n_bytes, context=16, stride=8, start=start)
    assert model_bits_per_byte([model, model], ids, n_bytes, context=16, stride=8, start=start) == pytest.approx(
        alone, rel=1e-6
    )


@pytest.mark.parametrize("context, stride, start", [(4, 1, 0), (7, 3, 2), (32, 31, 9)])
def test_a_mixture_scores_each_token_once_with_the_mixed_probability(context, stride, start):
    n = 33
    g = torch.Generator().manual_seed(n)
    a, b = torch.randn(n, generator=g, dtype=torch.float64), torch.randn(n, generator=g, dtype=torch.float64)
    mixed = 0.3 * torch.softmax(a, 0) + 0.7 * torch.softmax(b, 0)  # (n,) the probability of each token
    got = model_bits_per_byte(
        [Fixed(a), Fixed(b)], torch.arange(n), 1, context=context, stride=stride, start=start, weights=[0.3, 0.7]
    )
    assert got == pytest.approx(-mixed.log()[max(start, 1) :].sum().item() / math.log(2), rel=1e-6)


def test_padding_after_a_window_changes_nothing_before_it(tiny):
    model, _ = tiny
    g = torch.Generator().manual_seed(5)
    window = torch.randint(0, 300, (16,), generator=g)
    whole = window_probabilities(model, window, 16)
    for q in range(16):
        assert torch.equal(window_probabilities(model, window[: q + 1], 16)[q], whole[q])  # bit for bit
        other = window.clone()
        other[q + 1 :] = torch.randint(0, 300, (15 - q,), generator=g)
        assert torch.equal(window_probabilities(model, other, 16)[: q + 1], whole[: q + 1])


def test_a_decoder_one_update_behind_is_caught(tiny, monkeypatch):
    """The test above compares every row: here the decoder skips one of the encoder's steps, and the rows part
    from that window on; the decoder reports it instead of writing a wrong text."""
    from minitransformer import compression

    model, tokenizer = tiny
    sent = CodingReport()
    blob = compress_with_model(SAMPLE, model, tokenizer, ADAPTING, report=sent)
    real = compression._take_steps
    calls = []

    def one_behind(models, window, settings):
        calls.append(len(window))
        return 0 if len(calls) == 3 else real(models, window, settings)  # the third window's steps skipped

    monkeypatch.setattr(compression, "_take_steps", one_behind)
    got = CodingReport()
    with pytest.raises(CourseError, match="CRC-32|cut short"):
        decompress_with_model(blob, model, tokenizer, ADAPTING, report=got)
    parted = next(i for i, (a, b) in enumerate(zip(sent.row_hashes, got.row_hashes)) if a != b)
    windows = _sliding_windows(10**6, len(tokenizer.encode("\n\n")) - 1, 16, 8)
    assert parted == sum(end - scored_from for _, end, scored_from in windows[:3])  # right after the skipped steps


def test_mixing_models_and_decoding_a_part(tiny):
    from minitransformer.modern import ModernConfig, ModernTransformer

    model, tokenizer = tiny
    torch.manual_seed(1)
    partner = ModernTransformer(model.config).eval()
    for weights in (None, [0.3, 0.7]):
        blob = compress_with_model(SAMPLE, [model, partner], tokenizer, ADAPTING, weights=weights)
        assert decompress_with_model(blob, [model, partner], tokenizer, ADAPTING, weights=weights) == SAMPLE
    first = decompress_with_model(blob, [model, partner], tokenizer, ADAPTING, weights=weights, tokens=20)
    assert first == tokenizer.decode(tokenizer.encode(SAMPLE)[:20]) and SAMPLE.startswith(first)
    p = window_probabilities([model, partner], torch.arange(10), 16, [0.3, 0.7])
    expected = 0.3 * window_probabilities(model, torch.arange(10), 16) + 0.7 * window_probabilities(
        partner, torch.arange(10), 16
    )
    assert torch.allclose(p, expected, atol=1e-7)
    assert ModernConfig is not None


def test_the_empty_text_and_one_token(tiny):
    model, tokenizer = tiny
    for text in ("", "a"):
        blob = compress_with_model(text, model, tokenizer, ADAPTING)
        assert decompress_with_model(blob, model, tokenizer, ADAPTING) == text
    assert len(compress_with_model("", model, tokenizer, ADAPTING)) == 17


def damaged(blob: bytes):
    yield "cut to nothing", b""
    yield "only the header", blob[:17]
    yield "half the data", blob[: len(blob) // 2]
    yield "one byte short", blob[:-1]
    yield "another magic", b"XZ" + blob[2:]
    yield "random bytes", bytes(random.Random(0).randrange(256) for _ in range(len(blob)))
    yield (
        "random data after the header",
        blob[:17] + bytes(random.Random(1).randrange(256) for _ in range(len(blob) - 17)),
    )
    for i in (3, 7, 11, 15):  # the fingerprint, the token count, the CRC, the header's check
        yield f"header byte {i} changed", blob[:i] + bytes([blob[i] ^ 0x10]) + blob[i + 1 :]


@pytest.mark.slow
def test_every_damage_is_an_error_or_the_right_text_never_a_wrong_one_nor_a_hang(tiny):
    """Every damage of a file (each decoded in full: a wrong token leads to more, until the CRC-32 catches them).
    The text is the sample's first 240 characters, a file of about 190 bytes, so that each damage decodes
    quickly; a bit is flipped every 37 bits (static) or 61 (learning), strides prime to 8 so that every bit position
    of a byte is hit."""
    model, tokenizer = tiny
    short = SAMPLE[:240]
    n = len(tokenizer.encode(short))
    for settings in (STATIC, ADAPTING):
        blob = compress_with_model(short, model, tokenizer, settings)
        cases = list(damaged(blob))
        step = 37 if settings is STATIC else 61
        cases += [
            (f"bit {i} flipped", blob[: i // 8] + bytes([blob[i // 8] ^ (1 << (i % 8))]) + blob[i // 8 + 1 :])
            for i in range(17 * 8, len(blob) * 8, step)
        ]
        assert len({name for name, _ in cases}) == len(cases) > 30
        errors = 0
        for name, bad in cases:
            report = CodingReport()
            try:
                text = decompress_with_model(bad, model, tokenizer, settings, report=report)
            except CourseError:
                errors += 1
            else:
                assert text == short, name  # a flip in the last byte's padding changes nothing
            assert len(report.row_hashes) <= n, name  # never past the tokens the header counts: no hang
        assert errors >= len(cases) - 2


@pytest.mark.parametrize("lang", ["es", "en"])
def test_the_coders_errors_speak_the_language(tiny, lang, language):
    model, tokenizer = tiny
    language(lang)
    blob = compress_with_model(SAMPLE, model, tokenizer, STATIC)
    other = CodingSettings(context=16, stride=4)
    calls = {
        "magic": (lambda: decompress_with_model(b"no", model, tokenizer, STATIC), "«LM»", "“LM”"),
        "header": (
            lambda: decompress_with_model(blob[:5] + b"?" + blob[6:], model, tokenizer, STATIC),
            "cabecera",
            "header",
        ),
        "model": (lambda: decompress_with_model(blob, model, tokenizer, other), "otro modelo", "another model"),
        "cut": (lambda: decompress_with_model(blob[:40], model, tokenizer, STATIC), "dañad", "damaged"),
        "crc": (
            lambda: decompress_with_model(blob[:17] + bytes(len(blob) - 17), model, tokenizer, STATIC),
            "CRC-32",
            "CRC-32",
        ),
        "settings": (lambda: CodingSettings(16, 32), "entre 1 y context", "between 1 and context"),
        "lr": (lambda: CodingSettings(16, 8, lr=-1), "lr debe", "lr must"),
        "probs": (lambda: frequencies(torch.tensor([0.5, float("nan")])), "NaN", "NaN"),
        "not probs": (lambda: frequencies(torch.tensor([1, 2])), "probabilidades", "probabilities"),
        "counts": (lambda: encode([0], torch.zeros(1, 3, dtype=torch.long)), "≥ 1", "≥ 1"),
        "symbol": (lambda: encode([5], torch.ones(1, 3, dtype=torch.long)), "símbolo 5", "symbol 5"),
        "prefix": (lambda: compress_with_model("a", model, tokenizer, STATIC, prefix=""), "prefix", "prefix"),
        "weights": (
            lambda: compress_with_model("a", [model, model], tokenizer, STATIC, weights=[1, 1]),
            "sumen 1",
            "adding up to 1",
        ),
    }
    for name, (call, es, en) in calls.items():
        with pytest.raises(CourseError) as info:
            call()
        assert (es if lang == "es" else en) in str(info.value), name


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
