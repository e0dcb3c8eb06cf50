"""Data parallelism with PyTorch's own engine: one process per rank, launched by ``torchrun``.

Every rank holds the whole model (``DistributedDataParallel``) or a shard of it (FSDP2's ``fully_shard``), takes
its own share of every global batch (:func:`shard_indices`, the rule of ``DistributedSampler``), computes the
gradient of its share, and the ranks average their gradients with an all-reduce before every optimiser step. With
equal shares, the average of the ranks' mean gradients is the mean gradient of the whole batch: N ranks of b
examples are one process with N·b examples, and one process accumulating N micro-batches of b.

The process group (:func:`start`) is gloo on the CPU and NCCL on CUDA GPUs, on the loopback address ``torchrun
--standalone`` gives, with a timeout that bounds every collective: a rank that dies ends the others with an error,
never a hang. What a run costs in communication is the ring all-reduce's bytes (:func:`ring_allreduce_bytes`).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
import socket
import subprocess
import sys

import torch
from torch import Tensor, nn

from .i18n import error
from .modern import ModernConfig, ModernTransformer

__all__ = [
    "TIMEOUT",
    "padded_order",
    "shard_indices",
    "batches_of",
    "ring_allreduce_bytes",
    "gradient_bytes",
    "backend_for",
    "check_world",
    "start",
    "stop",
    "port_in_use",
    "torchrun_command",
    "launch",
    "fsdp_available",
    "shard_model",
    "local_parameter_count",
    "flat_parameters",
    "TINY_CONFIG",
    "periodic_tokens",
]

TIMEOUT = 30.0  # seconds a collective may wait for the other ranks before every rank stops with an error


# --- the data: each rank's shard -----------------------------------------------------------


def padded_order(n: int, world: int, epoch: int = 0, seed: int = 0, shuffle: bool = True) -> list[int]:
    """The order in which one epoch visits ``n`` examples, shared by every rank: a permutation drawn from
    ``seed + epoch`` (or ``0 … n-1`` without ``shuffle``), padded with its own first examples to a multiple of
    ``world``, so that every rank gets as many. PyTorch's ``DistributedSampler`` (``drop_last=False``) does the same.
    """
    if n < world:
        raise error(
            f"{n} ejemplos no alcanzan para {world} procesos: cada uno tendría solo copias de otros; usa como mucho "
            f"{n} procesos (--nproc_per_node={n}) o más datos",
            f"{n} examples are not enough for {world} processes: some would hold only copies of others; use at most "
            f"{n} processes (--nproc_per_node={n}) or more data",
        )
    if world < 1 or epoch < 0:
        raise error(
            f"world debe ser ≥ 1 y epoch ≥ 0, no {world} y {epoch}",
            f"world must be ≥ 1 and epoch ≥ 0, not {world} and {epoch}",
        )
    if shuffle:
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
    else:
        order = list(range(n))
    return order + order[: -n % world]


def shard_indices(n: int, world: int, rank: int, epoch: int = 0, seed: int = 0, shuffle: bool = True) -> list[int]:
    """The examples rank ``rank`` of ``world`` takes in ``epoch``: every ``world``-th of :func:`padded_order`,
    starting at its rank. The shards cover every example, each once, but for the ≤ world − 1 examples repeated to
    pad the tail; they change with the epoch (``set_epoch``). Fewer examples than ranks: refused."""
    if not 0 <= rank < world:
        raise error(f"rank {rank} no está en [0, {world})", f"rank {rank} is not in [0, {world})")
    return padded_order(n, world, epoch, seed, shuffle)[rank::world]


def batches_of(indices: list[int], batch_size: int) -> list[list[int]]:
    """``indices`` in consecutive batches of ``batch_size``, the last one shorter when they do not divide. Every
    rank has as many indices (:func:`shard_indices`), so every rank takes as many steps, with equal batches."""
    if batch_size < 1:
        raise error(f"batch_size debe ser ≥ 1, no {batch_size}", f"batch_size must be ≥ 1, not {batch_size}")
    return [indices[i : i + batch_size] for i in range(0, len(indices), batch_size)]


# --- what a step sends ----------------------------------------------------------------------


def ring_allreduce_bytes(grad_bytes: int, world: int) -> float:
    """Bytes each rank sends (and receives) to all-reduce ``grad_bytes`` of gradients around a ring of ``world``
    ranks: 2(N − 1)/N × the bytes (a reduce-scatter, then an all-gather, each of N − 1 chunks of 1/N)."""
    if world < 1 or grad_bytes < 0:
        raise error(
            f"world debe ser ≥ 1 y los bytes ≥ 0, no {world} y {grad_bytes}",
            f"world must be ≥ 1 and bytes ≥ 0, not {world} and {grad_bytes}",
        )
    return 2 * (world - 1) / world * grad_bytes


def gradient_bytes(model: nn.Module) -> int:
    """The bytes of the gradients of ``model``'s trainable parameters (one gradient per parameter, its dtype)."""
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


