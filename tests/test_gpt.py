"""The decoder-only model: GPT-2 equality, causality, padding, the counting corpus, errors."""

from __future__ import annotations

import random

import pytest
import torch

from minitransformer.course.corpus import CountingCorpus
from minitransformer.generation import generate
from minitransformer.gpt import GPT, GPTConfig
from minitransformer.hf_import import from_gpt2
from minitransformer.train import lm_loss, train_gpt


def tiny(**kw) -> GPT:
    torch.manual_seed(0)
    base = dict(vocab_size=40, max_len=64, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0, pad_id=0)
    return GPT(GPTConfig(**{**base, **kw})).eval()


def _gpt2(seed: int = 0, **settings):
    """A random GPT2LMHeadModel from a tiny config (nothing downloaded), with non-trivial LayerNorms and biases."""
    transformers = pytest.importorskip("transformers")
    base = dict(vocab_size=97, n_positions=40, n_embd=48, n_layer=3, n_head=4, bos_token_id=0, eos_token_id=0)
    attn = settings.pop("attn_implementation", None)
    torch.manual_seed(seed)
    config = transformers.GPT2Config(**{**base, **settings})
    if attn is not None:
        config._attn_implementation = attn
    hf = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
            elif "c_attn" in name:
                p.mul_(5)  # scores large enough that their scale matters: attention far from uniform
    return hf


def _agree(hf, tokens, generate_too=False):
    ours = from_gpt2(hf)
    assert not ours.training
    assert ours.num_parameters() == sum(p.numel() for p in hf.parameters())
    with torch.no_grad():
        torch.testing.assert_close(ours(tokens), hf(tokens).logits, atol=1e-5, rtol=1e-5)
        if generate_too:
            greedy = hf.generate(tokens[:, :6], max_new_tokens=12, do_sample=False, pad_token_id=0)
            assert torch.equal(generate(ours, tokens[:, :6], 12, temperature=0), greedy)


@pytest.mark.parametrize("activation", ["gelu_new", "gelu", "relu"])
@pytest.mark.parametrize("tie", [True, False])
def test_equal_to_transformers_gpt2(activation, tie):
    hf = _gpt2(activation_function=activation, tie_word_embeddings=tie)
    _agree(hf, torch.randint(0, 97, (3, 40)), generate_too=True)


# Every GPT2Config setting that changes the function, with the values from_gpt2 carries over exactly.
SUPPORTED = [
    *(dict(activation_function=a) for a in ["gelu_pytorch_tanh", "gelu_python_tanh", "gelu_fast", "gelu_accurate"]),
    dict(activation_function="gelu_python"),
    dict(layer_norm_epsilon=1e-2),
    dict(n_inner=80),
    dict(n_inner=None, n_embd=40, n_head=5),
    dict(tie_word_embeddings=False),
    # transformers' eager attention, its reference: before 5.4 its sdpa path disagreed with it on these two settings
    dict(scale_attn_weights=False, attn_implementation="eager"),
    dict(scale_attn_by_inverse_layer_idx=True, attn_implementation="eager"),
    dict(scale_attn_weights=False, scale_attn_by_inverse_layer_idx=True, attn_implementation="eager"),
    dict(reorder_and_upcast_attn=True, attn_implementation="eager"),
    dict(reorder_and_upcast_attn=True, scale_attn_by_inverse_layer_idx=True, attn_implementation="eager"),
    dict(attn_implementation="eager"),
    dict(attn_implementation="sdpa"),
    dict(resid_pdrop=0.3, embd_pdrop=0.0, attn_pdrop=0.2),  # dropout: off in eval mode on both sides
]


