"""Positions: the sinusoidal table against the paper's formula; the learned embedding."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from minitransformer.positional import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    sinusoidal_encoding,
)


def formula(max_len: int, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), with Python floats."""
    rows = []
    for pos in range(max_len):
        row = []
        for j in range(d_model):
            angle = pos / 10000 ** ((j - j % 2) / d_model)
            row.append(math.sin(angle) if j % 2 == 0 else math.cos(angle))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)


def test_sinusoidal_table_matches_the_formula():
    pe = sinusoidal_encoding(50, 16)
    assert pe.shape == (50, 16) and pe.dtype == torch.float32
    assert_close(pe.double(), formula(50, 16), atol=2e-5, rtol=0)


def test_non_interleaved_layout_holds_the_same_values():
    pe = sinusoidal_encoding(20, 8, interleaved=False)
    ref = formula(20, 8)
    assert_close(pe.double(), torch.cat([ref[:, 0::2], ref[:, 1::2]], dim=1), atol=2e-5, rtol=0)


def test_sinusoidal_values_lie_in_minus_one_one_and_position_zero_is_sin0_cos0():
    pe = sinusoidal_encoding(200, 32)
    assert pe.min() >= -1 and pe.max() <= 1
    assert torch.equal(pe[0, 0::2], torch.zeros(16)) and torch.equal(pe[0, 1::2], torch.ones(16))
    assert len({tuple(row.tolist()) for row in pe}) == 200  # every position is distinct


def test_a_fixed_offset_is_a_rotation():
    """PE(pos + k) is a fixed linear map (one rotation per frequency) of PE(pos)."""
    pe = sinusoidal_encoding(40, 8).double()
    k = 3
    for i in range(4):
        omega = 1 / 10000 ** (2 * i / 8)
        c, s = math.cos(omega * k), math.sin(omega * k)
        # sin(a+b) = sin a cos b + cos a sin b, cos(a+b) = cos a cos b − sin a sin b
        rot = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
        pair = pe[:, 2 * i : 2 * i + 2]  # rows (sin a, cos a) for every position
        assert_close(pair[:-k] @ rot, pair[k:], atol=1e-5, rtol=0)


def test_odd_d_model_is_refused():
    with pytest.raises(ValueError, match="even"):
        sinusoidal_encoding(10, 7)


def test_sinusoidal_module_adds_the_table():
    module = SinusoidalPositionalEncoding(8, max_len=30)
    x = torch.randn(2, 12, 8)
    assert_close(module(x), x + sinusoidal_encoding(30, 8)[:12])
    assert not list(module.parameters())  # nothing to train


def test_sinusoidal_module_follows_dtype():
    module = SinusoidalPositionalEncoding(8, max_len=30).to(dtype=torch.float64)
    out = module(torch.zeros(1, 5, 8, dtype=torch.float64))
    assert out.dtype == torch.float64
    assert_close(out[0], formula(5, 8), atol=2e-5, rtol=0)


def test_learned_embedding_shapes_and_training():
    torch.manual_seed(0)
    module = LearnedPositionalEmbedding(8, max_len=30)
    assert module.embedding.weight.shape == (30, 8)
    x = torch.randn(3, 7, 8)
    out = module(x)
    assert out.shape == (3, 7, 8)
    assert_close(out - x, module.embedding.weight[:7].expand(3, 7, 8))
    out.sum().backward()
    grad = module.embedding.weight.grad
    assert (grad[:7] == 3).all() and (grad[7:] == 0).all()  # one gradient per use, none unused


@pytest.mark.parametrize("cls", [SinusoidalPositionalEncoding, LearnedPositionalEmbedding])
def test_sequence_longer_than_max_len(cls):
    module = cls(8, max_len=10)
    module(torch.zeros(1, 10, 8))  # exactly max_len is fine
    with pytest.raises(ValueError, match=r"length 11 is longer than max_len=10"):
        module(torch.zeros(1, 11, 8))
