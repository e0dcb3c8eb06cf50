"""Notebook 09's counting GPT: its recipe (corpus, model, training settings), its training
and its loss on the whole corpus.

The model is :class:`~minitransformer.gpt.GPT`, trained by :func:`~minitransformer.train.train_gpt`
on :class:`~minitransformer.course.corpus.CountingCorpus` in seconds on a CPU.

Letters: N lines, L length, V vocabulary.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import nn

from ..data import pad_sequences
from ..gpt import GPT, GPTConfig
from ..runtime import eval_mode
from ..runtime import seed as current_seed
from ..train import train_gpt
from .corpus import CountingCorpus

__all__ = ["CountingRecipe", "COUNTING_RECIPE", "train_counting_gpt", "corpus_loss"]


@dataclass(frozen=True)
class CountingRecipe:
    """Corpus, model and training settings of notebook 09's GPT."""

    max_number: int = 100  # the corpus counts from 0 to 99
    max_count: int = 5  # numbers per line: 2 to 5
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 256
    max_len: int = 320  # lines are short; the long context is for timing generation
    steps: int = 800
    batch_size: int = 64
    lr: float = 5e-3
    warmup: int = 50
    held_out: float = 0.1  # share of the corpus's lines set aside for training (the same ones every run)

    def corpus(self, held_out: bool = False) -> CountingCorpus:
        """The counting corpus; with ``held_out``, the one training draws from: the recipe's
        share of its lines, chosen once (``random.Random(0)``), is set aside."""
        every = CountingCorpus(self.max_number, min_count=2, max_count=self.max_count)
        if not held_out:
            return every
        chosen = random.Random(0).sample(every.keys(), round(self.held_out * len(every.keys())))
        return CountingCorpus(self.max_number, min_count=2, max_count=self.max_count, held_out=chosen)

    def config(self, corpus: CountingCorpus) -> GPTConfig:
        return GPTConfig(
            vocab_size=len(corpus.vocab),
            max_len=self.max_len,
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_layers=self.n_layers,
            d_ff=self.d_ff,
            dropout=0.0,
            pad_id=corpus.vocab.pad_id,
        )


COUNTING_RECIPE = CountingRecipe()


def train_counting_gpt(
    seed: int | None = None,
    recipe: CountingRecipe = COUNTING_RECIPE,
    device: torch.device | str | None = None,
    progress: bool = True,
) -> tuple[GPT, CountingCorpus, list[float]]:
    """Train the counting GPT from scratch under ``seed`` (default: the seed in force), on the
    recipe's corpus without its held-out lines.

    Returns ``(model, corpus, losses)``: ``corpus`` knows the held-out lines; the model is in eval mode.
    """
    seed = current_seed() if seed is None else seed
    corpus = recipe.corpus(held_out=True)
    torch.manual_seed(seed)
    model = GPT(recipe.config(corpus))
    rng = random.Random(seed)
    losses = train_gpt(
        model,
        lambda: corpus.batch(recipe.batch_size, rng),
        recipe.steps,
        lr=recipe.lr,
        warmup=recipe.warmup,
        device=device,
        progress=progress,
    )
    return model, corpus, losses


@torch.no_grad()
def corpus_loss(model: nn.Module, corpus: CountingCorpus, held_out: bool = False) -> float:
    """The model's expected next-token loss, in nats per predicted token, on the lines of
    ``corpus`` as its generator draws them (``held_out=True``: on its held-out lines), computed
    over every line at once instead of a sample: comparable with
    :meth:`~minitransformer.course.corpus.CountingCorpus.entropy_per_token`, which it can never beat."""
    weights = corpus.distribution(held_out)
    pad = corpus.vocab.pad_id
    lines = pad_sequences([corpus.line(start, count, lang) for lang, start, count in weights], pad)  # (N, L)
    lines = lines.to(next(model.parameters()).device)
    with eval_mode(model):
        logits = model(lines)  # (N, L, V)
    targets = lines[:, 1:]  # (N, L - 1)
    per_token = nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2).float(), targets, ignore_index=pad, reduction="none"
    )  # (N, L - 1)
    w = torch.tensor(list(weights.values()), dtype=torch.float64, device=lines.device)  # (N,)
    return float((w * per_token.double().sum(dim=1)).sum() / (w * (targets != pad).sum(dim=1)).sum())
