"""Circuits: reading what the heads of a small model do, and checking it by breaking them.

An *induction head* completes a pattern it has seen earlier in the context: after "… A B … A"
it predicts "B". Two heads in two layers do it together (Elhage et al., 2021; Olsson et al.,
2022). A *previous-token head* in layer 0 writes into each position what the token before it
was; the induction head in layer 1 then looks, from the current token A, for a position whose
*previous* token was A (its key is built from what the previous-token head wrote: K-composition)
and copies the token found there, B. This module measures each piece on a
:class:`~minitransformer.modern.ModernTransformer` (notebook 13) or a :class:`~minitransformer.gpt.GPT` (notebook 09):

* what each head attends to (:func:`attention_patterns`), the baseline that attends to nothing in
  particular (:func:`uniform_pattern`), and two scores read from a pattern:
  :func:`previous_token_score` (weight on position t − 1) and :func:`induction_score` (on a
  sequence repeating with period P, weight on t − P + 1, the token after the previous
  occurrence of the current one);
* :func:`in_context_score`: loss late in the context minus loss early in it (negative: the
  model predicts better the more context it has seen); :func:`steepest_step`: where a curve
  recorded during training falls (the loss) or rises (a score) fastest, to see whether the
  loss's drop and a head's forming coincide;
* ablation: :func:`ablate_heads` replaces a head's output (before W_o) by zero or by its mean
  (:func:`head_outputs_mean`), and the loss says what the head was worth;
* :func:`run_with_removed`: one head's output taken out of what a later layer reads for its
  keys only (or its queries, or its values), to see which path the circuit uses;
* :func:`composition_scores`: how much a later head's W_K (W_Q, W_OV) reads from an earlier
  head's W_OV, from the weights alone, against :func:`composition_baseline` for random matrices;
  with ``offset=d``, Elhage et al.'s own score, which reads through W_QK at the query–key distance d;
* :func:`prefix_matching_score`: the induction score defined by the tokens rather than a period
  (Olsson et al.'s prefix matching), for real text;
* the circuits read from the weights: :func:`ov_circuit` (what attending to a token writes into the
  logits: a copying head's is close to a positive diagonal) and :func:`qk_circuit` (which key token a
  query token looks for, directly or through an earlier head's W_OV), measured by
  :func:`diagonal_score` (top-1 on the diagonal) and :func:`positive_eigenvalue_score`;
* :func:`direct_logit_attribution`: what each head adds, directly, to the logit of the right next
  token (a head that only feeds another head adds nothing directly, and can still be necessary).

Letters: B batch, T length, H heads, L layers, D d_model, Dh d_head, V vocabulary.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .i18n import error
from .modern import RMSNorm, apply_rope
from .runtime import eval_mode

__all__ = [
    "attention_patterns",
    "uniform_pattern",
    "previous_token_score",
    "induction_score",
    "next_token_losses",
    "per_position_loss",
    "in_context_score",
    "steepest_step",
    "head_outputs",
    "head_outputs_mean",
    "ablate_heads",
    "run_with_removed",
    "composition_score",
    "composition_scores",
    "composition_baseline",
    "COMPOSITIONS",
    "prefix_matching_score",
    "ov_circuit",
    "qk_circuit",
    "diagonal_score",
    "positive_eigenvalue_score",
    "direct_logit_attribution",
]


# --- attention and the two scores ------------------------------------------------------


@torch.no_grad()
def attention_patterns(model: nn.Module, tokens: Tensor) -> list[Tensor]:
    """The attention weights of every layer, the model in eval mode.

    Shapes: tokens (B, T) -> a list of L tensors (B, H, T, T).
    """
    with eval_mode(model):
        _, maps = model(tokens, return_attention=True)
    return [m.float() for m in maps]


def uniform_pattern(T: int, device: torch.device | str | None = None) -> Tensor:
    """A uniform causal head, the baseline of both scores: row t spreads its weight evenly over positions 0 … t.

    Shapes: -> (1, 1, T, T), a pattern of one row and one head.
    """
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise error(f"T debe ser un entero ≥ 1, no {T!r}", f"T must be an integer ≥ 1, got {T!r}")
    causal = torch.tril(torch.ones(T, T, device=device))  # (T, T)
    return (causal / causal.sum(-1, keepdim=True))[None, None]


def _check_pattern(pattern: Tensor) -> None:
    if not isinstance(pattern, Tensor) or pattern.dim() != 4 or pattern.size(-1) != pattern.size(-2):
        shape = tuple(pattern.shape) if isinstance(pattern, Tensor) else type(pattern).__name__
        raise error(
            f"se esperaba un patrón de atención (B, H, T, T), no {shape}",
            f"expected an attention pattern (B, H, T, T), got {shape}",
        )


def previous_token_score(pattern: Tensor) -> Tensor:
    """Mean attention from each position t to t − 1, over t ≥ 1 and the batch, per head.

    A head that always attends to the previous token scores 1; a uniform causal head scores
    the mean of 1 / (t + 1).

    Shapes: pattern (B, H, T, T) -> (H,).
    """
    _check_pattern(pattern)
    if pattern.size(-1) < 2:
        raise error(
            "hacen falta al menos dos posiciones para un token anterior",
            "at least two positions are needed for a previous token",
        )
    return pattern.diagonal(offset=-1, dim1=-2, dim2=-1).float().mean(dim=(0, 2))  # (B, H, T-1) -> (H,)


def induction_score(pattern: Tensor, period: int | Tensor) -> Tensor:
    """Attention from t to the tokens that followed earlier occurrences of token t, on sequences
    that repeat with period P, per head.

    Token t equals tokens t − P, t − 2P, …, so the tokens after its earlier occurrences sit at
    t − P + 1, t − 2P + 1, … (t − kP + 1 ≥ 1): an induction head puts its weight there. The score
    is that weight summed over those positions, averaged over every position t ≥ P of every row,
    pooled (a row with a shorter period counts more positions). On a segment repeated once (T ≤ 2P)
    it is the weight on the single position t − P + 1.

    Shapes: pattern (B, H, T, T); period an int or one per row (B,) with 1 ≤ P < T -> (H,).
    """
    _check_pattern(pattern)
    B, H, T, _ = pattern.shape
    is_int = isinstance(period, int) and not isinstance(period, bool)
    is_rows = isinstance(period, Tensor) and period.numel() in (1, B) and not period.is_floating_point()
    if not (is_int or is_rows):
        raise error(
            f"period debe ser un entero o un tensor de enteros, uno por fila ({B}), no {period!r}",
            f"period must be an int or an integer tensor, one per row ({B}), got {period!r}",
        )
    periods = torch.as_tensor(period, device=pattern.device).long().reshape(-1).expand(B)  # (B,)
    if int(periods.min()) < 1 or int(periods.max()) >= T:
        raise error(
            f"cada periodo debe estar en [1, {T}) para que algo se repita, no {periods.tolist()}",
            f"every period must lie in [1, {T}) for something to repeat, got {periods.tolist()}",
        )
    t = torch.arange(T, device=pattern.device)  # (T,)
    P = periods[:, None, None]  # (B, 1, 1)
    back = (t[:, None] - t[None, :] + 1)[None]  # (1, T, T): t − s + 1 for query t, key s
    after_copy = (back >= P) & (back % P == 0) & (t[None, None, :] >= 1)  # (B, T, T): s = t − kP + 1, k ≥ 1
    valid = t[None, :] >= periods[:, None]  # (B, T): t ≥ P has an earlier occurrence
    weight = (pattern.float() * after_copy[:, None]).sum(dim=-1)  # (B, H, T)
    counted = valid[:, None, :].float()  # (B, 1, T)
    return (weight * counted).sum(dim=(0, 2)) / counted.sum(dim=(0, 2))  # (H,)


# --- losses per position ---------------------------------------------------------------


def next_token_losses(logits: Tensor, tokens: Tensor) -> Tensor:
    """The cross-entropy of each position's logits against the token that follows it (in float32).

    Shapes: logits (B, T, V), tokens (B, T) -> (B, T − 1).
    """
    return F.cross_entropy(logits[:, :-1].transpose(1, 2).float(), tokens[:, 1:], reduction="none")  # (B, T-1)


@torch.no_grad()
def per_position_loss(model: nn.Module, tokens: Tensor) -> Tensor:
    """The cross-entropy of predicting token t + 1 from tokens 0 … t, per position t, in eval mode.

    Shapes: tokens (B, T) -> (B, T − 1).
    """
    with eval_mode(model):
        logits = model(tokens)  # (B, T, V)
    return next_token_losses(logits, tokens)


def in_context_score(losses: Tensor, early: int, late: int) -> float:
    """The loss at position ``late`` minus the loss at position ``early``, averaged over the rows.

    Olsson et al. (2022) take the 500th token minus the 50th; a short context scales both down.
    Negative: the model predicts better once it has more context.

    Shapes: losses (..., T) per position (:func:`per_position_loss`) -> a number.
    """
    if not isinstance(losses, Tensor) or losses.dim() < 1:
        raise error("losses debe ser un tensor (..., T)", "losses must be a tensor (..., T)")
    T = losses.size(-1)
    if not 0 <= early < late < T:
        raise error(
            f"hace falta 0 ≤ early < late < {T}, no early = {early}, late = {late}",
            f"0 ≤ early < late < {T} is needed, got early = {early}, late = {late}",
        )
    return float(losses[..., late].float().mean() - losses[..., early].float().mean())


def steepest_step(steps: Sequence[int], values: Sequence[float], falling: bool = False) -> int:
    """The recorded step that ends the largest rise of ``values`` between two consecutive records
    (``falling=True``: the largest fall). A phase change shows as the loss's steepest fall and an
    induction score's steepest rise at the same step, or one record apart.

    Shapes: steps and values, one per record (at least two).
    """
    if len(steps) != len(values) or len(steps) < 2:
        raise error(
            f"hacen falta al menos dos registros, tantos pasos como valores, no {len(steps)} y {len(values)}",
            f"at least two records are needed, as many steps as values, got {len(steps)} and {len(values)}",
        )
    sign = -1.0 if falling else 1.0
    changes = [sign * (float(b) - float(a)) for a, b in zip(values[:-1], values[1:])]
    return int(steps[1 + max(range(len(changes)), key=changes.__getitem__)])


# --- head outputs and ablation ---------------------------------------------------------


# Where a model keeps its blocks and each block its attention: ModernTransformer (notebooks 10 to 13) and GPT (09).
_BLOCKS = (("blocks", "attn"), ("layers", "self_attn"))


def _blocks(model: nn.Module) -> list[tuple[nn.Module, nn.Module]]:
    """Every layer's block and its attention (with ``W_q, W_k, W_v, W_o``, ``n_heads``, ``d_head``)."""
    for blocks_name, attn_name in _BLOCKS:
        blocks = getattr(model, blocks_name, None)
        if blocks is not None and all(hasattr(getattr(b, attn_name, None), "W_o") for b in blocks):
            return [(b, getattr(b, attn_name)) for b in blocks]
    raise error(
        "el modelo debe tener bloques con atención (model.blocks[i].attn.W_o, como ModernTransformer, o "
        "model.layers[i].self_attn.W_o, como GPT)",
        "the model must have blocks with attention (model.blocks[i].attn.W_o, as ModernTransformer, or "
        "model.layers[i].self_attn.W_o, as GPT)",
    )


