"""Checkers for notebook 14's exercises: the gradients averaged by hand with ``dist.all_reduce`` (what
``DistributedDataParallel`` does), each rank's shard of an epoch (``DistributedSampler``'s rule), and the time
of one data-parallel step (the ring all-reduce's bytes beside the compute).

``14.average_gradients`` runs the student's function where it means something, on two real processes: the
checker first calls it here, with ``torch.distributed`` answering that a collective was reached (an unwritten
stub, a crash, an answer that never communicates or that trips on a gradient that is ``None`` are answered
without launching anything), then sends its code to two ranks launched by ``python -m torch.distributed.run
--standalone --nproc_per_node=2`` on the loopback address (:mod:`._on_ranks`), with a timeout on every collective
and on the launch, and compares in this process what the ranks saw with DDP's gradients. One launch tries every
case; its result is kept for the function's code, so that checking it again (in the other language) launches
nothing. The other two checkers run here, on many cases, against PyTorch's ``DistributedSampler`` and the ring
all-reduce's formula. The worked solutions are in the answer key :mod:`.solutions.nb14`.
"""

from __future__ import annotations

import builtins
import contextlib
import marshal
import math
import numbers
import os
import pickle
import random
import subprocess
import sys
import sysconfig
import tempfile
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..distributed import end_launch, torchrun_command
from ..i18n import integer
from . import _on_ranks
from ._core import (
    Feedback,
    Hints,
    attempt,
    by_key,
    close,
    correct,
    diagnose,
    exercise,
    forbid,
    num,
    stop,
    type_name,
)

__all__ = ["HINTS", "check_average_gradients", "check_shard_indices", "check_step_time"]

