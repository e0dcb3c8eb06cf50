"""Spelled numbers, vocabularies, batches and the splits of the toy tasks."""

from __future__ import annotations

import random

import pytest
import torch
from num2words import num2words

from minitransformer.attention import padding_mask
from minitransformer.data import (
    MAX_NUMBER,
    NumberTranslation,
    ReverseDigits,
    Vocab,
    batch_masks,
    make_batch,
    number_words,
    pad_sequences,
    spell_number,
)
from minitransformer.model import Transformer, TransformerConfig, target_mask

# Written from the rules of Spanish (RAE, masculine counting forms), not from a program.
SPANISH = {
    0: "cero",
    1: "uno",
    10: "diez",
    11: "once",
    15: "quince",
    16: "dieciséis",
    19: "diecinueve",
    20: "veinte",
    21: "veintiuno",
    22: "veintidós",
    23: "veintitrés",
    26: "veintiséis",
    29: "veintinueve",
    30: "treinta",
    31: "treinta y uno",
    45: "cuarenta y cinco",
    99: "noventa y nueve",
    100: "cien",
    101: "ciento uno",
    116: "ciento dieciséis",
    121: "ciento veintiuno",
    200: "doscientos",
    222: "doscientos veintidós",
    500: "quinientos",
    555: "quinientos cincuenta y cinco",
    700: "setecientos",
    900: "novecientos",
    999: "novecientos noventa y nueve",
    1000: "mil",
    1001: "mil uno",
    1021: "mil veintiuno",
    1100: "mil cien",
    2000: "dos mil",
    11000: "once mil",
    16000: "dieciséis mil",
    21000: "veintiún mil",
    21021: "veintiún mil veintiuno",
    22000: "veintidós mil",
    23500: "veintitrés mil quinientos",
    26000: "veintiséis mil",
    31000: "treinta y un mil",
    41001: "cuarenta y un mil uno",
    51000: "cincuenta y un mil",
    61000: "sesenta y un mil",
    71000: "setenta y un mil",
    81000: "ochenta y un mil",
    91000: "noventa y un mil",
    91091: "noventa y un mil noventa y uno",
    100000: "cien mil",
    100100: "cien mil cien",
    101000: "ciento un mil",
    111000: "ciento once mil",
    121000: "ciento veintiún mil",
    131031: "ciento treinta y un mil treinta y uno",
    200000: "doscientos mil",
    201000: "doscientos un mil",
    500000: "quinientos mil",
    700700: "setecientos mil setecientos",
    900000: "novecientos mil",
    921921: "novecientos veintiún mil novecientos veintiuno",
    999999: "novecientos noventa y nueve mil novecientos noventa y nueve",
}

# The course's English style: no "and", no commas, hyphens from 21 to 99.
ENGLISH = {
    0: "zero",
    7: "seven",
    13: "thirteen",
    21: "twenty-one",
    40: "forty",
    99: "ninety-nine",
    100: "one hundred",
    101: "one hundred one",
    342: "three hundred forty-two",
    1000: "one thousand",
    1001: "one thousand one",
    21000: "twenty-one thousand",
    100100: "one hundred thousand one hundred",
    342001: "three hundred forty-two thousand one",
    999999: "nine hundred ninety-nine thousand nine hundred ninety-nine",
}


@pytest.mark.parametrize("n,words", SPANISH.items())
def test_spanish_table(n, words):
    assert spell_number(n, "es") == words


@pytest.mark.parametrize("n,words", ENGLISH.items())
def test_english_table(n, words):
    assert spell_number(n, "en") == words


def _num2words_corrected(n: int, lang: str) -> str:
    """num2words, with the differences documented in ``minitransformer.data``:
    Spanish: no apocope before "mil" ("veintiuno mil", "treinta y uno mil" → "veintiún mil",
    "treinta y un mil"); English: its "and" and commas are not the course's style."""
    text = num2words(n, lang=lang)
    if lang == "es":
        return text.replace("veintiuno mil", "veintiún mil").replace("uno mil", "un mil")
    return text.replace(",", "").replace(" and ", " ")


