"""The ablation runner of notebook 10: same batches for every variant, one change each,
honest validation, readable tables, and the shipped full table."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch

from minitransformer.ablation import (
    LIVE_SETUP,
    MEASURED,
    VARIANTS,
    ablation_rows,
    counting_task,
    format_table,
    run_ablation,
    train_variant,
)
from minitransformer.gpt import GPT
from minitransformer.modern import ModernConfig, ModernTransformer

TINY = replace(LIVE_SETUP, steps=3, batch_size=4, val_lines=8)


@pytest.fixture(scope="module")
def task():
    return counting_task(TINY)


def test_variants_change_one_thing():
    base = ModernConfig()
    for v in VARIANTS:
        model = v.build(50, 32, 0, TINY)
        if v.model == "gpt":
            assert isinstance(model, GPT)
            continue
        assert isinstance(model, ModernTransformer)
        changed = {k for k in base.__dataclass_fields__ if getattr(model.config, k) != getattr(base, k)}
        changed -= {"vocab_size", "max_len", "d_ff"}
        assert changed == set(v.change), v.name
    assert sum(v.leaky_mask for v in VARIANTS) == 1


def test_same_seed_same_loss_and_batches(task):
    corpus, next_batch, val = task
    assert torch.equal(next_batch(random.Random(5)), next_batch(random.Random(5)))
    modern = VARIANTS[0]
    a = train_variant(modern, next_batch, val, len(corpus.vocab), corpus.vocab.pad_id, 0, TINY)
    b = train_variant(modern, next_batch, val, len(corpus.vocab), corpus.vocab.pad_id, 0, TINY)
    c = train_variant(modern, next_batch, val, len(corpus.vocab), corpus.vocab.pad_id, 1, TINY)
    assert a == b and a != c


def test_run_ablation_restores_threads_and_needs_seeds(task):
    corpus, next_batch, val = task
    before = torch.get_num_threads()
    results = run_ablation(
        next_batch, val, len(corpus.vocab), corpus.vocab.pad_id, seeds=(0, 1), variants=VARIANTS[:2], setup=TINY
    )
    assert torch.get_num_threads() == before
    assert list(results) == ["modern", "gpt"] and all(len(v) == 2 for v in results.values())
    with pytest.raises(ValueError):
        run_ablation(next_batch, val, len(corpus.vocab), corpus.vocab.pad_id, seeds=(), setup=TINY)


def test_tables_in_both_languages():
    results = {"modern": [1.25, 1.75], "leaky_mask": [3.0, 3.5]}
    es, en = format_table(results, "es"), format_table(results, "en")
    assert "1,500" in es and "3,250" in es and "+1,750" in es and "máscara causal rota" in es
    assert "1.500" in en and "+1.750" in en and "broken causal mask" in en
    assert "." not in es.split("\n", 2)[2].replace("val.", "")  # no decimal point in Spanish numbers
    rows = ablation_rows(results)
    assert rows[0][3] == 0.0 and rows[1][2] == pytest.approx(0.3536, abs=1e-4)


def test_the_shipped_table_covers_every_variant():
    assert set(MEASURED) == {v.name for v in VARIANTS}
    assert all(len(losses) >= 3 for losses in MEASURED.values())
    honest = [x for name, losses in MEASURED.items() if name != "leaky_mask" for x in losses]
    assert min(MEASURED["leaky_mask"]) > max(honest) + 0.5
