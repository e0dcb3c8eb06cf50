"""Notebook 14's engine: the shard rule, the byte formula, and two gloo ranks launched by torchrun.

One launch runs the ddp, adamw, fsdp and resume checks (tiny model, about ten CPU seconds); another ends one rank
on purpose. Every launch has a timeout (``launch``), so a hang fails the test instead of stalling CI.
"""

import socket
import time

import pytest
import torch
from torch.utils.data.distributed import DistributedSampler

from minitransformer.course.data_parallel import (
    SETTINGS,
    accumulated,
    global_rows,
    one_process,
    rank_rows,
    read_ranks,
    steps_per_epoch,
)
from minitransformer.distributed import (
    batches_of,
    check_world,
    launch,
    padded_order,
    port_in_use,
    ring_allreduce_bytes,
    shard_indices,
    torchrun_command,
)
from minitransformer.i18n import CourseError

MODULE = "minitransformer.course.data_parallel"
LAUNCH_TIMEOUT = 240.0


@pytest.mark.parametrize("n, world", [(52, 2), (53, 2), (10, 3), (7, 7), (5, 4)])
def test_shards_are_distributed_samplers_and_cover_every_example(n, world):
    for epoch in (0, 1):
        shards = [shard_indices(n, world, rank, epoch, seed=3) for rank in range(world)]
        for rank, shard in enumerate(shards):
            sampler = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=True, seed=3)
            sampler.set_epoch(epoch)
            assert shard == list(sampler)
        assert len({len(shard) for shard in shards}) == 1  # as many examples, so as many steps, on every rank
        seen = [i for shard in shards for i in shard]
        assert set(seen) == set(range(n))
        assert len(seen) - n == -n % world  # only the padding repeats
    assert padded_order(n, world, 0, 3) != padded_order(n, world, 1, 3)  # set_epoch: another order