# Every hint these checkers give, (Spanish, English), by key.
HINTS = Hints(
    {
        # ---- 14.average_gradients: before launching
        "no_distributed": (
            "este PyTorch no trae `torch.distributed` (`dist.is_available()` es False), así que este ejercicio no "
            "se puede comprobar aquí: prueba en Colab o en Linux.",
            "this PyTorch has no `torch.distributed` (`dist.is_available()` is False), so this exercise cannot be "
            "checked here: try it in Colab or on Linux.",
        ),
        "no_collective": (
            "tu función termina sin llamar a ninguna operación colectiva de `torch.distributed`: cada rango solo "
            "ve sus propios gradientes, y para promediarlos entre rangos hace falta `dist.all_reduce`.",
            "your function ends without calling any collective of `torch.distributed`: each rank only sees its own "
            "gradients, and averaging them across ranks takes `dist.all_reduce`.",
        ),
        "none_grad": (
            "tu función falla con un gradiente que es `None` ({error}). Un parámetro congelado "
            "(`requires_grad=False`) o que la pasada hacia delante no usa no tiene gradiente: sáltalo, como hace DDP.",
            "your function fails on a gradient that is `None` ({error}). A frozen parameter "
            "(`requires_grad=False`) or one the forward pass does not use has no gradient: skip it, as DDP does.",
        ),
        "needs_global": (
            "tu función usa `{name}` ({kind}), que los procesos de los rangos no pueden recibir: solo les llegan los "
            "módulos importados, los números y textos, y otras funciones tuyas. Créalo dentro de la función.",
            "your function uses `{name}` ({kind}), which the ranks' processes cannot receive: only imported modules, "
            "numbers and strings, and other functions of yours reach them. Create it inside the function.",
        ),
        "launch_failed": (
            "no se pudieron lanzar los dos procesos con torchrun ({error}). Vuelve a intentarlo; si se repite, "
            "reinicia el kernel.",
            "the two processes could not be launched with torchrun ({error}). Try again; if it happens again, "
            "restart the kernel.",
        ),
        "launch_timeout": (
            "los dos procesos no terminaron en {seconds} s. Vuelve a intentarlo; si se repite, reinicia el kernel.",
            "the two processes did not finish within {seconds} s. Try again; if it happens again, restart the kernel.",
        ),
        # ---- 14.average_gradients: what the ranks saw
        "rank_import": (
            "un rango no pudo preparar tu función ({error}): ¿usa un módulo que solo existe en este cuaderno?",
            "a rank could not set up your function ({error}): does it use a module that only exists in this notebook?",
        ),
        "hangs": (
            "los rangos se quedaron esperándose unos a otros hasta agotar el tiempo de espera de las operaciones "
            "colectivas: todos los rangos tienen que llamar a las mismas, en el mismo orden (¿alguna solo en el "
            "rango 0?).",
            "the ranks waited for each other until the collectives' timeout: every rank must call the same ones, in "
            "the same order (is one called on rank 0 only?).",
        ),
        "changed_params": (
            "tu función cambia los parámetros del modelo (el de `{name}` en el rango {rank}): ¿promedias los "
            "parámetros en vez de los gradientes? Solo se tocan los `.grad`; el optimizador cambia los parámetros "
            "después.",
            "your function changes the model's parameters (`{name}` on rank {rank}): do you average the parameters "
            "instead of the gradients? Only the `.grad` change; the optimiser changes the parameters afterwards.",
        ),
        "left_requires_grad": (
            "tu función cambia `requires_grad` de `{name}`: deja el modelo como estaba y cambia solo sus gradientes.",
            "your function changes `requires_grad` of `{name}`: leave the model as it was and change only its "
            "gradients.",
        ),
        "left_mode": (
            "tu función deja el modelo en otro modo (`model.train()` / `model.eval()`): no lo cambies.",
            "your function leaves the model in another mode (`model.train()` / `model.eval()`): do not change it.",
        ),
        "left_grad_mode": (
            "tu función deja desactivado el cálculo de gradientes en todo el proceso "
            "(`torch.set_grad_enabled(False)`): usa `with torch.no_grad():`, que lo restaura al salir.",
            "your function leaves gradient computation switched off in the whole process "
            "(`torch.set_grad_enabled(False)`): use `with torch.no_grad():`, which restores it on the way out.",
        ),
        "left_default_dtype": (
            "tu función cambia el tipo por defecto de PyTorch (`torch.set_default_dtype`) y no lo restaura.",
            "your function changes PyTorch's default dtype (`torch.set_default_dtype`) and does not restore it.",
        ),
        "none_filled": (
            "tu función da un gradiente a `{name}`, que no lo tenía (`None`): DDP deja `None` los gradientes de los "
            "parámetros congelados o sin usar (con un cero, un optimizador como AdamW los movería igual).",
            "your function gives `{name}` a gradient, which it did not have (`None`): DDP leaves `None` the gradients "
            "of frozen or unused parameters (with a zero, an optimiser such as AdamW would move them all the same).",
        ),
        "grad_removed": (
            "tu función deja sin gradiente (`None`) a `{name}`: el promedio va en `p.grad`, no se borra.",
            "your function leaves `{name}` without a gradient (`None`): the average goes into `p.grad`, it is not "
            "deleted.",
        ),
        "grad_kind": (
            "el gradiente de `{name}` cambia de forma o de tipo ({got}, y era {want}): el promedio tiene la forma y "
            "el tipo del gradiente.",
            "the gradient of `{name}` changes shape or dtype ({got}, and it was {want}): the average has the "
            "gradient's shape and dtype.",
        ),
        "only_rank0": (
            "el rango 0 acaba con el resultado y el rango 1 no: `dist.reduce` deja el resultado solo en el rango "
            "`dst`. Cada rango da su propio paso del optimizador, así que todos necesitan el promedio: "
            "`dist.all_reduce`.",
            "rank 0 ends with the result and rank 1 does not: `dist.reduce` leaves the result on rank `dst` only. "
            "Every rank takes its own optimiser step, so every rank needs the average: `dist.all_reduce`.",
        ),
        "not_averaged": (
            "los gradientes quedan como cada rango los calculó: no se promedió nada. Si reduces una copia "
            "(`p.grad.clone()`), escribe el resultado de vuelta en `p.grad`.",
            "the gradients stay as each rank computed them: nothing was averaged. If you reduce a copy "
            "(`p.grad.clone()`), write the result back into `p.grad`.",
        ),
        "no_division": (
            "cada rango acaba con la suma de los gradientes de los rangos, no su media: `dist.all_reduce` suma "
            "(ReduceOp.SUM); falta dividir entre `dist.get_world_size()`.",
            "each rank ends with the sum of the ranks' gradients, not their mean: `dist.all_reduce` adds "
            "(ReduceOp.SUM); dividing by `dist.get_world_size()` is missing.",
        ),
        "divided_twice": (
            "cada rango acaba con la suma dividida entre N²: divides dos veces entre el número de rangos (¿antes y "
            "después de reducir?).",
            "each rank ends with the sum divided by N²: you divide twice by the number of ranks (before and after "
            "the reduction?).",
        ),
        "divided_only": (
            "cada rango divide su propio gradiente entre el número de rangos, pero no lo suma con los de los demás: "
            "falta `dist.all_reduce` sobre `p.grad` (o escribir su resultado de vuelta).",
            "each rank divides its own gradient by the number of ranks, but does not add it to the others': "
            "`dist.all_reduce` on `p.grad` is missing (or writing its result back).",
        ),
        "one_param": (
            "solo se promedia el gradiente de un parámetro; los demás quedan como los calculó cada rango. ¿Está la "
            "reducción fuera del bucle sobre `model.parameters()`, o sales de él antes de tiempo?",
            "only one parameter's gradient is averaged; the others stay as each rank computed them. Is the reduction "
            "outside the loop over `model.parameters()`, or do you leave it too early?",
        ),
        "hard_coded_world": (
            "con dos rangos acierta, pero con un rango solo divide entre 2: usa `dist.get_world_size()`, no un 2 "
            "escrito a mano.",
            "with two ranks it is right, but with one rank alone it divides by 2: use `dist.get_world_size()`, not a "
            "2 written by hand.",
        ),
        "grads_wrong": (
            "en el rango {rank} ({case}) el gradiente de `{name}` no es el promedio de los rangos (diferencia máxima "
            "{diff} con el de DDP).",
            "on rank {rank} ({case}) the gradient of `{name}` is not the ranks' average (largest difference {diff} "
            "from DDP's).",
        ),
        # ---- 14.shard_indices
        "shard_not_ints": (
            "devuelve una lista de índices enteros (ints), no {got}.",
            "return a list of integer indices (ints), not {got}.",
        ),
        "shard_global_rng": (
            "tu función cambia el generador aleatorio global ({which}): cada rango lo tiene en otro estado, y "
            "también el resto del programa. Baraja con un generador propio, "
            "`torch.Generator().manual_seed(seed + epoch)`.",
            "your function changes the global random generator ({which}): each rank has it in another state, and so "
            "does the rest of the program. Shuffle with a generator of your own, "
            "`torch.Generator().manual_seed(seed + epoch)`.",
        ),
        "shard_blocks_drop_tail": (
            "das a cada rango un bloque seguido de n // N índices y los últimos n % N no los ve nadie: el final se "
            "completa repitiendo los primeros del orden, y cada rango toma uno de cada N, empezando en su rango.",
            "you give each rank a contiguous block of n // N indices, and nobody sees the last n % N: the tail is "
            "filled by repeating the first ones of the order, and each rank takes one in N, starting at its rank.",
        ),
        "shard_blocks": (
            "das a cada rango un bloque seguido del orden; la regla de `DistributedSampler` reparte uno de cada N: "
            "el rango r toma las posiciones r, r + N, r + 2N, … del orden completado.",
            "you give each rank a contiguous block of the order; `DistributedSampler`'s rule deals one in N: rank r "
            "takes positions r, r + N, r + 2N, … of the padded order.",
        ),
        "shard_no_padding": (
            "cuando n no es múltiplo de N, unos rangos reciben un índice más que otros y darían un paso más: "
            "completa el orden hasta un múltiplo de N repitiendo sus primeros índices.",
            "when n is not a multiple of N, some ranks get one index more than others and would take one step more: "
            "pad the order to a multiple of N by repeating its first indices.",
        ),
        "shard_drop_tail": (
            "tiras los últimos n % N índices (es `drop_last=True`); aquí la regla es completar el orden repitiendo "
            "sus primeros índices, para que ningún ejemplo se quede sin ver.",
            "you drop the last n % N indices (that is `drop_last=True`); here the rule is to pad the order by "
            "repeating its first indices, so that no example goes unseen.",
        ),
        "shard_pad_once": (
            "con menos ejemplos que rangos (n < N) no basta repetir el orden una vez: repítelo las veces que haga "
            "falta hasta llegar a N · ⌈n / N⌉.",
            "with fewer examples than ranks (n < N) repeating the order once is not enough: repeat it as many times "
            "as needed to reach N · ⌈n / N⌉.",
        ),
        "shard_pad_last": (
            "completas el final repitiendo el último índice; la regla repite los primeros del orden, uno distinto "
            "por hueco.",
            "you fill the tail by repeating the last index; the rule repeats the first ones of the order, a "
            "different one per gap.",
        ),
        "shard_pad_unshuffled": (
            "completas el final con 0, 1, 2, …; la regla repite los primeros del orden barajado.",
            "you fill the tail with 0, 1, 2, …; the rule repeats the first ones of the shuffled order.",
        ),
        "shard_extra_row": (
            "cuando n es múltiplo de N también añades índices: el total es N · ⌈n / N⌉, que es n justo cuando N "
            "divide a n.",
            "when n is a multiple of N you add indices too: the total is N · ⌈n / N⌉, which is n exactly when N "
            "divides n.",
        ),
        "shard_same_every_epoch": (
            "el orden es el mismo en todas las épocas: la semilla del barajado es `seed + epoch` (lo que hace "
            "`set_epoch`), para que cada época vea otro orden.",
            "the order is the same in every epoch: the shuffle's seed is `seed + epoch` (what `set_epoch` does), so "
            "that every epoch sees another order.",
        ),
        "shard_rank_seed": (
            "cada rango baraja con otra semilla, así que sus trozos se solapan y algunos ejemplos no los ve nadie: "
            "todos los rangos barajan igual (`seed + epoch`) y luego se reparten el mismo orden.",
            "each rank shuffles with another seed, so their shards overlap and some examples are seen by nobody: "
            "every rank shuffles alike (`seed + epoch`) and then they share out the same order.",
        ),
        "shard_seed_ignored": (
            "no usas `seed`: con otra semilla tu orden no cambia. La semilla del barajado es `seed + epoch`.",
            "you do not use `seed`: with another seed your order does not change. The shuffle's seed is "
            "`seed + epoch`.",
        ),
        "shard_shuffle_ignored": (
            "no usas `shuffle`: con `shuffle=False` el orden es 0, 1, …, n − 1 sin barajar, y con `shuffle=True`, "
            "barajado.",
            "you do not use `shuffle`: with `shuffle=False` the order is 0, 1, …, n − 1 unshuffled, and with "
            "`shuffle=True`, shuffled.",
        ),
        "shard_lengths": (
            "con n={n}, N={world}, el rango {rank} recibe {got} índices y son {want} = ⌈n / N⌉ para cada rango.",
            "with n={n}, N={world}, rank {rank} gets {got} indices and each rank gets {want} = ⌈n / N⌉.",
        ),
        "shard_uncovered": (
            "con n={n}, N={world}, epoch={epoch}, ningún rango recibe {missing}: entre todos deben cubrir los n "
            "ejemplos.",
            "with n={n}, N={world}, epoch={epoch}, no rank gets {missing}: together they must cover the n examples.",
        ),
        "shard_out_of_range": (
            "con n={n} devuelves el índice {bad}: los índices van de 0 a n − 1.",
            "with n={n} you return index {bad}: the indices run from 0 to n − 1.",
        ),
        "shard_other": (
            "con n={n}, N={world}, rank={rank}, epoch={epoch}, seed={seed}, shuffle={shuffle} se esperaba {want} y "
            "devuelves {got}: revisa el orden (`torch.randperm` con el generador de semilla `seed + epoch`), el "
            "relleno del final y el reparto.",
            "with n={n}, N={world}, rank={rank}, epoch={epoch}, seed={seed}, shuffle={shuffle} the expected answer is "
            "{want} and you return {got}: check the order (`torch.randperm` with the generator seeded "
            "`seed + epoch`), the padding of the tail and the dealing.",
        ),
        # ---- 14.step_time
        "step_not_number": (
            "devuelve un número (segundos), no {got}.",
            "return a number (seconds), not {got}.",
        ),
        "step_model_changed": (
            "tu función cambia el modelo ({what}): para contar bytes no hace falta convertirlo; "
            "`dtype.itemsize` (o `torch.tensor([], dtype=dtype).element_size()`) da los bytes de un número.",
            "your function changes the model ({what}): counting bytes needs no conversion; `dtype.itemsize` (or "
            "`torch.tensor([], dtype=dtype).element_size()`) gives the bytes of one number.",
        ),
        "step_frozen_counted": (
            "cuentas también los parámetros congelados (`requires_grad=False`): no tienen gradiente, y no se envían.",
            "you also count the frozen parameters (`requires_grad=False`): they have no gradient, and are not sent.",
        ),
        "step_param_dtype": (
            "cuentas los bytes con el tipo de los parámetros (`p.element_size()`, float32); los gradientes viajan "
            "en `dtype`, el argumento.",
            "you count bytes with the parameters' dtype (`p.element_size()`, float32); the gradients travel in "
            "`dtype`, the argument.",
        ),
        "step_elements": (
            "cuentas números, no bytes: multiplica por los bytes de un número de `dtype` (`dtype.itemsize`).",
            "you count numbers, not bytes: multiply by the bytes of one number of `dtype` (`dtype.itemsize`).",
        ),
        "step_no_factor_two": (
            "el anillo envía 2(N − 1)/N veces los bytes: (N − 1)/N en la reducción dispersa (reduce-scatter) y otro "
            "tanto en la recogida (all-gather); tienes solo la mitad.",
            "the ring sends 2(N − 1)/N times the bytes: (N − 1)/N in the reduce-scatter and as much again in the "
            "all-gather; you have half of it.",
        ),
        "step_n_not_n_minus_1": (
            "cada rango envía N − 1 trozos de 1/N en cada fase, no N: el factor es 2(N − 1)/N (con un rango solo, "
            "nada que enviar).",
            "each rank sends N − 1 chunks of 1/N in each phase, not N: the factor is 2(N − 1)/N (with one rank "
            "alone, nothing to send).",
        ),
        "step_naive": (
            "mandas el gradiente entero a cada uno de los otros N − 1 rangos; el anillo envía 2(N − 1)/N veces los "
            "bytes, menos de dos veces el gradiente por muchos rangos que haya.",
            "you send the whole gradient to each of the other N − 1 ranks; the ring sends 2(N − 1)/N times the "
            "bytes, less than twice the gradient however many ranks there are.",
        ),
        "step_compute_not_split": (
            "el cálculo no se reparte: con N dispositivos cada uno calcula 1/N del lote global, así que tarda "
            "`compute_seconds / N`.",
            "the compute is not split: with N devices each computes 1/N of the global batch, so it takes "
            "`compute_seconds / N`.",
        ),
        "step_comm_only": (
            "falta el tiempo de cálculo (`compute_seconds / N`): el paso es cálculo más comunicación.",
            "the compute time (`compute_seconds / N`) is missing: the step is compute plus communication.",
        ),
        "step_compute_only": (
            "falta el tiempo de comunicación (los bytes del anillo entre `bandwidth`): el paso es cálculo más "
            "comunicación.",
            "the communication time (the ring's bytes over `bandwidth`) is missing: the step is compute plus "
            "communication.",
        ),
        "step_bits": (
            "`bandwidth` ya está en bytes por segundo: no hay que pasar de bits a bytes (ni al revés).",
            "`bandwidth` is already in bytes per second: there is no converting between bits and bytes.",
        ),
        "step_wrong": (
            "con world={world}, dtype={dtype}, compute_seconds={compute}, bandwidth={bandwidth} se esperaba {want} "
            "s y devuelves {got}.",
            "with world={world}, dtype={dtype}, compute_seconds={compute}, bandwidth={bandwidth} the expected time "
            "is {want} s and you return {got}.",
        ),
    }
)


