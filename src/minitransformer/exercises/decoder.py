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
from ._core import (
    COMMON_HINTS,
    Feedback,
    Hints,
    attempt,
    by_key,
    close,
    correct,
    diagnose,
    exercise,
    not_a_tensor,
    tensor,
)

__all__ = ["HINTS", "check_shift_right", "check_cross_attention", "check_decoder_layer"]

HINTS = Hints(
    {
        **COMMON_HINTS,
        # shift right
        "shift_modifies_y": (
            "tu función modifica `y`: construye un tensor nuevo (por ejemplo con `torch.cat`) en lugar de "
            "escribir dentro de `y`.",
            "your function modifies `y`: build a new tensor (for example with `torch.cat`) instead of writing "
            "into `y`.",
        ),
        "shift_keeps_last": (
            "la entrada tiene un token de más: el último token de `y` no se usa como entrada (no queda nada "
            "que predecir después de él); quita la última columna con `y[:, :-1]`.",
            "the input has one token too many: the last token of `y` is not used as an input (there is "
            "nothing left to predict after it); drop the last column with `y[:, :-1]`.",
        ),
        "shift_shape": (
            "la entrada debe tener la misma forma que `y`, {want}, y tiene {got}.",
            "the input must have the same shape as `y`, {want}, it has {got}.",
        ),
        "shift_float_ids": (
            "los ids de los tokens son enteros: conserva el dtype de `y` (por ejemplo "
            "`torch.full(..., dtype=y.dtype)`).",
            "token ids are integers: keep the dtype of `y` (for example `torch.full(..., dtype=y.dtype)`).",
        ),
        "shift_unshifted": (
            "devuelves `y` sin desplazar: en la posición t la entrada debe ser el token anterior, y[t-1].",
            "you return `y` unshifted: at position t the input must be the previous token, y[t-1].",
        ),
        "shift_roll": (
            "`torch.roll` lleva el último token al principio; la primera posición debe ser `bos_id`.",
            "`torch.roll` brings the last token to the front; the first position must be `bos_id`.",
        ),
        "shift_left": (
            "has desplazado hacia la izquierda: la entrada en la posición t debe ser y[t-1], no y[t+1].",
            "you shifted to the left: the input at position t must be y[t-1], not y[t+1].",
        ),
        "shift_fixed_bos": (
            "el resto está bien, pero la primera columna debe ser `bos_id` (aquí {bos_id}) en todas las filas; "
            "¿lo has escrito como un número fijo?",
            "the rest is right, but the first column must be `bos_id` (here {bos_id}) in every row; did you "
            "write it as a fixed number?",
        ),
        "shift_wrong": (
            "la entrada debe ser `bos_id` seguido de `y` sin su último token: (bos, y_1, ..., y_{{T-1}}).",
            "the input must be `bos_id` followed by `y` without its last token: (bos, y_1, ..., y_{{T-1}}).",
        ),
        # cross-attention
        "cross_not_a_pair": (
            "tu función debe devolver dos tensores: `return out, weights`.",
            "your function must return two tensors: `return out, weights`.",
        ),
        "cross_swapped_outputs": (
            "devuelves `(weights, out)`: el orden es `out, weights`.",
            "you return `(weights, out)`: the order is `out, weights`.",
        ),
        "cross_roles_swapped": (
            "los pesos tienen forma (B, S, T): has cambiado los papeles. Las consultas salen del decodificador "
            "(`x`, una fila por token de destino) y las claves y los valores, de la memoria.",
            "the weights have shape (B, S, T): you swapped the roles. The queries come from the decoder "
            "(`x`, one row per target token) and the keys and values from the memory.",
        ),
        "cross_weights_shape": (
            "los pesos deben tener forma (B, T, S) = {want} y tienen {got}.",
            "the weights must have shape (B, T, S) = {want}, they have {got}.",
        ),
        "cross_no_mask": (
            "falta la máscara: las claves de relleno del origen (`pad_id`) deben recibir peso 0.",
            "the mask is missing: the source's padding keys (`pad_id`) must get weight 0.",
        ),
        "cross_causal": (
            "la atención cruzada no lleva máscara causal: el origen entero se conoce desde el principio; solo "
            "se bloquea el relleno.",
            "cross-attention has no causal mask: the whole source is known from the start; only padding is blocked.",
        ),
        "cross_no_scale": ("falta dividir las puntuaciones por √D.", "the scores must be divided by √D."),
        "cross_scale_d": ("se divide por √D, no por D.", "divide by √D, not by D."),
        "cross_fill_zero": (
            "las puntuaciones bloqueadas se rellenan con -inf, no con 0: exp(0) = 1 no es un peso nulo.",
            "blocked scores are filled with -inf, not 0: exp(0) = 1 is not a zero weight.",
        ),
        "cross_wrong_axis": (
            "el softmax va sobre las claves (la última dimensión, S), no sobre las consultas.",
            "the softmax goes over the keys (the last dimension, S), not over the queries.",
        ),
        "cross_fixed_pad": (
            "usa el argumento `pad_id` en lugar de un 0 fijo: aquí el relleno es el id {pad_id}.",
            "use the `pad_id` argument instead of a fixed 0: here padding is id {pad_id}.",
        ),
        "cross_wrong_weights": (
            "los pesos deben ser softmax(x · memoryᵀ / √D) sobre las claves, con -inf en las claves de relleno.",
            "the weights must be softmax(x · memoryᵀ / √D) over the keys, with -inf at the padding keys.",
        ),
        "cross_wrong_output": (
            "los pesos están bien, pero la salida no: sin proyecciones, los valores son también la memoria; "
            "la salida los combina con esos pesos, de forma (B, T, D).",
            "the weights are right but the output is not: without projections the values are the memory too; "
            "the output combines them with those weights, with shape (B, T, D).",
        ),
        # decoder layer
        "layer_tuple": (
            "devuelve solo el tensor de salida (B, T, D), no una tupla.",
            "return only the output tensor (B, T, D), not a tuple.",
        ),
        "layer_kv_from_x": (
            "en la atención cruzada, las claves y los valores salen de la memoria (`memory`), no del decodificador.",
            "in cross-attention, the keys and values come from the memory (`memory`), not from the decoder.",
        ),
        "layer_query_from_input": (
            "la consulta de la atención cruzada es la salida de la primera subcapa (x1), no la entrada x.",
            "the query of cross-attention is the output of the first sublayer (x1), not the input x.",
        ),
        "layer_no_tgt_mask": (
            "la autoatención necesita `tgt_mask`: sin ella cada posición ve el futuro.",
            "the self-attention needs `tgt_mask`: without it every position sees the future.",
        ),
        "layer_no_memory_mask": (
            "la atención cruzada necesita `memory_mask`: sin ella el decodificador atiende también al relleno del "
            "origen.",
            "cross-attention needs `memory_mask`: without it the decoder also attends to the source's padding.",
        ),
        "layer_no_masks": (
            "ninguna de las dos atenciones recibe su máscara: la autoatención necesita `tgt_mask` y la atención "
            "cruzada `memory_mask`.",
            "neither attention gets its mask: the self-attention needs `tgt_mask` and cross-attention `memory_mask`.",
        ),
        "layer_one_norm": (
            "cada subcapa tiene su propia LayerNorm: `norm1`, `norm2` y `norm3`, en ese orden.",
            "each sublayer has its own LayerNorm: `norm1`, `norm2` and `norm3`, in that order.",
        ),
        "layer_pre_ln": (
            "eso es pre-LN; la capa del artículo (post-LN) normaliza después de sumar: LayerNorm(x + subcapa(x)).",
            "that is pre-LN; the paper's layer (post-LN) normalises after the sum: LayerNorm(x + sublayer(x)).",
        ),
        "layer_no_residual": (
            "falta la conexión residual: cada subcapa da LayerNorm(x + subcapa(x)), no LayerNorm(subcapa(x)).",
            "the residual connection is missing: each sublayer gives LayerNorm(x + sublayer(x)), not "
            "LayerNorm(sublayer(x)).",
        ),
        "layer_no_cross": (
            "falta la atención cruzada entre la autoatención y la red prealimentada.",
            "cross-attention is missing between the self-attention and the feed-forward network.",
        ),
        "layer_no_last_norm": (
            "falta la última LayerNorm (`norm3`) tras la red prealimentada.",
            "the last LayerNorm (`norm3`) after the feed-forward network is missing.",
        ),
        "layer_wrong": (
            "la salida no coincide con la capa del artículo. Repasa las tres subcapas en orden (autoatención "
            "enmascarada, atención cruzada sobre la memoria, red prealimentada): qué recibe cada una, con qué "
            "máscara, y que cada una lleva su residuo y su propia LayerNorm.",
            "the output does not match the paper's layer. Go over the three sublayers in order (masked "
            "self-attention, cross-attention over the memory, feed-forward): what each one takes, with which mask, "
            "and that each has its residual and its own LayerNorm.",
        ),
    }
)


