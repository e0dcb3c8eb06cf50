"""Byte-level BPE against Hugging Face ``tokenizers``: the same pieces, merges and ids on the
course's corpus and on random text, with special tokens too, and from GPT-2's files; exact
round-trips on arbitrary Unicode; streaming equal to the whole text; the tie rules against a
plain reference; clear errors."""

from __future__ import annotations

import base64
import importlib.util
import json
import random
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from minitransformer import i18n
from minitransformer.course.prose import prose, snapshot_date
from minitransformer.tokenizer import (
    BYTE_CHAR,
    BYTE_ID,
    BYTE_ORDER,
    CACHE_SIZE,
    PATTERN,
    TIES,
    ByteBPE,
    count_pairs,
    count_words,
    merge,
    pretokenize,
    token_stats,
    train_bpe,
    viterbi_split,
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


# tokenizers' byte-level BPE trained on a text: no prefix space, the 256 bytes first (the benchmark's peer).
_spec = importlib.util.spec_from_file_location("benchmark_tokenizer", ROOT / "benchmarks" / "tokenizer.py")
_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bench)
hf_tokenizer = _bench.hf_train


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


@pytest.mark.parametrize(
    "size", [np.int64(300), np.int32(300), np.uint16(300), np.array(300), torch.tensor(300)], ids=repr
)
def test_vocab_size_is_any_integer_as_tokenizers_takes_it(size):
    """A vocabulary size is any integer (``operator.index``): numpy's and torch's too, as ``tokenizers`` takes them;
    the same merges as with the int, and the same truncation."""
    text = "el año que viene, el niño y el ñandú comen; el año que viene"
    ours = train_bpe(text, size)
    assert ours == train_bpe(text, 300) and ours.vocab_size > 280
    assert merges_as_text(ours) == hf_merges(hf_tokenizer(text, size))  # tokenizers accepts the same size
    assert ours.truncated(np.int64(280)) == ours.truncated(280)
    assert train_bpe(text, size, special_tokens=["<eos>"]) == train_bpe(text, 300, special_tokens=["<eos>"])


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
    "a vocabulary that is a numpy float": (
        lambda tok: train_bpe("abc", np.float64(300.0)),
        "al menos 256",
        "at least 256",
    ),
    "a vocabulary that is a numpy bool": (lambda tok: train_bpe("abc", np.bool_(True)), "al menos 256", "at least 256"),
    "a vocabulary that is a float tensor": (
        lambda tok: train_bpe("abc", torch.tensor(300.0)),
        "al menos 256",
        "at least 256",
    ),
    "a vocabulary that is a list": (lambda tok: train_bpe("abc", [300]), "al menos 256", "at least 256"),
    "a larger truncation": (lambda tok: tok.truncated(tok.vocab_size + 1), "sin entrenar más", "without more training"),
    "an unknown id": (lambda tok: tok.decode([3, tok.vocab_size]), "no es un token", "is not a token"),
    "a negative id": (lambda tok: tok.decode([-1]), "no es un token", "is not a token"),
    "a float id": (lambda tok: tok.decode([2.0]), "no es un token", "is not a token"),
    "ids as a string": (lambda tok: tok.decode("12"), "lista de enteros", "list of integers"),
    "an unknown part": (lambda tok: prose("es", "validation"), "'train'", "'train'"),
    "a numpy float id": (lambda tok: tok.decode(np.array([2.5])), "son enteros", "are integers"),
    "a numpy bool id": (lambda tok: tok.decode([np.True_]), "son enteros", "are integers"),
    "an unknown tie rule": (lambda tok: train_bpe("abc", 300, tie="smallest"), "tie debe ser", "tie must be"),
    "special tokens as one string": (
        lambda tok: train_bpe("abc", 300, special_tokens="<eos>"),
        "lista de textos",
        "list of strings",
    ),
    "an empty special token": (lambda tok: train_bpe("abc", 300, special_tokens=[""]), "no vacío", "non-empty"),
    "a special token twice": (lambda tok: train_bpe("abc", 300, special_tokens=["<a>", "<a>"]), "dos veces", "twice"),
    "no room for the special tokens": (
        lambda tok: train_bpe("abc", 256, special_tokens=["<a>"]),
        "al menos 257",
        "at least 257",
    ),
    "a special token's text in the input": (
        lambda tok: tok.encode("a<eos>b"),
        "contiene el token especial '<eos>'",
        "contains the special token '<eos>'",
    ),
    "the same, read in chunks": (
        lambda tok: list(tok.encode_iterable(["a<e", "os>b"])),
        "contiene el token especial '<eos>'",
        "contains the special token '<eos>'",
    ),
    "an unknown allowed special token": (
        lambda tok: tok.encode("a", allowed_special={"<pad>"}),
        "no es un token especial",
        "is not a special token",
    ),
    "an allowed special token of no tokenizer": (
        lambda tok: train_bpe("abc", 260).encode("a", allowed_special={"<bos>"}),
        "no es un token especial",
        "is not a special token",
    ),
    "allowed_special as a string": (
        lambda tok: tok.encode("a", allowed_special="<bos>"),
        "'all' o un conjunto",
        "'all' or a set",
    ),
    "bytes that are not UTF-8": (lambda tok: list(tok.encode_iterable([b"a\xff"])), "no son UTF-8", "not valid UTF-8"),
    "bytes that end inside a character": (
        lambda tok: list(tok.encode_iterable([b"a\xc3"])),
        "en mitad de un carácter",
        "inside a UTF-8 character",
    ),
    "a stream decoder fed text": (lambda tok: tok.stream_decoder().feed("12"), "lista de enteros", "list of integers"),
    "a text no piece covers": (
        lambda tok: viterbi_split("abd", {"a": -1.0, "b": -1.0}),
        "ningún trozo del vocabulario cubre",
        "no piece of the vocabulary covers",
    ),
    "log_prob that is not a dictionary": (lambda tok: viterbi_split("a", [("a", -1.0)]), "diccionario", "dictionary"),
    "a log probability that is a string": (
        lambda tok: viterbi_split("a", {"a": "-1"}),
        "textos a números",
        "strings to numbers",
    ),
    "a log probability that is NaN": (lambda tok: viterbi_split("a", {"a": float("nan")}), "de −∞ a 0", "from −∞ to 0"),
}


