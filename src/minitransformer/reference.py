"""PyTorch's own modules carrying our weights, to check our code against a reference.

``to_torch_*`` build the ``torch.nn`` module with the same configuration and copy our
weights into it, so that both compute the same function (in ``eval()`` mode, or with
dropout 0). Masks are converted: ours say True = may attend, PyTorch's say True = blocked.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .layers import DecoderLayer, EncoderLayer
from .model import Transformer

__all__ = [
    "to_torch_mha",
    "to_torch_encoder_layer",
    "to_torch_decoder_layer",
    "to_torch_transformer",
    "torch_mask",
]


def torch_mask(mask: Tensor) -> Tensor:
    """Our convention (True = may attend) to PyTorch's (True = blocked)."""
    return ~mask


@torch.no_grad()
def _copy_mha(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    theirs.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
    theirs.out_proj.weight.copy_(ours.W_o.weight)
    if ours.W_q.bias is not None:
        theirs.in_proj_bias.copy_(torch.cat([ours.W_q.bias, ours.W_k.bias, ours.W_v.bias]))
        theirs.out_proj.bias.copy_(ours.W_o.bias)


def _factory(ours: nn.Module) -> dict:
    """The device and dtype of our weights, so that the copy lives beside the original."""
    p = next(ours.parameters())
    return dict(device=p.device, dtype=p.dtype)


def to_torch_mha(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    """``nn.MultiheadAttention(batch_first=True)`` with our projections' weights."""
    theirs = nn.MultiheadAttention(
        ours.d_model,
        ours.n_heads,
        dropout=ours.dropout.p,
        bias=ours.W_q.bias is not None,
        batch_first=True,
        **_factory(ours),
    )
    _copy_mha(ours, theirs)
    return theirs


@torch.no_grad()
def _copy_common(ours, theirs) -> None:
    theirs.linear1.load_state_dict(ours.feed_forward.W_1.state_dict())
    theirs.linear2.load_state_dict(ours.feed_forward.W_2.state_dict())
    for name in ("norm1", "norm2", "norm3"):
        if hasattr(ours, name):
            getattr(theirs, name).load_state_dict(getattr(ours, name).state_dict())


def _layer_kwargs(ours) -> dict:
    mha = ours.self_attn
    return dict(
        d_model=mha.d_model,
        nhead=mha.n_heads,
        dim_feedforward=ours.feed_forward.W_1.out_features,
        dropout=ours.dropout1.p,
        activation="gelu" if isinstance(ours.feed_forward.activation, nn.GELU) else "relu",
        layer_norm_eps=ours.norm1.eps,
        batch_first=True,
        norm_first=ours.norm_first,
        **_factory(ours),
    )


def to_torch_encoder_layer(ours: EncoderLayer) -> nn.TransformerEncoderLayer:
    """``nn.TransformerEncoderLayer`` with our weights (same norm mode and activation)."""
    theirs = nn.TransformerEncoderLayer(**_layer_kwargs(ours))
    _copy_mha(ours.self_attn, theirs.self_attn)
    _copy_common(ours, theirs)
    return theirs


def to_torch_decoder_layer(ours: DecoderLayer) -> nn.TransformerDecoderLayer:
    """``nn.TransformerDecoderLayer`` with our weights (same norm mode and activation)."""
    theirs = nn.TransformerDecoderLayer(**_layer_kwargs(ours))
    _copy_mha(ours.self_attn, theirs.self_attn)
    _copy_mha(ours.cross_attn, theirs.multihead_attn)
    _copy_common(ours, theirs)
    return theirs


def to_torch_transformer(ours: Transformer) -> nn.Transformer:
    """``nn.Transformer`` with our encoder and decoder stacks' weights.

    Only the stacks: embeddings, positional encoding and the output projection are not part
    of ``nn.Transformer``; apply ours around it. As in our model, the stacks end in a final
    LayerNorm only in pre-LN mode (``nn.Transformer`` would always add one).
    """
    cfg = ours.config
    enc_layers = [to_torch_encoder_layer(layer) for layer in ours.encoder.layers]
    dec_layers = [to_torch_decoder_layer(layer) for layer in ours.decoder.layers]
    encoder = nn.TransformerEncoder(
        enc_layers[0], num_layers=len(enc_layers), norm=_clone_norm(ours.encoder.norm), enable_nested_tensor=False
    )
    decoder = nn.TransformerDecoder(dec_layers[0], num_layers=len(dec_layers), norm=_clone_norm(ours.decoder.norm))
    encoder.layers = nn.ModuleList(enc_layers)
    decoder.layers = nn.ModuleList(dec_layers)
    theirs = nn.Transformer(
        d_model=cfg.d_model,
        nhead=cfg.n_heads,
        dim_feedforward=cfg.d_ff,
        dropout=cfg.dropout,
        activation=cfg.activation,
        custom_encoder=nn.Identity(),
        custom_decoder=nn.Identity(),
        layer_norm_eps=cfg.layer_norm_eps,
        batch_first=True,
        norm_first=cfg.norm_first,
        **_factory(ours),
    )
    # nn.Transformer re-initialises its parameters in __init__: attach the copies afterwards.
    theirs.encoder, theirs.decoder = encoder, decoder
    return theirs


def _clone_norm(norm: nn.LayerNorm | None) -> nn.LayerNorm | None:
    if norm is None:
        return None
    clone = nn.LayerNorm(norm.normalized_shape, eps=norm.eps, **_factory(norm))
    clone.load_state_dict(norm.state_dict())
    return clone
