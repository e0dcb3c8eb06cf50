"""Circuits: the head scores on hand-made patterns, ablation against edited weights, removal from
one path against hooks, composition scores from hand-made weights, and notebook 13's recipe."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch

from minitransformer.circuits import (
    COMPOSITIONS,
    ablate_heads,
    attention_patterns,
    composition_baseline,
    composition_score,
    composition_scores,
    diagonal_score,
    direct_logit_attribution,
    head_outputs,
    head_outputs_mean,
    in_context_score,
    induction_score,
    next_token_losses,
    ov_circuit,
    per_position_loss,
    positive_eigenvalue_score,
    prefix_matching_score,
    previous_token_score,
    qk_circuit,
    run_with_removed,
    steepest_step,
    uniform_pattern,
)
from minitransformer.course.induction import (
    INDUCTION_RECIPE,
    InductionHistory,
    InductionRecipe,
    best_guess_loss,
    copy_loss,
    copyable,
    measure_run,
    periodic_batch,
    seed_record,
    train_induction_model,
)
from minitransformer.gpt import GPT, GPTConfig
from minitransformer.i18n import CourseError
from minitransformer.modern import ModernConfig, ModernTransformer, apply_rope, rope_cos_sin


def causal_uniform(T: int) -> torch.Tensor:
    """Each row t spreads its weight evenly over positions 0 … t. (T, T)."""
    return torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]


def attend_to(targets: list[int]) -> torch.Tensor:
    """Row t puts all its weight on position targets[t]. (T, T)."""
    return torch.nn.functional.one_hot(torch.tensor(targets), len(targets)).float()


def small_model(seed=0, **kw) -> ModernTransformer:
    torch.manual_seed(seed)
    config = dict(vocab_size=20, d_model=16, n_heads=2, n_layers=2, max_len=24, feed_forward="none")
    model = ModernTransformer(ModernConfig(**{**config, **kw})).eval()
    with torch.no_grad():  # weights far from the tiny initialisation, so that every head matters
        for p in model.parameters():
            p.add_(0.5 * torch.randn_like(p))
    return model


# --- the scores ----------------------------------------------------------------------------


def test_previous_token_score_by_hand():
    T = 5
    previous = attend_to([0, 0, 1, 2, 3])
    pattern = torch.stack([previous, causal_uniform(T), torch.eye(T)])[None]  # (1, 3, T, T)
    uniform = (1 / 2 + 1 / 3 + 1 / 4 + 1 / 5) / 4  # weight on t − 1 of a uniform head, t = 1 … 4
    torch.testing.assert_close(previous_token_score(pattern), torch.tensor([1.0, uniform, 0.0]))
    two_rows = torch.stack([pattern[0], pattern[0][[1, 2, 0]]])  # the second row's heads in another order
    expected = torch.tensor([(1 + uniform) / 2, uniform / 2, 1 / 2])  # the mean over the batch
    torch.testing.assert_close(previous_token_score(two_rows), expected)


def test_induction_score_by_hand():
    T, P = 6, 2  # tokens a b a b a b: from t ≥ 2 the tokens after earlier copies are t − 1, t − 3, …
    induction = attend_to([0, 1, 1, 2, 3, 4])  # t − P + 1 from t ≥ P
    previous_copy = attend_to([0, 1, 0, 1, 2, 3])  # t − P: the copy itself, not the token after it
    pattern = torch.stack([induction, previous_copy, causal_uniform(T)])[None]  # (1, 3, T, T)
    # uniform head: t = 2: {1} of 3; t = 3: {2} of 4; t = 4: {3, 1} of 5; t = 5: {4, 2} of 6
    uniform = (1 / 3 + 1 / 4 + 2 / 5 + 2 / 6) / 4
    torch.testing.assert_close(induction_score(pattern, P), torch.tensor([1.0, 0.0, uniform]))


def test_induction_score_counts_every_earlier_copy_and_pools_rows_with_their_own_period():
    T = 6
    spread = torch.zeros(T, T)
    spread[4, 3], spread[4, 1], spread[4, 0] = 0.5, 0.25, 0.25  # P = 2: positions 3 and 1 count
    spread[5, 4], spread[5, 2], spread[5, 5] = 0.25, 0.25, 0.5
    spread[2, 1], spread[2, 0] = 0.5, 0.5
    spread[3, 2], spread[3, 3] = 1.0, 0.0
    spread[0, 0], spread[1, 1] = 1.0, 1.0
    row_p2 = spread  # t = 2: 0.5, t = 3: 1, t = 4: 0.75, t = 5: 0.5
    row_p3 = attend_to([0, 1, 2, 1, 2, 3])  # P = 3: t − 2 from t ≥ 3, all three right
    pattern = torch.stack([row_p2, row_p3])[:, None]  # (2, 1, T, T)
    pooled = (0.5 + 1 + 0.75 + 0.5 + 3 * 1.0) / 7
    torch.testing.assert_close(induction_score(pattern, torch.tensor([2, 3])), torch.tensor([pooled]))


def test_in_context_score_is_late_minus_early():
    losses = torch.tensor([[3.0, 2.0, 1.0, 0.5], [3.0, 2.0, 0.0, 0.1]])
    assert in_context_score(losses, early=0, late=3) == pytest.approx(0.3 - 3.0)
    assert in_context_score(losses[0], early=1, late=2) == pytest.approx(-1.0)


def test_steepest_step_of_a_fall_and_of_a_rise():
    steps = [0, 25, 50, 75, 100]
    assert steepest_step(steps, [3.0, 2.9, 1.5, 1.2, 1.1], falling=True) == 50
    assert steepest_step(steps, [0.0, 0.1, 0.2, 0.7, 0.8]) == 75
    with pytest.raises(CourseError):
        steepest_step([0], [1.0])


def test_scores_of_a_models_patterns_are_fractions_of_attention():
    model = small_model()
    tokens = torch.randint(0, 20, (3, 12))
    patterns = attention_patterns(model, tokens)
    assert len(patterns) == 2 and patterns[0].shape == (3, 2, 12, 12)
    torch.testing.assert_close(patterns[1].sum(-1), torch.ones(3, 2, 12))
    for scores in (previous_token_score(patterns[0]), induction_score(patterns[1], 4)):
        assert scores.shape == (2,) and bool((scores >= 0).all() and (scores <= 1).all())
    losses = per_position_loss(model, tokens)
    assert losses.shape == (3, 11)
    torch.testing.assert_close(
        losses.mean(), torch.nn.functional.cross_entropy(model(tokens)[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())
    )
    model.eval()
    torch.testing.assert_close(next_token_losses(model(tokens), tokens), losses, rtol=0, atol=0)
    torch.testing.assert_close(
        next_token_losses(torch.zeros(1, 4, 5), torch.zeros(1, 4).long()), torch.full((1, 3), 5.0).log()
    )


def test_the_uniform_pattern_spreads_each_row_over_the_positions_up_to_it():
    pattern = uniform_pattern(6)
    assert pattern.shape == (1, 1, 6, 6)
    torch.testing.assert_close(pattern[0, 0], causal_uniform(6), rtol=0, atol=0)
    T = 40  # the two scores' baselines: the mean of 1 / (t + 1) over t ≥ 1; on period P, the copies' share
    assert previous_token_score(uniform_pattern(T)).item() == pytest.approx(
        sum(1 / (t + 1) for t in range(1, T)) / (T - 1)
    )
    assert induction_score(uniform_pattern(T), 20).item() == pytest.approx(sum(1 / (t + 1) for t in range(20, T)) / 20)
    for bad in (0, -1, 2.0, True, "6"):
        with pytest.raises(CourseError):
            uniform_pattern(bad)


@pytest.mark.parametrize(
    "call, es, en",
    [
        (lambda: previous_token_score(torch.ones(2, 3, 4)), "patrón de atención", "attention pattern"),
        (lambda: previous_token_score(torch.ones(1, 1, 1, 1)), "dos posiciones", "two positions"),
        (lambda: induction_score(torch.ones(1, 1, 4, 4), 4), "periodo", "period"),
        (lambda: induction_score(torch.ones(1, 1, 4, 4), 0), "periodo", "period"),
        (lambda: induction_score(torch.ones(2, 1, 4, 4), torch.tensor([1, 2, 3])), "uno por fila", "one per row"),
        (lambda: induction_score(torch.ones(1, 1, 4, 4), 1.5), "entero", "int"),
        (lambda: in_context_score(torch.ones(4), 3, 1), "early < late", "early < late"),
        (lambda: composition_scores(small_model(), kind="x"), "kind", "kind"),
        (lambda: composition_scores(small_model(), source_layer=1, target_layer=1), "source_layer", "source_layer"),
        (lambda: run_with_removed(small_model(), torch.zeros(1, 3).long(), (1, 0), (1, "k")), "into", "into"),
        (lambda: run_with_removed(small_model(), torch.zeros(1, 3).long(), (0, 5), (1, "k")), "cabeza", "head"),
        (lambda: ablate_heads(small_model(), {(0, 0): "mean"}).__enter__(), "zero", "zero"),
        (lambda: ablate_heads(small_model(), {(0, 0): torch.zeros(3)}).__enter__(), "forma", "shape"),
        (lambda: InductionRecipe(vocab_size=10, max_period=12, length=30), "vocabulario", "vocabulary"),
        (lambda: InductionRecipe(min_period=8, max_period=6), "min_period", "min_period"),
    ],
)
@pytest.mark.parametrize("lang", ["es", "en"])
def test_bad_input_raises_in_the_current_language(call, es, en, lang, language):
    language(lang)
    with pytest.raises(CourseError, match=es if lang == "es" else en):
        call()


# --- ablation --------------------------------------------------------------------------------


def zeroed_columns(model, layer, head, bias_from=None):
    """A copy of ``model`` whose W_o columns for ``head`` of ``layer`` are zero (and whose W_o bias
    adds W_o^head · bias_from, when given)."""
    copy = ModernTransformer(model.config).eval()
    copy.load_state_dict(model.state_dict())
    attn = copy.blocks[layer].attn
    Dh = attn.d_head
    with torch.no_grad():
        columns = attn.W_o.weight[:, head * Dh : (head + 1) * Dh].clone()
        attn.W_o.weight[:, head * Dh : (head + 1) * Dh] = 0
        if bias_from is not None:
            attn.W_o.bias += columns @ bias_from
    return copy


@pytest.mark.parametrize("layer, head", [(0, 0), (0, 1), (1, 1)])
def test_zero_ablation_equals_zeroing_the_heads_columns_of_W_o(layer, head):
    model = small_model()
    tokens = torch.randint(0, 20, (3, 12))
    with torch.no_grad(), ablate_heads(model, {(layer, head): "zero"}):
        ablated = model(tokens)
    torch.testing.assert_close(ablated, zeroed_columns(model, layer, head)(tokens))
    assert (ablated - model(tokens)).abs().max() > 1e-3  # the hooks are gone afterwards, and the head mattered


def test_mean_ablation_equals_a_bias_of_the_mean_output():
    model = small_model(bias=True)
    tokens = torch.randint(0, 20, (4, 12))
    means = head_outputs_mean(model, tokens)
    assert means.shape == (2, 2, 8)
    with torch.no_grad(), ablate_heads(model, {(0, 1): means[0, 1], (1, 0): "zero"}):
        ablated = model(tokens)
    expected = zeroed_columns(zeroed_columns(model, 0, 1, bias_from=means[0, 1]), 1, 0)
    torch.testing.assert_close(ablated, expected(tokens))


def test_head_outputs_are_the_patterns_times_the_values():
    model = small_model()
    tokens = torch.randint(0, 20, (2, 10))
    z = head_outputs(model, tokens)[0]  # (B, T, H, Dh)
    block = model.blocks[0]
    v = block.attn.W_v(block.norm1(model.token(tokens))).view(2, 10, 2, 8).transpose(1, 2)  # (B, H, T, Dh)
    by_hand = torch.einsum("bhts,bhsd->bthd", attention_patterns(model, tokens)[0], v)
    torch.testing.assert_close(z, by_hand)
    torch.testing.assert_close(head_outputs_mean(model, tokens)[0], z.mean(dim=(0, 1)))


# --- removal from one path -------------------------------------------------------------------


def projections(model, tokens, layer):
    """What layer ``layer``'s W_q, W_k and W_v compute on ``tokens``, by hooks."""
    seen = {}
    attn = model.blocks[layer].attn
    handles = [
        getattr(attn, name).register_forward_hook(lambda m, a, out, name=name: seen.__setitem__(name, out))
        for name in ("W_q", "W_k", "W_v")
    ]
    with torch.no_grad():
        model(tokens, return_attention=True)
    for h in handles:
        h.remove()
    return seen


