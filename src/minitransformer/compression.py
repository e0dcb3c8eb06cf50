"""A language model is a compressor: the classical compressors and the baselines it is measured against, in bits
per byte.

A model that gives the next symbol probability p can code it in -log2 p bits. So the model's cross-entropy on a
held-out text, in **bits per byte** (total bits / the text's UTF-8 bytes), is the size of the file it could compress
that text to; a byte costs 8 bits stored as it is. Measured this way, a model and a general-purpose compressor are
ranked on one scale:

* :data:`UNIFORM_BITS` (= :func:`uniform_bits_per_byte`): 8 bits, every byte equally likely;
* :func:`unigram_bits_per_byte`: each byte's frequency in the training text (add-one smoothing);
* :func:`compressed_bits_per_byte`: what gzip (LZ77 + Huffman), bz2 (Burrows-Wheeler) or xz
  (LZMA) add to the compressed size when the held-out text follows the training text, so the
  compressor may copy from what it has seen, as the model has learnt from it.

:func:`bits_per_byte` turns nats (PyTorch's cross-entropy) into bits per byte: nats / ln 2 / bytes. The byte
n-grams are in :mod:`minitransformer.ngram`, the arithmetic coder in :mod:`minitransformer.arithmetic_coder`, a
token model's bits per byte and the model as a compressor in :mod:`minitransformer.model_compressor`.

Text given as ``str`` is encoded as UTF-8. Bad arguments raise :class:`~minitransformer.i18n.CourseError` (a
``ValueError``) in the language of the package's messages.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import math
import numbers

import numpy as np

from .i18n import error

__all__ = [
    "COMPRESSORS",
    "UNIFORM_BITS",
    "bits_per_byte",
    "compress",
    "compressed_bits_per_byte",
    "uniform_bits_per_byte",
    "unigram_bits_per_byte",
]

COMPRESSORS = ("gzip", "bz2", "xz")
UNIFORM_BITS = 8.0  # bits per byte when all 256 bytes are equally likely: log2 256


def _as_bytes(data: bytes | str, name: str) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise error(
        f"{name} debe ser un texto (str) o bytes, no {type(data).__name__}",
        f"{name} must be text (str) or bytes, got {type(data).__name__}",
    )


def _nonempty(data: bytes | str, name: str) -> bytes:
    data = _as_bytes(data, name)
    if not data:
        raise error(
            f"{name} está vacío: no hay ningún byte que medir",
            f"{name} is empty: there is no byte to measure",
        )
    return data


def bits_per_byte(nats: float, n_bytes: int) -> float:
    """A text's total loss in nats -> bits per byte of that text: ``nats / ln 2 / n_bytes``."""
    if isinstance(n_bytes, bool) or not isinstance(n_bytes, numbers.Integral) or n_bytes <= 0:
        raise error(
            f"n_bytes debe ser un entero ≥ 1 (los bytes UTF-8 del texto), no {n_bytes!r}",
            f"n_bytes must be an integer ≥ 1 (the text's UTF-8 bytes), got {n_bytes!r}",
        )
    if isinstance(nats, bool) or not isinstance(nats, numbers.Real) or math.isnan(nats) or nats < 0:
        raise error(
            f"nats es una pérdida total: debe ser un número ≥ 0, no {nats!r}",
            f"nats is a total loss: it must be a number ≥ 0, got {nats!r}",
        )
    return float(nats) / math.log(2) / int(n_bytes)


def compress(data: bytes, method: str) -> bytes:
    """``data`` compressed at the strongest setting of ``method`` (one of :data:`COMPRESSORS`):
    gzip level 9 (with a zero time stamp, so the output is reproducible), bz2 level 9, xz preset 9 extreme."""
    data = _as_bytes(data, "data")
    if method == "gzip":
        return gzip.compress(data, compresslevel=9, mtime=0)
    if method == "bz2":
        return bz2.compress(data, 9)
    if method == "xz":
        return lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)
    raise error(
        f"método de compresión desconocido {method!r}: usa uno de {', '.join(COMPRESSORS)}",
        f"unknown compression method {method!r}: use one of {', '.join(COMPRESSORS)}",
    )


def compressed_bits_per_byte(held: str | bytes, context: str | bytes = b"", method: str = "gzip") -> float:
    """Bits per byte that ``method`` spends on ``held`` when it comes after ``context``:
    ``(len(compress(context + held)) - len(compress(context))) * 8 / len(held)``, lengths in bytes.

    The context plays the part of the training text: the compressor may refer back to it
    (gzip only to its last 32 KB, its window; bz2 only within its 900 KB block; xz to all of it)."""
    held = _nonempty(held, "held")
    context = _as_bytes(context, "context")
    extra = len(compress(context + held, method)) - len(compress(context, method))
    return extra * 8 / len(held)


def uniform_bits_per_byte() -> float:
    """The baseline that knows nothing: every byte has probability 1/256, so it costs 8 bits
    (:data:`UNIFORM_BITS`)."""
    return UNIFORM_BITS


def unigram_bits_per_byte(train: bytes | str, held: bytes | str) -> float:
    """Cross-entropy of ``held`` under the byte frequencies of ``train``, in bits per byte:
    p(b) = (count(b) + 1) / (len(train) + 256) (add-one smoothing, so no byte has probability 0)."""
    train = _as_bytes(train, "train")
    held = _nonempty(held, "held")
    counts = np.bincount(np.frombuffer(train, dtype=np.uint8), minlength=256).astype(np.float64)
    log2p = np.log2((counts + 1) / (len(train) + 256))  # (256,)
    return float(-log2p[np.frombuffer(held, dtype=np.uint8)].mean())
