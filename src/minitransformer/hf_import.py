"""Weights from ``transformers`` in the course's decoder-only models: GPT-2 into
:class:`~minitransformer.gpt.GPT` (:func:`from_gpt2`) and Llama into
:class:`~minitransformer.modern.ModernTransformer` (:func:`from_llama`).

Every setting of the source configuration that changes what the model computes is carried over
exactly or refused with an error that names it. The models are built from a config in the
notebooks and tests (no download); a real checkpoint converts the same way. (BERT's weights in our
:class:`~minitransformer.model.Encoder`: :mod:`~minitransformer.pretrained`.)

Letters: D d_model, V vocabulary.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .gpt import GPT, GPTConfig
from .i18n import error
from .modern import ModernConfig, ModernTransformer

__all__ = ["from_gpt2", "from_llama"]

# --- GPT-2 ------------------------------------------------------------------------------------


# transformers' activation names -> ours, where the function is the same (the tanh formulas of
# gelu_new, gelu_fast and gelu_accurate differ from PyTorch's tanh GELU only by rounding)
_GPT2_ACTIVATIONS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_python_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu_accurate": "gelu_tanh",
    "gelu": "gelu",
    "gelu_python": "gelu",
    "relu": "relu",
}


def _refuse_gpt2(flag: str, value, es: str, en: str):
    return error(
        f"from_gpt2 no puede representar {flag}={value!r} de esta configuración de GPT-2: {es}",
        f"from_gpt2 cannot represent {flag}={value!r} of this GPT-2 configuration: {en}",
    )


def _gpt2_attention_factor(hf, layer: int, d_head: int) -> float:
    """What GPT-2 multiplies the scores by, relative to our 1/√d_head (folded into W_q)."""
    scaling = d_head**-0.5 if getattr(hf, "scale_attn_weights", True) else 1.0
    if getattr(hf, "scale_attn_by_inverse_layer_idx", False):
        scaling /= float(layer + 1)
    return scaling * math.sqrt(d_head)


def from_gpt2(hf_model) -> GPT:
    """Our :class:`GPT` with the weights of a ``transformers`` ``GPT2LMHeadModel``, in eval mode.

    GPT-2 stores its linear layers as ``Conv1D`` with weights (in, out): they are transposed;
    its ``c_attn`` holds W_q, W_k and W_v side by side: it is split in three. Every setting of
    ``GPT2Config`` that changes the function is carried over exactly or refused with an error
    naming it: ``activation_function``, ``layer_norm_epsilon``, ``n_inner`` and
    ``tie_word_embeddings`` map to :class:`GPTConfig`; ``scale_attn_weights=False`` and
    ``scale_attn_by_inverse_layer_idx=True`` change the scores' scale, which is folded into
    W_q; ``reorder_and_upcast_attn`` only changes the order of float32 operations;
    ``add_cross_attention`` and activations we do not have are refused. Dropout is not
    carried over (the model is returned for inference, dropout 0).
    """
    hf = getattr(hf_model, "config", None)
    if getattr(hf, "model_type", None) != "gpt2" or not hasattr(hf_model, "lm_head"):
        raise error(
            f"from_gpt2 espera un GPT2LMHeadModel de transformers, no {type(hf_model).__name__}",
            f"from_gpt2 expects a transformers GPT2LMHeadModel, got {type(hf_model).__name__}",
        )
    if hf.activation_function not in _GPT2_ACTIVATIONS:
        raise _refuse_gpt2(
            "activation_function",
            hf.activation_function,
            f"las activaciones posibles son {sorted(_GPT2_ACTIVATIONS)}",
            f"the possible activations are {sorted(_GPT2_ACTIVATIONS)}",
        )
    if getattr(hf, "add_cross_attention", False):
        raise _refuse_gpt2(
            "add_cross_attention",
            True,
            "nuestro GPT no tiene atención cruzada (para un codificador–decodificador, usa Transformer)",
            "our GPT has no cross-attention (for an encoder–decoder, use Transformer)",
        )
    config = GPTConfig(
        vocab_size=hf.vocab_size,
        max_len=hf.n_positions,
        d_model=hf.n_embd,
        n_heads=hf.n_head,
        n_layers=hf.n_layer,
        d_ff=hf.n_inner or 4 * hf.n_embd,
        dropout=0.0,
        activation=_GPT2_ACTIVATIONS[hf.activation_function],
        layer_norm_eps=hf.layer_norm_epsilon,
        tie_output=bool(hf.tie_word_embeddings),
    )
    dtype = next(hf_model.parameters()).dtype
    model = GPT(config).to(dtype)
    sd = hf_model.state_dict()
    used = {"lm_head.weight"}  # tied, or copied below
    D = config.d_model

    def take(name: str, shape: tuple[int, ...]) -> Tensor:
        if name not in sd or tuple(sd[name].shape) != shape:
            got = tuple(sd[name].shape) if name in sd else None
            raise error(
                f"from_gpt2: el parámetro {name} de GPT-2 tiene forma {got}, y su configuración pide {shape}",
                f"from_gpt2: GPT-2's parameter {name} has shape {got}, and its configuration asks for {shape}",
            )
        used.add(name)
        return sd[name]

    with torch.no_grad():
        model.token.weight.copy_(take("transformer.wte.weight", (config.vocab_size, D)))
        model.position.weight.copy_(take("transformer.wpe.weight", (config.max_len, D)))
        for i, layer in enumerate(model.layers):
            p = f"transformer.h.{i}."
            w, b = take(p + "attn.c_attn.weight", (D, 3 * D)), take(p + "attn.c_attn.bias", (3 * D,))
            for j, lin in enumerate((layer.self_attn.W_q, layer.self_attn.W_k, layer.self_attn.W_v)):
                lin.weight.copy_(w[:, j * D : (j + 1) * D].T)
                lin.bias.copy_(b[j * D : (j + 1) * D])
            factor = _gpt2_attention_factor(hf, i, config.d_head)
            if factor != 1.0:  # GPT-2's scale of the scores, in W_q: (c·q)·k / √d_head
                layer.self_attn.W_q.weight.mul_(factor)
                layer.self_attn.W_q.bias.mul_(factor)
            layer.self_attn.W_o.weight.copy_(take(p + "attn.c_proj.weight", (D, D)).T)
            layer.self_attn.W_o.bias.copy_(take(p + "attn.c_proj.bias", (D,)))
            layer.feed_forward.W_1.weight.copy_(take(p + "mlp.c_fc.weight", (D, config.d_ff)).T)
            layer.feed_forward.W_1.bias.copy_(take(p + "mlp.c_fc.bias", (config.d_ff,)))
            layer.feed_forward.W_2.weight.copy_(take(p + "mlp.c_proj.weight", (config.d_ff, D)).T)
            layer.feed_forward.W_2.bias.copy_(take(p + "mlp.c_proj.bias", (D,)))
            for ours, theirs in ((layer.norm1, "ln_1"), (layer.norm2, "ln_2")):
                ours.weight.copy_(take(p + theirs + ".weight", (D,)))
                ours.bias.copy_(take(p + theirs + ".bias", (D,)))
        model.norm.weight.copy_(take("transformer.ln_f.weight", (D,)))
        model.norm.bias.copy_(take("transformer.ln_f.bias", (D,)))
        if not config.tie_output:
            model.lm_head.weight.copy_(take("lm_head.weight", (config.vocab_size, D)))
    unused = sorted(name for name, _ in hf_model.named_parameters() if name not in used)
    if unused:  # a module this conversion does not know would be dropped silently
        raise error(
            f"from_gpt2 no sabe qué hacer con estos parámetros de GPT-2: {unused[:4]}",
            f"from_gpt2 does not know what to do with these GPT-2 parameters: {unused[:4]}",
        )
    return model.eval()


# --- Llama --------------------------------------------------------------------------------------


def _llama_refusal(field: str, value, es: str, en: str) -> ValueError:
    return error(
        f"from_llama no puede representar {field} = {value!r} de esta LlamaConfig: {es}",
        f"from_llama cannot represent {field} = {value!r} of this LlamaConfig: {en}",
    )


def _llama_config(c) -> ModernConfig:
    """The :class:`ModernConfig` of a ``LlamaConfig``; a field it cannot represent exactly is refused."""
    if getattr(c, "model_type", "llama") != "llama":
        raise _llama_refusal(
            "model_type", c.model_type, "solo se convierten modelos Llama.", "only Llama models are converted."
        )
    if hasattr(c, "rope_parameters"):  # transformers ≥ 5: rope_type and rope_theta in one dictionary
        rope, field = dict(c.rope_parameters or {}), "rope_parameters['rope_type']"
    else:  # transformers 4: rope_scaling (None when RoPE is not scaled) and rope_theta
        rope, field = dict(getattr(c, "rope_scaling", None) or {}), "rope_scaling['rope_type']"
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type != "default":
        raise _llama_refusal(
            field,
            rope_type,
            "el curso solo tiene el RoPE original, sin escalar las posiciones ni las frecuencias.",
            "the course has only the original RoPE, with no scaling of positions or frequencies.",
        )
    theta = rope.get("rope_theta", getattr(c, "rope_theta", 10000.0))
    if getattr(c, "hidden_act", "silu") != "silu":
        raise _llama_refusal(
            "hidden_act", c.hidden_act, "SwiGLU usa SiLU como compuerta.", "SwiGLU uses SiLU as its gate."
        )
    attention_bias, mlp_bias = bool(getattr(c, "attention_bias", False)), bool(getattr(c, "mlp_bias", False))
    if attention_bias != mlp_bias:
        field, value = ("attention_bias", True) if attention_bias else ("mlp_bias", True)
        raise _llama_refusal(
            field,
            value,
            "ModernConfig tiene un solo interruptor, bias, para las proyecciones de la atención y la red "
            "prealimentada: attention_bias y mlp_bias deben ser iguales.",
            "ModernConfig has one switch, bias, for the attention projections and the feed-forward network: "
            "attention_bias and mlp_bias must be equal.",
        )
    if float(getattr(c, "attention_dropout", 0.0) or 0.0) != 0.0:
        raise _llama_refusal(
            "attention_dropout",
            c.attention_dropout,
            "el dropout del curso actúa también sobre las salidas de los bloques, no solo sobre los pesos de atención.",
            "the course's dropout also acts on the blocks' outputs, not only on the attention weights.",
        )
    n_heads = c.num_attention_heads
    head_dim = getattr(c, "head_dim", None)
    padding = getattr(c, "pad_token_id", None)
    return ModernConfig(
        vocab_size=c.vocab_size,
        d_model=c.hidden_size,
        n_heads=n_heads,
        n_kv_heads=getattr(c, "num_key_value_heads", None) or n_heads,
        head_dim=None if head_dim in (None, c.hidden_size // n_heads) and c.hidden_size % n_heads == 0 else head_dim,
        d_ff=c.intermediate_size,
        n_layers=c.num_hidden_layers,
        max_len=c.max_position_embeddings,
        rope_base=float(theta),
        rope_layout="halves",  # Hugging Face's Llama turns the halves (its rotate_half)
        norm_eps=c.rms_norm_eps,
        tie_output=bool(getattr(c, "tie_word_embeddings", False)),
        bias=attention_bias,
        pad_id=padding if padding is not None and 0 <= padding < c.vocab_size else None,
    )


def from_llama(hf_model: nn.Module) -> ModernTransformer:
    """A :class:`ModernTransformer` with the weights of a ``transformers`` ``LlamaForCausalLM``, in eval mode.

    Every field of the ``LlamaConfig`` that changes what the model computes is either carried
    over exactly (sizes, grouped-query heads, ``head_dim``, ``rope_theta``, ``rms_norm_eps``,
    biases, tied embeddings, ``pad_token_id`` as ``pad_id``: padding is then never attended to,
    as in Hugging Face's ``generate`` with its attention mask) or refused with an error that names it (RoPE scaling, another
    activation, attention-only dropout, attention and MLP biases that differ). The RoPE layout
    is "halves", Hugging Face's. Weights are copied into float32.
    """
    config = _llama_config(hf_model.config)
    sd = hf_model.state_dict()
    if "model.embed_tokens.weight" not in sd:
        raise error(
            f"from_llama necesita un LlamaForCausalLM (con su cabeza de salida), no {type(hf_model).__name__}",
            f"from_llama needs a LlamaForCausalLM (with its output head), not {type(hf_model).__name__}",
        )
    model = ModernTransformer(config)
    names = {
        "token.weight": "model.embed_tokens.weight",
        "norm.weight": "model.norm.weight",
    }
    if not config.tie_output:
        names["lm_head.weight"] = "lm_head.weight"
    parts = {
        "attn.W_q": "self_attn.q_proj",
        "attn.W_k": "self_attn.k_proj",
        "attn.W_v": "self_attn.v_proj",
        "attn.W_o": "self_attn.o_proj",
        "feed_forward.W_gate": "mlp.gate_proj",
        "feed_forward.W_up": "mlp.up_proj",
        "feed_forward.W_down": "mlp.down_proj",
        "norm1": "input_layernorm",
        "norm2": "post_attention_layernorm",
    }
    kinds = ("weight", "bias") if config.bias else ("weight",)
    for i in range(config.n_layers):
        for ours, theirs in parts.items():
            for kind in kinds if not ours.startswith("norm") else ("weight",):
                names[f"blocks.{i}.{ours}.{kind}"] = f"model.layers.{i}.{theirs}.{kind}"
    own = model.state_dict()
    if set(own) != set(names) | ({"lm_head.weight"} if config.tie_output else set()):
        raise error(
            "los pesos del modelo del curso no casan con los de Llama",
            "the course model's weights do not match Llama's",
        )
    with torch.no_grad():
        for ours, theirs in names.items():
            own[ours].copy_(sd[theirs])
    if config.pad_id is not None:
        model.token.padding_idx = config.pad_id  # as Llama's: the padding embedding gets no gradient
    return model.eval()