def test_the_tail_and_too_little_data():
    assert batches_of(list(range(10)), 4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert steps_per_epoch(52, 2, 4) == 7  # 26 examples per rank: six batches of 4, then 2
    with pytest.raises(CourseError) as caught:
        padded_order(3, 4)
    assert "--nproc_per_node=3" in caught.value.es and "--nproc_per_node=3" in caught.value.en
    with pytest.raises(CourseError):
        shard_indices(10, 2, 2)
    with pytest.raises(CourseError):
        batches_of([1], 0)


def test_the_global_batch_is_the_ranks_batches_together():
    for step in range(2 * steps_per_epoch(SETTINGS.examples, 2, SETTINGS.batch)):
        together = sorted(rank_rows(step, 2, 0) + rank_rows(step, 2, 1))
        assert together == sorted(global_rows(step, 2))
        assert len(rank_rows(step, 2, 0)) == len(rank_rows(step, 2, 1))


def test_ring_bytes_and_the_world_refused():
    assert ring_allreduce_bytes(1000, 1) == 0
    assert ring_allreduce_bytes(1000, 2) == 1000
    assert ring_allreduce_bytes(1000, 8) == 1750
    with pytest.raises(CourseError):
        ring_allreduce_bytes(1000, 0)
    with pytest.raises(CourseError) as caught:
        check_world(3, "cpu", cores=2)
    assert "núcleos" in caught.value.es and "cores" in caught.value.en
    check_world(2, "cpu", cores=2)


def test_a_busy_port_is_refused_before_anything_starts():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert port_in_use(port)
        began = time.perf_counter()
        with pytest.raises(CourseError) as caught:
            launch(MODULE, ["--out", "unused"], nproc=2, port=port, timeout=30)
        assert time.perf_counter() - began < 1.0
    assert "en uso" in caught.value.es and "in use" in caught.value.en
    assert "--standalone" in torchrun_command(MODULE, [])


@pytest.mark.slow
def test_torchrun_on_a_busy_port_ends_with_an_error():
    """torchrun itself, given a port in use, fails before any rank starts; launch names the cause."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        import minitransformer.distributed as distributed

        original = distributed.port_in_use
        distributed.port_in_use = lambda port, host="127.0.0.1": False  # let torchrun meet the busy port itself
        try:
            with pytest.raises(CourseError) as caught:
                launch(MODULE, ["--out", "unused", "--checks", "ddp"], nproc=2, port=port, timeout=60)
        finally:
            distributed.port_in_use = original
    assert "el puerto ya estaba en uso" in caught.value.es and "already in use" in caught.value.en


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("ranks")
    args = ["--out", str(out), "--device", "cpu", "--checks", "ddp", "adamw", "fsdp", "resume", "--timeout", "60"]
    launch(MODULE, args, nproc=2, timeout=LAUNCH_TIMEOUT)
    return out, read_ranks(out)


def test_two_ranks_are_one_process_with_the_whole_batch(ranks):
    out, records = ranks
    assert [r["rank"] for r in records] == [0, 1] and {r["backend"] for r in records} == {"gloo"}
    sgd, _ = one_process("sgd")
    accumulation, _ = accumulated("sgd")
    ddp = torch.load(out / "ddp_params.pt")[-1]
    no_sync = torch.load(out / "no_sync_params.pt")[-1]
    assert not torch.equal(sgd[-1], one_process("sgd", steps=1)[0][0])  # the parameters did move
    for other in (ddp, no_sync, accumulation[-1]):
        assert (other - sgd[-1]).abs().max().item() < 1e-6
    # the first step's all-reduced gradient is the whole batch's
    from minitransformer.course.data_parallel import loss_of, tiny_model
    from minitransformer.distributed import periodic_tokens

    model = tiny_model(0)
    loss_of(model, periodic_tokens(SETTINGS.examples)[global_rows(0, 2)]).backward()
    whole = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    assert (torch.load(out / "ddp_grad_step1.pt") - whole).abs().max().item() < 1e-7


def test_ddp_sends_buckets_once_per_step_even_when_accumulating(ranks):
    _, records = ranks
    for record in records:
        ddp, no_sync = record["ddp"]["ddp"]["buckets"], record["ddp"]["no_sync"]["buckets"]
        assert len(ddp) == len(no_sync) == SETTINGS.steps
        assert len(ddp[-1]) > 1  # several buckets
        assert ddp[1:] == no_sync[1:]  # no all-reduce for the micro-batch under no_sync
        assert all(sum(step) == record["ddp"]["gradient_numbers"] for step in ddp)


def test_fsdp_holds_half_and_computes_what_ddp_computes(ranks):
    out, records = ranks
    fsdp = [r["fsdp"] for r in records]
    assert all(f["available"] for f in fsdp)
    assert sum(f["held"] for f in fsdp) == fsdp[0]["parameters"]
    assert all(abs(f["held"] - fsdp[0]["parameters"] / 2) <= 64 for f in fsdp)
    assert torch.equal(torch.load(out / "fsdp_params.pt"), torch.load(out / "adamw_params.pt"))


def test_adamw_drifts_more_than_sgd(ranks):
    out, _ = ranks
    alone, _ = one_process("adamw")
    drift = (torch.load(out / "adamw_params.pt")[-1] - alone[-1]).abs().max().item()
    assert drift > 1e-5


def test_resumed_equals_uninterrupted(ranks):
    _, records = ranks
    for record in records:
        assert record["resume"]["equal"] and record["resume"]["largest_difference"] == 0.0
        assert ".metadata" in record["resume"]["files"]


def test_a_rank_that_dies_ends_every_rank_with_a_clear_error(tmp_path):
    args = ["--out", str(tmp_path), "--device", "cpu", "--checks", "ddp", "--die-at", "1:2", "--timeout", "60"]
    began = time.perf_counter()
    with pytest.raises(CourseError) as caught:
        launch(MODULE, args, nproc=2, timeout=LAUNCH_TIMEOUT)
    assert time.perf_counter() - began < LAUNCH_TIMEOUT
    message = str(caught.value)
    assert "rank 1: ending on purpose at step 2" in message
    # the other rank: its collective failed, or torchrun stopped it first
    assert "rank 0: a collective operation failed" in message or "rank 0: torchrun stops me" in message
    assert "un proceso terminó con error" in caught.value.es
    assert not list(tmp_path.glob("rank*.json"))


def test_the_drift_figure_and_its_refusal():
    from minitransformer.viz.distributed import plot_drift

    fig = plot_drift(
        {"AdamW": [1e-6, 1e-5], "SGD": [1e-8, 0.0]}, {"1": [4.0, 3.9], "2": [4.0, 3.8]}, ([3.9, 3.7], [4.1, 4.0]), "es"
    )
    assert len(fig.axes) == 2 and fig.axes[1].get_ylabel() == "pérdida (nats por token)"
    with pytest.raises(CourseError):
        plot_drift({"AdamW": [1e-6]}, {"1": [4.0, 3.9]}, ([3.9, 3.7], [4.1, 4.0]), "en")
