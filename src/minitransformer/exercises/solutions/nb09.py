"""The answer key of notebook 09, in notebook order: ``09.top_k``, ``09.top_p``, ``09.cached_attention``."""

from __future__ import annotations

import math

import torch

from ..registry import solution


@solution(
    "09.top_k",
    "Ordena cada fila de mayor a menor y toma el k-ésimo logit: todo lo que queda por debajo pasa a -inf y "
    "la softmax le dará probabilidad 0. Los empates con el k-ésimo se quedan, como en la función del paquete.",
    "Sort each row from largest to smallest and take the k-th logit: everything below it becomes -inf and the "
    "softmax gives it probability 0. Ties with the k-th stay, as in the package's function.",
)
def solution_my_top_k(logits, k):
    # «el k-ésimo mayor de cada fila, (B, 1)|the k-th largest of each row, (B, 1)»
    kth = logits.sort(dim=-1, descending=True).values[..., k - 1 : k]
    return logits.masked_fill(logits < kth, float("-inf"))


@solution(
    "09.top_p",
    "Ordena las probabilidades de mayor a menor y suma: un token se queda si la masa de los más probables que "
    "él aún no llega a p. Así el primero siempre se queda y el conjunto es el más pequeño cuya masa alcanza p. "
    "`scatter` devuelve la decisión al orden del vocabulario.",
    "Sort the probabilities from largest to smallest and add them up: a token stays if the mass of the tokens "
    "more likely than it has not reached p yet. So the first one always stays and the set is the smallest whose "
    "mass reaches p. `scatter` puts the decision back in vocabulary order.",
)
def solution_my_top_p(logits, p):
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)  # (B, V)
    # «masa de los tokens más probables que cada uno|mass of the tokens more likely than each one»
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    # «el primero se queda siempre: antes de él, la masa es 0|the first one always stays: the mass before it is 0»
    keep_sorted = mass_before < p
    # «de vuelta al orden del vocabulario|back to vocabulary order»
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


@solution(
    "09.cached_attention",
    "Las claves y los valores nuevos se añaden al final de la caché (dimensión 2, la de las posiciones); las "
    "consultas nuevas miran a todo lo guardado y, entre las nuevas, solo hacia atrás: la consulta i ve las "
    "posiciones 0 … S + i, una máscara triangular desplazada S columnas.",
    "The new keys and values go at the end of the cache (dimension 2, the positions); the new queries look at "
    "everything stored and, among the new ones, only backwards: query i sees positions 0 … S + i, a triangular "
    "mask shifted by S columns.",
)
def solution_my_cached_attention(q, k, v, k_cache, v_cache):
    k_cache = torch.cat([k_cache, k], dim=2)  # (B, H, S + T, Dh)
    v_cache = torch.cat([v_cache, v], dim=2)  # (B, H, S + T, Dh)
    T, L = q.size(2), k_cache.size(2)
    scores = q @ k_cache.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T, S + T)
    # «el token nuevo i ve las posiciones 0 … S + i|new token i sees positions 0 … S + i»
    allowed = torch.ones(T, L, dtype=torch.bool, device=q.device).tril(diagonal=L - T)
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v_cache, k_cache, v_cache
