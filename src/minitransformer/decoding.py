"""Turning a trained encoder-decoder into output sequences: greedy decoding and beam search.

The model score of an output y₁ … yₙ (ending in ``<eos>``) for a source x is the sum of
the log-probabilities of its tokens, log p(y | x) = Σₜ log p(yₜ | y₍<t₎, x), without length
normalisation. Both searches report this score, and :func:`sequence_log_prob` recomputes it
for any given output with one teacher-forced forward pass.

``<pad>`` and ``<bos>`` are never generated. Because every log-probability is ≤ 0, a prefix's score can only go down as it grows: beam
search may stop as soon as its best finished sequence scores at least as high as every
unfinished one, and that stop is exact (no unfinished beam could still overtake it).

Beam search keeps the ``beam_size`` best prefixes at each step; it may prune the prefix
that greedy decoding follows and end with a lower score than greedy's. With
``keep_greedy=True`` (the default) the greedy sequence is one more candidate, so the result
never scores lower than greedy decoding.

Letters: B batch, K beam size, S source length, L output length, V target vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .i18n import error
from .runtime import eval_mode

__all__ = ["Decoded", "greedy_decode", "beam_search", "sequence_log_prob", "translate"]

StepFn = Callable[[Tensor, Tensor], Tensor]  # prefixes (N, t), their rows (N,) -> next-token log-probs (N, V)


@dataclass
class Decoded:
    """Output of a search.

    Shapes: tokens (B, L), without ``<bos>``, ending in ``<eos>`` (unless ``max_len`` was
    reached) and padded after it; scores (B,), the sum of the log-probabilities of the
    tokens up to and including ``<eos>``.
    """

    tokens: Tensor
    scores: Tensor


def _default_max_len(model, src: Tensor) -> int:
    return min(model.config.max_len - 1, 2 * src.size(1) + 10)


def _step_fn(model, src: Tensor, bos_id: int, repeat: int = 1, cache=None) -> StepFn:
    """Encode ``src`` once; return the function that scores the next token of prefixes.

    Row r of the prefixes belongs to source r // ``repeat``. With a key-value ``cache``
    (``repeat`` = 1; see ``model.new_cache``) each call feeds the decoder only the tokens it
    has not seen yet, for every source (a row not asked for is fed ``<pad>``), so that the
    cache keeps one row per source. ``<pad>`` and ``<bos>`` are never chosen: their
    log-probabilities are set to -inf (the others keep their values, so the scores stay the
    model's log-probabilities).
    """
    memory, src_mask, _ = model.encode(src)  # (B, S, D), (B, 1, 1, S)
    pad_id = model.config.pad_id

    def step(prefix: Tensor, rows: Tensor) -> Tensor:
        if cache is None:
            sources = rows // repeat  # (N,)
            last = model.decode(prefix, memory[sources], src_mask[sources])[0][:, -1]  # (N, V)
        else:
            new = prefix.new_full((src.size(0), prefix.size(1) - len(cache)), pad_id)  # (B, t - seen)
            new[rows] = prefix[:, len(cache) :]
            last = model.decode(new, memory, src_mask, cache=cache)[0][rows, -1]  # (N, V)
        logp = torch.log_softmax(last.float(), dim=-1)  # (N, V)
        logp[:, [pad_id, bos_id]] = float("-inf")
        return logp

    return step


def _greedy(step: StepFn, B: int, bos_id: int, eos_id: int, pad_id: int, max_len: int, device: torch.device) -> Decoded:
    ys = torch.full((B, 1), bos_id, dtype=torch.long, device=device)  # (B, 1)
    scores = torch.zeros(B, device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    for _ in range(max_len):
        rows = torch.nonzero(~done).flatten()  # (N,) only the unfinished sequences are computed
        best, chosen = step(ys[rows], rows).max(dim=-1)  # (N,), (N,)
        nxt = torch.full((B,), pad_id, dtype=torch.long, device=device)
        nxt[rows] = chosen
        scores[rows] += best
        ys = torch.cat([ys, nxt[:, None]], dim=1)  # (B, t + 1)
        done = done | (nxt == eos_id)
        if bool(done.all()):
            break
    return Decoded(ys[:, 1:], scores)


@torch.no_grad()
def greedy_decode(
    model, src: Tensor, bos_id: int, eos_id: int, max_len: int | None = None, use_cache: bool = False
) -> Decoded:
    """Batched greedy decoding: at each step take the most likely next token.

    Args:
        model: a :class:`~minitransformer.model.Transformer` (any model with ``encode``,
            ``decode`` and ``config.pad_id``).
        src: source ids, shape (B, S).
        bos_id, eos_id: start and end tokens of the target vocabulary.
        max_len: most tokens to generate (default: 2·S + 10, within ``config.max_len``).
        use_cache: keep the decoder's keys and values between steps
            (:mod:`~minitransformer.kv_cache`; the model needs ``new_cache``): the same
            tokens, fewer computations.

    Returns:
        :class:`Decoded` with tokens (B, L) and scores (B,).
    """
    max_len = max_len or _default_max_len(model, src)
    with eval_mode(model):
        step = _step_fn(model, src, bos_id, cache=model.new_cache()) if use_cache else _step_fn(model, src, bos_id)
        return _greedy(step, src.size(0), bos_id, eos_id, model.config.pad_id, max_len, src.device)


def _beam(
    step: StepFn, B: int, K: int, bos_id: int, eos_id: int, pad_id: int, max_len: int, device: torch.device
) -> Decoded:
    """Keep each source's K best unfinished prefixes (rows b·K … b·K + K - 1) and its best output."""
    prefix = torch.full((B * K, 1), bos_id, dtype=torch.long, device=device)  # (B·K, t)
    scores = torch.full((B, K), float("-inf"), device=device)  # (B, K)
    scores[:, 0] = 0.0  # one live beam at the start: the others would be copies of it
    best = torch.full((B, max_len), pad_id, dtype=torch.long, device=device)  # (B, L) best output
    best_scores = torch.full((B,), float("-inf"), device=device)  # (B,)
    first = torch.arange(B, device=device) * K  # (B,) row of each source's first beam
    for t in range(1, max_len + 1):
        # Scores only go down: once no live beam beats the best output, the source is done.
        open_ = best_scores < scores.max(dim=-1).values  # (B,)
        if not bool(open_.any()):
            break
        rows = torch.nonzero(open_.repeat_interleave(K)).flatten()  # (N,) only open sources are computed
        logp = step(prefix[rows], rows)  # (N, V)
        V = logp.size(-1)
        logp = logp.new_full((B * K, V), float("-inf")).index_copy(0, rows, logp)  # (B·K, V), -inf if closed
        cand = (scores.view(B * K, 1) + logp).view(B, K * V)  # (B, K·V): index k·V + v extends beam k by v
        # Among the K best candidates, those ending in <eos> finish (so that K = 1 is greedy
        # decoding), and at the last step all of them do.
        top, pos = cand.topk(K, dim=-1)  # (B, K)
        ends = (pos % V == eos_id) | (t == max_len)  # (B, K)
        fin, at = top.masked_fill(~ends, float("-inf")).max(dim=-1)  # (B,)
        fin_pos = pos.gather(1, at[:, None]).squeeze(1)  # (B,)
        output = torch.cat([prefix[first + fin_pos // V, 1:], (fin_pos % V)[:, None]], dim=1)  # (B, t)
        better = fin > best_scores  # (B,)
        best[better, :t] = output[better]
        best_scores = torch.where(better, fin, best_scores)
        # The K best candidates that do not end in <eos> stay alive.
        cand.view(B, K, V)[..., eos_id] = float("-inf")
        scores, pos = cand.topk(K, dim=-1)  # (B, K)
        prefix = torch.cat([prefix[(first[:, None] + pos // V).flatten()], (pos % V).view(B * K, 1)], dim=1)
    used = int((best != pad_id).sum(dim=1).max().clamp(min=1))
    return Decoded(best[:, :used], best_scores)


@torch.no_grad()
def beam_search(
    model,
    src: Tensor,
    bos_id: int,
    eos_id: int,
    beam_size: int = 4,
    max_len: int | None = None,
    keep_greedy: bool = True,
) -> Decoded:
    """Batched beam search with the unnormalised score log p(y | x).

    Args:
        model, src, bos_id, eos_id, max_len: as for :func:`greedy_decode`.
        beam_size: prefixes K kept per source at each step (1 gives greedy decoding).
        keep_greedy: also consider the greedy sequence, so the result never has a lower
            score than greedy decoding's.

    Returns:
        :class:`Decoded` with tokens (B, L) and scores (B,).
    """
    if beam_size < 1:
        raise error(f"beam_size debe ser al menos 1, no {beam_size}", f"beam_size must be at least 1, got {beam_size}")
    max_len = max_len or _default_max_len(model, src)
    B, pad_id = src.size(0), model.config.pad_id
    with eval_mode(model):
        step = _step_fn(model, src, bos_id, repeat=beam_size)
        result = _beam(step, B, beam_size, bos_id, eos_id, pad_id, max_len, src.device)
        if keep_greedy:
            greedy = _greedy(_step_fn(model, src, bos_id), B, bos_id, eos_id, pad_id, max_len, src.device)
            result = _better(result, greedy, pad_id)
    return result


def _better(a: Decoded, b: Decoded, pad_id: int) -> Decoded:
    """Per row, the output with the higher score (``a`` on ties)."""
    take_b = b.scores > a.scores  # (B,)
    if not bool(take_b.any()):
        return a
    L = max(a.tokens.size(1), b.tokens.size(1))
    pad = lambda x: torch.nn.functional.pad(x, (0, L - x.size(1)), value=pad_id)  # noqa: E731
    tokens = torch.where(take_b[:, None], pad(b.tokens), pad(a.tokens))  # (B, L)
    return Decoded(tokens, torch.where(take_b, b.scores, a.scores))


@torch.no_grad()
def sequence_log_prob(model, src: Tensor, out: Tensor, bos_id: int) -> Tensor:
    """log p(out | src), summed over each output's tokens (padding excluded), by teacher forcing.

    Shapes: src (B, S), out (B, L) as returned by the searches -> (B,).
    """
    pad_id = model.config.pad_id
    with eval_mode(model):
        tgt_in = torch.cat([torch.full_like(out[:, :1], bos_id), out[:, :-1]], dim=1)  # (B, L)
        logp = torch.log_softmax(model(src, tgt_in).float(), dim=-1)  # (B, L, V)
        token_logp = logp.gather(-1, out[..., None]).squeeze(-1)  # (B, L)
        return token_logp.masked_fill(out == pad_id, 0.0).sum(dim=-1)  # (B,)


def translate(
    model,
    texts: Sequence[str],
    src_vocab,
    tgt_vocab,
    beam_size: int = 1,
    device: torch.device | str | None = None,
) -> list[str]:
    """Translate sentences (words separated by spaces) with greedy decoding or beam search."""
    from .data import pad_sequences

    device = device or next(model.parameters()).device
    src = pad_sequences([src_vocab.encode(t) for t in texts], src_vocab.pad_id).to(device)  # (B, S)
    if beam_size == 1:
        result = greedy_decode(model, src, tgt_vocab.bos_id, tgt_vocab.eos_id)
    else:
        result = beam_search(model, src, tgt_vocab.bos_id, tgt_vocab.eos_id, beam_size)
    return [tgt_vocab.decode(row) for row in result.tokens.cpu()]