# --- the process group ----------------------------------------------------------------------


def backend_for(device: torch.device | str) -> str:
    """The collective backend of a device: NCCL on CUDA GPUs, gloo on the CPU."""
    kind = torch.device(device).type
    if kind == "cuda":
        return "nccl"
    if kind == "cpu":
        return "gloo"
    raise error(
        f"el curso reparte entre procesos en «cpu» (gloo) o «cuda» (NCCL), no en «{kind}»",
        f"the course spreads over processes on 'cpu' (gloo) or 'cuda' (NCCL), not on '{kind}'",
    )


def check_world(world: int, device: torch.device | str, cores: int | None = None) -> None:
    """Refuse more ranks than the machine runs at once: on the CPU, one thread per rank and no more ranks than
    cores (they would take turns on a core, and measure nothing but the turns); on GPUs, one rank per GPU."""
    kind = torch.device(device).type
    if kind == "cuda":
        gpus = torch.cuda.device_count()
        if world > gpus:
            raise error(
                f"{world} procesos y {gpus} GPU: uno por GPU (--nproc_per_node={gpus})",
                f"{world} processes and {gpus} GPUs: one per GPU (--nproc_per_node={gpus})",
            )
        return
    cores = (os.cpu_count() or 1) if cores is None else cores
    if world > cores:
        raise error(
            f"{world} procesos y {cores} núcleos: en la CPU, un proceso por núcleo como mucho "
            f"(--nproc_per_node={cores})",
            f"{world} processes and {cores} cores: on the CPU, at most one process per core (--nproc_per_node={cores})",
        )


def start(device: str | None = None, timeout: float = TIMEOUT) -> tuple[int, int, torch.device]:
    """Join the process group ``torchrun`` prepared (its variables ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
    ``MASTER_ADDR``, ``MASTER_PORT``): gloo on the CPU, NCCL on the rank's own GPU, ``timeout`` seconds for every
    collective. One thread per rank on the CPU. Returns (rank, world, device)."""
    import torch.distributed as dist

    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise error(
            "este módulo se lanza con torchrun: torchrun --standalone --nproc_per_node=2 -m …",
            "this module is launched by torchrun: torchrun --standalone --nproc_per_node=2 -m …",
        )
    if timeout <= 0:
        raise error(f"timeout debe ser > 0, no {timeout}", f"timeout must be > 0, not {timeout}")
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", 0))
    chosen = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    check_world(world, chosen)
    if chosen.type == "cuda":
        chosen = torch.device("cuda", local)
        torch.cuda.set_device(chosen)
    else:
        torch.set_num_threads(1)
    dist.init_process_group(
        backend_for(chosen),
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=timeout),
        device_id=chosen if chosen.type == "cuda" else None,
    )
    return rank, world, chosen


def stop() -> None:
    """Leave the process group, if this process joined one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


# --- launching: torchrun, from Python ---------------------------------------------------------


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether another program already listens on ``port`` of ``host`` (the loopback address by default)."""
    if not 0 < port < 65536:
        raise error(f"el puerto {port} no está en [1, 65535]", f"port {port} is not in [1, 65535]")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def torchrun_command(module: str, args: list[str], nproc: int = 2, port: int | None = None) -> list[str]:
    """The command that launches ``python -m module args`` on ``nproc`` ranks of this machine: ``torchrun
    --standalone`` (a free port of the loopback address, chosen by torchrun), or the loopback address and ``port``.
    It runs torchrun as ``python -m torch.distributed.run`` with this Python, so the ranks see this environment."""
    if nproc < 1:
        raise error(f"nproc debe ser ≥ 1, no {nproc}", f"nproc must be ≥ 1, not {nproc}")
    where = ["--standalone"] if port is None else ["--nnodes=1", "--master_addr=127.0.0.1", f"--master_port={port}"]
    return [sys.executable, "-m", "torch.distributed.run", *where, f"--nproc_per_node={nproc}", "-m", module, *args]


def end_launch(process: subprocess.Popen, grace: float = 5.0) -> str:
    """End a running torchrun ``process`` and every rank it started; returns what they had printed. torchrun starts
    each rank in a session of its own, so killing torchrun's process group alone leaves the ranks running, holding the
    output open until their own timeouts: torchrun is asked to stop first (SIGTERM, which its agent passes on to every
    rank), and whatever is left of its group is killed after ``grace`` seconds."""
    posix = os.name == "posix"
    with contextlib.suppress(ProcessLookupError):
        process.terminate()  # SIGTERM on POSIX
    try:
        return process.communicate(timeout=grace)[0] or ""
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL) if posix else process.kill()
    try:
        return process.communicate(timeout=grace)[0] or ""
    except subprocess.TimeoutExpired:  # a rank torchrun could not end still holds the output: stop reading it
        return ""