def messages_of(make: Callable[[], object], language) -> dict[str, str]:
    """The error ``make()`` raises, in each language."""
    messages = {}
    for lang in ("es", "en"):
        language(lang)
        with pytest.raises(i18n.CourseError) as raised:
            make()
        messages[lang] = str(raised.value)
    assert messages["es"] != messages["en"]
    return messages


@pytest.mark.parametrize("mistake", sorted(BAD))
def test_bad_input_is_a_clear_error_in_both_languages(mistake, language):
    make, es_word, en_word = BAD[mistake]
    tok = train_bpe("el año que viene", 272, special_tokens=["<bos>", "<eos>"])
    messages = messages_of(lambda: make(tok), language)
    assert es_word in messages["es"] and en_word in messages["en"]


BAD_FILES = {
    "not JSON": ("merges: 1", "no es JSON", "not JSON"),
    "no merges": ('{"vocab": []}', "'merges'", "'merges'"),
    "a merge that is not three ids": ('{"merges": [[64, 65]]}', "[izquierda, derecha, nuevo]", "[left, right, new]"),
    "a negative id": ('{"merges": [[-1, 65, 256]]}', "el id -1 no es un token", "the id -1 is not a token"),
    "256.0": ('{"merges": [[64, 65, 256.0]]}', "son enteros, no float", "are integers, not float"),
    "an id that is text": ('{"merges": [["64", 65, 256]]}', "son enteros, no str", "are integers, not str"),
    "an id that is a bool": ('{"merges": [[true, 65, 256]]}', "son enteros, no bool", "are integers, not bool"),
    "a pair named twice": ('{"merges": [[64, 65, 256], [64, 65, 257]]}', "dos veces", "twice"),
    "an id not yet made": ('{"merges": [[64, 999, 256]]}', "aún no es un token (999)", "not a token yet (999)"),
    "an id after a gap": ('{"merges": [[64, 65, 300]]}', "sin huecos", "without gaps"),
    "an id made twice": ('{"merges": [[64, 65, 256], [66, 67, 256]]}', "no encaja", "does not fit"),
    "the same bytes under two ids": (  # «abc» as («ab», «c») -> 257, then as («a», «bc») -> 259
        '{"merges": [[64, 65, 256], [256, 66, 257], [65, 66, 258], [64, 258, 259]]}',
        "no encaja",
        "does not fit",
    ),
    "special tokens that are not text": ('{"merges": [], "special_tokens": [5]}', "no vacío", "non-empty"),
    "byte ids that are not 256": ('{"merges": [], "byte_ids": [0, 1]}', "256 ids", "256 ids"),
}


@pytest.mark.parametrize("mistake", sorted(BAD_FILES))
def test_loading_a_bad_file_is_a_clear_error(mistake, language, tmp_path):
    content, es_word, en_word = BAD_FILES[mistake]
    path = tmp_path / "bpe.json"
    path.write_text(content, encoding="utf-8")
    messages = messages_of(lambda: ByteBPE.load(path), language)
    assert es_word in messages["es"] and en_word in messages["en"]


