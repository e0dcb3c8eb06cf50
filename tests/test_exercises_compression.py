"""The checkers of notebook 12 accept the worked solutions (also pasted into a fresh interpreter) and other right
answers, and reject, without crashing, the wrong answers students write, naming the mistake in both languages."""

from __future__ import annotations

import bz2
import gzip
import math

import numpy as np
import pytest
import torch
from feedback_asserts import (
    assert_correct,
    assert_hint,
    bank,
)

from minitransformer import generation
from minitransformer.exercises.compression import (
    _BPB_CASES,
    _COND_CASES,
    _SAMPLE_CASES,
    HINTS,
    _reference,
    _sample_mistakes,
    _tiny_model,
    _variant,
    check_bits_per_byte,
    check_conditional_bits,
    check_sample,
)
from minitransformer.exercises.registry import exercises
from minitransformer.exercises.solutions.nb12 import (
    solution_sample,
)
from minitransformer.sampling import next_token_probs, sample_next_token, top_p_filter

LANGS = ["es", "en"]


def test_the_exercises_are_registered_in_notebook_order():
    names = [n for n in exercises() if n.startswith("12.")]
    assert names == ["12.bits_per_byte", "12.conditional_compression", "12.sample_with_cache"]


# --- 12.bits_per_byte ------------------------------------------------------------------------------


def test_a_case_counts_characters_and_bytes_differently():
    """The mistake "characters instead of bytes" can only show where they differ, and the first case is ASCII."""
    assert len(_BPB_CASES[0][2]) == len(_BPB_CASES[0][2].encode())
    assert any(len(text) != len(text.encode("utf-8")) for _, _, text in _BPB_CASES)
    assert all(tokens < len(text) for _, tokens, text in _BPB_CASES)  # tokens ≠ characters ≠ bytes


def bpb_counting_bytes_by_hand(nats_per_token, n_tokens, text):
    n_bytes = sum(len(ch.encode("utf-8")) for ch in text)
    return np.float64(nats_per_token * n_tokens / n_bytes * math.log2(math.e))


def bpb_as_tensor(nats_per_token, n_tokens, text):
    return torch.tensor(nats_per_token * n_tokens / len(bytes(text, "utf-8"))) / math.log(2)


@pytest.mark.parametrize("lang", LANGS)
def test_bits_per_byte_accepts_other_right_answers(lang):
    assert_correct(check_bits_per_byte(bpb_counting_bytes_by_hand, lang=lang), lang)
    assert_correct(check_bits_per_byte(bpb_as_tensor, lang=lang), lang)


