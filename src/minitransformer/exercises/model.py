"""Checkers for the full-model notebook (06): scaled embeddings, parameter count, output probabilities.

The right answers come from the package (:mod:`minitransformer.model`, built on the ``meta`` device for the
parameter count) and from PyTorch; each typical mistake gets its own hint.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable

import torch
from torch import Tensor

from ..i18n import decimal_commas
from ..model import Transformer, TransformerConfig
from ..positional import sinusoidal_encoding
from ._core import Feedback, Hints, attempt, by_key, close, correct, diagnose, exercise, stop, tensor, type_name

__all__ = ["HINTS", "check_scaled_embeddings", "check_model_params", "check_output_probabilities"]

HINTS = Hints(
    {
        # embeddings
        "embed_modifies": (
            "tu función modifica `table` o `pe` (¿un `*=` o `mul_`?): calcula un tensor nuevo.",
            "your function modifies `table` or `pe` (a `*=` or `mul_`?): compute a new tensor.",
        ),
        "embed_no_scale": (
            "falta el factor: multiplica los embeddings por √D (`math.sqrt(D)`) antes de sumar la codificación "
            "posicional.",
            "the factor is missing: multiply the embeddings by √D (`math.sqrt(D)`) before adding the positional "
            "encoding.",
        ),
        "embed_scale_d": ("el factor es √D, no D.", "the factor is √D, not D."),
        "embed_divided": (
            "hay que multiplicar por √D, no dividir: los embeddings son pequeños y hay que agrandarlos.",
            "multiply by √D, do not divide: the embeddings are small and must be made larger.",
        ),
        "embed_scaled_pe": (
            "solo se escala el embedding, no la codificación posicional.",
            "only the embedding is scaled, not the positional encoding.",
        ),
        "embed_pe_by_token": (
            "la codificación posicional se indexa por la posición (0, 1, …, T-1), no por el id del token: `pe[:T]`.",
            "the positional encoding is indexed by position (0, 1, …, T-1), not by the token id: `pe[:T]`.",
        ),
        "embed_no_pe": (
            "falta sumar la codificación posicional `pe[:T]`.",
            "the positional encoding `pe[:T]` is not added.",
        ),
        "embed_wrong": (
            "la salida no coincide: cada token toma su fila de `table`, escalada como en el artículo, y suma la "
            "codificación de su posición (0, 1, …, T − 1).",
            "the output does not match: each token takes its row of `table`, scaled as in the paper, and adds "
            "the encoding of its position (0, 1, …, T − 1).",
        ),
        # parameter count
        "params_not_whole": (
            "tu función debe devolver un número entero, no {shown}.",
            "your function must return a whole number, not {shown}.",
        ),
        "params_final_norms": (
            "en pre-LN cada pila (codificador y decodificador) termina con una LayerNorm más: 2 × 2D.",
            "in pre-LN each stack (encoder and decoder) ends with one more LayerNorm: 2 × 2D.",
        ),
        "params_final_norms_post": (
            "en post-LN (el artículo) no hay LayerNorm final en las pilas: solo en pre-LN.",
            "in post-LN (the paper) the stacks have no final LayerNorm: only in pre-LN.",
        ),
        "params_output_bias": (
            "la proyección de salida comparte la matriz, pero conserva su sesgo.",
            "the output projection shares the matrix but keeps its bias.",
        ),
        "params_shared_twice": (
            "los pesos compartidos cuentan una sola vez: hay una única matriz V × D.",
            "shared weights count once: there is a single V × D matrix.",
        ),
        "params_shared_thrice": (
            "los pesos compartidos cuentan una sola vez: hay una única matriz V × D, no tres.",
            "shared weights count once: there is a single V × D matrix, not three.",
        ),
        "params_one_attention": (
            "cada capa del decodificador tiene dos atenciones (autoatención y atención cruzada) y tres LayerNorm.",
            "each decoder layer has two attentions (self-attention and cross-attention) and three LayerNorms.",
        ),
        "params_two_norms": (
            "cada capa del decodificador tiene tres LayerNorm, una por subcapa.",
            "each decoder layer has three LayerNorms, one per sublayer.",
        ),
        "params_norm_gain_only": (
            "una LayerNorm tiene 2D parámetros: ganancia (weight) y sesgo (bias).",
            "a LayerNorm has 2D parameters: gain (weight) and bias.",
        ),
        "params_no_norms": (
            "faltan las LayerNorm (2D parámetros cada una).",
            "the LayerNorms are missing (2D parameters each).",
        ),
        "params_ff_bias": (
            "la red prealimentada tiene dos capas lineales con sesgo: d_ff sesgos en la primera y D en la segunda.",
            "the feed-forward network has two linear layers with a bias: d_ff biases in the first and D in the second.",
        ),
        "params_attention_bias": (
            "las cuatro proyecciones de cada atención tienen sesgo: D más por proyección.",
            "the four projections of every attention have a bias: D more per projection.",
        ),
        "params_three_projections": (
            "una atención multicabeza tiene cuatro proyecciones D × D con sesgo: W_q, W_k, W_v y W_o.",
            "a multi-head attention has four D × D projections with bias: W_q, W_k, W_v and W_o.",
        ),
        "params_no_bias": (
            "las capas lineales (y la proyección de salida) tienen sesgo: cuenta también los sesgos.",
            "the linear layers (and the output projection) have a bias: count the biases too.",
        ),
        "params_no_bias_but_output": (
            "las capas lineales tienen sesgo: cuenta también los sesgos de las atenciones y de la red prealimentada.",
            "the linear layers have a bias: count the biases of the attentions and of the feed-forward network too.",
        ),
        "params_too_many": ("{where}: te sobran {diff} parámetros.", "{where}: you have {diff} parameters too many."),
        "params_too_few": ("{where}: te faltan {diff} parámetros.", "{where}: you are {diff} parameters short."),
        # output probabilities
        "out_logits": (
            "devuelves los logits: falta el softmax para convertirlos en probabilidades.",
            "you return the logits: the softmax that turns them into probabilities is missing.",
        ),
        "out_log_softmax": (
            "`log_softmax` da log-probabilidades (negativas); aquí se piden probabilidades: `torch.softmax`.",
            "`log_softmax` gives log-probabilities (negative); here probabilities are asked for: `torch.softmax`.",
        ),
        "out_axis_positions": (
            "el softmax va sobre el vocabulario, la última dimensión (`dim=-1`), no sobre las posiciones.",
            "the softmax goes over the vocabulary, the last dimension (`dim=-1`), not over the positions.",
        ),
        "out_axis_batch": (
            "el softmax va sobre el vocabulario, la última dimensión (`dim=-1`), no sobre el lote.",
            "the softmax goes over the vocabulary, the last dimension (`dim=-1`), not over the batch.",
        ),
        "out_no_bias": ("falta sumar el sesgo `bias`.", "the bias `bias` is not added."),
        "out_sigmoid": (
            "la sigmoide no da una distribución: usa el softmax, que hace que cada fila sume 1.",
            "the sigmoid does not give a distribution: use the softmax, which makes each row add up to 1.",
        ),
        "out_wrong": (
            "la salida no coincide: en cada posición, los logits (proyección con `weight` y `bias`) se convierten "
            "en una probabilidad por token del vocabulario, que suman 1.",
            "the output does not match: at every position the logits (projection with `weight` and `bias`) "
            "become one probability per vocabulary token, adding up to 1.",
        ),
    }
)


# ---- 06.embed ------------------------------------------------------------------------------------


def _embedding_cases() -> list[tuple[Tensor, Tensor, Tensor]]:
    g = torch.Generator().manual_seed(11)
    cases = []
    for B, T, V, D, max_len in ((3, 5, 11, 8, 20), (2, 7, 13, 18, 9)):
        tokens = torch.randint(0, V, (B, T), generator=g)  # (B, T)
        table = torch.randn(V, D, generator=g) / math.sqrt(D)  # (V, D)
        cases.append((tokens, table, sinusoidal_encoding(max_len, D)))
    return cases


def _embedding_mistakes(emb: Tensor, positions: Tensor, by_token: Tensor, D: int) -> dict[str, Tensor]:
    """What each typical mistake gives, from the rows ``emb`` (B, T, D), the positions' encoding
    ``positions`` (T, D) and the encoding indexed by token ids instead, ``by_token`` (B, T, D)."""
    return {
        "embed_no_scale": emb + positions,
        "embed_scale_d": emb * D + positions,
        "embed_divided": emb / math.sqrt(D) + positions,
        "embed_scaled_pe": (emb + positions) * math.sqrt(D),
        "embed_pe_by_token": emb * math.sqrt(D) + by_token,
        "embed_no_pe": emb * math.sqrt(D),
    }


@exercise("06.embed")
def check_scaled_embeddings(fn: Callable[[Tensor, Tensor, Tensor], Tensor], lang: str | None = None) -> Feedback:
    """Check ``fn(tokens, table, pe)`` = table[tokens] · √D + pe[:T], shape (B, T, D)."""
    for tokens, table, pe in _embedding_cases():
        args = (tokens.clone(), table.clone(), pe.clone())
        got = attempt(lang, fn, *args)
        if not (torch.equal(args[1], table) and torch.equal(args[2], pe)):
            return HINTS(lang, "embed_modifies")
        (B, T), D = tokens.shape, table.size(1)
        got = tensor(
            lang,
            got,
            (B, T, D),
            " = (B, T, D); la codificación posicional se recorta a las T primeras posiciones",
            " = (B, T, D); the positional encoding is cut to the first T positions",
        )
        emb = table[tokens]  # (B, T, D)
        positions = pe[:T]  # (T, D)
        expected = emb * math.sqrt(D) + positions  # (B, T, D)
        if close(got, expected):
            continue
        mistakes = by_key([_embedding_mistakes(emb, positions, pe[tokens], D)])
        return HINTS(lang, diagnose([got], mistakes) or "embed_wrong")
    return correct(
        lang,
        "El token, escalado por √D, y su posición quedan en la misma escala.",
        "The token, scaled by √D, and its position end up on the same scale.",
    )


# ---- 06.model_params -----------------------------------------------------------------------------


_PARAM_CASES = ((37000, 512, 2048, 6, False), (100, 16, 64, 3, True), (50, 24, 40, 3, False), (1000, 64, 256, 1, True))


def _count_model(V: int, D: int, F: int, N: int, norm_first: bool) -> int:
    config = TransformerConfig(
        src_vocab_size=V,
        tgt_vocab_size=V,
        d_model=D,
        n_heads=4,
        d_ff=F,
        n_layers=N,
        norm_first=norm_first,
        share_embeddings=True,
        tie_output=True,
    )
    with torch.device("meta"):
        return Transformer(config).num_parameters()


def _params_mistakes(V: int, D: int, F: int, N: int, norm_first: bool) -> dict[str, int]:
    """What each typical mistake counts, by its hint's key; a mistake that does not apply to this
    configuration counts right. ``right`` is the model's own count."""
    attn, ln = 4 * (D * D + D), 2 * D
    final = 2 * ln if norm_first else 0
    n_ln = 5 * N + (2 if norm_first else 0)
    right = _count_model(V, D, F, N, norm_first)
    no_bias = V * D + N * (4 * D * D + 2 * D * F + 2 * ln) + N * (8 * D * D + 2 * D * F + 3 * ln) + final
    return {
        "params_final_norms": right - final,
        "params_final_norms_post": right + (0 if norm_first else 4 * D),
        "params_output_bias": right - V,
        "params_shared_twice": right + V * D,
        "params_shared_thrice": right + 2 * V * D,
        "params_one_attention": right - N * (attn + ln),
        "params_two_norms": right - N * ln,
        "params_norm_gain_only": right - n_ln * D,
        "params_no_norms": right - n_ln * ln,
        "params_ff_bias": right - 2 * N * (F + D),
        "params_attention_bias": right - 3 * N * 4 * D,
        "params_three_projections": right - 3 * N * (D * D + D),
        "params_no_bias": no_bias,
        "params_no_bias_but_output": no_bias + V,
    }