def gpt2_table(**changes: int | None) -> dict[str, object]:
    table: dict[str, object] = {BYTE_CHAR[b]: i for i, b in enumerate(BYTE_ORDER)}
    table.update({"ho": 256, "la": 257, "<|endoftext|>": 258})
    for token, i in changes.items():
        table.pop(token) if i is None else table.update({token: i})
    return table


BAD_GPT2 = {
    "a byte missing": (
        gpt2_table(**{"!": None, "<|endoftext|>": 257, "la": None}),
        "h o\n",
        "le falta el byte",
        "lacks",
    ),
    "a line of three tokens": (gpt2_table(), "h o\nl a x\n", "la línea 3", "line 3"),
    "a merge whose token is missing": (
        gpt2_table(la=None, **{"<|endoftext|>": 257}),
        "h o\nl a\n",
        "línea 3",
        "line 3",
    ),
    "a special token before the merges": (
        gpt2_table(**{"<|endoftext|>": 256, "ho": 257, "la": 258}),
        "h o\nl a\n",
        "últimos ids",
        "last ids",
    ),
    "an id that is a float": (gpt2_table(ho=256.0), "h o\nl a\n", "son enteros", "are integers"),
    "a pair named twice": (gpt2_table(), "h o\nl a\nh o\n", "dos veces", "twice"),
}


@pytest.mark.parametrize("mistake", sorted(BAD_GPT2))
def test_loading_bad_gpt2_files_is_a_clear_error(mistake, language, tmp_path):
    table, lines, es_word, en_word = BAD_GPT2[mistake]
    encoder, merges = tmp_path / "encoder.json", tmp_path / "vocab.bpe"
    encoder.write_text(json.dumps(table), encoding="utf-8")
    merges.write_text("#version: 0.2\n" + lines, encoding="utf-8")
    messages = messages_of(lambda: ByteBPE.load_gpt2(encoder, merges), language)
    assert es_word in messages["es"] and en_word in messages["en"]


def test_numpy_and_torch_integers_are_ids(tmp_path):
    tok = train_bpe("el año que viene", 270)
    ids = tok.encode("el año")
    assert tok.decode([np.int64(i) for i in ids]) == tok.decode(np.array(ids, dtype=np.int32)) == "el año"
    assert tok.pieces([np.uint16(ids[0])]) == tok.pieces(ids[:1])
    assert tok.stream_decoder().feed(np.int64(ids[0])) == tok.decode(ids[:1])
    path = tmp_path / "bpe.json"
    path.write_text(json.dumps({"merges": [[int(a), int(b), int(n)] for (a, b), n in tok.merges]}), encoding="utf-8")
    assert ByteBPE.load(path) == tok
    merges = tuple(((np.int64(a), np.int64(b)), np.int64(n)) for (a, b), n in tok.merges)
    assert ByteBPE(merges, tok.vocab) == tok and type(ByteBPE(merges, tok.vocab).encode("el año")[0]) is int


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
        assert sorted(everything.split("\n\n")) == sorted(train.split("\n\n") + test.split("\n\n"))
        assert test in everything and train.split("\n\n")[-1] == everything.split("\n\n")[-1]  # 11 after 10
        assert len(train) > 4 * len(test) > 0
        text = (ROOT / "src/minitransformer/corpora" / f"prose_{lang}.txt").read_text(encoding="utf-8")
        assert re.findall(r"^§ (\d\d)$", text, re.M) == [f"{n:02d}" for n in range(12)]
        assert re.fullmatch(r"# snapshot of notebooks 00-11, taken \d{4}-\d\d-\d\d", text.splitlines()[0])
    assert prose("es").count("á") > 100 * max(1, prose("en").count("á"))  # 11 names «¿», «ñ» and «año» in English too
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


