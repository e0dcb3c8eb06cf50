"""A token language model as a compressor: its bits per byte on a text, and the text coded into a file with it.

* :func:`model_bits_per_byte`: a token model's loss over a text, scored with a sliding window, turned into bits per
  byte of that text (tokens differ between tokenizers, bytes do not);
* :func:`compress_with_model` and :func:`decompress_with_model` write a text into a self-describing file with a
  token model (or several, mixed) and the arithmetic coder of :mod:`minitransformer.arithmetic_coder`; the model may
  keep learning as it codes (:class:`CodingSettings`), the decoder taking the same steps: one probability function
  for both sides (:func:`window_probabilities`), always the same shapes, on the CPU. :class:`CodingReport` says what
  they used.

The file: a 19-byte header (what it is, a fingerprint of the models' weights, the settings, the mixture's weights and
the prefix, the number of tokens, the text's CRC-32, a check of the first probability row, the header's own check),
a 2-byte check of the first 64, 128, 256, … tokens, then the coder's bytes. So whatever a decoder returns is checked,
a part as well as the whole: another model fails at once, other numerics at the first row, a damaged file at the
first check after the damage.

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
from .compression import bits_per_byte
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
    ids = _as_ids(ids)  # (N,)
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
    ``lr`` on the cross-entropy of that whole window, for the ``parameters`` chosen (whatever their
    ``requires_grad``: the coder's copies learn exactly these); the decoder, having just decoded the same window,
    takes the same steps. The values are kept as Python numbers (``lr=0`` is ``lr=0.0``, a NumPy number its value).
    """

    context: int  # T, the window length (at most the model's max_len)
    stride: int  # tokens coded per window, 1 ≤ stride ≤ context
    lr: float = 0.0  # the rate of the steps after each window; 0: the model does not change
    steps: int = 1  # steps after each window
    parameters: str = "all"  # which learn: "all", "blocks" (the blocks only) or "output" (the output layer only)

    def __post_init__(self):
        for name in ("context", "stride", "steps"):
            object.__setattr__(self, name, _check_positive(getattr(self, name), name))
        if self.stride > self.context:
            raise error(
                f"stride debe estar entre 1 y context ({self.context}), no {self.stride}",
                f"stride must lie between 1 and context ({self.context}), got {self.stride}",
            )
        if isinstance(self.lr, bool) or not isinstance(self.lr, numbers.Real) or not 0 <= self.lr < math.inf:
            raise error(f"lr debe ser un número ≥ 0, no {self.lr!r}", f"lr must be a number ≥ 0, got {self.lr!r}")
        object.__setattr__(self, "lr", float(self.lr))
        if not isinstance(self.parameters, str) or self.parameters not in _PARAMETERS:
            raise error(
                f"parameters debe ser uno de {tuple(_PARAMETERS)}, no {self.parameters!r}",
                f"parameters must be one of {tuple(_PARAMETERS)}, got {self.parameters!r}",
            )


@dataclass
class CodingReport:
    """What :func:`compress_with_model` or :func:`decompress_with_model` used, filled as they code: a hash of every
    probability row (one per coded token, in order), and the ideal sizes of the coded tokens, in bits: under the
    model's probabilities (its cross-entropy) and under the integer counts the coder narrowed with; the steps the
    models took; the bytes of the file before the coder's (the header and its checks). A part of a file
    (``tokens=``) reports the tokens returned: their rows and bits, and the steps taken on windows all of whose tokens
    are among them."""

    row_hashes: list[str] = field(default_factory=list)
    model_bits: float = 0.0
    count_bits: float = 0.0
    updates: int = 0  # steps the model took
    header_bytes: int = 0  # the file's bytes before the coder's


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
    if isinstance(models, torch.nn.Module):
        return [models]
    if isinstance(models, (list, tuple)) and models and all(isinstance(m, torch.nn.Module) for m in models):
        return list(models)
    inner = getattr(models, "model", None)
    hint = (
        (f": pasa su modelo, {type(models).__name__}.model", f": pass its model, {type(models).__name__}.model")
        if isinstance(inner, torch.nn.Module)
        else ("", "")
    )
    raise error(
        f"models debe ser un modelo de PyTorch o una lista de ellos, no {type(models).__name__}{hint[0]}",
        f"models must be a PyTorch model or a list of them, got {type(models).__name__}{hint[1]}",
    )