# ---- 05.shift_right ------------------------------------------------------------------------------


def _shift_cases() -> list[tuple[Tensor, int]]:
    g = torch.Generator().manual_seed(5)
    y1 = torch.randint(3, 20, (3, 6), generator=g)
    y1[1, 4:] = 0  # padding at the end of one row
    y1[2, 2:] = 0
    y2 = torch.randint(3, 20, (2, 1), generator=g)
    return [(y1, 1), (y1, 2), (y2, 1)]


def _shift_mistakes(y: Tensor, bos_id: int) -> dict[str, Tensor]:
    """What each typical mistake gives on ``y`` (one it cannot be told apart from on this case is left out)."""
    mistakes = {"shift_unshifted": y}
    if y.size(1) > 1:
        mistakes["shift_roll"] = torch.roll(y, 1, dims=1)
    return mistakes


@exercise("05.shift_right")
def check_shift_right(fn: Callable[[Tensor, int], Tensor], lang: str | None = None) -> Feedback:
    """Check ``fn(y, bos_id)``: <bos> followed by y without its last token, shape (B, T)."""
    for y, bos_id in _shift_cases():
        y_in = y.clone()
        got = attempt(lang, fn, y_in, bos_id)
        if not torch.equal(y_in, y):
            return HINTS(lang, "shift_modifies_y")
        if not isinstance(got, Tensor):
            return not_a_tensor(lang, got)
        B, T = y.shape
        expected = torch.cat([torch.full((B, 1), bos_id, dtype=y.dtype), y[:, :-1]], dim=1)  # (B, T)
        if got.shape == (B, T + 1):
            return HINTS(lang, "shift_keeps_last")
        if got.shape != (B, T):
            return HINTS(lang, "shift_shape", want=(B, T), got=tuple(got.shape))
        if got.is_floating_point():
            return HINTS(lang, "shift_float_ids")
        if torch.equal(got, expected):
            continue
        key = diagnose([got], by_key([_shift_mistakes(y, bos_id)]), same=torch.equal)
        if key is not None:
            return HINTS(lang, key)
        if T > 1 and torch.equal(got[:, :-1], y[:, 1:]):
            return HINTS(lang, "shift_left")
        if torch.equal(got[:, 1:], expected[:, 1:]):
            return HINTS(lang, "shift_fixed_bos", bos_id=bos_id)
        return HINTS(lang, "shift_wrong")
    return correct(
        lang,
        "En la posición t el decodificador lee y[t-1] y debe predecir y[t].",
        "At position t the decoder reads y[t-1] and must predict y[t].",
    )