@pytest.mark.parametrize("kind", ["q", "k", "v"])
def test_removal_changes_only_the_chosen_projection(kind):
    model = small_model()
    tokens = torch.randint(0, 20, (2, 12))
    seen = {}
    attn = model.blocks[1].attn
    handles = [
        getattr(attn, name).register_forward_hook(lambda m, a, out, name=name: seen.__setitem__(name, out))
        for name in ("W_q", "W_k", "W_v")
    ]
    logits, patterns = run_with_removed(model, tokens, source=(0, 1), into=(1, kind))
    for h in handles:
        h.remove()
    intact = projections(model, tokens, 1)
    without = projections(zeroed_columns(model, 0, 1), tokens, 1)  # the head removed from every path
    for name in ("W_q", "W_k", "W_v"):
        expected = without[name] if name == f"W_{kind}" else intact[name]
        torch.testing.assert_close(seen[name], expected)
    assert (seen[f"W_{kind}"] - intact[f"W_{kind}"]).abs().max() > 1e-3
    torch.testing.assert_close(patterns[0], attention_patterns(model, tokens)[0])  # layer 0 untouched
    assert logits.shape == (2, 12, 20) and len(patterns) == 2
    changed = (patterns[1] - attention_patterns(model, tokens)[1]).abs().max()
    assert (changed > 1e-4) == (kind != "v")  # values do not change where a head attends


