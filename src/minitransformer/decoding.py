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


def _step_fn(model, src: Tensor, bos_id: int, repeat: int = 1) -> StepFn:
    """Encode ``src`` once; return the function that scores the next token of prefixes.

    Row r of the prefixes belongs to source r // ``repeat``. ``<pad>`` and ``<bos>`` are
    never chosen: their log-probabilities are set to -inf (the others keep their values,
    so the scores stay the model's log-probabilities).
    """
    memory, src_mask, _ = model.encode(src)  # (B, S, D), (B, 1, 1, S)
    banned = [model.config.pad_id, bos_id]

    def step(prefix: Tensor, rows: Tensor) -> Tensor:
        sources = rows // repeat  # (N,)
        logits, _, _ = model.decode(prefix, memory[sources], src_mask[sources])  # (N, t, V)
        logp = torch.log_softmax(logits[:, -1].float(), dim=-1)  # (N, V)
        logp[:, banned] = float("-inf")
        return logp

    return step


def _cached_step_fn(model, src: Tensor, bos_id: int) -> StepFn:
    """Like :func:`_step_fn` (``repeat`` = 1), with a key-value cache: each call feeds the
    decoder only the tokens it has not seen yet. Every row is computed at every step (a
    finished row is fed ``<pad>``), so that the cache keeps one row per source."""
    memory, src_mask, _ = model.encode(src)  # (B, S, D), (B, 1, 1, S)
    pad_id = model.config.pad_id
    banned = [pad_id, bos_id]
    cache = model.new_cache()

    def step(prefix: Tensor, rows: Tensor) -> Tensor:
        seen = len(cache)
        new = torch.full((src.size(0), prefix.size(1) - seen), pad_id, dtype=prefix.dtype, device=prefix.device)
        new[rows] = prefix[:, seen:]  # (B, t - seen)
        logits, _, _ = model.decode(new, memory, src_mask, cache=cache)  # (B, t - seen, V)
        logp = torch.log_softmax(logits[rows, -1].float(), dim=-1)  # (N, V)
        logp[:, banned] = float("-inf")
        return logp

    return step


class _eval_mode:
    """Put the model in eval mode for a search, restore its mode afterwards."""

    def __init__(self, model):
        self.model, self.was_training = model, model.training

    def __enter__(self):
        self.model.eval()

    def __exit__(self, *exc):
        self.model.train(self.was_training)


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
    with _eval_mode(model):
        step = _cached_step_fn(model, src, bos_id) if use_cache else _step_fn(model, src, bos_id)
        return _greedy(step, src.size(0), bos_id, eos_id, model.config.pad_id, max_len, src.device)


def _beam(
    step: StepFn, B: int, K: int, bos_id: int, eos_id: int, pad_id: int, max_len: int, device: torch.device
) -> Decoded:
    alive = torch.full((B, K, 1), bos_id, dtype=torch.long, device=device)  # (B, K, t)
    alive_scores = torch.full((B, K), float("-inf"), device=device)  # (B, K)
    alive_scores[:, 0] = 0.0  # one live beam at the start: the others would be copies of it
    best = torch.full((B, max_len), pad_id, dtype=torch.long, device=device)  # best finished output
    best_scores = torch.full((B,), float("-inf"), device=device)  # (B,)
    open_ = torch.ones(B, dtype=torch.bool, device=device)  # sources still searching
    beams = torch.arange(K, device=device)
    for _ in range(max_len):
        t = alive.size(2)
        src = torch.nonzero(open_).flatten()  # (b,) only the open sources are computed
        b = src.numel()
        rows = (src[:, None] * K + beams).flatten()  # (b·K,)
        logp = step(alive[src].view(b * K, t), rows)  # (b·K, V)
        V = logp.size(-1)
        cand = (alive_scores[src][..., None] + logp.view(b, K, V)).view(b, K * V)  # (b, K·V)
        # At most K of the 2K best candidates end in <eos> (one per beam): K others stay alive.
        top_scores, top_idx = cand.topk(min(2 * K, K * V), dim=-1)  # (b, 2K), best first
        beam_of, token = top_idx // V, top_idx % V  # (b, 2K) each
        is_eos = token == eos_id
        # A sequence finishes only if its <eos> ranks among the K best candidates (so that
        # K = 1 is greedy decoding).
        in_top_k = torch.arange(top_idx.size(1), device=device) < K  # (2K,)
        fin_scores, fin_pos = top_scores.masked_fill(~(is_eos & in_top_k), float("-inf")).max(dim=-1)  # (b,)
        better = fin_scores > best_scores[src]  # (b,)
        if bool(better.any()):
            fin_beam = beam_of.gather(1, fin_pos[:, None])  # (b, 1)
            prefix = alive[src].gather(1, fin_beam[..., None].expand(b, 1, t)).squeeze(1)  # (b, t)
            finished = torch.cat([prefix[:, 1:], torch.full_like(prefix[:, :1], eos_id)], dim=1)  # (b, t)
            upd = src[better]
            best[upd] = pad_id
            best[upd, :t] = finished[better]
            best_scores[upd] = fin_scores[better]
        keep_scores, keep_pos = top_scores.masked_fill(is_eos, float("-inf")).topk(K, dim=-1)  # (b, K)
        keep_beam = beam_of.gather(1, keep_pos)  # (b, K)
        keep_token = token.gather(1, keep_pos)  # (b, K)
        grown = torch.cat(
            [alive[src].gather(1, keep_beam[..., None].expand(b, K, t)), keep_token[..., None]], dim=2
        )  # (b, K, t + 1)
        alive = torch.cat([alive, torch.full_like(alive[..., :1], pad_id)], dim=2)  # (B, K, t + 1)
        alive[src] = grown
        alive_scores[src] = keep_scores
        # Scores only go down: once no live beam beats the best finished one, the source is done.
        open_ = best_scores < alive_scores.max(dim=-1).values  # (B,)
        if not bool(open_.any()):
            break
    # A source still open after max_len steps may end with its best live prefix.
    top_score, top_beam = alive_scores.max(dim=-1)  # (B,)
    take = top_score > best_scores  # (B,)
    if bool(take.any()):
        live = alive.gather(1, top_beam[:, None, None].expand(B, 1, alive.size(2))).squeeze(1)[:, 1:]  # (B, L)
        width = min(max_len, live.size(1))
        best[take] = pad_id
        best[take, :width] = live[take, :width]
        best_scores = torch.where(take, top_score, best_scores)
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
    with _eval_mode(model):
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
    with _eval_mode(model):
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
