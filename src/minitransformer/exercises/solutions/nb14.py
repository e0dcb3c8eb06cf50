"""The answer key of notebook 14, in notebook order:
``14.average_gradients``, ``14.shard_indices``, ``14.step_time``.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from ..registry import solution


@solution(
    "14.average_gradients",
    "Cada rango calculó el gradiente de su parte del lote. `dist.all_reduce` suma un tensor entre todos los rangos "
    "y deja la suma en todos (ReduceOp.SUM, la operación que tienen todos los backends), así que después se divide "
    "entre el número de rangos: la media de las medias de partes iguales es la media del lote entero. Se hace en "
    "el sitio, sobre `p.grad`, y se saltan los parámetros sin gradiente (congelados o sin usar), como hace DDP. "
    "DDP hace lo mismo por cubos de parámetros y mientras `backward()` sigue calculando.",
    "Each rank computed the gradient of its part of the batch. `dist.all_reduce` adds a tensor over every rank and "
    "leaves the sum on all of them (ReduceOp.SUM, the operation every backend has), so it is divided by the "
    "number of ranks afterwards: the mean of the means of equal parts is the whole batch's mean. It is done in "
    "place, on `p.grad`, and the parameters without a gradient (frozen or unused) are skipped, as DDP does. DDP "
    "does the same in buckets of parameters, while `backward()` is still computing.",
)
def solution_my_average_gradients(model):
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is None:  # «congelado o sin usar: DDP lo deja así|frozen or unused: DDP leaves it so»
            continue
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)  # «la suma, en todos los rangos|the sum, on every rank»
        p.grad /= world


@solution(
    "14.shard_indices",
    "Todos los rangos barajan igual (la misma semilla, `seed + epoch`: otra época, otro orden), así que se reparten "
    "un mismo orden. Para que todos den los mismos pasos, el orden se completa hasta N · ⌈n / N⌉ repitiéndolo "
    "desde el principio (las veces que haga falta si n < N), y el rango r toma las posiciones r, r + N, r + 2N, …. "
    "Es lo que hace `DistributedSampler` con `drop_last=False`.",
    "Every rank shuffles alike (the same seed, `seed + epoch`: another epoch, another order), so they share out one "
    "order. So that all take as many steps, the order is padded to N · ⌈n / N⌉ by repeating it from its start (as "
    "many times as needed when n < N), and rank r takes positions r, r + N, r + 2N, …. It is what "
    "`DistributedSampler` does with `drop_last=False`.",
)
def solution_my_shard_indices(n, world, rank, epoch, seed, shuffle):
    if shuffle:
        generator = torch.Generator().manual_seed(seed + epoch)
        order = torch.randperm(n, generator=generator).tolist()
    else:
        order = list(range(n))
    total = world * math.ceil(n / world)
    padded = (order * math.ceil(total / n))[:total]  # «el final, desde el principio|the tail, from the start»
    return padded[rank::world]


@solution(
    "14.step_time",
    "Con N dispositivos cada uno calcula 1/N del lote global: `compute_seconds / N`. Después, el anillo: cada "
    "dispositivo envía 2(N − 1)/N veces los bytes de los gradientes (la mitad en la reducción dispersa, la mitad "
    "en la recogida), y los gradientes son los de los parámetros entrenables, en `dtype`. Con N grande el factor "
    "tiende a 2: el cálculo baja y la comunicación no.",
    "With N devices each computes 1/N of the global batch: `compute_seconds / N`. Then the ring: each device sends "
    "2(N − 1)/N times the gradients' bytes (half in the reduce-scatter, half in the all-gather), and the gradients "
    "are the trainable parameters', in `dtype`. With large N the factor tends to 2: the compute falls and the "
    "communication does not.",
)
def solution_my_step_time(model, dtype, world, compute_seconds, bandwidth):
    numbers = sum(p.numel() for p in model.parameters() if p.requires_grad)
    grad_bytes = numbers * torch.tensor([], dtype=dtype).element_size()
    sent = 2 * (world - 1) / world * grad_bytes  # «bytes por dispositivo|bytes per device»
    return compute_seconds / world + sent / bandwidth