def _sample() -> list[int]:
    rng = random.Random(1)
    return sorted(
        set(range(2000))
        | {k * 1000 + r for k in range(1000) for r in (0, 1, 21)}
        | {rng.randrange(MAX_NUMBER) for _ in range(4000)}
    )


@pytest.mark.parametrize("lang", ["es", "en"])
def test_agrees_with_num2words_up_to_documented_differences(lang):
    # The full sweep of 0..999 999 (about a minute) finds 89 000 Spanish differences, all of
    # them the apocope before "mil"; this sample covers every thousands multiplier.
    bad = [n for n in _sample() if spell_number(n, lang) != _num2words_corrected(n, lang)]
    assert not bad, f"{len(bad)} differences, e.g. {bad[:5]}"


def test_num2words_differences_are_real():
    # The correction above is needed: num2words writes the non-apocopated form.
    assert num2words(21000, lang="es") != spell_number(21000, "es")
    assert num2words(31000, lang="es") != spell_number(31000, "es")


def test_apocope_before_mil():
    for k in range(1, 1000):
        text = spell_number(k * 1000 + 5, "es")
        assert "uno mil" not in text, text  # also catches "veintiuno mil"
        words = text.split()
        before_mil = words[words.index("mil") - 1] if k > 1 else None
        assert (before_mil in ("un", "veintiún")) == (k % 10 == 1 and k % 100 != 11 and k != 1), text
    assert spell_number(1005, "es") == "mil cinco"  # never "un mil"


def test_out_of_range_and_bad_arguments():
    for bad in (-1, MAX_NUMBER, 1.0, True, "3"):
        with pytest.raises(ValueError):
            spell_number(bad, "es")
    with pytest.raises(ValueError):
        spell_number(3, "fr")


def test_number_words_cover_the_range():
    es, en = set(number_words("es")), set(number_words("en"))
    for n in _sample():
        assert set(spell_number(n, "es").split()) <= es
        assert set(spell_number(n, "en").split()) <= en
    assert {"veintiún", "un", "uno", "cien", "ciento", "mil", "y"} <= es
    assert "veintiuno" in es and "and" not in en


