"""Checkers for notebook 13's exercises: a head's OV circuit read from the model's weights, its induction score read
from its attention pattern, and a head switched off (ablated) by zeroing its output before W_o.

Each checker compares the student's answer with the package's own (:mod:`minitransformer.circuits`,
computed before the student's code runs and switched off while it runs), on cases where the usual mistakes
give different answers: hand-made causal patterns that mix attention to the previous token, to the token
itself, to the earlier copy of the current token and to the token after it, several periods and lengths
(not multiples of the period), and a tiny attention-only model with two heads in each of two layers. The
ablation checker also looks at the model after each call: its weights, its hooks and its mode must be as they
were. A student's exception becomes a "not yet" that shows the failing line. The worked solutions are in the
answer key :mod:`.solutions.nb13`.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from .. import circuits
from ..modern import ModernConfig, ModernTransformer
from ._core import (
    COMMON_HINTS,
    STATE_HINTS,
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
    tensor,
    type_name,
    watch,
)

__all__ = ["HINTS", "check_ov_circuit", "check_induction_score", "check_ablate_head"]

# Every hint these checkers give, (Spanish, English), by key.
HINTS = Hints(
    {
        "nan": COMMON_HINTS["nan"],
        "shape": COMMON_HINTS["shape"],
        **STATE_HINTS,
        "scores_type": (
            "devuelve una lista (o un tensor) de números, uno por cabeza, no {got}.",
            "return a list (or a tensor) of numbers, one per head, not {got}.",
        ),
        "one_number": (
            "devuelves un solo número, y el patrón tiene {H} cabezas: devuelve una puntuación por cabeza. "
            "¿Promedias también sobre el eje de las cabezas (el 0)? Promedia solo sobre las posiciones.",
            "you return a single number, and the pattern has {H} heads: return one score per head. Do you also "
            "average over the heads' axis (axis 0)? Average over the positions only.",
        ),
        "per_position": (
            "devuelves {got} números, uno por cabeza y posición: falta promediar sobre las posiciones (el último "
            "eje) para quedarte con uno por cabeza, forma ({H},).",
            "you return {got} numbers, one per head and position: they still have to be averaged over the "
            "positions (the last axis), to keep one per head, shape ({H},).",
        ),
        "scores_shape": (
            "devuelves forma {got} y se pide ({H},), una puntuación por cabeza (el patrón es (H, T, T) = {shape}). "
            "Si usas `diagonal`, dile qué ejes: `diagonal(offset=..., dim1=-2, dim2=-1)`; sin ellos toma los dos "
            "primeros (cabezas y filas).",
            "you return shape {got} and ({H},) is asked for, one score per head (the pattern is (H, T, T) = {shape}). "
            "If you use `diagonal`, tell it which axes: `diagonal(offset=..., dim1=-2, dim2=-1)`; without them it "
            "takes the first two (heads and rows).",
        ),
        # ---- 13.ov_circuit
        "ov_transposed": (
            "devuelves la matriz traspuesta: las filas son el token al que la cabeza atiende (el de `W_E`) y las "
            "columnas el logit que sube (el de `W_U`). Calcula `W_E · … · W_Uᵀ`, no `W_U · … · W_Eᵀ`, o traspón al final.",
            "you return the transposed matrix: rows are the token the head attends to (from `W_E`) and columns the "
            "logit raised (from `W_U`). Compute `W_E · … · W_Uᵀ`, not `W_U · … · W_Eᵀ`, or transpose at the end.",
        ),
        "ov_no_norms": (
            "te faltan las ganancias de las dos normas: la del bloque (`norm1.weight`, antes de W_v) y la final "
            "(`model.norm.weight`, antes de W_U). RMSNorm multiplica cada dimensión por su γ: multiplica por ellas.",
            "the gains of both norms are missing: the block's (`norm1.weight`, before W_v) and the final one "
            "(`model.norm.weight`, before W_U). RMSNorm multiplies each dimension by its γ: multiply by them.",
        ),
        "ov_no_block_norm": (
            "falta la ganancia de la norma del bloque, `model.blocks[layer].norm1.weight`: la cabeza lee el "
            "embedding normalizado, W_E[s] ⊙ γ, antes de W_v.",
            "the gain of the block's norm is missing, `model.blocks[layer].norm1.weight`: the head reads the "
            "normalised embedding, W_E[s] ⊙ γ, before W_v.",
        ),
        "ov_no_final_norm": (
            "falta la ganancia de la norma final, `model.norm.weight`: W_U lee lo que la cabeza escribe después "
            "de esa norma, multiplicado por su γ.",
            "the gain of the final norm is missing, `model.norm.weight`: W_U reads what the head writes after "
            "that norm, multiplied by its γ.",
        ),
        "ov_wrong_slice": (
            "tomas un trozo equivocado de W_v o de W_o: la cabeza {head} es las **filas** {start}:{stop} de "
            "`W_v.weight` (D_h salidas de las H · D_h) y las **columnas** {start}:{stop} de `W_o.weight` (sus D_h "
            "entradas), con D_h = `attn.d_head` = {Dh}.",
            "you take a wrong slice of W_v or W_o: head {head} is **rows** {start}:{stop} of `W_v.weight` (D_h of "
            "the H · D_h outputs) and **columns** {start}:{stop} of `W_o.weight` (its D_h inputs), with "
            "D_h = `attn.d_head` = {Dh}.",
        ),
        "ov_all_heads": (
            "usas W_v y W_o enteros: eso es lo que escriben todas las cabezas del bloque juntas. Quédate con las "
            "filas {start}:{stop} de `W_v.weight` y las columnas {start}:{stop} de `W_o.weight`.",
            "you use the whole W_v and W_o: that is what all the block's heads write together. Keep rows "
            "{start}:{stop} of `W_v.weight` and columns {start}:{stop} of `W_o.weight`.",
        ),
        "ov_probs": (
            "aplicas una softmax (o log-softmax): el circuito es el producto de los pesos, lo que la cabeza suma a "
            "los logits, sin normalizar.",
            "you apply a softmax (or log-softmax): the circuit is the product of the weights, what the head adds to "
            "the logits, not normalised.",
        ),
        "ov_other": (
            "en la cabeza {layer}.{head} tu matriz no es la esperada (la mayor diferencia es {diff}). Fila s: "
            "((W_E[s] ⊙ γ₁) · W_vᵀ de la cabeza · W_oᵀ de la cabeza) ⊙ γ_f · W_Uᵀ.",
            "for head {layer}.{head} your matrix is not the expected one (the largest difference is {diff}). Row s: "
            "((W_E[s] ⊙ γ₁) · the head's W_vᵀ · the head's W_oᵀ) ⊙ γ_f · W_Uᵀ.",
        ),
        # ---- 13.induction_score
        "ind_last_copy": (
            "solo sumas la posición t − P + 1 (la copia anterior más cercana): con T = {T} y P = {P} hay "
            "posiciones con varias copias anteriores, y la puntuación suma la atención a todas, "
            "s = t − kP + 1 para k = 1, 2, … mientras s ≥ 1.",
            "you only add position t − P + 1 (the nearest earlier copy): with T = {T} and P = {P} some positions "
            "have several earlier copies, and the score adds the attention to all of them, s = t − kP + 1 for "
            "k = 1, 2, … while s ≥ 1.",
        ),
        "ind_duplicate": (
            "sumas la atención a t − P (o t − kP): la copia anterior del mismo token. Eso mide una cabeza de "
            "«token duplicado»; una cabeza de inducción mira al token que vino después de esa copia, "
            "t − kP + 1.",
            "you add the attention to t − P (or t − kP): the earlier copy of the same token. That measures a "
            "“duplicate-token” head; an induction head looks at the token that came after that copy, t − kP + 1.",
        ),
        "ind_before_copy": (
            "sumas la atención a t − P − 1 (o t − kP − 1), el token anterior a la copia: es un paso más a la "
            "izquierda, y se pide un paso a la derecha de la copia, t − kP + 1.",
            "you add the attention to t − P − 1 (or t − kP − 1), the token before the copy: that is one step "
            "further left, and one step to the right of the copy is asked for, t − kP + 1.",
        ),
        "ind_position_zero": (
            "cuentas también la posición s = 0 cuando t − kP + 1 = 0: ahí la «copia» estaría en −1, que no "
            "existe. Suma solo las s = t − kP + 1 ≥ 1.",
            "you also count position s = 0 when t − kP + 1 = 0: the “copy” there would be at −1, which does not "
            "exist. Add only the s = t − kP + 1 ≥ 1.",
        ),
        "ind_mean_copies": (
            "promedias la atención sobre las copias anteriores: se suma (la atención total que va a los tokens "
            "que siguieron a alguna copia), y luego se promedia sobre las posiciones t ≥ P.",
            "you average the attention over the earlier copies: it is summed (the total attention that goes to "
            "the tokens that followed some copy), and then averaged over the positions t ≥ P.",
        ),
        "ind_all_positions": (
            "promedias sobre las T = {T} posiciones: las t < P = {P} todavía no han visto ninguna copia y no "
            "cuentan. Promedia solo sobre t = P … T − 1 ({n} posiciones).",
            "you average over all T = {T} positions: those with t < P = {P} have not seen any copy yet and do not "
            "count. Average over t = P … T − 1 only ({n} positions).",
        ),
        "ind_start": (
            "divides entre T − P + 1 = {n1} en vez de entre T − P = {n}: ¿empiezas en t = P − 1, o divides entre "
            "una posición de más? (Las dos cosas dan los mismos números: en t = P − 1 no hay ninguna copia "
            "anterior que sumar.) La primera posición con una copia anterior es t = P (su token es el de la "
            "posición 0): promedia sobre t = P … T − 1.",
            "you divide by T − P + 1 = {n1} instead of T − P = {n}: do you start at t = P − 1, or divide by one "
            "position too many? (Both give the same numbers: at t = P − 1 there is no earlier copy to add.) The "
            "first position with an earlier copy is t = P (its token is position 0's): average over t = P … T − 1.",
        ),
        "ind_sum": (
            "sumas sobre las posiciones sin promediar: divide entre las T − P = {n} posiciones t ≥ P, para que una "
            "cabeza de inducción perfecta puntúe 1.",
            "you sum over the positions without averaging: divide by the T − P = {n} positions t ≥ P, so that a "
            "perfect induction head scores 1.",
        ),
        "ind_transposed": (
            "te salen ceros: lees `pattern[h, s, t]` (el patrón traspuesto), la atención de una posición anterior "
            "a una posterior, que la máscara causal pone a cero. Las filas son quien mira: usa `pattern[h, t, s]`.",
            "you get zeros: you read `pattern[h, s, t]` (the transposed pattern), the attention from an earlier "
            "position to a later one, which the causal mask sets to zero. Rows are who looks: use "
            "`pattern[h, t, s]`.",
        ),
        "ind_other": (
            "con {H} cabezas, T = {T} y periodo P = {P} devuelves {got}. Para cada t ≥ P, suma "
            "`pattern[h, t, s]` sobre s = t − kP + 1 (k = 1, 2, …, s ≥ 1); luego promedia sobre t = P … T − 1.",
            "with {H} heads, T = {T} and period P = {P} you return {got}. For each t ≥ P, add `pattern[h, t, s]` "
            "over s = t − kP + 1 (k = 1, 2, …, s ≥ 1); then average over t = P … T − 1.",
        ),
        # ---- 13.ablate_head
        "abl_rows": (
            "anulas filas de `W_o.weight` (dimensiones de salida, del modelo): la salida de la cabeza entra por "
            "sus columnas. `W_o.weight` tiene forma (D, H · Dh): anula las columnas "
            "`[:, head * Dh:(head + 1) * Dh]`, o la entrada de W_o en esas posiciones.",
            "you zero rows of `W_o.weight` (output dimensions, the model's): the head's output comes in through "
            "its columns. `W_o.weight` has shape (D, H · Dh): zero columns `[:, head * Dh:(head + 1) * Dh]`, or "
            "W_o's input at those positions.",
        ),
        "abl_slice": (
            "anulas un trozo equivocado: la cabeza {head} ocupa las posiciones `head * Dh` a `(head + 1) * Dh` "
            "(sin incluir) de la entrada de W_o, con Dh = `attn.d_head` = {Dh}, es decir {start}:{stop}.",
            "you zero the wrong slice: head {head} takes positions `head * Dh` to `(head + 1) * Dh` (not "
            "included) of W_o's input, with Dh = `attn.d_head` = {Dh}, that is {start}:{stop}.",
        ),
        "abl_every_layer": (
            "anulas la cabeza {head} en todas las capas: solo se pide la de la capa {layer}, "
            "`model.blocks[layer].attn`.",
            "you ablate head {head} in every layer: only the one of layer {layer} is asked for, "
            "`model.blocks[layer].attn`.",
        ),
        "abl_all_heads": (
            "anulas toda la salida de la atención de la capa {layer}, todas sus cabezas: solo se anula la parte "
            "de la cabeza {head}, posiciones {start}:{stop} de la entrada de W_o.",
            "you zero the whole attention output of layer {layer}, all its heads: only head {head}'s part is "
            "zeroed, positions {start}:{stop} of W_o's input.",
        ),
        "abl_query_key": (
            "anulas las consultas y claves de la cabeza (filas de W_q y W_k): así sus puntuaciones son 0 y atiende "
            "de manera uniforme, pero sigue escribiendo la media de los valores. Ablacionar es que no escriba "
            "nada: anula su salida antes de W_o.",
            "you zero the head's queries and keys (rows of W_q and W_k): then its scores are 0 and it attends "
            "uniformly, but it still writes the mean of the values. Ablating means it writes nothing: zero its "
            "output before W_o.",
        ),
        "abl_probs": (
            "devuelves probabilidades (softmax o log-softmax): se piden los logits, lo que devuelve "
            "`model(tokens)` tal cual.",
            "you return probabilities (softmax or log-softmax): the logits are asked for, what `model(tokens)` "
            "returns as it is.",
        ),
        "abl_no_effect": (
            "devuelves los logits del modelo sin tocar: la cabeza no se ha anulado. Si usas un gancho "
            "(`register_forward_pre_hook`), debe devolver la entrada cambiada, `return (x,)`, o cambiarla en su "
            "sitio; si cambias pesos, hazlo antes de llamar al modelo.",
            "you return the logits of the untouched model: the head was not ablated. If you use a hook "
            "(`register_forward_pre_hook`), it must return the changed input, `return (x,)`, or change it in "
            "place; if you change weights, do so before calling the model.",
        ),
        "abl_not_restored": (
            "el resultado es el correcto, pero el modelo se queda cambiado: `{name}` no vuelve a ser el que era. "
            "Guarda una copia de lo que cambias (`.clone()`) y restáuralo al final (mejor en un `finally`).",
            "the result is right, but the model stays changed: `{name}` is not what it was. Keep a copy of what "
            "you change (`.clone()`) and restore it at the end (best in a `finally`).",
        ),
        "abl_other": (
            "con la cabeza {head} de la capa {layer} anulada, tus logits no son los esperados (la mayor "
            "diferencia es {diff}). La salida de la cabeza son las posiciones {start}:{stop} de la entrada de "
            "`model.blocks[layer].attn.W_o`: ponlas a cero y devuelve `model(tokens)`.",
            "with head {head} of layer {layer} ablated, your logits are not the expected ones (the largest "
            "difference is {diff}). The head's output is positions {start}:{stop} of the input of "
            "`model.blocks[layer].attn.W_o`: set them to zero and return `model(tokens)`.",
        ),
    }
)


def _scores(lang: str, got: Any, H: int, T: int) -> Tensor:
    """The answer as a double tensor (H,): a list, tuple or tensor of H numbers ((1, H) and (H, 1) are taken);
    anything else stops the check with its hint."""
    if isinstance(got, Tensor):
        if got.is_complex() or got.dtype == torch.bool:
            raise stop(HINTS(lang, "scores_type", got=f"Tensor {got.dtype}"))
        x = got.detach().cpu().double()
    elif isinstance(got, (list, tuple)):
        items = []
        for item in got:
            if isinstance(item, Tensor) and item.numel() == 1 and not item.is_complex() and item.dtype != torch.bool:
                item = item.item()
            if isinstance(item, bool) or not isinstance(item, numbers.Real):
                raise stop(HINTS(lang, "scores_type", got=f"{type_name(got)} [{type_name(item)}, …]"))
            items.append(float(item))
        x = torch.tensor(items, dtype=torch.double)
    elif isinstance(got, numbers.Real) and not isinstance(got, bool):
        x = torch.tensor(float(got), dtype=torch.double)
    else:
        raise stop(HINTS(lang, "scores_type", got=type_name(got)))
    if x.numel() == 1 and H > 1:
        raise stop(HINTS(lang, "one_number", H=H))
    if tuple(x.shape) in ((H, T), (H, T - 1)):
        raise stop(HINTS(lang, "per_position", got=" × ".join(map(str, x.shape)), H=H))
    if x.numel() == H and x.dim() in (1, 2) and H in x.shape:
        x = x.reshape(H)
    else:
        raise stop(HINTS(lang, "scores_shape", got=tuple(x.shape), H=H, shape=(H, T, T)))
    if not bool(torch.isfinite(x).all()):
        raise stop(HINTS(lang, "nan"))
    return x


def _shown(lang: str, x: Tensor) -> str:
    """Scores as the notebook shows them: [0,25; 0,5] in Spanish, [0.25, 0.5] in English."""
    return "[" + ("; " if lang == "es" else ", ").join(num(lang, float(v)) for v in x) + "]"


def _causal(H: int, T: int, seed: int, sharpness: float = 2.0) -> Tensor:
    """Random causal attention (H, T, T) from its own seed: every row a softmax over positions 0 … t."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(H, T, T, generator=g, dtype=torch.float64) * sharpness
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    return scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)


