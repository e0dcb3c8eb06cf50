"""The warm-up schedule, label smoothing, the training loop and checkpoints."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import minitransformer.course.translator as translator_mod
import minitransformer.train as train_mod
from minitransformer.course.translator import (
    NUMBER_RECIPE,
    default_checkpoint_path,
    load_or_train_number_translator,
    random_target_batches,
    train_number_translator,
)
from minitransformer.data import NumberTranslation, ReverseDigits
from minitransformer.model import Transformer, TransformerConfig
from minitransformer.train import (
    NoamSchedule,
    label_smoothed_cross_entropy,
    load_checkpoint,
    noam_lr,
    save_checkpoint,
    train,
)

ROOT = Path(__file__).resolve().parents[1]
TINY = dataclasses.replace(NUMBER_RECIPE, d_model=16, n_heads=2, d_ff=32, n_layers=1, steps=6, batch_size=8, warmup=3)


def test_noam_schedule_shape():
    d_model, warmup = 64, 200
    lrs = [noam_lr(s, d_model, warmup) for s in range(1, 1001)]
    peak = max(range(1000), key=lambda i: lrs[i]) + 1
    assert peak == warmup
    # linear warm-up: lr ∝ step
    assert lrs[99] == pytest.approx(100 / warmup * lrs[warmup - 1], rel=1e-12)
    # then ∝ 1/√step
    assert lrs[799] == pytest.approx(lrs[199] * math.sqrt(200 / 800), rel=1e-12)
    assert all(a < b for a, b in zip(lrs[: warmup - 1], lrs[1:warmup]))
    assert all(a > b for a, b in zip(lrs[warmup:-1], lrs[warmup + 1 :]))
    assert noam_lr(warmup, d_model, warmup, factor=2.0) == pytest.approx(2 * d_model**-0.5 * warmup**-0.5)
    with pytest.raises(ValueError):
        noam_lr(0, d_model, warmup)


def test_noam_schedule_drives_the_optimizer():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([p], lr=1.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, NoamSchedule(32, 10, 0.5))
    seen = []
    for _ in range(30):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([noam_lr(s, 32, 10, 0.5) for s in range(1, 31)], rel=1e-12)


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_label_smoothing_matches_pytorch(smoothing):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 11, generator=g, requires_grad=True)
    target = torch.randint(1, 11, (3, 5), generator=g)
    target[0, 3:] = 0  # padding
    ours = label_smoothed_cross_entropy(logits, target, smoothing, ignore_index=0)
    theirs = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0, label_smoothing=smoothing)
    torch.testing.assert_close(ours, theirs)
    (g1,) = torch.autograd.grad(ours, logits)
    (g2,) = torch.autograd.grad(theirs, logits)
    torch.testing.assert_close(g1, g2)


def test_label_smoothing_lower_bound_is_the_entropy():
    # With smoothing ε the best prediction is the smoothed target itself: the loss cannot
    # go below its entropy, so a trained model's loss levels off above 0.
    V, eps = 7, 0.1
    target = torch.tensor([[3]])
    smoothed = torch.full((V,), eps / V)
    smoothed[3] += 1 - eps
    best = label_smoothed_cross_entropy(smoothed.log()[None, None], target, eps, ignore_index=0)
    entropy = -(smoothed * smoothed.log()).sum()
    torch.testing.assert_close(best, entropy)
    worse = label_smoothed_cross_entropy(torch.tensor([[[0.0, 0, 0, 20, 0, 0, 0]]]), target, eps, ignore_index=0)
    assert worse > best


def _reverse_run(seed: int, steps: int = 8):
    torch.manual_seed(seed)
    task = ReverseDigits(1, 5, seed=seed)
    config = TransformerConfig(
        src_vocab_size=len(task.vocab),
        tgt_vocab_size=len(task.vocab),
        d_model=16,
        n_heads=2,
        d_ff=32,
        n_layers=1,
        dropout=0.1,
        max_len=16,
    )
    model = Transformer(config)
    history = train(
        model,
        lambda: task.train_batch(16),
        steps,
        warmup=4,
        progress=False,
        val_batch=task.batch_of(task.sample(8)),
        eval_every=4,
    )
    return model, history


def test_training_is_deterministic_under_a_seed():
    m1, h1 = _reverse_run(0)
    m2, h2 = _reverse_run(0)
    m3, h3 = _reverse_run(1)
    assert h1.loss == h2.loss and h1.val_loss == h2.val_loss  # bit-identical
    assert all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values()))
    assert h1.loss != h3.loss


def test_history_records_the_schedule_and_clipping():
    _, h = _reverse_run(0)
    assert h.lr == pytest.approx([noam_lr(s, 16, 4) for s in range(1, 9)], rel=1e-12)
    assert len(h.loss) == len(h.grad_norm) == 8 and h.val_step == [4, 8]
    assert h.seconds > 0 and h.cpu_seconds >= 0


@pytest.mark.parametrize("lang, label", [("es", "pérdida="), ("en", "loss=")])
def test_progress_bar_speaks_the_language(lang, label, language, capsys):
    language(lang)
    torch.manual_seed(0)
    task = ReverseDigits(1, 4)
    config = TransformerConfig(
        src_vocab_size=14, tgt_vocab_size=14, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0, max_len=16
    )
    history = train(Transformer(config), lambda: task.train_batch(4), 3, warmup=2, progress=True, desc="x")
    bar = capsys.readouterr().err
    shown = f"{history.loss[-1]:.3f}"
    assert f"{label}{shown.replace('.', ',') if lang == 'es' else shown}" in bar
    assert ("loss" in bar) == (lang == "en")


def test_gradient_clipping_bounds_the_update(monkeypatch):
    torch.manual_seed(0)
    task = ReverseDigits(1, 4)
    config = TransformerConfig(
        src_vocab_size=14, tgt_vocab_size=14, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0, max_len=16
    )
    model = Transformer(config)
    clipped = []
    clip = torch.nn.utils.clip_grad_norm_

    def spy(params, max_norm, *args, **kwargs):
        params = list(params)
        before = clip(params, max_norm, *args, **kwargs)
        clipped.append(torch.stack([p.grad.norm() for p in params]).norm().item())
        return before

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", spy)
    h = train(model, lambda: task.train_batch(8), 3, clip_norm=1e-3, progress=False)
    assert len(clipped) == 3
    assert all(n <= 1e-3 * (1 + 1e-4) for n in clipped)  # the gradient the optimiser uses is clipped
    assert all(n > 1e-3 for n in h.grad_norm)  # the history holds the norm before clipping


def test_the_loop_trains_any_model_through_its_hooks():
    # a straight line fitted by SGD: the loop uses the given loss, optimiser and schedule
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    x = torch.linspace(-1, 1, 16)[:, None]  # (16, 1)
    seen = []

    def loss_fn(model, y):
        seen.append(y)
        return F.mse_loss(model(x), y)

    h = train(
        model,
        lambda: 3 * x + 1,
        20,
        loss_fn=loss_fn,
        make_optimizer=lambda params: torch.optim.SGD(params, lr=0.5),
        schedule=lambda step: 0.9**step,
        progress=False,
    )
    assert len(seen) == 20 and torch.equal(seen[0], 3 * x + 1)
    assert h.lr == pytest.approx([0.5 * 0.9**s for s in range(20)], rel=1e-12)
    assert h.loss[-1] < 0.01 * h.loss[0]
    assert not model.training


@pytest.mark.slow
def test_training_learns_the_reverse_task():
    torch.manual_seed(0)
    task = ReverseDigits(1, 3)
    config = TransformerConfig(
        src_vocab_size=14, tgt_vocab_size=14, d_model=32, n_heads=2, d_ff=64, n_layers=1, dropout=0.0, max_len=16
    )
    h = train(Transformer(config), lambda: task.train_batch(32), 150, warmup=30, progress=False)
    assert sum(h.loss[-10:]) / 10 < 0.6 * sum(h.loss[:10]) / 10


@pytest.fixture(scope="module")
def tiny():
    """The tiny translator of seed 0 with its snapshot after 3 steps, trained once for the tests that only read it."""
    return train_number_translator(seed=0, device="cpu", progress=False, recipe=TINY, snapshot_steps=(3,))


def test_default_adam_is_the_single_tensor_adam_bit_for_bit():
    # train() steps Adam over all the tensors at once (foreach): the same numbers as one tensor at a time
    def run(make_optimizer):
        torch.manual_seed(0)
        task = ReverseDigits(1, 4)
        config = TransformerConfig(
            src_vocab_size=14, tgt_vocab_size=14, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0, max_len=16
        )
        model = Transformer(config)
        h = train(model, lambda: task.train_batch(8), 12, warmup=3, progress=False, make_optimizer=make_optimizer)
        return h.loss, list(model.state_dict().values())

    default = run(None)
    single = run(lambda params: torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.98), eps=1e-9, foreach=False))
    assert default[0] == single[0]
    assert all(torch.equal(a, b) for a, b in zip(default[1], single[1]))


def test_checkpoint_round_trip(tmp_path, tiny):
    trained = tiny
    path = save_checkpoint(tmp_path / "sub" / "model.pt", trained)
    assert [p.name for p in path.parent.iterdir()] == ["model.pt"]  # no temporary file left
    raw = torch.load(path, weights_only=True)  # only tensors and primitive containers
    assert raw["config"]["d_model"] == 16
    loaded = load_checkpoint(path, device="cpu")
    assert not loaded.model.training
    assert loaded.src_vocab == trained.src_vocab and loaded.tgt_vocab == trained.tgt_vocab
    assert loaded.history == trained.history and loaded.meta == trained.meta
    assert loaded.data.splits == trained.data.splits
    batch = trained.data.batch([3, 21_000, 999_999])
    trained.model.eval()
    with torch.no_grad():
        assert torch.equal(trained.model(batch.src, batch.tgt_in), loaded.model(batch.src, batch.tgt_in))
    assert loaded.translate(["veintiún mil"]) == trained.translate(["veintiún mil"])


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch, tiny):
    trained = tiny
    path = save_checkpoint(tmp_path / "model.pt", trained)
    before = path.read_bytes()

    def broken_save(obj, f):
        f.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError):
        save_checkpoint(path, trained)
    assert path.read_bytes() == before  # the old checkpoint is intact
    assert [p.name for p in tmp_path.iterdir()] == ["model.pt"]


def test_load_or_train(tmp_path, monkeypatch):
    path = tmp_path / "number_translator.pt"
    first = load_or_train_number_translator(path, device="cpu", progress=False, recipe=TINY)
    assert path.exists()
    calls = []
    real = translator_mod.train_number_translator
    monkeypatch.setattr(translator_mod, "train_number_translator", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = load_or_train_number_translator(path, device="cpu", progress=False, recipe=TINY)
    assert calls == []  # loaded, not trained
    assert all(torch.equal(a, b) for a, b in zip(first.model.state_dict().values(), again.model.state_dict().values()))
    other = dataclasses.replace(TINY, steps=4)
    load_or_train_number_translator(path, device="cpu", progress=False, recipe=other)
    assert calls == [1]  # a different recipe trains again


def test_retraining_gives_the_same_model(tiny):
    a = tiny
    b = train_number_translator(seed=0, device="cpu", progress=False, recipe=TINY)
    assert a.history.loss == b.history.loss
    assert all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values()))


def test_default_checkpoint_path():
    assert default_checkpoint_path(ROOT / "notebooks" / "es") == ROOT / "checkpoints" / "number_translator.pt"


def test_random_targets_have_nothing_to_learn():
    data = NumberTranslation(0)
    next_batch = random_target_batches(data, 32, torch.Generator().manual_seed(0))
    a, b = next_batch(), next_batch()
    V = len(data.tgt_vocab)
    real = a.tgt_out != 0
    assert ((a.tgt_out[real] >= 1) & (a.tgt_out[real] < V)).all()
    assert torch.equal(a.tgt_in[:, 1:][real[:, 1:]], a.tgt_out[:, :-1][real[:, 1:]])  # still shifted
    assert (a.tgt_in[:, 0] == data.tgt_vocab.bos_id).all()
    # the targets do not depend on the sources: same source, different targets
    assert not torch.equal(a.tgt_out, b.tgt_out)
    counts = torch.bincount(torch.cat([next_batch().tgt_out.flatten() for _ in range(20)]), minlength=V)[1:]
    assert counts.min() > 0 and counts.max() < 3 * counts.float().mean()  # roughly uniform


def test_training_figures():
    import matplotlib

    matplotlib.use("Agg")
    from minitransformer.viz.training import plot_accuracy_by_digits, plot_losses, plot_lr_schedule

    for lang, word in (("es", "paso"), ("en", "step")):
        fig = plot_lr_schedule({"a": [noam_lr(s, 64, 10) for s in range(1, 50)]}, lang=lang, peaks={"a": 10})
        assert word in fig.axes[0].get_xlabel()
        fig = plot_losses(
            {"train": torch.linspace(3, 1, 40)}, lang=lang, val={"val": ([10, 20], [2.0, 1.5])}, hlines={"ln V": 2.5}
        )
        assert word in fig.axes[0].get_xlabel() and len(fig.axes[0].lines) == 4  # faint, mean, val, hline
        fig = plot_accuracy_by_digits({"g": ([5, 12, 13, 14], [True, True, False, True])}, lang=lang)
        labels = [t.get_text() for t in fig.axes[0].texts]
        assert labels == (["100", "66.7"] if lang == "en" else ["100", "66,7"])


def test_keep_best_ends_with_the_lowest_validation_loss():
    torch.manual_seed(0)
    task = ReverseDigits(1, 4)
    config = TransformerConfig(
        src_vocab_size=14, tgt_vocab_size=14, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0, max_len=16
    )
    model = Transformer(config)
    val = task.batch_of(task.sample(32))
    h = train(
        model,
        lambda: task.train_batch(16),
        40,
        warmup=5,
        lr_factor=3.0,
        val_batch=val,
        eval_every=5,
        keep_best=True,
        progress=False,
    )
    best = min(range(len(h.val_loss)), key=h.val_loss.__getitem__)
    assert h.best_step == h.val_step[best]
    assert train_mod.validation_loss(model, val) == pytest.approx(h.val_loss[best], abs=1e-6)
    with pytest.raises(ValueError):
        train(model, lambda: task.train_batch(16), 2, keep_best=True, progress=False)


def test_snapshots_hold_the_weights_of_that_step(tiny):
    six = tiny
    three = train_number_translator(seed=0, device="cpu", progress=False, recipe=dataclasses.replace(TINY, steps=3))
    early = six.snapshot(3)
    for (k, a), b in zip(early.model.state_dict().items(), three.model.state_dict().values()):
        assert torch.equal(a, b), k
    assert not all(
        torch.equal(a, b) for a, b in zip(early.model.state_dict().values(), six.model.state_dict().values())
    )


def test_snapshots_survive_a_checkpoint(tmp_path, tiny):
    trained = tiny
    loaded = load_checkpoint(save_checkpoint(tmp_path / "m.pt", trained), device="cpu")
    assert set(loaded.snapshots) == {3}
    for a, b in zip(loaded.snapshot(3).model.state_dict().values(), trained.snapshot(3).model.state_dict().values()):
        assert torch.equal(a, b)


def test_training_uses_the_seed_in_force():
    from minitransformer import runtime

    runtime.set_seed(3)
    try:
        implicit = train_number_translator(device="cpu", progress=False, recipe=TINY)
    finally:
        runtime.set_seed(0)
    explicit = train_number_translator(seed=3, device="cpu", progress=False, recipe=TINY)
    assert implicit.meta["seed"] == 3 and implicit.history.loss == explicit.history.loss


def test_reference_run_ships_in_the_package_and_matches_the_recipe():
    from importlib.resources import files

    from minitransformer.course.translator import (
        REFERENCE_FILE,
        REFERENCE_SNAPSHOTS,
        evaluate_numbers,
        reference_translator,
    )

    assert (files("minitransformer") / "reference_runs" / REFERENCE_FILE).is_file()
    assert "reference_runs/*.pt" in (ROOT / "pyproject.toml").read_text()  # package data: it goes in the wheel
    ref = reference_translator("cpu")
    # A change to the recipe (or the task) must come with a new reference: tools/make_reference.py.
    assert ref.meta["seed"] == 0 and ref.meta["recipe"] == dataclasses.asdict(NUMBER_RECIPE)
    assert tuple(sorted(ref.snapshots)) == REFERENCE_SNAPSHOTS
    test = ref.data.splits["test"][-300:]  # the six-digit numbers
    final, early = evaluate_numbers(ref, test), evaluate_numbers(ref.snapshot(100), test)
    assert final.accuracy >= 0.98 and early.accuracy < final.accuracy - 0.1  # notebook 07: a model still learning
