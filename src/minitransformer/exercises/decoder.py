"""Checkers for the decoder notebook (05): shifted targets, cross-attention, the decoder layer.

The right answers come from the package (:mod:`minitransformer.attention`, :mod:`minitransformer.layers`);
each typical mistake gets its own hint.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ..attention import padding_mask, scaled_dot_product_attention
from ..layers import DecoderLayer
from ..model import target_mask
from ._core import Feedback, attempt, close, correct, exercise, name_mistake, not_a_tensor, not_yet, tensor

__all__ = ["check_shift_right", "check_cross_attention", "check_decoder_layer"]


def _layer_case() -> tuple[DecoderLayer, Tensor, Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(7)
    with torch.random.fork_rng(devices=[]):  # the notebook's random stream is left untouched
        torch.manual_seed(7)
        layer = DecoderLayer(16, 4, 32, dropout=0.0).eval()  # post-LN, as in the paper
        with torch.no_grad():  # distinct LayerNorms, so that mixing them up shows
            for norm in (layer.norm1, layer.norm2, layer.norm3):
                norm.weight.normal_(1.0, 0.3)
                norm.bias.normal_(0.0, 0.3)
    tgt = torch.randint(3, 20, (2, 5), generator=g)  # (B, T)
    tgt[1, 3:] = 0
    src = torch.randint(3, 20, (2, 7), generator=g)  # (B, S)
    src[0, 5:] = 0
    x = torch.randn(2, 5, 16, generator=g)  # (B, T, D)
    memory = torch.randn(2, 7, 16, generator=g)  # (B, S, D)
    return layer, x, memory, target_mask(tgt, 0), padding_mask(src, 0)


def _layer_variants(
    layer: DecoderLayer, x: Tensor, memory: Tensor, tgt_mask: Tensor, memory_mask: Tensor
) -> list[tuple[Tensor, str, str]]:
    """What typical mistakes compute, each with its hint."""
    sa, ca, ff = layer.self_attn, layer.cross_attn, layer.feed_forward
    n1, n2, n3 = layer.norm1, layer.norm2, layer.norm3

    def post(self_mask=tgt_mask, kv_from_x=False, query_from_input=False, norms=(n1, n2, n3), cross_mask=memory_mask):
        x1 = norms[0](x + sa(x, x, x, self_mask)[0])
        q = x if query_from_input else x1
        kv = x1 if kv_from_x else memory
        x2 = norms[1](x1 + ca(q, kv, kv, tgt_mask if kv_from_x else cross_mask)[0])
        return norms[2](x2 + ff(x2))

    h = n1(x)
    x1 = x + sa(h, h, h, tgt_mask)[0]
    x2 = x1 + ca(n2(x1), memory, memory, memory_mask)[0]
    pre = x2 + ff(n3(x2))
    x1 = n1(sa(x, x, x, tgt_mask)[0])
    x2 = n2(ca(x1, memory, memory, memory_mask)[0])
    no_residual = n3(ff(x2))
    x1 = n1(x + sa(x, x, x, tgt_mask)[0])
    no_cross = n3(x1 + ff(x1))
    x2 = n2(x1 + ca(x1, memory, memory, memory_mask)[0])
    no_last_norm = x2 + ff(x2)
    return [
        (
            post(kv_from_x=True),
            "en la atención cruzada, las claves y los valores salen de la memoria (`memory`), no del decodificador.",
            "in cross-attention, the keys and values come from the memory (`memory`), not from the decoder.",
        ),
        (
            post(query_from_input=True),
            "la consulta de la atención cruzada es la salida de la primera subcapa (x1), no la entrada x.",
            "the query of cross-attention is the output of the first sublayer (x1), not the input x.",
        ),
        (
            post(self_mask=None),
            "la autoatención necesita `tgt_mask`: sin ella cada posición ve el futuro.",
            "the self-attention needs `tgt_mask`: without it every position sees the future.",
        ),
        (
            post(cross_mask=None),
            "la atención cruzada necesita `memory_mask`: sin ella el decodificador atiende también al relleno del "
            "origen.",
            "cross-attention needs `memory_mask`: without it the decoder also attends to the source's padding.",
        ),
        (
            post(self_mask=None, cross_mask=None),
            "ninguna de las dos atenciones recibe su máscara: la autoatención necesita `tgt_mask` y la atención "
            "cruzada `memory_mask`.",
            "neither attention gets its mask: the self-attention needs `tgt_mask` and cross-attention `memory_mask`.",
        ),
        (
            post(norms=(n1, n1, n1)),
            "cada subcapa tiene su propia LayerNorm: `norm1`, `norm2` y `norm3`, en ese orden.",
            "each sublayer has its own LayerNorm: `norm1`, `norm2` and `norm3`, in that order.",
        ),
        (
            pre,
            "eso es pre-LN; la capa del artículo (post-LN) normaliza después de sumar: LayerNorm(x + subcapa(x)).",
            "that is pre-LN; the paper's layer (post-LN) normalises after the sum: LayerNorm(x + sublayer(x)).",
        ),
        (
            no_residual,
            "falta la conexión residual: cada subcapa da LayerNorm(x + subcapa(x)), no LayerNorm(subcapa(x)).",
            "the residual connection is missing: each sublayer gives LayerNorm(x + sublayer(x)), not "
            "LayerNorm(sublayer(x)).",
        ),
        (
            no_cross,
            "falta la atención cruzada entre la autoatención y la red prealimentada.",
            "cross-attention is missing between the self-attention and the feed-forward network.",
        ),
        (
            no_last_norm,
            "falta la última LayerNorm (`norm3`) tras la red prealimentada.",
            "the last LayerNorm (`norm3`) after the feed-forward network is missing.",
        ),
    ]


@exercise("05.decoder_layer")
def check_decoder_layer(
    fn: Callable[[DecoderLayer, Tensor, Tensor, Tensor, Tensor], Tensor], lang: str | None = None
) -> Feedback:
    """Check ``fn(layer, x, memory, tgt_mask, memory_mask)``: one post-LN decoder layer, built from the
    sublayers of ``layer`` (self_attn, cross_attn, feed_forward, norm1..3). Shapes: x (B, T, D) -> (B, T, D)."""
    layer, x, memory, tgt_mask, memory_mask = _layer_case()
    with torch.no_grad():
        got = attempt(lang, fn, layer, x.clone(), memory.clone(), tgt_mask, memory_mask)
        expected = layer(x, memory, tgt_mask, memory_mask)[0]  # (B, T, D)
        variants = _layer_variants(layer, x, memory, tgt_mask, memory_mask)
    if isinstance(got, tuple) and len(got) > 0 and isinstance(got[0], Tensor):
        return not_yet(
            lang,
            "devuelve solo el tensor de salida (B, T, D), no una tupla.",
            "return only the output tensor (B, T, D), not a tuple.",
        )
    got = tensor(lang, got, x.shape, ", la de `x`", ", that of `x`")
    if close(got, expected):
        return correct(
            lang,
            "Autoatención enmascarada, atención cruzada y red prealimentada, cada una con residuo y LayerNorm.",
            "Masked self-attention, cross-attention and feed-forward, each with residual and LayerNorm.",
        )
    name_mistake(lang, got, variants)
    return not_yet(
        lang,
        "la salida no coincide con la capa del artículo. Repasa las tres subcapas en orden (autoatención "
        "enmascarada, atención cruzada sobre la memoria, red prealimentada): qué recibe cada una, con qué "
        "máscara, y que cada una lleva su residuo y su propia LayerNorm.",
        "the output does not match the paper's layer. Go over the three sublayers in order (masked "
        "self-attention, cross-attention over the memory, feed-forward): what each one takes, with which mask, "
        "and that each has its residual and its own LayerNorm.",
    )


def _shift_cases() -> list[tuple[Tensor, int]]:
    g = torch.Generator().manual_seed(5)
    y1 = torch.randint(3, 20, (3, 6), generator=g)
    y1[1, 4:] = 0  # padding at the end of one row
    y1[2, 2:] = 0
    y2 = torch.randint(3, 20, (2, 1), generator=g)
    return [(y1, 1), (y1, 2), (y2, 1)]


@exercise("05.shift_right")
def check_shift_right(fn: Callable[[Tensor, int], Tensor], lang: str | None = None) -> Feedback:
    """Check ``fn(y, bos_id)``: <bos> followed by y without its last token, shape (B, T)."""
    for y, bos_id in _shift_cases():
        y_in = y.clone()
        got = attempt(lang, fn, y_in, bos_id)
        if not torch.equal(y_in, y):
            return not_yet(
                lang,
                "tu función modifica `y`: construye un tensor nuevo (por ejemplo con `torch.cat`) en lugar de "
                "escribir dentro de `y`.",
                "your function modifies `y`: build a new tensor (for example with `torch.cat`) instead of writing "
                "into `y`.",
            )
        if not isinstance(got, Tensor):
            return not_a_tensor(lang, got)
        B, T = y.shape
        expected = torch.cat([torch.full((B, 1), bos_id, dtype=y.dtype), y[:, :-1]], dim=1)  # (B, T)
        if got.shape == (B, T + 1):
            return not_yet(
                lang,
                "la entrada tiene un token de más: el último token de `y` no se usa como entrada (no queda nada "
                "que predecir después de él); quita la última columna con `y[:, :-1]`.",
                "the input has one token too many: the last token of `y` is not used as an input (there is "
                "nothing left to predict after it); drop the last column with `y[:, :-1]`.",
            )
        if got.shape != (B, T):
            return not_yet(
                lang,
                f"la entrada debe tener la misma forma que `y`, {(B, T)}, y tiene {tuple(got.shape)}.",
                f"the input must have the same shape as `y`, {(B, T)}, it has {tuple(got.shape)}.",
            )
        if got.is_floating_point():
            return not_yet(
                lang,
                "los ids de los tokens son enteros: conserva el dtype de `y` (por ejemplo "
                "`torch.full(..., dtype=y.dtype)`).",
                "token ids are integers: keep the dtype of `y` (for example `torch.full(..., dtype=y.dtype)`).",
            )
        if torch.equal(got, expected):
            continue
        if torch.equal(got, y):
            return not_yet(
                lang,
                "devuelves `y` sin desplazar: en la posición t la entrada debe ser el token anterior, y[t-1].",
                "you return `y` unshifted: at position t the input must be the previous token, y[t-1].",
            )
        if T > 1 and torch.equal(got, torch.roll(y, 1, dims=1)):
            return not_yet(
                lang,
                "`torch.roll` lleva el último token al principio; la primera posición debe ser `bos_id`.",
                "`torch.roll` brings the last token to the front; the first position must be `bos_id`.",
            )
        if T > 1 and torch.equal(got[:, :-1], y[:, 1:]):
            return not_yet(
                lang,
                "has desplazado hacia la izquierda: la entrada en la posición t debe ser y[t-1], no y[t+1].",
                "you shifted to the left: the input at position t must be y[t-1], not y[t+1].",
            )
        if torch.equal(got[:, 1:], expected[:, 1:]):
            return not_yet(
                lang,
                f"el resto está bien, pero la primera columna debe ser `bos_id` (aquí {bos_id}) en todas las filas; "
                f"¿lo has escrito como un número fijo?",
                f"the rest is right, but the first column must be `bos_id` (here {bos_id}) in every row; did you "
                f"write it as a fixed number?",
            )
        return not_yet(
            lang,
            "la entrada debe ser `bos_id` seguido de `y` sin su último token: (bos, y_1, ..., y_{T-1}).",
            "the input must be `bos_id` followed by `y` without its last token: (bos, y_1, ..., y_{T-1}).",
        )
    return correct(
        lang,
        "En la posición t el decodificador lee y[t-1] y debe predecir y[t].",
        "At position t the decoder reads y[t-1] and must predict y[t].",
    )


def _cross_cases() -> list[tuple[Tensor, Tensor, Tensor, int]]:
    g = torch.Generator().manual_seed(6)
    cases = []
    for B, T, S, D, pad_id in ((2, 3, 5, 8, 0), (3, 4, 6, 4, 2)):
        x = torch.randn(B, T, D, generator=g)  # (B, T, D)
        memory = torch.randn(B, S, D, generator=g)  # (B, S, D)
        src = torch.randint(3, 20, (B, S), generator=g)  # (B, S)
        src[1, S - 2 :] = pad_id
        if pad_id != 0:
            src[0, 0] = 0  # a real token whose id happens to be 0: catches a hard-coded 0
            src[2, 1:] = pad_id  # a single real token
        cases.append((x, memory, src, pad_id))
    return cases


def _softmax_keys(scores: Tensor, mask: Tensor, dim: int = -1) -> Tensor:
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=dim)


@exercise("05.cross_attention")
def check_cross_attention(
    fn: Callable[[Tensor, Tensor, Tensor, int], tuple[Tensor, Tensor]], lang: str | None = None
) -> Feedback:
    """Check ``fn(x, memory, src, pad_id)`` -> ``(out, weights)``: one head of cross-attention.

    Queries are the decoder's ``x`` (B, T, D), keys and values the encoder's ``memory`` (B, S, D);
    source padding keys are masked. Shapes: out (B, T, D), weights (B, T, S).
    """
    for x, memory, src, pad_id in _cross_cases():
        got = attempt(lang, fn, x.clone(), memory.clone(), src.clone(), pad_id)
        if not (isinstance(got, (tuple, list)) and len(got) == 2 and all(isinstance(t, Tensor) for t in got)):
            return not_yet(
                lang,
                "tu función debe devolver dos tensores: `return out, weights`.",
                "your function must return two tensors: `return out, weights`.",
            )
        out, weights = got
        (B, T, D), S = x.shape, memory.size(1)
        if out.shape == (B, T, S) and weights.shape == (B, T, D) and S != D:
            return not_yet(
                lang,
                "devuelves `(weights, out)`: el orden es `out, weights`.",
                "you return `(weights, out)`: the order is `out, weights`.",
            )
        keys = (src != pad_id)[:, None, :]  # (B, 1, S)
        expected_out, expected = scaled_dot_product_attention(x, memory, memory, keys)  # (B, T, D), (B, T, S)
        if weights.shape == (B, S, T):
            return not_yet(
                lang,
                "los pesos tienen forma (B, S, T): has cambiado los papeles. Las consultas salen del decodificador "
                "(`x`, una fila por token de destino) y las claves y los valores, de la memoria.",
                "the weights have shape (B, S, T): you swapped the roles. The queries come from the decoder "
                "(`x`, one row per target token) and the keys and values from the memory.",
            )
        if weights.shape != (B, T, S):
            return not_yet(
                lang,
                f"los pesos deben tener forma (B, T, S) = {(B, T, S)} y tienen {tuple(weights.shape)}.",
                f"the weights must have shape (B, T, S) = {(B, T, S)}, they have {tuple(weights.shape)}.",
            )
        scores = x @ memory.transpose(1, 2)  # (B, T, S), unscaled
        causal = torch.ones(T, S, dtype=torch.bool).tril()  # (T, S)
        if not close(weights, expected):
            hints = [
                (
                    torch.softmax(scores / math.sqrt(D), dim=-1),
                    "falta la máscara: las claves de relleno del origen (`pad_id`) deben recibir peso 0.",
                    "the mask is missing: the source's padding keys (`pad_id`) must get weight 0.",
                ),
                (
                    _softmax_keys(scores / math.sqrt(D), keys & causal),
                    "la atención cruzada no lleva máscara causal: el origen entero se conoce desde el principio; solo "
                    "se bloquea el relleno.",
                    "cross-attention has no causal mask: the whole source is known from the start; only padding is "
                    "blocked.",
                ),
                (
                    _softmax_keys(scores, keys),
                    "falta dividir las puntuaciones por √D.",
                    "the scores must be divided by √D.",
                ),
                (_softmax_keys(scores / D, keys), "se divide por √D, no por D.", "divide by √D, not by D."),
                (
                    torch.softmax((scores / math.sqrt(D)).masked_fill(~keys, 0.0), dim=-1),
                    "las puntuaciones bloqueadas se rellenan con -inf, no con 0: exp(0) = 1 no es un peso nulo.",
                    "blocked scores are filled with -inf, not 0: exp(0) = 1 is not a zero weight.",
                ),
                (
                    _softmax_keys(scores / math.sqrt(D), keys, dim=-2),
                    "el softmax va sobre las claves (la última dimensión, S), no sobre las consultas.",
                    "the softmax goes over the keys (the last dimension, S), not over the queries.",
                ),
                (
                    _softmax_keys(scores / math.sqrt(D), (src != 0)[:, None, :]),
                    f"usa el argumento `pad_id` en lugar de un 0 fijo: aquí el relleno es el id {pad_id}.",
                    f"use the `pad_id` argument instead of a fixed 0: here padding is id {pad_id}.",
                ),
            ]
            name_mistake(lang, weights, hints)
            return not_yet(
                lang,
                "los pesos deben ser softmax(x · memoryᵀ / √D) sobre las claves, con -inf en las claves de relleno.",
                "the weights must be softmax(x · memoryᵀ / √D) over the keys, with -inf at the padding keys.",
            )
        if not close(out, expected_out):
            return not_yet(
                lang,
                "los pesos están bien, pero la salida no: sin proyecciones, los valores son también la memoria; "
                "la salida los combina con esos pesos, de forma (B, T, D).",
                "the weights are right but the output is not: without projections the values are the memory too; "
                "the output combines them with those weights, with shape (B, T, D).",
            )
    return correct(
        lang,
        "Cada token de destino reparte su atención entre los tokens de origen que no son relleno.",
        "Each target token spreads its attention over the source tokens that are not padding.",
    )