def _at(T: int, back: Callable[[int], list[int]]) -> Tensor:
    """A pattern (T, T) that spreads each row t over the positions ``back(t)`` (unevenly: the nearest gets the
    most), or puts it on t itself where there are none."""
    p = torch.zeros(T, T, dtype=torch.float64)
    for t in range(T):
        where = [s for s in back(t) if 0 <= s <= t] or [t]
        w = torch.tensor([0.6**i for i in range(len(where))], dtype=torch.float64)
        p[t, where] = w / w.sum()
    return p


def _mix(parts: list[tuple[float, Tensor]]) -> Tensor:
    """A weighted mixture of patterns (weights summing to 1): still causal, rows still summing to 1."""
    return sum(w * p for w, p in parts)  # type: ignore[return-value]


# ---- 13.ov_circuit -------------------------------------------------------------------------------

_OV_VOCAB = 12


def _ov_model() -> ModernTransformer:
    """Notebook 13's architecture, small (V = 12, D = 16, two heads of Dh = 8, two blocks), from a fixed seed (the
    notebook's random state is left alone), with norm gains far from 1 and different in every dimension, so that a
    forgotten gain shows."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(31)
        config = ModernConfig(
            vocab_size=_OV_VOCAB, d_model=16, n_heads=2, n_layers=2, feed_forward="none", max_len=16, positional="rope"
        )
        model = ModernTransformer(config)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.3 * torch.randn_like(p))
            for norm in [b.norm1 for b in model.blocks] + [model.norm]:
                norm.weight.copy_(0.5 + 2.0 * torch.rand(16))
    return model.eval()


# (layer, head): the second head first (a slice starting at `head` is not the head's), then the others.
_OV_CASES = [(1, 1), (0, 0), (0, 1), (1, 0)]


def _ov_by_hand(
    model: ModernTransformer,
    layer: int,
    head: int,
    *,
    block_norm: bool = True,
    final_norm: bool = True,
    heads: slice | None = None,
    v_columns: bool = False,
    o_rows: bool = False,
) -> Tensor:
    """The OV circuit written as a student would, with one thing changed. Shapes: -> (V, V), double."""
    a = model.blocks[layer].attn
    Dh = a.d_head
    part = slice(head * Dh, (head + 1) * Dh) if heads is None else heads
    E = model.token.weight.detach().double()
    x = E * model.blocks[layer].norm1.weight.detach().double() if block_norm else E  # (V, D)
    W_v = a.W_v.weight.detach().double()
    W_o = a.W_o.weight.detach().double()
    z = x @ (W_v[:, part] if v_columns else W_v[part].T)  # (V, Dh)
    out = z @ (W_o[part] if o_rows else W_o[:, part].T)  # (V, D)
    if final_norm:
        out = out * model.norm.weight.detach().double()
    return out @ model.lm_head.weight.detach().double().T  # (V, V)


def _ov_mistakes(model: ModernTransformer, layer: int, head: int) -> list[tuple[str, Tensor | None]]:
    """What each typical mistake gives on one head; two ways to make one mistake share a key."""
    right = _ov_by_hand(model, layer, head)
    Dh = model.blocks[layer].attn.d_head
    return [
        ("ov_transposed", right.T),
        ("ov_no_norms", _ov_by_hand(model, layer, head, block_norm=False, final_norm=False)),
        ("ov_no_block_norm", _ov_by_hand(model, layer, head, block_norm=False)),
        ("ov_no_final_norm", _ov_by_hand(model, layer, head, final_norm=False)),
        ("ov_wrong_slice", _ov_by_hand(model, layer, head, v_columns=True)),
        ("ov_wrong_slice", _ov_by_hand(model, layer, head, o_rows=True)),
        ("ov_wrong_slice", _ov_by_hand(model, layer, head, v_columns=True, o_rows=True)),
        # the head's slice started at `head`, not `head * Dh` (the right slice for head 0 alone)
        ("ov_wrong_slice", _ov_by_hand(model, layer, head, heads=slice(head, head + Dh)) if head else None),
        ("ov_all_heads", _ov_by_hand(model, layer, head, heads=slice(None))),
        ("ov_probs", right.softmax(-1)),
        ("ov_probs", right.log_softmax(-1)),
    ]


_OV_TOOLS = (
    ("minitransformer.circuits.ov_circuit", "ov_circuit"),
    ("minitransformer.circuits._ov", "circuits._ov"),
    ("minitransformer.circuits._final_reads", "circuits._final_reads"),
    ("minitransformer.circuits._norm_matrix", "circuits._norm_matrix"),
    ("minitransformer.circuits._head_rows", "circuits._head_rows"),
    ("minitransformer.circuits._reads", "circuits._reads"),
    ("minitransformer.circuits._embedding", "circuits._embedding"),
    ("minitransformer.exercises.circuits._ov_by_hand", "_ov_by_hand"),
)
_OV_WHY = (
    "escribe tú el producto de los pesos (W_E, las normas, W_v, W_o, W_U).",
    "write the product of the weights yourself (W_E, the norms, W_v, W_o, W_U).",
)


@exercise("13.ov_circuit")
def check_ov_circuit(my_ov_circuit: Callable[..., Tensor], lang: str | None = None) -> Feedback:
    """Check ``my_ov_circuit(model, layer, head)`` -> the head's full OV circuit (V, V), row s what attending to
    token s adds to the logits, ``circuits.ov_circuit(model, layer, head)`` (switched off while the student's
    function runs), on every head of a small attention-only model with norm gains far from 1, each case on a model
    of its own, the model left as it was (as ``13.ablate_head`` checks it). The first case the answer gets wrong
    decides."""
    for layer, head in _OV_CASES:
        model = _ov_model()
        want = circuits.ov_circuit(model, layer, head).double()
        with watch(model) as left, forbid(_OV_TOOLS, *_OV_WHY):
            got = attempt(lang, my_ov_circuit, model, layer, head)
        matrix = tensor(lang, got, tuple(want.shape))
        if matrix.is_complex() or not bool(torch.isfinite(matrix).all()):
            return HINTS(lang, "nan")
        Dh = model.blocks[layer].attn.d_head
        fields = {"layer": layer, "head": head, "Dh": Dh, "start": head * Dh, "stop": (head + 1) * Dh}
        if not close(matrix, want, atol=1e-4, rtol=1e-4):
            clean = _ov_model()
            key = diagnose([matrix], by_key([_ov_mistakes(clean, layer, head)]), atol=1e-4, rtol=1e-4)
            if key is not None:
                return HINTS(lang, key, **fields)
            diff = float((matrix.detach().cpu().double() - want).abs().max())
            return left.left(lang, HINTS, HINTS(lang, "ov_other", diff=diff, **fields))
        if left.left(lang, HINTS) is not None:
            return left.left(lang, HINTS)
    return correct(
        lang,
        "Mira ahora las cabezas del modelo entrenado: las del bloque 1 ponen lo mayor de cada fila en la diagonal "
        "(copian); ¿y las del bloque 0?",
        "Now look at the trained model's heads: block 1's put the largest entry of each row on the diagonal (they "
        "copy); and block 0's?",
    )


# ---- 13.induction_score --------------------------------------------------------------------------


def _ind_pattern(H: int, T: int, P: int, seed: int) -> Tensor:
    """Heads that mix, in different amounts, attention to the tokens after the earlier copies (t − kP + 1),
    to the earlier copies themselves (t − kP), to the previous token, to position 0 and random attention
    (float32)."""
    rand = _causal(H, T, seed)
    induction = _at(T, lambda t: [t - k * P + 1 for k in range(1, T) if t - k * P + 1 >= 1])
    duplicate = _at(T, lambda t: [t - k * P for k in range(1, T) if t - k * P >= 0])
    previous = _at(T, lambda t: [t - 1])
    first = _at(T, lambda t: [0])
    weights = [(0.55, 0.15, 0.1, 0.05), (0.1, 0.5, 0.2, 0.05), (0.2, 0.1, 0.45, 0.1), (0.3, 0.3, 0.0, 0.2)]
    heads = []
    for h in range(H):
        a, b, c, d = weights[h % len(weights)]
        heads.append(_mix([(a, induction), (b, duplicate), (c, previous), (d, first), (1 - a - b - c - d, rand[h])]))
    return torch.stack(heads).float()


# (H, T, P, seed): lengths that are not multiples of the period, two to five copies, one with T < 2P.
_IND_CASES = [(2, 17, 5, 11), (3, 23, 4, 12), (4, 15, 6, 13), (2, 13, 8, 14)]


def _ind_variant(
    p: Tensor,
    P: int,
    *,
    shift: int = 1,
    last_only: bool = False,
    first_t: int | None = None,
    min_s: int = 1,
    per_t: str = "sum",
    over: str = "mean",
) -> Tensor:
    """The induction score written as a loop, with one thing changed: the copy ``t − kP + shift``, only the
    last copy, the first position counted, the smallest key position, the copies summed or averaged, and the
    positions averaged, summed or divided by T. Without changes: the package's score."""
    p = p.double()
    H, T, _ = p.shape
    first_t = P if first_t is None else first_t
    rows = []
    for t in range(first_t, T):
        keys = [t - k * P + shift for k in range(1, T + 1) if min_s <= t - k * P + shift <= t]
        keys = keys[:1] if last_only else keys
        weight = p[:, t, keys].sum(-1) if keys else torch.zeros(H, dtype=torch.float64)
        rows.append(weight / len(keys) if keys and per_t == "mean" else weight)
    total = torch.stack(rows).sum(0)
    return {"mean": total / len(rows), "sum": total, "all": total / T}[over]


