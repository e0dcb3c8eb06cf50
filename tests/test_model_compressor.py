"""A token model as a compressor: the sliding window against per-token brute force, the mixture, the file
written with a model and read back (learning as it codes, mixed, a part), damage, and the errors in both
languages."""

from __future__ import annotations

import copy
import math
import random
import zlib

import numpy as np
import pytest
import torch
from bilingual_errors import assert_refused

from minitransformer.course.prose import prose
from minitransformer.gpt import GPT, GPTConfig
from minitransformer.i18n import CourseError
from minitransformer.model_compressor import (
    CodingReport,
    CodingSettings,
    _sliding_windows,
    compress_with_model,
    decompress_with_model,
    model_bits_per_byte,
    window_probabilities,
)

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


class Run:
    """Something that holds a model, as course.language_model's ProseRun does."""

    def __init__(self, model):
        self.model = model


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
    (lambda: model_bits_per_byte([], range(9), 9, context=4, stride=2), "lista de ellos", "list of them"),
    (
        lambda: model_bits_per_byte([Fixed(torch.zeros(9))] * 2, range(9), 9, context=4, stride=2, weights=[1.0]),
        "2 números > 0",
        "2 numbers > 0",
    ),
    (lambda: model_bits_per_byte(Fixed(torch.zeros(9)), range(9), 9, context=4, stride=0), "entero ≥ 1", "integer ≥ 1"),
    (lambda: model_bits_per_byte(Fixed(torch.zeros(9)), range(9), 9, context=4, stride=5), "entre 1 y context (4)", "between 1 and context (4)"),
    (lambda: model_bits_per_byte(Fixed(torch.zeros(9)), range(9), 0, context=4, stride=2), "n_bytes", "n_bytes"),
    (lambda: model_bits_per_byte(Fixed(torch.zeros(9)), range(9), 9, context=4, stride=2, start=9), "ningún token", "no token"),
    (lambda: model_bits_per_byte(Fixed(torch.zeros(9)), [0], 9, context=4, stride=2), "ningún token", "no token"),
    (lambda: model_bits_per_byte(Fixed(torch.zeros(9)), torch.zeros(9), 9, context=4, stride=2), "enteros", "integers"),
    (lambda: model_bits_per_byte(Fixed(torch.zeros(9)), "abc", 9, context=4, stride=2), "enteros", "integers"),
    (lambda: model_bits_per_byte(Run(Fixed(torch.zeros(9))), range(9), 9, context=4, stride=2), "Run.model", "Run.model"),
]  # fmt: skip


@pytest.mark.parametrize("lang", ["es", "en"])
@pytest.mark.parametrize("call, es, en", BAD)
def test_bad_arguments_raise_in_the_current_language(lang, call, es, en, language):
    language(lang)
    assert_refused(call, lang, es, en)


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
    # the file: the header (19 bytes, and 2 per check after 64, 128, 256, … tokens), then the coder's bytes: the
    # counts' ideal plus at most 2 bits, rounded up to whole bytes (and the integers' narrowing, under 0.01 bit here)
    assert sent.header_bytes == got.header_bytes == 19 + 2 * len([c for c in (64, 128, 256) if c < n])
    coder = len(blob) - sent.header_bytes
    assert (sent.count_bits - 0.01) / 8 <= coder <= math.ceil((sent.count_bits + 2 + 0.01) / 8)
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
    from minitransformer import model_compressor

    model, tokenizer = tiny
    sent = CodingReport()
    blob = compress_with_model(SAMPLE, model, tokenizer, ADAPTING, report=sent)
    real = model_compressor._take_steps
    calls = []

    def one_behind(models, learning, window, settings):
        calls.append(len(window))
        return 0 if len(calls) == 3 else real(models, learning, window, settings)  # the third window's steps skipped

    monkeypatch.setattr(model_compressor, "_take_steps", one_behind)
    got = CodingReport()
    with pytest.raises(CourseError, match="do not match their check"):
        decompress_with_model(blob, model, tokenizer, ADAPTING, report=got)
    parted = next(i for i, (a, b) in enumerate(zip(sent.row_hashes, got.row_hashes)) if a != b)
    windows = _sliding_windows(10**6, len(tokenizer.encode("\n\n")) - 1, 16, 8)
    assert parted == sum(end - scored_from for _, end, scored_from in windows[:3])  # right after the skipped steps
    # caught at the first check after the tokens part (64, 128, …), long before the end of the text
    assert len(got.row_hashes) == next(c for c in (64, 128, 256) if c > parted) < len(sent.row_hashes)


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
    assert len(compress_with_model("", model, tokenizer, ADAPTING)) == 19