# ---- 14.average_gradients --------------------------------------------------------------------------------

COLLECTIVE_TIMEOUT = 10.0  # seconds a rank waits in one collective (or for the other rank) before it gives up
LAUNCH_TIMEOUT = 90.0  # seconds one launch may take (torchrun, two ranks, every case), and as much again per function
_RANKS = 2
_LAUNCHED: dict[bytes, dict[str, Any]] = {}  # a function's code (its payload) -> what its launch gave


class _Reached(BaseException):
    """Raised, in the check run here, where the student's code first needs the process group."""


class _Unsendable(Exception):
    def __init__(self, name: str, kind: str):
        super().__init__(name)
        self.name, self.kind = name, kind


_PLACES = tuple(
    os.path.abspath(p)
    for p in {
        *(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")),
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    }
    if p
)


def _importable(value: Any) -> tuple[str, str] | None:
    """(module, qualified name) by which a new process imports ``value``, when it can."""
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        return None
    loaded = sys.modules.get(module)
    path = getattr(loaded, "__file__", None)
    if loaded is None or (path is not None and not os.path.abspath(path).startswith(_PLACES)):
        return None
    found: Any = loaded
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return (module, qualname) if found is value else None


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _spec(name: str, value: Any, seen: set[int]) -> tuple[str, Any]:
    """How ``value`` (named ``name`` in the student's code) reaches the ranks."""
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    where = _importable(value)
    if where is not None:
        return ("import", where)
    if isinstance(value, types.FunctionType):
        return ("function", _payload(value, seen))
    if isinstance(value, (bool, int, float, complex, str, bytes, type(None), torch.dtype)):
        return ("value", value)
    if isinstance(value, (tuple, list)) and all(isinstance(v, (bool, int, float, str, type(None))) for v in value):
        return ("value", value)
    if _importable(type(value)) is not None and not isinstance(value, (nn.Module, Tensor)):
        with contextlib.suppress(Exception):  # a small value of a library's type (dist.ReduceOp.SUM, ...)
            sent = pickle.dumps(value)
            if len(sent) < 10_000 and type(pickle.loads(sent)) is type(value):
                return ("value", value)
    raise _Unsendable(name, type_name(value))


def _payload(fn: types.FunctionType, seen: set[int] | None = None) -> dict[str, Any]:
    """What the ranks need to rebuild ``fn``: its code, and what its code names from outside."""
    seen = set() if seen is None else seen
    if id(fn) in seen:
        raise _Unsendable(fn.__name__, "function")  # functions that call each other: not worth the trouble
    seen = seen | {id(fn)}
    code = fn.__code__
    found = {n: fn.__globals__[n] for n in sorted(_names(code)) if n in fn.__globals__}
    return {
        "name": fn.__name__,
        "code": marshal.dumps(code),
        "globals": {n: _spec(n, v, seen) for n, v in found.items()},
        "closure": [
            _spec(name, cell.cell_contents, seen) for name, cell in zip(code.co_freevars, fn.__closure__ or ())
        ],
        "defaults": [_spec("default", d, seen) for d in fn.__defaults__ or ()],
        "kwdefaults": {k: _spec(k, v, seen) for k, v in (fn.__kwdefaults__ or {}).items()},
    }


@contextlib.contextmanager
def _collectives_answer_reached() -> Iterator[None]:
    """While the block runs, the first thing that needs the process group (a collective, ``get_world_size``,
    ``get_rank``) raises :class:`_Reached`; ``is_initialized`` says True and torchrun's variables are set, so
    that code written for a rank gets there."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    def reached(*args: Any, **kwargs: Any) -> Any:
        handled = sys.exc_info()[1]
        frame = sys._getframe(1)
        while frame is not None:  # PyTorch's logger of a failed collective asks for the group: its error goes on
            if os.path.basename(frame.f_code.co_filename) == "c10d_logger.py" and handled is not None:
                raise handled
            frame = frame.f_back
        raise _Reached

    saved = [(c10d, "_get_default_group"), (c10d, "is_initialized"), (dist, "is_initialized")]
    saved = [(owner, name, getattr(owner, name)) for owner, name in saved]
    env = {"RANK": "0", "WORLD_SIZE": str(_RANKS), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": str(_RANKS)}
    env_before = {k: os.environ.get(k) for k in env}
    c10d._get_default_group = reached
    c10d.is_initialized = dist.is_initialized = lambda: True  # type: ignore[assignment]
    os.environ.update({k: v for k, v in env.items() if env_before[k] is None})
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
        for k, v in env_before.items():
            if v is None:
                os.environ.pop(k, None)


def _about_none(exc: BaseException) -> bool:
    return isinstance(exc, (TypeError, AttributeError)) and "NoneType" in str(exc)


def _first_try(lang: str, fn: Callable[..., Any]) -> None:
    """Run the student's function here, on the model every case uses (its first parameter frozen, so that its
    gradient is ``None``), until it first needs the process group; stop the check if it never does."""
    model = _on_ranks.Net(seed=7)
    with torch.enable_grad():
        _on_ranks.local_gradients(model, "ddp", 0)

    def until_the_group(model: nn.Module) -> tuple[str, Exception | None]:
        try:
            fn(model)
        except _Reached:
            return "reached", None
        except Exception as exc:  # every other error goes on to attempt, which reports it
            if _about_none(exc) and not isinstance(exc, NotImplementedError):
                return "none", exc
            raise
        return "returned", None

    if not callable(fn):
        attempt(lang, fn)  # the core's "not callable"
    grad_mode, dtype = torch.is_grad_enabled(), torch.get_default_dtype()
    try:  # what the function could change in this process is put back (the ranks report it)
        with _collectives_answer_reached():
            said, error = attempt(lang, until_the_group, model)
    finally:
        torch.set_grad_enabled(grad_mode)
        torch.set_default_dtype(dtype)
    if said == "none":
        raise stop(HINTS(lang, "none_grad", error=error))
    if said == "returned":
        raise stop(HINTS(lang, "no_collective"))


def _environment() -> dict[str, str]:
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    if "GLOO_SOCKET_IFNAME" not in env and sys.platform.startswith(("linux", "darwin")):
        env["GLOO_SOCKET_IFNAME"] = "lo" if sys.platform.startswith("linux") else "lo0"  # loopback only
    return env


def _launch(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run the functions of ``payloads`` on two ranks, in one launch: for each, ``{"ranks": [what rank 0 saw,
    what rank 1 saw]}``, or ``{"failed": why}`` / ``{"timeout": seconds}`` for the whole launch."""
    limit = LAUNCH_TIMEOUT * (1 + len(payloads))
    with tempfile.TemporaryDirectory(prefix="minitransformer-ranks-") as folder:
        job = Path(folder) / "job.pkl"
        with open(job, "wb") as out:
            pickle.dump({"functions": payloads, "timeout": COLLECTIVE_TIMEOUT, "out": folder}, out)
        command = torchrun_command(_on_ranks.__name__, [str(job)], nproc=_RANKS)  # --standalone: loopback
        posix = os.name == "posix"
        process = subprocess.Popen(
            command,
            cwd=folder,
            env=_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=posix,
        )
        try:
            output, _ = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            end_launch(process)  # torchrun and every rank it started
            return [{"timeout": round(limit)}] * len(payloads)
        files = [Path(folder) / f"rank{r}.pkl" for r in range(_RANKS)]
        if not all(f.exists() for f in files):
            lines = [line.strip() for line in (output or "").splitlines() if "Error" in line or "error" in line]
            return [{"failed": lines[-1] if lines else f"exit {process.returncode}"}] * len(payloads)
        ranks = []
        for f in files:
            with open(f, "rb") as seen:
                ranks.append(pickle.load(seen))
    return [{"ranks": [rank[i] for rank in ranks]} for i in range(len(payloads))]


