"""A token language model as a compressor: its bits per byte on a text, and the text coded into a file with it.

* :func:`model_bits_per_byte`: a token model's loss over a text, scored with a sliding window, turned into bits per
  byte of that text (tokens differ between tokenizers, bytes do not);
* :func:`compress_with_model` and :func:`decompress_with_model` write a text into a self-describing file with a
  token model (or several, mixed) and the arithmetic coder of :mod:`minitransformer.arithmetic_coder`; the model may
  keep learning as it codes (:class:`CodingSettings`), the decoder taking the same steps: one probability function
  for both sides (:func:`window_probabilities`), always the same shapes, on the CPU. :class:`CodingReport` says what
  they used.

Bad arguments, and damaged files, raise :class:`~minitransformer.i18n.CourseError` (a ``ValueError``) in the
language of the package's messages.

Letters: B batch (windows), T window length (``context``), V vocabulary.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import math
import numbers
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from .arithmetic_coder import FREQUENCY_TOTAL, ArithmeticDecoder, ArithmeticEncoder, _quantize
from .compression import _as_bytes, bits_per_byte
from .i18n import error
from .runtime import cpu_threads, eval_mode

__all__ = [
    "model_bits_per_byte",
    "CodingSettings",
    "CodingReport",
    "window_probabilities",
    "compress_with_model",
    "decompress_with_model",
]


def _check_positive(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise error(f"{name} debe ser un entero ≥ 1, no {value!r}", f"{name} must be an integer ≥ 1, got {value!r}")
    return int(value)


@torch.no_grad()
def model_bits_per_byte(
    model: torch.nn.Module | Sequence[torch.nn.Module],
    ids: Sequence[int] | Tensor,
    n_bytes: int,
    *,
    context: int,
    stride: int,
    start: int = 0,
    batch_size: int = 64,
    weights: Sequence[float] | None = None,
) -> float:
    """A language model's loss on a text in bits per byte, scored with a sliding window.

    Every token of ``ids[start:]`` is predicted from the tokens before it (``ids[:start]`` is only
    context; the first token, having nothing before it, is never scored). Windows of ``context``
    input tokens move by ``stride``: the window starting at token b reads ``ids[b : b + context]`` and
    predicts ``ids[b + 1 : b + context + 1]``; it scores only the targets after those of the window before,
    so each token is scored exactly once, with at least ``context - stride + 1`` tokens before it in its
    window (all there are near the start). This is Hugging Face's perplexity loop (``for begin in
    range(0, N, stride)``) run over (input, target) pairs, so that with ``stride = context`` the first
    token of each window is scored too. ``stride = 1`` predicts every token from the ``context`` tokens before
    it; a larger stride is faster and sees less context.

    Args:
        model: maps (B, T) ids to logits (B, T, V); run in eval mode on its own device. Or several models (on
            one device), whose probabilities are mixed, ``Σ weights[i] · p_i``, as :func:`compress_with_model`
            mixes them: then the ideal size of its static file (without the counts' rounding).
        ids: the text's token ids, (N,).
        n_bytes: the UTF-8 bytes of the scored tokens' text.
        context: T, the window length (at most the model's ``max_len``).
        stride: how far a window moves, 1 ≤ stride ≤ context.
        start: the index of the first token to score.
        batch_size: windows per forward pass.
        weights: the mixture's, one per model, adding up to 1 (equal weights by default).

    Returns:
        the total loss of the scored tokens (log_softmax in float32, or the log of the mixed softmaxes, summed in
        float64) / ln 2 / ``n_bytes``.
    """
    models = _as_models(model)
    weights = _mixture_weights(weights, len(models))
    context = _check_positive(context, "context")
    stride = _check_positive(stride, "stride")
    batch_size = _check_positive(batch_size, "batch_size")
    if stride > context:
        raise error(
            f"stride debe estar entre 1 y context ({context}): una ventana que avanza más de lo que mide "
            f"dejaría tokens sin puntuar; no {stride}",
            f"stride must lie between 1 and context ({context}): a window moving further than its length "
            f"would leave tokens unscored; got {stride}",
        )
    if isinstance(start, bool) or not isinstance(start, numbers.Integral) or start < 0:
        raise error(f"start debe ser un entero ≥ 0, no {start!r}", f"start must be an integer ≥ 0, got {start!r}")
    ids = torch.as_tensor(ids).reshape(-1)  # (N,)
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise error("ids deben ser enteros (ids de tokens)", "ids must be integers (token ids)")
    first = max(int(start), 1) - 1  # pairs (ids[q], ids[q + 1]): the first scored target is ids[first + 1]
    pairs = len(ids) - 1
    if first >= pairs:
        raise error(
            f"no hay ningún token que puntuar: {len(ids)} ids y start = {start}",
            f"there is no token to score: {len(ids)} ids and start = {start}",
        )
    try:
        device = next(models[0].parameters()).device
    except StopIteration:
        device = torch.device("cpu")
    ids = ids.long().to(device)

    windows = _sliding_windows(pairs, first, context, stride)  # (begin, end, the first pair it scores)

    total = torch.zeros((), dtype=torch.float64, device=device)
    with contextlib.ExitStack() as modes:
        for m in models:
            modes.enter_context(eval_mode(m))
        full = [w for w in windows if w[1] - w[0] == context]
        short = [w for w in windows if w[1] - w[0] < context]  # the last window only, if any
        groups = [full[i : i + batch_size] for i in range(0, len(full), batch_size)] + [[w] for w in short]
        for group in groups:
            length = group[0][1] - group[0][0]
            offsets = torch.arange(length, device=device)  # (T,)
            begins = torch.tensor([w[0] for w in group], device=device)  # (B,)
            scored_from = torch.tensor([w[2] for w in group], device=device)  # (B,)
            where = begins[:, None] + offsets  # (B, T) pair indices
            keep = where >= scored_from[:, None]  # (B, T) the positions this window scores
            target = ids[where + 1][keep]  # (K,)
            if len(models) == 1:
                scored = models[0](ids[where])[keep].float()  # (K, V) only those: log_softmax where it counts
                log_probs = scored.gather(-1, target[:, None])[:, 0] - torch.logsumexp(scored, dim=-1)  # (K,)
            else:
                mixed = sum(w * torch.softmax(m(ids[where])[keep].float(), -1) for m, w in zip(models, weights))
                log_probs = mixed.gather(-1, target[:, None])[:, 0].log()  # (K,)
            total -= log_probs.double().sum()
    return bits_per_byte(total.item(), n_bytes)


# --------------------------------------------------------------------------- a token model as a compressor


_PARAMETERS = {"all": "", "blocks": "blocks.", "output": "lm_head."}  # which parameters learn: their names' start


@dataclass(frozen=True)
class CodingSettings:
    """How a token model codes a text with :func:`compress_with_model` and :func:`decompress_with_model`.

    The windows are :func:`model_bits_per_byte`'s: ``context`` tokens that move by ``stride``, each coding the
    tokens after the window before it, so that, past the start, every token is predicted with at least
    ``context − stride`` tokens before it. With ``lr > 0`` the model keeps learning as it codes (dynamic
    evaluation; Krause et al., 2018): once a window is coded, ``steps`` steps of plain gradient descent with rate
    ``lr`` on the cross-entropy of that whole window, for the ``parameters`` chosen; the decoder, having just
    decoded the same window, takes the same steps.
    """

    context: int  # T, the window length (at most the model's max_len)
    stride: int  # tokens coded per window, 1 ≤ stride ≤ context
    lr: float = 0.0  # the rate of the steps after each window; 0: the model does not change
    steps: int = 1  # steps after each window
    parameters: str = "all"  # which learn: "all", "blocks" (the blocks only) or "output" (the output layer only)

    def __post_init__(self):
        _check_positive(self.context, "context")
        _check_positive(self.stride, "stride")
        _check_positive(self.steps, "steps")
        if self.stride > self.context:
            raise error(
                f"stride debe estar entre 1 y context ({self.context}), no {self.stride}",
                f"stride must lie between 1 and context ({self.context}), got {self.stride}",
            )
        if isinstance(self.lr, bool) or not isinstance(self.lr, numbers.Real) or not 0 <= self.lr < math.inf:
            raise error(f"lr debe ser un número ≥ 0, no {self.lr!r}", f"lr must be a number ≥ 0, got {self.lr!r}")
        if self.parameters not in _PARAMETERS:
            raise error(
                f"parameters debe ser uno de {tuple(_PARAMETERS)}, no {self.parameters!r}",
                f"parameters must be one of {tuple(_PARAMETERS)}, got {self.parameters!r}",
            )


@dataclass
class CodingReport:
    """What :func:`compress_with_model` or :func:`decompress_with_model` used, filled as they code: a hash of every probability row
    (one per coded token, in order), and the ideal sizes of the coded tokens, in bits: under the model's
    probabilities (its cross-entropy) and under the integer counts the coder narrowed with."""

    row_hashes: list[str] = field(default_factory=list)
    model_bits: float = 0.0
    count_bits: float = 0.0
    updates: int = 0  # steps the model took


def _sliding_windows(pairs: int, first: int, context: int, stride: int) -> list[tuple[int, int, int]]:
    """Hugging Face's perplexity loop over (input, target) pairs: (begin, end, scored_from) of each window, pair
    indices; the window reads ids[begin:end] and scores the pairs scored_from .. end − 1 (targets one further)."""
    windows, previous_end = [], 0
    for begin in range(0, pairs, stride):
        end = min(begin + context, pairs)
        if end > first:
            windows.append((begin, end, max(previous_end, first)))
        previous_end = end
        if end == pairs:
            break
    return windows


def _as_models(models: torch.nn.Module | Sequence[torch.nn.Module]) -> list[torch.nn.Module]:
    models = [models] if isinstance(models, torch.nn.Module) else list(models)
    if not models or not all(isinstance(m, torch.nn.Module) for m in models):
        raise error(
            "models debe ser un modelo de PyTorch o una lista de ellos",
            "models must be a PyTorch model or a list of them",
        )
    return models


def _mixture_weights(weights: Sequence[float] | None, n: int) -> list[float]:
    if weights is None:
        return [1 / n] * n
    weights = [float(w) for w in weights]
    if len(weights) != n or any(not w > 0 for w in weights) or abs(sum(weights) - 1) > 1e-9:
        raise error(
            f"weights deben ser {n} números > 0 que sumen 1, uno por modelo",
            f"weights must be {n} numbers > 0 adding up to 1, one per model",
        )
    return weights


@torch.no_grad()
def window_probabilities(
    models: torch.nn.Module | Sequence[torch.nn.Module],
    window: Sequence[int] | Tensor,
    context: int,
    weights: Sequence[float] | None = None,
) -> Tensor:
    """The one probability function of :func:`compress_with_model` and :func:`decompress_with_model`: the next-token distribution at
    every position of ``window``, the window always padded to ``context`` tokens.

    Always the same shape, because the same positions computed in inputs of other shapes (a shorter prefix,
    the key-value cache) can differ in their last bits, and a decoder that differs from its encoder by one bit
    of one probability can decode another symbol. Padding after the window changes nothing before it (the mask
    is causal and gives the padded keys a weight of exactly 0), so the encoder may compute a whole window at once
    and the decoder the same window one known token at a time. Several models: their probabilities mixed,
    ``Σ weights[i] · p_i`` (equal weights by default).

    Shapes: window (L,), L ≤ context -> (L, V) float32.
    """
    models = _as_models(models)
    weights = _mixture_weights(weights, len(models))
    window = torch.as_tensor(window, dtype=torch.long).reshape(-1)
    if not 0 < len(window) <= context:
        raise error(
            f"la ventana debe tener entre 1 y context = {context} tokens, no {len(window)}",
            f"the window must hold between 1 and context = {context} tokens, got {len(window)}",
        )
    padded = torch.zeros(1, context, dtype=torch.long)  # (1, T) the padding's id is never read
    padded[0, : len(window)] = window
    mixed = None
    for model, w in zip(models, weights):
        with eval_mode(model) if model.training else contextlib.nullcontext():
            logits = model(padded.to(next(model.parameters()).device))  # (1, T, V)
        probs = torch.softmax(logits.float(), -1)[0].cpu()  # (T, V)
        mixed = probs if len(models) == 1 else w * probs if mixed is None else mixed + w * probs
    return mixed[: len(window)]


def _take_steps(models: list[torch.nn.Module], window: Tensor, settings: CodingSettings) -> int:
    """Dynamic evaluation: ``settings.steps`` steps of gradient descent on the cross-entropy of ``window``
    (L + 1 tokens: inputs and targets), for every model. Returns the number of steps taken."""
    if settings.lr == 0:
        return 0
    inputs, targets = window[None, :-1], window[1:]  # (1, L), (L,)
    for model in models:
        start = _PARAMETERS[settings.parameters]
        params = [p for name, p in model.named_parameters() if p.requires_grad and name.startswith(start)]
        # no dropout: nothing random, the decoder takes the very same steps (the coding copies are in eval mode)
        with eval_mode(model) if model.training else contextlib.nullcontext():
            for _ in range(settings.steps):
                loss = F.cross_entropy(model(inputs)[0].float(), targets)
                grads = torch.autograd.grad(loss, params)
                with torch.no_grad():
                    for p, g in zip(params, grads):
                        p.add_(g, alpha=-settings.lr)
    return settings.steps * len(models)


def _row_hash(row: Tensor) -> str:
    return hashlib.blake2b(row.numpy().tobytes(), digest_size=8).hexdigest()


def _lockstep(
    models: list[torch.nn.Module],
    settings: CodingSettings,
    weights: list[float],
    ids: list[int],
    n_prefix: int,
    n_tokens: int,
    code: Callable[[np.ndarray, int], int],
    report: CodingReport | None,
) -> None:
    """The walk both sides make: the windows in order, each token's probability row from
    :func:`window_probabilities` and its integer counts (:func:`frequencies`), the coding (``code(counts,
    position)`` codes or decodes the token at ``position`` of ``ids``, returning it), then the steps on the finished
    window. The encoder's ``ids`` hold the whole text, the decoder's grow as it decodes; everything else is the same
    code (the encoder turns a window's rows into counts at once, the decoder one row at a time: the same counts, as
    each row's counts depend on that row only)."""
    pairs = n_prefix + n_tokens - 1
    for begin, end, scored_from in _sliding_windows(pairs, n_prefix - 1, settings.context, settings.stride):
        known = None  # the encoder computes a window once: every token of it is already known
        for q in range(scored_from, end):  # pair q: ids[q] -> ids[q + 1]
            if q + 1 >= len(ids):  # the decoder: only the tokens up to q are known
                row = window_probabilities(models, ids[begin : q + 1], settings.context, weights)[q - begin]
                counts = _quantize(row.numpy().astype(np.float64))  # (V,)
            else:
                if known is None:
                    known = window_probabilities(models, ids[begin:end], settings.context, weights)[
                        scored_from - begin :
                    ]
                    known_counts = _quantize(known.numpy().astype(np.float64))  # (end − scored_from, V)
                row, counts = known[q - scored_from], known_counts[q - scored_from]
            # row (V,): the distribution of token q + 1; counts (V,): what the coder narrows with
            token = code(counts, q + 1)
            if report is not None:
                report.row_hashes.append(_row_hash(row))
                report.model_bits -= math.log2(row[token].item())
        steps = _take_steps(models, torch.tensor(ids[begin : end + 1]), settings)
        if report is not None:
            report.updates += steps


_MAGIC = b"LM\x01"  # what the file is, and the version of its layout
_HEADER = struct.Struct(">3sIII")  # magic, the model's fingerprint, the number of tokens, the text's CRC-32
_CHECK = struct.Struct(">H")  # the header's own check: a damaged header is caught before any decoding


def _fingerprint(models: list[torch.nn.Module], settings: CodingSettings, weights: list[float], prefix: str) -> int:
    """A CRC-32 of everything the decoder must share with the encoder: every weight, bit for bit, the settings,
    the mixture's weights and the prefix."""
    crc = zlib.crc32(repr((settings, weights, prefix)).encode())
    for model in models:
        for name, tensor in model.state_dict().items():
            crc = zlib.crc32(name.encode(), crc)
            crc = zlib.crc32(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes(), crc)
    return crc


def _coding_copies(models: torch.nn.Module | Sequence[torch.nn.Module]) -> list[torch.nn.Module]:
    """Copies on the CPU, whatever device the models are on: the caller's models are left as they were, and the
    steps a model takes as it codes must be repeated bit for bit by the decoder, which CUDA's backward passes,
    summed with atomic additions in no fixed order, do not promise."""
    return [copy.deepcopy(model).cpu().eval() for model in _as_models(models)]


def _both_sides(
    models: torch.nn.Module | Sequence[torch.nn.Module],
    tokenizer: Any,
    settings: CodingSettings,
    prefix: str,
    weights: Sequence[float] | None,
) -> tuple[list[torch.nn.Module], list[float], list[int], int]:
    """What the encoder and the decoder prepare alike: the models' coding copies, the mixture's weights, the prefix's
    ids and the fingerprint of it all."""
    models = _coding_copies(models)
    weights = _mixture_weights(weights, len(models))
    start = _prefix_ids(tokenizer, prefix)
    return models, weights, start, _fingerprint(models, settings, weights, prefix)


def _prefix_ids(tokenizer: Any, prefix: str) -> list[int]:
    ids = list(tokenizer.encode(prefix))
    if not ids:
        raise error(
            "prefix no puede estar vacío: el primer token se predice a partir de él",
            "prefix cannot be empty: the first token is predicted from it",
        )
    return ids


def compress_with_model(
    text: str,
    models: torch.nn.Module | Sequence[torch.nn.Module],
    tokenizer: Any,
    settings: CodingSettings,
    *,
    prefix: str = "\n\n",
    weights: Sequence[float] | None = None,
    report: CodingReport | None = None,
) -> bytes:
    """``text`` compressed with a language model: its tokens arithmetic-coded with the model's probabilities.

    The file is a header of 17 bytes (what it is, the model's fingerprint, the number of tokens and the text's
    CRC-32, then a check of the header itself) and the coder's bytes. The model codes on one CPU thread, on a copy
    (see :func:`window_probabilities`; with ``settings.lr > 0`` the copy learns as it codes). ``prefix`` is
    context both sides know: the first token is predicted after it. ``models``: one model, or several whose
    probabilities are mixed with ``weights``. ``report``: filled with what was used (:class:`CodingReport`).

    Decode with :func:`decompress_with_model` and the same models, tokenizer, settings, prefix and weights.
    """
    if not isinstance(text, str):
        raise error(f"text debe ser un str, no {type(text).__name__}", f"text must be a str, got {type(text).__name__}")
    ids = list(tokenizer.encode(text))
    if tokenizer.decode(ids) != text:
        raise error(
            "el tokenizador no devuelve este texto tal cual al decodificarlo: no se puede comprimir sin pérdida",
            "the tokenizer does not give this text back as it was when decoding it: it cannot be compressed losslessly",
        )
    models, weights, start, fingerprint = _both_sides(models, tokenizer, settings, prefix, weights)
    header = _HEADER.pack(_MAGIC, fingerprint, len(ids), zlib.crc32(text.encode("utf-8")))
    header += _CHECK.pack(zlib.crc32(header) & 0xFFFF)
    if not ids:
        return header
    coder = ArithmeticEncoder()
    everything = start + ids

    def code(counts: np.ndarray, position: int) -> int:
        token = everything[position]
        if not 0 <= token < len(counts):
            raise error(
                f"el token {token} no está en el vocabulario del modelo",
                f"token {token} is not in the model's vocabulary",
            )
        stop = int(counts[: token + 1].sum())
        coder.encode(stop - int(counts[token]), stop, FREQUENCY_TOTAL)
        if report is not None:
            report.count_bits -= math.log2(int(counts[token]) / FREQUENCY_TOTAL)
        return token

    # one thread: the bits must not depend on how many threads the machine has (nor do short windows gain from more)
    with cpu_threads(1):
        _lockstep(models, settings, weights, everything, len(start), len(ids), code, report)
    return header + coder.finish()


def _read_header(blob: bytes) -> tuple[int, int, int]:
    size = _HEADER.size + _CHECK.size
    if len(blob) < size or blob[:3] != _MAGIC:
        raise error(
            "estos bytes no son un archivo escrito por compress_with_model (la cabecera no empieza por «LM»)",
            "these bytes are not a file written by compress_with_model (the header does not start with “LM”)",
        )
    if _CHECK.unpack(blob[_HEADER.size : size])[0] != zlib.crc32(blob[: _HEADER.size]) & 0xFFFF:
        raise error("la cabecera del archivo está dañada", "the file's header is damaged")
    _, fingerprint, n_tokens, crc = _HEADER.unpack(blob[: _HEADER.size])
    return fingerprint, n_tokens, crc


def decompress_with_model(
    blob: bytes,
    models: torch.nn.Module | Sequence[torch.nn.Module],
    tokenizer: Any,
    settings: CodingSettings,
    *,
    tokens: int | None = None,
    prefix: str = "\n\n",
    weights: Sequence[float] | None = None,
    report: CodingReport | None = None,
) -> str:
    """The text :func:`compress_with_model` wrote into ``blob``, decoded with the same models (from the same weights: they
    learn again, step for step, as they decode), tokenizer, settings, prefix and weights.

    ``tokens``: decode only the first ``tokens`` tokens and return their text (nothing to check it against: the
    CRC-32 is the whole text's). A file that is not one, damaged, cut short or written with another model or
    other settings raises an error that says which; the decoder never runs past the tokens the header counts.
    """
    blob = _as_bytes(blob, "blob")
    fingerprint, n_tokens, crc = _read_header(blob)
    models, weights, start, expected = _both_sides(models, tokenizer, settings, prefix, weights)
    if fingerprint != expected:
        raise error(
            "este archivo se escribió con otro modelo u otros ajustes (o con los mismos pesos entrenados en otra "
            "máquina, donde los últimos bits de los números cambian): el decodificador necesita los mismos pesos, "
            "bit a bit",
            "this file was written with another model or other settings (or with the same weights trained on another "
            "machine, where the numbers' last bits change): the decoder needs the same weights, bit for bit",
        )
    if tokens is not None:
        if isinstance(tokens, bool) or not isinstance(tokens, numbers.Integral) or tokens < 0:
            raise error(
                f"tokens debe ser un entero ≥ 0, no {tokens!r}", f"tokens must be an integer ≥ 0, got {tokens!r}"
            )
        n_tokens = min(n_tokens, int(tokens))
    ids = list(start)
    if n_tokens:
        coder = ArithmeticDecoder(blob[_HEADER.size + _CHECK.size :])

        def code(counts: np.ndarray, position: int) -> int:  # counts (V,): the encoder's, from the same row
            cumulative = np.cumsum(counts)  # (V,) where each token's counts end
            token = int(np.searchsorted(cumulative, coder.target(FREQUENCY_TOTAL), side="right"))
            stop = int(cumulative[token])
            coder.decode(stop - int(counts[token]), stop, FREQUENCY_TOTAL)
            ids.append(token)
            if report is not None:
                report.count_bits -= math.log2(int(counts[token]) / FREQUENCY_TOTAL)
            return token

        with cpu_threads(1):  # as the encoder
            _lockstep(models, settings, weights, ids, len(start), n_tokens, code, report)
    text = tokenizer.decode(ids[len(start) :])
    if tokens is None and zlib.crc32(text.encode("utf-8")) != crc:
        raise error(
            "el texto decodificado no coincide con su suma de comprobación (CRC-32): el archivo está dañado, o el "
            "decodificador no ha repetido exactamente los pasos del codificador",
            "the decoded text does not match its checksum (CRC-32): the file is damaged, or the decoder did not repeat "
            "the encoder's steps exactly",
        )
    return text
