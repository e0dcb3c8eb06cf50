"""The encoder block's checkers accept right answers and explain the usual wrong ones."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from feedback_asserts import assert_named

from minitransformer.exercises.layers import check_layer_norm, check_post_ln_sublayer, check_rms_norm

# --- layer norm -------------------------------------------------------------------------


def ln_right(x, gamma, beta, eps):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


def ln_unbiased(x, gamma, beta, eps):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * gamma + beta


def ln_no_affine(x, gamma, beta, eps):
    return ln_right(x, torch.ones_like(gamma), torch.zeros_like(beta), eps)


def ln_eps_outside(x, gamma, beta, eps):
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True, unbiased=False) + eps) * gamma + beta


def ln_fixed_eps(x, gamma, beta, eps):
    return ln_right(x, gamma, beta, 1e-5)


def ln_functional(x, gamma, beta, eps):
    return F.layer_norm(x, x.shape[-1:], gamma, beta, eps)


def ln_module(x, gamma, beta, eps):
    norm = torch.nn.LayerNorm(x.size(-1), eps=eps)
    with torch.no_grad():
        norm.weight.copy_(gamma)
        norm.bias.copy_(beta)
    return norm(x)


def ln_no_eps(x, gamma, beta, eps):
    return (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True, unbiased=False) * gamma + beta


def ln_batch_axis(x, gamma, beta, eps):
    mean = x.mean(dim=0, keepdim=True)
    var = x.var(dim=0, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


def ln_mean_only(x, gamma, beta, eps):
    return x.mean(-1)


def ln_stub(x, gamma, beta, eps):
    raise NotImplementedError


@pytest.mark.parametrize("lang", ["es", "en"])
def test_layer_norm_accepts_right_answers(lang):
    for answer in (ln_right,):
        feedback = check_layer_norm(answer, lang=lang)
        assert feedback.ok, feedback.message
        assert feedback.message.startswith("✅")


@pytest.mark.parametrize(
    "answer,key,tool",
    [
        (ln_unbiased, "ln_unbiased", None),
        (ln_no_affine, "ln_no_affine", None),
        (ln_eps_outside, "ln_eps_outside", None),
        (ln_fixed_eps, "fixed_eps", None),
        (ln_no_eps, "ln_not_finite", None),
        (ln_batch_axis, "ln_over_batch", None),
        (ln_mean_only, "shape", None),
        (ln_stub, "not_written", None),
        (lambda x, g, b, eps: ln_right(x, g, b, eps) + 0.1, "ln_wrong", None),
        (ln_functional, "forbidden", "`F.layer_norm`"),
        (ln_module, "forbidden", "`nn.LayerNorm.forward`"),
        (lambda x, g, b, eps: torch.layer_norm(x, x.shape[-1:], g, b, eps), "forbidden", None),
        (
            lambda x, g, b, eps: (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + eps) * g + b,
            "ln_wrong",
            None,
        ),
        (lambda x, g, b, eps: ln_right(x, g, b, eps).tolist(), "not_a_tensor", None),
    ],
)
def test_layer_norm_rejects_typical_mistakes(answer, key, tool):
    for lang in ("es", "en"):
        feedback = check_layer_norm(answer, lang=lang)
        assert_named(feedback, lang, key)
        assert tool is None or tool in feedback.message  # the tool it names is the one used


# --- post-LN residual sublayer -------------------------------------------------------------


@pytest.mark.parametrize(
    "answer,key",
    [
        (lambda x, sub, norm: x + sub(norm(x)), "post_pre_ln"),
        (lambda x, sub, norm: norm(sub(x)), "post_no_residual"),
        (lambda x, sub, norm: x + sub(x), "post_no_norm"),
        (lambda x, sub, norm: norm(x) + sub(x), "post_norm_x_only"),
        (lambda x, sub, norm: norm(x + sub(norm(x))), "post_norm_before"),
        (lambda x, sub, norm: norm(2 * x + sub(x)), "post_wrong"),
    ],
)
def test_post_ln_rejects_typical_mistakes(answer, key):
    for lang in ("es", "en"):
        assert_named(check_post_ln_sublayer(answer, lang=lang), lang, key)


def test_post_ln_accepts_right_answer():
    for lang in ("es", "en"):
        feedback = check_post_ln_sublayer(lambda x, sub, norm: norm(x + sub(x)), lang=lang)
        assert feedback.ok, feedback.message


# --- RMSNorm --------------------------------------------------------------------------------


def rms_right(x, gamma, eps):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * gamma


@pytest.mark.parametrize("lang", ["es", "en"])
def test_rms_norm_accepts_right_answers(lang):
    for answer in (rms_right,):
        feedback = check_rms_norm(answer, lang=lang)
        assert feedback.ok, feedback.message


@pytest.mark.parametrize(
    "answer,key,tool",
    [
        (lambda x, g, eps: ln_right(x, g, torch.zeros_like(g), eps), "rms_centred", None),
        (lambda x, g, eps: F.rms_norm(x, x.shape[-1:], g, eps), "forbidden", "`F.rms_norm`"),
        (lambda x, g, eps: torch.rms_norm(x, x.shape[-1:], g, eps), "forbidden", None),
        (lambda x, g, eps: F.layer_norm(x, x.shape[-1:], g, None, eps), "rms_centred", None),
        (lambda x, g, eps: x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps), "rms_no_gamma", None),
        (lambda x, g, eps: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * g, "rms_eps_outside", None),
        (lambda x, g, eps: x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps) * g, "rms_sum", None),
        (lambda x, g, eps: x / (x.pow(2).mean(-1, keepdim=True) + eps) * g, "rms_no_sqrt", None),
        (lambda x, g, eps: rms_right(x, g, 1e-5), "fixed_eps", None),
        (lambda x, g, eps: x / x.pow(2).mean(-1, keepdim=True).sqrt() * g, "rms_not_finite", None),
        (lambda x, g, eps: x.pow(2).mean(-1), "shape", None),
        (lambda x, g, eps: rms_right(x, g, eps) + 0.1, "rms_wrong", None),
    ],
)
def test_rms_norm_rejects_typical_mistakes(answer, key, tool):
    for lang in ("es", "en"):
        feedback = check_rms_norm(answer, lang=lang)
        assert_named(feedback, lang, key)
        assert tool is None or tool in feedback.message  # the tool it names is the one used


def test_checkers_leave_the_global_random_state_alone():
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    check_layer_norm(ln_right, lang="en")
    check_post_ln_sublayer(lambda x, sub, norm: norm(x + sub(x)), lang="en")
    check_rms_norm(rms_right, lang="en")
    after = torch.rand(3)
    assert torch.equal(before, after)
