"""The compressors' baselines and bits per byte: the compressors' formula, the unigram by hand, and the errors in both
languages."""

from __future__ import annotations

import bz2
import gzip
import lzma
import math

import pytest
from bilingual_errors import assert_refused

from minitransformer.compression import (
    COMPRESSORS,
    UNIFORM_BITS,
    bits_per_byte,
    compress,
    compressed_bits_per_byte,
    uniform_bits_per_byte,
    unigram_bits_per_byte,
)
from minitransformer.course.prose import prose


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
]  # fmt: skip


@pytest.mark.parametrize("lang", ["es", "en"])
@pytest.mark.parametrize("call, es, en", BAD)
def test_bad_arguments_raise_in_the_current_language(lang, call, es, en, language):
    language(lang)
    assert_refused(call, lang, es, en)