def _mixture_weights(weights: Sequence[float] | None, n: int) -> list[float]:
    if weights is None:
        return [1 / n] * n
    values = weights.tolist() if isinstance(weights, (Tensor, np.ndarray)) else weights
    ok = (
        isinstance(values, (list, tuple))
        and len(values) == n
        and all(isinstance(w, numbers.Real) and not isinstance(w, bool) for w in values)
    )
    if ok:
        values = [float(w) for w in values]
        ok = all(0 < w < math.inf for w in values) and abs(sum(values) - 1) <= 1e-9
    if not ok:
        raise error(
            f"weights deben ser {n} números > 0 que sumen 1, uno por modelo, no {weights!r}",
            f"weights must be {n} numbers > 0 adding up to 1, one per model, got {weights!r}",
        )
    return values


def _as_ids(ids: Sequence[int] | Tensor, name: str = "ids") -> Tensor:
    """Token ids as a (N,) long tensor."""
    try:
        ids = torch.as_tensor(ids)
    except (TypeError, ValueError, RuntimeError):
        ids = None
    if ids is None or ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise error(f"{name} deben ser enteros (ids de tokens)", f"{name} must be integers (token ids)")
    return ids.long().reshape(-1)


def _window_ids(window: Sequence[int] | Tensor, context: int) -> Tensor:
    """A window of token ids as a (L,) long tensor, 1 ≤ L ≤ context."""
    window = _as_ids(window, "window")
    if not 0 < len(window) <= context or (window < 0).any():
        raise error(
            f"la ventana debe tener entre 1 y context = {context} ids ≥ 0, no {len(window)}",
            f"the window must hold between 1 and context = {context} ids ≥ 0, got {len(window)}",
        )
    return window


def _check_fits(model: torch.nn.Module, window: Tensor, context: int) -> None:
    """A model that says its vocabulary and length (``model.config``) is given ids and windows that fit them."""
    config = getattr(model, "config", None)
    vocab, max_len = getattr(config, "vocab_size", None), getattr(config, "max_len", None)
    if isinstance(vocab, int) and int(window.max()) >= vocab:
        raise error(
            f"el id {int(window.max())} no está en el vocabulario del modelo ({vocab} tokens)",
            f"id {int(window.max())} is not in the model's vocabulary ({vocab} tokens)",
        )
    if isinstance(max_len, int) and context > max_len:
        raise error(
            f"context = {context} es más largo que lo que lee el modelo (max_len = {max_len})",
            f"context = {context} is longer than the model reads (max_len = {max_len})",
        )