@pytest.mark.parametrize("settings", SUPPORTED, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_every_supported_gpt2_setting_gives_transformers_logits(settings):
    _agree(_gpt2(**settings), torch.randint(0, 97, (2, 17)))


# Edge shapes: batch 1 and more, length 1, odd lengths, the full context, one head, many heads.
SHAPES = [(1, 1, 4), (1, 7, 4), (3, 1, 4), (2, 13, 1), (2, 40, 12), (4, 9, 48)]


@pytest.mark.parametrize("batch, length, heads", SHAPES)
def test_gpt_equals_transformers_on_edge_shapes(batch, length, heads):
    _agree(_gpt2(n_head=heads), torch.randint(0, 97, (batch, length), generator=torch.Generator().manual_seed(length)))


REFUSED = [
    *(
        (dict(activation_function=a), "activation_function")
        for a in ["quick_gelu", "silu", "swish", "gelu_10", "tanh", "sigmoid", "mish", "relu6", "leaky_relu"]
    ),
    (dict(add_cross_attention=True), "add_cross_attention"),
]


@pytest.mark.parametrize("lang", ["es", "en"])
@pytest.mark.parametrize("settings, flag", REFUSED, ids=lambda x: str(x))
def test_unsupported_gpt2_settings_are_refused_naming_the_setting(settings, flag, lang, language):
    hf = _gpt2(**settings)
    language(lang)
    with pytest.raises(ValueError) as info:
        from_gpt2(hf)
    assert flag in str(info.value)
    assert ("no puede representar" if lang == "es" else "cannot represent") in str(info.value)


def test_what_is_not_a_gpt2_lm_head_model_is_refused(language):
    transformers = pytest.importorskip("transformers")
    language("en")
    base = _gpt2()
    with pytest.raises(ValueError, match="GPT2LMHeadModel"):
        from_gpt2(base.transformer)  # the model without its head
    hf = _gpt2()
    hf.transformer.h[0].attn.c_attn.weight = torch.nn.Parameter(torch.zeros(48, 96))  # a head taken out
    with pytest.raises(ValueError, match="c_attn.weight"):
        from_gpt2(hf)
    assert isinstance(base, transformers.GPT2LMHeadModel)


def test_a_float64_gpt2_gives_a_float64_model():
    hf = _gpt2().to(torch.float64)
    ours = from_gpt2(hf)
    assert next(ours.parameters()).dtype == torch.float64
    x = torch.randint(0, 97, (2, 11))
    with torch.no_grad():
        torch.testing.assert_close(ours(x), hf(x).logits, atol=1e-10, rtol=1e-10)


def test_gpt2_small_defaults():
    config = GPTConfig()
    with torch.device("meta"):
        model = GPT(config)
    assert model.num_parameters() == 124_439_808  # GPT-2 small, tied embedding counted once


def test_future_tokens_do_not_change_the_past():
    model = tiny()
    x = torch.randint(1, 40, (2, 12))
    y = x.clone()
    y[:, 7:] = torch.randint(1, 40, (2, 5))
    with torch.no_grad():
        torch.testing.assert_close(model(x)[:, :7], model(y)[:, :7])


def test_left_padding_changes_nothing():
    model = tiny()
    x = torch.randint(1, 40, (1, 9))
    padded = torch.cat([torch.zeros(1, 4, dtype=torch.long), x], dim=1)
    with torch.no_grad():
        torch.testing.assert_close(model(padded)[:, 4:], model(x))


def test_weight_tying_and_init():
    model = tiny()
    assert model.lm_head.weight is model.token.weight
    untied = tiny(tie_output=False)
    assert untied.num_parameters() == model.num_parameters() + 40 * 32


def test_lm_loss_ignores_padding():
    logits = torch.randn(2, 5, 7)
    tokens = torch.tensor([[1, 4, 5, 2, 0], [1, 3, 2, 0, 0]])
    manual = torch.nn.functional.cross_entropy(torch.cat([logits[0, :3], logits[1, :2]]), torch.tensor([4, 5, 2, 3, 2]))
    torch.testing.assert_close(lm_loss(logits, tokens, 0), manual)


def test_counting_corpus_lines_and_validity():
    corpus = CountingCorpus(200)
    line = corpus.line(29, 3, "es")
    assert corpus.decode(line) == "<es> veintinueve , treinta , treinta y uno"
    assert corpus.is_valid(line)
    assert corpus.decode(corpus.line(98, 3, "en")) == "<en> ninety-eight , ninety-nine , one hundred"
    eos, sep = corpus.vocab.eos_id, corpus.sep_id
    word = corpus.vocab.index
    wrong = [
        line[:-1],  # cut short: no <eos>
        corpus.line(29, 1, "es"),  # a single number
        line[:-1] + [sep, word["treinta"], eos],  # not consecutive
        corpus.prompt("es") + [word["twenty"], sep, word["twenty-one"], eos],  # wrong language
        corpus.prompt("es") + [word["treinta"], word["y"], sep, word["treinta"], word["y"], word["uno"], eos],
        line + [word["uno"]],  # something after <eos>
        line[1:],  # no <bos>
    ]
    assert not any(corpus.is_valid(w) for w in wrong)
    padded = [0, 0] + line + [0, 0]
    assert corpus.is_valid(padded)
    rng = random.Random(0)
    batch = corpus.batch(50, rng)
    assert corpus.validity(batch) == 1.0
    assert batch.size(1) <= corpus.longest_line
    prompts = corpus.prompts(10, rng, numbers=2)
    assert bool((prompts[:, -1] == sep).all())


def test_training_learns_the_corpus_quickly():
    # a small run: the loss falls well below its starting value
    corpus = CountingCorpus(40, max_count=4)
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(
            vocab_size=len(corpus.vocab), max_len=32, d_model=32, n_heads=2, n_layers=1, d_ff=64, dropout=0.0, pad_id=0
        )
    )
    rng = random.Random(0)
    losses = train_gpt(model, lambda: corpus.batch(32, rng), 150, lr=1e-2, warmup=10, progress=False)
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:10]) / 10