def header_of(blob: bytes) -> int:
    """The bytes before the coder's: the header and the checks of the first tokens."""
    n = int.from_bytes(blob[7:11], "big")
    return 19 + 2 * len([c for c in (64, 128, 256, 512) if c < n])


def wrong_crc(blob: bytes) -> bytes:
    """The file with another text CRC-32 in its header, the header's own check written again to match."""
    header = blob[:11] + bytes([blob[11] ^ 1]) + blob[12:17]
    return header + (zlib.crc32(header) & 0xFFFF).to_bytes(2, "big") + blob[19:]


def damaged(blob: bytes):
    yield "cut to nothing", b""
    yield "only the header", blob[:19]
    yield "only the header and the checks", blob[: header_of(blob)]
    yield "half the data", blob[: len(blob) // 2]
    yield "one byte short", blob[:-1]
    yield "another magic", b"XZ" + blob[2:]
    yield "random bytes", bytes(random.Random(0).randrange(256) for _ in range(len(blob)))
    yield (
        "random data after the header",
        blob[:19] + bytes(random.Random(1).randrange(256) for _ in range(len(blob) - 19)),
    )
    yield "another file after it", blob + blob
    yield "a byte after it", blob + b"\x00"
    for i in (3, 7, 11, 15, 17):  # the fingerprint, the token count, the CRC, the first row's check, the header's
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
            for i in range(19 * 8, len(blob) * 8, step)
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
        "check": (
            lambda: decompress_with_model(
                blob[: header_of(blob)] + bytes(len(blob) - header_of(blob)), model, tokenizer, STATIC
            ),
            "comprobación",
            "check",
        ),
        "crc": (lambda: decompress_with_model(wrong_crc(blob), model, tokenizer, STATIC), "CRC-32", "CRC-32"),
        "end": (lambda: decompress_with_model(blob + blob, model, tokenizer, STATIC), "otro archivo", "another file"),
        "settings": (lambda: CodingSettings(16, 32), "entre 1 y context", "between 1 and context"),
        "lr": (lambda: CodingSettings(16, 8, lr=-1), "lr debe", "lr must"),
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


# --------------------------------------------------------------------------- what a decoder refuses (issue 55)

SHORT = SAMPLE[:150]  # about 100 tokens: a check after 64 tokens, quick to decode whole


@pytest.fixture(scope="module")
def files(tiny):
    """The sample written static and learning, with the sender's reports."""
    model, tokenizer = tiny
    written = {}
    for name, settings in (("static", STATIC), ("adapting", ADAPTING)):
        report = CodingReport()
        written[name] = (compress_with_model(SAMPLE, model, tokenizer, settings, report=report), report, settings)
    return written


def other_model(model):
    other = copy.deepcopy(model)
    with torch.no_grad():
        next(other.parameters()).view(-1)[0] += 1e-3
    return other


@pytest.mark.parametrize("name", ["static", "adapting"])
def test_a_part_is_checked_and_its_report_is_the_senders(tiny, files, name, monkeypatch):
    """A part decodes on to the next check (64, 128, 256, …: at most twice its tokens, or 64) and reports its own tokens."""
    from minitransformer import model_compressor

    model, tokenizer = tiny
    blob, sent, settings = files[name]
    ids = tokenizer.encode(SAMPLE)
    decoded = []
    real = model_compressor._ids_crc
    monkeypatch.setattr(model_compressor, "_ids_crc", lambda ids, crc=0: decoded.append(len(ids)) or real(ids, crc))
    for t, reaches in ((0, 0), (1, 64), (20, 64), (64, 64), (70, 128), (300, 425)):
        decoded.clear()
        got = CodingReport()
        assert decompress_with_model(blob, model, tokenizer, settings, tokens=t, report=got) == tokenizer.decode(
            ids[:t]
        )
        assert len(decoded) == reaches  # every token up to the check after the part, and not one more
        assert got.row_hashes == sent.row_hashes[:t]  # the report is the returned tokens'
        assert got.header_bytes == sent.header_bytes


@pytest.mark.parametrize("name", ["static", "adapting"])
def test_a_part_of_a_damaged_cut_or_foreign_file_raises(tiny, files, name):
    """Before the issue, a part (tokens=20) of each of these came back as wrong text, with no error."""
    model, tokenizer = tiny
    blob, _, settings = files[name]
    start = header_of(blob)
    cases = {
        "a bit flipped": blob[: start + 3] + bytes([blob[start + 3] ^ 4]) + blob[start + 4 :],
        "a check changed": blob[:20] + bytes([blob[20] ^ 1]) + blob[21:],
        "cut short": blob[: start + 8],
        "random coder bytes": blob[:start] + bytes(random.Random(2).randrange(256) for _ in range(len(blob) - start)),
    }
    for bad in cases.values():
        with pytest.raises(CourseError, match="comprobación|check|cut short|cortad"):
            decompress_with_model(bad, model, tokenizer, settings, tokens=20)
    other = CodingSettings(16, 4, settings.lr, settings.steps)
    for call in (
        lambda: decompress_with_model(blob, other_model(model), tokenizer, settings, tokens=20),
        lambda: decompress_with_model(blob, model, tokenizer, other, tokens=20),
        lambda: decompress_with_model(blob, model, tokenizer, settings, tokens=20, prefix="\n"),
    ):
        with pytest.raises(CourseError, match="otro modelo|another model"):
            call()


def test_other_numerics_fail_at_the_first_row_before_any_token(tiny, files, monkeypatch):
    """The same weights computing other last bits (another machine's kernels): a row one ulp off is refused before
    the first token is decoded, not after the whole text."""
    from minitransformer import model_compressor

    model, tokenizer = tiny
    blob, _, settings = files["static"]
    real = model_compressor.window_probabilities

    def other_numerics(*args, **kwargs):
        rows = real(*args, **kwargs)
        return torch.nextafter(rows, torch.ones_like(rows))

    monkeypatch.setattr(model_compressor, "window_probabilities", other_numerics)
    got = CodingReport()
    with pytest.raises(CourseError, match="first probability row"):
        decompress_with_model(blob, model, tokenizer, settings, tokens=300, report=got)
    assert got.row_hashes == []


def test_a_whole_decode_always_checks_the_crc_and_the_end(tiny):
    model, tokenizer = tiny
    blob = compress_with_model(SHORT, model, tokenizer, STATIC)
    n = len(tokenizer.encode(SHORT))
    assert decompress_with_model(blob, model, tokenizer, STATIC, tokens=n + 1) == SHORT
    for t in (None, n, 10**9):  # tokens at or past the text's: the whole text, its CRC-32 checked
        with pytest.raises(CourseError, match="CRC-32"):
            decompress_with_model(wrong_crc(blob), model, tokenizer, STATIC, tokens=t)
    second = compress_with_model("Otro texto.", model, tokenizer, STATIC)
    with pytest.raises(CourseError, match="another file"):
        decompress_with_model(blob + second, model, tokenizer, STATIC)  # before, SHORT came back, alone
    empty = compress_with_model("", model, tokenizer, STATIC)
    with pytest.raises(CourseError, match="left over"):
        decompress_with_model(empty + second, model, tokenizer, STATIC)


def test_the_settings_are_fingerprinted_by_their_values(tiny):
    """Before the issue, lr=0 against 0.0, or NumPy numbers, were refused as another model."""
    model, tokenizer = tiny
    blob = compress_with_model(
        SHORT, [model, model], tokenizer, CodingSettings(16, 8, lr=0.5, steps=2), weights=[0.25, 0.75]
    )
    same = [
        CodingSettings(np.int64(16), np.int32(8), lr=np.float64(0.5), steps=np.int64(2)),
        CodingSettings(16, 8, lr=np.float32(0.5), steps=2, parameters="all"),
    ]
    weights = ([0.25, 0.75], (0.25, 0.75), np.array([0.25, 0.75]), [np.float64(0.25), np.float32(0.75)])
    for settings in same:
        for w in weights:  # tokens=0: the fingerprint is checked, nothing decoded
            assert decompress_with_model(blob, [model, model], tokenizer, settings, weights=w, tokens=0) == ""
    assert decompress_with_model(blob, [model, model], tokenizer, same[0], weights=weights[2]) == SHORT
    static = compress_with_model(SHORT, model, tokenizer, CodingSettings(16, 8, lr=0))
    assert decompress_with_model(static, model, tokenizer, CodingSettings(16, 8, lr=0.0), tokens=0) == ""
    assert repr(CodingSettings(16, 8, lr=0)) == repr(CodingSettings(np.int64(16), 8, lr=np.float32(0.0)))
    with pytest.raises(CourseError, match="another model"):
        decompress_with_model(static, model, tokenizer, CodingSettings(16, 8, lr=1e-12), tokens=0)


def test_learning_inside_no_grad_or_inference_mode_or_with_frozen_parameters(tiny):
    """Before the issue, these raised PyTorch's RuntimeError. The coder's copies learn the parameters the settings
    name, whatever the caller's grad mode and requires_grad: the same file every time."""
    model, tokenizer = tiny
    text = SAMPLE[:60]
    blob = compress_with_model(text, model, tokenizer, ADAPTING)
    frozen = copy.deepcopy(model).requires_grad_(False)
    with torch.no_grad():
        assert compress_with_model(text, model, tokenizer, ADAPTING) == blob
        assert decompress_with_model(blob, model, tokenizer, ADAPTING) == text
    with torch.inference_mode():
        assert compress_with_model(text, model, tokenizer, ADAPTING) == blob
        assert decompress_with_model(blob, model, tokenizer, ADAPTING) == text
    assert compress_with_model(text, frozen, tokenizer, ADAPTING) == blob
    assert decompress_with_model(blob, frozen, tokenizer, ADAPTING) == text
    assert not any(p.requires_grad for p in frozen.parameters()) and torch.is_grad_enabled()
    assert all(p.requires_grad for p in model.parameters())


@pytest.mark.parametrize("lang", ["es", "en"])
def test_bad_arguments_to_the_compressor_raise_in_the_reader_s_language(tiny, lang, language):
    import time

    model, tokenizer = tiny
    language(lang)
    blob = compress_with_model("hola", model, tokenizer, STATIC)
    gpt = small_gpt()
    calls = {
        "a run": (lambda: compress_with_model("a", Run(model), tokenizer, STATIC), "Run.model", "Run.model"),
        "a run to decode": (lambda: decompress_with_model(blob, Run(model), tokenizer, STATIC), "Run.model", "Run.model"),
        "no tokenizer": (lambda: compress_with_model("a", model, None, STATIC), "tokenizer debe", "tokenizer must"),
        "no tokenizer to decode": (lambda: decompress_with_model(blob, model, None, STATIC), "tokenizer debe", "tokenizer must"),
        "no settings": (lambda: compress_with_model("a", model, tokenizer, None), "CodingSettings", "CodingSettings"),
        "a dict": (
            lambda: compress_with_model("a", model, tokenizer, {"context": 16, "stride": 8}),
            "CodingSettings(**settings)",
            "CodingSettings(**settings)",
        ),
        "weights of letters": (
            lambda: compress_with_model("a", [model, model], tokenizer, STATIC, weights="ab"),
            "sumen 1",
            "adding up to 1",
        ),
        "a list for the report": (lambda: compress_with_model("a", model, tokenizer, STATIC, report=[]), "CodingReport", "CodingReport"),
        "a prefix that is no text": (lambda: compress_with_model("a", model, tokenizer, STATIC, prefix=5), "prefix debe", "prefix must"),
        "text for the file": (lambda: decompress_with_model("LM", model, tokenizer, STATIC), "blob debe", "blob must"),
        "negative tokens": (lambda: decompress_with_model(blob, model, tokenizer, STATIC, tokens=-1), "tokens debe", "tokens must"),
        "parameters as a list": (lambda: CodingSettings(16, 8, parameters=["all"]), "parameters debe", "parameters must"),
        "nothing learns": (
            lambda: compress_with_model("abc", gpt, tokenizer, CodingSettings(16, 8, lr=0.1, parameters="output")),
            "no elige ningún parámetro",
            "chooses no parameter",
        ),
        "a context longer than the model's": (
            lambda: compress_with_model("abc", model, tokenizer, CodingSettings(32, 8)),
            "max_len = 16",
            "max_len = 16",
        ),
        "an id past the vocabulary": (lambda: window_probabilities(model, [5, 300], 16), "vocabulario", "vocabulary"),
        "a window of floats": (lambda: window_probabilities(model, [0.5], 16), "enteros", "integers"),
        "no context": (lambda: window_probabilities(model, [1], None), "context debe", "context must"),
    }  # fmt: skip
    for name, (call, es, en) in calls.items():
        begin = time.process_time()
        with pytest.raises(CourseError) as info:
            call()
        assert (es if lang == "es" else en) in str(info.value), name
        assert str(info.value) == (info.value.es if lang == "es" else info.value.en), name
        assert time.process_time() - begin < 1, name