def launch(
    module: str, args: list[str], nproc: int = 2, port: int | None = None, timeout: float = 300.0
) -> subprocess.CompletedProcess:
    """Run :func:`torchrun_command` and wait at most ``timeout`` seconds; the ranks' output is returned.

    A port already in use is refused before anything starts; a launch that fails (a rank that died, a collective
    that timed out, torchrun that could not start) or that runs past ``timeout`` (every rank is ended) raises the
    course's error, with the ranks' last lines."""
    if timeout <= 0:
        raise error(f"timeout debe ser > 0, no {timeout}", f"timeout must be > 0, not {timeout}")
    if port is not None and port_in_use(port):
        raise error(
            f"el puerto {port} de 127.0.0.1 ya está en uso (¿otra ejecución sigue en marcha?): elige otro, o no "
            "des ninguno y torchrun --standalone tomará uno libre",
            f"port {port} of 127.0.0.1 is already in use (is another run still going?): choose another, or give "
            "none and torchrun --standalone takes a free one",
        )
    command = torchrun_command(module, args, nproc, port)
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=os.name == "posix"
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        end_launch(process)
        raise error(
            f"torchrun no terminó en {timeout:g} s: se han terminado todos sus procesos",
            f"torchrun did not finish within {timeout:g} s: all its processes were ended",
        ) from None
    if process.returncode != 0:
        lines = [line for line in output.splitlines() if line.strip()]
        busy = any("EADDRINUSE" in line for line in lines)
        mine = [line for line in lines if line.startswith(("proceso ", "rank "))] or lines[-5:]
        es_cause = "el puerto ya estaba en uso" if busy else "un proceso terminó con error"
        en_cause = "the port was already in use" if busy else "a rank ended with an error"
        tail = "\n".join(mine)
        raise error(
            f"torchrun falló (código {process.returncode}): {es_cause}.\n{tail}",
            f"torchrun failed (code {process.returncode}): {en_cause}.\n{tail}",
        )
    return subprocess.CompletedProcess(command, 0, output, None)


# --- FSDP2: a shard of every parameter per rank ---------------------------------------------


def fsdp_available() -> bool:
    """Whether this torch has FSDP2's ``torch.distributed.fsdp.fully_shard`` (public since torch 2.6)."""
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        return False
    return True


def shard_model(model: ModernTransformer) -> ModernTransformer:
    """Shard ``model`` over the ranks with FSDP2: each block a unit (its parameters gathered just before it runs,
    freed after), then the rest (embeddings, final norm, output layer) as the root. Each parameter is split along
    its first dimension; each rank keeps 1/N of it."""
    if not fsdp_available():
        raise error(
            f"este torch ({torch.__version__}) no tiene FSDP2 (torch.distributed.fsdp.fully_shard, desde torch 2.6)",
            f"this torch ({torch.__version__}) has no FSDP2 (torch.distributed.fsdp.fully_shard, since torch 2.6)",
        )
    from torch.distributed.fsdp import fully_shard

    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    return model


def local_parameter_count(model: nn.Module) -> int:
    """The numbers of ``model``'s parameters this rank holds: all of them, or its shards' under FSDP2."""
    return sum((p.to_local() if hasattr(p, "to_local") else p).numel() for p in model.parameters())


def flat_parameters(model: nn.Module) -> Tensor:
    """Every parameter of ``model`` in one flat float32 vector on the CPU, in ``parameters()`` order; the whole
    parameter under FSDP2 (gathered from every rank: a collective, every rank calls it)."""
    parts = []
    for p in model.parameters():
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        parts.append(full.detach().float().reshape(-1).cpu())
    return torch.cat(parts)


# --- a small model and data for the checks --------------------------------------------------

# Two blocks of notebook 10's modern decoder, small enough that every check runs in a fraction of a second.
TINY_CONFIG = ModernConfig(vocab_size=64, d_model=32, n_heads=4, d_ff=64, n_layers=2, max_len=16)


def periodic_tokens(n: int, length: int = 16, vocab: int = 64, period: int = 4, seed: int = 0) -> Tensor:
    """``n`` rows of ``length`` tokens, each a random segment of ``period`` tokens repeated: a model learns to
    copy, so the loss falls within a few dozen steps. Drawn from ``seed`` alone. (n, length)."""
    if min(n, length, vocab, period) < 1:
        raise error("n, length, vocab y period deben ser ≥ 1", "n, length, vocab and period must be ≥ 1")
    generator = torch.Generator().manual_seed(seed)
    segments = torch.randint(0, vocab, (n, period), generator=generator)
    return segments.repeat(1, -(-length // period))[:, :length]