def _key(payload: dict[str, Any]) -> bytes:
    return pickle.dumps(payload)


def _on_two_ranks(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What each function gave on two ranks: from an earlier launch of the same code, or one launch for all the
    others (a launch that failed is not kept: the next check tries again)."""
    keys = [_key(p) for p in payloads]
    fresh = {k: p for k, p in zip(keys, payloads) if k not in _LAUNCHED}
    got = dict(zip(fresh, _launch(list(fresh.values())))) if fresh else {}
    _LAUNCHED.update({k: result for k, result in got.items() if "ranks" in result})
    return [_LAUNCHED.get(k) or got[k] for k in keys]


def _sendable(lang: str, fn: Callable[..., Any]) -> dict[str, Any]:
    if not isinstance(fn, types.FunctionType):
        raise stop(HINTS(lang, "needs_global", name=getattr(fn, "__name__", type_name(fn)), kind=type_name(fn)))
    try:
        return _payload(fn)
    except _Unsendable as no:
        raise stop(HINTS(lang, "needs_global", name=no.name, kind=no.kind)) from None


def _replay(lang: str, error: dict[str, Any]) -> None:
    """The student's error on a rank, raised again here at the student's line, so that :func:`attempt` reports
    it as it reports any crash (the line, what the error means)."""
    kind = getattr(builtins, error["type"], None)
    if not (isinstance(kind, type) and issubclass(kind, Exception)):
        kind = RuntimeError
    try:
        exc = kind(error["text"])
    except Exception:  # noqa: BLE001 (an exception class that wants other arguments)
        exc = RuntimeError(f"{error['type']}: {error['text']}")
    if error["recursion"]:
        exc = RecursionError(error["text"])
    if error.get("file") and error.get("line"):
        code = compile("\n" * (error["line"] - 1) + "raise __error__", error["file"], "exec")
    else:
        code = compile("raise __error__", "<rank>", "exec")

    def on_the_rank() -> None:
        exec(code, {"__error__": exc})

    attempt(lang, on_the_rank)


_WAITED = ("timed out", "timeout", "connection closed", "connection reset", "broken pipe", "peer")


def _rank_error(lang: str, seen: list[dict[str, Any]]) -> None:
    """Stop the check with the hint for the first error a rank reported, if any."""
    errors = [s["error"] for s in seen if s["error"] and not s["error"].get("other_rank")]
    if not errors:
        if any(s["error"] for s in seen):  # only "the other rank failed": should not happen
            raise stop(HINTS(lang, "hangs"))
        return
    if any(e.get("build") for e in errors):
        built = next(e for e in errors if e.get("build"))
        raise stop(HINTS(lang, "rank_import", error=f"{built['type']}: {built['text']}"))
    own = [e for e in errors if not any(w in e["text"].lower() for w in _WAITED) or e["type"] == "RecursionError"]
    if not own:
        raise stop(HINTS(lang, "hangs"))
    first = own[0]
    if first["type"] in ("TypeError", "AttributeError") and "NoneType" in first["text"]:
        raise stop(HINTS(lang, "none_grad", error=f"{first['type']}: {first['text']}"))
    _replay(lang, first)


def _same_grads(a: list[Tensor | None], b: list[Tensor | None]) -> bool:
    return len(a) == len(b) and all(
        (x is None and y is None) or (x is not None and y is not None and close(x, y)) for x, y in zip(a, b)
    )


def _combine(grads: list[list[Tensor | None]], how: Callable[[list[Tensor]], Tensor]) -> list[Tensor | None]:
    """Per parameter, ``how`` of the ranks' gradients (None where they are None)."""
    return [None if g[0] is None else how(list(g)) for g in zip(*grads)]


def _mixed(mine: list[Tensor | None], mean: list[Tensor | None], which: int) -> list[Tensor | None]:
    """``mine`` with the gradient of the ``which``-th parameter that has one replaced by ``mean``'s."""
    having = [i for i, g in enumerate(mine) if g is not None]
    chosen = having[which]
    return [mean[i] if i == chosen else g for i, g in enumerate(mine)]


def _avg_mistakes(locals_: list[list[Tensor | None]], rank: int) -> list[tuple[str, list[Tensor | None]]]:
    """What each mistake leaves on rank ``rank`` in a case whose ranks computed ``locals_``."""
    world, mine = len(locals_), locals_[rank]
    total = _combine(locals_, lambda g: torch.stack(g).sum(0))
    mean = [None if t is None else t / world for t in total]
    return [
        ("not_averaged", mine),
        ("no_division", total),
        ("divided_twice", [None if t is None else t / world**2 for t in total]),
        ("divided_only", [None if g is None else g / world for g in mine]),
        ("one_param", _mixed(mine, mean, 0)),
        ("one_param", _mixed(mine, mean, -1)),
        ("hard_coded_world", [None if t is None else t / 2 for t in total]),
    ]


def _left_behind(lang: str, seen: list[dict[str, Any]], names: list[str]) -> None:
    """Stop the check at the first thing a rank's model or process was left with besides its gradients."""
    for rank, ranks_view in enumerate(seen):
        for case in ranks_view["cases"]:
            before, after = case["before"], case["left"]
            for name, p0, p1 in zip(names, before["params"], after["params"]):
                if p0.shape != p1.shape or p0.dtype != p1.dtype or not torch.equal(p0, p1):
                    raise stop(HINTS(lang, "changed_params", name=name, rank=rank))
            for name, r0, r1 in zip(names, before["requires_grad"], after["requires_grad"]):
                if r0 != r1:
                    raise stop(HINTS(lang, "left_requires_grad", name=name))
            if before["training"] != after["training"]:
                raise stop(HINTS(lang, "left_mode"))
            if before["grad_enabled"] != after["grad_enabled"]:
                raise stop(HINTS(lang, "left_grad_mode"))
            if before["default_dtype"] != after["default_dtype"]:
                raise stop(HINTS(lang, "left_default_dtype"))
            for name, g0, g1 in zip(names, case["local"], case["after"]):
                if g0 is None and g1 is not None:
                    raise stop(HINTS(lang, "none_filled", name=name))
                if g0 is not None and g1 is None:
                    raise stop(HINTS(lang, "grad_removed", name=name))
                if g0 is not None and (g0.shape != g1.shape or g0.dtype != g1.dtype):
                    got = f"{tuple(g1.shape)} {str(g1.dtype).removeprefix('torch.')}"
                    want = f"{tuple(g0.shape)} {str(g0.dtype).removeprefix('torch.')}"
                    raise stop(HINTS(lang, "grad_kind", name=name, got=got, want=want))


_CASE_NAMES = {
    "es": {"ddp": "con DDP", "apart": "parámetros distintos por rango", "alone": "un rango solo"},
    "en": {"ddp": "with DDP", "apart": "different parameters per rank", "alone": "one rank alone"},
}


def _average_gradients_verdict(lang: str, seen: list[dict[str, Any]]) -> Feedback:
    names = [name for name, _ in _on_ranks.Net(seed=0).named_parameters()]
    _left_behind(lang, seen, names)
    answers, banks, wants, where = [], [], [], []
    for c, (case, world, _) in enumerate(_on_ranks.CASES):
        views = [seen[r]["cases"][c] for r in range(_RANKS)]
        for rank in range(_RANKS):
            in_case = views[:world] if world > 1 else [views[rank]]
            locals_ = [v["local"] for v in in_case]
            mean = _combine(locals_, lambda g: torch.stack(g).mean(0))
            want = views[rank]["ddp"] if views[rank]["ddp"] is not None else mean
            answers.append(views[rank]["after"])
            banks.append(_avg_mistakes(locals_, rank if world > 1 else 0))
            wants.append(want)
            where.append((case, world, rank))
    right = [_same_grads(a, w) for a, w in zip(answers, wants)]
    if all(right):
        diff = max(
            float((a.double() - w.double()).abs().max())
            for answer, want in zip(answers, wants)
            for a, w in zip(answer, want)
            if a is not None
        )
        return correct(
            lang,
            f"En los dos rangos, los mismos gradientes que DDP (diferencia máxima {num(lang, diff, 2)}): eso es lo "
            "que hace DDP después de cada `backward()`, por cubos y solapado con el cálculo.",
            f"On both ranks, the same gradients as DDP (largest difference {num(lang, diff, 2)}): that is what DDP "
            "does after every `backward()`, in buckets and overlapped with the compute.",
        )
    for i, (_, world, rank) in enumerate(where):  # dist.reduce: rank 0 ends right, the others do not
        if world > 1 and rank == 0:
            sums = dict(banks[i])["no_division"]
            zero_ok = right[i] or _same_grads(answers[i], sums)
            if zero_ok and not right[i + 1] and not _same_grads(answers[i + 1], sums):
                return HINTS(lang, "only_rank0")
    key = diagnose(answers, by_key(banks), same=_same_grads)
    if key is not None:
        return HINTS(lang, key)
    i = right.index(False)
    case, _, rank = where[i]
    for name, a, w in zip(names, answers[i], wants[i]):
        if w is not None and not close(a, w):
            diff = float((a.double() - w.double()).abs().max())
            return HINTS(lang, "grads_wrong", rank=rank, case=_CASE_NAMES[lang][case], name=name, diff=diff)
    return HINTS(lang, "grads_wrong", rank=rank, case=_CASE_NAMES[lang][case], name="?", diff=float("nan"))


@exercise("14.average_gradients")
def check_average_gradients(my_average_gradients: Callable[[nn.Module], Any], lang: str | None = None) -> Feedback:
    """Check ``my_average_gradients(model)``: after each rank's ``backward()``, it leaves in every parameter's
    ``.grad`` the mean of the ranks' gradients, as DDP does (``None`` gradients left ``None``), and changes nothing
    else. Tried first here until it needs the process group; then on two gloo ranks launched with torchrun, in
    three cases: DDP's gradients as the reference, each rank's parameters apart (an answer that averages the
    parameters shows), each rank alone in a world of one (a world size written by hand shows). One launch per
    function's code, kept for the next check of the same code."""
    import torch.distributed as dist

    if not dist.is_available():
        return HINTS(lang, "no_distributed")
    _first_try(lang, my_average_gradients)
    result = _on_two_ranks([_sendable(lang, my_average_gradients)])[0]
    if "timeout" in result:
        return HINTS(lang, "launch_timeout", seconds=result["timeout"])
    if "failed" in result:
        return HINTS(lang, "launch_failed", error=result["failed"])
    _rank_error(lang, result["ranks"])
    return _average_gradients_verdict(lang, result["ranks"])


def prepare_average_gradients(functions: list[Callable[..., Any]]) -> None:
    """Launch once for every function of ``functions`` that gets as far as needing the process group, so that
    checking each afterwards launches nothing (the tests check a bank of answers this way)."""
    payloads = []
    for fn in functions:
        try:
            _first_try("en", fn)
            payloads.append(_sendable("en", fn))
        except Exception:  # noqa: BLE001 (answered without a launch: nothing to prepare)
            continue
    _on_two_ranks(payloads)


# ---- 14.shard_indices -----------------------------------------------------------------------------------

# (n, world, epoch, seed, shuffle): every rank of each; n not a multiple of N, n < N, N = 1, several epochs and seeds.
_SHARD_CASES = [
    (10, 3, 0, 0, False),
    (10, 3, 0, 0, True),
    (10, 3, 1, 0, True),
    (12, 4, 2, 5, True),
    (7, 2, 3, 1, True),
    (3, 8, 1, 0, False),
    (2, 5, 0, 3, True),
    (25, 6, 4, 3, True),
    (5, 5, 0, 0, True),
    (9, 1, 2, 0, True),
]


def _sampler(n: int, world: int, rank: int, epoch: int, seed: int, shuffle: bool) -> list[int]:
    """PyTorch's own answer: ``DistributedSampler`` with ``drop_last=False``, at ``epoch`` (``set_epoch``)."""
    from torch.utils.data import DistributedSampler

    sampler = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=shuffle, seed=seed, drop_last=False)
    sampler.set_epoch(epoch)
    return list(sampler)