def test_the_drift_report_counts_the_snapshots_paragraphs_the_sources_still_have():
    """The corpus is a dated snapshot: the prose may change after it, and ``--drift`` reports by how much (a report
    for maintainers, not a failing check)."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from make_prose_corpus import drift
    finally:
        sys.path.remove(str(ROOT / "tools"))
    snapshot = "# snapshot\n\n§ 00\n\nuna\n\ndos\n\ntres\n\n§ 01\n\ncuatro"
    today = "§ 00\n\nuna\n\ndos, cambiada\n\ntres\n\notra\n\n§ 01\n\nnada igual"
    assert drift(snapshot, today) == [("00", 3, 2, 4), ("01", 1, 0, 1)]
    assert snapshot_date() and re.fullmatch(r"\d{4}-\d\d-\d\d", snapshot_date())


def test_the_corpus_ships_with_the_package():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"corpora/*.txt"' in text


def test_token_stats_and_words():
    assert count_words("El año 2017, ¿verdad? x_1") == 4  # El, año, verdad, x: digits are not words
    tok = train_bpe("", 256)
    stats = token_stats(tok.encode, "año y")
    assert (stats.tokens, stats.words, stats.bytes) == (6, 2, 6)
    assert stats.tokens_per_word == 3 and stats.bytes_per_token == 1


# --------------------------------------------------------------------------- encoding long pieces


def encode_pass_by_pass(tok: ByteBPE, text: str) -> list[int]:
    """The encoder as it was: per piece, the pair of lowest rank, merged everywhere, pass after pass
    (GPT-2's ``bpe``); O(length × merges)."""
    rank = {pair: (r, new) for r, (pair, new) in enumerate(tok.merges)}
    out = []
    for piece in pretokenize(text):
        ids = [BYTE_ID[b] for b in piece.encode("utf-8")]
        while len(ids) > 1:
            best = min(zip(ids, ids[1:]), key=lambda p: rank.get(p, (len(rank),))[0])
            if best not in rank:
                break
            ids = merge(ids, best, rank[best][1])
        out += ids
    return out


def test_long_pieces_encode_as_tokenizers_and_as_the_pass_by_pass_encoder(corpora):
    ours, theirs = train_bpe(corpora["both"], 2000), hf_tokenizer(corpora["both"], 2000)
    rng = random.Random(3)
    letters = "".join(c for c in prose("es", "test") if c.isalpha())
    for _ in range(60):
        n = rng.choice([2, 30, 255, 256, 700, 3000])
        kind = rng.random()
        if kind < 0.3:
            word = "".join(rng.choice("abcdeñó") for _ in range(n))
        elif kind < 0.6:
            start = rng.randrange(len(letters) - n)
            word = letters[start : start + n]
        else:
            word = rng.choice("aeñ") * n  # runs: the same pair overlapping itself
        ids = ours.encode(word)
        assert ids == theirs.encode(word).ids == encode_pass_by_pass(ours, word), word[:40]
        assert ours.decode(ids) == word


def test_the_encode_cache_is_bounded():
    tok = train_bpe("el año que viene", 270)
    text = " ".join(f"w{i}" for i in range(CACHE_SIZE + 50))
    assert tok.encode(text) == encode_pass_by_pass(tok, text)
    assert len(tok._cache) == CACHE_SIZE  # the least recently used pieces left
    long = "a" * 64
    tok.encode(long)
    assert long not in tok._cache


def test_the_benchmark_runs_on_a_tiny_case(capsys):
    spec = importlib.util.spec_from_file_location("benchmark_tokenizer", ROOT / "benchmarks" / "tokenizer.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    status = bench.main(["--size", "300", "--letters", "300", "--repeats", "1", "--chars", "3000"])
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [row.split()[0] for row in rows] == ["train", "encode", "encode"]  # the ids agreed, or it stopped
    assert all(float(row.split()[-2].rstrip("×")) > 0 for row in rows) and status in (0, 1)


# --------------------------------------------------------------------------- special tokens

SPECIALS = ["<bos>", "<eos>", "<|endoftext|>", "<es>", "<es><en>"]


def with_specials(text: str, rng: random.Random, every: int = 200) -> str:
    parts = [text[i : i + every] for i in range(0, len(text), every)]
    return "".join(p + rng.choice(SPECIALS + [""]) for p in parts)


def test_special_tokens_are_tokenizers_added_tokens(corpora):
    rng = random.Random(4)
    text = with_specials(corpora["es"][:40_000], rng)
    for size in (600, 100_000):
        ours, theirs = train_bpe(text, size, special_tokens=SPECIALS), hf_tokenizer(text, size, SPECIALS)
        assert merges_as_text(ours) == hf_merges(theirs)
        assert ours.vocab_size == theirs.get_vocab_size()
        n = ours.vocab_size - len(SPECIALS)
        assert [theirs.token_to_id(s) for s in SPECIALS] == list(range(n, n + len(SPECIALS)))  # after the merges
        assert ours.vocab[n:] == tuple(s.encode() for s in SPECIALS) and ours.vocab[:256] == train_bpe("", 256).vocab
        assert size < 10_000 or b"<|" not in ours.vocab  # uncut, «<|» would be a piece, so a token
        for probe in [with_specials(prose("es", "test")[:3000], rng, 37), "<es><en><es>x<eos<bos>>", "<<bos>"]:
            ids = ours.encode(probe, allowed_special="all")
            assert ids == theirs.encode(probe).ids, probe[:60]
            assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=False) == probe
            assert list(ours.encode_iterable([probe[:7], probe[7:]], allowed_special="all")) == ids


def test_special_tokens_follow_tiktokens_choices():
    tok = train_bpe("el año <eos> que viene", 270, special_tokens=["<bos>", "<eos>"])
    bos, eos = tok.vocab_size - 2, tok.vocab_size - 1
    plain = ByteBPE(tok.merges, tok.vocab[:-2])  # the same, without special tokens
    text = "<bos>hola<eos>"
    assert tok.encode("hola") == plain.encode("hola")
    assert tok.encode(text, allowed_special="all") == [bos, *plain.encode("hola"), eos]
    assert tok.encode(text, allowed_special={"<eos>"}, disallowed_special=()) == [*plain.encode("<bos>hola"), eos]
    assert tok.encode(text, disallowed_special=()) == plain.encode(text)  # every special token as plain text
    with pytest.raises(i18n.CourseError, match="<bos>"):
        tok.encode(text)  # by default a special token's text is an error
    with pytest.raises(i18n.CourseError, match="<bos>"):
        tok.encode(text, allowed_special={"<eos>"})  # the ones not allowed still are
    assert tok.decode([bos, *plain.encode("hola"), eos]) == text
    assert tok.pieces([bos, eos]) == ["<bos>", "<eos>"]


@pytest.mark.parametrize("tie", TIES)
@pytest.mark.parametrize("size", [300, 1000, 4000])
def test_tiktoken_with_our_merges_encodes_as_we_do(corpora, size, tie, tmp_path, monkeypatch):
    """tiktoken, the other peer, built from a file of ranks the test writes in tiktoken's format and tiktoken reads
    (no download, its cache off): the tokens' bytes with our ids as ranks, GPT-2's pattern and our special tokens. It merges by the rank of the joined bytes, we by the
    rank of the pair; on the course's prose, the edge texts and special tokens, the ids and the choices agree.
    (Where one special token starts another, as «<es>» and «<es><en>», tiktoken takes whichever its pattern lists
    first and we the longest, as ``tokenizers`` does: the special tokens here start no other.)"""
    tiktoken = pytest.importorskip("tiktoken")
    specials = ["<bos>", "<eos>", "<|endoftext|>", "<es>", "<en>"]
    text = with_specials(corpora["es"][:30_000] + corpora["en"][:30_000], random.Random(6))
    ours = train_bpe(text, size, special_tokens=specials, tie=tie)
    n = ours.vocab_size - len(specials)
    ranks_file = tmp_path / "course.tiktoken"
    ranks_file.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for r, t in enumerate(ours.vocab[:n])))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # read the file itself, every time
    from tiktoken.load import load_tiktoken_bpe

    theirs = tiktoken.Encoding(
        "course",
        pat_str=PATTERN,
        mergeable_ranks=load_tiktoken_bpe(str(ranks_file)),
        special_tokens={s: n + i for i, s in enumerate(specials)},
    )
    probes = [prose("es", "test")[:5000], prose("en", "test")[:5000], *EXAMPLES, *TRICKY]
    for probe in probes:
        plain = probe.replace("<", "‹")  # no special token's text: the default choices refuse it in both
        assert ours.encode(plain) == theirs.encode(plain), plain[:60]
        assert ours.encode(probe, allowed_special="all") == theirs.encode(probe, allowed_special="all")
        assert ours.encode(probe, disallowed_special=()) == theirs.encode(probe, disallowed_special=())
        assert ours.decode(theirs.encode(probe, allowed_special="all")) == probe
    with pytest.raises(i18n.CourseError):
        ours.encode("x<eos>")
    with pytest.raises(ValueError):
        theirs.encode("x<eos>")