def test_vocab_round_trip_and_specials():
    v = Vocab(["uno", "dos", "tres", "dos"])
    assert v.tokens[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert (v.pad_id, v.bos_id, v.eos_id, v.unk_id) == (0, 1, 2, 3)
    assert len(v) == 7  # duplicates ignored
    ids = v.encode("tres dos uno", bos=True, eos=True)
    assert ids == [1, 6, 5, 4, 2]
    assert v.decode(ids) == "tres dos uno"
    assert v.decode(ids + [5, 0]) == "tres dos uno"  # stops at <eos>
    assert v.decode(torch.tensor(ids)) == "tres dos uno"
    assert v.encode("cuatro") == [v.unk_id]
    assert Vocab.from_list(v.to_list()) == v
    with pytest.raises(ValueError):
        Vocab.from_list(["uno", "dos"])


def test_pad_sequences():
    x = pad_sequences([[5, 6, 7], [8]], pad_id=0)
    assert x.tolist() == [[5, 6, 7], [8, 0, 0]] and x.dtype == torch.long
    y = pad_sequences([torch.tensor([4]), (9, 9)], pad_id=1)  # tensors and tuples, another pad id
    assert y.tolist() == [[4, 1], [9, 9]] and y.dtype == torch.long
    with pytest.raises(ValueError):
        pad_sequences([[1], []])


def test_make_batch_shifts_targets():
    b = make_batch([[4, 5], [6]], [[7, 8, 9], [10]])
    assert b.tgt_in.tolist() == [[1, 7, 8, 9], [1, 10, 0, 0]]
    assert b.tgt_out.tolist() == [[7, 8, 9, 2], [10, 2, 0, 0]]
    assert b.src.tolist() == [[4, 5], [6, 0]]
    assert b.n_tokens == 6


def test_batch_masks_match_the_model():
    b = make_batch([[4, 5, 6], [6]], [[7, 8], [9]])
    src_mask, tgt_mask = batch_masks(b)
    assert torch.equal(src_mask, padding_mask(b.src, 0))
    assert src_mask.shape == (2, 1, 1, 3) and tgt_mask.shape == (2, 1, 3, 3)
    assert torch.equal(tgt_mask, target_mask(b.tgt_in, 0))
    assert tgt_mask[1, 0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]


def test_padding_does_not_change_the_model_output():
    data = NumberTranslation(0)
    torch.manual_seed(0)
    config = TransformerConfig(
        src_vocab_size=len(data.src_vocab),
        tgt_vocab_size=len(data.tgt_vocab),
        d_model=32,
        n_heads=4,
        d_ff=64,
        n_layers=2,
        dropout=0.0,
        max_len=64,
    )
    model = Transformer(config).eval()
    numbers = [5, 777_777, 21_000]
    batch = data.batch(numbers)
    with torch.no_grad():
        together = model(batch.src, batch.tgt_in)  # (B, T, V)
        for i, n in enumerate(numbers):
            alone = data.batch([n])
            out = model(alone.src, alone.tgt_in)[0]  # (T_i, V)
            torch.testing.assert_close(together[i, : out.size(0)], out, rtol=1e-5, atol=1e-5)


def test_splits_disjoint_deterministic_and_stratified():
    a, b, c = NumberTranslation(0), NumberTranslation(0), NumberTranslation(1)
    assert a.splits == b.splits and a.splits != c.splits
    val, test = set(a.splits["val"]), set(a.splits["test"])
    assert not val & test
    assert len(val) == len(test) == 9 + 90 + 3 * 300
    assert all(" " in spell_number(n, "es") for n in val | test)  # one-word numbers stay in training
    assert not {0, 7, 21, 30, 100, 500, 1000} & (val | test)
    train = a.sample_train(5000)
    assert not set(train) & (val | test)
    assert a.is_train(0) and not a.is_train(a.splits["test"][0])
    assert NumberTranslation(0).sample_train(50) == NumberTranslation(0).sample_train(50)
    assert {len(str(n)) for n in train} == {1, 2, 3, 4, 5, 6}


def test_number_batches_hold_the_spellings():
    data = NumberTranslation(0)
    b = data.batch([21_000, 7])
    assert data.src_vocab.decode(b.src[0]) == "veintiún mil"
    assert data.tgt_vocab.decode(b.tgt_out[0]) == "twenty-one thousand"
    assert data.tgt_vocab.decode(b.tgt_in[1]) == "seven"
    assert data.src_vocab.unk_id not in data.batch(data.splits["test"]).src.tolist()


def test_reverse_digits():
    task = ReverseDigits(2, 5, seed=3)
    seqs = task.sample(20)
    assert all(2 <= len(s) <= 5 for s in seqs)
    b = task.batch_of(seqs)
    for i, s in enumerate(seqs):
        assert task.vocab.decode(b.src[i], join=False) == s
        assert task.vocab.decode(b.tgt_out[i], join=False) == s[::-1]
    with pytest.raises(ValueError):
        ReverseDigits(0, 3)


def test_the_distribution_holds_round_numbers():
    data = NumberTranslation(0)
    train = data.sample_train(20_000)
    big = [n for n in train if n >= 10_000]
    assert sum(n % 1000 == 0 for n in big) / len(big) > 0.05  # "… mil" at the end is not rare
    assert sum("0" in str(n)[1:] for n in big) / len(big) > 0.5
    assert {n for n in range(1000, 10_000, 1000) if data.is_train(n)} <= set(train)  # "dos mil" … "nueve mil"
    rng = random.Random(0)
    for d in range(1, 7):
        for _ in range(200):
            n = NumberTranslation.draw(d, rng)
            assert len(str(n)) == d