BPB_MISTAKES = {
    "times ln 2": (lambda nats, n, text: nats * n * math.log(2) / len(text.encode()), "bpb_times_ln2"),
    "divides by log2 e": (lambda nats, n, text: nats * n / math.log2(math.e) / len(text.encode()), "bpb_times_ln2"),
    "log10 of e": (lambda nats, n, text: nats * n * math.log10(math.e) / len(text.encode()), "bpb_log10"),
    "divides by log10 2": (lambda nats, n, text: nats * n / math.log10(2) / len(text.encode()), "bpb_log10"),
    "nats per byte": (lambda nats, n, text: nats * n / len(text.encode()), "bpb_nats"),
    "bits per token": (lambda nats, n, text: nats / math.log(2), "bpb_per_token"),
    "total bits": (lambda nats, n, text: nats * n / math.log(2), "bpb_total"),
    "bytes over tokens": (lambda nats, n, text: nats * len(text.encode()) / n / math.log(2), "bpb_swapped"),
    "characters": (lambda nats, n, text: nats * n / math.log(2) / len(text), "bpb_characters"),
    "divides by 8": (lambda nats, n, text: nats * n / math.log(2) / len(text.encode()) / 8, "bpb_eight"),
    "times 8": (lambda nats, n, text: nats * n / math.log(2) * 8 / len(text.encode()), "bpb_eight"),
    "rounded": (lambda nats, n, text: round(nats * n / math.log(2) / len(text.encode())), "bpb_rounded"),
    "two decimals": (lambda nats, n, text: round(nats * n / math.log(2) / len(text.encode()), 2), "bpb_rounded"),
    "floor division": (lambda nats, n, text: nats * n // len(text.encode()) / math.log(2), "bpb_rounded"),
    "tokens // bytes": (lambda nats, n, text: nats * (n // len(text.encode())) / math.log(2), "bpb_rounded"),
    "something else": (lambda nats, n, text: 0.5, "bpb_other"),
    "a string": (lambda nats, n, text: "1.2 bits", "not_a_number"),
    "infinite": (lambda nats, n, text: math.inf, "nan"),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("check,answer,hint", bank(check_bits_per_byte, BPB_MISTAKES))
def test_bits_per_byte_rejects_wrong_answers(check, answer, hint, lang):
    assert_hint(check(answer, lang=lang), lang, hint, HINTS)


@pytest.mark.parametrize("lang", LANGS)
def test_bits_per_byte_characters_hint_shows_the_counts_with_decimal_commas(lang):
    fb = check_bits_per_byte(BPB_MISTAKES["characters"][0], lang=lang)
    text = _BPB_CASES[1][2]
    assert f"= {len(text)}" in fb.message and str(len(text.encode())) in fb.message
    fb = check_bits_per_byte(lambda *a: 1.25, lang=lang)
    assert ("1,25" if lang == "es" else "1.25") in fb.message and ("3,17" if lang == "es" else "3.17") in fb.message


# --- 12.conditional_compression --------------------------------------------------------------------


def cond_with_sizes(compress, context, held):
    with_context, alone = compress(context + held), compress(context)
    return torch.tensor(8.0) * (len(with_context) - len(alone)) / len(held)


@pytest.mark.parametrize("lang", LANGS)
def test_conditional_bits_accepts_other_right_answers(lang):
    assert_correct(check_conditional_bits(cond_with_sizes, lang=lang), lang)
    assert_correct(
        check_conditional_bits(lambda c, x, y: 8 * (len(c(b"".join([x, y]))) - len(c(x))) / len(y), lang=lang), lang
    )


def test_the_cases_use_three_compressors_and_a_text_whose_characters_are_not_its_bytes():
    assert {name for _, name, _, _ in _COND_CASES} == {"gzip", "bz2", "xz"}
    assert any(len(held.decode()) != len(held) for _, _, _, held in _COND_CASES)
    for compress, *_ in _COND_CASES:  # deterministic: the same bytes every time
        assert compress(b"abc" * 50) == compress(b"abc" * 50)


def _extra(compress, context, held):
    return len(compress(context + held)) - len(compress(context))


COND_MISTAKES = {
    "no context": (lambda c, x, y: len(c(y)) * 8 / len(y), "cond_no_context"),
    "held first": (lambda c, x, y: (len(c(y + x)) - len(c(x))) * 8 / len(y), "cond_order"),
    "no subtraction": (lambda c, x, y: len(c(x + y)) * 8 / len(y), "cond_no_subtract"),
    "whole rate": (lambda c, x, y: len(c(x + y)) * 8 / len(x + y), "cond_no_subtract"),
    "subtracts held": (lambda c, x, y: (len(c(x + y)) - len(c(y))) * 8 / len(y), "cond_subtracts_held"),
    "no times 8": (lambda c, x, y: _extra(c, x, y) / len(y), "cond_bits"),
    "divides by 8": (lambda c, x, y: _extra(c, x, y) / 8 / len(y), "cond_bits"),
    "whole length": (lambda c, x, y: _extra(c, x, y) * 8 / len(x + y), "cond_whole_length"),
    "characters": (lambda c, x, y: _extra(c, x, y) * 8 / len(y.decode()), "cond_held_characters"),
    "own gzip": (lambda c, x, y: _extra(gzip.compress, x, y) * 8 / len(y), "cond_own_compressor"),
    "floor division": (lambda c, x, y: _extra(c, x, y) * 8 // len(y), "cond_rounded"),
    "rounded": (lambda c, x, y: round(_extra(c, x, y) * 8 / len(y), 1), "cond_rounded"),
    "decodes the texts": (lambda c, x, y: _extra(c, x.decode(), y.decode()) * 8 / len(y), "cond_str_bytes"),
    "str + bytes": (lambda c, x, y: len(c(x + y.decode())) * 8 / len(y), "cond_str_bytes"),
    "encodes bytes": (lambda c, x, y: _extra(c, x.encode(), y.encode()) * 8 / len(y), "cond_str_bytes"),
    "something else": (lambda c, x, y: 3.0, "cond_other"),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("check,answer,hint", bank(check_conditional_bits, COND_MISTAKES))
def test_conditional_bits_rejects_wrong_answers(check, answer, hint, lang):
    assert_hint(check(answer, lang=lang), lang, hint, HINTS)


def test_own_compressor_names_the_compressor():
    fb = check_conditional_bits(COND_MISTAKES["own gzip"][0], lang="en")
    assert "bz2" in fb.message


def test_bz2_is_a_compressor_of_its_own():
    assert _extra(bz2.compress, b"abc" * 30, b"abd" * 5) != _extra(gzip.compress, b"abc" * 30, b"abd" * 5)


# --- 12.sample_with_cache --------------------------------------------------------------------------


def test_the_checkers_reference_is_generate_and_each_mistake_shows_in_some_case():
    """Every mistake gives other tokens than generate in some case, and in the first such case no mistake listed
    before it gives the same tokens (so diagnose names it)."""
    model = _tiny_model()
    rights = [_reference(model, *case) for case in _SAMPLE_CASES]
    assert rights == [_variant(model, *case) for case in _SAMPLE_CASES]  # the mistakes' loop, without a mistake
    banks = [_sample_mistakes(model, *case) for case in _SAMPLE_CASES]
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
    "model.forward": (
        lambda model, prompt, n, t, p, g: solution_sample(
            type("Bare", (), {"new_cache": model.new_cache, "__call__": lambda s, *a, **k: model.forward(*a, **k)})(),
            prompt,
            n,
            t,
            p,
            g,
        ),
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
