"""Generation: continue a prompt one token at a time with a decoder-only model.

:func:`generate` drives any decoder-only model of the course (:class:`~minitransformer.gpt.GPT`,
:class:`~minitransformer.modern.ModernTransformer`): greedy or sampled (temperature, top-k, top-p:
:mod:`~minitransformer.sampling`), with or without the key-value cache
(:mod:`~minitransformer.kv_cache`, growing or preallocated), token-for-token identical either way.
A model takes part by having ``forward(tokens, cache=...)``, ``new_cache(capacity)`` and a
``config`` with ``max_len`` and ``pad_id``.

Letters: B batch, T length, V vocabulary.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .i18n import error
from .runtime import eval_mode
from .sampling import check_temperature, check_top_k, check_top_p, sample_next_token

__all__ = ["generate"]


@torch.no_grad()
def generate(
    model: nn.Module,
    prompt: Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    eos_id: int | None = None,
    use_cache: bool = True,
    preallocate: bool = False,
) -> Tensor:
    """Continue ``prompt`` one token at a time.

    Args:
        model: a :class:`~minitransformer.gpt.GPT`, a :class:`~minitransformer.modern.ModernTransformer`, or any
            model with the same ``forward(tokens, cache=...)``/``new_cache(capacity)`` and a
            ``config`` with ``max_len`` and ``pad_id``.
        prompt: (B, T) ids; rows of different lengths are padded on the left with
            ``config.pad_id``.
        max_new_tokens: tokens to add (fewer if every row has produced ``eos_id``).
        temperature, top_k, top_p: see :func:`~minitransformer.sampling.next_token_probs`;
            ``temperature=0`` is greedy decoding.
        generator: the random source of the draws (same state, same text).
        eos_id: a row that produces it is finished; it is then filled with padding
            (``config.pad_id``, or ``eos_id`` when there is none).
        use_cache: keep keys and values between steps (the same tokens, fewer computations).
        preallocate: with the cache, allocate it once for prompt + ``max_new_tokens``
            positions and write each step in place instead of concatenating (the same tokens).

    Returns:
        (B, T + L) ids, L ≤ ``max_new_tokens``. The padding token is never generated.
    """
    check_temperature(temperature)
    if top_k is not None:
        check_top_k(top_k)
    if top_p is not None:
        check_top_p(top_p)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise error(
            f"max_new_tokens debe ser un entero ≥ 0, no {max_new_tokens!r}",
            f"max_new_tokens must be an integer ≥ 0, got {max_new_tokens!r}",
        )
    config = model.config
    pad_id = getattr(config, "pad_id", None)
    if prompt.dim() != 2 or prompt.size(1) + max_new_tokens > config.max_len:
        raise error(
            f"el prompt ({prompt.size(-1)} tokens) más los {max_new_tokens} nuevos no caben en el "
            f"contexto del modelo ({config.max_len} tokens, max_len)",
            f"the prompt ({prompt.size(-1)} tokens) plus {max_new_tokens} new ones do not fit in the "
            f"model's context ({config.max_len} tokens, max_len)",
        )
    fill = pad_id if pad_id is not None else eos_id
    with eval_mode(model):
        tokens = prompt
        cache = None
        if use_cache:
            cache = model.new_cache(prompt.size(1) + max_new_tokens) if preallocate else model.new_cache()
        done = torch.zeros(prompt.size(0), dtype=torch.bool, device=prompt.device)
        new = prompt  # what the model has not seen yet
        for _ in range(max_new_tokens):
            logits = model(new if use_cache else tokens, cache=cache)[:, -1].float()  # (B, V)
            if pad_id is not None:
                logits[:, pad_id] = float("-inf")
            nxt = sample_next_token(logits, temperature, top_k, top_p, generator)  # (B,)
            if eos_id is not None:
                nxt = nxt.masked_fill(done, fill)
                done = done | (nxt == eos_id)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)  # (B, t + 1)
            new = nxt[:, None]  # (B, 1)
            if eos_id is not None and bool(done.all()):
                break
        return tokens