def _ind_mistakes(p: Tensor, P: int) -> list[tuple[str, Tensor]]:
    """What each typical mistake gives on one pattern; two ways to make one mistake share a key."""
    return [
        ("ind_last_copy", _ind_variant(p, P, last_only=True)),
        ("ind_duplicate", _ind_variant(p, P, shift=0, min_s=0)),
        ("ind_duplicate", _ind_variant(p, P, shift=0, min_s=0, last_only=True)),
        ("ind_duplicate", _ind_variant(p, P, shift=0)),
        ("ind_before_copy", _ind_variant(p, P, shift=-1, min_s=0)),
        ("ind_before_copy", _ind_variant(p, P, shift=-1, min_s=0, last_only=True)),
        ("ind_position_zero", _ind_variant(p, P, min_s=0)),
        ("ind_mean_copies", _ind_variant(p, P, per_t="mean")),
        ("ind_all_positions", _ind_variant(p, P, over="all")),
        ("ind_start", _ind_variant(p, P, first_t=P - 1)),
        ("ind_start", _ind_variant(p, P, first_t=P - 1, min_s=0)),
        ("ind_sum", _ind_variant(p, P, over="sum")),
        ("ind_transposed", _ind_variant(p.transpose(-1, -2), P)),
    ]


_SCORE_WHY = (
    "escribe tú la puntuación a partir del patrón (con índices, `diagonal` o un bucle).",
    "write the score yourself from the pattern (with indexing, `diagonal` or a loop).",
)