def test_training_steps_adamw_over_all_tensors_with_the_numbers_of_one_at_a_time(monkeypatch):
    """train_gpt's AdamW steps every tensor in one call (foreach, cheaper): bit for bit what the
    one-tensor-at-a-time loop gives."""
    corpus = CountingCorpus(40, max_count=4)

    def run():
        torch.manual_seed(0)
        config = GPTConfig(vocab_size=len(corpus.vocab), max_len=32, d_model=16, n_heads=2, n_layers=1, d_ff=32)
        model = GPT(config)
        rng = random.Random(0)
        losses = train_gpt(model, lambda: corpus.batch(8, rng), 12, warmup=3, progress=False)
        return losses, list(model.state_dict().values())

    default = run()
    adamw = torch.optim.AdamW
    monkeypatch.setattr(torch.optim, "AdamW", lambda *a, **k: adamw(*a, **{**k, "foreach": False}))
    single = run()
    assert default[0] == single[0]
    assert all(torch.equal(a, b) for a, b in zip(default[1], single[1]))


BAD = [
    (lambda m: m(torch.randint(1, 40, (1, 65))), "max_len", "max_len"),
    (lambda m: generate(m, torch.randint(1, 40, (1, 60)), 10), "contexto", "context"),
    (lambda m: generate(m, torch.randint(1, 40, (1, 5)), 3, top_p=0), "(0, 1]", "(0, 1]"),
    (lambda m: generate(m, torch.randint(1, 40, (1, 5)), 3, top_k=0), "top_k", "top_k"),
    (lambda m: generate(m, torch.randint(1, 40, (1, 5)), 3, temperature=-1), "temperatura", "temperature"),
    (lambda m: generate(m, torch.randint(1, 40, (1, 5)), -1), "max_new_tokens", "max_new_tokens"),
    (lambda m: m(torch.tensor([[1, 2, 40]])), "vocabulario", "vocabulary"),
    (lambda m: m(torch.rand(1, 3)), "enteros", "integer"),
    (lambda m: GPTConfig(d_model=30, n_heads=4), "divisible", "divisible"),
    (lambda m: GPTConfig(n_layers=0), "positivo", "positive"),
    (lambda m: CountingCorpus(1), "max_number", "max_number"),
]


