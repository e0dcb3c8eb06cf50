"""Notebook 14's checkers accept right answers and name the typical wrong ones, in both languages.

The answers to ``14.average_gradients`` that get as far as needing the process group run on two real gloo ranks
launched with torchrun: the fixture launches once for all of them (``prepare_average_gradients``), then every
check of each, in each language, reads that launch's result. The tests that need it are marked slow (one launch
is a few seconds of CPU: torchrun and two processes that import torch)."""

from __future__ import annotations

import contextlib
import math
import random
import sys
import threading
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from feedback_asserts import assert_correct, assert_hint, bank
from torch.utils.data import DistributedSampler

from minitransformer import distributed as engine
from minitransformer.exercises import distributed as checkers
from minitransformer.exercises.distributed import (
    HINTS,
    check_average_gradients,
    check_shard_indices,
    check_step_time,
)
from minitransformer.exercises.solutions.nb14 import (
    solution_my_average_gradients,
    solution_my_shard_indices,
    solution_my_step_time,
)

LANGS = ("es", "en")


# --- 14.average_gradients: as students write them ------------------------------------------------------


def in_place_first(model):
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            p.grad.div_(world)
            dist.all_reduce(p.grad)


def one_flat_bucket(model):
    """All the gradients in one tensor, one all-reduce, written back: what DDP's buckets do."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.flatten() for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    start = 0
    for g in grads:
        g.copy_(flat[start : start + g.numel()].view_as(g))
        start += g.numel()


def _with_grads(model):
    return [p for p in model.parameters() if p.grad is not None]


WORLD_OP = dist.ReduceOp.SUM


def with_a_helper_and_a_constant(model):
    """A helper function and a constant of the notebook: both reach the ranks."""
    for p in _with_grads(model):
        dist.all_reduce(p.grad, op=WORLD_OP)
        p.grad /= dist.get_world_size()


RIGHT = {
    "the answer key": solution_my_average_gradients,
    "divide first, in place": in_place_first,
    "one flat bucket": one_flat_bucket,
    "a helper and a constant": with_a_helper_and_a_constant,
}


def summed(model):
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)


def divided_twice(model):
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            p.grad /= world
            dist.all_reduce(p.grad)
            p.grad /= world


def averages_the_parameters(model):
    world = dist.get_world_size()
    with torch.no_grad():
        for p in model.parameters():
            dist.all_reduce(p.data)
            p.data /= world


def reduce_to_rank_0(model):
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            dist.reduce(p.grad, dst=0)
            p.grad /= world


def stops_after_the_first(model):
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= world
            return


def reduction_outside_the_loop(model):
    world = dist.get_world_size()
    for p in model.parameters():  # noqa: B007 (the mistake: the loop ends before the reduction)
        pass
    dist.all_reduce(p.grad)
    p.grad /= world


def reduces_a_copy(model):
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            g = p.grad.clone()
            dist.all_reduce(g)
            g /= world


def divides_only(model):
    for p in model.parameters():
        if p.grad is not None:
            p.grad /= dist.get_world_size()


def two_by_hand(model):
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= 2


def zeros_for_the_frozen(model):
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad)
        p.grad /= world


def grad_mode_left_off(model):
    torch.set_grad_enabled(False)
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= world


def in_double_precision(model):
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            g = p.grad.double()
            dist.all_reduce(g)
            p.grad = g / world  # PyTorch refuses it: the crash is shown


def in_double_precision_through_data(model):
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            g = p.grad.double()
            dist.all_reduce(g)
            p.grad.data = g / world


def only_rank_0_reduces(model):
    world = dist.get_world_size()
    if dist.get_rank() == 0:
        for p in model.parameters():
            if p.grad is not None:
                dist.all_reduce(p.grad)
                p.grad /= world


def fails_on_rank_1(model):
    if dist.get_rank() == 1:
        raise ValueError("rank 1 is not ready")
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)


# answered here, before any launch
def forgets_the_frozen(model):
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()


def divides_the_frozen(model):
    world = dist.get_world_size()
    for p in model.parameters():
        p.grad /= world
        dist.all_reduce(p.grad)


def no_communication(model):
    for p in model.parameters():
        if p.grad is not None:
            p.grad /= 2


LOCK = threading.Lock()


def with_a_lock(model):
    with LOCK:
        for p in model.parameters():
            if p.grad is not None:
                dist.all_reduce(p.grad)


AVERAGE_MISTAKES = {
    "sum, not divided": (summed, "no_division"),
    "divided before and after": (divided_twice, "divided_twice"),
    "the parameters averaged": (averages_the_parameters, "changed_params"),
    "dist.reduce": (reduce_to_rank_0, "only_rank0"),
    "first parameter only": (stops_after_the_first, "one_param"),
    "reduction after the loop": (reduction_outside_the_loop, "one_param"),
    "a copy reduced": (reduces_a_copy, "not_averaged"),
    "divided, not reduced": (divides_only, "divided_only"),
    "2 by hand": (two_by_hand, "hard_coded_world"),
    "zeros for the frozen": (zeros_for_the_frozen, "none_filled"),
    "grad mode left off": (grad_mode_left_off, "left_grad_mode"),
    "float64 gradients": (in_double_precision, "crashed"),
    "float64 gradients through .data": (in_double_precision_through_data, "grad_kind"),
    "rank 0 alone reduces": (only_rank_0_reduces, "hangs"),
    "rank 1 raises": (fails_on_rank_1, "crashed"),
    "None gradient reduced": (forgets_the_frozen, "none_grad"),
    "None gradient divided": (divides_the_frozen, "none_grad"),
    "no collective": (no_communication, "no_collective"),
    "a lock of the notebook": (with_a_lock, "needs_global"),
}
LAUNCHED = [*RIGHT.values(), *(fn for fn, _ in AVERAGE_MISTAKES.values())]


@pytest.fixture(scope="module")
def launched():
    """One launch for every answer that gets as far as the ranks (a short collective timeout: one answer hangs)."""
    saved = checkers.COLLECTIVE_TIMEOUT
    checkers.COLLECTIVE_TIMEOUT = 6.0
    try:
        checkers.prepare_average_gradients(LAUNCHED)
    finally:
        checkers.COLLECTIVE_TIMEOUT = saved
    yield


@pytest.mark.slow
@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer", list(RIGHT.values()), ids=list(RIGHT))
def test_average_gradients_accepts_right_answers(answer, lang, launched):
    assert_correct(check_average_gradients(answer, lang=lang), lang)


@pytest.mark.slow
@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("check,answer,hint", bank(check_average_gradients, AVERAGE_MISTAKES))
def test_average_gradients_rejects_wrong_answers(check, answer, hint, lang, launched):
    assert_hint(check(answer, lang=lang), lang, hint, HINTS)


@pytest.mark.slow
def test_a_crash_on_a_rank_shows_the_students_line(launched):
    fb = check_average_gradients(fails_on_rank_1, lang="en")
    assert 'raise ValueError("rank 1 is not ready")' in fb.message, fb.message
    assert "ValueError" in fb.message and "rank 1 is not ready" in fb.message


@pytest.mark.slow
def test_the_launch_is_kept_for_the_same_code(launched, monkeypatch):
    """A check of a function already launched (in either language) launches nothing."""

    def no_launch(payloads):
        raise AssertionError("launched again")

    monkeypatch.setattr(checkers, "_launch", no_launch)
    assert check_average_gradients(solution_my_average_gradients, lang="es")
    assert check_average_gradients(solution_my_average_gradients, lang="en")


@pytest.mark.parametrize("lang", LANGS)
def test_the_unwritten_stub_and_answers_without_a_collective_launch_nothing(lang, monkeypatch):
    """The stored notebook runs the unwritten stub: its "not yet" comes without starting a process."""

    def no_launch(payloads):
        raise AssertionError("launched")

    monkeypatch.setattr(checkers, "_launch", no_launch)
    monkeypatch.setattr(checkers, "_LAUNCHED", {})  # nothing from an earlier launch either

    def my_average_gradients(model):
        raise NotImplementedError

    assert_hint(check_average_gradients(my_average_gradients, lang=lang), lang, "not_written", HINTS)
    for answer, hint in [(no_communication, "no_collective"), (forgets_the_frozen, "none_grad")]:
        assert_hint(check_average_gradients(answer, lang=lang), lang, hint, HINTS)
    assert_hint(check_average_gradients(with_a_lock, lang=lang), lang, "needs_global", HINTS)


def test_the_first_try_leaves_torch_distributed_and_the_environment_as_they_were():
    import os

    from torch.distributed import distributed_c10d as c10d

    before = (c10d._get_default_group, c10d.is_initialized, dist.is_initialized, os.environ.get("WORLD_SIZE"))
    check_average_gradients(no_communication, lang="en")
    check_average_gradients(forgets_the_frozen, lang="en")
    after = (c10d._get_default_group, c10d.is_initialized, dist.is_initialized, os.environ.get("WORLD_SIZE"))
    assert before == after
    assert not dist.is_initialized()


def test_the_cases_tell_the_mistakes_apart():
    """The ranks' batches differ in size (rank 1's targets ten times larger), the first parameter is frozen and a
    layer is unused (their gradients None), and the model is the same on both ranks but in "apart"."""
    from minitransformer.exercises import _on_ranks

    model = _on_ranks.Net(seed=7)
    _on_ranks.local_gradients(model, "ddp", 0)
    grads = _on_ranks.gradients(model)
    assert grads[0] is None and sum(g is None for g in grads) == 3
    other = _on_ranks.Net(seed=7)
    _on_ranks.local_gradients(other, "ddp", 1)
    norms = [
        float(torch.cat([g.flatten() for g in _on_ranks.gradients(m) if g is not None]).norm()) for m in (model, other)
    ]
    assert norms[1] > 3 * norms[0]
    assert [w for _, w, _ in _on_ranks.CASES] == [2, 2, 1]


# --- 14.shard_indices -------------------------------------------------------------------------------------


def _sampler(n, world, rank, epoch, seed, shuffle):
    sampler = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=shuffle, seed=seed, drop_last=False)
    sampler.set_epoch(epoch)
    return list(sampler)


@pytest.mark.parametrize(
    "n,world,epoch,seed,shuffle",
    [(10, 3, 0, 0, True), (1, 4, 2, 1, True), (3, 7, 0, 0, False), (16, 4, 5, 2, True), (13, 13, 1, 0, True)],
)
def test_the_answer_key_is_distributed_sampler_on_edge_cases(n, world, epoch, seed, shuffle):
    for rank in range(world):
        assert solution_my_shard_indices(n, world, rank, epoch, seed, shuffle) == _sampler(
            n, world, rank, epoch, seed, shuffle
        )


def test_the_engine_deals_as_the_answer_key_where_it_accepts_the_data():
    """The package's shard_indices (which refuses n < world) deals as the exercise asks."""
    for n, world, epoch, seed in [(10, 3, 1, 0), (12, 4, 0, 5), (7, 2, 3, 1)]:
        for rank in range(world):
            assert engine.shard_indices(n, world, rank, epoch, seed) == solution_my_shard_indices(
                n, world, rank, epoch, seed, True
            )


