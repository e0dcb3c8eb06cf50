"""Byte-level BPE against Hugging Face ``tokenizers``: the same pieces, merges and ids on the
course's corpus and on random text; exact round-trips on arbitrary Unicode; clear errors."""

from __future__ import annotations

import json
import random
import re
import sys
import unicodedata
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from minitransformer import i18n
from minitransformer.course.prose import prose
from minitransformer.tokenizer import (
    BYTE_CHAR,
    BYTE_ID,
    BYTE_ORDER,
    ByteBPE,
    count_pairs,
    count_words,
    merge,
    pretokenize,
    token_stats,
    train_bpe,
)

ROOT = Path(__file__).resolve().parents[1]

# Strings every tokenizer must handle: accents, «¿¡», emoji (a ZWJ family, a flag, a skin tone),
# CJK, control characters, NFC and NFD, spaces of every kind, contractions, numbers, nothing.
EXAMPLES = [
    "",
    " ",
    "año",
    "¿Qué año es? ¡Feliz año!",
    "El niño pidió más pingüinos: «¡ya!»",
    unicodedata.normalize("NFC", "año acción"),
    unicodedata.normalize("NFD", "año acción"),
    "👩‍👩‍👧 👍🏽 🇪🇸 🙂",
    "中文和日本語のテキスト、한국어",
    "tab\there\r\nnew line\x00\x07\x1b[0m\x7f",
    "  many   spaces\u00a0\u2009and\u3000more  ",
    "don't we'll they're I'm it's 's",
    "3,14 1 000 2017 ½ ² ٣",
    "x₁ + αβγ = √2 · ∞ → ≈",
    "\U0001d54f\U0001f600\U000e0041",
]