def _whole_number(lang: str, got) -> int:
    """The student's count as an int; anything that is not a whole number stops the check."""
    try:
        value = int(got)
        ok = value == got and not isinstance(got, bool)
    except (TypeError, ValueError, OverflowError, RuntimeError):
        ok = False
    if not ok:
        shown = decimal_commas(str(got), lang) if isinstance(got, float) else type_name(got)
        raise stop(HINTS(lang, "params_not_whole", shown=shown))
    return value


@exercise("06.model_params")
def check_model_params(fn: Callable[[int, int, int, int, bool], int], lang: str | None = None) -> Feedback:
    """Check ``fn(V, D, F, N, norm_first)`` against the parameter count of a tied Transformer.

    Every case is run first; a typical mistake is named only when it explains all of them (with
    d_ff = 4·D, missing feed-forward biases and missing LayerNorms give the same count).
    """
    values = [_whole_number(lang, attempt(lang, fn, *case)) for case in _PARAM_CASES]
    expected = [_count_model(*case) for case in _PARAM_CASES]
    if values == expected:
        return correct(
            lang,
            "Y no depende del número de cabezas: las H cabezas se reparten las mismas matrices D × D.",
            "And it does not depend on the number of heads: the H heads share out the same D × D matrices.",
        )
    # a mistake is named only when it explains every case: with d_ff = 4·D, missing feed-forward biases and
    # missing LayerNorms give the same count on one case
    key = diagnose(values, by_key([_params_mistakes(*case) for case in _PARAM_CASES]), same=operator.eq)
    if key is not None:
        return HINTS(lang, key)
    (V, D, F, N, norm_first), value, want = next(
        (case, v, w) for case, v, w in zip(_PARAM_CASES, values, expected) if v != w
    )
    where = f"(V={V}, D={D}, F={F}, N={N}, norm_first={norm_first})"
    diff = value - want
    return (
        HINTS(lang, "params_too_many", where=where, diff=diff)
        if diff > 0
        else HINTS(lang, "params_too_few", where=where, diff=-diff)
    )