def _order(n: int, seed: int, shuffle: bool) -> list[int]:
    if not shuffle:
        return list(range(n))
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()


def _padded(order: list[int], total: int) -> list[int]:
    return (order * math.ceil(total / len(order)))[:total] if total > len(order) else order[:total]


def _shard_mistakes(n: int, world: int, rank: int, epoch: int, seed: int, shuffle: bool) -> list[tuple[str, list[int]]]:
    """What each mistake gives for one rank of one case."""
    order = _order(n, seed + epoch, shuffle)
    each = math.ceil(n / world)
    padded = _padded(order, each * world)
    pad = each * world - n
    k = n // world
    extra = _padded(order, (n // world + 1) * world)
    return [
        ("shard_blocks_drop_tail", order[rank * k : (rank + 1) * k]),
        ("shard_blocks", padded[rank * each : (rank + 1) * each]),
        ("shard_no_padding", order[rank::world]),
        ("shard_drop_tail", order[: world * k][rank::world]),
        ("shard_pad_once", (order + order[:pad])[rank::world]),
        ("shard_pad_last", (order + order[-1:] * pad)[rank::world]),
        ("shard_pad_unshuffled", (order + [i % n for i in range(pad)])[rank::world]),
        ("shard_extra_row", extra[rank::world]),
        ("shard_same_every_epoch", _padded(_order(n, seed, shuffle), each * world)[rank::world]),
        ("shard_rank_seed", _padded(_order(n, seed + epoch + rank, shuffle), each * world)[rank::world]),
        ("shard_seed_ignored", _padded(_order(n, epoch, shuffle), each * world)[rank::world]),
        ("shard_shuffle_ignored", _padded(_order(n, seed + epoch, True), each * world)[rank::world]),
        ("shard_shuffle_ignored", _padded(_order(n, seed + epoch, False), each * world)[rank::world]),
    ]


def _ints(lang: str, got: Any) -> list[int]:
    """The student's answer as a list of ints: a list, tuple or range of ints, or a 1-D integer tensor."""
    if isinstance(got, Tensor):
        if got.dim() != 1 or got.is_floating_point() or got.is_complex() or got.dtype == torch.bool:
            raise stop(HINTS(lang, "shard_not_ints", got=f"tensor {tuple(got.shape)} {str(got.dtype)[6:]}"))
        return [int(i) for i in got.tolist()]
    if not isinstance(got, (list, tuple, range)):
        raise stop(HINTS(lang, "shard_not_ints", got=type_name(got)))
    odd = [i for i in got if isinstance(i, bool) or not isinstance(i, numbers.Integral)]
    if odd:
        raise stop(HINTS(lang, "shard_not_ints", got=f"{type_name(got)} {_listed(odd[:3])}"))
    return [int(i) for i in got]


def _listed(values: list[Any]) -> str:
    return "[" + ", ".join(repr(v) for v in values) + ", …]"


def _rng_states() -> tuple[Any, ...]:
    numpy = sys.modules.get("numpy")
    return (torch.get_rng_state(), random.getstate(), numpy.random.get_state() if numpy is not None else None)


def _restore_rng(states: tuple[Any, ...]) -> None:
    torch.set_rng_state(states[0])
    random.setstate(states[1])
    if states[2] is not None:
        sys.modules["numpy"].random.set_state(states[2])


def _rng_changed(before: tuple[Any, ...]) -> str | None:
    after = _rng_states()
    if not torch.equal(before[0], after[0]):
        return "torch.manual_seed / torch.randperm"
    if before[1] != after[1]:
        return "random"
    if before[2] is not None and after[2] is not None:
        if any(not (a == b).all() if hasattr(a, "all") else a != b for a, b in zip(before[2], after[2], strict=False)):
            return "numpy.random"
    return None


_SHARD_TOOLS = (
    ("torch.utils.data.distributed.DistributedSampler.__iter__", "DistributedSampler"),
    ("minitransformer.distributed.shard_indices", "shard_indices"),
    ("minitransformer.distributed.padded_order", "padded_order"),
)
_SHARD_WHY = (
    "escribe tú el reparto: barajar, completar el final y tomar uno de cada N.",
    "write the dealing yourself: shuffle, pad the tail and take one in N.",
)


@exercise("14.shard_indices")
def check_shard_indices(my_shard_indices: Callable[..., Any], lang: str | None = None) -> Feedback:
    """Check ``my_shard_indices(n, world, rank, epoch, seed, shuffle)`` -> the indices rank ``rank`` of ``world``
    takes in ``epoch``, as ``DistributedSampler(drop_last=False)`` after ``set_epoch(epoch)`` gives them
    (switched off while the student's function runs, with the package's ``shard_indices``): the order
    ``torch.randperm(n)`` drawn from a generator seeded ``seed + epoch`` (``0 … n-1`` without ``shuffle``), padded
    by repeating it from its start to ``world · ⌈n / world⌉``, then every ``world``-th from ``rank``. Every rank of
    ten cases (n not a multiple of N, n < N, one rank, several epochs and seeds) is run first; the global random
    generators must be left as they were."""
    answers, wants, banks, cases = [], [], [], []
    for n, world, epoch, seed, shuffle in _SHARD_CASES:
        for rank in range(world):
            want = _sampler(n, world, rank, epoch, seed, shuffle)
            states = _rng_states()
            try:
                with forbid(_SHARD_TOOLS, *_SHARD_WHY):
                    got = attempt(lang, my_shard_indices, n, world, rank, epoch, seed, shuffle)
                changed = _rng_changed(states)
            finally:
                _restore_rng(states)
            if changed:
                return HINTS(lang, "shard_global_rng", which=changed)
            answers.append(_ints(lang, got))
            wants.append(want)
            banks.append(_shard_mistakes(n, world, rank, epoch, seed, shuffle))
            cases.append((n, world, rank, epoch, seed, shuffle))
    if answers == wants:
        return correct(
            lang,
            "Es el reparto de `DistributedSampler`: cada ejemplo en una época, salvo los ≤ N − 1 repetidos del "
            "final, y otro orden en cada época.",
            "It is `DistributedSampler`'s dealing: every example once per epoch, but for the ≤ N − 1 repeated at the "
            "tail, and another order in every epoch.",
        )
    key = diagnose(answers, by_key(banks), same=lambda a, b: a == b)
    if key is not None:
        return HINTS(lang, key)
    for got, want, (n, world, rank, *_) in zip(answers, wants, cases):
        bad = [i for i in got if not 0 <= i < n]
        if bad:
            return HINTS(lang, "shard_out_of_range", n=n, bad=bad[0])
        if len(got) != len(want):
            return HINTS(lang, "shard_lengths", n=n, world=world, rank=rank, got=len(got), want=len(want))
    start = 0
    for n, world, epoch, *_ in _SHARD_CASES:
        together = {i for got in answers[start : start + world] for i in got}
        start += world
        missing = sorted(set(range(n)) - together)
        if missing:
            return HINTS(lang, "shard_uncovered", n=n, world=world, epoch=epoch, missing=missing[0])
    got, want, (n, world, rank, epoch, seed, shuffle) = next(
        (g, w, c) for g, w, c in zip(answers, wants, cases) if g != w
    )
    return HINTS(
        lang, "shard_other", n=n, world=world, rank=rank, epoch=epoch, seed=seed, shuffle=shuffle, want=want, got=got
    )


# ---- 14.step_time ---------------------------------------------------------------------------------------


def _step_model(seed: int) -> nn.Module:
    """A model with a frozen first layer (its parameters send no gradient) and a float32 body."""
    generator = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Embedding(50 + seed, 12), nn.Linear(12, 30 + seed), nn.Linear(30 + seed, 7))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator))
    model[0].weight.requires_grad_(False)
    return model