def test_removing_several_heads_removes_the_sum_of_their_outputs():
    model = small_model(n_layers=3)
    tokens = torch.randint(0, 20, (2, 12))
    seen = {}
    handle = model.blocks[2].attn.W_k.register_forward_hook(lambda m, a, out: seen.__setitem__("k", out))
    run_with_removed(model, tokens, source=[(0, 0), (0, 1), (1, 0)], into=(2, "k"))
    handle.remove()
    captured = {}  # layer 2's input and the heads' outputs of layers 0 and 1 in a plain run
    hooks = [
        model.blocks[2].register_forward_pre_hook(lambda m, a: captured.__setitem__("x", a[0])),
        *[
            b.attn.W_o.register_forward_pre_hook(lambda m, a, i=i: captured.__setitem__(i, a[0]))
            for i, b in enumerate(model.blocks[:2])
        ],
    ]
    with torch.no_grad():
        model(tokens)
    for h in hooks:
        h.remove()
    Dh = 8
    removed = captured["x"].clone()
    for layer, head in [(0, 0), (0, 1), (1, 0)]:
        W_o = model.blocks[layer].attn.W_o.weight[:, head * Dh : (head + 1) * Dh]
        removed -= captured[layer][..., head * Dh : (head + 1) * Dh] @ W_o.T
    block = model.blocks[2]
    torch.testing.assert_close(
        seen["k"], block.attn.W_k(block.norm1(removed)), atol=1e-4, rtol=1e-4
    )  # summed in another order


