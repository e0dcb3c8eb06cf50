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
from collections.abc import Callable

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
    tensor,
    watch,
)

__all__ = ["HINTS", "check_ov_circuit", "check_smeared_keys", "check_ablate_head"]

# Every hint these checkers give, (Spanish, English), by key.
HINTS = Hints(
    {
        "nan": COMMON_HINTS["nan"],
        "shape": COMMON_HINTS["shape"],
        **STATE_HINTS,
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
        # ---- 13.smeared_keys
        "smear_no_sigmoid": (
            "usas `alpha` tal cual como peso de la mezcla: es un número cualquiera (se aprende sin límites), y el "
            "peso es σ(alpha) = `torch.sigmoid(alpha)`, entre 0 y 1.",
            "you use `alpha` as it is as the mix's weight: it is any number (it is learned without bounds), and the "
            "weight is σ(alpha) = `torch.sigmoid(alpha)`, between 0 and 1.",
        ),
        "smear_swapped": (
            "das el peso σ(alpha) a la clave anterior y 1 − σ(alpha) a la propia: es al revés, "
            "σ(alpha) · k[t] + (1 − σ(alpha)) · k[t − 1].",
            "you give the weight σ(alpha) to the previous key and 1 − σ(alpha) to the key itself: it is the other way "
            "round, σ(alpha) · k[t] + (1 − σ(alpha)) · k[t − 1].",
        ),
        "smear_next": (
            "mezclas cada clave con la de la posición **siguiente**, t + 1: la clave que se mezcla es la anterior, "
            "t − 1 (la cabeza de la capa única tiene que poder ver qué token vino antes de cada posición).",
            "you mix each key with the **next** position's, t + 1: the key mixed in is the previous one, t − 1 (the "
            "single layer's head must be able to see which token came before each position).",
        ),
        "smear_wraps": (
            "la posición 0 se mezcla con la última clave (¿`torch.roll`?): la posición 0 no tiene anterior y su "
            "clave queda igual.",
            "position 0 is mixed with the last key (`torch.roll`?): position 0 has no previous position and its key "
            "stays as it is.",
        ),
        "smear_first_zero": (
            "la posición 0 se mezcla con ceros (¿rellenas con ceros a la izquierda?): no tiene anterior, y su clave "
            "queda igual, sin el factor σ(alpha).",
            "position 0 is mixed with zeros (do you pad with zeros on the left?): it has no previous position, and "
            "its key stays as it is, without the factor σ(alpha).",
        ),
        "smear_recursive": (
            "mezclas con la clave anterior **ya mezclada**: cambias las claves posición a posición en su sitio, y la "
            "t − 1 ya no es la original. Calcula todas a partir de las claves de entrada (por ejemplo con "
            "`k[..., :-1, :]` y `k[..., 1:, :]`).",
            "you mix with the previous key **already mixed**: you change the keys position by position in place, "
            "and the one at t − 1 is no longer the original. Compute them all from the input keys (for example "
            "with `k[..., :-1, :]` and `k[..., 1:, :]`).",
        ),
        "smear_no_alpha": (
            "haces la media de cada clave y la anterior, sin `alpha`: el peso es σ(alpha) de cada cabeza, distinto en "
            "cada una y aprendido.",
            "you average each key with the previous one, without `alpha`: the weight is each head's σ(alpha), "
            "different in each and learned.",
        ),
        "smear_alpha_axis": (
            "aplicas el `alpha` de una cabeza a otras: `alpha` tiene forma ({H},), uno por cabeza, y las cabezas son "
            "el eje 1 de `k` (B, H, T, Dh): `torch.sigmoid(alpha).view(1, -1, 1, 1)`.",
            "you apply one head's `alpha` to others: `alpha` has shape ({H},), one per head, and the heads are axis "
            "1 of `k` (B, H, T, Dh): `torch.sigmoid(alpha).view(1, -1, 1, 1)`.",
        ),
        "smear_other": (
            "con k de forma {shape} y alpha = {alpha}, tus claves no son las esperadas (la mayor diferencia es "
            "{diff}). La clave t ≥ 1 de la cabeza h es σ(alpha[h]) · k[:, h, t] + (1 − σ(alpha[h])) · "
            "k[:, h, t − 1]; la 0 queda igual.",
            "with k of shape {shape} and alpha = {alpha}, your keys are not the expected ones (the largest "
            "difference is {diff}). Key t ≥ 1 of head h is σ(alpha[h]) · k[:, h, t] + (1 − σ(alpha[h])) · "
            "k[:, h, t − 1]; key 0 stays as it is.",
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


# ---- 13.smeared_keys -----------------------------------------------------------------------------


def _one_layer_keys() -> Tensor:
    """The keys of notebook 13's architecture with one layer only (Olsson et al.'s smeared keys are what lets one
    layer make an induction head), on two rows of 11 tokens, from fixed seeds (the notebook's random state is left
    alone). Shapes: -> (2, 4, 11, 6)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(131)
        config = ModernConfig(
            vocab_size=20, d_model=24, n_heads=4, n_layers=1, feed_forward="none", max_len=16, positional="rope"
        )
        model = ModernTransformer(config).eval()
    tokens = torch.randint(0, 20, (2, 11), generator=torch.Generator().manual_seed(1311))
    block = model.blocks[0]
    with torch.no_grad():
        x = block.norm1(model.token(tokens))  # (B, T, D)
        return block.attn.W_k(x).view(2, 11, 4, 6).transpose(1, 2).contiguous()  # (B, H, T, Dh)


def _smear_cases() -> list[tuple[Tensor, Tensor]]:
    """(k, alpha): shapes whose axes all differ (B ≠ H ≠ T ≠ Dh), alphas far from 0 of both signs, one of 0 and
    unequal across heads, and the keys of a one-layer model."""
    cases = []
    for (B, H, T, Dh), seed in (((2, 3, 7, 5), 1), ((1, 4, 9, 2), 2), ((3, 2, 5, 8), 3)):
        k = torch.randn(B, H, T, Dh, generator=torch.Generator().manual_seed(seed))
        alpha = torch.linspace(-2.5, 3.0, H) + 0.37 * seed
        cases.append((k, alpha))
    cases.append((_one_layer_keys(), torch.tensor([1.5, -0.8, 0.0, 4.0])))
    return cases


def _smeared(
    k: Tensor,
    alpha: Tensor,
    *,
    weight: Tensor | None = None,
    swap: bool = False,
    previous: str = "before",
    recursive: bool = False,
) -> Tensor:
    """The smeared keys, written as a loop over positions, with one thing changed: the mix's weight (``weight``,
    by default σ(alpha) per head), its two parts swapped, what is mixed in (``previous``: the key ``before``, the
    ``next`` one, ``roll``'s wrap-around at 0, ``zeros`` before 0) or the already-smeared key before. Without
    changes: the right keys. Shapes: k (B, H, T, Dh), alpha (H,) -> (B, H, T, Dh), double."""
    k = k.double()
    w = (torch.sigmoid(alpha.double()) if weight is None else weight.double()).view(1, -1, 1)  # (1, H, 1)
    out = k.clone()
    T = k.size(-2)
    for t in range(T):
        if previous == "before":
            if t == 0:
                continue
            other = (out if recursive else k)[:, :, t - 1]
        elif previous == "next":
            if t == T - 1:
                continue
            other = k[:, :, t + 1]
        elif previous == "roll":
            other = k[:, :, t - 1]  # t = 0: the last one
        else:  # "zeros"
            other = k[:, :, t - 1] if t else torch.zeros_like(k[:, :, 0])
        a, b = (1 - w, w) if swap else (w, 1 - w)
        out[:, :, t] = a * k[:, :, t] + b * other
    return out


def _smear_mistakes(k: Tensor, alpha: Tensor) -> list[tuple[str, Tensor]]:
    """What each typical mistake gives on one case; two ways to make one mistake share a key."""
    H = k.size(1)
    return [
        ("smear_no_sigmoid", _smeared(k, alpha, weight=alpha)),
        ("smear_swapped", _smeared(k, alpha, swap=True)),
        ("smear_next", _smeared(k, alpha, previous="next")),
        ("smear_wraps", _smeared(k, alpha, previous="roll")),
        ("smear_first_zero", _smeared(k, alpha, previous="zeros")),
        ("smear_recursive", _smeared(k, alpha, recursive=True)),
        ("smear_no_alpha", _smeared(k, alpha, weight=torch.full((H,), 0.5))),
        ("smear_alpha_axis", _smeared(k, alpha, weight=torch.sigmoid(alpha).flip(0))),
        ("smear_alpha_axis", _smeared(k, alpha, weight=torch.full((H,), float(torch.sigmoid(alpha[0]))))),
    ]


_SMEAR_TOOLS = (
    ("minitransformer.exercises.circuits._smeared", "_smeared"),
    ("minitransformer.exercises.circuits._smear_mistakes", "_smear_mistakes"),
)
_SMEAR_WHY = (
    "escribe tú la mezcla de las claves.",
    "write the mixing of the keys yourself.",
)


@exercise("13.smeared_keys")
def check_smeared_keys(my_smear_keys: Callable[[Tensor, Tensor], Tensor], lang: str | None = None) -> Feedback:
    """Check ``my_smear_keys(k, alpha)`` -> Olsson et al.'s smeared keys: key t ≥ 1 of head h becomes
    σ(alpha[h]) · k[:, h, t] + (1 − σ(alpha[h])) · k[:, h, t − 1], key 0 stays, on four cases (shapes whose axes all
    differ, alphas of both signs, the keys of a one-layer model). Every case is run first; a mistake is named when it
    explains every case; the keys and alpha handed over must be left as they were, and PyTorch's global switches."""
    cases = _smear_cases()
    right = [_smeared(k, alpha) for k, alpha in cases]  # before the student's code runs
    answers, left = [], []
    for k, alpha in cases:
        given_k, given_alpha = k.clone(), alpha.clone()
        with watch(tensors={"k": given_k, "alpha": given_alpha}) as w, forbid(_SMEAR_TOOLS, *_SMEAR_WHY):
            got = attempt(lang, my_smear_keys, given_k, given_alpha)
        keys = tensor(lang, got, tuple(k.shape))
        if keys.is_complex() or not bool(torch.isfinite(keys).all()):
            return HINTS(lang, "nan")
        answers.append(keys)
        left.append(w.left(lang, HINTS))
    state = next((f for f in left if f is not None), None)
    if all(close(a, r) for a, r in zip(answers, right)):
        done = correct(
            lang,
            "Con estas claves, la única capa de un modelo ya puede buscar «la posición cuyo token anterior es el "
            "mío»: lo que en dos capas hace la cabeza de token anterior.",
            "With these keys, a model's single layer can already look for “the position whose previous token is "
            "mine”: what the previous-token head does in two layers.",
        )
        return state if state is not None else done
    key = diagnose(answers, by_key([_smear_mistakes(k, alpha) for k, alpha in cases]))
    first = next(i for i, (a, r) in enumerate(zip(answers, right)) if not close(a, r))
    k, alpha = cases[first]
    diff = float((answers[first].double() - right[first]).abs().max())
    fields = {"H": k.size(1), "shape": tuple(k.shape), "alpha": [round(float(a), 2) for a in alpha], "diff": diff}
    if key is not None:
        return HINTS(lang, key, **fields)
    return state if state is not None else HINTS(lang, "smear_other", **fields)


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