# (model seed, dtype, world, compute_seconds, bandwidth in bytes per second)
_STEP_CASES = [
    (0, torch.float32, 2, 0.8, 1e6),
    (1, torch.bfloat16, 4, 2.0, 5e5),
    (2, torch.float64, 8, 0.3, 2e7),
    (3, torch.float16, 3, 1.5, 3e6),
    (4, torch.float32, 1, 0.7, 1e6),
    (5, torch.bfloat16, 16, 4.0, 1e8),
]


def _step_parts(model: nn.Module, dtype: torch.dtype) -> dict[str, int]:
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    every = sum(p.numel() for p in model.parameters())
    size = torch.tensor([], dtype=dtype).element_size()
    return {"trainable": trainable, "every": every, "size": size}


def _step_formula(parts: dict[str, int], world: int, compute: float, bandwidth: float, **change: Any) -> float:
    """The step time, or a mistake's (``change``: which part it gets wrong)."""
    numbers_ = parts["every"] if change.get("frozen") else parts["trainable"]
    size = change.get("size", parts["size"])
    factor = change.get("factor", 2 * (world - 1) / world)
    seconds = numbers_ * size * factor / bandwidth * change.get("bits", 1.0)
    work = compute if change.get("unsplit") else compute / world
    return change.get("only", lambda w, s: w + s)(work, seconds)