def _attentions(model: nn.Module) -> list[nn.Module]:
    return [attn for _, attn in _blocks(model)]


def _group(attn: nn.Module) -> int:
    """How many query heads share one key-value head (1 without grouped-query attention)."""
    return attn.n_heads // getattr(attn, "n_kv_heads", attn.n_heads)


def _check_head(model: nn.Module, layer: int, head: int) -> None:
    attns = _attentions(model)
    if not (0 <= layer < len(attns) and 0 <= head < attns[layer].n_heads):
        raise error(
            f"no hay cabeza ({layer}, {head}): el modelo tiene {len(attns)} capas de {attns[0].n_heads} cabezas",
            f"there is no head ({layer}, {head}): the model has {len(attns)} layers of {attns[0].n_heads} heads",
        )


@torch.no_grad()
def head_outputs(model: nn.Module, tokens: Tensor) -> list[Tensor]:
    """What each head writes before W_o mixes the heads: its weighted sum of values, in eval mode.

    Shapes: tokens (B, T) -> a list of L tensors (B, T, H, Dh).
    """
    attns = _attentions(model)
    captured: list[Tensor] = []
    handles = [
        a.W_o.register_forward_pre_hook(
            lambda module, args, a=a: captured.append(args[0].reshape(*args[0].shape[:-1], a.n_heads, a.d_head))
        )
        for a in attns
    ]
    try:
        with eval_mode(model):
            model(tokens)
    finally:
        for h in handles:
            h.remove()
    return captured