# ---- 05.cross_attention --------------------------------------------------------------------------


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


def _cross_mistakes(x: Tensor, memory: Tensor, src: Tensor, pad_id: int) -> dict[str, Tensor]:
    """The weights (B, T, S) each typical mistake gives."""
    _, T, D = x.shape
    S = memory.size(1)
    keys = (src != pad_id)[:, None, :]  # (B, 1, S)
    scores = x @ memory.transpose(1, 2)  # (B, T, S), unscaled
    causal = torch.ones(T, S, dtype=torch.bool).tril()  # (T, S)
    return {
        "cross_no_mask": torch.softmax(scores / math.sqrt(D), dim=-1),
        "cross_causal": _softmax_keys(scores / math.sqrt(D), keys & causal),
        "cross_no_scale": _softmax_keys(scores, keys),
        "cross_scale_d": _softmax_keys(scores / D, keys),
        "cross_fill_zero": torch.softmax((scores / math.sqrt(D)).masked_fill(~keys, 0.0), dim=-1),
        "cross_wrong_axis": _softmax_keys(scores / math.sqrt(D), keys, dim=-2),
        "cross_fixed_pad": _softmax_keys(scores / math.sqrt(D), (src != 0)[:, None, :]),
    }


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
            return HINTS(lang, "cross_not_a_pair")
        out, weights = got
        (B, T, D), S = x.shape, memory.size(1)
        if out.shape == (B, T, S) and weights.shape == (B, T, D) and S != D:
            return HINTS(lang, "cross_swapped_outputs")
        keys = (src != pad_id)[:, None, :]  # (B, 1, S)
        expected_out, expected = scaled_dot_product_attention(x, memory, memory, keys)  # (B, T, D), (B, T, S)
        if weights.shape == (B, S, T):
            return HINTS(lang, "cross_roles_swapped")
        if weights.shape != (B, T, S):
            return HINTS(lang, "cross_weights_shape", want=(B, T, S), got=tuple(weights.shape))
        if not close(weights, expected):
            key = diagnose([weights], by_key([_cross_mistakes(x, memory, src, pad_id)]))
            return HINTS(lang, key or "cross_wrong_weights", pad_id=pad_id)
        if not close(out, expected_out):
            return HINTS(lang, "cross_wrong_output")
    return correct(
        lang,
        "Cada token de destino reparte su atención entre los tokens de origen que no son relleno.",
        "Each target token spreads its attention over the source tokens that are not padding.",
    )