def _step_mistakes(parts: dict[str, int], world: int, compute: float, bandwidth: float) -> list[tuple[str, float]]:
    f = lambda **change: _step_formula(parts, world, compute, bandwidth, **change)  # noqa: E731
    return [
        ("step_frozen_counted", f(frozen=True)),
        ("step_param_dtype", f(size=4)),
        ("step_param_dtype", f(size=4, frozen=True)),
        ("step_elements", f(size=1)),
        ("step_no_factor_two", f(factor=(world - 1) / world)),
        ("step_n_not_n_minus_1", f(factor=2.0)),
        ("step_naive", f(factor=world - 1)),
        ("step_compute_not_split", f(unsplit=True)),
        ("step_comm_only", f(only=lambda w, s: s)),
        ("step_compute_only", f(only=lambda w, s: w)),
        ("step_bits", f(bits=8.0)),
        ("step_bits", f(bits=1 / 8)),
    ]


def _seconds(lang: str, got: Any) -> float:
    if isinstance(got, Tensor) and got.numel() == 1 and not got.is_complex():
        return float(got)
    if isinstance(got, bool) or not isinstance(got, numbers.Real):
        raise stop(HINTS(lang, "step_not_number", got=type_name(got)))
    return float(got)


def _model_change(model: nn.Module, before: list[tuple[Tensor, bool]]) -> str | None:
    for (name, p), (value, grad) in zip(model.named_parameters(), before):
        if p.dtype != value.dtype:
            return f"{name}: {str(value.dtype)[6:]} → {str(p.dtype)[6:]}"
        if p.requires_grad != grad:
            return f"{name}.requires_grad: {grad} → {p.requires_grad}"
        if p.shape != value.shape or not torch.equal(p.detach(), value):
            return name
    return None