@torch.no_grad()
def window_probabilities(
    models: torch.nn.Module | Sequence[torch.nn.Module],
    window: Sequence[int] | Tensor,
    context: int,
    weights: Sequence[float] | None = None,
) -> Tensor:
    """The one probability function of :func:`compress_with_model` and :func:`decompress_with_model`: the next-token
    distribution at every position of ``window``, the window always padded to ``context`` tokens.

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
    context = _check_positive(context, "context")
    window = _window_ids(window, context)
    padded = torch.zeros(1, context, dtype=torch.long)  # (1, T) the padding's id is never read
    padded[0, : len(window)] = window
    mixed = None
    for model, w in zip(models, weights):
        _check_fits(model, window, context)
        with eval_mode(model) if model.training else contextlib.nullcontext():
            logits = model(padded.to(next(model.parameters()).device))  # (1, T, V)
        probs = torch.softmax(logits.float(), -1)[0].cpu()  # (T, V)
        mixed = probs if len(models) == 1 else w * probs if mixed is None else mixed + w * probs
    return mixed[: len(window)]


def _learning(models: list[torch.nn.Module], settings: CodingSettings) -> list[list[torch.nn.Parameter]]:
    """The parameters of each coding copy that learn (``settings.parameters``), set to require gradients and the
    others not, whatever the caller's models said: the steps depend on the settings only, which the file's
    fingerprint holds. With ``lr > 0``, a choice that names no parameter of a model is refused."""
    start = _PARAMETERS[settings.parameters]
    learning = []
    for model in models:
        chosen = []
        for name, p in model.named_parameters():
            p.requires_grad_(settings.lr > 0 and name.startswith(start))
            if p.requires_grad:
                chosen.append(p)
        if settings.lr > 0 and not chosen:
            names = sorted({name.split(".")[0] for name, _ in model.named_parameters()})
            raise error(
                f"con lr > 0, parameters = {settings.parameters!r} no elige ningún parámetro de "
                f"{type(model).__name__} (sus nombres empiezan por {', '.join(names)}): elige otro o lr = 0",
                f"with lr > 0, parameters = {settings.parameters!r} chooses no parameter of {type(model).__name__} "
                f"(its names start with {', '.join(names)}): choose another or lr = 0",
            )
        learning.append(chosen)
    return learning


def _take_steps(
    models: list[torch.nn.Module], learning: list[list[torch.nn.Parameter]], window: Tensor, settings: CodingSettings
) -> int:
    """Dynamic evaluation: ``settings.steps`` steps of gradient descent on the cross-entropy of ``window``
    (L + 1 tokens: inputs and targets), for every model, on its ``learning`` parameters. Returns the number of
    steps taken. Gradients are switched on here, whatever the caller's ``torch.no_grad()``."""
    if settings.lr == 0:
        return 0
    inputs, targets = window[None, :-1], window[1:]  # (1, L), (L,)
    for model, params in zip(models, learning):
        # no dropout: nothing random, the decoder takes the very same steps (the coding copies are in eval mode)
        with torch.enable_grad(), eval_mode(model) if model.training else contextlib.nullcontext():
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
    code: Callable[[Tensor, np.ndarray, int], int],
    report: CodingReport | None,
    reported: int,
    after: Callable[[int], None] | None = None,
) -> None:
    """The walk both sides make: the windows in order, each token's probability row from
    :func:`window_probabilities` and its integer counts (:func:`frequencies`), the coding (``code(row, counts,
    position)`` codes or decodes the token at ``position`` of ``ids``, returning it), then the steps on the finished
    window. The encoder's ``ids`` hold the whole text, the decoder's grow as it decodes; everything else is the same
    code (the encoder turns a window's rows into counts at once, the decoder one row at a time: the same counts, as
    each row's counts depend on that row only). ``report`` gets the first ``reported`` tokens; ``after(position)``
    runs once a token is coded and reported (the decoder's checks)."""
    learning = _learning(models, settings)
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
            token = code(row, counts, q + 1)
            if report is not None and q + 1 - n_prefix < reported:
                report.row_hashes.append(_row_hash(row))
                report.model_bits -= math.log2(row[token].item())
                report.count_bits -= math.log2(int(counts[token]) / FREQUENCY_TOTAL)
            if after is not None:
                after(q + 1)
        steps = _take_steps(models, learning, torch.tensor(ids[begin : end + 1]), settings)
        if report is not None and end - n_prefix < reported:
            report.updates += steps


# The file: a header, the checks of the first tokens, then the coder's bytes.
_MAGIC = b"LM\x02"  # what the file is, and the version of its layout
# magic, the models' fingerprint, the number of tokens, the text's CRC-32, a check of the first probability row
_HEADER = struct.Struct(">3sIIIH")
_CHECK = struct.Struct(">H")  # the header's own check, and each check of the first tokens
FIRST_CHECK = 64  # the first tokens are checked after 64, 128, 256, … tokens (the whole text by its CRC-32)


def _checkpoints(n_tokens: int) -> list[int]:
    """After how many tokens the file holds a check: 64, 128, 256, … below ``n_tokens`` (log2 of them: a part of the
    file can be read and checked by decoding at most twice its tokens (64 at least), or the whole text)."""
    points, c = [], FIRST_CHECK
    while c < n_tokens:
        points.append(c)
        c *= 2
    return points