# ---- 05.decoder_layer ----------------------------------------------------------------------------


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


def _layer_mistakes(
    layer: DecoderLayer, x: Tensor, memory: Tensor, tgt_mask: Tensor, memory_mask: Tensor
) -> dict[str, Tensor]:
    """What each typical mistake computes, by its hint's key."""
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
    return {
        "layer_kv_from_x": post(kv_from_x=True),
        "layer_query_from_input": post(query_from_input=True),
        "layer_no_tgt_mask": post(self_mask=None),
        "layer_no_memory_mask": post(cross_mask=None),
        "layer_no_masks": post(self_mask=None, cross_mask=None),
        "layer_one_norm": post(norms=(n1, n1, n1)),
        "layer_pre_ln": pre,
        "layer_no_residual": no_residual,
        "layer_no_cross": no_cross,
        "layer_no_last_norm": no_last_norm,
    }


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
        mistakes = _layer_mistakes(layer, x, memory, tgt_mask, memory_mask)
    if isinstance(got, tuple) and len(got) > 0 and isinstance(got[0], Tensor):
        return HINTS(lang, "layer_tuple")
    got = tensor(lang, got, x.shape, ", la de `x`", ", that of `x`")
    if close(got, expected):
        return correct(
            lang,
            "Autoatención enmascarada, atención cruzada y red prealimentada, cada una con residuo y LayerNorm.",
            "Masked self-attention, cross-attention and feed-forward, each with residual and LayerNorm.",
        )
    key = diagnose([got], by_key([mistakes]))
    return HINTS(lang, key or "layer_wrong")
