"""Notebook 14's runs over several processes: what each rank measures, launched by ``torchrun``.

    torchrun --standalone --nproc_per_node=2 -m minitransformer.course.data_parallel --out runs/

(or ``python -m torch.distributed.run`` for ``torchrun``). Every rank joins the process group
(:func:`~minitransformer.distributed.start`: gloo on the CPU, NCCL on GPUs, a timeout on every collective), runs the
checks ``--checks`` names, and writes what it measured to ``OUT/rank<r>.json`` (rank 0 also writes the parameters
the notebook compares, ``OUT/*.pt``):

- ``ddp``: :class:`~torch.nn.parallel.DistributedDataParallel` with SGD, each rank on its shard of every global
  batch, and the same with two micro-batches per step under ``no_sync``; the gradients DDP all-reduced at the first
  step, and the buckets it sent at every step;
- ``adamw``: the same run with AdamW, the parameters after every step;
- ``fsdp``: FSDP2's ``fully_shard``, the same AdamW run, and how many parameters each rank holds;
- ``resume``: a run with dropout stopped after ``--stop-at`` steps, saved with ``torch.distributed.checkpoint`` (and
  each rank's random state), loaded into a fresh model and optimiser, and continued; and the same run uninterrupted;
- ``cost``: notebook 12's model, time per step split into computing and all-reducing;
- ``prose``: notebook 12's recipe trained by the ranks, and its held-out bits per byte (``tools/distributed_runs.py``).

The one-process runs the notebook compares with are :func:`one_process` and :func:`accumulated` (on the page).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from ..distributed import (
    TIMEOUT,
    TINY_CONFIG,
    flat_parameters,
    fsdp_available,
    gradient_bytes,
    launch,
    local_parameter_count,
    padded_order,
    periodic_tokens,
    ring_allreduce_bytes,
    shard_indices,
    shard_model,
    start,
    stop,
)
from ..i18n import CourseError, error, say, set_language
from ..modern import ModernTransformer
from ..runtime import machine
from ..train import lm_loss
from .language_model import PROSE_RECIPE

__all__ = [
    "CHECKS",
    "Settings",
    "SETTINGS",
    "tiny_model",
    "steps_per_epoch",
    "rank_rows",
    "global_rows",
    "loss_of",
    "make_optimizer",
    "one_process",
    "accumulated",
    "read_ranks",
    "main",
]

CHECKS = ("ddp", "adamw", "fsdp", "resume", "cost", "prose")


@dataclass(frozen=True)
class Settings:
    """The checks' data, model and optimisers. ``examples`` rows do not fill a whole number of global batches of
    ``world × batch`` rows, so the last step of every epoch is shorter (the uneven tail)."""

    examples: int = 52
    batch: int = 4  # rows per rank and step
    steps: int = 30  # optimiser steps of the ddp, adamw and fsdp checks (more than four epochs)
    sgd_lr: float = 0.2
    adamw_lr: float = 3e-2
    betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = 0.01
    resume_steps: int = 12
    stop_at: int = 5
    resume_dropout: float = 0.1
    bucket_mb: float = 0.025  # DDP's bucket_cap_mb: small, so that the tiny model's gradients fill several
    cost_batch: int = 8  # rows of notebook 12's context per rank in the timing
    cost_repeats: int = 5


SETTINGS = Settings()


def tiny_model(seed: int, dropout: float = 0.0) -> ModernTransformer:
    """The checks' model (:data:`~minitransformer.distributed.TINY_CONFIG`), initialised from ``seed``."""
    torch.manual_seed(seed)
    return ModernTransformer(dataclasses.replace(TINY_CONFIG, dropout=dropout))