_STEP_TOOLS = (
    ("minitransformer.distributed.ring_allreduce_bytes", "ring_allreduce_bytes"),
    ("minitransformer.distributed.gradient_bytes", "gradient_bytes"),
)
_STEP_WHY = ("escribe tú la cuenta de bytes.", "write the count of bytes yourself.")


@exercise("14.step_time")
def check_step_time(my_step_time: Callable[..., Any], lang: str | None = None) -> Feedback:
    """Check ``my_step_time(model, dtype, world, compute_seconds, bandwidth)`` -> the seconds of one step on
    ``world`` devices: ``compute_seconds / world`` (each computes 1/N of the global batch) plus the ring
    all-reduce's ``2(N − 1)/N`` × the trainable parameters' gradient bytes in ``dtype``, over ``bandwidth`` bytes
    per second. The parameters must keep their values, dtypes and ``requires_grad`` (no converting the model to
    count bytes). Six cases (frozen parameters, four dtypes, 1 to 16 devices) are run
    first; a mistake is named when it explains them all."""
    answers, wants, banks = [], [], []
    for seed, dtype, world, compute, bandwidth in _STEP_CASES:
        model = _step_model(seed)
        before = [(p.detach().clone(), p.requires_grad) for p in model.parameters()]
        with forbid(_STEP_TOOLS, *_STEP_WHY):
            got = _seconds(lang, attempt(lang, my_step_time, model, dtype, world, compute, bandwidth))
        changed = _model_change(model, before)
        if changed:
            return HINTS(lang, "step_model_changed", what=changed)
        parts = _step_parts(_step_model(seed), dtype)
        answers.append(torch.tensor(got, dtype=torch.float64))
        wants.append(torch.tensor(_step_formula(parts, world, compute, bandwidth), dtype=torch.float64))
        banks.append(
            [(k, torch.tensor(v, dtype=torch.float64)) for k, v in _step_mistakes(parts, world, compute, bandwidth)]
        )
    if all(close(a, w, atol=1e-12, rtol=1e-6) for a, w in zip(answers, wants)):
        return correct(
            lang,
            "Escrito como 2S + (C − 2S)/N, con C el cálculo y S = bytes / ancho de banda, el paso tiende a 2S: más "
            "dispositivos compensan solo si C > 2S, y nunca aceleran más de C / 2S veces.",
            "Written as 2S + (C − 2S)/N, with C the compute and S = bytes / bandwidth, the step tends to 2S: more "
            "devices pay off only if C > 2S, and never speed up more than C / 2S times.",
        )
    key = diagnose(answers, by_key(banks), atol=1e-12, rtol=1e-6)
    if key is not None:
        return HINTS(lang, key)
    i = next(i for i, (a, w) in enumerate(zip(answers, wants)) if not close(a, w, atol=1e-12, rtol=1e-6))
    _, dtype, world, compute, bandwidth = _STEP_CASES[i]
    return HINTS(
        lang,
        "step_wrong",
        world=world,
        dtype=str(dtype)[6:],
        compute=compute,
        bandwidth=integer(bandwidth),
        want=num(lang, float(wants[i]), 6),
        got=num(lang, float(answers[i]), 6),
    )
