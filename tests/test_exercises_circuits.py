"""The checkers of notebook 13 accept the worked solutions (also pasted into a fresh interpreter) and other right
answers, and reject, without crashing, the wrong answers students write, naming the mistake in both languages."""

from __future__ import annotations

import pytest
import torch
from feedback_asserts import (
    assert_correct,
    assert_hint,
    bank,
)

from minitransformer import circuits
from minitransformer.exercises._core import close
from minitransformer.exercises.circuits import (
    _ABL_CASES,
    _OV_CASES,
    HINTS,
    _abl_mistakes,
    _ov_by_hand,
    _ov_mistakes,
    _ov_model,
    _reference,
    _smear_cases,
    _smear_mistakes,
    _smeared,
    _tiny_model,
    _tokens,
    check_ablate_head,
    check_ov_circuit,
    check_smeared_keys,
)
from minitransformer.exercises.registry import exercises
from minitransformer.exercises.solutions.nb13 import (
    solution_my_ablate_head,
    solution_my_smear_keys,
)

LANGS = ["es", "en"]


def test_the_exercises_are_registered_in_notebook_order():
    names = [n for n in exercises() if n.startswith("13.")]
    assert names == ["13.ov_circuit", "13.smeared_keys", "13.ablate_head"]


def _each_mistake_is_named(rights, banks):
    """Every mistake of a bank gives another answer than the right one in some case, and no mistake listed
    before it gives its answers in every case (so diagnose names it)."""
    keys = [k for k, _ in banks[0]]
    for j, key in enumerate(keys):
        gives = [b[j][1] for b in banks]
        assert any(g is not None and not close(g, r) for g, r in zip(gives, rights)), f"{key} never shows"
        for k in range(j):
            if keys[k] == key:
                continue
            earlier = [b[k][1] for b in banks]
            assert not all(g is None or (e is not None and close(g, e)) for g, e in zip(gives, earlier)), (
                f"{key} is taken for {keys[k]}"
            )


# --- 13.ov_circuit --------------------------------------------------------------------------------


def test_every_ov_mistake_is_told_apart():
    model = _ov_model()
    for layer, head in _OV_CASES:
        right = circuits.ov_circuit(model, layer, head).double()
        torch.testing.assert_close(_ov_by_hand(model, layer, head), right, rtol=1e-5, atol=1e-5)
        gives = _ov_mistakes(model, layer, head)
        for j, (key, g) in enumerate(gives):
            if g is None:  # a slice starting at `head` is head 0's own
                continue
            assert not close(g, right, atol=1e-4, rtol=1e-4), (layer, head, key)
            assert all(k == key or e is None or not close(g, e, atol=1e-4, rtol=1e-4) for k, e in gives[:j]), (
                layer,
                head,
                key,
            )


def ov_step_by_step(model, layer, head):
    """Another right answer: the weights as matrices, gains as diagonal matrices, one product."""
    a = model.blocks[layer].attn
    Dh = a.d_head
    W_v = a.W_v.weight[head * Dh : (head + 1) * Dh]  # (Dh, D)
    W_o = a.W_o.weight[:, head * Dh : (head + 1) * Dh]  # (D, Dh)
    g1, gf = torch.diag(model.blocks[layer].norm1.weight), torch.diag(model.norm.weight)
    return (model.lm_head.weight @ gf @ W_o @ W_v @ g1 @ model.token.weight.T).T.detach()


def ov_with_einsum(model, layer, head):
    a = model.blocks[layer].attn
    Dh = a.d_head
    W_v = a.W_v.weight.view(a.n_heads, Dh, -1)[head]
    W_o = a.W_o.weight.view(-1, a.n_heads, Dh)[:, head]
    x = model.token.weight * model.blocks[layer].norm1.weight
    out = torch.einsum("vd,hd,eh->ve", x, W_v, W_o) * model.norm.weight
    return (out @ model.lm_head.weight.T).double()


@pytest.mark.parametrize("lang", LANGS)
def test_ov_circuit_accepts_other_right_answers(lang):
    assert_correct(check_ov_circuit(ov_step_by_step, lang=lang), lang)
    assert_correct(check_ov_circuit(ov_with_einsum, lang=lang), lang)