def shard_blocks_drop_tail(n, world, rank, epoch, seed, shuffle):
    order = (
        torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).tolist() if shuffle else list(range(n))
    )
    size = n // world
    return order[rank * size : (rank + 1) * size]


def _order(n, epoch, seed, shuffle):
    if shuffle:
        return torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
    return list(range(n))


def shard_blocks(n, world, rank, epoch, seed, shuffle):
    order = _order(n, epoch, seed, shuffle)
    each = math.ceil(n / world)
    padded = (order * world)[: each * world]
    return padded[rank * each : (rank + 1) * each]


def shard_strided(n, world, rank, epoch, seed, shuffle):
    return _order(n, epoch, seed, shuffle)[rank::world]


def shard_drop_last(n, world, rank, epoch, seed, shuffle):
    order = _order(n, epoch, seed, shuffle)
    return order[: n - n % world][rank::world]


def shard_pads_once(n, world, rank, epoch, seed, shuffle):
    order = _order(n, epoch, seed, shuffle)
    missing = (world - n % world) % world
    return (order + order[:missing])[rank::world]


def shard_pads_with_the_last(n, world, rank, epoch, seed, shuffle):
    order = _order(n, epoch, seed, shuffle)
    while len(order) % world:
        order.append(order[-1])
    return order[rank::world]