def hf_tokenizer(text: str, vocab_size: int) -> Tokenizer:
    """``tokenizers``' byte-level BPE trained on ``text``: no prefix space, the 256 bytes first."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([text], trainer=trainer)
    return tok


def as_chars(data: bytes) -> str:
    return "".join(BYTE_CHAR[b] for b in data)


def merges_as_text(ours: ByteBPE) -> list[tuple[str, str]]:
    return [(as_chars(ours.vocab[a]), as_chars(ours.vocab[b])) for (a, b), _ in ours.merges]


def hf_merges(tok: Tokenizer) -> list[tuple[str, str]]:
    merges = json.loads(tok.to_str())["model"]["merges"]
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in merges]


def random_text(rng: random.Random, n: int, assigned_only: bool) -> str:
    """Characters from every plane: ASCII, spaces and controls, Latin, any code point but surrogates."""
    out = []
    while len(out) < n:
        r = rng.random()
        if r < 0.3:
            c = chr(rng.randint(0, 0x7F))
        elif r < 0.4:
            c = rng.choice(" \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u1680\u2000\u2028\u2029\u202f\u3000\u200d\ufeff")
        elif r < 0.6:
            c = chr(rng.randint(0x80, 0x2FFF))
        else:
            c = chr(rng.choice([rng.randint(0x3000, 0xD7FF), rng.randint(0xE000, 0x10FFFF)]))
        if assigned_only and unicodedata.category(c) == "Cn":
            continue
        out.append(c)
    return "".join(out)


@pytest.fixture(scope="module")
def corpora() -> dict[str, str]:
    es, en = prose("es", "train"), prose("en", "train")
    return {"es": es, "en": en, "both": es + "\n\n" + en}


# --------------------------------------------------------------------------- bytes and pieces


def test_the_byte_table_is_gpt2s():
    assert sorted(BYTE_ORDER) == list(range(256))
    assert BYTE_ORDER[:3] == (ord("!"), ord('"'), ord("#")) and BYTE_ID[ord(" ")] == 220
    assert set(BYTE_CHAR.values()) == set(pre_tokenizers.ByteLevel.alphabet())
    assert [BYTE_CHAR[b] for b in "ñ ".encode()] == ["Ã", "±", "Ġ"]
    assert all(BYTE_CHAR[b] == chr(b) for b in BYTE_ORDER[:188])  # the printable bytes are themselves


def test_pieces_are_tokenizers_pieces():
    hf = pre_tokenizers.ByteLevel(add_prefix_space=False)
    rng = random.Random(0)
    texts = EXAMPLES + [prose("es", "test"), prose("en", "test")]
    texts += [random_text(rng, rng.randint(0, 30), assigned_only=True) for _ in range(500)]
    for text in texts:
        ours = pretokenize(text)
        assert "".join(ours) == text
        assert [as_chars(p.encode()) for p in ours] == [p for p, _ in hf.pre_tokenize_str(text)], text


@pytest.mark.slow
def test_pieces_agree_on_every_letter_digit_and_space_python_knows():
    """``regex``'s Unicode tables must know what ``unicodedata`` knows (Unicode 15.1 on Python 3.13): regex
    2022.10.31 (Unicode 15.0) splits the CJK ideographs added in 15.1 unlike ``tokenizers``."""
    chars = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    text = "".join(f"a{c}1{c} " for c in chars if unicodedata.category(c)[0] in "LNZ")
    theirs = [p for p, _ in pre_tokenizers.ByteLevel(add_prefix_space=False).pre_tokenize_str(text)]
    assert [as_chars(p.encode()) for p in pretokenize(text)] == theirs


# --------------------------------------------------------------------------- training against tokenizers


@pytest.mark.parametrize("corpus", ["es", "en", pytest.param("both", marks=pytest.mark.slow)])
def test_same_merges_and_ids_as_tokenizers_on_the_course_prose(corpora, corpus):
    text = corpora[corpus]
    for size in (1000, 100_000):  # a few hundred merges, and every merge there is
        ours, theirs = train_bpe(text, size), hf_tokenizer(text, size)
        assert merges_as_text(ours) == hf_merges(theirs)
        assert ours.vocab_size == theirs.get_vocab_size()
        assert {as_chars(t): i for i, t in enumerate(ours.vocab)} == theirs.get_vocab()
        for probe in EXAMPLES + [prose("es", "test"), prose("en", "test")]:
            assert ours.encode(probe) == theirs.encode(probe).ids
    assert size > ours.vocab_size > 3000  # the whole corpus: every piece ends as one token


def test_same_ids_as_tokenizers_on_random_unicode(corpora):
    ours, theirs = train_bpe(corpora["both"], 2000), hf_tokenizer(corpora["both"], 2000)
    rng = random.Random(1)
    for _ in range(300):
        text = random_text(rng, rng.randint(0, 40), assigned_only=True)
        ids = ours.encode(text)
        assert ids == theirs.encode(text).ids, text
        assert ours.decode(ids) == theirs.decode(ids) == text


def test_same_merges_as_tokenizers_on_small_random_corpora():
    """Short texts over a few letters: many ties, runs like «aaaa», merges that reuse merges."""
    rng = random.Random(2)
    for _ in range(150):
        alphabet = rng.choice(["ab", "abc", "aab ", "abcd ", "añ b", "xy\nz"])
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        size = rng.randint(256, 300)
        ours, theirs = train_bpe(text, size), hf_tokenizer(text, size)
        assert merges_as_text(ours) == hf_merges(theirs), text
        probe = text[::-1] + " " + text
        assert ours.encode(probe) == theirs.encode(probe).ids


def test_ties_go_to_the_smallest_pair_of_ids():
    # every pair occurs once: the merges follow the ids (left id first, then right id)
    ours = train_bpe("ba,dc,cb", 259)
    d, c, b, a = (BYTE_ID[ord(x)] for x in "dcba")
    assert [pair for pair, _ in ours.merges] == [(b, a), (c, b), (d, c)]
    assert [new for _, new in ours.merges] == [256, 257, 258]
    assert ours.encode("dcba") == [258, 256]  # (d, c) then (b, a): the first merge learned goes first
    assert merges_as_text(ours) == hf_merges(hf_tokenizer("ba,dc,cb", 259))


def test_a_smaller_vocabulary_is_the_first_merges(corpora):
    full = train_bpe(corpora["es"], 3000)
    for size in (256, 257, 600, 2999, 3000):
        small = full.truncated(size)
        assert small == train_bpe(corpora["es"], size)
        assert small.vocab_size == size and len(small.merges) == size - 256


def test_counting_and_merging():
    assert count_pairs([[1, 2, 3], [2, 3], [5, 5, 5]]) == {(1, 2): 1, (2, 3): 2, (5, 5): 2}
    assert count_pairs({(1, 2, 1, 2): 3}) == {(1, 2): 6, (2, 1): 3}
    assert merge([5, 5, 5], (5, 5), 9) == [9, 5]
    assert merge([1, 2, 3, 1, 2], (1, 2), 9) == [9, 3, 9]
    assert merge([], (1, 2), 9) == []


# --------------------------------------------------------------------------- round trips


def test_every_example_round_trips_and_nfc_nfd_stay_apart(corpora):
    tok = train_bpe(corpora["both"], 1500)
    for text in EXAMPLES:
        assert tok.decode(tok.encode(text)) == text
    nfc, nfd = (unicodedata.normalize(form, "año") for form in ("NFC", "NFD"))
    assert nfc != nfd and tok.encode(nfc) != tok.encode(nfd)
    assert tok.encode("") == [] and tok.decode([]) == ""


@pytest.mark.parametrize("size", [256, 700, 3000])
def test_round_trip_on_arbitrary_unicode(corpora, size):
    """Any string of code points (unassigned ones too; surrogates cannot be UTF-8) comes back exactly."""
    tok = train_bpe(corpora["both"], size)
    rng = random.Random(size)
    for _ in range(400):
        text = random_text(rng, rng.randint(0, 60), assigned_only=False)
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        assert all(0 <= i < tok.vocab_size for i in ids)
        assert b"".join(tok.token_bytes(ids)) == text.encode("utf-8")


def test_decoding_cut_characters_is_tokenizers_replacement(corpora):
    ours, theirs = train_bpe(corpora["es"], 600), hf_tokenizer(corpora["es"], 600)
    cut = [BYTE_ID[0xC3], BYTE_ID[ord("a")], BYTE_ID[0xF0], BYTE_ID[0x9F], BYTE_ID[ord("b")], BYTE_ID[0xB1]]
    assert ours.decode(cut) == theirs.decode(cut) == "\ufffda\ufffdb\ufffd"
    assert ours.pieces([BYTE_ID[0xC3], BYTE_ID[0xB1]]) == ["\\xc3", "\\xb1"]


def test_save_and_load(tmp_path, corpora):
    tok = train_bpe(corpora["en"], 800)
    loaded = ByteBPE.load(tok.save(tmp_path / "bpe.json"))
    assert loaded == tok and loaded.encode(EXAMPLES[3]) == tok.encode(EXAMPLES[3])


# --------------------------------------------------------------------------- bad input


BAD = {
    "text that is not a str": (lambda tok: tok.encode(b"bytes"), "debe ser un str", "must be a str"),
    "training text that is not a str": (lambda tok: train_bpe(["a", "b"], 300), "debe ser un str", "must be a str"),
    "a lone surrogate": (lambda tok: tok.encode("a\ud800b"), "sustituto suelto", "lone surrogate"),
    "a vocabulary below 256": (lambda tok: train_bpe("abc", 255), "al menos 256", "at least 256"),
    "a vocabulary that is not an int": (lambda tok: train_bpe("abc", 300.0), "al menos 256", "at least 256"),
    "a vocabulary that is a bool": (lambda tok: train_bpe("abc", True), "al menos 256", "at least 256"),
    "a larger truncation": (lambda tok: tok.truncated(tok.vocab_size + 1), "sin entrenar más", "without more training"),
    "an unknown id": (lambda tok: tok.decode([3, tok.vocab_size]), "no es un token", "is not a token"),
    "a negative id": (lambda tok: tok.decode([-1]), "no es un token", "is not a token"),
    "a float id": (lambda tok: tok.decode([2.0]), "no es un token", "is not a token"),
    "ids as a string": (lambda tok: tok.decode("12"), "lista de enteros", "list of integers"),
    "an unknown part": (lambda tok: prose("es", "validation"), "'train'", "'train'"),
}


@pytest.mark.parametrize("mistake", sorted(BAD))
def test_bad_input_is_a_clear_error_in_both_languages(mistake, language):
    make, es_word, en_word = BAD[mistake]
    tok = train_bpe("el año que viene", 270)
    messages = {}
    for lang in ("es", "en"):
        language(lang)
        with pytest.raises(i18n.CourseError) as raised:
            make(tok)
        messages[lang] = str(raised.value)
    assert es_word in messages["es"] and en_word in messages["en"]
    assert messages["es"] != messages["en"]


def test_decode_takes_a_tensor_of_ids():
    torch = pytest.importorskip("torch")
    tok = train_bpe("el año que viene", 270)
    ids = tok.encode("el año")
    assert tok.decode(torch.tensor(ids)) == "el año"


# --------------------------------------------------------------------------- the corpus


def test_the_corpus_is_the_courses_prose_split_by_notebook():
    for lang, mark in (("es", "¿"), ("en", "the")):
        everything, train, test = prose(lang), prose(lang, "train"), prose(lang, "test")
        assert len(everything.encode()) > 100_000 and mark in everything
        assert everything == train + "\n\n" + test
        assert len(train) > 7 * len(test) > 0
        text = (ROOT / "src/minitransformer/corpora" / f"prose_{lang}.txt").read_text(encoding="utf-8")
        assert re.findall(r"^§ (\d\d)$", text, re.M) == [f"{n:02d}" for n in range(11)]
    assert "¿" not in prose("en") and "ñ" in prose("es")
    # what the tool leaves out: code, formulas it cannot write as text, addresses, Markdown's marks
    for lang in ("es", "en"):
        assert not re.search(r"`|\$|https?:|\*\*|^#|\\[a-z]+", prose(lang), re.M)


def test_the_corpus_tool_keeps_the_sentences():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from make_prose_corpus import prose as clean
    finally:
        sys.path.remove(str(ROOT / "tools"))
    markdown = (
        "## 1. Título\n\nUna **frase** con `código`, una fórmula $d_\\text{model} = 512$ y otra\n"
        "$\\frac{a}{b}$, un [enlace](https://example.org) y ![img](img/x.png).\n\n"
        "```python\nx = 1\n```\n\n| a | b |\n| --- | --- |\n\n- un punto\n- otro"
    )
    assert clean(markdown) == (
        "1. Título\n\nUna frase con, una fórmula d_model = 512 y otra, un enlace y.\n\nun punto otro"
    )


def test_the_corpus_is_what_the_tool_makes_of_the_sources():
    """A frozen snapshot: the prose may have been edited since, but most paragraphs are still the sources'."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from make_prose_corpus import corpus
    finally:
        sys.path.remove(str(ROOT / "tools"))
    for lang in ("es", "en"):
        today = set(corpus(lang).split("\n\n"))
        shipped = prose(lang).split("\n\n")
        assert sum(p in today for p in shipped) > 0.8 * len(shipped)


def test_the_corpus_ships_with_the_package():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"corpora/*.txt"' in text


def test_token_stats_and_words():
    assert count_words("El año 2017, ¿verdad? x_1") == 4  # El, año, verdad, x: digits are not words
    tok = train_bpe("", 256)
    stats = token_stats(tok.encode, "año y")
    assert (stats.tokens, stats.words, stats.bytes) == (6, 2, 6)
    assert stats.tokens_per_word == 3 and stats.bytes_per_token == 1