def test_special_tokens_survive_truncation_and_saving(tmp_path, corpora):
    text = with_specials(corpora["en"][:20_000], random.Random(5))
    full = train_bpe(text, 900, special_tokens=SPECIALS)
    small = full.truncated(600)
    assert small == train_bpe(text, 600, special_tokens=SPECIALS)
    assert small.vocab[-len(SPECIALS) :] == tuple(s.encode() for s in SPECIALS)
    loaded = ByteBPE.load(full.save(tmp_path / "bpe.json"))
    assert loaded == full and loaded.encode(text, allowed_special="all") == full.encode(text, allowed_special="all")


# --------------------------------------------------------------------------- streaming


TRICKY = [
    "don't we'll they're I'm it's 's 'll 're",
    "a  b   c    \n\n  d\t\t e",
    "¿Qué año es? ¡Feliz año! 👩‍👩‍👧 🇪🇸 ñ",
    "x<eos>y<es><en>z<es>" + "w" * 300 + "<bos>",
    "<es" + "<en>" + "<bos" + ">",
    "x \u2000<eos>abcdefgh",  # before a special token the spaces are one piece; before text, two
    "don't  <bos>'s  ",
]


def random_chunks(rng: random.Random, data, pieces: int) -> list:
    cuts = sorted(rng.randint(0, len(data)) for _ in range(pieces))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