def head_outputs_mean(model: nn.Module, tokens: Tensor) -> Tensor:
    """Each head's output (before W_o) averaged over the rows and positions of ``tokens``: the
    value mean ablation puts in its place (the distribution is the one ``tokens`` is drawn from).

    Shapes: tokens (B, T) -> (L, H, Dh).
    """
    return torch.stack([z.float().mean(dim=(0, 1)) for z in head_outputs(model, tokens)])  # (L, H, Dh)


@contextlib.contextmanager
def ablate_heads(model: nn.Module, heads: Mapping[tuple[int, int], str | Tensor]) -> Iterator[nn.Module]:
    """Within the block, the output of each head ``(layer, head)`` (before W_o) is replaced by
    zero (``"zero"``) or by a fixed vector (Dh,), usually its mean (:func:`head_outputs_mean`).

    ``with ablate_heads(model, {(0, 1): "zero"}): loss = ...``. Zeroing a head's output is the
    same as zeroing its columns of W_o (tested).
    """
    attns = _attentions(model)
    by_layer: dict[int, dict[int, str | Tensor]] = {}
    for (layer, head), value in heads.items():
        _check_head(model, layer, head)
        if isinstance(value, str):
            if value != "zero":
                raise error(
                    f"una cabeza se anula con «zero» o con un vector (Dh,), no {value!r}",
                    f"a head is ablated with 'zero' or a vector (Dh,), got {value!r}",
                )
        elif not isinstance(value, Tensor) or tuple(value.shape) != (attns[layer].d_head,):
            shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
            raise error(
                f"el valor de la cabeza ({layer}, {head}) debe tener forma ({attns[layer].d_head},), no {shape}",
                f"the value of head ({layer}, {head}) must have shape ({attns[layer].d_head},), got {shape}",
            )
        by_layer.setdefault(layer, {})[head] = value

    def replace(attn: nn.Module, chosen: dict[int, str | Tensor]):
        def hook(module, args):
            z = args[0].reshape(*args[0].shape[:-1], attn.n_heads, attn.d_head).clone()  # (B, T, H, Dh)
            for head, value in chosen.items():
                z[..., head, :] = 0.0 if isinstance(value, str) else value.to(z)
            return (z.flatten(-2),)  # (B, T, H · Dh)

        return hook

    handles = [
        attns[layer].W_o.register_forward_pre_hook(replace(attns[layer], chosen)) for layer, chosen in by_layer.items()
    ]
    try:
        yield model
    finally:
        for h in handles:
            h.remove()