def _header_bytes(n_tokens: int) -> int:
    """The bytes of a file of ``n_tokens`` tokens before the coder's: the header (19) and 2 bytes per check of
    the first tokens (:data:`FIRST_CHECK`, then doubling)."""
    return _HEADER.size + _CHECK.size * (1 + len(_checkpoints(n_tokens)))


def _crc16(data: bytes, crc: int = 0) -> int:
    return zlib.crc32(data, crc) & 0xFFFF


def _ids_crc(ids: Sequence[int], crc: int = 0) -> int:
    """The running CRC-32 of token ids, each as 4 bytes."""
    return zlib.crc32(struct.pack(f">{len(ids)}I", *ids), crc)


def _fingerprint(models: list[torch.nn.Module], settings: CodingSettings, weights: list[float], prefix: str) -> int:
    """A CRC-32 of everything the decoder must share with the encoder: every weight, bit for bit, the settings'
    values (as numbers: ``lr=0`` and ``lr=0.0`` are one setting), the mixture's weights and the prefix."""
    values = (settings.context, settings.stride, settings.lr.hex(), settings.steps, settings.parameters)
    crc = zlib.crc32(repr((values, [w.hex() for w in weights], prefix)).encode())
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
    report: CodingReport | None,
) -> tuple[list[torch.nn.Module], list[float], list[int], int]:
    """What the encoder and the decoder check and prepare alike: the arguments, the models' coding copies, the
    mixture's weights, the prefix's ids and the fingerprint of it all."""
    if not isinstance(settings, CodingSettings):
        hint = (
            (": CodingSettings(**settings)", ": CodingSettings(**settings)") if isinstance(settings, dict) else ("", "")
        )
        raise error(
            f"settings debe ser un CodingSettings, no {type(settings).__name__}{hint[0]}",
            f"settings must be a CodingSettings, got {type(settings).__name__}{hint[1]}",
        )
    if not all(callable(getattr(tokenizer, name, None)) for name in ("encode", "decode")):
        raise error(
            f"tokenizer debe tener encode y decode (el ByteBPE del modelo), no {type(tokenizer).__name__}",
            f"tokenizer must have encode and decode (the model's ByteBPE), got {type(tokenizer).__name__}",
        )
    if report is not None and not isinstance(report, CodingReport):
        raise error(
            f"report debe ser un CodingReport (o None), no {type(report).__name__}",
            f"report must be a CodingReport (or None), got {type(report).__name__}",
        )
    if not isinstance(prefix, str):
        raise error(
            f"prefix debe ser un str, no {type(prefix).__name__}", f"prefix must be a str, got {type(prefix).__name__}"
        )
    models = _as_models(models)
    weights = _mixture_weights(weights, len(models))
    models = _coding_copies(models)
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

    The file: a header of 19 bytes (what it is, the models' fingerprint, the number of tokens, the text's CRC-32,
    a check of the first probability row, then a check of the header itself), a 2-byte check of the first 64, 128,
    64, … tokens (``report.header_bytes`` counts it all), and the coder's bytes: at most the counts' ideal size
    plus 2 bits, rounded up to whole bytes (:class:`~minitransformer.arithmetic_coder.ArithmeticEncoder`). The model
    codes on one CPU thread, on a copy (see :func:`window_probabilities`; with ``settings.lr > 0`` the copy learns as
    it codes, also inside ``torch.no_grad()``). ``prefix`` is context both sides know: the first token is predicted
    after it. ``models``: one model, or several whose probabilities are mixed with ``weights``. ``report``: filled
    with what was used (:class:`CodingReport`).

    Decode with :func:`decompress_with_model` and the same models, tokenizer, settings, prefix and weights.
    """
    if not isinstance(text, str):
        raise error(f"text debe ser un str, no {type(text).__name__}", f"text must be a str, got {type(text).__name__}")
    with torch.inference_mode(False):  # the copies must be able to learn, even inside torch.inference_mode()
        models, weights, start, fingerprint = _both_sides(models, tokenizer, settings, prefix, weights, report)
        ids = list(tokenizer.encode(text))
        if tokenizer.decode(ids) != text:
            raise error(
                "el tokenizador no devuelve este texto tal cual al decodificarlo: no se puede comprimir sin pérdida",
                "the tokenizer does not give this text back as it was when decoding it: it cannot be compressed "
                "losslessly",
            )
        coder = ArithmeticEncoder()
        everything = start + ids
        first_row = 0

        def code(row: Tensor, counts: np.ndarray, position: int) -> int:
            nonlocal first_row
            token = everything[position]
            if not 0 <= token < len(counts):
                raise error(
                    f"el token {token} no está en el vocabulario del modelo",
                    f"token {token} is not in the model's vocabulary",
                )
            if position == len(start):
                first_row = _crc16(row.numpy().tobytes())
            stop = int(counts[: token + 1].sum())
            coder.encode(stop - int(counts[token]), stop, FREQUENCY_TOTAL)
            return token

        if ids:
            # one thread: the bits must not depend on how many threads the machine has (nor do short windows gain)
            with cpu_threads(1):
                _lockstep(models, settings, weights, everything, len(start), len(ids), code, report, len(ids))
    header = _HEADER.pack(_MAGIC, fingerprint, len(ids), zlib.crc32(text.encode("utf-8")), first_row)
    header += _CHECK.pack(_crc16(header))
    checks = b"".join(_CHECK.pack(_ids_crc(ids[:c]) & 0xFFFF) for c in _checkpoints(len(ids)))
    if report is not None:
        report.header_bytes = len(header) + len(checks)
    return header + checks + (coder.finish() if ids else b"")


def _read_header(blob: bytes) -> tuple[int, int, int, int, list[int]]:
    """The header's fields and the checks of the first tokens, checked as far as they can be without a model."""
    size = _HEADER.size + _CHECK.size
    if len(blob) < size or blob[:3] != _MAGIC:
        old = len(blob) >= 3 and blob[:2] == _MAGIC[:2]
        raise error(
            "estos bytes no son un archivo escrito por compress_with_model "
            + ("de esta versión del paquete" if old else "(la cabecera no empieza por «LM»)"),
            "these bytes are not a file written by compress_with_model "
            + ("of this version of the package" if old else "(the header does not start with “LM”)"),
        )
    if _CHECK.unpack(blob[_HEADER.size : size])[0] != _crc16(blob[: _HEADER.size]):
        raise error("la cabecera del archivo está dañada", "the file's header is damaged")
    _, fingerprint, n_tokens, crc, first_row = _HEADER.unpack(blob[: _HEADER.size])
    points = _checkpoints(n_tokens)
    if len(blob) < _header_bytes(n_tokens) + (1 if n_tokens else 0):
        raise error(
            "el archivo está cortado: se acaba antes que sus comprobaciones",
            "the file is cut short: it ends before its checks do",
        )
    checks = [_CHECK.unpack_from(blob, size + 2 * i)[0] for i in range(len(points))]
    return fingerprint, n_tokens, crc, first_row, checks


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
    """The text :func:`compress_with_model` wrote into ``blob``, decoded with the same models (from the same
    weights: they learn again, step for step, as they decode), tokenizer, settings, prefix and weights.

    Everything it returns is checked. Another model, other settings or other weights fail at once (the header's
    fingerprint); other numerics (the same weights on another machine, whose last bits differ) fail at the first
    probability row; a damaged or cut file, or a decoder that parts from the encoder as it learns, fails at the
    first check of the first 64, 128, 256, … tokens after the fault, and a whole decode checks the text's CRC-32 and
    that the file ends where the coder's bytes end (two files one after the other are refused).

    ``tokens``: decode only the first ``tokens`` tokens and return their text, checked: the decoder goes on to
    the next check (at most twice as many tokens, 64 at least), or to the end and its CRC-32 when ``tokens``
    reaches past the last check; the decoder never runs past the tokens the header counts.
    """
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise error(f"blob debe ser bytes, no {type(blob).__name__}", f"blob must be bytes, got {type(blob).__name__}")
    blob = bytes(blob)
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, numbers.Integral) or tokens < 0):
        raise error(f"tokens debe ser un entero ≥ 0, no {tokens!r}", f"tokens must be an integer ≥ 0, got {tokens!r}")
    fingerprint, n_tokens, crc, first_row, checks = _read_header(blob)
    if report is not None:
        report.header_bytes = _header_bytes(n_tokens)
    with torch.inference_mode(False):  # the copies must be able to learn, even inside torch.inference_mode()
        models, weights, start, expected = _both_sides(models, tokenizer, settings, prefix, weights, report)
        if fingerprint != expected:
            raise error(
                "este archivo se escribió con otro modelo u otros ajustes, o con otros pesos, prefijo o pesos de la "
                "mezcla: el decodificador necesita los mismos, bit a bit",
                "this file was written with another model or other settings, or other weights, prefix or mixture "
                "weights: the decoder needs the same ones, bit for bit",
            )
        wanted = n_tokens if tokens is None else min(n_tokens, int(tokens))
        points = _checkpoints(n_tokens)
        # how far to decode so that every token returned is checked: the next check, or the whole text
        until = next((c for c in points if c >= wanted), n_tokens) if wanted else 0
        ids = list(start)
        if until:
            coder = ArithmeticDecoder(blob[_header_bytes(n_tokens) :])
            running = 0  # the CRC-32 of the tokens decoded so far

            def code(row: Tensor, counts: np.ndarray, position: int) -> int:  # counts (V,): the encoder's
                if position == len(start) and _crc16(row.numpy().tobytes()) != first_row:
                    raise error(
                        "la primera fila de probabilidades no es la del codificador: los mismos pesos dan otros "
                        "números en esta máquina (otro PyTorch, otras instrucciones del procesador) o el archivo está "
                        "dañado; el decodificador necesita las mismas cuentas, bit a bit",
                        "the first probability row is not the encoder's: the same weights give other numbers on "
                        "this machine (another PyTorch, other processor instructions) or the file is damaged; the "
                        "decoder needs the same numbers, bit for bit",
                    )
                cumulative = np.cumsum(counts)  # (V,) where each token's counts end
                token = int(np.searchsorted(cumulative, coder.target(FREQUENCY_TOTAL), side="right"))
                stop = int(cumulative[token])
                coder.decode(stop - int(counts[token]), stop, FREQUENCY_TOTAL)
                ids.append(token)
                return token

            def check(position: int) -> None:  # after the token at position is decoded and reported
                nonlocal running
                decoded = position + 1 - len(start)
                running = _ids_crc([ids[position]], running)
                if decoded in points and running & 0xFFFF != checks[points.index(decoded)]:
                    raise error(
                        f"los primeros {decoded} tokens decodificados no coinciden con su comprobación: el archivo "
                        "está dañado o cortado, o el decodificador no ha repetido exactamente los pasos del "
                        "codificador (otros números en esta máquina)",
                        f"the first {decoded} tokens decoded do not match their check: the file is damaged or cut "
                        "short, or the decoder did not repeat the encoder's steps exactly (other numbers on this "
                        "machine)",
                    )

            with cpu_threads(1):  # as the encoder
                _lockstep(models, settings, weights, ids, len(start), until, code, report, wanted, check)
            if until == n_tokens:
                coder.finish()  # the file ends where the coder's bytes end: nothing after them
        elif not n_tokens and len(blob) != _header_bytes(0):
            raise error(
                "el archivo de un texto vacío no termina tras su cabecera: sobran bytes",
                "the file of an empty text does not end after its header: there are bytes left over",
            )
    text = tokenizer.decode(ids[len(start) :])
    if until == n_tokens and zlib.crc32(text.encode("utf-8")) != crc:
        raise error(
            "el texto decodificado no coincide con su suma de comprobación (CRC-32): el archivo está dañado, o el "
            "decodificador no ha repetido exactamente los pasos del codificador",
            "the decoded text does not match its checksum (CRC-32): the file is damaged, or the decoder did not repeat "
            "the encoder's steps exactly",
        )
    return tokenizer.decode(ids[len(start) : len(start) + wanted])