def test_encode_iterable_is_encode_on_the_whole_text(corpora):
    tok = train_bpe(corpora["both"], 1500, special_tokens=SPECIALS)
    rng = random.Random(6)
    texts = EXAMPLES + TRICKY + [random_text(rng, rng.randint(0, 80), assigned_only=False) for _ in range(150)]
    texts += [with_specials(prose("es", "test")[:2000], rng, 50)]
    for text in texts:
        expected = tok.encode(text, allowed_special="all")
        assert list(tok.encode_iterable([text], allowed_special="all")) == expected
        for _ in range(8):
            n = rng.choice([1, 3, 10, len(text)])
            for chunks in (
                random_chunks(rng, text, n),
                random_chunks(rng, text.encode(), n),
            ):  # str, or bytes cut anywhere
                assert list(tok.encode_iterable(chunks, allowed_special="all")) == expected, (text, chunks)
        plain = tok.encode(text, disallowed_special=())
        assert list(tok.encode_iterable(list(text), disallowed_special=())) == plain  # one character at a time


def test_encode_iterable_on_texts_made_of_the_hard_parts():
    """Contractions, runs of spaces of every kind, special tokens that start alike, cut characters."""
    specials = ["<a>", "<a><b>", "<b>", "a<"]
    tok = train_bpe(prose("en", "train")[:20_000], 800, special_tokens=specials)
    parts = ["'", "s", "re", "ll", " ", "  ", "\n", "\t", "\u2000", "\xa0", "a", "<", ">", "<a>", "<b>", "1", "é", "👍"]
    rng = random.Random(10)
    for _ in range(400):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 30)))
        allowed = rng.choice(["all", {"<a>"}, set()])
        expected = tok.encode(text, allowed_special=allowed, disallowed_special=())
        data = text if rng.random() < 0.5 else text.encode()
        chunks = random_chunks(rng, data, rng.randint(0, 6))
        assert list(tok.encode_iterable(chunks, allowed_special=allowed, disallowed_special=())) == expected, chunks


def test_encode_iterable_refuses_a_special_token_cut_between_chunks():
    tok = train_bpe("abc", 260, special_tokens=["<eos>"])
    with pytest.raises(i18n.CourseError, match="<eos>"):
        list(tok.encode_iterable(["ab<e", "os>c"]))
    assert list(tok.encode_iterable(["ab<e", "os>c"], allowed_special="all")) == tok.encode(
        "ab<eos>c", allowed_special="all"
    )


def test_the_stream_decoder_holds_back_a_cut_character(corpora):
    tok = train_bpe(corpora["es"], 600, special_tokens=["<eos>"])
    stream = tok.stream_decoder()
    n_with = BYTE_ID[0xC3], BYTE_ID[0xB1]  # «ñ»: two bytes
    assert stream.feed([BYTE_ID[ord("a")], n_with[0]]) == "a"  # the first byte of «ñ» waits
    assert stream.feed(n_with[1]) == "ñ"
    assert stream.feed([n_with[0]]) == "" and stream.flush() == "\ufffd"  # cut for good: as decode
    rng = random.Random(7)
    for _ in range(300):
        if rng.random() < 0.5:
            ids = tok.encode(random_text(rng, rng.randint(0, 40), assigned_only=False))
        else:  # any ids: characters cut, bytes that no character starts with
            ids = [rng.randrange(tok.vocab_size) for _ in range(rng.randint(0, 20))]
        stream = tok.stream_decoder()
        out = "".join(stream.feed(part) for part in random_chunks(rng, ids, rng.randint(0, 6))) + stream.flush()
        assert out == tok.decode(ids), ids


# --------------------------------------------------------------------------- tie rules