# --- removing one head from one path ---------------------------------------------------

_PROJECTIONS = {"q": "W_q", "k": "W_k", "v": "W_v"}


@torch.no_grad()
def run_with_removed(
    model: nn.Module,
    tokens: Tensor,
    source: tuple[int, int] | Sequence[tuple[int, int]],
    into: tuple[int, str],
) -> tuple[Tensor, list[Tensor]]:
    """Run ``model`` with the output of head ``source = (layer, head)`` (or of each head of a list
    of them) taken out of what layer ``into[0]`` reads for its keys (``"k"``), queries (``"q"``)
    or values (``"v"``) only.

    A head's contribution to the residual stream is its output times its columns of W_o. The
    later layer's chosen projection reads Norm(x − contributions); its other projections, and
    every other layer, read the residual stream as it is. Only the direct path is removed
    (whatever a block in between computed from the head stays). Eval mode.

    Shapes: tokens (B, T) -> logits (B, T, V) and the L attention patterns (B, H, T, T).
    """
    attns = _attentions(model)
    sources = [tuple(source)] if isinstance(source, tuple) and source and isinstance(source[0], int) else list(source)
    layer1, kind = into
    for layer0, head0 in sources:
        _check_head(model, layer0, head0)
        if kind not in _PROJECTIONS or not layer0 < layer1 < len(attns):
            raise error(
                f"into debe ser (capa posterior a {layer0}, «q», «k» o «v»), no {into!r}",
                f"into must be (a layer after {layer0}, 'q', 'k' or 'v'), got {into!r}",
            )
    block, attn1 = _blocks(model)[layer1]
    contributions: list[Tensor] = []
    saved: dict[str, Tensor] = {}

    def take_heads(layer0: int, heads: list[int]):
        a0 = attns[layer0]

        def hook(module, args):
            z = args[0].reshape(*args[0].shape[:-1], a0.n_heads, a0.d_head)  # (B, T, H, Dh)
            for head0 in heads:
                columns = a0.W_o.weight[:, head0 * a0.d_head : (head0 + 1) * a0.d_head]  # (D, Dh)
                contributions.append(z[..., head0, :] @ columns.T)  # (B, T, D)

        return hook

    def take_input(module, args):
        saved["x"] = args[0]  # (B, T, D): the residual stream layer1 reads

    def swap(module, args):
        x = saved["x"] - sum(contributions)  # (B, T, D)
        return (block.norm1(x) if getattr(block, "norm_first", True) else x,)

    by_layer: dict[int, list[int]] = {}
    for layer0, head0 in sources:
        by_layer.setdefault(layer0, []).append(head0)
    handles = [
        attns[layer0].W_o.register_forward_pre_hook(take_heads(layer0, heads)) for layer0, heads in by_layer.items()
    ]
    handles += [
        block.register_forward_pre_hook(take_input),
        getattr(attn1, _PROJECTIONS[kind]).register_forward_pre_hook(swap),
    ]
    try:
        with eval_mode(model):
            logits, maps = model(tokens, return_attention=True)
    finally:
        for h in handles:
            h.remove()
    return logits, [m.float() for m in maps]


# --- composition from the weights ------------------------------------------------------

COMPOSITIONS = ("q", "k", "v")


