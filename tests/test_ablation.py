"""The ablation runner of notebook 10: held-out lines never trained on, the corpus's floor, the
same batches for every variant, one change each, verdicts computed from paired seeds, readable
tables, and the shipped full table."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
import torch

from minitransformer.course.ablation import (
    FULL_SETUP,
    LIVE_SETUP,
    MEASURED,
    MEASURED_SEEDS,
    VARIANTS,
    counting_task,
    format_table,
    run_ablation,
    sign_test,
    train_variant,
    verdicts,
)
from minitransformer.gpt import GPT
from minitransformer.modern import ModernConfig, ModernTransformer

TINY = replace(LIVE_SETUP, steps=3, batch_size=4, max_number=60)


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


def test_held_out_lines_are_never_trained_on(task):
    corpus = task.corpus
    held = {tuple(row[row != corpus.vocab.pad_id].tolist()) for row in task.held_out}
    assert len(held) == task.held_out.size(0) > 0
    rng = random.Random(0)
    for _ in range(50):
        for row in task.next_batch(rng):
            line = tuple(row[row != corpus.vocab.pad_id].tolist())
            assert corpus.is_valid(list(line)) and line not in held
    every = len(task.train_lines) + len(held)
    assert len(held) == round(TINY.held_out * every)


def test_the_floor_is_the_loss_of_the_true_distribution(task):
    """The floor by brute force: for each held-out line, -log of the probability the corpus's draw
    gives it (language, count, first number), over the tokens predicted."""
    corpus = task.corpus
    counts = corpus.max_count - corpus.min_count + 1
    nats, targets = 0.0, 0
    for row in task.held_out:
        ids = row[row != corpus.vocab.pad_id].tolist()
        parsed = corpus.parse(ids)
        nats += math.log(2) + math.log(counts) + math.log(corpus.max_number - len(parsed.numbers) + 1)
        targets += len(ids) - 1
    assert task.floor == pytest.approx(nats / targets)
    full = counting_task(FULL_SETUP)
    assert 0.55 < full.floor < 0.7 and full.held_out.size(0) == round(0.1 * (len(full.train_lines) / 0.9))


def test_same_seed_same_loss_and_batches(task):
    assert torch.equal(task.next_batch(random.Random(5)), task.next_batch(random.Random(5)))
    modern = VARIANTS[0]
    a = train_variant(modern, task, 0, TINY)
    b = train_variant(modern, task, 0, TINY)
    c = train_variant(modern, task, 1, TINY)
    assert a == b and a != c
    assert a > task.floor


def test_run_ablation_restores_threads_and_needs_seeds(task):
    before = torch.get_num_threads()
    results = run_ablation(task, seeds=(0, 1), variants=VARIANTS[:2], setup=TINY)
    assert torch.get_num_threads() == before
    assert list(results) == ["modern", "gpt"] and all(len(v) == 2 for v in results.values())
    with pytest.raises(ValueError):
        run_ablation(task, seeds=(), setup=TINY)


def test_sign_test_is_exact():
    assert sign_test(5, 0) == pytest.approx(2 / 32)
    assert sign_test(0, 6) == pytest.approx(2 / 64)
    assert sign_test(9, 1) == pytest.approx(2 * 11 / 1024)
    assert sign_test(8, 2) == pytest.approx(2 * 56 / 1024)
    assert sign_test(3, 3) == 1.0 and sign_test(0, 0) == 1.0
    # against the binomial distribution summed by hand
    n, k = 12, 3
    assert sign_test(n - k, k) == pytest.approx(2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


def test_verdicts_pair_the_seeds_and_decide_by_the_sign_test():
    modern = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    results = {
        "modern": modern,
        "always_worse": [x + 0.001 for x in modern],  # tiny but on every seed: worse
        "always_better": [x - 0.5 for x in modern],
        "mixed": [x + (0.3 if i % 2 else -0.3) for i, x in enumerate(modern)],
        "worse_on_average": [x + d for x, d in zip(modern, [3, 3, -0.1, -0.1, 3, -0.1])],  # mean +1.45, 3 of 6
    }
    v = verdicts(results)
    assert v["always_worse"].call == "worse" and v["always_worse"].worse == 6
    assert v["always_better"].call == "better" and v["always_better"].p == pytest.approx(2 / 64)
    assert v["mixed"].call == "undecided"
    assert v["worse_on_average"].call == "undecided" and v["worse_on_average"].delta > 1
    # five seeds can never decide at 5 %: the smallest two-sided p is 2/32
    five = {name: losses[:5] for name, losses in results.items()}
    assert all(x.call == "undecided" for x in verdicts(five).values())
    with pytest.raises(ValueError):
        verdicts({"modern": [1.0, 2.0], "short": [1.0]})


def test_tables_in_both_languages():
    results = {"modern": [1.25, 1.75, 1.5, 1.5, 1.5, 1.5], "leaky_mask": [3.0, 3.5, 3.0, 3.0, 3.0, 3.0]}
    es, en = format_table(results, "es", floor=1.0), format_table(results, "en", floor=1.0)
    assert "1,500" in es and "3,083" in es and "+1,583" in es and "máscara causal rota" in es
    assert "1.500" in en and "+1.583" in en and "broken causal mask" in en
    assert "6/6" in es and "0,031" in es and "peor" in es and "worse" in en and "0.031" in en
    assert "0,500" in es  # loss − floor
    body = es.split("\n", 2)[2]
    assert "." not in body  # no decimal point in Spanish numbers


def test_the_shipped_table_covers_every_variant_with_the_same_seeds():
    assert set(MEASURED) == {v.name for v in VARIANTS}
    assert len(MEASURED_SEEDS) >= 6  # fewer seeds than 6 cannot reach p ≤ 0.05 with a sign test
    assert all(len(losses) == len(MEASURED_SEEDS) for losses in MEASURED.values())
    floor = counting_task(FULL_SETUP).floor
    assert all(loss > floor for losses in MEASURED.values() for loss in losses)
    assert verdicts(MEASURED)["leaky_mask"].call == "worse"
