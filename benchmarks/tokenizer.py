"""Speed benchmark: the package's byte-level BPE against Hugging Face ``tokenizers``.

Both learn the same merges on the course's prose (Spanish and English) and give the same ids
(the script checks it). It prints, for each case, the best of ``--repeats`` times and the
ratio ours/``tokenizers``:

- training on the course's prose up to ``--size`` tokens (bound: 1.5×);
- encoding one long word without spaces (``--letters`` letters, one piece for both), of random
  letters and of the held-out prose's letters run together (bound: 3×). The encoder merges by
  rank with a priority queue, O(n log n); merging pass after pass was O(n × merges).

Training is timed on the wall clock (``tokenizers`` trains on several threads); encoding, on one
thread for both, in CPU time (``process_time``), which other work on the machine disturbs less.
It exits with status 1 when a ratio is above its bound.

    python benchmarks/tokenizer.py
    python benchmarks/tokenizer.py --size 2000 --letters 5000 --repeats 3
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections.abc import Callable, Sequence

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from minitransformer.course.prose import prose
from minitransformer.tokenizer import train_bpe

BOUNDS = {"train": 1.5, "encode": 3.0}


def hf_train(text: str, vocab_size: int, special_tokens: Sequence[str] = ()) -> Tokenizer:
    """``tokenizers``' byte-level BPE set up as the package's (no prefix space, the 256 bytes first); with
    ``special_tokens``, trained on the text cut at them and with them added after the merges."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(special_tokens),
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    cut = "|".join(re.escape(s) for s in sorted(special_tokens, key=len, reverse=True))
    tok.train_from_iterator(re.split(cut, text) if cut else [text], trainer=trainer)
    if special_tokens:
        tok.add_special_tokens(list(special_tokens))
    return tok


def best(fns: list[Callable[[], object]], repeats: int, clock: Callable[[], float]) -> list[float]:
    """The shortest of ``repeats`` times of each of ``fns``, taken in turn (so that a busy moment
    slows them all), in seconds of ``clock``."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, kept in zip(fns, times):
            start = clock()
            fn()
            kept.append(clock() - start)
    return [min(kept) for kept in times]


def long_words(letters: int) -> dict[str, str]:
    rng = random.Random(0)
    held_out = "".join(c for c in prose("es", "test") + prose("en", "test") if c.isalpha())
    return {
        "random letters": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(letters)),
        "prose's letters": (held_out * (letters // len(held_out) + 1))[:letters],
    }


def measure(size: int, letters: int, repeats: int, chars: int | None = None) -> list[tuple[str, float, float]]:
    """``(case, ours in s, tokenizers' in s)`` for training and for each long word."""
    text = prose("es", "train") + "\n\n" + prose("en", "train")
    text = text[:chars] if chars else text
    ours, theirs = train_bpe(text, size), hf_train(text, size)
    rows = [("train", *best([lambda: train_bpe(text, size), lambda: hf_train(text, size)], repeats, time.perf_counter))]
    for name, word in long_words(letters).items():
        if ours.encode(word) != theirs.encode(word).ids:
            raise SystemExit(f"different ids for the {name} word")
        fns = [lambda w=word: ours.encode(w), lambda w=word: theirs.encode(w).ids]
        rows.append((f"encode {letters} {name}", *best(fns, repeats, time.process_time)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=8000, help="vocabulary size (default 8000)")
    parser.add_argument("--letters", type=int, default=20_000, help="letters of the long word (default 20000)")
    parser.add_argument("--repeats", type=int, default=7, help="times each case runs; the best counts (default 7)")
    parser.add_argument("--chars", type=int, default=None, help="train on only the first CHARS characters")
    args = parser.parse_args(argv)
    status = 0
    print(f"{'case':<36} {'ours (ms)':>10} {'tokenizers':>11} {'ratio':>7} {'bound':>6}")
    for case, ours_s, theirs_s in measure(args.size, args.letters, args.repeats, args.chars):
        bound = BOUNDS[case.split()[0]]
        ratio = ours_s / theirs_s
        status |= ratio > bound
        print(f"{case:<36} {ours_s * 1e3:>10.2f} {theirs_s * 1e3:>11.2f} {ratio:>6.2f}× {bound:>5.1f}×")
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