# the package's score, and the checker's own loop (which, without changes, is the right answer)
_IND_TOOLS = (
    ("minitransformer.circuits.induction_score", "induction_score"),
    ("minitransformer.exercises.circuits._ind_variant", "_ind_variant"),
)


@exercise("13.induction_score")
def check_induction_score(my_induction_score: Callable[[Tensor, int], Any], lang: str | None = None) -> Feedback:
    """Check ``my_induction_score(pattern, period)`` -> each head's attention summed over the positions
    s = t − kP + 1 (k ≥ 1, s ≥ 1) and averaged over t = P … T − 1 (H numbers: a list or a tensor),
    ``circuits.induction_score(pattern[None], period)``, on hand-made patterns of four sizes and periods.
    ``circuits.induction_score`` is switched off while the student's function runs. A mistake is named when it
    explains every case."""
    cases = [(_ind_pattern(H, T, P, seed), P) for H, T, P, seed in _IND_CASES]
    right = [circuits.induction_score(p[None], P).double() for p, P in cases]
    answers, left = [], []
    for p, P in cases:
        H, T, _ = p.shape
        given = p.clone()
        with watch(tensors={"pattern": given}) as w, forbid(_IND_TOOLS, *_SCORE_WHY):
            got = attempt(lang, my_induction_score, given, P)
        answers.append(_scores(lang, got, H, T))
        left.append(w.left(lang, HINTS))
    if all(close(a, r) for a, r in zip(answers, right)):
        if any(f is not None for f in left):
            return next(f for f in left if f is not None)
        return correct(
            lang,
            "Una cabeza de inducción perfecta puntúa 1: toda su atención va al token que siguió a las copias "
            "anteriores del actual.",
            "A perfect induction head scores 1: all its attention goes to the token that followed the earlier "
            "copies of the current one.",
        )
    key = diagnose(answers, by_key([_ind_mistakes(p, P) for p, P in cases]))
    first = next(i for i, (a, r) in enumerate(zip(answers, right)) if not close(a, r))
    p, P = cases[first]
    H, T, _ = p.shape
    fields = {"H": H, "T": T, "P": P, "n": T - P, "n1": T - P + 1, "got": _shown(lang, answers[first])}
    if key is not None:
        return HINTS(lang, key, **fields)
    return next((f for f in left if f is not None), HINTS(lang, "ind_other", **fields))