def steps_per_epoch(n: int, world: int, batch: int) -> int:
    """Optimiser steps in one epoch of ``n`` examples: each rank's shard (⌈n/world⌉) in batches of ``batch``."""
    per_rank = -(-n // world)
    return -(-per_rank // batch)


def rank_rows(step: int, world: int, rank: int, settings: Settings = SETTINGS, seed: int = 0) -> list[int]:
    """The examples rank ``rank`` takes at optimiser step ``step`` (from 0): its shard of the step's epoch
    (``set_epoch``), the step's batch of it."""
    per_epoch = steps_per_epoch(settings.examples, world, settings.batch)
    epoch, k = divmod(step, per_epoch)
    shard = shard_indices(settings.examples, world, rank, epoch, seed)
    return shard[k * settings.batch : (k + 1) * settings.batch]


def global_rows(step: int, world: int, settings: Settings = SETTINGS, seed: int = 0) -> list[int]:
    """The examples of step ``step`` across every rank: one process with ``world × batch`` rows takes these."""
    per_epoch = steps_per_epoch(settings.examples, world, settings.batch)
    epoch, k = divmod(step, per_epoch)
    span = world * settings.batch
    return padded_order(settings.examples, world, epoch, seed)[k * span : (k + 1) * span]


def loss_of(model: nn.Module, tokens: Tensor) -> Tensor:
    """The next-token loss of ``tokens`` (B, T): the mean over the rows' predictions."""
    return lm_loss(model(tokens), tokens, None)


def make_optimizer(kind: str, parameters, settings: Settings = SETTINGS) -> torch.optim.Optimizer:
    """Plain SGD or AdamW (notebook 12's betas and weight decay), one call for every tensor (``foreach``)."""
    if kind == "sgd":
        return torch.optim.SGD(parameters, lr=settings.sgd_lr, foreach=True)
    if kind == "adamw":
        return torch.optim.AdamW(
            parameters, lr=settings.adamw_lr, betas=settings.betas, weight_decay=settings.weight_decay, foreach=True
        )
    raise error(f"optimizador «{kind}» desconocido: «sgd» o «adamw»", f"unknown optimiser '{kind}': 'sgd' or 'adamw'")


def one_process(
    kind: str, world: int = 2, steps: int | None = None, settings: Settings = SETTINGS, seed: int = 0
) -> tuple[list[Tensor], list[float]]:
    """One process training on the whole global batch of every step (``world × batch`` rows): the parameters
    after every step (flat) and the losses."""
    data = periodic_tokens(settings.examples, seed=seed)
    model = tiny_model(seed)
    optimizer = make_optimizer(kind, model.parameters(), settings)
    flats, losses = [], []
    for step in range(settings.steps if steps is None else steps):
        loss = loss_of(model, data[global_rows(step, world, settings, seed)])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        flats.append(flat_parameters(model))
        losses.append(loss.item())
    return flats, losses


def accumulated(
    kind: str, world: int = 2, steps: int | None = None, settings: Settings = SETTINGS, seed: int = 0
) -> tuple[list[Tensor], list[float]]:
    """One process accumulating ``world`` micro-batches per step, each rank's rows in turn, each loss divided by
    ``world``: the parameters after every step (flat) and the losses (the micro-batches' mean)."""
    data = periodic_tokens(settings.examples, seed=seed)
    model = tiny_model(seed)
    optimizer = make_optimizer(kind, model.parameters(), settings)
    flats, losses = [], []
    for step in range(settings.steps if steps is None else steps):
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for rank in range(world):
            loss = loss_of(model, data[rank_rows(step, world, rank, settings, seed)]) / world
            loss.backward()
            total += loss.item()
        optimizer.step()
        flats.append(flat_parameters(model))
        losses.append(total)
    return flats, losses


def read_ranks(out: str | os.PathLike) -> list[dict]:
    """What every rank wrote to ``out`` (``rank<r>.json``), by rank."""
    files = sorted(Path(out).glob("rank*.json"), key=lambda path: int(path.stem[4:]))
    if not files:
        raise error(
            f"{out} no tiene ningún rank*.json: ¿terminó la ejecución de torchrun?",
            f"{out} has no rank*.json: did the torchrun run finish?",
        )
    return [json.loads(path.read_text()) for path in files]


# --- the checks, run by every rank ----------------------------------------------------------


class _Run:
    """What every check needs: the rank, the world, the device, the settings and where to write."""

    def __init__(self, rank: int, world: int, device: torch.device, out: Path, seed: int, die_at: tuple | None):
        self.rank, self.world, self.device, self.out, self.seed = rank, world, device, out, seed
        self.settings = SETTINGS
        self.data = periodic_tokens(SETTINGS.examples, seed=seed).to(device)
        self.die_at = die_at

    def maybe_die(self, step: int) -> None:
        if self.die_at is not None and self.die_at == (self.rank, step):
            print(
                say(
                    f"proceso {self.rank}: termino a propósito en el paso {step} (--die-at)",
                    f"rank {self.rank}: ending on purpose at step {step} (--die-at)",
                ),
                flush=True,
            )
            os._exit(3)

    def rows(self, step: int) -> Tensor:
        return self.data[rank_rows(step, self.world, self.rank, self.settings, self.seed)]

    def save(self, name: str, value) -> None:
        if self.rank == 0:
            torch.save(value, self.out / name)


def _ddp(model: nn.Module, run: _Run, **kwargs) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel

    model.to(run.device)
    ids = [run.device.index] if run.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids, **kwargs)


def check_ddp(run: _Run) -> dict:
    """SGD under DDP; and DDP with two micro-batches per step, the first under ``no_sync``."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    s = run.settings
    found: dict = {}
    for micro in (1, 2):
        sent: list[list[int]] = []

        def counting(state, bucket, sent=sent):
            sent[-1].append(bucket.buffer().numel())
            return allreduce_hook(None, bucket)

        ddp = _ddp(tiny_model(run.seed), run, bucket_cap_mb=s.bucket_mb)
        ddp.register_comm_hook(None, counting)
        optimizer = make_optimizer("sgd", ddp.parameters(), s)
        flats = []
        for step in range(s.steps):
            run.maybe_die(step)
            sent.append([])
            optimizer.zero_grad(set_to_none=True)
            rows = run.rows(step)
            parts = rows.chunk(micro)
            for i, part in enumerate(parts):
                if i < len(parts) - 1:
                    with ddp.no_sync():  # no all-reduce: the gradient accumulates locally
                        (loss_of(ddp, part) / len(parts)).backward()
                else:
                    (loss_of(ddp, part) / len(parts)).backward()
            if step == 0 and micro == 1:
                run.save("ddp_grad_step1.pt", torch.cat([p.grad.reshape(-1).cpu() for p in ddp.parameters()]))
            optimizer.step()
            flats.append(flat_parameters(ddp.module))
        key = "ddp" if micro == 1 else "no_sync"
        run.save(f"{key}_params.pt", torch.stack(flats))
        found[key] = {"buckets": sent, "rows_first_step": rank_rows(0, run.world, run.rank, s, run.seed)}
    found["gradient_numbers"] = sum(p.numel() for p in ddp.module.parameters())
    return found


def _adamw_run(run: _Run, model: nn.Module, key: str) -> dict:
    s = run.settings
    optimizer = make_optimizer("adamw", model.parameters(), s)
    flats, losses = [], []
    for step in range(s.steps):
        run.maybe_die(step)
        loss = loss_of(model, run.rows(step))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        flats.append(flat_parameters(model))  # a collective under FSDP2: every rank calls it
        losses.append(loss.item())
    run.save(f"{key}_params.pt", torch.stack(flats))
    return {"losses": losses}


def check_adamw(run: _Run) -> dict:
    """AdamW under DDP: the parameters after every step, and this rank's losses."""
    return _adamw_run(run, _ddp(tiny_model(run.seed), run), "adamw")


def check_fsdp(run: _Run) -> dict:
    """The same AdamW run with FSDP2: each block and the root sharded over the ranks."""
    if not fsdp_available():
        return {"available": False, "torch": torch.__version__}
    model = tiny_model(run.seed).to(run.device)
    total = sum(p.numel() for p in model.parameters())
    shard_model(model)
    held = local_parameter_count(model)
    found = _adamw_run(run, model, "fsdp")
    return {"available": True, "parameters": total, "held": held, **found}


def _resume_model(run: _Run, init_seed: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    model = _ddp(tiny_model(init_seed, dropout=run.settings.resume_dropout), run)
    return model, make_optimizer("adamw", model.parameters(), run.settings)


def _resume_steps(run: _Run, model: nn.Module, optimizer: torch.optim.Optimizer, first: int, last: int) -> None:
    for step in range(first, last):
        run.maybe_die(step)
        loss = loss_of(model, run.rows(step))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


def check_resume(run: _Run) -> dict:
    """A run with dropout (each rank its own random masks) stopped after ``stop_at`` steps, saved, loaded into a
    fresh model and optimiser, continued; against the same run uninterrupted."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    s = run.settings
    # uninterrupted
    model, optimizer = _resume_model(run, run.seed)
    torch.manual_seed(1000 + run.seed + run.rank)  # each rank's dropout masks
    _resume_steps(run, model, optimizer, 0, s.resume_steps)
    whole = flat_parameters(model.module)
    # stopped after stop_at steps, saved: the model's and optimiser's state (DCP: each rank writes its part), and
    # each rank's random state and step
    model, optimizer = _resume_model(run, run.seed)
    torch.manual_seed(1000 + run.seed + run.rank)
    _resume_steps(run, model, optimizer, 0, s.stop_at)
    folder = run.out / "checkpoint"
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=folder)
    torch.save({"step": s.stop_at, "rng": torch.get_rng_state()}, folder / f"rank{run.rank}.pt")
    dist.barrier()
    del model, optimizer
    # a fresh model (other initial weights) and optimiser read it back, and go on
    model, optimizer = _resume_model(run, run.seed + 1)
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state}
    dcp.load(state, checkpoint_id=folder)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    mine = torch.load(folder / f"rank{run.rank}.pt", weights_only=True)
    torch.set_rng_state(mine["rng"])
    _resume_steps(run, model, optimizer, mine["step"], s.resume_steps)
    resumed = flat_parameters(model.module)
    files = sorted(path.name for path in folder.iterdir())
    return {
        "equal": bool(torch.equal(whole, resumed)),
        "largest_difference": (whole - resumed).abs().max().item(),
        "stop_at": s.stop_at,
        "steps": s.resume_steps,
        "files": files,
    }


def check_cost(run: _Run) -> dict:
    """Notebook 12's model: seconds per step computing (forward and backward under ``no_sync``), all-reducing a
    gradient-sized buffer alone, and a whole DDP step (the all-reduce overlapping the backward pass); medians."""
    import torch.distributed as dist

    s = run.settings
    torch.manual_seed(run.seed)
    model = ModernTransformer(PROSE_RECIPE.config())
    ddp = _ddp(model, run)
    tokens = torch.randint(0, PROSE_RECIPE.vocab_size, (s.cost_batch, PROSE_RECIPE.context)).to(run.device)
    buffer = torch.zeros(sum(p.numel() for p in model.parameters()), device=run.device)

    def timed(work) -> float:
        work()  # warm-up
        seconds = []
        for _ in range(s.cost_repeats):
            dist.barrier()
            if run.device.type == "cuda":
                torch.cuda.synchronize()
            began = time.perf_counter()
            work()
            if run.device.type == "cuda":
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - began)
        return sorted(seconds)[len(seconds) // 2]

    def compute() -> None:
        with ddp.no_sync():
            loss_of(ddp, tokens).backward()

    def step() -> None:
        loss_of(ddp, tokens).backward()

    grad = gradient_bytes(model)
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "batch": s.cost_batch,
        "context": PROSE_RECIPE.context,
        "compute_s": timed(compute),
        "allreduce_s": timed(lambda: dist.all_reduce(buffer)),
        "step_s": timed(step),
        "gradient_bytes": grad,
        "ring_bytes": ring_allreduce_bytes(grad, run.world),
    }


def check_prose(run: _Run) -> dict:
    """Notebook 12's recipe (:func:`~minitransformer.course.language_model.train_prose_model`'s model, data,
    batches and optimiser) trained by the ranks: every rank draws the step's 16 windows from the seed's generator
    and takes every world-th; rank 0 measures the held-out text at the end."""
    from ..train import train_gpt
    from .language_model import LANGS, held_out_bits_per_byte, prose_data

    recipe = PROSE_RECIPE
    if recipe.batch_size % run.world:
        raise error(
            f"el lote de la receta ({recipe.batch_size}) no se reparte entre {run.world} procesos",
            f"the recipe's batch ({recipe.batch_size}) does not split over {run.world} processes",
        )
    data = prose_data(recipe)
    torch.manual_seed(run.seed)
    model = ModernTransformer(recipe.config())
    ddp = _ddp(model, run)
    ddp.config = model.config  # train_gpt reads the model's pad_id
    generator = torch.Generator().manual_seed(run.seed)
    T, ids = recipe.context, data.train_ids

    def next_batch() -> Tensor:
        starts = torch.randint(0, len(ids) - T + 1, (recipe.batch_size,), generator=generator)
        return torch.stack([ids[s : s + T] for s in starts.tolist()])[run.rank :: run.world]

    began, cpu = time.perf_counter(), time.process_time()
    losses = train_gpt(
        ddp,
        next_batch,
        recipe.steps,
        lr=recipe.lr,
        warmup=recipe.warmup,
        weight_decay=recipe.weight_decay,
        clip_norm=recipe.clip_norm,
        device=run.device,
        progress=False,
    )
    found = {
        "seed": run.seed,
        "seconds": time.perf_counter() - began,
        "cpu_seconds": time.process_time() - cpu,
        "last_loss": losses[-1],
    }
    if run.rank == 0:
        model.cpu()
        found["held_bpb"] = {lang: held_out_bits_per_byte(model, data, lang) for lang in LANGS}
    return found


_CHECKS = {
    "ddp": check_ddp,
    "adamw": check_adamw,
    "fsdp": check_fsdp,
    "resume": check_resume,
    "cost": check_cost,
    "prose": check_prose,
}


def _stopped(rank: int, timeout: float, exc: BaseException) -> str:
    kind = type(exc).__name__
    return say(
        f"proceso {rank}: una operación colectiva falló ({kind}): otro proceso terminó o no respondió en "
        f"{timeout:g} s. Este proceso para también; mira arriba qué proceso falló primero.",
        f"rank {rank}: a collective operation failed ({kind}): another rank ended or did not answer within "
        f"{timeout:g} s. This rank stops too; look above for the rank that failed first.",
    )


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="torchrun --standalone --nproc_per_node=2 -m minitransformer.course.data_parallel",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for rank<r>.json and the parameters")
    parser.add_argument("--checks", nargs="+", default=["ddp", "adamw", "fsdp", "resume"], choices=CHECKS)
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda if there is one")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds any collective may wait")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lang", choices=("es", "en"), default="en", help="language of the ranks' messages")
    parser.add_argument("--die-at", default=None, metavar="RANK:STEP", help="(tests) end one rank at a step")
    parser.add_argument("--nproc", type=int, default=None, help="run without torchrun: launch it with N ranks")
    parser.add_argument("--port", type=int, default=None, help="with --nproc: this port, not a free one")
    parser.add_argument("--launch-timeout", type=float, default=300.0, help="with --nproc: seconds for the launch")
    return parser.parse_args(argv)


def _launch(args: argparse.Namespace, argv: list[str]) -> int:
    """Without torchrun: launch this module with torchrun on ``--nproc`` ranks, and print what they said."""
    rest, skip = [], False
    for item in argv:
        if skip:
            skip = False
            continue
        name = item.split("=", 1)[0]
        if name in ("--nproc", "--port", "--launch-timeout"):
            skip = "=" not in item
            continue
        rest.append(item)
    try:
        done = launch(__spec__.name, rest, args.nproc, args.port, args.launch_timeout)
    except CourseError as exc:
        print(exc, file=sys.stderr, flush=True)
        return 1
    print("\n".join(line for line in done.stdout.splitlines() if line.startswith(("proceso ", "rank "))), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _arguments(argv)
    set_language(args.lang)
    if "RANK" not in os.environ and args.nproc is not None:
        return _launch(args, argv)
    die_at = tuple(int(part) for part in args.die_at.split(":")) if args.die_at else None
    try:
        rank, world, device = start(args.device, args.timeout)
    except CourseError as exc:
        print(exc, file=sys.stderr, flush=True)
        return 2

    def terminated(signum, frame):  # torchrun ends the other ranks when one fails
        print(
            say(
                f"proceso {rank}: torchrun me detiene porque otro proceso terminó con error",
                f"rank {rank}: torchrun stops me because another rank ended with an error",
            ),
            file=sys.stderr,
            flush=True,
        )
        os._exit(1)

    signal.signal(signal.SIGTERM, terminated)
    args.out.mkdir(parents=True, exist_ok=True)
    record: dict = {"rank": rank, "world": world, "device": str(device), "backend": None, "machine": machine()}
    try:
        import torch.distributed as dist

        record["backend"] = dist.get_backend()
        run = _Run(rank, world, device, args.out, args.seed, die_at)
        for name in args.checks:
            began = time.process_time()
            record[name] = _CHECKS[name](run)
            record[name]["cpu_seconds"] = time.process_time() - began
        dist.barrier()  # every rank has finished before any writes: a failed rank leaves no record behind
    except CourseError as exc:
        print(exc, file=sys.stderr, flush=True)
        os._exit(2)
    except Exception as exc:  # a collective that failed or timed out: end now, without waiting on the group
        print(_stopped(rank, args.timeout, exc), file=sys.stderr, flush=True)
        print(f"  {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr, flush=True)
        os._exit(1)
    (args.out / f"rank{rank}.json").write_text(json.dumps(record, indent=1))
    print(
        say(
            f"proceso {rank} de {world} ({record['backend']}, {device}): escrito rank{rank}.json",
            f"rank {rank} of {world} ({record['backend']}, {device}): wrote rank{rank}.json",
        ),
        flush=True,
    )
    stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