def _ov(*, block=True, final=True, v_cols=False, o_rows=False, whole=False, transpose=False, after=None):
    """The OV circuit as a student would write it, with one thing changed."""

    def ov(model, layer, head):
        a = model.blocks[layer].attn
        Dh = a.d_head
        part = slice(None) if whole else slice(head * Dh, (head + 1) * Dh)
        with torch.no_grad():
            x = model.token.weight * model.blocks[layer].norm1.weight if block else model.token.weight
            z = x @ (a.W_v.weight[:, part] if v_cols else a.W_v.weight[part].T)
            out = z @ (a.W_o.weight[part] if o_rows else a.W_o.weight[:, part].T)
            out = out * model.norm.weight if final else out
            m = out @ model.lm_head.weight.T
        m = m.T if transpose else m
        return after(m) if after else m

    return ov


def ov_scaling_the_weights(model, layer, head):
    """Right, but multiplies the embedding by the gain in place: the model is left changed."""
    with torch.no_grad():
        model.token.weight.mul_(model.blocks[layer].norm1.weight)
        x = model.token.weight.clone()
        model.token.weight.div_(model.blocks[layer].norm1.weight)
        model.token.weight.add_(1e-3)
    Dh = model.blocks[layer].attn.d_head
    part = slice(head * Dh, (head + 1) * Dh)
    a = model.blocks[layer].attn
    with torch.no_grad():
        return ((x @ a.W_v.weight[part].T @ a.W_o.weight[:, part].T) * model.norm.weight) @ model.lm_head.weight.T