# ---- 13.ablate_head ------------------------------------------------------------------------------

_VOCAB = 16

# (layer, head, training): each head of each layer, the first one in the second head (where a slice starting at
# `head` is not the head's); the model handed over in eval mode and in train mode (a model in the middle of training),
# so that a mode left changed either way shows.
_ABL_CASES = [(0, 1, False), (1, 0, True), (1, 1, False), (0, 0, True)]


def _tiny_model() -> ModernTransformer:
    """Notebook 13's architecture (RoPE, RMSNorm, attention only), tiny, from a fixed seed (the notebook's random
    state is left alone), in eval mode, its queries, keys and output scaled up so that the mistakes are far
    apart."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(13)
        config = ModernConfig(
            vocab_size=_VOCAB, d_model=16, n_heads=2, n_layers=2, feed_forward="none", max_len=32, positional="rope"
        )
        model = ModernTransformer(config)
    with torch.no_grad():  # sharper attention than at initialisation (else uniform-looking) and larger logits
        for block in model.blocks:
            block.attn.W_q.weight.mul_(4.0)
            block.attn.W_k.weight.mul_(4.0)
        model.lm_head.weight.mul_(10.0)
    return model.eval()


def _tokens() -> Tensor:
    """Two rows of 12 tokens from their own generator. Shapes: -> (2, 12)."""
    return torch.randint(0, _VOCAB, (2, 12), generator=torch.Generator().manual_seed(1313))


@torch.no_grad()
def _reference(model: ModernTransformer, tokens: Tensor, layer: int, head: int) -> Tensor:
    with circuits.ablate_heads(model, {(layer, head): "zero"}):
        return model(tokens).double()


@torch.no_grad()
def _edited(model: ModernTransformer, tokens: Tensor, edit: Callable[[ModernTransformer], None]) -> Tensor:
    """The logits of a copy of ``model`` whose weights ``edit`` changed (the model itself stays as it is)."""
    other = copy.deepcopy(model)
    edit(other)
    return other(tokens).double()


def _abl_mistakes(model: ModernTransformer, tokens: Tensor, layer: int, head: int) -> list[tuple[str, Tensor | None]]:
    """What each typical mistake gives on one case."""
    Dh, H = model.blocks[layer].attn.d_head, model.blocks[layer].attn.n_heads
    right = _reference(model, tokens, layer, head)

    def columns(start: int, stop: int, layers: list[int] | None = None):
        def edit(m: ModernTransformer) -> None:
            for i in [layer] if layers is None else layers:
                m.blocks[i].attn.W_o.weight[:, start:stop] = 0.0

        return edit

    def rows(m: ModernTransformer) -> None:
        m.blocks[layer].attn.W_o.weight[head * Dh : (head + 1) * Dh, :] = 0.0

    def query_key(m: ModernTransformer) -> None:
        m.blocks[layer].attn.W_q.weight[head * Dh : (head + 1) * Dh] = 0.0
        m.blocks[layer].attn.W_k.weight[head * Dh : (head + 1) * Dh] = 0.0

    with torch.no_grad():
        plain = model(tokens).double()
    return [
        ("abl_no_effect", plain),
        ("abl_rows", _edited(model, tokens, rows)),
        ("abl_slice", _edited(model, tokens, columns(head, head + Dh))),
        ("abl_slice", _edited(model, tokens, columns(head * Dh + 1, (head + 1) * Dh + 1))),
        ("abl_slice", _edited(model, tokens, columns(head * Dh - 1, (head + 1) * Dh - 1)) if head else None),
        (
            "abl_every_layer",
            _edited(model, tokens, columns(head * Dh, (head + 1) * Dh, list(range(len(model.blocks))))),
        ),
        ("abl_all_heads", _edited(model, tokens, columns(0, H * Dh))),
        ("abl_query_key", _edited(model, tokens, query_key)),
        ("abl_probs", right.softmax(-1)),
        ("abl_probs", right.log_softmax(-1)),
    ]


_ABLATE_TOOLS = (("minitransformer.circuits.ablate_heads.__wrapped__", "ablate_heads"),)
_ABLATE_WHY = (
    "escribe tú la ablación: un gancho en `W_o` o sus columnas a cero (y restauradas).",
    "write the ablation yourself: a hook on `W_o`, or its columns set to zero (and restored).",
)


@exercise("13.ablate_head")
def check_ablate_head(my_ablate_head: Callable[..., Tensor], lang: str | None = None) -> Feedback:
    """Check ``my_ablate_head(model, tokens, layer, head)`` -> the logits (B, T, V) of ``model(tokens)`` with
    head ``head`` of block ``layer`` zeroed before W_o, as ``circuits.ablate_heads(model, {(layer, head):
    "zero"})`` gives them (switched off while the student's function runs), the model left as it was: the same
    weights, dtypes, devices and ``requires_grad``, no hook or method left in place, the same mode. Each head of
    each layer of a tiny attention-only model, in order, each case on a model of its own and its expected logits
    on another one that the student's code never touches; the first case the answer gets wrong decides."""
    tokens = _tokens()
    for layer, head, training in _ABL_CASES:
        want = _reference(_tiny_model(), tokens, layer, head)
        model = _tiny_model().train(training)  # eval or train: either way, the student's code leaves it so
        given = tokens.clone()
        with watch(model, tensors={"tokens": given}, changed="abl_not_restored") as left:
            with forbid(_ABLATE_TOOLS, *_ABLATE_WHY):
                got = attempt(lang, my_ablate_head, model, given, layer, head)
        logits = tensor(lang, got, tuple(want.shape))
        if logits.is_complex() or not bool(torch.isfinite(logits).all()):
            return HINTS(lang, "nan")
        Dh = model.blocks[layer].attn.d_head
        fields = {"layer": layer, "head": head, "Dh": Dh, "start": head * Dh, "stop": (head + 1) * Dh}
        if not close(logits, want):
            key = diagnose([logits], by_key([_abl_mistakes(_tiny_model(), tokens, layer, head)]))
            if key is not None:
                return HINTS(lang, key, **fields)
            diff = float((logits.detach().cpu().double() - want).abs().max())
            return left.left(lang, HINTS, HINTS(lang, "abl_other", diff=diff, **fields))
        if left.left(lang, HINTS) is not None:
            return left.left(lang, HINTS)
    return correct(
        lang,
        "Comparar estos logits con los del modelo entero dice cuánto aporta esa cabeza.",
        "Comparing these logits with the whole model's says how much that head contributes.",
    )
