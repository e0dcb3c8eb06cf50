"""Notebook 10's checkers: they accept the worked solutions, reject realistic wrong answers
with the hint that names the mistake (in both languages), refuse forbidden tools, and never
crash, whatever the student's function returns or raises."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from feedback_asserts import assert_correct, assert_hint
from torch import nn

from minitransformer import modern
from minitransformer.exercises.modern import (
    HINTS,
    check_online_softmax,
    check_rope,
    check_swiglu,
    solution_online_softmax,
    solution_rope,
    solution_swiglu,
)

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


ONLINE_WRONG = [
    (online_variant("no_rescale"), "online_no_rescale"),
    (online_variant("inverted"), "online_inverted"),
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
    (lambda s, b: modern.online_softmax(s, b), "forbidden"),
    (
        lambda s, b: (
            (s - s.min(-1, keepdim=True).values).exp()
            / (s - s.min(-1, keepdim=True).values).exp().sum(-1, keepdim=True)
        ),
        "online_overflow",
    ),
    (lambda s, b: s.argmax(-1), "dtype"),
    (lambda s, b: F.one_hot(s.argmax(-1), s.size(-1)), "dtype"),
    (lambda s, b: torch.exp(s - s.amax(-1, keepdim=True)), "online_unnormalised"),
    (lambda s, b: solution_online_softmax(s, b).flip(-1), "online_other"),
    (lambda s, b: solution_online_softmax(s, b)[:, :-1], "shape"),
]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer", [solution_online_softmax, online_two_passes])
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
    torch.testing.assert_close(modern.online_softmax(x, 1), torch.full((1, 2), 0.5))


# --- never crash ------------------------------------------------------------------------

JUNK = [
    None,
    "text",
    {"a": 1},
    [],
    [1.0, 2.0],
    3,
    float("nan"),
    torch.tensor([]),
    torch.tensor(1.0),
    torch.zeros(2, 2, dtype=torch.bool),
    torch.full((3, 3), float("nan")),
    (torch.zeros(1),),
    torch.zeros(2, 3, dtype=torch.complex64),
]
CHECKERS = [check_rope, check_swiglu, check_online_softmax]


def raises(exc):
    def answer(*args):
        raise exc

    return answer


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("checker", CHECKERS)
def test_junk_never_crashes(checker, lang):
    answers = [lambda *a, j=j: j for j in JUNK]
    answers += [
        raises(ValueError("boom")),
        raises(IndexError("bad index")),
        raises(NotImplementedError()),
        raises(ZeroDivisionError()),
        lambda *a: a[0],
        lambda *a: a[0].int(),
        lambda: 0,
    ]
    for answer in answers:
        feedback = checker(answer, lang=lang)
        assert not feedback.ok, feedback.message
        assert feedback.message.startswith("❌ Todavía no:" if lang == "es" else "❌ Not yet:")
