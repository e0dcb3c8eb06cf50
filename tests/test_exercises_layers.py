"""The encoder block's checkers accept right answers and explain the usual wrong ones."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

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
    "answer,hint_en,hint_es",
    [
        (ln_unbiased, "unbiased", "insesgada"),
        (ln_no_affine, "gamma", "gamma"),
        (ln_eps_outside, "inside the square root", "dentro de la raíz"),
        (ln_fixed_eps, "`eps` argument", "argumento `eps`"),
        (ln_no_eps, "not finite", "no es finito"),
        (ln_batch_axis, "dim=-1", "dim=-1"),
        (ln_mean_only, "shape", "forma"),
        (ln_stub, "NotImplementedError", "NotImplementedError"),
        (lambda x, g, b, eps: ln_right(x, g, b, eps) + 0.1, "does not match", "no coincide"),
        (ln_functional, "not to use `F.layer_norm`", "no usar `F.layer_norm`"),
        (ln_module, "not to use `nn.LayerNorm.forward`", "no usar `nn.LayerNorm.forward`"),
        (lambda x, g, b, eps: torch.layer_norm(x, x.shape[-1:], g, b, eps), "not to use", "no usar"),
        (
            lambda x, g, b, eps: (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + eps) * g + b,
            "does not match",
            "no coincide",
        ),
        (lambda x, g, b, eps: ln_right(x, g, b, eps).tolist(), "not list", "no list"),
    ],
)
def test_layer_norm_rejects_typical_mistakes(answer, hint_en, hint_es):
    en = check_layer_norm(answer, lang="en")
    es = check_layer_norm(answer, lang="es")
    assert not en.ok and not es.ok
    assert en.message.startswith("❌ Not yet") and hint_en in en.message
    assert es.message.startswith("❌ Todavía no") and hint_es in es.message


# --- post-LN residual sublayer -------------------------------------------------------------


@pytest.mark.parametrize(
    "answer,hint_en,hint_es",
    [
        (lambda x, sub, norm: x + sub(norm(x)), "pre-LN", "pre-LN"),
        (lambda x, sub, norm: norm(sub(x)), "residual connection is missing", "falta la conexión residual"),
        (lambda x, sub, norm: x + sub(x), "normalisation is missing", "falta la normalización"),
        (lambda x, sub, norm: norm(x) + sub(x), "normalise the sum", "normaliza la suma"),
        (lambda x, sub, norm: norm(x + sub(norm(x))), "directly", "directamente"),
        (lambda x, sub, norm: norm(2 * x + sub(x)), "does not match", "no coincide"),
    ],
)
def test_post_ln_rejects_typical_mistakes(answer, hint_en, hint_es):
    en = check_post_ln_sublayer(answer, lang="en")
    es = check_post_ln_sublayer(answer, lang="es")
    assert not en.ok and hint_en in en.message
    assert not es.ok and hint_es in es.message


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
    "answer,hint_en,hint_es",
    [
        (lambda x, g, eps: ln_right(x, g, torch.zeros_like(g), eps), "subtract the mean", "restas la media"),
        (lambda x, g, eps: F.rms_norm(x, x.shape[-1:], g, eps), "not to use `F.rms_norm`", "no usar `F.rms_norm`"),
        (lambda x, g, eps: torch.rms_norm(x, x.shape[-1:], g, eps), "not to use", "no usar"),
        (lambda x, g, eps: F.layer_norm(x, x.shape[-1:], g, None, eps), "subtract the mean", "restas la media"),
        (lambda x, g, eps: x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps), "`gamma`", "`gamma`"),
        (lambda x, g, eps: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * g, "inside", "dentro"),
        (lambda x, g, eps: x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps) * g, "not their sum", "no su suma"),
        (lambda x, g, eps: x / (x.pow(2).mean(-1, keepdim=True) + eps) * g, "square root is missing", "falta la raíz"),
        (lambda x, g, eps: rms_right(x, g, 1e-5), "`eps` argument", "argumento `eps`"),
        (lambda x, g, eps: x / x.pow(2).mean(-1, keepdim=True).sqrt() * g, "not finite", "no es finito"),
        (lambda x, g, eps: x.pow(2).mean(-1), "shape", "forma"),
        (lambda x, g, eps: rms_right(x, g, eps) + 0.1, "does not match", "no coincide"),
    ],
)
def test_rms_norm_rejects_typical_mistakes(answer, hint_en, hint_es):
    en = check_rms_norm(answer, lang="en")
    es = check_rms_norm(answer, lang="es")
    assert not en.ok and hint_en in en.message
    assert not es.ok and hint_es in es.message


def test_checkers_leave_the_global_random_state_alone():
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    check_layer_norm(ln_right, lang="en")
    check_post_ln_sublayer(lambda x, sub, norm: norm(x + sub(x)), lang="en")
    check_rms_norm(rms_right, lang="en")
    after = torch.rand(3)
    assert torch.equal(before, after)