def train_by_counting_again(text: str, vocab_size: int, tie: str) -> list[tuple[bytes, bytes]]:
    """The merges (as bytes) of the plain algorithm: count every pair again at each step, reading the
    pieces in the order they first occur; a tie goes by ``tie``."""
    pieces = Counter(pretokenize(text))
    words = {tuple(bytes([b]) for b in p.encode()): n for p, n in pieces.items()}
    merges: list[tuple[bytes, bytes]] = []
    ids: dict[bytes, int] = {}  # a merged token's id
    while 256 + len(merges) < vocab_size:
        counts: dict[tuple[bytes, bytes], int] = {}
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                counts[pair] = counts.get(pair, 0) + n
        if not counts:
            break
        if tie == "first":  # the dict's order is the order they were found: max keeps the first
            best = max(counts, key=counts.get)
        elif tie == "bytes":
            best = max(counts, key=lambda p: (counts[p], p))
        else:
            best = max(counts, key=lambda p: (counts[p], [-BYTE_ID[t[0]] if len(t) == 1 else -ids[t] for t in p]))
        merges.append(best)
        ids = {a + b: 256 + i for i, (a, b) in enumerate(merges)}
        new_words = {}
        for word, n in words.items():
            out, i = [], 0
            while i < len(word):
                if word[i : i + 2] == best:
                    out.append(best[0] + best[1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + n
        words = new_words
    return merges


def merges_as_bytes(tok: ByteBPE) -> list[tuple[bytes, bytes]]:
    return [(tok.vocab[a], tok.vocab[b]) for (a, b), _ in tok.merges]


@pytest.mark.parametrize(
    ("text", "tie", "expected"),
    [
        # three pairs, once each: the smallest ids (a=64 < m=76 < z=89), the first read, the greatest bytes
        ("mn,ab,zy", "tokenizers", [b"ab", b"mn", b"zy"]),
        ("mn,ab,zy", "first", [b"mn", b"ab", b"zy"]),
        ("mn,ab,zy", "bytes", [b"zy", b"mn", b"ab"]),
        # «ab» first (3 times); then «ab»+«c» (ids 256, c) against «z»+«c» (89, c): ids and bytes pick «zc»,
        # reading picks «abc»
        ("ab,ab,abc,zc", "tokenizers", [b"ab", b"zc", b"abc"]),
        ("ab,ab,abc,zc", "first", [b"ab", b"abc", b"zc"]),
        ("ab,ab,abc,zc", "bytes", [b"ab", b"zc", b"abc"]),
        # a space is byte 32 but id 220: its pair is the greatest by ids, the smallest by bytes
        (",ax, x", "tokenizers", [b"ax", b" x"]),
        (",ax, x", "first", [b"ax", b" x"]),
        (", x,ax", "first", [b" x", b"ax"]),
        (", x,ax", "bytes", [b"ax", b" x"]),
        # two pairs twice: «ba» (ids 65, 64) against «cb» (66, 65); by bytes «cb»
        ("ba,cb,ba,cb,", "tokenizers", [b"ba", b"cb"]),
        ("cb,ba,cb,ba,", "first", [b"cb", b"ba"]),
        ("ba,cb,ba,cb,", "bytes", [b"cb", b"ba"]),
    ],
)
def test_each_tie_rule_on_corpora_built_by_hand(text, tie, expected):
    tok = train_bpe(text, 256 + len(expected), tie=tie)
    assert [a + b for a, b in merges_as_bytes(tok)] == expected
    assert merges_as_bytes(tok) == train_by_counting_again(text, 256 + len(expected), tie)
    if tie == "tokenizers":
        assert merges_as_text(tok) == hf_merges(hf_tokenizer(text, 256 + len(expected)))


@pytest.mark.parametrize("tie", TIES)
def test_each_tie_rule_is_the_plain_algorithm_on_random_corpora(tie):
    rng = random.Random(8)
    for _ in range(60):
        alphabet = rng.choice(["ab", "abc", "aab ", "abcd ", "añ b", "xy\nz", "ab,cd ñé"])
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        size = rng.randint(256, 300)
        assert merges_as_bytes(train_bpe(text, size, tie=tie)) == train_by_counting_again(text, size, tie), text


def test_the_tie_rules_differ_on_the_course_prose_and_the_default_is_tokenizers(corpora):
    text = corpora["es"][:10_000]
    learned = {tie: merges_as_bytes(train_bpe(text, 600, tie=tie)) for tie in TIES}
    assert learned["tokenizers"] == merges_as_bytes(train_bpe(text, 600))
    assert learned["first"] != learned["tokenizers"] != learned["bytes"] != learned["first"]
    assert learned["first"] == train_by_counting_again(text, 600, "first")


# --------------------------------------------------------------------------- GPT-2's files


def hf_from_files(encoder: Path, merges: Path, specials: list[str]) -> Tokenizer:
    tok = Tokenizer(models.BPE.from_file(str(encoder), str(merges)))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(specials)
    return tok


def test_gpt2_files_round_trip_with_gpt2s_ids(tmp_path, corpora):
    ours = train_bpe(corpora["en"], 1200, special_tokens=["<|endoftext|>"])
    encoder, merges = ours.save_gpt2(tmp_path / "encoder.json", tmp_path / "vocab.bpe")
    table = json.loads(encoder.read_text(encoding="utf-8"))
    lines = merges.read_text(encoding="utf-8").splitlines()
    # GPT-2's numbering: the bytes in its table's order, a merge's token at 256 + its rank, <|endoftext|> last
    assert [table[BYTE_CHAR[b]] for b in BYTE_ORDER] == list(range(256)) and table["Ġ"] == 220
    assert lines[0] == "#version: 0.2" and table["".join(lines[1].split(" "))] == 256
    assert table["<|endoftext|>"] == len(table) - 1 == 1199
    loaded = ByteBPE.load_gpt2(encoder, merges)
    assert loaded == ours
    theirs = hf_from_files(encoder, merges, ["<|endoftext|>"])
    for probe in EXAMPLES + [prose("en", "test")[:3000] + "<|endoftext|>"]:
        ids = loaded.encode(probe, allowed_special="all")
        assert ids == theirs.encode(probe).ids == ours.encode(probe, allowed_special="all")
    assert ByteBPE.load(loaded.save(tmp_path / "bpe.json")) == loaded


def test_gpt2_files_that_number_bytes_otherwise_keep_their_ids(tmp_path):
    """Files that give the bytes other ids than GPT-2's (as ``tokenizers``' trainer does without the initial alphabet)."""
    chars = sorted(BYTE_CHAR.values())
    random.Random(9).shuffle(chars)
    table = {c: i for i, c in enumerate(chars)}
    merge_lines = [("h", "o"), ("l", "a"), ("ho", "la"), ("Ġ", "a"), ("Ã", "±"), ("a", "Ã±")]
    for a, b in merge_lines:
        table[a + b] = len(table)
    table["<|endoftext|>"] = len(table)
    encoder, merges = tmp_path / "vocab.json", tmp_path / "merges.txt"
    encoder.write_text(json.dumps(table), encoding="utf-8")
    merges.write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merge_lines), encoding="utf-8")
    ours, theirs = ByteBPE.load_gpt2(encoder, merges), hf_from_files(encoder, merges, ["<|endoftext|>"])
    for text in ["hola", "hola año aña<|endoftext|>", *EXAMPLES]:
        ids = ours.encode(text, allowed_special="all")
        assert ids == theirs.encode(text).ids
        assert ours.decode(ids) == text
    assert ours.encode("hola") == [table["hola"]] and ours.encode("!") == [table["!"]]
    assert ByteBPE.load(ours.save(tmp_path / "bpe.json")) == ours
    assert ByteBPE.load_gpt2(*ours.save_gpt2(tmp_path / "e.json", tmp_path / "m.bpe")) == ours