# --- composition ---------------------------------------------------------------------------


def test_composition_score_of_hand_made_matrices():
    writer = torch.diag(torch.tensor([2.0, 0.0, 0.0]))  # writes into dimension 0 only
    assert composition_score(torch.tensor([[3.0, 0.0, 0.0]]), writer) == pytest.approx(1.0)
    assert composition_score(torch.tensor([[0.0, 5.0, 1.0]]), writer) == pytest.approx(0.0)
    assert composition_score(torch.tensor([[1.0, 1.0, 0.0]]), writer) == pytest.approx(1 / 2**0.5)


@torch.no_grad()
def test_composition_scores_fold_the_norms_and_ignore_rope():
    model = small_model(n_kv_heads=1)
    D, Dh = 16, 8
    scores = composition_scores(model, "k")
    assert scores.shape == (2, 2)
    b0, b1 = model.blocks
    for h0 in range(2):
        ov = b0.attn.W_o.weight[:, h0 * Dh : (h0 + 1) * Dh] @ b0.attn.W_v.weight[:Dh] @ torch.diag(b0.norm1.weight)
        for h1 in range(2):  # one key head shared by both query heads
            reader = b1.attn.W_k.weight[:Dh] * b1.norm1.weight  # (Dh, D)
            expected = composition_score(reader.detach(), ov.detach())
            assert float(scores[h0, h1]) == pytest.approx(expected, rel=1e-5)
            cos, sin = rope_cos_sin(torch.tensor([7]), Dh)  # turned as at position 7: the same score
            turned = apply_rope((reader @ ov).T[:, None, :], cos, sin)[:, 0, :].T  # RoPE on each column
            assert float(torch.linalg.matrix_norm(turned)) == pytest.approx(
                float(torch.linalg.matrix_norm(reader @ ov))
            )
    for kind in ("q", "v"):
        assert composition_scores(model, kind).shape == (2, 2)
    q = composition_scores(model, "q")
    reader = b1.attn.W_q.weight[Dh:] * b1.norm1.weight
    ov = b0.attn.W_o.weight[:, :Dh] @ b0.attn.W_v.weight[:Dh] @ torch.diag(b0.norm1.weight)
    assert float(q[0, 1]) == pytest.approx(composition_score(reader.detach(), ov.detach()), rel=1e-5)
    assert D == b0.attn.d_model


def test_composition_baseline_is_reproducible_and_a_fraction():
    a = composition_baseline(16, 8, draws=20, generator=torch.Generator().manual_seed(0))
    b = composition_baseline(16, 8, draws=20, generator=torch.Generator().manual_seed(0))
    assert a == b and 0 < a < 1
    assert composition_baseline(16, 8, "v", draws=20, generator=torch.Generator().manual_seed(0)) < 1


# --- notebook 13's recipe ---------------------------------------------------------------------

TINY = InductionRecipe(
    vocab_size=8,
    min_period=2,
    max_period=4,
    length=12,
    d_model=16,
    n_heads=2,
    steps=20,
    batch_size=8,
    record_every=10,
    probe_size=8,
    icl_early=1,
    icl_late=10,
)


def test_periodic_batch_repeats_distinct_tokens_with_each_rows_period():
    tokens, periods = periodic_batch(INDUCTION_RECIPE, 16, torch.Generator().manual_seed(0))
    assert tokens.shape == (16, INDUCTION_RECIPE.length) and periods.shape == (16,)
    for row, P in zip(tokens, periods.tolist()):
        assert INDUCTION_RECIPE.min_period <= P <= INDUCTION_RECIPE.max_period
        assert torch.equal(row[P:], row[:-P]) and len(set(row[:P].tolist())) == P


def test_copy_loss_counts_the_predictions_a_copy_can_make():
    # predictions of tokens 1 … 4 from positions 0 … 3; at t = P − 1 (the 5s) the current token is new: no copy
    losses = torch.tensor([[9.0, 5.0, 1.0, 1.0], [9.0, 9.0, 5.0, 2.0]])
    periods = torch.tensor([2, 3])
    assert copy_loss(losses, periods) == pytest.approx((1.0 + 1.0 + 2.0) / 3)
    assert copyable(5, periods).tolist() == [[False, False, True, True], [False, False, False, True]]


def test_the_best_guess_before_any_copy_is_the_unseen_tokens_uniform():
    import math

    assert best_guess_loss(INDUCTION_RECIPE, 4) == pytest.approx(math.log(27))
    assert best_guess_loss(INDUCTION_RECIPE, 0) == pytest.approx(math.log(31))
    with pytest.raises(CourseError):
        best_guess_loss(INDUCTION_RECIPE, INDUCTION_RECIPE.min_period - 1)  # a row may copy there