OV_MISTAKES = {
    "W_U · … · W_Eᵀ": (_ov(transpose=True), "ov_transposed"),
    "no norms": (_ov(block=False, final=False), "ov_no_norms"),
    "no block norm": (_ov(block=False), "ov_no_block_norm"),
    "no final norm": (_ov(final=False), "ov_no_final_norm"),
    "columns of W_v": (_ov(v_cols=True), "ov_wrong_slice"),
    "rows of W_o": (_ov(o_rows=True), "ov_wrong_slice"),
    "every head": (_ov(whole=True), "ov_all_heads"),
    "softmax": (_ov(after=lambda m: m.softmax(-1)), "ov_probs"),
    "log-softmax": (_ov(after=lambda m: m.log_softmax(-1)), "ov_probs"),
    "weights left changed": (ov_scaling_the_weights, "model_changed"),
    "something else": (lambda model, layer, head: torch.ones(12, 12), "ov_other"),
    "a row only": (lambda model, layer, head: torch.ones(12), "shape"),
    "NaN": (lambda model, layer, head: torch.full((12, 12), float("nan")), "nan"),
    "the package's": (lambda model, layer, head: circuits.ov_circuit(model, layer, head), "forbidden"),
    "the checker's own": (lambda model, layer, head: _ov_by_hand(model, layer, head), "forbidden"),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("check,answer,hint", bank(check_ov_circuit, OV_MISTAKES))
def test_ov_circuit_rejects_wrong_answers(check, answer, hint, lang):
    assert_hint(check(answer, lang=lang), lang, hint, HINTS)


def test_ov_circuit_works_again_after_a_check():
    check_ov_circuit(OV_MISTAKES["the package's"][0], lang="en")
    check_ov_circuit(OV_MISTAKES["the checker's own"][0], lang="en")
    model = _ov_model()
    torch.testing.assert_close(
        circuits.ov_circuit(model, 0, 1).double(), _ov_by_hand(model, 0, 1), rtol=1e-5, atol=1e-5
    )


# --- 13.smeared_keys ------------------------------------------------------------------------------


def test_the_smeared_key_cases_have_all_axes_different_and_every_mistake_is_told_apart():
    cases = _smear_cases()
    assert all(len(set(k.shape)) == 4 for k, _ in cases) and any(k.shape == (2, 4, 11, 6) for k, _ in cases)
    rights = [_smeared(k, alpha) for k, alpha in cases]
    for (k, alpha), right in zip(cases, rights):
        T = k.size(-2)
        w = torch.sigmoid(alpha.double())[1]
        torch.testing.assert_close(right[:, :, 0], k[:, :, 0].double())
        torch.testing.assert_close(right[:, 1, T - 1], w * k[:, 1, T - 1].double() + (1 - w) * k[:, 1, T - 2].double())
    _each_mistake_is_named(rights, [_smear_mistakes(k, alpha) for k, alpha in cases])


def smear_with_a_loop(k, alpha):
    """Another right answer: a loop over the positions into a new tensor."""
    out = k.clone()
    w = torch.sigmoid(alpha)
    for t in range(1, k.size(2)):
        for h in range(k.size(1)):
            out[:, h, t] = w[h] * k[:, h, t] + (1 - w[h]) * k[:, h, t - 1]
    return out


def smear_with_pad(k, alpha):
    """Also right: the previous keys by padding, position 0 its own previous."""
    w = torch.sigmoid(alpha)[None, :, None, None]
    previous = torch.cat([k[:, :, :1], k[:, :, :-1]], dim=2)
    return w * k + (1 - w) * previous


@pytest.mark.parametrize("lang", LANGS)
def test_smeared_keys_accepts_other_right_answers(lang):
    assert_correct(check_smeared_keys(solution_my_smear_keys, lang=lang), lang)
    assert_correct(check_smeared_keys(smear_with_a_loop, lang=lang), lang)
    assert_correct(check_smeared_keys(smear_with_pad, lang=lang), lang)


def _smear(*, weight=None, swap=False, shift=1, pad="self", in_place=False):
    """Smeared keys as a student would write them, with one thing changed."""

    def smear(k, alpha):
        w = torch.sigmoid(alpha) if weight is None else weight(alpha)
        w = w.view(1, -1, 1, 1) if w.dim() else w
        if in_place:  # position by position, in the keys themselves
            for t in range(1, k.size(2)):
                k[:, :, t] = w[:, :, 0] * k[:, :, t] + (1 - w[:, :, 0]) * k[:, :, t - 1]
            return k
        if shift == 1:
            first = {"self": k[:, :, :1], "zeros": torch.zeros_like(k[:, :, :1]), "last": k[:, :, -1:]}[pad]
            other = torch.cat([first, k[:, :, :-1]], dim=2)
        else:  # the next key; the last position its own
            other = torch.cat([k[:, :, 1:], k[:, :, -1:]], dim=2)
        out = (1 - w) * k + w * other if swap else w * k + (1 - w) * other
        if pad == "zeros":
            out[:, :, 0] = w[:, :, 0] * k[:, :, 0]
        return out

    return smear


def smear_in_place_backwards(k, alpha):
    """Right keys, computed from the last position back, in the caller's tensor."""
    w = torch.sigmoid(alpha).view(1, -1, 1)
    for t in range(k.size(2) - 1, 0, -1):
        k[:, :, t] = w * k[:, :, t] + (1 - w) * k[:, :, t - 1]
    return k


SMEAR_MISTAKES = {
    "alpha without the sigmoid": (_smear(weight=lambda a: a), "smear_no_sigmoid"),
    "weights swapped": (_smear(swap=True), "smear_swapped"),
    "the next key": (_smear(shift=-1), "smear_next"),
    "torch.roll": (
        lambda k, a: (lambda w: w * k + (1 - w) * k.roll(1, dims=2))(torch.sigmoid(a).view(1, -1, 1, 1)),
        "smear_wraps",
    ),
    "zeros before position 0": (_smear(pad="zeros"), "smear_first_zero"),
    "in place, forwards": (_smear(in_place=True), "smear_recursive"),
    "a plain mean": (_smear(weight=lambda a: torch.tensor(0.5)), "smear_no_alpha"),
    "alpha on the last axis": (_smear(weight=lambda a: torch.sigmoid(a).flip(0)), "smear_alpha_axis"),
    "right, in the caller's keys": (smear_in_place_backwards, "input_changed"),
    "something else": (lambda k, a: k * 0.5, "smear_other"),
    "one position short": (lambda k, a: solution_my_smear_keys(k, a)[:, :, 1:], "shape"),
    "NaN": (lambda k, a: torch.full_like(k, float("nan")), "nan"),
    "the checker's own": (lambda k, a: _smeared(k, a), "forbidden"),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("check,answer,hint", bank(check_smeared_keys, SMEAR_MISTAKES))
def test_smeared_keys_rejects_wrong_answers(check, answer, hint, lang):
    assert_hint(check(answer, lang=lang), lang, hint, HINTS)


@pytest.mark.parametrize("lang", LANGS)
def test_smeared_keys_sees_the_default_dtype_left_changed(lang):
    def in_float64(k, alpha):
        torch.set_default_dtype(torch.float64)
        return solution_my_smear_keys(k.double(), alpha.double())

    assert_hint(check_smeared_keys(in_float64, lang=lang), lang, "default_dtype_left", HINTS)
    assert torch.get_default_dtype() == torch.float32


# --- 13.ablate_head --------------------------------------------------------------------------------


def test_every_ablation_mistake_is_told_apart_in_some_case():
    """Each mistake gives other logits than the right ones in some case, and wherever it does, other logits than
    every mistake of another key listed before it (by more than 1e-3)."""
    model, tokens, shown = _tiny_model(), _tokens(), set()
    for layer, head, _ in _ABL_CASES:
        right = _reference(model, tokens, layer, head)
        gives = _abl_mistakes(model, tokens, layer, head)
        for j, (key, g) in enumerate(gives):
            if g is None or close(g, right):  # head:head + Dh is head 0's slice
                continue
            shown.add(key)
            assert all(k == key or e is None or not close(g, e, atol=1e-3) for k, e in gives[:j]), (layer, head, key)
    assert shown == {k for k, _ in gives}
    assert not any(m.training for m in model.modules())


def ablate_by_weights(model, tokens, layer, head):
    """Another right answer: the head's columns of W_o set to zero, then restored."""
    W = model.blocks[layer].attn.W_o.weight
    Dh = model.blocks[layer].attn.d_head
    saved = W.detach().clone()
    with torch.no_grad():
        W[:, head * Dh : (head + 1) * Dh] = 0
        try:
            return model(tokens)
        finally:
            W.copy_(saved)


def ablate_the_values(model, tokens, layer, head):
    """Also right: the head's rows of W_v set to zero (its output is then zero), then restored."""
    attn = model.blocks[layer].attn
    rows = slice(head * attn.d_head, (head + 1) * attn.d_head)
    saved = attn.W_v.weight.data[rows].clone()
    attn.W_v.weight.data[rows] = 0
    logits = model(tokens).detach()
    attn.W_v.weight.data[rows] = saved
    return logits


def ablate_with_a_view(model, tokens, layer, head):
    """Also right: a pre-hook that reshapes to (B, T, H, Dh), zeroes one head in place and returns nothing."""
    attn = model.blocks[layer].attn

    def hook(module, args):
        args[0].view(*args[0].shape[:-1], attn.n_heads, attn.d_head)[..., head, :] = 0

    handle = attn.W_o.register_forward_pre_hook(hook)
    out = model(tokens)
    handle.remove()
    return out


@pytest.mark.parametrize("lang", LANGS)
def test_ablate_head_accepts_other_right_answers(lang):
    assert_correct(check_ablate_head(ablate_by_weights, lang=lang), lang)
    assert_correct(check_ablate_head(ablate_the_values, lang=lang), lang)
    assert_correct(check_ablate_head(ablate_with_a_view, lang=lang), lang)


def _zeroing(where, *, restore=True, every_layer=False, after=lambda logits: logits):
    """An ablation by weights, as a student would write it: ``where(attn, head, Dh)`` names the weight and the
    slice set to zero."""

    def ablate(model, tokens, layer, head):
        layers = range(len(model.blocks)) if every_layer else [layer]
        saved = []
        with torch.no_grad():
            for i in layers:
                attn = model.blocks[i].attn
                for weight, index in where(attn, head, attn.d_head):
                    saved.append((weight, index, weight[index].clone()))
                    weight[index] = 0
            logits = model(tokens)
            if restore:
                for weight, index, old in saved:
                    weight[index] = old
        return after(logits)

    return ablate


def _columns(attn, head, Dh):
    return [(attn.W_o.weight, (slice(None), slice(head * Dh, (head + 1) * Dh)))]


def hook_left(model, tokens, layer, head):
    attn = model.blocks[layer].attn

    def hook(module, args):
        z = args[0].clone()
        z[..., head * attn.d_head : (head + 1) * attn.d_head] = 0
        return (z,)

    attn.W_o.register_forward_pre_hook(hook)
    return model(tokens)


def hook_returning_nothing(model, tokens, layer, head):
    attn = model.blocks[layer].attn

    def hook(module, args):
        z = args[0].clone()
        z[..., head * attn.d_head : (head + 1) * attn.d_head] = 0  # changes a copy, which is thrown away

    handle = attn.W_o.register_forward_pre_hook(hook)
    try:
        return model(tokens)
    finally:
        handle.remove()


def left_in_train_mode(model, tokens, layer, head):
    model.train()
    return solution_my_ablate_head(model, tokens, layer, head)


def left_in_float64(model, tokens, layer, head):
    """Right logits, computed in double precision; the model stays in float64 (equal values, another dtype)."""
    model.double()
    return solution_my_ablate_head(model, tokens, layer, head).float()


def moved_away(model, tokens, layer, head):
    """Right logits; the model is then moved to another device (on a GPU runtime, `.to("cuda")`)."""
    logits = solution_my_ablate_head(model, tokens, layer, head)
    model.to("meta")
    return logits


def w_o_frozen(model, tokens, layer, head):
    """Right logits by weights, restored; but W_o is frozen and never unfrozen."""
    W = model.blocks[layer].attn.W_o.weight
    Dh = model.blocks[layer].attn.d_head
    W.requires_grad_(False)
    saved = W[:, head * Dh : (head + 1) * Dh].clone()
    W[:, head * Dh : (head + 1) * Dh] = 0
    logits = model(tokens)
    W[:, head * Dh : (head + 1) * Dh] = saved
    return logits


def w_o_forward_patched(model, tokens, layer, head):
    """Right logits through a patched ``W_o.forward`` that is never undone."""
    attn = model.blocks[layer].attn
    original = attn.W_o.forward

    def forward(x):
        x = x.clone()
        x[..., head * attn.d_head : (head + 1) * attn.d_head] = 0
        return original(x)

    attn.W_o.forward = forward
    return model(tokens)


def linear_class_patched(model, tokens, layer, head):
    """Right logits; but ``nn.Linear.forward`` itself is replaced and left so (every model of the kernel)."""
    original = torch.nn.Linear.forward
    target = model.blocks[layer].attn.W_o

    def forward(self, x):
        if self is target:
            x = x.clone()
            x[..., head * target.in_features // 2 : (head + 1) * target.in_features // 2] = 0
        return original(self, x)

    torch.nn.Linear.forward = forward
    return model(tokens)


ABL_MISTAKES = {
    "rows of W_o": (
        _zeroing(lambda a, h, Dh: [(a.W_o.weight, (slice(h * Dh, (h + 1) * Dh), slice(None)))]),
        "abl_rows",
    ),
    "head:head + Dh": (_zeroing(lambda a, h, Dh: [(a.W_o.weight, (slice(None), slice(h, h + Dh)))]), "abl_slice"),
    "one column further": (
        _zeroing(lambda a, h, Dh: [(a.W_o.weight, (slice(None), slice(h * Dh + 1, (h + 1) * Dh + 1)))]),
        "abl_slice",
    ),
    "every layer": (_zeroing(_columns, every_layer=True), "abl_every_layer"),
    "every head": (_zeroing(lambda a, h, Dh: [(a.W_o.weight, (slice(None), slice(None)))]), "abl_all_heads"),
    "queries and keys": (
        _zeroing(
            lambda a, h, Dh: [(a.W_q.weight, slice(h * Dh, (h + 1) * Dh)), (a.W_k.weight, slice(h * Dh, (h + 1) * Dh))]
        ),
        "abl_query_key",
    ),
    "probabilities": (_zeroing(_columns, after=lambda logits: logits.softmax(-1)), "abl_probs"),
    "log-probabilities": (_zeroing(_columns, after=lambda logits: logits.log_softmax(-1)), "abl_probs"),
    "not restored": (_zeroing(_columns, restore=False), "abl_not_restored"),
    "hook left": (hook_left, "hook_left"),
    "hook returning nothing": (hook_returning_nothing, "abl_no_effect"),
    "train mode left": (left_in_train_mode, "model_mode"),
    "left in float64": (left_in_float64, "model_dtype"),
    "moved to another device": (moved_away, "model_dtype"),
    "W_o frozen": (w_o_frozen, "model_frozen"),
    "W_o.forward patched": (w_o_forward_patched, "model_patched"),
    "nn.Linear.forward patched": (linear_class_patched, "model_patched"),
    "something else": (lambda model, tokens, layer, head: model(tokens) + 0.1, "abl_other"),
    "the last position only": (
        lambda model, tokens, layer, head: solution_my_ablate_head(model, tokens, layer, head)[:, -1],
        "shape",
    ),
    "NaN": (lambda model, tokens, layer, head: torch.full((2, 12, 16), float("nan")), "nan"),
    "the package's": (
        lambda model, tokens, layer, head: circuits.ablate_heads(model, {(layer, head): "zero"}).__enter__()(tokens),
        "forbidden",
    ),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("check,answer,hint", bank(check_ablate_head, ABL_MISTAKES))
def test_ablate_head_rejects_wrong_answers(check, answer, hint, lang):
    assert_hint(check(answer, lang=lang), lang, hint, HINTS)


def test_ablate_heads_works_again_after_a_check():
    check_ablate_head(ABL_MISTAKES["the package's"][0], lang="en")
    model, tokens = _tiny_model(), _tokens()
    with circuits.ablate_heads(model, {(0, 0): "zero"}):
        ablated = model(tokens)
    assert not torch.allclose(ablated, model(tokens))


def test_the_check_leaves_the_notebooks_random_state_alone():
    torch.manual_seed(0)
    before = torch.rand(3)
    torch.manual_seed(0)
    check_ablate_head(solution_my_ablate_head, lang="en")
    assert torch.equal(torch.rand(3), before)


def test_a_class_method_a_student_patched_is_put_back():
    original = torch.nn.Linear.forward
    check_ablate_head(linear_class_patched, lang="en")
    assert torch.nn.Linear.forward is original


@pytest.mark.parametrize("lang", LANGS)
def test_the_expected_logits_come_from_a_model_the_student_never_touched(lang):
    """A patched W_o.forward that is never undone used to change the checker's own expected logits for the next
    case (and got the hint "you ablate head 1 in every layer"): it is named as what it is."""
    fb = check_ablate_head(w_o_forward_patched, lang=lang)
    assert fb.hint == "model_patched" and "W_o.forward" in fb.message


# Issue 55's findings on these checkers: each answer below got through before, or got a hint that named a mistake it
# did not make, in both languages.


def ov_in_float64(model, layer, head):
    """Right, computed in double precision by switching PyTorch's default dtype, never switched back."""
    torch.set_default_dtype(torch.float64)
    return _ov()(model, layer, head).double()


def ov_turning_gradients_off(model, layer, head):
    torch.set_grad_enabled(False)
    return _ov()(model, layer, head)


def ov_from_the_packages_private_helpers(model, layer, head):
    """The package's own pieces of ov_circuit: the norms as matrices and the head's rows."""
    a = model.blocks[layer].attn
    Dh = a.d_head
    W_v = circuits._head_rows(a.W_v, head, Dh)  # (Dh, D)
    W_o = a.W_o.weight.detach()[:, head * Dh : (head + 1) * Dh]
    reads = circuits._norm_matrix(model.blocks[layer].norm1, 16)
    final = model.lm_head.weight.detach() @ circuits._norm_matrix(model.norm, 16)
    return model.token.weight.detach() @ (final @ W_o @ W_v @ reads).T


def ov_slice_from_head(model, layer, head):
    """The head's slice started at `head` instead of `head * Dh`."""
    a = model.blocks[layer].attn
    part = slice(head, head + a.d_head)
    with torch.no_grad():
        x = model.token.weight * model.blocks[layer].norm1.weight
        out = (x @ a.W_v.weight[part].T @ a.W_o.weight[:, part].T) * model.norm.weight
        return out @ model.lm_head.weight.T


@pytest.mark.parametrize("lang", LANGS)
def test_ov_circuit_sees_global_state_left_behind_and_puts_it_back(lang):
    assert_hint(check_ov_circuit(ov_in_float64, lang=lang), lang, "default_dtype_left", HINTS)
    assert torch.get_default_dtype() == torch.float32
    assert_hint(check_ov_circuit(ov_turning_gradients_off, lang=lang), lang, "grad_mode_left", HINTS)
    assert torch.is_grad_enabled()


@pytest.mark.parametrize("lang", LANGS)
def test_ov_circuit_refuses_the_packages_private_helpers(lang):
    assert_hint(check_ov_circuit(ov_from_the_packages_private_helpers, lang=lang), lang, "forbidden", HINTS)
    assert circuits._norm_matrix(None, 3).shape == (3, 3)  # and they work again afterwards


@pytest.mark.parametrize("lang", LANGS)
def test_ov_circuit_names_a_slice_started_at_the_head_number(lang):
    fb = check_ov_circuit(ov_slice_from_head, lang=lang)
    assert_hint(fb, lang, "ov_wrong_slice", HINTS)
    assert "8:16" in fb.message  # the first case is head 1, whose rows are 8:16


def ablate_in_eval_mode(model, tokens, layer, head):
    model.eval()
    return solution_my_ablate_head(model, tokens, layer, head)


def ablate_gradients_off(model, tokens, layer, head):
    torch.set_grad_enabled(False)
    return solution_my_ablate_head(model, tokens, layer, head)


@pytest.mark.parametrize("lang", LANGS)
def test_ablate_head_sees_eval_mode_and_gradients_left_off(lang):
    assert_hint(check_ablate_head(ablate_in_eval_mode, lang=lang), lang, "model_mode", HINTS)
    assert_hint(check_ablate_head(ablate_gradients_off, lang=lang), lang, "grad_mode_left", HINTS)
    assert torch.is_grad_enabled()
