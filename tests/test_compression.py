"""Compression baselines and bits per byte: Kneser-Ney worked by hand, the compressors' formula, the sliding
window against per-token brute force, and the errors in both languages."""

from __future__ import annotations

import bz2
import gzip
import lzma
import math
import random

import numpy as np
import pytest
import torch

from minitransformer.compression import (
    COMPRESSORS,
    MAX_ORDER,
    UNIFORM_BITS,
    ByteNGram,
    bits_per_byte,
    choose_order,
    compress,
    compressed_bits_per_byte,
    model_bits_per_byte,
    uniform_bits_per_byte,
    unigram_bits_per_byte,
)
from minitransformer.course.prose import prose
from minitransformer.gpt import GPT, GPTConfig

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
