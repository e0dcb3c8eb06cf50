"""Generation runs shared by the key-value cache tests of GPT and the modern model."""

from __future__ import annotations

import torch

from minitransformer.generation import generate


def padded_prompt() -> torch.Tensor:
    """A batch of 4 prompts of 6 tokens (ids 1–29), two of them shorter (left padding with 0)."""
    prompt = torch.randint(1, 30, (4, 6))
    prompt[0, :3] = 0  # left padding: a shorter prompt
    prompt[2, :5] = 0
    return prompt


def generation_runs(model, prompt, new_tokens, seed, variants, **sampling) -> list[torch.Tensor]:
    """``generate`` once per set of cache options in ``variants``, each with the same sampling seed."""
    return [
        generate(model, prompt, new_tokens, generator=torch.Generator().manual_seed(seed), **sampling, **options)
        for options in variants
    ]
