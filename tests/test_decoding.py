"""Greedy decoding and beam search, checked against the maths: rescoring by teacher forcing,
exhaustive search on a tiny vocabulary, and greedy decoding itself."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from minitransformer.data import Vocab
from minitransformer.decoding import (
    _beam,
    _greedy,
    beam_search,
    greedy_decode,
    sequence_log_prob,
    translate,
)
from minitransformer.model import Transformer, TransformerConfig

BOS, EOS, PAD = 1, 2, 0


def random_model(seed: int, V: int = 12, d_model: int = 32) -> Transformer:
    torch.manual_seed(seed)
    config = TransformerConfig(
        src_vocab_size=V, tgt_vocab_size=V, d_model=d_model, n_heads=4, d_ff=64, n_layers=2, dropout=0.1, max_len=40
    )
    model = Transformer(config)
    with torch.no_grad():  # sharper distributions than the initialisation gives: more varied searches
        model.generator.weight.mul_(4.0)
    return model


def random_src(seed: int, B: int = 16, V: int = 12) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, V, (B, 7), generator=g)
    src[::3, 4:] = PAD  # some padding
    return src


@pytest.mark.parametrize("seed", range(3))
def test_greedy_scores_are_the_model_scores(seed):
    model, src = random_model(seed), random_src(seed)
    out = greedy_decode(model, src, BOS, EOS, max_len=12)
    assert out.tokens.shape[0] == src.size(0) and out.scores.shape == (src.size(0),)
    torch.testing.assert_close(out.scores, sequence_log_prob(model, src, out.tokens, BOS), rtol=0, atol=1e-4)
    for row in out.tokens.tolist():  # after <eos> only padding
        if EOS in row:
            assert all(t == PAD for t in row[row.index(EOS) + 1 :])


@pytest.mark.parametrize("seed", range(3))
def test_greedy_takes_the_argmax_at_each_step(seed):
    model, src = random_model(seed).eval(), random_src(seed, B=4)
    out = greedy_decode(model, src, BOS, EOS, max_len=6)
    with torch.no_grad():
        for b in range(src.size(0)):
            prefix = [BOS]
            for t in out.tokens[b].tolist():
                if t == PAD:
                    break
                logits = model(src[b : b + 1], torch.tensor([prefix]))[0, -1]
                logits[[PAD, BOS]] = float("-inf")  # never generated
                assert t == int(logits.argmax())
                prefix.append(t)


@pytest.mark.parametrize("seed", range(4))
def test_beam_size_one_equals_greedy(seed):
    model, src = random_model(seed), random_src(seed)
    greedy = greedy_decode(model, src, BOS, EOS, max_len=12)
    beam = beam_search(model, src, BOS, EOS, beam_size=1, max_len=12, keep_greedy=False)
    assert torch.equal(beam.tokens, greedy.tokens[:, : beam.tokens.size(1)])
    assert (greedy.tokens[:, beam.tokens.size(1) :] == PAD).all()
    torch.testing.assert_close(beam.scores, greedy.scores, rtol=0, atol=1e-5)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("beam_size", [2, 3, 5])
def test_beam_never_scores_below_greedy(seed, beam_size):
    model, src = random_model(seed), random_src(seed)
    greedy = greedy_decode(model, src, BOS, EOS, max_len=12)
    beam = beam_search(model, src, BOS, EOS, beam_size=beam_size, max_len=12)
    # Both scored the same way: by teacher forcing, the model's log p(y | x).
    g = sequence_log_prob(model, src, greedy.tokens, BOS)
    b = sequence_log_prob(model, src, beam.tokens, BOS)
    assert (b >= g - 1e-4).all(), (b - g).min()
    torch.testing.assert_close(beam.scores, b, rtol=0, atol=1e-4)


def test_beam_search_leaves_the_model_mode_alone():
    model, src = random_model(0).train(), random_src(0)
    a = beam_search(model, src, BOS, EOS, beam_size=3, max_len=10)
    b = beam_search(model, src, BOS, EOS, beam_size=3, max_len=10)
    assert model.training  # restored
    assert torch.equal(a.tokens, b.tokens)  # dropout was off during the search


@pytest.mark.parametrize("seed", range(3))
def test_wide_beam_is_exhaustive_search(seed):
    # With a beam as wide as the number of prefixes nothing is pruned: the result is the
    # best sequence of at most max_len tokens, found here by enumerating them all.
    V, max_len = 5, 3
    model, src = random_model(seed, V=V), random_src(seed, B=3, V=V)
    model.eval()
    beam = beam_search(model, src, BOS, EOS, beam_size=V**max_len, max_len=max_len, keep_greedy=False)
    for b in range(src.size(0)):
        best = -math.inf
        tokens = range(EOS, V)  # <pad> and <bos> are never generated
        for length in range(1, max_len + 1):
            for body in itertools.product(tokens, repeat=length - 1):
                for last in tokens:
                    seq = [*body, last]
                    if EOS in seq[:-1]:
                        continue  # nothing follows <eos>
                    if length < max_len and last != EOS:
                        continue  # a shorter sequence is only complete with <eos>
                    score = sequence_log_prob(model, src[b : b + 1], torch.tensor([seq]), BOS).item()
                    best = max(best, score)
        assert beam.scores[b].item() == pytest.approx(best, abs=1e-4)


def textbook_beam(model, src_row: torch.Tensor, K: int, max_len: int) -> tuple[list[int], float]:
    """Beam search for one source in plain Python, as the module docstring states it: the
    K best unfinished prefixes go on; among the K best candidates of a step, those ending in
    <eos> (at the last step, all of them) are finished outputs; stop once the best output
    scores at least as high as every live prefix."""

    def logp(prefix: tuple[int, ...]) -> list[float]:
        logp = torch.log_softmax(model(src_row[None], torch.tensor([[BOS, *prefix]]))[0, -1].double(), dim=-1)
        logp[[PAD, BOS]] = float("-inf")  # never generated
        return logp.tolist()

    alive, best = [((), 0.0)], ((), -math.inf)
    for t in range(1, max_len + 1):
        cands = [(p + (v,), s + lp) for p, s in alive for v, lp in enumerate(logp(p))]
        cands.sort(key=lambda c: -c[1])
        for seq, score in cands[:K]:
            if (seq[-1] == EOS or t == max_len) and score > best[1]:
                best = (seq, score)
        alive = [c for c in cands if c[0][-1] != EOS][:K]
        if best[1] >= alive[0][1]:
            break
    return list(best[0]), best[1]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("beam_size", [2, 3])
def test_beam_is_the_textbook_search(seed, beam_size):
    model, src = random_model(seed).eval(), random_src(seed, B=6)
    out = beam_search(model, src, BOS, EOS, beam_size=beam_size, max_len=6, keep_greedy=False)
    with torch.no_grad():
        for b in range(src.size(0)):
            tokens, score = textbook_beam(model, src[b], beam_size, max_len=6)
            assert out.tokens[b].tolist() == tokens + [PAD] * (out.tokens.size(1) - len(tokens))
            assert out.scores[b].item() == pytest.approx(score, abs=1e-4)


@pytest.mark.parametrize("beam_size", [1, 2, 4])
def test_batched_beam_equals_one_source_at_a_time(beam_size):
    # Sources finish at different steps: those still searching must not disturb the others.
    model, src = random_model(1), random_src(1, B=8)
    out = beam_search(model, src, BOS, EOS, beam_size=beam_size, max_len=10)
    for b in range(src.size(0)):
        one = beam_search(model, src[b : b + 1], BOS, EOS, beam_size=beam_size, max_len=10)
        assert out.tokens[b, : one.tokens.size(1)].tolist() == one.tokens[0].tolist()
        assert (out.tokens[b, one.tokens.size(1) :] == PAD).all()
        torch.testing.assert_close(out.scores[b], one.scores[0], rtol=0, atol=1e-5)


def toy_step_pruning(prefix: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
    """A hand-made next-token distribution in which beam search (K = 2) prunes greedy's path.

    Tokens: 0 pad, 1 bos, 2 eos, 3 a, 4 b, 5 c. From <bos>: a .40, b .35, c .25.
    After "a": a .34, b .33, c .33, and after "a ·" <eos> for sure: greedy writes
    "a a <eos>", probability .136. After "b": a .5, c .5, so "b a" and "b c" (.175 each) beat
    every "a ·" (≤ .136) at step 2 and fill the beam; after them <eos> has .4, and the beam
    ends with "b a <eos>" or "b c <eos>", probability .07.
    """
    probs = torch.full((prefix.size(0), 6), 1e-9)
    for i, p in enumerate(prefix.tolist()):
        body = p[1:]
        if not body:
            probs[i, 3:6] = torch.tensor([0.40, 0.35, 0.25])
        elif body[-1] in (PAD, EOS):
            probs[i, EOS] = 1.0
        elif body == [3]:
            probs[i, 3:6] = torch.tensor([0.34, 0.33, 0.33])
        elif body == [4]:
            probs[i, 3], probs[i, 5] = 0.5, 0.5
        elif body == [5]:
            probs[i, 3] = 1.0
        elif body[0] == 3:
            probs[i, EOS] = 1.0
        else:
            probs[i, 2:6] = torch.tensor([0.4, 0.2, 0.2, 0.2])
    return torch.log(probs / probs.sum(-1, keepdim=True))


def test_beam_search_can_prune_the_greedy_path():
    cpu = torch.device("cpu")
    greedy = _greedy(toy_step_pruning, 1, BOS, EOS, PAD, 5, cpu)
    plain = _beam(toy_step_pruning, 1, 2, BOS, EOS, PAD, 5, cpu)
    assert greedy.tokens[0].tolist() == [3, 3, EOS]
    assert greedy.scores[0].item() == pytest.approx(math.log(0.40 * 0.34), abs=1e-5)
    assert plain.tokens[0].tolist()[0] == 4  # "b …"
    assert plain.scores[0].item() == pytest.approx(math.log(0.35 * 0.5 * 0.4), abs=1e-5)
    assert plain.scores[0] < greedy.scores[0]  # plain beam search lost greedy's sequence
    wide = _beam(toy_step_pruning, 1, 4, BOS, EOS, PAD, 5, cpu)
    assert wide.scores[0] >= greedy.scores[0] - 1e-6  # a wider beam keeps it here


def test_keep_greedy_restores_the_guarantee(monkeypatch):
    import minitransformer.decoding as dec

    model, src = random_model(0), random_src(0, B=1)
    monkeypatch.setattr(dec, "_step_fn", lambda model, src, bos_id, repeat=1: toy_step_pruning)
    with_greedy = dec.beam_search(model, src, BOS, EOS, beam_size=2, max_len=5)
    plain = dec.beam_search(model, src, BOS, EOS, beam_size=2, max_len=5, keep_greedy=False)
    greedy = dec.greedy_decode(model, src, BOS, EOS, max_len=5)
    assert plain.scores[0] < greedy.scores[0]
    assert with_greedy.scores[0] == greedy.scores[0]
    assert with_greedy.tokens[0].tolist()[:3] == greedy.tokens[0].tolist()[:3] == [3, 3, EOS]


def test_translate_returns_words():
    V = 12
    model = random_model(0, V=V)
    vocab = Vocab([f"w{i}" for i in range(V - 4)])
    out = translate(model, ["w1 w2 w3", "w4"], vocab, vocab, beam_size=1)
    out_beam = translate(model, ["w1 w2 w3", "w4"], vocab, vocab, beam_size=3)
    assert len(out) == len(out_beam) == 2
    assert all(w in vocab.tokens for s in out + out_beam for w in s.split())