def _norm_matrix(norm: nn.Module | None, d_model: int) -> Tensor:
    """The linear part of a normalisation as a (D, D) matrix: RMSNorm's diag(γ); LayerNorm's
    diag(γ)(I − 11ᵀ/D) (its centring). The 1/rms factor is a scalar per position and cancels in
    a normalised score."""
    if norm is None:
        return torch.eye(d_model)
    weight = norm.weight.detach().float().cpu() if getattr(norm, "weight", None) is not None else torch.ones(d_model)
    matrix = torch.diag(weight)
    if isinstance(norm, nn.LayerNorm):
        matrix = matrix @ (torch.eye(d_model) - torch.full((d_model, d_model), 1.0 / d_model))
    return matrix


def _head_rows(linear: nn.Linear, head: int, d_head: int) -> Tensor:
    return linear.weight.detach().float().cpu()[head * d_head : (head + 1) * d_head]  # (Dh, D)


def _reads(block: nn.Module, attn: nn.Module) -> Tensor:
    """The linear part of what a block's attention reads: its norm's (pre-norm), or the identity. (D, D)."""
    return _norm_matrix(block.norm1 if block.norm_first else None, attn.d_model)


def _ov(model: nn.Module, layer: int, head: int) -> Tensor:
    block, a = _blocks(model)[layer]
    kv = head // _group(a)
    reads = _reads(block, a)  # (D, D)
    W_o = a.W_o.weight.detach().float().cpu()[:, head * a.d_head : (head + 1) * a.d_head]  # (D, Dh)
    return W_o @ _head_rows(a.W_v, kv, a.d_head) @ reads  # (D, D)


def composition_score(reader: Tensor, writer: Tensor) -> float:
    """‖reader · writer‖_F / (‖reader‖_F ‖writer‖_F): how much of what ``writer`` writes
    ``reader`` reads (Elhage et al., 2021). Shapes: reader (Dh, D) or (D, D), writer (D, D)."""
    return float(
        torch.linalg.matrix_norm(reader @ writer)
        / (torch.linalg.matrix_norm(reader) * torch.linalg.matrix_norm(writer))
    )


def _rotated(rows: Tensor, model: nn.Module, position: int) -> Tensor:
    """A head's projection rows (Dh, D) as RoPE turns them at ``position`` (unchanged without RoPE)."""
    rope = getattr(model, "rope", None)
    if rope is None or position == 0:
        return rows
    cos, sin = rope.cos[position : position + 1].float().cpu(), rope.sin[position : position + 1].float().cpu()
    return apply_rope(rows.T[:, None, :], cos, sin, rope.interleaved)[:, 0, :].T  # (Dh, D)


def _check_offset(model: nn.Module, offset: int) -> None:
    limit = getattr(getattr(model, "config", None), "max_len", None)
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0 or (limit is not None and offset >= limit):
        raise error(
            f"offset debe ser una distancia entera entre consulta y clave, 0 ≤ offset < {limit}, no {offset!r}",
            f"offset must be an integer query–key distance, 0 ≤ offset < {limit}, got {offset!r}",
        )