# ---- 06.output_probabilities ---------------------------------------------------------------------


def _output_cases() -> list[tuple[Tensor, Tensor, Tensor]]:
    g = torch.Generator().manual_seed(12)
    cases = []
    for B, T, D, V in ((2, 3, 8, 11), (3, 4, 6, 5)):
        cases.append((torch.randn(B, T, D, generator=g), torch.randn(V, D, generator=g), torch.randn(V, generator=g)))
    return cases


def _output_mistakes(h: Tensor, weight: Tensor, bias: Tensor) -> dict[str, Tensor]:
    """What each typical mistake gives, (B, T, V)."""
    logits = h @ weight.T + bias  # (B, T, V)
    return {
        "out_logits": logits,
        "out_log_softmax": torch.log_softmax(logits, dim=-1),
        "out_axis_positions": torch.softmax(logits, dim=1),
        "out_axis_batch": torch.softmax(logits, dim=0),
        "out_no_bias": torch.softmax(h @ weight.T, dim=-1),
        "out_sigmoid": torch.sigmoid(logits),
    }


@exercise("06.output_probabilities")
def check_output_probabilities(fn: Callable[[Tensor, Tensor, Tensor], Tensor], lang: str | None = None) -> Feedback:
    """Check ``fn(h, weight, bias)`` = softmax(h Wᵀ + b) over the vocabulary, shape (B, T, V)."""
    for h, weight, bias in _output_cases():
        (B, T, _), V = h.shape, weight.size(0)
        got = tensor(
            lang,
            attempt(lang, fn, h.clone(), weight.clone(), bias.clone()),
            (B, T, V),
            " = (B, T, V); `weight` es (V, D): ¿cuál de sus ejes va con el último de `h`?",
            " = (B, T, V); `weight` is (V, D): which of its axes multiplies the last axis of `h`?",
        )
        logits = h @ weight.T + bias  # (B, T, V)
        expected = torch.softmax(logits, dim=-1)
        if close(got, expected):
            continue
        return HINTS(lang, diagnose([got], by_key([_output_mistakes(h, weight, bias)])) or "out_wrong")
    return correct(
        lang,
        "Cada posición da una distribución sobre el vocabulario que suma 1.",
        "Every position gives a distribution over the vocabulary that adds up to 1.",
    )
