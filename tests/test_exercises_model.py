"""The checkers of notebook 06 accept right answers and reject typical mistakes with a useful hint."""

from __future__ import annotations

import math

import pytest
import torch
from feedback_asserts import assert_bank, assert_rejected, bank
from feedback_asserts import assert_correct as assert_accepted

from minitransformer.exercises import model as ex
from minitransformer.exercises.model import check_model_params, check_output_probabilities, check_scaled_embeddings
from minitransformer.exercises.solutions.nb06 import (
    solution_my_embed,
    solution_my_model_params,
    solution_my_output_probabilities,
)

LANGS = ["es", "en"]


def stub(*args):
    raise NotImplementedError


@pytest.mark.parametrize("check", [check_scaled_embeddings, check_model_params, check_output_probabilities])
@pytest.mark.parametrize("lang", LANGS)
def test_unfinished_stub_is_reported(check, lang):
    assert_rejected(check(stub, lang=lang), lang, "not_written")


# ---- exercise 1: scaled embeddings ------------------------------------------------------------------


def embed_in_place(tokens, table, pe):
    table *= math.sqrt(table.size(1))
    return table[tokens] + pe[: tokens.size(1)]


def _sqrt_d(table):
    return math.sqrt(table.size(1))


EMBED_MISTAKES = {
    "no scale": (lambda t, w, pe: w[t] + pe[: t.size(1)], "embed_no_scale"),
    "scaled by D": (lambda t, w, pe: w[t] * w.size(1) + pe[: t.size(1)], "embed_scale_d"),
    "divided": (lambda t, w, pe: w[t] / _sqrt_d(w) + pe[: t.size(1)], "embed_divided"),
    "PE scaled too": (
        lambda t, w, pe: (w[t] + pe[: t.size(1)]) * _sqrt_d(w),
        "embed_scaled_pe",
    ),
    "PE indexed by token": (lambda t, w, pe: w[t] * _sqrt_d(w) + pe[t], "embed_pe_by_token"),
    "no PE": (lambda t, w, pe: w[t] * _sqrt_d(w), "embed_no_pe"),
    "whole PE table": (
        lambda t, w, pe: (w[t] * _sqrt_d(w))[:, :1] + pe,
        "shape",
    ),
    "modifies the table": (embed_in_place, "embed_modifies"),
    "numpy array": (lambda t, w, pe: solution_my_embed(t, w, pe).numpy(), "not_a_tensor"),
}


@pytest.mark.parametrize("lang", LANGS)
def test_embeddings_accept_right_answer_and_the_package(lang):
    assert_accepted(check_scaled_embeddings(solution_my_embed, lang=lang), lang)


def test_embeddings_match_the_package_embeddings():
    """The checker's right answer is what the package's Embeddings module computes."""
    from minitransformer.model import Embeddings, TransformerConfig
    from minitransformer.positional import sinusoidal_encoding

    config = TransformerConfig(src_vocab_size=13, tgt_vocab_size=13, d_model=18, n_heads=3, max_len=9, dropout=0.0)
    emb = Embeddings(13, config).eval()
    tokens = torch.randint(0, 13, (2, 7))
    with torch.no_grad():
        ours = solution_my_embed(tokens, emb.token.weight, sinusoidal_encoding(9, 18))
        torch.testing.assert_close(ours, emb(tokens))


# ---- exercise 2: parameter count ----------------------------------------------------------------------


def _with(delta):
    """A wrong answer: the right count plus ``delta(V, D, F, N, norm_first)``."""
    return lambda *a: solution_my_model_params(*a) + delta(*a)


PARAM_MISTAKES = {
    "no output bias": (_with(lambda V, D, F, N, nf: -V), "params_output_bias"),
    "tied weights counted three times": (
        _with(lambda V, D, F, N, nf: 2 * V * D),
        "params_shared_thrice",
    ),
    "tied weights counted twice": (_with(lambda V, D, F, N, nf: V * D), "params_shared_twice"),
    "decoder like encoder": (
        _with(lambda V, D, F, N, nf: -N * (4 * (D * D + D) + 2 * D)),
        "params_one_attention",
    ),
    "decoder with two LayerNorms": (
        _with(lambda V, D, F, N, nf: -N * 2 * D),
        "params_two_norms",
    ),
    "LayerNorm counted as D": (_with(lambda V, D, F, N, nf: -(5 * N + (2 if nf else 0)) * D), "params_norm_gain_only"),
    "no LayerNorms": (
        _with(lambda V, D, F, N, nf: -(5 * N + (2 if nf else 0)) * 2 * D),
        "params_no_norms",
    ),
    "no W_o": (_with(lambda V, D, F, N, nf: -3 * N * (D * D + D)), "params_three_projections"),
    "no final norms in pre-LN": (_with(lambda V, D, F, N, nf: -4 * D if nf else 0), "params_final_norms"),
    "final norms in post-LN": (_with(lambda V, D, F, N, nf: 0 if nf else 4 * D), "params_final_norms_post"),
    "feed-forward without biases": (
        _with(lambda V, D, F, N, nf: -2 * N * (F + D)),
        "params_ff_bias",
    ),
    "attention without biases": (
        _with(lambda V, D, F, N, nf: -3 * N * 4 * D),
        "params_attention_bias",
    ),
    "something else": (_with(lambda V, D, F, N, nf: 7), "params_too_many"),
    "a float": (lambda *a: solution_my_model_params(*a) + 0.5, "params_not_whole"),
    "a string": (lambda *a: str(solution_my_model_params(*a)), "params_not_whole"),
}


