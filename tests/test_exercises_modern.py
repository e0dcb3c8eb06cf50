"""Notebook 10's checkers: they accept the worked solutions, reject realistic wrong answers
with the hint that names the mistake (in both languages), refuse forbidden tools, and never
crash, whatever the student's function returns or raises."""

from __future__ import annotations

import functools
import math

import pytest
import torch
import torch.nn.functional as F
from feedback_asserts import assert_correct, assert_hint
from torch import nn

from minitransformer import attention_cost, modern
from minitransformer.attention import scaled_dot_product_attention
from minitransformer.exercises.modern import (
    HINTS,
    check_cached_step,
    check_online_softmax,
    check_rope,
    check_swiglu,
)
from minitransformer.exercises.solutions.nb10 import (
    solution_cached_step,
    solution_online_softmax,
    solution_rope,
    solution_swiglu,
)
from minitransformer.kv_cache import AttentionCache
from minitransformer.modern import apply_rope, rope_cos_sin

LANGS = ["es", "en"]


# --- RoPE -------------------------------------------------------------------------------


def rope_complex(x, base):
    T, Dh = x.shape
    omega = base ** (-torch.arange(0, Dh, 2) / Dh)
    turn = torch.polar(torch.ones(T, Dh // 2), torch.arange(T)[:, None] * omega)
    return torch.view_as_real(torch.view_as_complex(x.reshape(T, Dh // 2, 2).contiguous()) * turn).reshape(T, Dh)


def rope_loops(x, base):
    T, Dh = x.shape
    out = x.clone()
    for p in range(T):
        for i in range(Dh // 2):
            a = p * base ** (-2 * i / Dh)
            c, s = math.cos(a), math.sin(a)
            out[p, 2 * i] = x[p, 2 * i] * c - x[p, 2 * i + 1] * s
            out[p, 2 * i + 1] = x[p, 2 * i] * s + x[p, 2 * i + 1] * c
    return out


def rope_general(x, base, exponent=2.0, sign=1.0, start=0, halves=False, fixed_base=None, only_even=False):
    T, Dh = x.shape
    b = fixed_base if fixed_base is not None else base
    omega = b ** (-exponent * torch.arange(Dh // 2) / Dh)
    angle = sign * (torch.arange(T)[:, None] + start) * omega
    c, s = torch.cos(angle), torch.sin(angle)
    if halves:
        a, bb = x[:, : Dh // 2], x[:, Dh // 2 :]
        return torch.cat([a * c - bb * s, a * s + bb * c], dim=-1)
    out = x.clone()
    out[:, 0::2] = x[:, 0::2] * c - x[:, 1::2] * s
    if not only_even:
        out[:, 1::2] = x[:, 0::2] * s + x[:, 1::2] * c
    return out


def rope_in_place(x, base):
    """Turns the even elements in x itself, then uses them for the odd ones."""
    T, Dh = x.shape
    angle = torch.arange(T)[:, None] * base ** (-torch.arange(0, Dh, 2) / Dh)
    x[:, 0::2] = x[:, 0::2] * torch.cos(angle) - x[:, 1::2] * torch.sin(angle)
    x[:, 1::2] = x[:, 0::2] * torch.sin(angle) + x[:, 1::2] * torch.cos(angle)
    return x


def rope_package(x, base):
    cos, sin = modern.rope_cos_sin(torch.arange(x.size(0)), x.size(1), base)
    return modern.apply_rope(x, cos, sin, interleaved=True)


def rope_stub(x, base):
    raise NotImplementedError


ROPE_WRONG = [
    (lambda x, b: rope_general(x, b, halves=True), "rope_halves"),
    (lambda x, b: rope_general(x, b, sign=-1.0), "rope_direction"),
    (lambda x, b: rope_general(x, b, exponent=1.0), "rope_frequency"),
    (lambda x, b: rope_general(x, b, exponent=4.0), "rope_frequency"),
    (lambda x, b: rope_general(x, b, start=1), "rope_start"),
    (lambda x, b: rope_general(x, b, fixed_base=10000.0), "rope_base"),
    (lambda x, b: x, "rope_identity"),
    (lambda x, b: rope_general(x, b, only_even=True), "rope_half_pair"),
    (rope_in_place, "rope_inplace"),
    (lambda x, b: rope_general(x, b) * 1.01, "rope_other"),
    (lambda x, b: rope_general(x.T, b).T if x.size(0) == x.size(1) else rope_general(x, b)[:-1], "shape"),
    (lambda x, b: torch.view_as_complex(x.reshape(x.size(0), -1, 2).contiguous()), "complex"),
    (lambda x, b: x.long(), "dtype"),
    (lambda x, b: x * float("nan"), "nan"),
    (rope_package, "forbidden"),
    (lambda x, b: modern.RotaryEmbedding(x.size(1), 64, b, interleaved=True)(x), "forbidden"),
]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer", [solution_rope, rope_complex, rope_loops])
def test_rope_accepts_right_answers(answer, lang):
    assert_correct(check_rope(answer, lang=lang), lang)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer,key", ROPE_WRONG)
def test_rope_rejects_mistakes(answer, key, lang):
    assert_hint(check_rope(answer, lang=lang), lang, key, HINTS)


def test_forbidden_package_functions_come_back_after_the_check():
    check_rope(rope_package, lang="en")
    x = torch.randn(4, 6)
    torch.testing.assert_close(rope_package(x, 100.0), solution_rope(x, 100.0))


# --- SwiGLU -----------------------------------------------------------------------------


def swiglu_silu_by_division(x, Wg, Wu, Wd):
    g = x @ Wg
    return (g / (1 + torch.exp(-g)) * (x @ Wu)) @ Wd


def swiglu_with(act, x, Wg, Wu, Wd):
    return (act(x @ Wg) * (x @ Wu)) @ Wd


def swiglu_einsum_3d(x, Wg, Wu, Wd):
    g = torch.einsum("btd,df->btf", x, Wg)
    return torch.einsum("btf,fd->btd", g * torch.sigmoid(g) * torch.einsum("btd,df->btf", x, Wu), Wd)


def swiglu_bmm_3d(x, Wg, Wu, Wd):
    B = x.size(0)
    g, u = torch.bmm(x, Wg.expand(B, -1, -1)), torch.bmm(x, Wu.expand(B, -1, -1))
    return torch.bmm(g * torch.sigmoid(g) * u, Wd.expand(B, -1, -1))


def swiglu_mm_2d(x, Wg, Wu, Wd):
    g = x.reshape(-1, x.size(-1)).mm(Wg)
    return (g * torch.sigmoid(g) * x.reshape(-1, x.size(-1)).mm(Wu)).mm(Wd).reshape(x.shape[0], -1)


def swiglu_sums_heads(x, Wg, Wu, Wd):
    """Right on 2-D and 3-D input; on 4-D it mixes the first two axes."""
    out = solution_swiglu(x, Wg, Wu, Wd)
    return out if x.dim() < 4 else out.flip(0)


SWIGLU_WRONG = [
    (lambda x, g, u, d: solution_swiglu(x, u, g, d), "swiglu_swapped"),
    (lambda x, g, u, d: swiglu_with(torch.relu, x, g, u, d), "swiglu_relu"),
    (lambda x, g, u, d: swiglu_with(torch.sigmoid, x, g, u, d), "swiglu_sigmoid"),
    (lambda x, g, u, d: ((x @ g) * torch.sigmoid(1.702 * (x @ g)) * (x @ u)) @ d, "swiglu_other"),
    (lambda x, g, u, d: ((x @ g) * 0.5 * (1 + torch.erf((x @ g) / math.sqrt(2))) * (x @ u)) @ d, "swiglu_gelu"),
    (lambda x, g, u, d: ((x @ g) * torch.sigmoid(x @ g)) @ d, "swiglu_no_up"),
    (lambda x, g, u, d: ((x @ g) * torch.sigmoid(x @ g) + (x @ u)) @ d, "swiglu_sum"),
    (lambda x, g, u, d: ((x @ g) * (x @ u) * torch.sigmoid((x @ g) * (x @ u))) @ d, "swiglu_late_silu"),
    (lambda x, g, u, d: (x @ g) * torch.sigmoid(x @ g) * (x @ u), "swiglu_no_down"),
    (lambda x, g, u, d: swiglu_with(F.silu, x, g, u, d), "forbidden"),
    (lambda x, g, u, d: swiglu_with(nn.SiLU(), x, g, u, d), "forbidden"),
    (lambda x, g, u, d: swiglu_with(torch.nn.functional.silu, x, g, u, d), "forbidden"),
    (lambda x, g, u, d: swiglu_with(torch._C._nn.silu, x, g, u, d), "forbidden"),
    (swiglu_einsum_3d, "swiglu_batched_only"),
    (swiglu_bmm_3d, "swiglu_batched_only"),
    (swiglu_mm_2d, "swiglu_batched_only"),
    (swiglu_sums_heads, "swiglu_batched_only"),
    (lambda x, g, u, d: (x @ g @ d).sum(), "shape"),
    (lambda x, g, u, d: (x @ g) @ d.T, "shape"),  # raises: a shape error, answered, not a crash
]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer", [solution_swiglu, swiglu_silu_by_division])
def test_swiglu_accepts_right_answers(answer, lang):
    assert_correct(check_swiglu(answer, lang=lang), lang)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer,key", SWIGLU_WRONG[:-1])
def test_swiglu_rejects_mistakes(answer, key, lang):
    assert_hint(check_swiglu(answer, lang=lang), lang, key, HINTS)


@pytest.mark.parametrize("lang", LANGS)
def test_swiglu_reports_the_students_exception(lang):
    feedback = check_swiglu(SWIGLU_WRONG[-1][0], lang=lang)
    assert not feedback.ok and "RuntimeError" in feedback.message


def test_silu_comes_back_after_the_check():
    check_swiglu(SWIGLU_WRONG[-4][0], lang="es")
    assert F.silu(torch.tensor([0.0])).item() == 0.0
    assert nn.SiLU()(torch.tensor([1.0])).item() == pytest.approx(1 / (1 + math.exp(-1)))


# --- online softmax ---------------------------------------------------------------------


def online_two_passes(scores, block_size):
    """Right, written differently: the statistics first, then the normalisation."""
    m = None
    for start in range(0, scores.size(-1), block_size):
        block_max = scores[:, start : start + block_size].max(dim=-1, keepdim=True).values
        m = block_max if m is None else torch.maximum(m, block_max)
    total = torch.zeros_like(m)
    for start in range(0, scores.size(-1), block_size):
        total += torch.exp(scores[:, start : start + block_size] - m).sum(dim=-1, keepdim=True)
    return torch.exp(scores - m) / total


def online_variant(kind):
    def answer(scores, block_size):
        m = torch.full((scores.size(0), 1), float("-inf"))
        l = torch.zeros_like(m)
        stop = scores.size(-1) - block_size if kind == "missing" else scores.size(-1)
        for start in range(0, stop, block_size):
            block = scores[:, start : start + block_size]
            m_new = torch.maximum(m, block.max(dim=-1, keepdim=True).values)
            if kind == "no_rescale":
                l = l + torch.exp(block - m_new).sum(-1, keepdim=True)
            elif kind == "unnormalised":
                l = torch.ones_like(l)
            elif kind == "inverted":
                l = l * torch.exp(m_new - m) + torch.exp(block - m_new).sum(-1, keepdim=True)
            else:
                l = l * torch.exp(m - m_new) + torch.exp(block - m_new).sum(-1, keepdim=True)
            m = m_new
        return torch.exp(scores - m) / l

    return answer


def online_per_block(scores, block_size):
    parts = []
    for start in range(0, scores.size(-1), block_size):
        block = scores[:, start : start + block_size]
        e = torch.exp(block - block.max(dim=-1, keepdim=True).values)
        parts.append(e / e.sum(-1, keepdim=True))
    return torch.cat(parts, dim=-1)


def online_no_max(scores, block_size):
    l = torch.zeros(scores.size(0), 1)
    for start in range(0, scores.size(-1), block_size):
        l = l + torch.exp(scores[:, start : start + block_size]).sum(-1, keepdim=True)
    return torch.exp(scores) / l


def online_whole_row(scores, block_size):
    """No softmax function, but one pass over the whole row: not online."""
    e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)


def online_global_max(scores, block_size):
    """Blocks for the sum, but the maximum of the whole row at once."""
    m = scores.amax(dim=-1, keepdim=True)
    total = sum(torch.exp(b - m).sum(-1, keepdim=True) for b in scores.split(block_size, dim=-1))
    return torch.exp(scores - m) / total


def online_fixed_blocks(width):
    """Right, but in blocks of ``width`` columns whatever block_size says."""

    def answer(scores, block_size):
        return solution_online_softmax(scores, width)

    return answer


def online_halves(scores, block_size):
    """Right, but the row cut in two chunks."""
    m = torch.full((scores.size(0), 1), float("-inf"))
    l = torch.zeros_like(m)
    for block in scores.chunk(2, dim=-1):
        m_new = torch.maximum(m, block.amax(-1, keepdim=True))
        l = l * torch.exp(m - m_new) + torch.exp(block - m_new).sum(-1, keepdim=True)
        m = m_new
    return torch.exp(scores - m) / l


def online_column_by_column(scores, block_size):
    """Right, one column at a time with element-wise operations only (no reduction)."""
    m = torch.full((scores.size(0), 1), float("-inf"))
    l = torch.zeros_like(m)
    for j in range(scores.size(-1)):
        column = scores[:, j : j + 1]
        m_new = torch.maximum(m, column)
        l = l * torch.exp(m - m_new) + torch.exp(column - m_new)
        m = m_new
    return torch.exp(scores - m) / l


def online_zero_start(scores, block_size):
    m = torch.zeros(scores.size(0), 1)
    l = torch.zeros_like(m)
    for start in range(0, scores.size(-1), block_size):
        block = scores[:, start : start + block_size]
        m_new = torch.maximum(m, block.amax(-1, keepdim=True))
        l = l * torch.exp(m - m_new) + torch.exp(block - m_new).sum(-1, keepdim=True)
        m = m_new
    return torch.exp(scores - m) / l


def online_inverted_guarded(scores, block_size):
    """The correction upside down, its NaN at the first block hidden by nan_to_num."""
    m = torch.full((scores.size(0), 1), float("-inf"))
    l = torch.zeros_like(m)
    for start in range(0, scores.size(-1), block_size):
        block = scores[:, start : start + block_size]
        m_new = torch.maximum(m, block.amax(-1, keepdim=True))
        l = l * torch.exp(m_new - m).nan_to_num(0.0, 0.0, 0.0) + torch.exp(block - m_new).sum(-1, keepdim=True)
        m = m_new
    return torch.exp(scores - m) / l


CAPTURED_SOFTMAX = torch.Tensor.softmax  # taken before the checker runs, as a student's cell could
from torch import softmax as imported_softmax  # noqa: E402


def online_hiding_the_softmax(scores, block_size):
    try:
        return torch.softmax(scores, dim=-1)
    except Exception:  # noqa: BLE001 — a student hiding the refusal
        return solution_online_softmax(scores, block_size) * 0 + torch.softmax(scores, dim=-1)


ONLINE_WRONG = [
    (online_variant("no_rescale"), "online_no_rescale"),
    (online_variant("inverted"), "online_not_finite"),
    (online_inverted_guarded, "online_inverted"),
    (online_whole_row, "online_whole_row"),
    (online_global_max, "online_whole_row"),
    (online_fixed_blocks(4), "online_ignores_block"),
    (online_fixed_blocks(1), "online_ignores_block"),
    (online_halves, "online_ignores_block"),
    (online_column_by_column, "online_ignores_block"),
    (online_zero_start, "online_zero_start"),
    (lambda s, b: imported_softmax(s, -1), "forbidden"),
    (lambda s, b: CAPTURED_SOFTMAX(s, -1), "forbidden"),
    (lambda s, b: torch.special.logsumexp(s, -1, keepdim=True).sub(s).neg().exp(), "forbidden"),
    (lambda s, b: torch._log_softmax(s, -1, False).exp(), "forbidden"),
    (lambda s, b: torch.nn.functional.log_softmax(s, -1).exp(), "forbidden"),
    (lambda s, b: torch.ops.aten._softmax(s, -1, False), "forbidden"),
    (lambda s, b: torch.nn.Softmax(dim=-1)(s), "forbidden"),
    (online_hiding_the_softmax, "forbidden"),
    (online_variant("missing"), "online_missing_block"),
    (online_per_block, "online_per_block"),
    (online_no_max, "online_overflow"),
    (lambda s, b: torch.softmax(s, dim=-1), "forbidden"),
    (lambda s, b: F.softmax(s, dim=-1), "forbidden"),
    (lambda s, b: s.softmax(-1), "forbidden"),
    (lambda s, b: torch.exp(s - torch.logsumexp(s, -1, keepdim=True)), "forbidden"),
    (lambda s, b: torch.exp(F.log_softmax(s, -1)), "forbidden"),
    (lambda s, b: torch.special.log_softmax(s, -1).exp(), "forbidden"),
    (lambda s, b: torch._softmax(s, -1, False), "forbidden"),
    (lambda s, b: attention_cost.online_softmax(s, b), "forbidden"),
    (
        lambda s, b: (
            (s - s.min(-1, keepdim=True).values).exp()
            / (s - s.min(-1, keepdim=True).values).exp().sum(-1, keepdim=True)
        ),
        "online_whole_row",
    ),
    (lambda s, b: s.argmax(-1), "dtype"),
    (lambda s, b: F.one_hot(s.argmax(-1), s.size(-1)), "dtype"),
    (lambda s, b: torch.exp(s - s.amax(-1, keepdim=True)), "online_whole_row"),
    (online_variant("unnormalised"), "online_unnormalised"),
    (lambda s, b: solution_online_softmax(s, b).flip(-1), "online_other"),
    (lambda s, b: solution_online_softmax(s, b)[:, :-1], "shape"),
]


def online_split(scores, block_size):
    """Right: torch.split, max(...).values, the running maximum started from a slice."""
    m = scores[:, :1] * 0 - float("inf")
    total = torch.zeros_like(m)
    for block in torch.split(scores, block_size, dim=1):
        new = torch.maximum(m, block.max(-1, keepdim=True).values)
        total = total * (m - new).exp() + (block - new).exp().sum(-1, keepdim=True)
        m = new
    return (scores - m).exp() / total


def online_loops_inside_blocks(scores, block_size):
    """Right: each block's maximum and sum by a loop over its columns."""
    R, S = scores.shape
    m = torch.full((R, 1), float("-inf"))
    l = torch.zeros(R, 1)
    for start in range(0, S, block_size):
        block = scores[:, start : start + block_size]
        block_max = m.clone()
        for j in range(block.size(1)):
            block_max = torch.maximum(block_max, block[:, j : j + 1])
        l = l * torch.exp(m - block_max)
        for j in range(block.size(1)):
            l = l + torch.exp(block[:, j : j + 1] - block_max)
        m = block_max
    return torch.exp(scores - m) / l


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize(
    "answer", [solution_online_softmax, online_two_passes, online_split, online_loops_inside_blocks]
)
def test_online_softmax_accepts_right_answers(answer, lang):
    assert_correct(check_online_softmax(answer, lang=lang), lang)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer,key", ONLINE_WRONG)
def test_online_softmax_rejects_mistakes(answer, key, lang):
    assert_hint(check_online_softmax(answer, lang=lang), lang, key, HINTS)


def test_softmax_comes_back_after_the_check():
    check_online_softmax(lambda s, b: torch.softmax(s, -1), lang="en")
    x = torch.tensor([[0.0, 0.0]])
    for fn in (torch.softmax, F.softmax, torch.Tensor.softmax):
        torch.testing.assert_close(fn(x, -1), torch.full((1, 2), 0.5))
    torch.testing.assert_close(attention_cost.online_softmax(x, 1), torch.full((1, 2), 0.5))


# --- a cached step of grouped-query attention with RoPE -------------------------------------


def step_by_hand(q, k, v, cache, base):
    """Written another way: RoPE by hand on (B, T, h, Dh), the heads repeated with expand, the softmax by hand."""
    B, T, H, Dh = q.shape
    S = 0 if cache.k is None else cache.k.shape[1]
    angle = torch.arange(S, S + T)[:, None] * base ** (-torch.arange(0, Dh, 2) / Dh)  # (T, Dh/2)
    c, s = angle.cos()[None, :, None], angle.sin()[None, :, None]  # (1, T, 1, Dh/2)

    def turn(x):
        a, b = x[..., : Dh // 2], x[..., Dh // 2 :]
        return torch.cat([a * c - b * s, a * s + b * c], dim=-1)

    keys, values = cache.update(turn(k), v)  # (B, S + T, Hkv, Dh)
    Hkv = keys.shape[2]
    keys = keys[:, :, :, None].expand(B, S + T, Hkv, H // Hkv, Dh).reshape(B, S + T, H, Dh)
    values = values[:, :, :, None].expand(B, S + T, Hkv, H // Hkv, Dh).reshape(B, S + T, H, Dh)
    scores = torch.einsum("bthd,bshd->bhts", turn(q), keys) / math.sqrt(Dh)
    later = torch.arange(S + T)[None, :] > torch.arange(S, S + T)[:, None]  # (T, S + T)
    weights = scores.masked_fill(later, float("-inf")).softmax(dim=-1)
    return torch.einsum("bhts,bshd->bthd", weights, values)


def step_with_sdpa_of_the_package(q, k, v, cache, base):
    """With the package's scaled_dot_product_attention (allowed) and causal_mask cut to the new rows."""
    from minitransformer.attention import causal_mask

    T, Dh = q.shape[1], q.shape[3]
    S = len(cache)
    cos, sin = rope_cos_sin(torch.arange(S, S + T), Dh, base)
    q, k = apply_rope(q.transpose(1, 2), cos, sin), apply_rope(k.transpose(1, 2), cos, sin)
    keys, values = cache.update(k.transpose(1, 2), v)
    G = q.shape[1] // keys.shape[2]
    keys, values = (x.transpose(1, 2).repeat_interleave(G, 1) for x in (keys, values))
    out, _ = scaled_dot_product_attention(q, keys, values, causal_mask(S + T)[..., S:, :])
    return out.transpose(1, 2)


STEP_RIGHT = [solution_cached_step, step_by_hand, step_with_sdpa_of_the_package]


def student_step(
    q,
    k,
    v,
    cache,
    base,
    offset="S",
    turn_q=True,
    turn_k=True,
    store="turned",
    again=False,
    pairs_interleaved=False,
    fixed_base=None,
    turn_v=False,
    heads="repeat_interleave",
    mask="causal",
    scale="head",
):
    """A student's step with one choice made differently (each argument: a mistake a student makes)."""
    B, T, H, Dh = q.shape
    S = len(cache)
    if offset == "after":  # appends first, then reads the length
        keys, values = cache.update(k, v)
        S = len(cache)
    start = {"S": S, "after": S, "zero": 0, "plus_one": S + 1, "capacity": cache.capacity}[offset]
    cos, sin = rope_cos_sin(torch.arange(start, start + T), Dh, fixed_base or base)
    turned_q = apply_rope(q.transpose(1, 2), cos, sin, interleaved=pairs_interleaved) if turn_q else q.transpose(1, 2)
    turned_k = apply_rope(k.transpose(1, 2), cos, sin, interleaved=pairs_interleaved) if turn_k else k.transpose(1, 2)
    v_in = apply_rope(v.transpose(1, 2), cos, sin).transpose(1, 2) if turn_v else v
    if offset == "after":
        keys = torch.cat([keys[:, :-T], turned_k.transpose(1, 2)], dim=1)
    elif store == "turned":
        keys, values = cache.update(turned_k.transpose(1, 2), v_in)
    else:  # stores the unturned keys but attends with the turned ones
        keys, values = cache.update(k, v_in)
        keys = torch.cat([keys[:, :S], turned_k.transpose(1, 2)], dim=1)
    keys, values = keys.transpose(1, 2), values.transpose(1, 2)  # (B, Hkv, S + T, Dh)
    if again:  # every key turned at its position, the stored ones too
        c, s = rope_cos_sin(torch.arange(keys.shape[2]), Dh, base)
        keys = apply_rope(keys, c, s)
    G = H // keys.shape[1]
    if heads == "repeat_interleave":
        keys, values = keys.repeat_interleave(G, dim=1), values.repeat_interleave(G, dim=1)
    elif heads == "repeat":
        keys, values = keys.repeat(1, G, 1, 1), values.repeat(1, G, 1, 1)
    scores = turned_q @ keys.transpose(-2, -1)
    scores = scores / {"head": math.sqrt(Dh), "model": math.sqrt(H * Dh), "none": 1.0}[scale]
    L = keys.shape[2]
    allowed = {
        "causal": torch.ones(T, L, dtype=torch.bool).tril(diagonal=L - T),
        "none": torch.ones(T, L, dtype=torch.bool),
        "top_left": torch.ones(T, L, dtype=torch.bool).tril(),
    }[mask]
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return (weights @ values).transpose(1, 2)


def step_turning_everything_again(q, k, v, cache, base):
    """Appends k as given, then turns every key the cache returns at positions 0 … S + T − 1."""
    B, T, H, Dh = q.shape
    S = len(cache)
    keys, values = cache.update(k, v)
    c, s = rope_cos_sin(torch.arange(S + T), Dh, base)
    keys = apply_rope(keys.transpose(1, 2), c, s).repeat_interleave(H // k.shape[2], 1)
    values = values.transpose(1, 2).repeat_interleave(H // k.shape[2], 1)
    q = apply_rope(q.transpose(1, 2), c[S:], s[S:])
    out, _ = scaled_dot_product_attention(q, keys, values, torch.ones(T, S + T, dtype=torch.bool).tril(S))
    return out.transpose(1, 2)


def step_without_repeating(q, k, v, cache, base):
    """No repetition of the key/value heads: broadcasting works only when Hkv is 1 (or H)."""
    T, Dh = q.shape[1], q.shape[3]
    S = len(cache)
    cos, sin = rope_cos_sin(torch.arange(S, S + T), Dh, base)
    q, k = apply_rope(q.transpose(1, 2), cos, sin), apply_rope(k.transpose(1, 2), cos, sin)
    keys, values = cache.update(k.transpose(1, 2), v)
    out, _ = scaled_dot_product_attention(
        q, keys.transpose(1, 2), values.transpose(1, 2), torch.ones(T, S + T, dtype=torch.bool).tril(S)
    )
    return out.transpose(1, 2)


def step_reading_cache_k(q, k, v, cache, base):
    """cache.k.shape[1] for S: None before the first step."""
    S = cache.k.shape[1]
    assert S == len(cache)
    return solution_cached_step(q, k, v, cache, base)


def step_storing_repeated_heads(q, k, v, cache, base):
    """Repeats the heads before appending: the cache holds H heads."""
    B, T, H, Dh = q.shape
    S = len(cache)
    G = H // k.shape[2]
    cos, sin = rope_cos_sin(torch.arange(S, S + T), Dh, base)
    q = apply_rope(q.transpose(1, 2), cos, sin)
    k = apply_rope(k.transpose(1, 2), cos, sin).repeat_interleave(G, 1)
    keys, values = cache.update(k.transpose(1, 2), v.repeat_interleave(G, 2))
    out, _ = scaled_dot_product_attention(
        q, keys.transpose(1, 2), values.transpose(1, 2), torch.ones(T, S + T, dtype=torch.bool).tril(S)
    )
    return out.transpose(1, 2)


def step_without_appending(q, k, v, cache, base):
    """Attends to the cached and the new keys, but leaves the cache as it was."""
    scratch = AttentionCache()
    if len(cache):
        scratch.update(cache.k, cache.v)
    S = len(cache)

    class Offset(AttentionCache):  # len() as the real cache's
        def __len__(self):
            return S

    shifted = Offset()
    shifted.k, shifted.v = scratch.k, scratch.v
    return solution_cached_step(q, k, v, shifted, base)


def step_scaling_the_cache_in_place(q, k, v, cache, base):
    """Multiplies the keys the cache returns (views of it) in place."""
    out = solution_cached_step(q, k, v, cache, base)
    cache.k.mul_(1.0)
    cache.k[:, :1] *= 2
    return out


STEP_WRONG = [
    (functools.partial(student_step, offset="zero"), "cached_at_zero"),
    (functools.partial(student_step, offset="plus_one"), "cached_plus_one"),
    (functools.partial(student_step, offset="capacity"), "cached_capacity"),
    (functools.partial(student_step, offset="after"), "cached_after_append"),
    (functools.partial(student_step, turn_q=False), "cached_q_unrotated"),
    (functools.partial(student_step, turn_k=False), "cached_k_unrotated"),
    (functools.partial(student_step, store="unturned"), "cached_stored_unrotated"),
    (functools.partial(student_step, again=True), "cached_rotated_again"),
    (step_turning_everything_again, "cached_rotated_again"),
    (functools.partial(student_step, pairs_interleaved=True), "cached_interleaved"),
    (functools.partial(student_step, fixed_base=10000.0), "cached_base"),
    (functools.partial(student_step, turn_v=True), "cached_rotated_values"),
    (functools.partial(student_step, heads="repeat"), "cached_grouping"),
    (step_without_repeating, "cached_no_repeat"),
    (functools.partial(student_step, mask="none"), "cached_no_causal"),
    (functools.partial(student_step, mask="top_left"), "cached_hides_cache"),
    (functools.partial(student_step, scale="model"), "cached_scale_model"),
    (functools.partial(student_step, scale="none"), "cached_no_scale"),
    (step_reading_cache_k, "cached_empty"),
    (step_storing_repeated_heads, "cached_stored_heads"),
    (step_without_appending, "cached_not_appended"),
    (step_scaling_the_cache_in_place, "cached_old_changed"),
    (lambda q, k, v, cache, base: solution_cached_step(q, k, v, cache, base).transpose(1, 2), "cached_layout"),
    (lambda q, k, v, cache, base: solution_cached_step(q, k, v, cache, base)[:, :, :1], "shape"),
    (lambda q, k, v, cache, base: solution_cached_step(q, k, v, cache, base).long(), "dtype"),
    (lambda q, k, v, cache, base: solution_cached_step(q, k, v, cache, base) + 1, "cached_output_other"),
    (lambda q, k, v, cache, base: (cache.update(k, v), q)[1], "cached_keys_other"),  # q back, k stored unturned
    (lambda q, k, v, cache, base: (solution_cached_step(q, k, v, cache, base), cache.update(k, v))[0], "cached_length"),
    (lambda q, k, v, cache, base: None, "returns_none"),
    (lambda q, k, v, cache, base: q.tolist(), "not_a_tensor"),
]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer", STEP_RIGHT)
def test_cached_step_accepts_right_answers(answer, lang):
    assert_correct(check_cached_step(answer, lang=lang), lang)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer,key", STEP_WRONG)
def test_cached_step_names_each_mistake(answer, key, lang):
    assert_hint(check_cached_step(answer, lang=lang), lang, key, HINTS)


@pytest.mark.parametrize("lang", LANGS)
def test_cached_step_explains_a_crash_only_on_grouped_heads_or_on_the_empty_cache(lang):
    """The student's failing line and what the error means come with the hint."""
    for answer, error in [(step_without_repeating, "RuntimeError"), (step_reading_cache_k, "AttributeError")]:
        message = check_cached_step(answer, lang=lang).message
        assert error in message and "test_exercises_modern.py" in message, message


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize(
    "tool",
    [
        lambda q, keys, values, mask: F.scaled_dot_product_attention(q, keys, values, attn_mask=mask),
        lambda q, keys, values, mask: modern.fast_attention(q, keys, values, mask),
    ],
)
def test_cached_step_refuses_pytorchs_and_the_packages_attention(tool, lang):
    def answer(q, k, v, cache, base):
        T, Dh = q.shape[1], q.shape[3]
        S = len(cache)
        cos, sin = rope_cos_sin(torch.arange(S, S + T), Dh, base)
        q, k = apply_rope(q.transpose(1, 2), cos, sin), apply_rope(k.transpose(1, 2), cos, sin)
        keys, values = cache.update(k.transpose(1, 2), v)
        G = q.shape[1] // keys.shape[2]
        keys, values = (x.transpose(1, 2).repeat_interleave(G, 1) for x in (keys, values))
        return tool(q, keys, values, torch.ones(T, S + T, dtype=torch.bool).tril(S)).transpose(1, 2)

    assert_hint(check_cached_step(answer, lang=lang), lang, "forbidden", HINTS)


@pytest.mark.parametrize("lang", LANGS)
def test_cached_step_refuses_the_packages_attention_module(lang):
    def answer(q, k, v, cache, base):
        B, T, H, Dh = q.shape
        attn = modern.GroupedQueryAttention(H * Dh, H, k.shape[2])
        return attn(q.reshape(B, T, H * Dh), cache=cache)[0].view(B, T, H, Dh)

    assert_hint(check_cached_step(answer, lang=lang), lang, "forbidden", HINTS)
    # and the module works again after the check
    assert modern.GroupedQueryAttention(8, 2)(torch.randn(1, 3, 8))[0].shape == (1, 3, 8)


def test_cached_step_is_what_the_model_does_at_each_decode_step():
    """The solution, fed one block's projections, gives the package's GroupedQueryAttention with its cache."""
    torch.manual_seed(0)
    B, D, H, Hkv = 2, 24, 6, 2
    Dh = D // H
    rope = modern.RotaryEmbedding(Dh, 16, 500.0)
    attn = modern.GroupedQueryAttention(D, H, Hkv, rope).eval()
    x = torch.randn(B, 9, D)
    theirs, ours = AttentionCache(capacity=16), AttentionCache()
    with torch.no_grad():
        for start, stop in [(0, 5), (5, 6), (6, 9)]:  # a prefill, one token, then three
            T = stop - start
            positions = torch.arange(start, stop)
            mask = torch.ones(T, stop, dtype=torch.bool).tril(start)
            want = attn(x[:, start:stop], mask, positions=positions, cache=theirs)[0]
            q = attn.W_q(x[:, start:stop]).view(B, T, H, Dh)
            k = attn.W_k(x[:, start:stop]).view(B, T, Hkv, Dh)
            v = attn.W_v(x[:, start:stop]).view(B, T, Hkv, Dh)
            got = attn.W_o(solution_cached_step(q, k, v, ours, 500.0).reshape(B, T, D))
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(ours.k, theirs.k)


def test_cached_step_solution_runs_with_only_the_notebooks_imports():
    """The solution's code, pasted into a fresh kernel that ran only notebook 10's import cell, passes."""
    import inspect
    import re
    from pathlib import Path

    source = (Path(__file__).resolve().parents[1] / "notebooks/source/10_modern_transformer.md").read_text()
    first_cell = re.search(r"<!-- code -->\n```python\n(import math.*?)```", source, re.S).group(1)
    exercise_cell = re.search(r"(from minitransformer\.exercises\.modern import [^\n]*\n)", source).group(1)
    namespace: dict = {}
    exec(compile(first_cell + exercise_cell, "<imports>", "exec", dont_inherit=True), namespace)
    code = inspect.getsource(solution_cached_step)
    code = code[code.index("def solution_cached_step") :].replace("solution_cached_step", "cached_step", 1)
    exec(compile(code, "<cell>", "exec", dont_inherit=True), namespace)
    assert_correct(namespace["check_cached_step"](namespace["cached_step"], lang="es"), "es")


# --- the worked solutions, as a student pastes them ---------------------------------------


@pytest.mark.parametrize("name", ["10.rope", "10.swiglu", "10.online_softmax", "10.cached_step"])
def test_shown_solutions_hold_no_english_prose_in_spanish(name):
    """The code of a solution carries no docstring and only shape comments, so that the Spanish
    notebook shows no English: the explanation, in each language, says the rest."""
    import ast
    import re

    from minitransformer.exercises import show_solution

    code = show_solution(name, lang="es").code
    function = next(node for node in ast.parse(code).body if isinstance(node, ast.FunctionDef))  # after the imports
    assert ast.get_docstring(function) is None
    for comment in re.findall(r"#(.*)", code):
        assert not re.search(r"[A-Za-z]{3,}", comment.replace("block_size", "")), comment
