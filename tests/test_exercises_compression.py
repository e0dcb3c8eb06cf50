"""The checkers of notebook 12 accept the worked solutions (also pasted into a fresh interpreter) and other right
answers, and reject, without crashing, the wrong answers students write, naming the mistake in both languages."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from feedback_asserts import (
    assert_correct,
    assert_hint,
    bank,
)

from minitransformer import arithmetic_coder, generation
from minitransformer.exercises.compression import (
    _DEC_CASES,
    _NARROW_CASES,
    _SAMPLE_CASES,
    HINTS,
    _dec_mistakes,
    _decoded,
    _narrow_mistakes,
    _reference,
    _sample_mistakes,
    _tiny_model,
    _variant,
    check_decoder_step,
    check_narrow,
    check_sample,
)
from minitransformer.exercises.registry import exercises
from minitransformer.exercises.solutions.nb12 import (
    solution_decoder_step,
    solution_narrow_interval,
    solution_sample,
)
from minitransformer.sampling import next_token_probs, sample_next_token, top_p_filter

LANGS = ["es", "en"]


def test_the_exercises_are_registered_in_notebook_order():
    names = [n for n in exercises() if n.startswith("12.")]
    assert names == ["12.interval_narrowing", "12.decoder_step", "12.sample_with_cache"]


# --- 12.interval_narrowing -----------------------------------------------------------------------


def narrow_with_names(low, high, start, stop, total):
    """Another right answer: a width named, a list returned, numpy integers."""
    size = np.int64(high) - np.int64(low) + 1
    return [int(low + int(size) * start // total), int(low + int(size) * stop // total - 1)]


def narrow_with_divmod(low, high, start, stop, total):
    width = high - low + 1
    first, _ = divmod(width * start, total)
    last, _ = divmod(width * stop, total)
    return low + first, low + last - 1


@pytest.mark.parametrize("lang", LANGS)
def test_narrow_accepts_other_right_answers(lang):
    for answer in (solution_narrow_interval, narrow_with_names, narrow_with_divmod):
        assert_correct(check_narrow(answer, lang=lang), lang)


def test_every_narrowing_mistake_shows_in_some_case_and_is_told_from_the_ones_before():
    rights = [arithmetic_coder.narrow(*case) for case in _NARROW_CASES]
    banks = [_narrow_mistakes(*case) for case in _NARROW_CASES]
    for j, (key, _) in enumerate(banks[0]):
        assert any(b[j][1] != r for b, r in zip(banks, rights)), key
        earlier = [k for k, (other, _) in enumerate(banks[0][:j]) if other != key]
        assert all(any(b[k][1] != b[j][1] for b in banks) for k in earlier), key


def _width(low, high):
    return high - low + 1


NARROW_MISTAKES = {
    "float division": (
        lambda lo, hi, a, b, t: (int(lo + _width(lo, hi) * a / t), int(lo + _width(lo, hi) * b / t) - 1),
        "narrow_float",
    ),
    "int of the share": (
        lambda lo, hi, a, b, t: (lo + int(_width(lo, hi) * a / t), lo + int(_width(lo, hi) * b / t) - 1),
        "narrow_float",
    ),
    "floats returned": (
        lambda lo, hi, a, b, t: (lo + _width(lo, hi) * a / t, lo + _width(lo, hi) * b / t - 1),
        "narrow_float",
    ),
    "round": (
        lambda lo, hi, a, b, t: (lo + round(_width(lo, hi) * a / t), lo + round(_width(lo, hi) * b / t) - 1),
        "narrow_round",
    ),
    "no low": (lambda lo, hi, a, b, t: (_width(lo, hi) * a // t, _width(lo, hi) * b // t - 1), "narrow_no_low"),
    "width without + 1": (
        lambda lo, hi, a, b, t: (lo + (hi - lo) * a // t, lo + (hi - lo) * b // t - 1),
        "narrow_width",
    ),
    "no - 1": (lambda lo, hi, a, b, t: (lo + _width(lo, hi) * a // t, lo + _width(lo, hi) * b // t), "narrow_high_end"),
    "low first": (lambda lo, hi, a, b, t: _low_first(lo, hi, a, b, t), "narrow_new_low"),
    "width again after low": (lambda lo, hi, a, b, t: _width_again(lo, hi, a, b, t), "narrow_new_low"),
    "high, low": (
        lambda lo, hi, a, b, t: (lo + _width(lo, hi) * b // t - 1, lo + _width(lo, hi) * a // t),
        "narrow_swapped",
    ),
    "start and stop swapped": (
        lambda lo, hi, a, b, t: (lo + _width(lo, hi) * b // t, lo + _width(lo, hi) * a // t - 1),
        "narrow_start_stop",
    ),
    "total shared out": (lambda lo, hi, a, b, t: (lo + a, lo + b - 1), "narrow_total"),
    "high shared out": (lambda lo, hi, a, b, t: (lo + hi * a // t, lo + hi * b // t - 1), "narrow_total"),
    "one number": (lambda lo, hi, a, b, t: lo + _width(lo, hi) * a // t, "narrow_pair"),
    "three numbers": (lambda lo, hi, a, b, t: (lo, hi, t), "narrow_pair"),
    "something else": (lambda lo, hi, a, b, t: (lo + 1, hi - 1), "narrow_other"),
    "the package's own": (lambda lo, hi, a, b, t: arithmetic_coder.narrow(lo, hi, a, b, t), "forbidden"),
}


def _low_first(low, high, start, stop, total):
    width = high - low + 1
    low = low + width * start // total
    high = low + width * stop // total - 1
    return low, high


def _width_again(low, high, start, stop, total):
    low = low + (high - low + 1) * start // total
    high = low + (high - low + 1) * stop // total - 1
    return low, high


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("check,answer,hint", bank(check_narrow, NARROW_MISTAKES))
def test_narrow_rejects_wrong_answers(check, answer, hint, lang):
    assert_hint(check(answer, lang=lang), lang, hint, HINTS)


@pytest.mark.parametrize("lang", LANGS)
def test_a_narrowing_right_on_the_cases_but_not_always_fails_the_round_trip(lang):
    """A table of the five cases passes them; the round trip, 300 symbols later, does not."""
    table = {case: arithmetic_coder.narrow(*case) for case in _NARROW_CASES}

    def looked_up(*case):
        return table.get(case, (case[0], case[1]))

    fb = check_narrow(looked_up, lang=lang)
    assert_hint(fb, lang, "narrow_other", HINTS)


@pytest.mark.parametrize("lang", LANGS)
def test_a_narrowing_that_breaks_the_interval_is_stopped_not_looped_on(lang):
    def inverted_after_the_cases(low, high, start, stop, total):
        if (low, high, start, stop, total) in _NARROW_CASES:
            return solution_narrow_interval(low, high, start, stop, total)
        return high, low  # low > high: the encoder's loop would never end

    assert_hint(check_narrow(inverted_after_the_cases, lang=lang), lang, "narrow_other", HINTS)


# --- 12.decoder_step -------------------------------------------------------------------------------


def test_the_decoder_cases_hold_what_separates_the_mistakes():
    """Values at the start, the end and inside a share and at high, zero counts, wide and narrow intervals; every
    mistake gives another answer in some case, and not every answer of a mistake of another key listed before it."""
    rights = [_decoded(*case) for case in _DEC_CASES]
    assert any(c[symbol] == 0 for (*_, c) in _DEC_CASES for symbol in range(len(c)))
    assert any(high - low + 1 == 2**32 for low, high, _, _ in _DEC_CASES)
    assert any(high - low + 1 < 2**30 + 2**20 for low, high, _, _ in _DEC_CASES)
    assert any(value == high for _, high, value, _ in _DEC_CASES)
    banks = [_dec_mistakes(*case) for case in _DEC_CASES]
    keys = [k for k, _ in banks[0]]
    for j, key in enumerate(keys):
        assert any(b[j][1] != r for b, r in zip(banks, rights)), key
        for k in range(j):
            if keys[k] != key:
                assert any(b[j][1] != b[k][1] for b in banks), (key, keys[k])


def decoder_with_cumulative_counts(low, high, value, counts):
    """Another right answer: a table of the running counts and bisect."""
    import bisect
    import itertools

    ends = list(itertools.accumulate(counts))
    total, width = ends[-1], high - low + 1
    target = ((value - low + 1) * total - 1) // width
    symbol = bisect.bisect_right(ends, target)
    start = ends[symbol] - counts[symbol]
    return symbol, low + width * start // total, low + width * ends[symbol] // total - 1


def decoder_with_packages_narrow(low, high, value, counts):
    """Also right: the package's narrow for the last step, a tensor's searchsorted for the symbol."""
    ends = torch.tensor(counts).cumsum(0)
    total = int(ends[-1])
    target = ((value - low + 1) * total - 1) // (high - low + 1)
    symbol = int(torch.searchsorted(ends, target, right=True))
    return torch.tensor(
        [symbol, *arithmetic_coder.narrow(low, high, int(ends[symbol]) - counts[symbol], int(ends[symbol]), total)]
    )


@pytest.mark.parametrize("lang", LANGS)
def test_decoder_step_accepts_other_right_answers(lang):
    for answer in (
        solution_decoder_step,
        decoder_with_cumulative_counts,
        decoder_with_packages_narrow,
        decoder_last_start_at_most_target,
    ):
        assert_correct(check_decoder_step(answer, lang=lang), lang)


def _step(*, target=None, le=False, width_minus_one=False, narrow_shift=0, start_with_own=False, symbol_shift=0):
    """A decoder's step as a student would write it, with one thing changed."""

    def step(low, high, value, counts):
        total = sum(counts)
        width = high - low if width_minus_one else high - low + 1
        t = ((value - low + 1) * total - 1) // width if target is None else target(low, value, width, total)
        running, chosen = 0, len(counts) - 1
        for i, c in enumerate(counts):
            if (t <= running + c) if le else (t < running + c):
                chosen = i
                break
            running += c
        s = min(max(chosen + narrow_shift, 0), len(counts) - 1)
        start = sum(counts[: s + 1]) if start_with_own else sum(counts[:s])
        stop = start + counts[s]
        return chosen + symbol_shift, low + width * start // total, low + width * stop // total - 1

    return step