def params_no_bias(V, D, F, N, norm_first):
    layer_norm = 2 * D
    final = 2 * layer_norm if norm_first else 0
    return V * D + N * (4 * D * D + 2 * D * F + 2 * layer_norm) + N * (8 * D * D + 2 * D * F + 3 * layer_norm) + final


PARAM_MISTAKES["no biases at all"] = (params_no_bias, "params_no_bias")


@pytest.mark.parametrize("lang", LANGS)
def test_params_accept_right_answer(lang):
    assert_accepted(check_model_params(solution_my_model_params, lang=lang), lang)


def test_params_accept_numpy_and_torch_integers():
    import numpy as np

    assert check_model_params(lambda *a: np.int64(solution_my_model_params(*a)), lang="en").ok
    assert check_model_params(lambda *a: torch.tensor(solution_my_model_params(*a)), lang="en").ok


def test_param_hints_are_unambiguous_over_the_cases():
    """Over all the cases together, every typical mistake gives counts of its own, different from the right ones
    (in one case alone some coincide: with d_ff = 4·D, no feed-forward biases and no LayerNorms do)."""
    right = tuple(ex._count_model(*case) for case in ex._PARAM_CASES)
    assert right == tuple(solution_my_model_params(*case) for case in ex._PARAM_CASES)
    per_case = [ex._params_mistakes(*case) for case in ex._PARAM_CASES]
    wrong = [tuple(mistakes[key] for mistakes in per_case) for key in per_case[0]]
    assert right not in wrong
    assert len(set(wrong)) == len(wrong)
    first = ex._params_mistakes(*ex._PARAM_CASES[0])
    assert first["params_ff_bias"] == first["params_no_norms"]


def test_paper_base_model_count():
    """The first case is the paper's base model: about 63 M parameters with tied weights."""
    assert ex._PARAM_CASES[0] == (37000, 512, 2048, 6, False)
    assert abs(ex._count_model(*ex._PARAM_CASES[0]) / 65e6 - 1) < 0.05


# ---- exercise 3: output probabilities -------------------------------------------------------------


PROB_MISTAKES = {
    "logits": (lambda h, w, b: h @ w.T + b, "out_logits"),
    "log_softmax": (lambda h, w, b: torch.log_softmax(h @ w.T + b, dim=-1), "out_log_softmax"),
    "softmax over positions": (
        lambda h, w, b: torch.softmax(h @ w.T + b, dim=1),
        "out_axis_positions",
    ),
    "softmax over the batch": (lambda h, w, b: torch.softmax(h @ w.T + b, dim=0), "out_axis_batch"),
    "no bias": (
        lambda h, w, b: torch.softmax(h @ w.T, dim=-1),
        "out_no_bias",
    ),
    "sigmoid": (lambda h, w, b: torch.sigmoid(h @ w.T + b), "out_sigmoid"),
    "no transpose": (lambda h, w, b: torch.softmax(h @ w + b, dim=-1), "crashed"),
    "wrong shape": (lambda h, w, b: solution_my_output_probabilities(h, w, b)[:, -1], "shape"),
    "other": (
        lambda h, w, b: torch.full((h.size(0), h.size(1), w.size(0)), 1.0 / w.size(0)),
        "out_wrong",
    ),
    "integer probabilities": (
        lambda h, w, b: (h @ w.T + b).argmax(-1, keepdim=True).expand(-1, -1, w.size(0)),
        "out_wrong",
    ),
}


@pytest.mark.parametrize("lang", LANGS)
def test_probabilities_accept_right_answer(lang):
    assert_accepted(check_output_probabilities(solution_my_output_probabilities, lang=lang), lang)


def test_probabilities_accept_the_package_generator():
    """The right answer is what the model's generator followed by a softmax computes."""
    from torch import nn

    def with_linear(h, weight, bias):
        linear = nn.Linear(weight.size(1), weight.size(0))
        with torch.no_grad():
            linear.weight.copy_(weight)
            linear.bias.copy_(bias)
            return torch.softmax(linear(h), dim=-1)

    assert check_output_probabilities(with_linear, lang="es").ok


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize(
    "check,fn,hint",
    [
        *bank(check_scaled_embeddings, EMBED_MISTAKES),
        *bank(check_model_params, PARAM_MISTAKES),
        *bank(check_output_probabilities, PROB_MISTAKES),
    ],
)
def test_wrong_answers_are_named_in_both_languages(check, fn, hint, lang):
    assert_bank(check, fn, hint, lang)
