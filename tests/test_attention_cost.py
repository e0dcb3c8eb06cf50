"""What attention costs: the online softmax equals softmax, the backends run and fall back (minitransformer.attention_cost)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from minitransformer.attention import causal_mask, scaled_dot_product_attention
from minitransformer.attention_cost import (
    compare_backends,
    online_attention,
    online_softmax,
    power_law_fit,
    run_backend,
)

# --- the online softmax -----------------------------------------------------------------


@pytest.mark.parametrize("block", [1, 3, 16, 100])
def test_online_softmax_equals_softmax(block):
    scores = torch.randn(4, 5, 37) * 10
    scores[0, 0, 20] = 1000.0  # a large score late in the row: the running maximum must rescale
    torch.testing.assert_close(online_softmax(scores, block), torch.softmax(scores, dim=-1))


@pytest.mark.parametrize("block", [1, 4, 7, 64])
def test_online_attention_equals_attention(block):
    q, k, v = torch.randn(2, 3, 11, 8), torch.randn(2, 3, 29, 8) * 3, torch.randn(2, 3, 29, 5)
    torch.testing.assert_close(online_attention(q, k, v, block), F.scaled_dot_product_attention(q, k, v))


# --- PyTorch's backends (notebook 10's GPU cell, run here on the CPU) -------------------------


@pytest.mark.parametrize("is_causal", [True, False])
def test_compare_backends_runs_math_and_a_fused_backend(is_causal):
    q, k, v = (torch.randn(2, 3, 40, 8) for _ in range(3))
    math_run, fused = compare_backends(q, k, v, is_causal=is_causal)
    assert (math_run.name, fused.name) == ("MATH", "FLASH_ATTENTION")  # the CPU has PyTorch's flash kernel
    expected = scaled_dot_product_attention(q, k, v, causal_mask(40) if is_causal else None)[0]
    torch.testing.assert_close(math_run.output, expected)
    torch.testing.assert_close(fused.output, expected)
    assert math_run.ms > 0 and fused.ms > 0
    assert math_run.peak_mib is None and fused.peak_mib is None  # memory is measured on CUDA only


def test_compare_backends_falls_back_when_a_backend_has_no_kernel(monkeypatch):
    """As on a T4, which has no FlashAttention kernel: the next fused backend runs instead."""
    from minitransformer import attention_cost

    q = torch.randn(1, 2, 16, 8)
    with pytest.raises(RuntimeError):
        run_backend("EFFICIENT_ATTENTION", q, q, q)  # no memory-efficient kernel on the CPU
    monkeypatch.setattr(attention_cost, "FUSED_BACKENDS", ("EFFICIENT_ATTENTION", "FLASH_ATTENTION"))
    assert compare_backends(q, q, q)[1].name == "FLASH_ATTENTION"
    monkeypatch.setattr(attention_cost, "FUSED_BACKENDS", ("EFFICIENT_ATTENTION",))
    with pytest.raises(RuntimeError, match="EFFICIENT_ATTENTION.*cpu.*float32"):
        compare_backends(q, q, q)


def test_compare_backends_does_not_hide_running_out_of_memory(monkeypatch):
    from minitransformer import attention_cost

    def out_of_memory(name, *args):
        if name != "MATH":
            raise torch.cuda.OutOfMemoryError("out of memory")
        return real(name, *args)

    real = attention_cost.run_backend
    monkeypatch.setattr(attention_cost, "run_backend", out_of_memory)
    q = torch.randn(1, 2, 16, 8)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        compare_backends(q, q, q)


# --- the power law of a measured cost ---------------------------------------------------------


def test_power_law_fit_recovers_a_power_law():
    x = [2.0, 4.0, 8.0, 16.0]
    slope, factor = power_law_fit(x, [3 * v**2 for v in x])
    assert slope == pytest.approx(2.0) and factor == pytest.approx(3.0)
    with pytest.raises(ValueError):
        power_law_fit([1.0, 2.0], [1.0, -1.0])
    with pytest.raises(ValueError):
        power_law_fit([2.0, 2.0], [1.0, 3.0])
