"""Positional information: the paper's sinusoidal encoding and a learned embedding.

Letters: B batch, T length, D d_model.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["sinusoidal_encoding", "SinusoidalPositionalEncoding", "LearnedPositionalEmbedding"]


def sinusoidal_encoding(max_len: int, d_model: int, interleaved: bool = True) -> Tensor:
    """The table PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...).

    Args:
        max_len: number of positions.
        d_model: width (must be even).
        interleaved: True for the paper's layout (sin on even, cos on odd dimensions);
            False puts all the sines first and all the cosines after them.

    Returns:
        a (max_len, d_model) float tensor.
    """
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even for the sinusoidal encoding, got {d_model}")
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (T, 1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    angles = position * div  # (T, D/2)
    if interleaved:
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(angles)
        pe[:, 1::2] = torch.cos(angles)
        return pe
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)  # (T, D)


def _check_length(length: int, max_len: int) -> None:
    if length > max_len:
        raise ValueError(f"sequence length {length} is longer than max_len={max_len}")


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table to its input.

    Shapes: x (B, T, D) -> (B, T, D).
    """

    def __init__(self, d_model: int, max_len: int = 512):
        super().__init__()
        self.max_len = max_len
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """``offset``: position of x's first token (after a key-value cache's positions)."""
        _check_length(offset + x.size(1), self.max_len)
        return x + self.pe[offset : offset + x.size(1)]  # (B, T, D)


class LearnedPositionalEmbedding(nn.Module):
    """Adds a trained vector per position (as BERT and GPT do).

    Shapes: x (B, T, D) -> (B, T, D).
    """

    def __init__(self, d_model: int, max_len: int = 512):
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """``offset``: position of x's first token (after a key-value cache's positions)."""
        _check_length(offset + x.size(1), self.max_len)
        positions = torch.arange(offset, offset + x.size(1), device=x.device)  # (T,)
        return x + self.embedding(positions)  # (B, T, D)