def test_the_histories_onset_and_halfway_step_by_hand():
    history = InductionHistory(
        steps=[0, 25, 50, 75],
        copy_loss=[3.0, 2.9, 1.0, 0.2],  # halfway: 1.6, first passed at step 50
        induction=[torch.tensor([[0.0, 0.0], [x, 0.1]]) for x in (0.05, 0.3, 0.6, 0.9)],
    )
    assert history.loss_halfway() == 50 and history.onset() == 50 and history.onset(0.7) == 75
    assert history.onset(layer=0) is None


def test_training_records_the_history_and_is_reproducible():
    model, history = train_induction_model(seed=3, recipe=TINY, progress=False)
    assert not model.training and model.blocks[0].feed_forward is None
    assert history.steps == [0, 10, 20] and len(history.loss) == 20 and len(history.copy_loss) == 3
    assert history.previous_token[0].shape == (2, 2) and history.induction[-1].shape == (2, 2)
    assert len(history.in_context) == 3 and history.tokens_seen == 20 * 8 * 12
    assert history.patterns[-1].shape == (2, 2, TINY.kept_rows, 12, 12)  # (L, H, rows, T, T)
    tokens, periods = TINY.probe()
    torch.testing.assert_close(history.patterns[-1][1, 0], attention_patterns(model, tokens[: TINY.kept_rows])[1][:, 0])
    losses = per_position_loss(model, tokens)
    assert history.in_context[-1] == pytest.approx(in_context_score(losses, TINY.icl_early, TINY.icl_late), abs=1e-5)
    assert history.onset(threshold=0.0) == 0 and history.onset(threshold=1.0) is None
    again, _ = train_induction_model(seed=3, recipe=replace(TINY), progress=False)
    for a, b in zip(model.parameters(), again.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


# --- prefix matching, the circuits read from the weights, direct logit attribution ----------


def test_prefix_matching_by_hand():
    tokens = torch.tensor([[1, 2, 3, 1, 2, 4, 1]])
    # t = 3 (token 1): s = 1; t = 4 (token 2): s = 2; t = 6 (token 1): s = 1 and s = 4; t = 5 (token 4): none
    pattern = torch.zeros(1, 1, 7, 7)
    pattern[0, 0, :, 0] = 1.0
    pattern[0, 0, 3] = torch.tensor([0.5, 0.5, 0, 0, 0, 0, 0])  # 0.5 on s = 1
    pattern[0, 0, 4] = torch.tensor([0.0, 0.0, 0.2, 0.8, 0, 0, 0])  # 0.2 on s = 2
    pattern[0, 0, 6] = torch.tensor([0.0, 0.3, 0.0, 0.0, 0.6, 0.1, 0])  # 0.3 + 0.6 on s = 1, 4
    assert prefix_matching_score(pattern, tokens).item() == pytest.approx((0.5 + 0.2 + 0.9) / 3)
    with pytest.raises(CourseError):
        prefix_matching_score(pattern, torch.tensor([[0, 1, 2, 3, 4, 5, 6]]))  # nothing repeats
    with pytest.raises(CourseError):
        prefix_matching_score(pattern, tokens[:, :5])


def test_prefix_matching_is_the_induction_score_on_distinct_segments_repeated():
    tokens, periods = periodic_batch(INDUCTION_RECIPE, 6, torch.Generator().manual_seed(3))
    T = tokens.size(1)
    g = torch.Generator().manual_seed(4)
    scores = torch.randn(6, 3, T, T, generator=g).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    pattern = scores.softmax(-1)
    torch.testing.assert_close(prefix_matching_score(pattern, tokens), induction_score(pattern, periods))


def copying_model(V=8, D=16) -> ModernTransformer:
    """One layer of two heads: head 0 reads the token's one-hot embedding and writes it back (its OV
    circuit is the identity), head 1 writes nothing; norms' gains 2 (they fold in)."""
    model = ModernTransformer(
        ModernConfig(vocab_size=V, d_model=D, n_heads=2, n_layers=2, max_len=16, feed_forward="none")
    ).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.token.weight[:, :V] = torch.eye(V)
        model.lm_head.weight[:, :V] = torch.eye(V)
        for block in model.blocks:
            block.norm1.weight.fill_(2.0)
            block.attn.W_v.weight[: D // 2, : D // 2] = torch.eye(D // 2)  # head 0 reads dims 0 … 7
            block.attn.W_o.weight[: D // 2, : D // 2] = torch.eye(D // 2)  # and writes them back
        model.norm.weight.fill_(2.0)
    return model


def test_a_hand_built_copying_ov_circuit_scores_one_and_a_silent_head_zero():
    model = copying_model()
    ov = ov_circuit(model, 0, 0)
    torch.testing.assert_close(ov, 4 * torch.eye(8))  # the two gains of 2
    assert diagonal_score(ov) == 1.0 and positive_eigenvalue_score(ov) == pytest.approx(1.0)
    assert diagonal_score(ov_circuit(model, 0, 1)) == 0.0  # all zero: ties count against
    assert positive_eigenvalue_score(-ov) == pytest.approx(-1.0)


def test_ov_circuit_is_the_weights_product_by_hand():
    model = small_model(seed=2)
    a, Dh = model.blocks[1].attn, 8
    E, W_U = model.token.weight.detach(), model.lm_head.weight.detach()
    W_ov = a.W_o.weight[:, Dh:] @ a.W_v.weight[Dh:] * model.blocks[1].norm1.weight  # head 1: (D, D)
    expected = (W_U * model.norm.weight).detach() @ W_ov.detach() @ E.T  # (V_out, V_src)
    torch.testing.assert_close(ov_circuit(model, 1, 1), expected.T, rtol=1e-4, atol=1e-4)


def test_random_circuits_score_near_chance():
    g = torch.Generator().manual_seed(0)
    draws = [torch.randn(32, 32, generator=g) for _ in range(50)]
    assert sum(diagonal_score(m) for m in draws) / 50 < 3 / 32
    assert abs(sum(positive_eigenvalue_score(m) for m in draws) / 50) < 0.1
    rotation = torch.tensor([[0.0, -1.0], [1.0, 0.0]])  # eigenvalues ± i: no copying, no anti-copying
    assert positive_eigenvalue_score(rotation) == pytest.approx(0.0, abs=1e-12)
    for bad in (torch.zeros(2, 3), torch.zeros(3)):
        with pytest.raises(CourseError):
            diagonal_score(bad)
    models = [small_model(seed=s) for s in range(4)]
    mean = sum(diagonal_score(ov_circuit(m, 1, h)) for m in models for h in range(2)) / 8
    assert mean < 0.3  # 20 tokens: chance is 0.05


@torch.no_grad()
@pytest.mark.parametrize("offset", [0, 5])
def test_qk_circuit_is_the_models_attention_score_at_that_distance(offset):
    model = small_model(seed=1)
    block, Dh = model.blocks[1], 8
    E = model.token.weight
    a_tok, b_tok = 3, 11
    x = E[a_tok] * block.norm1.weight  # the norm's gain, without its 1/rms
    y = E[b_tok] * block.norm1.weight
    T = offset + 1
    q = block.attn.W_q(x)[None].expand(T, -1).reshape(T, 2, Dh).transpose(0, 1)  # (H, T, Dh)
    k = block.attn.W_k(y)[None].expand(T, -1).reshape(T, 2, Dh).transpose(0, 1)
    q, k = model.rope(q), model.rope(k)  # turned as positions 0 … T − 1
    for head in range(2):
        want = float(q[head, offset] @ k[head, 0]) / Dh**0.5  # query at t = offset, key at s = 0
        assert float(qk_circuit(model, 1, head, offset)[a_tok, b_tok]) == pytest.approx(want, rel=1e-4, abs=1e-5)
    b0 = model.blocks[0]
    through = (b0.attn.W_o.weight[:, :Dh] @ b0.attn.W_v.weight[:Dh]) @ (E[b_tok] * b0.norm1.weight)  # head 0.0 writes
    k = block.attn.W_k(through * block.norm1.weight).reshape(2, Dh)
    q0 = model.rope(block.attn.W_q(x).reshape(2, Dh)[:, None].expand(2, T, Dh).contiguous())[:, offset]
    assert float(qk_circuit(model, 1, 0, offset, through=[(0, 0)])[a_tok, b_tok]) == pytest.approx(
        float(q0[0] @ k[0]) / Dh**0.5, rel=1e-4, abs=1e-5
    )
    with pytest.raises(CourseError):
        qk_circuit(model, 1, 0, offset, through=[(1, 0)])
    with pytest.raises(CourseError):
        qk_circuit(model, 1, 0, -1)


def test_a_previous_token_head_makes_the_qk_circuit_through_it_diagonal():
    """Hand-built: head 0.0 copies the embedding (its W_OV the identity on the token's dimensions) and
    head 1.0's W_QK matches a query's token with the same token in what head 0.0 wrote."""
    model = copying_model()
    with torch.no_grad():
        a = model.blocks[1].attn
        a.W_q.weight[:8, :8] = torch.eye(8)
        a.W_k.weight[:8, :8] = torch.eye(8)
    circuit = qk_circuit(model, 1, 0, 0, through=[(0, 0)])
    assert diagonal_score(circuit) == 1.0
    assert diagonal_score(qk_circuit(model, 1, 0, 0, through=[(0, 1)])) == 0.0  # head 0.1 writes nothing


@torch.no_grad()
@pytest.mark.parametrize("norm", ["rms", "layer"])
def test_direct_logit_attribution_adds_up_to_the_centred_logit(norm):
    model = small_model(seed=3, norm=norm)
    tokens = torch.randint(0, 20, (3, 10), generator=torch.Generator().manual_seed(0))
    heads, rest = direct_logit_attribution(model, tokens)
    assert heads.shape == (3, 9, 2, 2) and rest.shape == (3, 9)
    logits = model(tokens)[:, :-1]
    centred = logits.gather(-1, tokens[:, 1:, None])[..., 0] - logits.mean(-1)
    torch.testing.assert_close(heads.sum((-1, -2)) + rest, centred, rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        model.blocks[0].attn.W_o.weight[:, 8:] = 0.0  # head 0.1 writes nothing
    heads, _ = direct_logit_attribution(model, tokens)
    assert heads[..., 0, 1].abs().max() == 0 and heads[..., 0, 0].abs().max() > 0


@torch.no_grad()
def test_direct_logit_attribution_of_other_tokens_adds_up_to_their_centred_logit():
    model = small_model(seed=3, norm="rms")
    tokens = torch.randint(0, 20, (3, 10), generator=torch.Generator().manual_seed(0))
    current = tokens[:, :-1]  # each position's own token, never the next one here
    heads, rest = direct_logit_attribution(model, tokens, targets=current)
    logits = model(tokens)[:, :-1]
    centred = logits.gather(-1, current[..., None])[..., 0] - logits.mean(-1)
    torch.testing.assert_close(heads.sum((-1, -2)) + rest, centred, rtol=1e-4, atol=1e-4)
    same, _ = direct_logit_attribution(model, tokens, targets=tokens[:, 1:])
    torch.testing.assert_close(same, direct_logit_attribution(model, tokens)[0])
    for bad in (tokens, current.float()):  # one position too many; not ids
        with pytest.raises(CourseError):
            direct_logit_attribution(model, tokens, targets=bad)


def test_seen_mass_is_the_probability_on_the_tokens_already_in_the_row():
    from minitransformer.course.induction import seen_mass

    model = small_model(seed=3, norm="rms").eval()
    tokens = torch.tensor([[1, 2, 3, 4], [5, 5, 6, 7]])
    got = seen_mass(model, tokens, 3)
    with torch.no_grad():
        probs = model(tokens[:, :3]).softmax(-1)
    by_hand = [
        (probs[0, 0, 1] + probs[1, 0, 5]) / 2,
        (probs[0, 1, [1, 2]].sum() + probs[1, 1, 5]) / 2,  # a repeated token counts once
        (probs[0, 2, [1, 2, 3]].sum() + probs[1, 2, [5, 6]].sum()) / 2,
    ]
    torch.testing.assert_close(got, torch.stack(by_hand).float())


def test_direct_logit_attribution_of_a_copying_head():
    """The hand-built copying head 0.0 attends to earlier positions: its direct effect on the next token's logit
    is its attention to positions holding that token, times the OV circuit's diagonal, at the run's scale."""
    model = copying_model()
    tokens = torch.tensor([[1, 2, 3, 1, 2, 3]])
    heads, rest = direct_logit_attribution(model, tokens)
    assert heads[..., 0, 1].abs().max() == 0 and heads[..., 1, 1].abs().max() == 0
    assert (heads[..., 0, 0] != 0).any()


def test_elhage_composition_reads_through_w_qk_at_the_offset():
    model = small_model(seed=4)
    Dh = 8
    b0, b1 = model.blocks
    ov = (b0.attn.W_o.weight[:, :Dh] @ b0.attn.W_v.weight[:Dh] * b0.norm1.weight).detach()
    q = (b1.attn.W_q.weight[Dh:] * b1.norm1.weight).detach()  # head 1.1
    k = (b1.attn.W_k.weight[Dh:] * b1.norm1.weight).detach()
    cos, sin = rope_cos_sin(torch.tensor([3]), Dh)
    q3 = apply_rope(q.T[:, None, :], cos, sin)[:, 0, :].T  # the query turned 3 positions after the key
    qk = q3.T @ k
    assert float(composition_scores(model, "k", offset=3)[0, 1]) == pytest.approx(composition_score(qk, ov), rel=1e-4)
    assert float(composition_scores(model, "q", offset=3)[0, 1]) == pytest.approx(composition_score(qk.T, ov), rel=1e-4)
    assert float(composition_scores(model, "k", offset=0)[0, 1]) == pytest.approx(
        composition_score(q.T @ k, ov), rel=1e-4
    )
    torch.testing.assert_close(composition_scores(model, "v", offset=3), composition_scores(model, "v"))
    base = composition_baseline(16, 8, "k", draws=20, generator=torch.Generator().manual_seed(0), bilinear=True)
    assert 0 < base < 1
    with pytest.raises(CourseError):
        composition_scores(model, "k", offset=-2)


def small_gpt(seed=0) -> GPT:
    """Notebook 09's model, small, with LayerNorms, biases, learned positions and a tied output."""
    torch.manual_seed(seed)
    config = GPTConfig(vocab_size=20, max_len=24, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0)
    model = GPT(config).eval()
    with torch.no_grad():  # weights far from the tiny initialisation, so that every head matters
        for p in model.parameters():
            p.add_(0.5 * torch.randn_like(p))
    return model


@torch.no_grad()
def test_notebook_13s_tools_read_notebook_09s_gpt():
    """The same tools on a GPT (its blocks are model.layers[i], their attention .self_attn): head outputs,
    ablation, removal from one path, the OV circuit with LayerNorm's centring, the direct logit attribution and
    the composition scores."""
    model = small_gpt()
    tokens = torch.randint(0, 20, (3, 12), generator=torch.Generator().manual_seed(0))
    Dh, C = 8, torch.eye(16) - 1 / 16  # C: LayerNorm's centring
    b0, b1 = model.layers
    x0 = model.token(tokens) + model.position(torch.arange(12))  # (B, T, D)
    v = b0.self_attn.W_v(b0.norm1(x0)).view(3, 12, 2, Dh).transpose(1, 2)  # (B, H, T, Dh), with W_v's bias
    patterns = attention_patterns(model, tokens)
    assert len(patterns) == 2 and patterns[0].shape == (3, 2, 12, 12)
    torch.testing.assert_close(head_outputs(model, tokens)[0], torch.einsum("bhts,bhsd->bthd", patterns[0], v))

    with ablate_heads(model, {(1, 0): "zero"}):
        ablated = model(tokens)
    zeroed = copy.deepcopy(model)
    zeroed.layers[1].self_attn.W_o.weight[:, :Dh] = 0
    torch.testing.assert_close(ablated, zeroed(tokens))

    seen = {}
    handle = b1.self_attn.W_k.register_forward_hook(lambda m, a, out: seen.__setitem__("k", out))
    _, removed = run_with_removed(model, tokens, source=(0, 1), into=(1, "k"))
    handle.remove()
    z = head_outputs(model, tokens)[0][..., 1, :]  # (B, T, Dh): head 0.1's output
    x1 = b0(x0, torch.ones(12, 12, dtype=torch.bool).tril())[0]  # (B, T, D): layer 1's input
    without = x1 - z @ b0.self_attn.W_o.weight[:, Dh:].T
    torch.testing.assert_close(seen["k"], b1.self_attn.W_k(b1.norm1(without)), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(removed[0], patterns[0])

    a = b1.self_attn
    W_ov = a.W_o.weight[:, Dh:] @ a.W_v.weight[Dh:] @ (torch.diag(b1.norm1.weight) @ C)  # head 1.1: (D, D)
    W_U = model.lm_head.weight @ torch.diag(model.norm.weight) @ C
    torch.testing.assert_close(ov_circuit(model, 1, 1), (W_U @ W_ov @ model.token.weight.T).T, rtol=1e-4, atol=1e-4)

    heads, rest = direct_logit_attribution(model, tokens)
    logits = model(tokens)[:, :-1]
    centred = logits.gather(-1, tokens[:, 1:, None])[..., 0] - logits.mean(-1)
    assert heads.shape == (3, 11, 2, 2)
    torch.testing.assert_close(heads.sum((-1, -2)) + rest, centred, rtol=1e-4, atol=1e-4)

    for kind in COMPOSITIONS:
        scores = composition_scores(model, kind)
        assert scores.shape == (2, 2) and bool(((scores > 0) & (scores < 1)).all())
    assert qk_circuit(model, 1, 0, 3).shape == (20, 20)  # learned positions: the same W_QK at every distance
    torch.testing.assert_close(qk_circuit(model, 1, 0, 3), qk_circuit(model, 1, 0, 0))


@pytest.mark.slow
def test_the_repeated_random_tokens_probe_and_the_head_scores_on_a_gpt2_built_from_a_config():
    """The probe cell for GPT-2 small runs the same code on any GPT-2: here a tiny one built from a config (no
    download), converted as GPT-2 small would be."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from minitransformer.course.induction import head_scores, local_gpt2_small, repeated_random_tokens
    from minitransformer.hf_import import from_gpt2

    tokens = repeated_random_tokens(50, 3, 10, torch.Generator().manual_seed(0))
    assert tokens.shape == (3, 20) and torch.equal(tokens[:, :10], tokens[:, 10:])
    torch.manual_seed(0)
    gpt = from_gpt2(GPT2LMHeadModel(GPT2Config(vocab_size=50, n_positions=32, n_embd=16, n_layer=2, n_head=2)))
    scores = head_scores(gpt, tokens)
    assert scores["prefix"].shape == (2, 2) and scores["previous"].shape == (2, 2)
    assert 0 < scores["uniform_prefix"] < 1 and 0 < scores["uniform_previous"] < 1
    assert local_gpt2_small() is None or isinstance(local_gpt2_small(), GPT)  # offline here: None


def test_measure_run_gives_every_number_the_claims_read():
    from minitransformer.course.induction import CLAIMS, COMMON, check_claims

    model, history = train_induction_model(seed=3, recipe=TINY, progress=False)
    run = measure_run(model, history, TINY)
    assert set(check_claims(run)) == set(CLAIMS) and set(check_claims(run, COMMON)) == set(COMMON)
    assert len(run["copy_loss_zero"]) == 2 and len(run["removed_one_from_keys"]) == 2
    assert run["copy_loss_end"] == pytest.approx(history.copy_loss[-1], abs=1e-4)


def test_the_stored_seed_record_keeps_three_lists_and_every_claim_holds_on_every_seed():
    from minitransformer.course.induction import CLAIMS, check_claims

    record = seed_record()
    development, verification, fresh = record["development"], record["verification"], record["fresh"]
    assert 1 in development and 0 in development and len(verification) >= 10 and len(fresh) >= 8
    assert not set(development) & set(verification) and not set(fresh) & set(development + verification)
    assert set(record["runs"]) == {str(s) for s in development + verification + fresh}
    assert record["command"].startswith("python tools/induction_seeds.py") and record["machine"]["cpu"]
    failed = {s: [k for k, ok in check_claims(record["runs"][str(s)]).items() if not ok] for s in record["runs"]}
    assert not any(failed.values()), failed
    assert set(CLAIMS) == set(check_claims(record["runs"]["0"]))