def shard_pads_with_range(n, world, rank, epoch, seed, shuffle):
    order = _order(n, epoch, seed, shuffle)
    missing = (world - n % world) % world
    return (order + [i % n for i in range(missing)])[rank::world]


def shard_pads_a_whole_row(n, world, rank, epoch, seed, shuffle):
    order = _order(n, epoch, seed, shuffle)
    total = (n // world + 1) * world
    return (order * (total // n + 1))[:total][rank::world]


def shard_same_every_epoch(n, world, rank, epoch, seed, shuffle):
    return solution_my_shard_indices(n, world, rank, 0, seed, shuffle)


def shard_seeded_by_rank(n, world, rank, epoch, seed, shuffle):
    return solution_my_shard_indices(n, world, rank, epoch, seed + rank, shuffle)


def shard_seed_ignored(n, world, rank, epoch, seed, shuffle):
    return solution_my_shard_indices(n, world, rank, epoch, 0, shuffle)


def shard_always_shuffled(n, world, rank, epoch, seed, shuffle):
    return solution_my_shard_indices(n, world, rank, epoch, seed, True)


def shard_global_seed(n, world, rank, epoch, seed, shuffle):
    torch.manual_seed(seed + epoch)
    order = torch.randperm(n).tolist() if shuffle else list(range(n))
    total = world * math.ceil(n / world)
    return (order * math.ceil(total / n))[:total][rank::world]


def shard_python_random(n, world, rank, epoch, seed, shuffle):
    order = list(range(n))
    if shuffle:
        random.shuffle(order)
    total = world * math.ceil(n / world)
    return (order * math.ceil(total / n))[:total][rank::world]


def shard_the_sampler(n, world, rank, epoch, seed, shuffle):
    return _sampler(n, world, rank, epoch, seed, shuffle)


SHARD_MISTAKES = {
    "blocks, tail dropped": (shard_blocks_drop_tail, "shard_blocks_drop_tail"),
    "blocks of the padded order": (shard_blocks, "shard_blocks"),
    "strided, not padded": (shard_strided, "shard_no_padding"),
    "drop_last": (shard_drop_last, "shard_drop_tail"),
    "padded once": (shard_pads_once, "shard_pad_once"),
    "padded with the last": (shard_pads_with_the_last, "shard_pad_last"),
    "padded with 0, 1, …": (shard_pads_with_range, "shard_pad_unshuffled"),
    "a whole extra row": (shard_pads_a_whole_row, "shard_extra_row"),
    "the same every epoch": (shard_same_every_epoch, "shard_same_every_epoch"),
    "seeded by rank": (shard_seeded_by_rank, "shard_rank_seed"),
    "seed ignored": (shard_seed_ignored, "shard_seed_ignored"),
    "always shuffled": (shard_always_shuffled, "shard_shuffle_ignored"),
    "the global generator": (shard_global_seed, "shard_global_rng"),
    "Python's random": (shard_python_random, "shard_global_rng"),
    "DistributedSampler": (shard_the_sampler, "forbidden"),
    "the package's": (engine.shard_indices, "forbidden"),
    "floats": (
        lambda n, w, r, e, s, sh: [float(i) for i in solution_my_shard_indices(n, w, r, e, s, sh)],
        "shard_not_ints",
    ),
    "a float tensor": (
        lambda n, w, r, e, s, sh: torch.tensor(solution_my_shard_indices(n, w, r, e, s, sh)) * 1.0,
        "shard_not_ints",
    ),
    "one too many": (lambda n, w, r, e, s, sh: [*solution_my_shard_indices(n, w, r, e, s, sh), 0], "shard_lengths"),
    "index n": (lambda n, w, r, e, s, sh: [n, *solution_my_shard_indices(n, w, r, e, s, sh)[1:]], "shard_out_of_range"),
    "rank 0's for all": (lambda n, w, r, e, s, sh: solution_my_shard_indices(n, w, 0, e, s, sh), "shard_uncovered"),
    "reversed": (lambda n, w, r, e, s, sh: solution_my_shard_indices(n, w, r, e, s, sh)[::-1], "shard_other"),
}


@pytest.mark.parametrize("lang", LANGS)
def test_shard_indices_accepts_right_answers(lang):
    assert_correct(check_shard_indices(solution_my_shard_indices, lang=lang), lang)

    def as_a_tensor(n, world, rank, epoch, seed, shuffle):
        return torch.tensor(solution_my_shard_indices(n, world, rank, epoch, seed, shuffle), dtype=torch.long)

    assert_correct(check_shard_indices(as_a_tensor, lang=lang), lang)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("check,answer,hint", bank(check_shard_indices, SHARD_MISTAKES))
def test_shard_indices_rejects_wrong_answers(check, answer, hint, lang):
    assert_hint(check(answer, lang=lang), lang, hint, HINTS)


def test_shard_indices_leaves_the_global_generators_and_the_tools_as_they_were():
    torch.manual_seed(123)
    random.seed(5)
    torch_state, python_state = torch.get_rng_state(), random.getstate()
    check_shard_indices(shard_global_seed, lang="en")
    check_shard_indices(shard_python_random, lang="en")
    check_shard_indices(shard_the_sampler, lang="en")
    assert torch.equal(torch.get_rng_state(), torch_state) and random.getstate() == python_state
    assert _sampler(10, 3, 1, 2, 0, True) == solution_my_shard_indices(10, 3, 1, 2, 0, True)  # switched on again


# --- 14.step_time -----------------------------------------------------------------------------------------


def step_with_element_size(model, dtype, world, compute_seconds, bandwidth):
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    size = torch.empty(0, dtype=dtype).element_size()
    return compute_seconds / world + 2 * (world - 1) / world * trainable * size / bandwidth


def _trainable(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def step_every_parameter(model, dtype, world, compute_seconds, bandwidth):
    numbers = sum(p.numel() for p in model.parameters())
    return compute_seconds / world + 2 * (world - 1) / world * numbers * dtype.itemsize / bandwidth


def step_parameters_size(model, dtype, world, compute_seconds, bandwidth):
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return compute_seconds / world + 2 * (world - 1) / world * grad_bytes / bandwidth


def step_converts_the_model(model, dtype, world, compute_seconds, bandwidth):
    model.to(dtype)
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return compute_seconds / world + 2 * (world - 1) / world * grad_bytes / bandwidth


def step_numbers_not_bytes(model, dtype, world, compute_seconds, bandwidth):
    return compute_seconds / world + 2 * (world - 1) / world * _trainable(model) / bandwidth


def step_one_phase(model, dtype, world, compute_seconds, bandwidth):
    return compute_seconds / world + (world - 1) / world * _trainable(model) * dtype.itemsize / bandwidth


def step_two_whole(model, dtype, world, compute_seconds, bandwidth):
    return compute_seconds / world + 2 * _trainable(model) * dtype.itemsize / bandwidth


def step_to_everyone(model, dtype, world, compute_seconds, bandwidth):
    return compute_seconds / world + (world - 1) * _trainable(model) * dtype.itemsize / bandwidth


def step_compute_whole(model, dtype, world, compute_seconds, bandwidth):
    return compute_seconds + 2 * (world - 1) / world * _trainable(model) * dtype.itemsize / bandwidth


def step_comm_only(model, dtype, world, compute_seconds, bandwidth):
    return 2 * (world - 1) / world * _trainable(model) * dtype.itemsize / bandwidth


def step_in_bits(model, dtype, world, compute_seconds, bandwidth):
    bits = 2 * (world - 1) / world * _trainable(model) * dtype.itemsize * 8
    return compute_seconds / world + bits / bandwidth


STEP_MISTAKES = {
    "frozen counted": (step_every_parameter, "step_frozen_counted"),
    "parameters' float32": (step_parameters_size, "step_param_dtype"),
    "model converted": (step_converts_the_model, "step_model_changed"),
    "numbers, not bytes": (step_numbers_not_bytes, "step_elements"),
    "one phase": (step_one_phase, "step_no_factor_two"),
    "2 × bytes": (step_two_whole, "step_n_not_n_minus_1"),
    "to every other rank": (step_to_everyone, "step_naive"),
    "compute not split": (step_compute_whole, "step_compute_not_split"),
    "communication only": (step_comm_only, "step_comm_only"),
    "compute only": (lambda model, dtype, world, c, b: c / world, "step_compute_only"),
    "bits": (step_in_bits, "step_bits"),
    "a string": (lambda *a: "0.5 s", "step_not_number"),
    "something else": (lambda model, dtype, world, c, b: c / world + 1.0, "step_wrong"),
    "the package's": (
        lambda model, dtype, world, c, b: (
            c / world + engine.ring_allreduce_bytes(engine.gradient_bytes(model), world) / b
        ),
        "forbidden",
    ),
}


@pytest.mark.parametrize("lang", LANGS)
def test_step_time_accepts_right_answers(lang):
    assert_correct(check_step_time(solution_my_step_time, lang=lang), lang)
    assert_correct(check_step_time(step_with_element_size, lang=lang), lang)
    as_tensor = lambda *a: torch.tensor(solution_my_step_time(*a))  # noqa: E731
    assert_correct(check_step_time(as_tensor, lang=lang), lang)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("check,answer,hint", bank(check_step_time, STEP_MISTAKES))
def test_step_time_rejects_wrong_answers(check, answer, hint, lang):
    assert_hint(check(answer, lang=lang), lang, hint, HINTS)


def test_the_step_time_is_the_engines_ring_bytes():
    """The answer key's communication is the package's ring_allreduce_bytes of the trainable gradients."""
    model = checkers._step_model(1)
    for world in (1, 2, 5):
        want = engine.ring_allreduce_bytes(engine.gradient_bytes(model), world) / 1e6
        assert math.isclose(solution_my_step_time(model, torch.float32, world, 0.0, 1e6), want, rel_tol=1e-12)


def not_launched_before(model):
    world = dist.get_world_size()
    for p in _with_grads(model):
        dist.all_reduce(p.grad)
        p.grad /= world


def waits_on_the_ranks(model):
    world = dist.get_world_size()  # here, the first try stops at the process group; on the ranks, they wait
    import time

    time.sleep(120)
    for p in _with_grads(model):
        dist.all_reduce(p.grad)
        p.grad /= world


@pytest.mark.parametrize("lang", LANGS)
def test_a_launch_past_its_time_is_ended_and_said(lang, monkeypatch):
    """Every process of a launch that runs past its time is ended, and the check says so (and keeps nothing: the next
    check launches again)."""
    import time

    # 4 s for the launch (2 s, and as much again for its one function), while its ranks sleep: torchrun starts them in
    # sessions of their own, and killing torchrun's process group alone left them running, holding the output open
    # (56 s in a fresh-clone CI)
    monkeypatch.setattr(checkers, "LAUNCH_TIMEOUT", 2.0)
    folders, folder = [], checkers.tempfile.TemporaryDirectory

    def recorded(*args, **kwargs):  # the launch's own folder, named in its ranks' command lines
        made = folder(*args, **kwargs)
        folders.append(made.name.encode())
        return made

    monkeypatch.setattr(checkers.tempfile, "TemporaryDirectory", recorded)
    began = time.monotonic()
    assert_hint(check_average_gradients(waits_on_the_ranks, lang=lang), lang, "launch_timeout", HINTS)
    assert time.monotonic() - began < 20
    assert not any(b"waits_on_the_ranks" in key for key in checkers._LAUNCHED)
    if sys.platform.startswith("linux"):  # no rank of that launch is left
        left = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            with contextlib.suppress(OSError):
                if any(name in cmdline.read_bytes() for name in folders):
                    left.append(cmdline.parent.name)
        assert folders and not left, left


@pytest.mark.parametrize("lang", LANGS)
def test_a_launch_that_fails_is_said_with_its_error(lang, monkeypatch):
    import sys

    def failing(module, args, nproc=2):
        return [sys.executable, "-c", "import sys; print('RuntimeError: the ranks could not start'); sys.exit(1)"]

    monkeypatch.setattr(checkers, "torchrun_command", failing)
    fb = check_average_gradients(not_launched_before, lang=lang)
    assert_hint(fb, lang, "launch_failed", HINTS)
    assert "the ranks could not start" in fb.message