def _qk(model: nn.Module, layer: int, head: int, offset: int) -> Tensor:
    """W_QK of a head at a query–key distance: (W_q N)ᵀ R_offset-turned · (W_k N), so that the score of a query
    reading x and a key reading y, ``offset`` positions before it, is xᵀ W_QK y / √Dh (norms' 1/rms left out).
    Shapes: -> (D, D)."""
    block, a = _blocks(model)[layer]
    reads = _reads(block, a)  # (D, D)
    G = _group(a)
    q = _rotated(_head_rows(a.W_q, head, a.d_head) @ reads, model, offset)  # (Dh, D)
    k = _head_rows(a.W_k, head // G, a.d_head) @ reads  # (Dh, D)
    return q.T @ k  # (D, D)


def composition_scores(
    model: nn.Module, kind: str = "k", source_layer: int = 0, target_layer: int = 1, offset: int | None = None
) -> Tensor:
    """The composition score of every head of ``source_layer`` with every head of ``target_layer``.

    For source head h0, W_OV = W_o^{h0} W_v^{h0} N0 (D, D), N0 the linear part of the norm before
    it (RMSNorm: diag(γ)). By default (``offset=None``) the target head reads it through
    W_k^{h1} N1 (``kind="k"``), W_q^{h1} N1 (``"q"``) or W_OV^{h1} (``"v"``), and the score is
    ‖W_read W_OV‖_F / (‖W_read‖_F ‖W_OV‖_F): a variant of Elhage et al.'s that reads with one
    projection. Under RoPE the key at position s is R_s W_k x with R_s a rotation applied after the
    projection; this score uses the unrotated W_k, and is the same for R_s W_k at every position,
    because an orthogonal R_s leaves Frobenius norms unchanged.

    With ``offset=d`` (an int ≥ 0) the score is Elhage et al.'s own, which reads through the
    bilinear W_QK = (W_q N1)ᵀ R W_k N1 of a query d positions after its key (under RoPE W_QK depends
    on that distance): K-composition ‖W_QK W_OV‖_F / (‖W_QK‖_F ‖W_OV‖_F), Q-composition the same
    with W_QKᵀ; V-composition does not read W_QK and is the default's.

    Returns (H0, H1): row h0, column h1.
    """
    if kind not in COMPOSITIONS:
        raise error(
            f"kind debe ser uno de {COMPOSITIONS}, no {kind!r}", f"kind must be one of {COMPOSITIONS}, got {kind!r}"
        )
    attns = _attentions(model)
    if not 0 <= source_layer < target_layer < len(attns):
        raise error(
            f"hace falta 0 ≤ source_layer < target_layer < {len(attns)}, no {source_layer} y {target_layer}",
            f"0 ≤ source_layer < target_layer < {len(attns)} is needed, got {source_layer} and {target_layer}",
        )
    if offset is not None:
        _check_offset(model, offset)
    block1, a1 = _blocks(model)[target_layer]
    reads = _reads(block1, a1)  # (D, D)
    G = _group(a1)
    scores = torch.empty(attns[source_layer].n_heads, a1.n_heads)
    for h0 in range(attns[source_layer].n_heads):
        writer = _ov(model, source_layer, h0)  # (D, D)
        for h1 in range(a1.n_heads):
            if kind == "v":
                reader = _ov(model, target_layer, h1)  # (D, D)
            elif offset is not None:
                qk = _qk(model, target_layer, h1, offset)  # (D, D)
                reader = qk if kind == "k" else qk.T
            elif kind == "q":
                reader = _head_rows(a1.W_q, h1, a1.d_head) @ reads  # (Dh, D)
            else:
                reader = _head_rows(a1.W_k, h1 // G, a1.d_head) @ reads  # (Dh, D)
            scores[h0, h1] = composition_score(reader, writer)
    return scores


def composition_baseline(
    d_model: int,
    d_head: int,
    kind: str = "k",
    draws: int = 200,
    generator: torch.Generator | None = None,
    bilinear: bool = False,
) -> float:
    """The mean composition score of random matrices of the same shapes: a reader (Dh, D) (for
    ``"v"``, a W_OV (D, Dh)(Dh, D); with ``bilinear=True``, for ``"q"`` and ``"k"``, a W_QK
    (D, Dh)(Dh, D), the reader of Elhage et al.'s own score) and a writer W_o W_v (D, Dh)(Dh, D),
    all entries independent standard Gaussians: what the score is when nothing in the weights aligns."""
    if kind not in COMPOSITIONS:
        raise error(
            f"kind debe ser uno de {COMPOSITIONS}, no {kind!r}", f"kind must be one of {COMPOSITIONS}, got {kind!r}"
        )
    if draws < 1:
        raise error(f"draws debe ser positivo, no {draws}", f"draws must be positive, got {draws}")
    total = 0.0
    for _ in range(draws):
        writer = torch.randn(d_model, d_head, generator=generator) @ torch.randn(d_head, d_model, generator=generator)
        if kind == "v" or bilinear:
            reader = torch.randn(d_model, d_head, generator=generator) @ torch.randn(
                d_head, d_model, generator=generator
            )
        else:
            reader = torch.randn(d_head, d_model, generator=generator)
        total += composition_score(reader, writer)
    return total / draws


# --- induction by the tokens, for real text --------------------------------------------


def prefix_matching_score(pattern: Tensor, tokens: Tensor) -> Tensor:
    """Olsson et al.'s prefix matching: the attention from position t to the positions s ≤ t whose
    *previous* token is token t (tokens[s − 1] = tokens[t], s ≥ 1), summed over those s and averaged
    over every (row, t) that has at least one, per head. Defined by the tokens, not by a period: on
    a sequence of distinct tokens repeated with period P it is :func:`induction_score`; on real text
    it counts every earlier occurrence of the current token, wherever it is.

    Shapes: pattern (B, H, T, T), tokens (B, T) -> (H,).
    """
    _check_pattern(pattern)
    B, H, T, _ = pattern.shape
    if not isinstance(tokens, Tensor) or tuple(tokens.shape) != (B, T) or tokens.is_floating_point():
        shape = tuple(tokens.shape) if isinstance(tokens, Tensor) else type(tokens).__name__
        raise error(
            f"tokens debe ser un tensor de enteros ({B}, {T}), como el patrón, no {shape}",
            f"tokens must be an integer tensor ({B}, {T}), as the pattern, got {shape}",
        )
    tokens = tokens.to(pattern.device)
    before = torch.cat([torch.full_like(tokens[:, :1], -1), tokens[:, :-1]], dim=1)  # (B, T): tokens[s − 1]
    t = torch.arange(T, device=pattern.device)
    causal = t[None, :] <= t[:, None]  # (T, T): s ≤ t
    match = (before[:, None, :] == tokens[:, :, None]) & causal[None] & (t[None, None, :] >= 1)  # (B, T, T)
    counted = match.any(-1)  # (B, T): the (row, t) with an earlier occurrence
    if not bool(counted.any()):
        raise error(
            "ningún token de tokens aparece antes en su fila: no hay nada que emparejar",
            "no token of tokens occurs earlier in its row: there is nothing to match",
        )
    weight = (pattern.float() * match[:, None]).sum(-1)  # (B, H, T)
    c = counted[:, None, :].float()  # (B, 1, T)
    return (weight * c).sum(dim=(0, 2)) / c.sum(dim=(0, 2))  # (H,)


# --- the circuits read from the weights --------------------------------------------------


def _final_reads(model: nn.Module) -> Tensor:
    """W_U times the linear part of the final norm. Shapes: -> (V, D)."""
    W_U = model.lm_head.weight.detach().float().cpu()  # (V, D)
    return W_U @ _norm_matrix(getattr(model, "norm", None), W_U.size(1))


def _embedding(model: nn.Module) -> Tensor:
    return model.token.weight.detach().float().cpu()  # (V, D)


def ov_circuit(model: nn.Module, layer: int, head: int) -> Tensor:
    """The full OV circuit of a head: row s is what the head adds to the logits when it attends to
    (only) a position holding token s, read straight from the embedding:
    W_U N_f W_o^h W_v^h N W_E[s] (norms' gains folded, their 1/rms, a positive number per position,
    left out). A head that copies raises the logit of the token it attends to: its largest entry of
    each row is on the diagonal (:func:`diagonal_score`), and its eigenvalues are mostly positive
    (:func:`positive_eigenvalue_score`). The path through earlier heads is not counted.

    Shapes: -> (V, V), row: the token attended to, column: the logit raised.
    """
    _check_head(model, layer, head)
    return _embedding(model) @ (_final_reads(model) @ _ov(model, layer, head)).T  # (V, V)


def qk_circuit(
    model: nn.Module,
    layer: int,
    head: int,
    offset: int = 0,
    through: Sequence[tuple[int, int]] | None = None,
) -> Tensor:
    """The full QK circuit of a head: entry [a, b] is the attention score (before the softmax) of a
    query reading token a for a key ``offset`` positions earlier reading token b, straight from the
    embedding: W_E[a]ᵀ W_QK W_E[b] / √Dh (norms' gains folded, 1/rms left out; under RoPE W_QK is
    turned by the distance). With ``through=[(layer0, head0), …]`` the key reads instead what those
    earlier heads write when they attend to token b, Σ W_OV W_E[b]: for a previous-token head, b is
    the key's *previous* token, and a head that composes with it by K-composition puts its largest
    score of each row on the diagonal (:func:`diagonal_score`).

    Shapes: -> (V, V), row: the query's token, column: the key's (or its previous) token.
    """
    _check_head(model, layer, head)
    _check_offset(model, offset)
    E = _embedding(model)  # (V, D)
    keys = E
    if through is not None:
        through = list(through)
        for layer0, head0 in through:
            _check_head(model, layer0, head0)
            if layer0 >= layer:
                raise error(
                    f"through debe nombrar cabezas de capas anteriores a {layer}, no ({layer0}, {head0})",
                    f"through must name heads of layers before {layer}, got ({layer0}, {head0})",
                )
        keys = sum(E @ _ov(model, layer0, head0).T for layer0, head0 in through)  # (V, D)
    d_head = _attentions(model)[layer].d_head
    return E @ _qk(model, layer, head, offset) @ keys.T / d_head**0.5  # (V, V)


def _check_square(matrix: Tensor) -> None:
    if not isinstance(matrix, Tensor) or matrix.dim() != 2 or matrix.size(0) != matrix.size(1) or matrix.numel() == 0:
        shape = tuple(matrix.shape) if isinstance(matrix, Tensor) else type(matrix).__name__
        raise error(
            f"se esperaba una matriz cuadrada (V, V), no {shape}", f"expected a square matrix (V, V), got {shape}"
        )


def diagonal_score(matrix: Tensor) -> float:
    """The fraction of rows whose largest entry is on the diagonal (a tie counts against it): 1 for a
    circuit that copies every token, about 1/V for a random one. Shapes: matrix (V, V) -> a number."""
    _check_square(matrix)
    m = matrix.detach().float()
    diag = m.diagonal()
    others = m.masked_fill(torch.eye(m.size(0), dtype=torch.bool, device=m.device), float("-inf"))
    if m.size(0) == 1:
        return 1.0
    return float((diag > others.max(dim=1).values).float().mean())


def positive_eigenvalue_score(matrix: Tensor) -> float:
    """Elhage et al.'s measure of copying: Σ λ_i / Σ |λ_i| over the eigenvalues λ of ``matrix`` (the
    sum of the real parts over the sum of the moduli). 1 when every eigenvalue is positive (the
    identity), −1 when every one is negative, near 0 for a random matrix. Shapes: (V, V) -> a number."""
    _check_square(matrix)
    eig = torch.linalg.eigvals(matrix.detach().double().cpu())
    total = float(eig.abs().sum())
    return float(eig.real.sum() / total) if total > 0 else 0.0


# --- direct logit attribution ----------------------------------------------------------


@torch.no_grad()
def direct_logit_attribution(model: nn.Module, tokens: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """What each head writes, directly, into the logit of the token that comes next (centred: minus
    the mean logit over the vocabulary, since only differences between logits count), in eval mode.
    With ``targets`` (B, T − 1), into the logit of those tokens instead (e.g. ``tokens[:, :-1]``, the
    current token): what a head does to a token that is not the right one.

    The logits are W_U Norm(x) with x the final residual stream: the embedding plus every head's
    output times its columns of W_o (plus what the rest of the model wrote). With the final norm's
    scale per position taken from the run (1/rms for RMSNorm, 1/σ and the centring for LayerNorm),
    the logits are a sum over those parts: a head's term is its direct effect. A head that only
    feeds a later head (through its keys, queries or values) has a small direct effect and can still
    be necessary: removing it (:func:`ablate_heads`) measures its whole effect.

    Shapes: tokens (B, T) -> heads (B, T − 1, L, H) and the rest (B, T − 1): the embedding, biases,
    feed-forward layers; ``heads.sum((-1, -2)) + rest`` is the centred logit of the next token (of ``targets``).
    """
    expected = (tokens.size(0), tokens.size(1) - 1)
    if targets is not None and (tuple(targets.shape) != expected or targets.is_floating_point()):
        raise error(
            f"targets debe tener forma {expected} e ids enteros, no {tuple(targets.shape)} de {targets.dtype}",
            f"targets must have shape {expected} and integer ids, got {tuple(targets.shape)} of {targets.dtype}",
        )
    attns = _attentions(model)
    norm = getattr(model, "norm", None)
    if norm is not None and not isinstance(norm, (nn.LayerNorm, RMSNorm)):
        raise error(
            "la norma final debe ser RMSNorm o LayerNorm para repartir los logits entre las cabezas",
            "the final norm must be RMSNorm or LayerNorm to share the logits among the heads",
        )
    saved: dict[str, Tensor] = {}
    captured: list[Tensor] = []

    def take_final(module, args):
        saved["x"] = args[0]

    handles = [
        a.W_o.register_forward_pre_hook(
            lambda module, args, a=a: captured.append(args[0].reshape(*args[0].shape[:-1], a.n_heads, a.d_head))
        )
        for a in attns
    ]
    handles.append((norm if norm is not None else model.lm_head).register_forward_pre_hook(take_final))
    try:
        with eval_mode(model):
            logits = model(tokens)  # (B, T, V)
    finally:
        for h in handles:
            h.remove()
    x = saved["x"].float()  # (B, T, D)
    W_U = model.lm_head.weight.float()  # (V, D)
    nxt = tokens[:, 1:] if targets is None else targets.to(tokens.device)  # (B, T-1)
    direction = W_U[nxt] - W_U.mean(0)  # (B, T-1, D): the next token's row, centred

    def linear(c: Tensor) -> Tensor:  # the final norm's action on one part, at the run's scale
        if norm is None:
            return c
        if isinstance(norm, RMSNorm):
            scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps)  # (B, T, 1)
            return c * scale * norm.weight.float()
        scale = torch.rsqrt(x.var(-1, keepdim=True, unbiased=False) + norm.eps)
        out = (c - c.mean(-1, keepdim=True)) * scale
        return out * norm.weight.float() if norm.weight is not None else out

    heads = []
    for a, z in zip(attns, captured):
        W_o = a.W_o.weight.float()  # (D, H·Dh)
        per_head = []
        for h in range(a.n_heads):
            part = z[..., h, :].float() @ W_o[:, h * a.d_head : (h + 1) * a.d_head].T  # (B, T, D)
            per_head.append((linear(part)[:, :-1] * direction).sum(-1))  # (B, T-1)
        heads.append(torch.stack(per_head, dim=-1))  # (B, T-1, H)
    heads = torch.stack(heads, dim=-2)  # (B, T-1, L, H)
    centred = logits.float()[:, :-1].gather(-1, nxt[..., None])[..., 0] - logits.float()[:, :-1].mean(-1)  # (B, T-1)
    return heads, centred - heads.sum(dim=(-1, -2))
