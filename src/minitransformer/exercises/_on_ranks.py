"""What each rank runs when the checker of ``14.average_gradients`` tries a student's function on real processes.

The checker (:mod:`.distributed`) cannot hand a function defined in a notebook to other processes by pickling
it (under ``spawn``, the default on macOS and Windows, a notebook's function cannot be found by name), so it
sends its compiled code (``marshal``: the same Python runs both ends), with what the code needs from the
notebook (modules by name, small constants by value, other functions as code), in a job file. It launches this
module with ``python -m torch.distributed.run --standalone --nproc_per_node=2 -m
minitransformer.exercises._on_ranks JOB``, on the loopback address, once for all the functions of the job. For
each function, each rank runs the cases of :data:`CASES`, each in a process group of its own (gloo, a timeout on
every collective) so that one function's mismatched collectives never reach the next: the same model on every
rank, a batch of the rank's own, ``DistributedDataParallel``'s gradients on a copy of the model as the reference,
then the student's function on the model with the rank's own gradients. Each rank writes what it saw (its
gradients before and after, DDP's, the state the function left, or the error it raised) to ``rank<N>.pkl`` in the
job's folder; the checker compares in the parent. Only the checker runs this module.
"""

from __future__ import annotations

import builtins
import datetime
import importlib
import marshal
import os
import pickle
import sys
import traceback
import types
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

# The cases, in order: (name, world size, whether DDP's gradients are the reference). "ddp": the same
# parameters on both ranks, the reference is DistributedDataParallel's gradients; "apart": each rank's
# parameters a little different (an answer that averages the parameters changes them), the reference is the
# mean of the ranks' gradients; "alone": each rank in a world of its own (world size 1), where averaging
# changes nothing (an answer that divides by 2 written by hand halves them).
CASES = (("ddp", 2, True), ("apart", 2, False), ("alone", 1, False))
_NAMES = [name for name, _, _ in CASES]


class Net(nn.Module):
    """A small model whose first parameter is frozen (its gradient stays ``None``) and with a layer the
    forward pass never uses (its gradient stays ``None`` too), as DDP meets them in real models."""

    def __init__(self, seed: int):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.scale = nn.Parameter(1 + torch.rand(6, generator=generator), requires_grad=False)
        self.body = nn.Linear(6, 8)
        self.unused = nn.Linear(8, 2)
        self.out = nn.Linear(8, 3)
        with torch.no_grad():
            for p in (*self.body.parameters(), *self.unused.parameters(), *self.out.parameters()):
                p.copy_(torch.randn(p.shape, generator=generator) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.body(x * self.scale)))


def batch(case: str, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The rank's own batch in a case: other examples on each rank, and on rank 1 targets ten times larger, so
    that the ranks' gradients differ in size (a sum, a mean and one rank's own are far apart)."""
    generator = torch.Generator().manual_seed(1000 * (_NAMES.index(case) + 1) + rank)
    x = torch.randn(5, 6, generator=generator)
    y = torch.randn(5, 3, generator=generator) * (10.0 if rank == 1 else 1.0)
    return x, y


def model_of(case: str, rank: int) -> Net:
    """The model of a case on a rank: the same on every rank but in ``"apart"``, where rank r's parameters are
    moved by 0.1·r."""
    model = Net(seed=7 + _NAMES.index(case))
    if case == "apart":
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.1 * rank)
    return model


def gradients(model: nn.Module) -> list[torch.Tensor | None]:
    return [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]


def local_gradients(model: nn.Module, case: str, rank: int) -> None:
    x, y = batch(case, rank)
    F.mse_loss(model(x), y).backward()


def state(model: nn.Module) -> dict[str, Any]:
    """What the student's function could leave changed besides the gradients."""
    return {
        "params": [p.detach().clone() for p in model.parameters()],
        "requires_grad": [p.requires_grad for p in model.parameters()],
        "training": model.training,
        "grad_enabled": torch.is_grad_enabled(),
        "default_dtype": str(torch.get_default_dtype()).removeprefix("torch."),
    }


# --------------------------------------------------------------------------- the student's function, rebuilt


def _value(kind: str, data: Any) -> Any:
    if kind == "module":
        return importlib.import_module(data)
    if kind == "import":
        module, qualname = data
        value: Any = importlib.import_module(module)
        for part in qualname.split("."):
            value = getattr(value, part)
        return value
    if kind == "value":
        return data
    if kind == "function":
        return rebuild(data)
    raise ValueError(kind)