def decoder_last_start_at_most_target(low, high, value, counts):
    """Also right: the last symbol whose start is at most the target (a symbol with no count after it starts past
    the target)."""
    total, width = sum(counts), high - low + 1
    target = ((value - low + 1) * total - 1) // width
    start, chosen, chosen_start = 0, 0, 0
    for i, c in enumerate(counts):
        if start <= target:
            chosen, chosen_start = i, start
        start += c
    return chosen, low + width * chosen_start // total, low + width * (chosen_start + counts[chosen]) // total - 1


DEC_MISTAKES = {
    "(value - low) * total // width": (_step(target=lambda lo, v, w, t: (v - lo) * t // w), "dec_target"),
    "target <= stop": (_step(le=True), "dec_boundary"),
    "width = high - low": (_step(width_minus_one=True), "dec_width"),
    "value, not value - low": (_step(target=lambda lo, v, w, t: ((v + 1) * t - 1) // w), "dec_no_low"),
    "value - low, not scaled": (_step(target=lambda lo, v, w, t: v - lo), "dec_no_scale"),
    "narrowed with the next symbol": (_step(narrow_shift=1), "dec_narrow_neighbour"),
    "narrowed with the symbol before": (_step(narrow_shift=-1), "dec_narrow_neighbour"),
    "start includes its own count": (_step(start_with_own=True), "dec_narrow_prefix"),
    "the symbol counted from 1, landing on one with no count": (_step(symbol_shift=1), "dec_zero_count"),
    "the high end without - 1": (
        lambda lo, hi, v, c: (lambda s, a, b: (s, a, b + 1))(*solution_decoder_step(lo, hi, v, c)),
        "dec_narrow",
    ),
    "only the symbol": (lambda lo, hi, v, c: solution_decoder_step(lo, hi, v, c)[0], "dec_triple"),
    "floats": (lambda lo, hi, v, c: tuple(float(x) for x in solution_decoder_step(lo, hi, v, c)), "dec_triple"),
    "the package's target": (
        lambda lo, hi, v, c: arithmetic_coder.ArithmeticDecoder.target(
            type("State", (), {"low": lo, "high": hi, "value": v})(), sum(c)
        ),
        "forbidden",
    ),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("check,answer,hint", bank(check_decoder_step, DEC_MISTAKES))
def test_decoder_step_rejects_wrong_answers(check, answer, hint, lang):
    assert_hint(check(answer, lang=lang), lang, hint, HINTS)


@pytest.mark.parametrize("lang", LANGS)
def test_decoder_step_sees_gradients_left_off(lang):
    def turning_gradients_off(low, high, value, counts):
        torch.set_grad_enabled(False)
        return solution_decoder_step(low, high, value, counts)

    assert_hint(check_decoder_step(turning_gradients_off, lang=lang), lang, "grad_mode_left", HINTS)
    assert torch.is_grad_enabled()


def test_the_decoder_works_again_after_a_check():
    check_decoder_step(DEC_MISTAKES["the package's target"][0], lang="en")
    data = arithmetic_coder.encode([0, 2, 1], torch.tensor([[6, 3, 1]] * 3))
    assert arithmetic_coder.decode(data, 3, torch.tensor([[6, 3, 1]] * 3)) == [0, 2, 1]


# --- 12.sample_with_cache --------------------------------------------------------------------------


def test_the_checkers_reference_is_generate_and_each_mistake_shows_in_some_case():
    """Every mistake gives other tokens than generate in some case, and in the first such case no mistake listed
    before it gives the same tokens (so diagnose names it)."""
    models = {flat: _tiny_model(flat) for flat in (False, True)}
    cases = [(models[flat], *case) for *case, flat in _SAMPLE_CASES]
    rights = [_reference(*case) for case in cases]
    assert rights == [_variant(*case) for case in cases]  # the mistakes' loop, without a mistake
    banks = [_sample_mistakes(*case) for case in cases]
    keys = [k for k, _ in banks[0]]
    for j, key in enumerate(keys):
        first = next((i for i, b in enumerate(banks) if b[j][1] != rights[i]), None)
        assert first is not None, f"{key} never shows"
        assert all(banks[first][k][1] != banks[first][j][1] for k in range(j)), key


def sample_with_probs(model, prompt_ids, n_new, temperature, top_p, generator):
    """Another right answer: next_token_probs and torch.multinomial, a preallocated cache, a (1, n) tensor."""
    cache = model.new_cache(len(prompt_ids) + n_new)
    tokens = torch.tensor(prompt_ids).unsqueeze(0)
    out = []
    for _ in range(n_new):
        logits = model(tokens, cache=cache)[:, -1, :]
        probs = next_token_probs(logits, temperature=temperature, top_p=top_p)
        tokens = torch.multinomial(probs, num_samples=1, generator=generator)
        out.append(tokens)
    return torch.cat(out, dim=1)


def sample_feeding_the_last_token_too(model, prompt_ids, n_new, temperature, top_p, generator):
    """Right, with one call more: the last token goes into the cache as well."""
    cache, out = model.new_cache(), []
    logits = model(torch.tensor([prompt_ids]), cache=cache)
    for _ in range(n_new):
        token = sample_next_token(logits[:, -1], temperature, None, top_p, generator)
        out.append(token.item())
        logits = model(token.view(1, 1), cache=cache)
    return out


@pytest.mark.parametrize("lang", LANGS)
def test_sample_accepts_other_right_answers(lang):
    assert_correct(check_sample(sample_with_probs, lang=lang), lang)
    assert_correct(check_sample(sample_feeding_the_last_token_too, lang=lang), lang)


def _loop(*, cache=True, refeed=False, position=-1, draw=None, append=True, each_step_cache=False, piecewise=False):
    """A sampling loop written as a student would, with one thing changed."""

    def draw_right(logits, temperature, top_p, generator):
        return sample_next_token(logits, temperature, top_p=top_p, generator=generator)

    draw = draw or draw_right

    def sample(model, prompt_ids, n_new, temperature, top_p, generator):
        c = model.new_cache() if cache else None
        seq, out = list(prompt_ids), []
        new = torch.tensor([seq])
        if piecewise:
            for t in prompt_ids[:-1]:
                model(torch.tensor([[t]]), cache=c)
            new = torch.tensor([[prompt_ids[-1]]])
        for _ in range(n_new):
            if each_step_cache:
                c = model.new_cache()
            logits = model(new, cache=c)[:, position] if cache else model(torch.tensor([seq]))[:, position]
            token = int(draw(logits, temperature, top_p, generator))
            out.append(token)
            seq.append(token)
            if refeed:
                new = torch.tensor([seq])
            else:
                new = torch.tensor([[token if append else prompt_ids[-1]]])
        return out

    return sample


def _sampled(probs, generator):
    return torch.multinomial(probs, 1, generator=generator)[0, 0]


SAMPLE_MISTAKES = {
    "no cache": (_loop(cache=False), "sample_no_cache"),
    "the whole sequence into the cache": (_loop(refeed=True), "sample_refeed"),
    "a new cache each step": (_loop(each_step_cache=True), "sample_cache_each_step"),
    "the prompt one token at a time": (_loop(piecewise=True), "sample_prompt_once"),
    "first position": (_loop(position=0), "sample_first_position"),
    "not appended": (_loop(append=False), "sample_not_appended"),
    "greedy": (_loop(draw=lambda logits, t, p, g: logits.argmax(-1)), "sample_greedy"),
    "no temperature": (
        _loop(draw=lambda logits, t, p, g: _sampled(next_token_probs(logits, 1.0, top_p=p), g)),
        "sample_no_temperature",
    ),
    "temperature times": (
        _loop(draw=lambda logits, t, p, g: _sampled(top_p_filter(logits * t, p).softmax(-1), g)),
        "sample_temperature_times",
    ),
    "no top-p": (
        _loop(draw=lambda logits, t, p, g: _sampled((logits / t).softmax(-1), g)),
        "sample_no_top_p",
    ),
    "top-p first": (
        _loop(draw=lambda logits, t, p, g: _sampled((top_p_filter(logits, p) / t).softmax(-1), g)),
        "sample_top_p_first",
    ),
    "a fresh generator each step": (
        _loop(draw=lambda logits, t, p, g: sample_next_token(logits, t, None, p, torch.Generator())),
        "sample_generator",
    ),
    "the global random state": (
        _loop(draw=lambda logits, t, p, g: sample_next_token(logits, t, None, p)),
        "sample_generator",
    ),
    "a fresh seeded generator": (
        _loop(draw=lambda logits, t, p, g: sample_next_token(logits, t, None, p, torch.Generator().manual_seed(0))),
        "sample_generator",
    ),
    "the prompt too": (
        lambda model, prompt, n, t, p, g: prompt + solution_sample(model, prompt, n, t, p, g),
        "sample_includes_prompt",
    ),
    "one token short": (
        lambda model, prompt, n, t, p, g: solution_sample(model, prompt, n - 1, t, p, g),
        "sample_length",
    ),
    "floats": (
        lambda model, prompt, n, t, p, g: [float(i) for i in solution_sample(model, prompt, n, t, p, g)],
        "sample_ids",
    ),
    "never calls the model": (
        lambda model, prompt, n, t, p, g: [
            int(sample_next_token(torch.zeros(1, 48), t, top_p=p, generator=g)) for _ in range(n)
        ],
        "sample_not_called",
    ),
    "generate": (
        lambda model, prompt, n, t, p, g: generation.generate(
            model, torch.tensor([prompt]), n, temperature=t, top_p=p, generator=g
        )[0, len(prompt) :].tolist(),
        "forbidden",
    ),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("check,answer,hint", bank(check_sample, SAMPLE_MISTAKES))
def test_sample_rejects_wrong_answers(check, answer, hint, lang):
    assert_hint(check(answer, lang=lang), lang, hint, HINTS)


def test_generate_works_again_after_a_check():
    check_sample(SAMPLE_MISTAKES["generate"][0], lang="en")
    model = _tiny_model()
    out = generation.generate(model, torch.tensor([[1, 2]]), 3, generator=torch.Generator().manual_seed(0))
    assert out.shape == (1, 5)


def test_the_check_leaves_the_notebooks_random_state_alone():
    torch.manual_seed(0)
    before = torch.rand(3)
    torch.manual_seed(0)
    check_sample(solution_sample, lang="en")
    assert torch.equal(torch.rand(3), before)


# Issue 46's findings on this checker: each answer below got through before, in both languages.


def _top_p_below(logits, p):
    """Top-p written as "keep while the running mass is at most p": the token that crosses p is dropped."""
    probs = logits.softmax(-1)
    sorted_probs, order = probs.sort(descending=True)
    keep = sorted_probs.cumsum(-1) <= p
    keep[..., 0] = True
    mask = torch.zeros_like(keep).scatter(-1, order, keep)
    return logits.masked_fill(~mask, float("-inf"))


@pytest.mark.parametrize("lang", LANGS)
def test_sample_catches_top_p_that_drops_the_token_crossing_p(lang):
    """The sharp model's likeliest token alone passes p; the flat case makes the boundary count (finding 1)."""
    answer = _loop(draw=lambda logits, t, p, g: _sampled(_top_p_below(logits / t, p).softmax(-1), g))
    assert_hint(check_sample(answer, lang=lang), lang, "sample_top_p_boundary", HINTS)
    assert any(flat for *_, flat in _SAMPLE_CASES)


@pytest.mark.parametrize("lang", LANGS)
def test_sample_catches_a_function_that_changes_the_callers_prompt(lang):
    """The tokens are right, but the caller's list now holds them too (finding 2)."""

    def appends_to_the_prompt(model, prompt_ids, n_new, temperature, top_p, generator):
        cache, seq = model.new_cache(), prompt_ids  # the same list, not a copy
        new = torch.tensor([seq])
        for _ in range(n_new):
            token = int(
                sample_next_token(model(new, cache=cache)[:, -1], temperature, top_p=top_p, generator=generator)
            )
            seq.append(token)
            new = torch.tensor([[token]])
        return seq[-n_new:]

    assert_hint(check_sample(appends_to_the_prompt, lang=lang), lang, "sample_prompt_changed", HINTS)


@pytest.mark.parametrize("lang", LANGS)
def test_sample_switches_off_the_checkers_own_loop(lang):
    """The checker's private _variant draws exactly generate's tokens: off while the student's code runs (finding 7)."""

    def borrowed(model, prompt_ids, n_new, temperature, top_p, generator):
        from minitransformer.exercises import compression as checkers

        return checkers._variant(model, prompt_ids, n_new, temperature, top_p, generator.initial_seed())

    assert_hint(check_sample(borrowed, lang=lang), lang, "forbidden", HINTS)
    model = _tiny_model()
    assert _variant(model, [1, 2], 3, 1.0, 0.9, 0) == _variant(model, [1, 2], 3, 1.0, 0.9, 0)  # back on


# Issue 55's findings on these checkers: each answer below got through before, or a right one was refused, in both
# languages.


def narrow_with_a_float_width(low, high, start, stop, total):
    """The width made a float "to be safe", then `//`: past 2^53 the product is rounded and an end is off by one."""
    width = float(high - low + 1)
    return low + width * start // total, low + width * stop // total - 1


def narrow_with_a_float_width_then_int(low, high, start, stop, total):
    width = float(high - low + 1)
    return int(low + width * start // total), int(low + width * stop // total - 1)


def narrow_right_but_floats(low, high, start, stop, total):
    """Right ends, returned as floats."""
    width = high - low + 1
    return float(low + width * start // total), float(low + width * stop // total - 1)


@pytest.mark.parametrize("lang", LANGS)
def test_narrow_compares_exact_integers_past_2_53(lang):
    assert_hint(check_narrow(narrow_with_a_float_width, lang=lang), lang, "narrow_float", HINTS)
    assert_hint(check_narrow(narrow_with_a_float_width_then_int, lang=lang), lang, "narrow_float", HINTS)
    assert_hint(check_narrow(narrow_right_but_floats, lang=lang), lang, "narrow_not_int", HINTS)
    assert any((high - low + 1) * stop > 2**53 for low, high, _, stop, _ in _NARROW_CASES)


def sample_calling_forward(model, prompt_ids, n_new, temperature, top_p, generator):
    """Right: model.forward(...) instead of model(...)."""
    cache, new, out = model.new_cache(), torch.tensor([prompt_ids]), []
    with torch.no_grad():
        for _ in range(n_new):
            logits = model.forward(new, cache=cache)[:, -1]
            new = sample_next_token(logits, temperature, top_p=top_p, generator=generator)[:, None]
            out.append(int(new))
    return out


@pytest.mark.parametrize("lang", LANGS)
def test_sample_accepts_calling_model_forward(lang):
    assert_correct(check_sample(sample_calling_forward, lang=lang), lang)


def sample_freezing_the_model(model, prompt_ids, n_new, temperature, top_p, generator):
    for p in model.parameters():
        p.requires_grad_(False)  # "no gradients needed here"
    return solution_sample(model, prompt_ids, n_new, temperature, top_p, generator)


def sample_in_float64(model, prompt_ids, n_new, temperature, top_p, generator):
    model.double()  # "more precise"
    return solution_sample(model, prompt_ids, n_new, temperature, top_p, generator)


def sample_in_eval_mode(model, prompt_ids, n_new, temperature, top_p, generator):
    model.eval()
    return solution_sample(model, prompt_ids, n_new, temperature, top_p, generator)


def sample_switching_gradients_off(model, prompt_ids, n_new, temperature, top_p, generator):
    torch.set_grad_enabled(False)
    return solution_sample(model, prompt_ids, n_new, temperature, top_p, generator)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize(
    "answer,hint",
    [
        (sample_freezing_the_model, "model_frozen"),
        (sample_in_float64, "model_dtype"),
        (sample_in_eval_mode, "model_mode"),
        (sample_switching_gradients_off, "grad_mode_left"),
    ],
    ids=lambda x: getattr(x, "__name__", x),
)
def test_sample_sees_what_the_students_code_leaves_behind(answer, hint, lang):
    assert_hint(check_sample(answer, lang=lang), lang, hint, HINTS)
    assert torch.is_grad_enabled()