@pytest.mark.parametrize("lang", ["es", "en"])
@pytest.mark.parametrize("call, es, en", BAD)
def test_bad_input_raises_in_the_current_language(lang, call, es, en, language):
    model = tiny()
    language(lang)
    with pytest.raises(ValueError) as info:
        call(model)
    assert (es if lang == "es" else en) in str(info.value)


# --------------------------------------------------------------------------- what the corpus allows


def _next_token_entropy(corpus: CountingCorpus) -> float:
    """The generator's next-token entropy, prefix by prefix (from the lines sharing each prefix), summed
    over a line and divided by the tokens a line predicts: the floor, computed the long way."""
    import math
    from collections import defaultdict

    lines = {tuple(corpus.line(start, count, lang)): q for (lang, start, count), q in corpus.distribution().items()}
    following: dict[tuple, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for line, q in lines.items():
        for t in range(1, len(line)):
            following[tuple(line[:t])][line[t]] += q
    entropy = 0.0
    for nxt in following.values():
        total = sum(nxt.values())  # the probability of reaching this prefix
        entropy -= sum(q * math.log(q / total) for q in nxt.values())
    return entropy / sum(q * (len(line) - 1) for line, q in lines.items())


@pytest.mark.parametrize("held_out", [(), (("es", 3, 2), ("en", 0, 4), ("en", 9, 3))])
def test_the_floor_is_the_generators_next_token_entropy(held_out):
    corpus = CountingCorpus(12, min_count=2, max_count=4, held_out=held_out)
    assert corpus.entropy_per_token() == pytest.approx(_next_token_entropy(corpus), rel=1e-12)
    assert sum(corpus.distribution().values()) == pytest.approx(1.0)


def test_held_out_lines_are_never_drawn_and_the_distinct_share_is_the_expected_one():
    held_out = {("es", 3, 2), ("en", 0, 4), ("en", 9, 3), ("es", 0, 2)}
    corpus = CountingCorpus(12, min_count=2, max_count=4, held_out=held_out)
    rng = random.Random(0)
    drawn = [tuple(corpus.random_line(rng)) for _ in range(3000)]
    held_lines = {tuple(corpus.line(start, count, lang)) for lang, start, count in held_out}
    assert not held_lines & set(drawn)
    assert sum(corpus.distribution(held_out=True).values()) == pytest.approx(1.0)
    assert set(corpus.distribution(held_out=True)) == held_out
    n, trials = 40, 300
    shares = [len({tuple(corpus.random_line(rng)) for _ in range(n)}) / n for _ in range(trials)]
    assert sum(shares) / trials == pytest.approx(corpus.expected_distinct(n), abs=0.01)


def test_corpus_loss_against_the_floor_and_by_hand():
    import math

    from minitransformer.course.counting import corpus_loss

    corpus = CountingCorpus(12, min_count=2, max_count=4, held_out={("es", 3, 2), ("en", 0, 4)})
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=len(corpus.vocab), max_len=32, d_model=16, n_heads=2, n_layers=1, d_ff=32, pad_id=0)
    model = GPT(config).eval()
    for held in (False, True):
        weights = corpus.distribution(held)
        total, tokens = 0.0, 0.0
        for (lang, start, count), q in weights.items():  # one line at a time, no padding
            line = torch.tensor([corpus.line(start, count, lang)])
            with torch.no_grad():
                total += q * lm_loss(model(line), line, None).item() * (line.size(1) - 1)
            tokens += q * (line.size(1) - 1)
        assert corpus_loss(model, corpus, held_out=held) == pytest.approx(total / tokens, rel=1e-5)
    assert corpus_loss(model, corpus) >= corpus.entropy_per_token()
    with torch.no_grad():
        model.lm_head.weight.zero_()  # a uniform model: ln V per token
    assert corpus_loss(model, corpus) == pytest.approx(math.log(len(corpus.vocab)), rel=1e-6)
    assert corpus.held_out_rule_loss() > 0
    with pytest.raises(ValueError):
        CountingCorpus(12, 2, 4).held_out_rule_loss()
    with pytest.raises(ValueError):
        CountingCorpus(12, 2, 4, held_out={("es", 20, 2)})  # not a line of the corpus