def rebuild(payload: dict[str, Any]) -> types.FunctionType:
    """A function from what the checker sent: its code, its defaults, its closure's values and the globals its
    code names, in a namespace of its own (``__name__ == "__main__"`` as in a notebook)."""
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    code = marshal.loads(payload["code"])
    closure = tuple(types.CellType(_value(*cell)) for cell in payload["closure"]) or None
    fn = types.FunctionType(code, namespace, payload["name"], None, closure)
    namespace.update({name: _value(*value) for name, value in payload["globals"].items()})
    fn.__defaults__ = tuple(_value(*d) for d in payload["defaults"]) or None
    fn.__kwdefaults__ = {k: _value(*v) for k, v in payload["kwdefaults"].items()} or None
    return fn


def describe(exc: BaseException, files: set[str]) -> dict[str, Any]:
    """An error of the student's code as the parent reports it: its type, its text and the student's line."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename in files]
    last = frames[-1] if frames else None
    return {
        "type": type(exc).__name__,
        "text": str(exc),
        "file": last.filename if last else None,
        "line": last.lineno if last else None,
        "recursion": isinstance(exc, RecursionError),
    }


def _files(payload: dict[str, Any]) -> set[str]:
    files = set()

    def walk(code: types.CodeType) -> None:
        files.add(code.co_filename)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                walk(const)

    walk(marshal.loads(payload["code"]))
    for kind, data in payload["globals"].values():
        if kind == "function":
            files |= _files(data)
    return files


# --------------------------------------------------------------------------- one case, one function


class _Stopped(Exception):
    """The function failed on this rank: its other cases are not run."""


def run_case(fn: types.FunctionType, case: str, with_ddp: bool, rank: int, files: set[str]) -> dict[str, Any]:
    """One case on this rank, in the process group that is the default now."""
    from torch.nn.parallel import DistributedDataParallel

    record: dict[str, Any] = {"case": case, "ddp": None}
    if with_ddp:
        ddp = DistributedDataParallel(model_of(case, rank), find_unused_parameters=True)
        local_gradients(ddp, case, rank)
        record["ddp"] = gradients(ddp.module)
    model = model_of(case, rank)
    local_gradients(model, case, rank)
    record["local"], record["before"] = gradients(model), state(model)
    try:
        fn(model)
    except BaseException as exc:  # the student's code: reported, never raised
        record["error"] = describe(exc, files)
        raise _Stopped(record) from None
    record["after"], record["left"] = gradients(model), state(model)
    torch.set_grad_enabled(record["before"]["grad_enabled"])  # the next case starts as this one did
    torch.set_default_dtype(getattr(torch, record["before"]["default_dtype"]))
    return record


def _all_agree(store: Any, key: str, rank: int, world: int, ok: bool, timeout: float) -> bool:
    """Every rank says whether its case went well; True when all did (through the store, never a collective)."""
    store.set(f"{key}/{rank}", "1" if ok else "0")
    store.wait([f"{key}/{r}" for r in range(world)], datetime.timedelta(seconds=timeout))
    return all(store.get(f"{key}/{r}") == b"1" for r in range(world))


def run_function(index: int, payload: dict[str, Any], store: Any, rank: int, world: int, timeout: float) -> dict:
    """Every case of one function on this rank; the first error ends them on every rank."""
    import torch.distributed as dist

    try:
        fn, files = rebuild(payload), _files(payload)
    except Exception as exc:  # a module the notebook imported that this process cannot
        return {"error": {"type": type(exc).__name__, "text": str(exc), "build": True}, "cases": []}
    out: dict[str, Any] = {"error": None, "cases": []}
    for case, case_world, with_ddp in CASES:
        group_timeout = datetime.timedelta(seconds=timeout)
        if case_world == world:
            prefix = dist.PrefixStore(f"function{index}/{case}/", store)
            dist.init_process_group("gloo", store=prefix, rank=rank, world_size=world, timeout=group_timeout)
        else:  # a world of its own
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1, timeout=group_timeout)
        ok = True
        try:
            out["cases"].append(run_case(fn, case, with_ddp, rank, files))
        except _Stopped as stopped:
            out["error"], ok = stopped.args[0]["error"], False
            out["error"]["case"] = case
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
        if not _all_agree(store, f"function{index}/{case}/ok", rank, world, ok, timeout * 3):
            if ok:
                out["error"] = {"other_rank": True, "case": case}
            break
    return out


def main(job_path: str) -> None:
    import torch.distributed as dist

    with open(job_path, "rb") as job_file:
        job = pickle.load(job_file)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    timeout = float(job["timeout"])
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        world,
        is_master=False,
        timeout=datetime.timedelta(seconds=timeout * 3),
    )
    results = [run_function(i, payload, store, rank, world, timeout) for i, payload in enumerate(job["functions"])]
    with open(Path(job["out"]) / f"rank{rank}.pkl", "wb") as out:
        pickle.dump(results, out)
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