# --------------------------------------------------------------------------- Unigram's split


def unigram(log_prob: dict[str, float]) -> Tokenizer:
    """``tokenizers``' Unigram model over ``log_prob``, with nothing before it (no normaliser, no pre-tokeniser)."""
    return Tokenizer(models.Unigram(list(log_prob.items()), unk_id=None, byte_fallback=False))


def test_viterbi_split_is_tokenizers_unigram_on_random_vocabularies():
    """The most probable split, as tokenizers' Unigram model finds it: random texts over a few characters (many
    overlapping pieces) and random log probabilities (no two splits score the same)."""
    rng = random.Random(3)
    for _ in range(300):
        alphabet = rng.choice(["ab", "abc", "a▁b", "añ▁ü", "xyz▁"])
        texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30))) for _ in range(3)]
        pieces = set(alphabet) | {
            t[i : i + rng.randint(2, 6)] for t in texts for i in range(len(t)) if rng.random() < 0.4
        }
        log_prob = {p: -rng.uniform(0.5, 12.0) for p in sorted(pieces)}
        theirs = unigram(log_prob)
        for text in texts:
            ours = viterbi_split(text, log_prob)
            assert ours == theirs.encode(text).tokens, (text, log_prob)
            assert "".join(ours) == text


def test_viterbi_split_on_the_hand_examples():
    log_prob = {"a": -3.0, "b": -3.5, "c": -2.5, "ab": -4.0, "bc": -3.0, "abc": -9.5}
    assert viterbi_split("abc", log_prob) == ["a", "bc"]  # −6.0, against −6.5 (ab c), −9.0 (a b c), −9.5 (abc)
    assert viterbi_split("", log_prob) == []
    assert viterbi_split("ab", {"a": -2.0, "b": -2.5, "ab": -10.0}) == ["a", "b"]  # not the fewest pieces
    assert viterbi_split("ab", {"a": -2.0, "b": float("-inf"), "ab": -10.0}) == ["ab"]  # probability 0: no piece
    long = "ab" * 400  # a product of probabilities would be 0.0 long before the end; the sum of logs is not
    assert viterbi_split(long, {"a": -7.0, "b": -7.5, "ab": -13.0}) == ["ab"] * 400
    assert viterbi_split("ab", {"a": np.float64(-1.0), "b": np.float32(-1.0), "ab": -3}) == ["a", "b"]
