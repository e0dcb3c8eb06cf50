"""Toy data generated in code: numbers spelled in Spanish and English, digit sequences.

Two tasks for sequence-to-sequence training:

* the main task, :class:`NumberTranslation`: a number spelled in Spanish words
  ("veintiún mil trescientos dos") → the same number in English words
  ("twenty-one thousand three hundred two"), with train/validation/test splits of
  disjoint numbers;
* a quick sanity task, :class:`ReverseDigits`: a sequence of digits → the same digits
  reversed.

Both produce :class:`Batch` objects of padded token ids. Vocabularies are word-level,
with the special tokens ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2, ``<unk>`` = 3.
The model builds its masks from the ids (``config.pad_id`` = 0): :func:`batch_masks`
shows the same masks.

Spelling rules (:func:`spell_number`, 0 ≤ n < 1 000 000):

* Spanish: the forms of the Real Academia Española, masculine (counting) forms:
  "uno", "veintiuno", "treinta y uno" at the end of a number; apocope to "un", "veintiún"
  before "mil" ("veintiún mil", "treinta y un mil", "ciento un mil"); "mil", not "un mil";
  "cien" alone and before "mil" ("cien mil"), "ciento" followed by more ("ciento uno");
  one word from 16 to 29 with accents "dieciséis", "veintidós", "veintitrés", "veintiséis";
  "quinientos", "setecientos", "novecientos".
* English (one style, chosen for this course): no "and", no commas, tens and units joined
  by a hyphen from 21 to 99, "one hundred", "one thousand":
  342 001 → "three hundred forty-two thousand one".

Cross-check (``tests/test_data.py``): over the whole range, ``num2words`` 0.5.14 agrees with
these Spanish spellings except for the apocope before "mil" — it writes "veintiuno mil",
"treinta y uno mil", "ciento uno mil" (89 000 numbers); its English differs only by its
"and" and commas.

Letters: B batch, S source length, T target length.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .attention import causal_mask, combine_masks, padding_mask
from .i18n import check_lang, error

__all__ = [
    "spell_number",
    "number_words",
    "MAX_NUMBER",
    "PAD",
    "BOS",
    "EOS",
    "UNK",
    "SPECIALS",
    "Vocab",
    "Batch",
    "pad_sequences",
    "make_batch",
    "batch_masks",
    "NumberTranslation",
    "ReverseDigits",
]

MAX_NUMBER = 1_000_000  # spell_number covers 0 ≤ n < MAX_NUMBER

# ---------------------------------------------------------------------------------------
# Spelling numbers
# ---------------------------------------------------------------------------------------

_ES_UNITS = (
    "cero uno dos tres cuatro cinco seis siete ocho nueve diez once doce trece catorce quince "
    "dieciséis diecisiete dieciocho diecinueve veinte veintiuno veintidós veintitrés "
    "veinticuatro veinticinco veintiséis veintisiete veintiocho veintinueve"
).split()  # 0..29: one word each
_ES_TENS = {3: "treinta", 4: "cuarenta", 5: "cincuenta", 6: "sesenta", 7: "setenta", 8: "ochenta", 9: "noventa"}
_ES_HUNDREDS = {
    1: "ciento",
    2: "doscientos",
    3: "trescientos",
    4: "cuatrocientos",
    5: "quinientos",
    6: "seiscientos",
    7: "setecientos",
    8: "ochocientos",
    9: "novecientos",
}
_ES_APOCOPE = {"uno": "un", "veintiuno": "veintiún"}  # before "mil"

_EN_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()  # 0..19
_EN_TENS = {2: "twenty", 3: "thirty", 4: "forty", 5: "fifty", 6: "sixty", 7: "seventy", 8: "eighty", 9: "ninety"}


def _es_below_100(n: int) -> list[str]:
    if n < 30:
        return [_ES_UNITS[n]]
    tens, unit = divmod(n, 10)
    return [_ES_TENS[tens]] + (["y", _ES_UNITS[unit]] if unit else [])


def _es_below_1000(n: int) -> list[str]:
    """Words of 1 ≤ n ≤ 999."""
    if n == 100:
        return ["cien"]
    hundreds, rest = divmod(n, 100)
    words = [_ES_HUNDREDS[hundreds]] if hundreds else []
    return words + (_es_below_100(rest) if rest else [])


def _spell_es(n: int) -> str:
    if n == 0:
        return "cero"
    thousands, rest = divmod(n, 1000)
    words: list[str] = []
    if thousands == 1:
        words.append("mil")  # "mil", never "un mil"
    elif thousands:
        multiplier = _es_below_1000(thousands)
        multiplier[-1] = _ES_APOCOPE.get(multiplier[-1], multiplier[-1])  # veintiún mil
        words += multiplier + ["mil"]
    if rest:
        words += _es_below_1000(rest)
    return " ".join(words)


def _en_below_1000(n: int) -> list[str]:
    """Words of 1 ≤ n ≤ 999."""
    hundreds, rest = divmod(n, 100)
    words = [_EN_UNITS[hundreds], "hundred"] if hundreds else []
    if rest >= 20:
        tens, unit = divmod(rest, 10)
        words.append(_EN_TENS[tens] + (f"-{_EN_UNITS[unit]}" if unit else ""))
    elif rest:
        words.append(_EN_UNITS[rest])
    return words


def _spell_en(n: int) -> str:
    if n == 0:
        return "zero"
    thousands, rest = divmod(n, 1000)
    words = _en_below_1000(thousands) + ["thousand"] if thousands else []
    if rest:
        words += _en_below_1000(rest)
    return " ".join(words)


def spell_number(n: int, lang: str) -> str:
    """The number ``n`` (0 ≤ n < 1 000 000) in words, in Spanish (``"es"``) or English (``"en"``).

    >>> spell_number(21_000, "es"), spell_number(342_001, "en")
    ('veintiún mil', 'three hundred forty-two thousand one')
    """
    check_lang(lang)
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < MAX_NUMBER:
        raise error(
            f"spell_number cubre los enteros 0 ≤ n < {MAX_NUMBER:_}, no {n!r}",
            f"spell_number covers the integers 0 ≤ n < {MAX_NUMBER:_}, got {n!r}",
        )
    return _spell_es(n) if lang == "es" else _spell_en(n)


def number_words(lang: str) -> list[str]:
    """Every word :func:`spell_number` can write in ``lang``, in order of first appearance
    (counting up from 0).

    Each word of n is a word of n mod 1000 or of (n // 1000) · 1000, so spelling those
    1999 numbers finds them all.
    """
    words: dict[str, None] = {}
    for n in list(range(1000)) + [k * 1000 for k in range(1, 1000)]:
        words.update(dict.fromkeys(spell_number(n, lang).split()))
    return list(words)


# ---------------------------------------------------------------------------------------
# Vocabularies and batches
# ---------------------------------------------------------------------------------------

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)  # ids 0, 1, 2, 3 in every vocabulary


class Vocab:
    """A word-level vocabulary: the special tokens first (``<pad>`` = 0), then the words.

    Args:
        words: the words, in the order their ids should follow the specials
            (duplicates and special tokens are ignored).
    """

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, words: Iterable[str]):
        self.tokens: list[str] = list(SPECIALS)
        seen = set(self.tokens)
        for w in words:
            if w not in seen:
                seen.add(w)
                self.tokens.append(w)
        self.index = {t: i for i, t in enumerate(self.tokens)}

    def __len__(self) -> int:
        return len(self.tokens)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.tokens == other.tokens

    def __repr__(self) -> str:
        shown = ", ".join(self.tokens[:8])
        return f"Vocab({len(self)} tokens: {shown}{', …' if len(self) > 8 else ''})"

    def encode(self, text: str | Sequence[str], bos: bool = False, eos: bool = False) -> list[int]:
        """Ids of the words of ``text`` (a string split on spaces, or a list of words);
        unknown words become ``<unk>``."""
        words = text.split() if isinstance(text, str) else list(text)
        ids = [self.index.get(w, self.unk_id) for w in words]
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def decode(self, ids: Iterable[int] | Tensor, join: bool = True) -> str | list[str]:
        """Words of ``ids``: skips ``<pad>``/``<bos>``, stops at the first ``<eos>``."""
        if isinstance(ids, Tensor):
            ids = ids.tolist()
        words = []
        for i in ids:
            if i == self.eos_id:
                break
            if i in (self.pad_id, self.bos_id):
                continue
            words.append(self.tokens[i])
        return " ".join(words) if join else words

    def to_list(self) -> list[str]:
        """The tokens in id order (what a checkpoint stores)."""
        return list(self.tokens)

    @classmethod
    def from_list(cls, tokens: Sequence[str]) -> Vocab:
        """Inverse of :meth:`to_list`."""
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise error(
                f"un vocabulario empieza por {SPECIALS}, no por {tuple(tokens[:4])}",
                f"a vocabulary starts with {SPECIALS}, got {tuple(tokens[:4])}",
            )
        return cls(tokens[len(SPECIALS) :])


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int = 0) -> Tensor:
    """Right-pad id lists to the longest one. Shapes: B lists -> (B, L) int64."""
    if not seqs or min(len(s) for s in seqs) == 0:
        raise error(
            "pad_sequences necesita al menos una secuencia y ninguna vacía",
            "pad_sequences needs at least one sequence and no empty sequence",
        )
    rows = [s.tolist() if isinstance(s, Tensor) else list(s) for s in seqs]
    longest = max(len(r) for r in rows)
    return torch.tensor([r + [pad_id] * (longest - len(r)) for r in rows], dtype=torch.long)


@dataclass
class Batch:
    """One training batch of padded ids.

    ``tgt_in`` is the target shifted right (``<bos>`` y₁ … yₙ), the decoder's input under
    teacher forcing; ``tgt_out`` is what it must predict (y₁ … yₙ ``<eos>``).

    Shapes: src (B, S), tgt_in (B, T), tgt_out (B, T).
    """

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor

    def to(self, device: torch.device | str | None) -> Batch:
        return Batch(self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device))

    @property
    def n_tokens(self) -> int:
        """Target tokens that count in the loss (not padding, id 0)."""
        return int((self.tgt_out != 0).sum())


def make_batch(
    src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]], pad_id: int = 0, bos_id: int = 1, eos_id: int = 2
) -> Batch:
    """Pad source id lists and build the shifted target pair from target id lists (no specials)."""
    if len(src) != len(tgt):
        raise error(f"{len(src)} fuentes y {len(tgt)} objetivos", f"{len(src)} sources and {len(tgt)} targets")
    return Batch(
        pad_sequences(src, pad_id),  # (B, S)
        pad_sequences([[bos_id, *t] for t in tgt], pad_id),  # (B, T)
        pad_sequences([[*t, eos_id] for t in tgt], pad_id),  # (B, T)
    )


def batch_masks(batch: Batch, pad_id: int = 0) -> tuple[Tensor, Tensor]:
    """The masks our ``Transformer`` builds from the ids (True = may attend).

    Returns ``(src_mask, tgt_mask)``: (B, 1, 1, S) padding mask of the source (used by the
    encoder's self-attention and by the decoder's cross-attention) and (B, 1, T, T)
    causal-and-padding mask of the decoder's self-attention.
    """
    tgt = batch.tgt_in
    return padding_mask(batch.src, pad_id), combine_masks(
        padding_mask(tgt, pad_id), causal_mask(tgt.size(1), device=tgt.device)
    )


# ---------------------------------------------------------------------------------------
# The main task: Spanish words -> English words
# ---------------------------------------------------------------------------------------


class NumberTranslation:
    """Numbers spelled in Spanish → the same numbers spelled in English.

    Held-out numbers are drawn uniformly per number of digits (stratum): from the d-digit
    numbers, validation and test each take ``min(held_out_per_length, count // 10)``, so both
    hold 9 two-digit, 90 three-digit and ``held_out_per_length`` numbers of 4, 5 and 6
    digits. Numbers written with a single Spanish word (0 to 30, the tens, 100, the
    hundreds, 1000) are never held out: they are the task's dictionary ("cero" occurs in no
    other number; "mil" alone is the only number that ends right after its first word).

    Training batches draw fresh numbers (:meth:`draw`), rejecting held-out ones: a length of
    d digits with probability ``TRAIN_LENGTH_WEIGHTS``, then either a uniform d-digit number
    or, with probability ``SPARSE``, one whose non-leading digits are each set to 0 with
    probability 1/2 (21 000, 100 300, 7 005, …). Uniform numbers alone would almost never
    end in "mil" or hold "cien mil", and the model would not learn where such numbers stop.
    Everything is deterministic under ``seed``.

    Args:
        seed: seed of the split and of the training sampler.
        held_out_per_length: size cap of the validation and test strata.
    """

    TRAIN_LENGTH_WEIGHTS = (0.02, 0.06, 0.16, 0.22, 0.26, 0.28)  # 1..6 digits
    SPARSE = 0.5  # share of numbers with digits set to 0 at random

    def __init__(self, seed: int = 0, held_out_per_length: int = 300):
        self.seed = seed
        self.src_vocab = Vocab(number_words("es"))
        self.tgt_vocab = Vocab(number_words("en"))
        rng = random.Random(seed)
        self.splits: dict[str, list[int]] = {"val": [], "test": []}
        for d in range(2, 7):
            lo, hi = 10 ** (d - 1), 10**d
            k = min(held_out_per_length, (hi - lo) // 10)
            picked: list[int] = []
            while len(picked) < 2 * k:
                n = rng.randrange(lo, hi)
                if n not in picked and " " in spell_number(n, "es"):  # one-word numbers stay in training
                    picked.append(n)
            self.splits["val"] += sorted(picked[:k])
            self.splits["test"] += sorted(picked[k:])
        self.held_out = frozenset(self.splits["val"]) | frozenset(self.splits["test"])
        self._train_rng = random.Random(f"train-{seed}")

    def __repr__(self) -> str:
        return (
            f"NumberTranslation(seed={self.seed}, val={len(self.splits['val'])}, "
            f"test={len(self.splits['test'])}, V_src={len(self.src_vocab)}, "
            f"V_tgt={len(self.tgt_vocab)})"
        )

    @classmethod
    def draw(cls, d: int, rng: random.Random) -> int:
        """A number of ``d`` digits (1 ≤ d ≤ 6; for d = 1 also 0) from the task's distribution."""
        if d == 1:
            return rng.randrange(0, 10)
        n = rng.randrange(10 ** (d - 1), 10**d)
        if rng.random() < cls.SPARSE:
            digits = [c if i == 0 or rng.random() < 0.5 else "0" for i, c in enumerate(str(n))]
            n = int("".join(digits))
        return n

    def is_train(self, n: int) -> bool:
        """True for the numbers training may use."""
        return 0 <= n < MAX_NUMBER and n not in self.held_out

    def sample_train(self, k: int, rng: random.Random | None = None) -> list[int]:
        """``k`` training numbers (fresh at every call; the sampler's own seeded RNG by default)."""
        rng = rng or self._train_rng
        out = []
        while len(out) < k:
            d = rng.choices(range(1, 7), weights=self.TRAIN_LENGTH_WEIGHTS)[0]
            n = self.draw(d, rng)
            if n not in self.held_out:
                out.append(n)
        return out

    def encode_pair(self, n: int) -> tuple[list[int], list[int]]:
        """Source and target ids of ``n`` (no specials)."""
        return (self.src_vocab.encode(spell_number(n, "es")), self.tgt_vocab.encode(spell_number(n, "en")))

    def batch(self, numbers: Sequence[int]) -> Batch:
        """A padded batch of the given numbers."""
        pairs = [self.encode_pair(n) for n in numbers]
        return make_batch([p[0] for p in pairs], [p[1] for p in pairs])

    def train_batch(self, batch_size: int) -> Batch:
        """A batch of fresh training numbers."""
        return self.batch(self.sample_train(batch_size))

    def source(self, numbers: Sequence[int]) -> Tensor:
        """Padded Spanish ids of ``numbers``. Shapes: -> (B, S)."""
        return pad_sequences([self.src_vocab.encode(spell_number(n, "es")) for n in numbers])


# ---------------------------------------------------------------------------------------
# The sanity task: reverse a sequence of digits
# ---------------------------------------------------------------------------------------


class ReverseDigits:
    """Digit sequences of length ``min_len``..``max_len`` → the same digits reversed.

    Source and target share one vocabulary: the specials and the digits "0".."9".
    There are 10^L sequences of length L: the long ones almost never repeat, the short ones do.
    """

    def __init__(self, min_len: int = 1, max_len: int = 8, seed: int = 0):
        if not 1 <= min_len <= max_len:
            raise error(
                f"hace falta 1 ≤ min_len ≤ max_len, no {min_len}, {max_len}",
                f"need 1 ≤ min_len ≤ max_len, got {min_len}, {max_len}",
            )
        self.min_len, self.max_len = min_len, max_len
        self.vocab = Vocab(str(d) for d in range(10))
        self.src_vocab = self.tgt_vocab = self.vocab
        self.rng = random.Random(f"reverse-{seed}")

    def sample(self, k: int) -> list[list[str]]:
        """``k`` random digit sequences."""
        return [
            [str(self.rng.randrange(10)) for _ in range(self.rng.randint(self.min_len, self.max_len))] for _ in range(k)
        ]

    def batch_of(self, seqs: Sequence[Sequence[str]]) -> Batch:
        """The batch that reverses the given sequences."""
        return make_batch([self.vocab.encode(s) for s in seqs], [self.vocab.encode(s[::-1]) for s in seqs])

    def train_batch(self, batch_size: int) -> Batch:
        """A batch of fresh random sequences."""
        return self.batch_of(self.sample(batch_size))
