"""Checkers for the introduction's exercises (notebook 00): shapes and parameter counts."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch

from ..attention import MultiHeadAttention
from ..model import Transformer, TransformerConfig
from ._core import Feedback, Hints, attempt, correct, diagnose, exercise

__all__ = ["HINTS", "check_attention_shapes", "check_mha_parameters"]

HINTS = Hints(
    {
        "not_triple": (
            "devuelve tres formas, `(encoder, decoder_self, cross)`, y cada una debe ser una tupla de 4 enteros.",
            "return three shapes, `(encoder, decoder_self, cross)`, each a tuple of 4 integers.",
        ),
        "no_heads": (
            "cada capa da un mapa por cabeza: las formas tienen 4 ejes, (B, H, consultas, claves).",
            "each layer gives one map per head: the shapes have 4 axes, (B, H, queries, keys).",
        ),
        "encoder": (
            "en la autoatención del codificador (encoder), la frase de origen se mira a sí misma: (B, H, S, S).",
            "in the encoder's self-attention, the source sentence looks at itself: (B, H, S, S).",
        ),
        "decoder_self": (
            "en la autoatención del decodificador (decoder), la frase de destino se mira a sí misma: (B, H, T, T).",
            "in the decoder's self-attention, the target sentence looks at itself: (B, H, T, T).",
        ),
        "cross_swapped": (
            "en la atención cruzada (cross-attention) las consultas vienen del decodificador (T) y las "
            "claves del codificador (S): (B, H, T, S), no (B, H, S, T).",
            "in cross-attention the queries come from the decoder (T) and the keys from the encoder (S): "
            "(B, H, T, S), not (B, H, S, T).",
        ),
        "cross": (
            "en la atención cruzada, el destino (consultas, T) mira al origen (claves, S): (B, H, T, S).",
            "in cross-attention, the target (queries, T) looks at the source (keys, S): (B, H, T, S).",
        ),
        "not_int": (
            "devuelve un número entero de parámetros.",
            "return an integer number of parameters.",
        ),
        "no_bias": (
            "cada una de las cuatro proyecciones es `nn.Linear(d_model, d_model)`, con sesgo (bias): "
            "suma también d_model por proyección.",
            "each of the four projections is `nn.Linear(d_model, d_model)`, with a bias: also add "
            "d_model per projection.",
        ),
        "three_projections": (
            "hay cuatro proyecciones: W_Q, W_K, W_V y también la de salida, W_O.",
            "there are four projections: W_Q, W_K, W_V and also the output one, W_O.",
        ),
        "per_head": (
            "el número no depende de h: las cabezas se reparten las d_model columnas de cada "
            "proyección, no las multiplican.",
            "the count does not depend on h: the heads share the d_model columns of each projection, "
            "they do not multiply them.",
        ),
        "wrong_count": (
            "el número no coincide con el de `MultiHeadAttention(d_model, n_heads)` (con d_model = {d}, "
            "n_heads = {h} se esperaban {want}, devuelves {got}); cuenta pesos y sesgos de cada `nn.Linear`.",
            "the count does not match `MultiHeadAttention(d_model, n_heads)` (with d_model = {d}, n_heads = {h} "
            "the count is {want}, you return {got}); count the weights and biases of each `nn.Linear`.",
        ),
    }
)


# ---- shared by the exercises below ---------------------------------------------------------------


def _shape(x: Any) -> tuple[int, ...] | None:
    try:
        shape = tuple(int(d) for d in x)
    except (TypeError, ValueError):
        return None
    return shape


# ---- 00.attention_shapes -------------------------------------------------------------------------


_SHAPE_CASES = ((2, 7, 5, 4), (3, 4, 6, 2))  # (B, S, T, H), all different


@exercise("00.attention_shapes")
def check_attention_shapes(attention_shapes: Callable[[int, int, int, int], Any], lang: str | None = None) -> Feedback:
    """Exercise: the shapes of the attention maps of one forward pass.

    ``attention_shapes(B, S, T, n_heads)`` returns ``(encoder, decoder_self, cross)``, the shape
    of one layer's encoder self-attention, decoder self-attention and cross-attention maps.
    The right answer is measured on a real :class:`~minitransformer.model.Transformer`.
    """
    for B, S, T, H in _SHAPE_CASES:
        config = TransformerConfig(
            src_vocab_size=11,
            tgt_vocab_size=13,
            d_model=8 * H,
            n_heads=H,
            d_ff=16,
            n_layers=1,
            dropout=0.0,
            max_len=16,
        )
        model = Transformer(config).eval()  # the shapes do not depend on the weights
        g = torch.Generator().manual_seed(0)
        src = torch.randint(1, 11, (B, S), generator=g)
        tgt = torch.randint(1, 13, (B, T), generator=g)
        with torch.no_grad():
            _, maps = model(src, tgt, return_attention=True)
        want = (tuple(maps.encoder[0].shape), tuple(maps.decoder_self[0].shape), tuple(maps.cross[0].shape))
        got = attempt(lang, attention_shapes, B, S, T, H)
        if not isinstance(got, (tuple, list)) or len(got) != 3:
            return HINTS(lang, "not_triple")
        shapes = [_shape(s) for s in got]
        if any(s is None for s in shapes):
            return HINTS(lang, "not_triple")
        if any(len(s) == 3 for s in shapes):
            return HINTS(lang, "no_heads")
        enc, dec, cross = shapes
        if enc != want[0]:
            return HINTS(lang, "encoder")
        if dec != want[1]:
            return HINTS(lang, "decoder_self")
        if cross == (B, H, S, T):
            return HINTS(lang, "cross_swapped")
        if cross != want[2]:
            return HINTS(lang, "cross")
    return correct(
        lang,
        "Cada mapa tiene una fila por consulta y una columna por clave.",
        "Each map has one row per query and one column per key.",
    )


# ---- 00.mha_parameters ---------------------------------------------------------------------------


_MHA_CASES = ((512, 8), (64, 4), (30, 5))  # (d_model, n_heads)


def _mha_mistakes(D: int, H: int, right: int) -> list[tuple[str, list[int]]]:
    """What each typical mistake counts for ``MultiHeadAttention(D, H)``, whose right count is ``right``."""
    Dh = D // H
    per_head = [H * right, 4 * H * D * D, 4 * (D * Dh + Dh), 4 * D * Dh]  # one head's, or H times
    return [("per_head", [n]) for n in per_head] + [
        ("no_bias", [4 * D * D]),
        ("three_projections", [3 * (D * D + D)]),
        ("three_projections", [3 * D * D]),
    ]


@exercise("00.mha_parameters")
def check_mha_parameters(count: Callable[[int, int], Any], lang: str | None = None) -> Feedback:
    """Exercise: the number of parameters of ``MultiHeadAttention(d_model, n_heads)``."""
    for D, H in _MHA_CASES:
        want = sum(p.numel() for p in MultiHeadAttention(D, H).parameters())
        got = attempt(lang, count, D, H)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if isinstance(got, float) and math.isfinite(got) and got.is_integer():
            got = int(got)
        if not isinstance(got, int) or isinstance(got, bool):
            return HINTS(lang, "not_int")
        if got == want:
            continue
        key = diagnose([got], _mha_mistakes(D, H, want), same=operator.eq)
        if key is not None:
            return HINTS(lang, key)
        return HINTS(lang, "wrong_count", d=D, h=H, want=want, got=got)
    return correct(
        lang,
        "4·(d_model² + d_model): 1 050 624 para el modelo base (d_model = 512).",
        "4·(d_model² + d_model): 1,050,624 for the base model (d_model = 512).",
    )
