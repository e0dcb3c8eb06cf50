"""The checkers of notebook 11 accept the worked solutions and reject, without crashing, the
wrong answers students write, naming the mistake in both languages."""

from __future__ import annotations

import pytest
from feedback_asserts import assert_correct, assert_rejected

from minitransformer.course.prose import prose
from minitransformer.exercises.solutions.nb11 import solution_my_decode_stream, solution_my_encode, solution_my_viterbi
from minitransformer.exercises.tokens import (
    check_decode_stream,
    check_encode,
    check_viterbi,
)
from minitransformer.tokenizer import BYTE_ID, pretokenize, train_bpe

LANGS = ["es", "en"]


def merge_pair(ids, pair, new_id):
    """One merge, as notebook 11 writes it by hand: every ``pair``, left to right, becomes ``new_id``."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@pytest.mark.parametrize("lang", LANGS)
def test_encode_accepts_another_right_answer(lang):
    """The lowest-rank pair merged first, as tokenizers does: right is right."""

    def encode_by_rank(word, merges):  # the lowest-rank pair first, as tokenizers does
        ids = [BYTE_ID[b] for b in word.encode()]
        rank = {pair: (r, new) for r, (pair, new) in enumerate(merges)}
        while len(ids) > 1:
            pair = min(zip(ids, ids[1:]), key=lambda p: rank.get(p, (len(rank),))[0])
            if pair not in rank:
                break
            ids = merge_pair(ids, pair, rank[pair][1])
        return ids

    assert_correct(check_encode(encode_by_rank, lang=lang), lang)


# --- decode stream: right answers, and realistic wrong ones -----------------------------------------


def decode_stream_by_masks(token_bytes):
    """Another right answer: the lead byte's length read with masks, the pieces as a tuple."""
    out, buf = [], b""
    for tok in token_bytes:
        buf += tok
        keep = 0
        for k in (1, 2, 3):
            if len(buf) >= k:
                b = buf[-k]
                if b & 0xC0 == 0x80:
                    continue
                length = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
                keep = k if length > k else 0
            break
        ready, buf = (buf[: len(buf) - keep], buf[len(buf) - keep :]) if keep else (buf, b"")
        out.append(ready.decode("utf-8", errors="replace"))
    return (*out, buf.decode("utf-8", errors="replace"))


def stream_each_token(token_bytes):
    return [t.decode("utf-8", errors="replace") for t in token_bytes] + [""]


def stream_each_token_no_end(token_bytes):
    return [t.decode("utf-8", "replace") for t in token_bytes]


def stream_ignoring(token_bytes):
    pieces = []
    for t in token_bytes:
        pieces.append(t.decode("utf-8", errors="ignore"))
    pieces.append("")
    return pieces


def _cut(buf):
    """Where an incomplete last character starts, by the lead-byte rule (the students' own helper)."""
    for k in range(1, min(3, len(buf)) + 1):
        b = buf[-k]
        if 0x80 <= b < 0xC0:
            continue
        n = 1 if b >= 0xF8 else 4 if b >= 0xF0 else 3 if b >= 0xE0 else 2 if b >= 0xC0 else 1
        return len(buf) - k if n > k else len(buf)
    return len(buf)


def stream_holding_one_lead_byte(token_bytes):
    """Holds back a lead byte at the end, alone: enough for ñ, not for € or 🙂."""
    out, rest = [], b""
    for tok in token_bytes:
        data = rest + tok
        if data and data[-1] >= 0xC0:
            data, rest = data[:-1], data[-1:]
        else:
            rest = b""
        out.append(data.decode("utf-8", errors="replace"))
    out.append(rest.decode("utf-8", errors="replace"))
    return out


def stream_holding_one_byte_on_error(token_bytes):
    out, rest = [], b""
    for tok in token_bytes:
        data = rest + tok
        try:
            out.append(data.decode("utf-8"))
            rest = b""
        except UnicodeDecodeError:
            out.append(data[:-1].decode("utf-8", errors="replace"))
            rest = data[-1:]
    out.append(rest.decode("utf-8", errors="replace"))
    return out


def stream_text_so_far(token_bytes):
    out, seen = [], b""
    for tok in token_bytes:
        seen += tok
        out.append(seen[: _cut(seen)].decode("utf-8", errors="replace"))
    out.append(seen.decode("utf-8", errors="replace"))
    return out


def stream_text_so_far_ignoring(token_bytes):
    out, seen = [], b""
    for tok in token_bytes:
        seen += tok
        out.append(seen.decode("utf-8", errors="ignore"))
    return out + [""]


def stream_never_flushing(token_bytes):
    out, buf = [], b""
    for tok in token_bytes:
        buf += tok
        k = _cut(buf)
        out.append(buf[:k].decode("utf-8", errors="replace"))
        buf = buf[k:]
    return out


def stream_flushing_an_empty_text(token_bytes):
    return stream_never_flushing(token_bytes) + [""]


def stream_flush_in_the_last_piece(token_bytes):
    out, buf = [], b""
    for tok in token_bytes:
        buf += tok
        k = _cut(buf)
        out.append(buf[:k].decode("utf-8", errors="replace"))
        buf = buf[k:]
    if out:
        out[-1] += buf.decode("utf-8", errors="replace")
    return out


def stream_until_it_decodes(token_bytes):
    out, pending = [], b""
    for tok in token_bytes:
        pending += tok
        try:
            out.append(pending.decode("utf-8"))
            pending = b""
        except UnicodeDecodeError:
            out.append("")
    out.append(pending.decode("utf-8", errors="replace"))
    return out


def stream_up_to_the_error(token_bytes):
    out, pending = [], b""
    for tok in token_bytes:
        pending += tok
        try:
            out.append(pending.decode("utf-8"))
            pending = b""
        except UnicodeDecodeError as error:
            out.append(pending[: error.start].decode("utf-8"))
            pending = pending[error.start :]
    out.append(pending.decode("utf-8", errors="replace"))
    return out


def stream_until_ascii(token_bytes):
    """Non-ASCII bytes at the end may be half a character: all of them wait for an ASCII byte."""
    out, buf = [], b""
    for tok in token_bytes:
        buf += tok
        k = len(buf)
        while k > 0 and buf[k - 1] >= 0x80:
            k -= 1
        out.append(buf[:k].decode("utf-8", errors="replace"))
        buf = buf[k:]
    out.append(buf.decode("utf-8", errors="replace"))
    return out


def stream_any_high_byte_is_a_lead(token_bytes):
    out, buf = [], b""
    for tok in token_bytes:
        buf += tok
        k = len(buf)
        for back in range(1, min(4, len(buf)) + 1):
            if buf[-back] >= 0x80:  # the start of a multi-byte character (so the student thinks)
                size = 2 if buf[-back] < 0xE0 else 3 if buf[-back] < 0xF0 else 4
                if size > back:
                    k = len(buf) - back
                break
        out.append(buf[:k].decode("utf-8", errors="replace"))
        buf = buf[k:]
    out.append(buf.decode("utf-8", errors="replace"))
    return out


def stream_ff_starts_four(token_bytes):
    """Every byte from 0xF0 up taken for the lead of four bytes, 0xFF too (it starts no character)."""
    out, buf = [], b""
    for tok in token_bytes:
        buf += tok
        k = len(buf)
        for back in range(1, min(3, len(buf)) + 1):
            b = buf[-back]
            if b >> 6 == 0b10:
                continue
            size = 4 if b >= 0xF0 else 3 if b >= 0xE0 else 2 if b >= 0xC0 else 1
            if size > back:
                k = len(buf) - back
            break
        out.append(buf[:k].decode("utf-8", errors="replace"))
        buf = buf[k:]
    out.append(buf.decode("utf-8", errors="replace"))
    return out


def stream_with_incremental_decoder(token_bytes):
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    return [decoder.decode(t) for t in token_bytes] + [decoder.decode(b"", final=True)]


def stream_with_iterdecode(token_bytes):
    import codecs

    return list(codecs.iterdecode(token_bytes, "utf-8", errors="replace")) + [""]


def stream_with_utf_8_decode(token_bytes):
    import codecs

    out, buf = [], b""
    for tok in token_bytes:
        text, used = codecs.utf_8_decode(buf + tok, "replace", False)
        out.append(text)
        buf = (buf + tok)[used:]
    return out + [buf.decode("utf-8", errors="replace")]


BYTES_ONLY = train_bpe("", 256)  # built before the check: the package's decoder is still refused


def stream_with_package(token_bytes):
    decoder = BYTES_ONLY.stream_decoder()
    out = [decoder.feed([BYTE_ID[b] for b in t]) for t in token_bytes]
    return out + [decoder.flush()]


def stream_popping_tokens(token_bytes):
    out, buf = [], b""
    while token_bytes:
        buf += token_bytes.pop(0)
        k = _cut(buf)
        out.append(buf[:k].decode("utf-8", errors="replace"))
        buf = buf[k:]
    return out + [buf.decode("utf-8", errors="replace")]


def stream_as_bytes(token_bytes):
    return [*token_bytes, b""]


def stream_as_one_text(token_bytes):
    return b"".join(token_bytes).decode("utf-8", errors="replace")


def stream_first_token_always(token_bytes):
    """Crashes on the empty list, every earlier case right: the crash is what the student sees."""
    first = token_bytes[0]
    return solution_my_decode_stream([first, *token_bytes[1:]])


def stream_dropping_spaces(token_bytes):
    return [p.replace(" ", "") for p in solution_my_decode_stream(token_bytes)]


def stream_one_step_late(token_bytes):
    right = solution_my_decode_stream(token_bytes)
    return ["", *right[:-2], right[-2] + right[-1]] if len(right) > 1 else right


STREAM_WRONG = [
    (stream_each_token, "token_by_token"),
    (stream_each_token_no_end, "token_by_token"),
    (stream_ignoring, "ignores_errors"),
    (stream_holding_one_lead_byte, "holds_one_byte"),
    (stream_holding_one_byte_on_error, "holds_one_byte"),
    (stream_text_so_far, "cumulative"),
    (stream_text_so_far_ignoring, "cumulative"),
    (stream_never_flushing, "no_flush"),
    (stream_flushing_an_empty_text, "no_flush"),
    (stream_flush_in_the_last_piece, "flush_in_last"),
    (stream_until_it_decodes, "holds_invalid"),
    (stream_up_to_the_error, "holds_invalid"),
    (stream_until_ascii, "non_ascii_held"),
    (stream_any_high_byte_is_a_lead, "continuation_as_lead"),
    (stream_ff_starts_four, "not_a_lead"),
    (stream_with_incremental_decoder, "forbidden"),
    (stream_with_iterdecode, "forbidden"),
    (stream_with_utf_8_decode, "forbidden"),
    (stream_with_package, "forbidden"),
    (stream_popping_tokens, "mutates"),
    (stream_as_bytes, "stream_bytes"),
    (stream_as_one_text, "stream_one_text"),
    (stream_first_token_always, "crashed"),
    (stream_dropping_spaces, "stream_text"),
    (stream_one_step_late, "stream_timing"),
]


@pytest.mark.parametrize("lang", LANGS)
def test_decode_stream_accepts_other_right_answers(lang):
    assert_correct(check_decode_stream(decode_stream_by_masks, lang=lang), lang)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer, hint", STREAM_WRONG, ids=lambda x: getattr(x, "__name__", None))
def test_decode_stream_rejects_wrong_answers(lang, answer, hint):
    assert_rejected(check_decode_stream(answer, lang=lang), lang, hint)


@pytest.mark.parametrize("lang", LANGS)
def test_decode_stream_names_the_forbidden_tool(lang):
    for answer, tool in [
        (stream_with_incremental_decoder, "codecs.getincrementaldecoder"),
        (stream_with_iterdecode, "codecs.iterdecode"),
        (stream_with_utf_8_decode, "codecs.utf_8_decode"),
        (stream_with_package, "stream_decoder"),
    ]:
        assert f"`{tool}`" in check_decode_stream(answer, lang=lang).message


@pytest.mark.parametrize("lang", LANGS)
def test_decode_stream_junk_gets_clear_feedback(lang):
    """None, a text instead of a list, a list of other things, a crash: each its own reply."""
    for junk, key in [
        (None, "returns_none"),
        ("el año", "stream_one_text"),
        ({"a": "b"}, "stream_not_list"),
        ([1, 2, 3], "stream_not_list"),
        ([None, "a"], "stream_not_list"),
        (["a"], "stream_count"),
    ]:
        assert_rejected(check_decode_stream(lambda token_bytes, junk=junk: junk, lang=lang), lang, key)

    def crashes(token_bytes):
        return token_bytes.decode()  # a list has no decode

    fb = check_decode_stream(crashes, lang=lang)
    assert fb.hint == "crashed" and "AttributeError" in fb.message


def test_the_exercise_is_the_notebooks_stream_decoder():
    """The worked answer, on the bytes of a tokenizer's tokens, gives what stream_decoder gives fed id by id."""
    tok = train_bpe("¿el año? ¿y el niño? 🙂 el ñandú, 5 €", 256 + 20)
    for text in ["¿año? 🙂", "el ñandú cuesta 5 €", "", "abc", "🙂🙂 ñ"]:
        ids = tok.encode(text)
        decoder = tok.stream_decoder()
        streamed = [decoder.feed(i) for i in ids] + [decoder.flush()]
        assert solution_my_decode_stream(tok.token_bytes(ids)) == streamed
        assert "".join(streamed) == text


def test_decode_stream_forbidden_tools_work_again_after_a_check():
    import codecs

    for answer, _ in STREAM_WRONG:
        check_decode_stream(answer, lang="en")
    assert codecs.getincrementaldecoder("utf-8")("replace").decode(b"\xc3") == ""
    assert list(codecs.iterdecode([b"\xc3", b"\xb1"], "utf-8")) == ["ñ"]
    assert codecs.utf_8_decode(b"a\xc3", "strict", False) == ("a", 1)
    decoder = BYTES_ONLY.stream_decoder()
    assert decoder.feed([BYTE_ID[0xC3]]) == "" and decoder.feed([BYTE_ID[0xB1]]) == "ñ"


# --- viterbi: right answers written otherwise, and realistic wrong ones ------------------------------


def viterbi_top_down(text, log_prob):
    """Another right answer: the best split of each suffix, remembered (recursion with a cache)."""
    import functools

    longest = max(map(len, log_prob))

    @functools.cache
    def best(i):  # (score, pieces) of text[i:]
        if i == len(text):
            return 0.0, ()
        found = (float("-inf"), ())
        for j in range(i + 1, min(len(text), i + longest) + 1):
            if text[i:j] in log_prob:
                score, rest = best(j)
                if log_prob[text[i:j]] + score > found[0]:
                    found = (log_prob[text[i:j]] + score, (text[i:j], *rest))
        return found

    return list(best(0)[1])


def viterbi_with_dicts(text, log_prob):
    """Another right answer: dictionaries keyed by position, math.inf, a tuple returned."""
    import math

    best, came_from = {0: 0.0}, {}
    for end in range(1, len(text) + 1):
        best[end] = -math.inf
        for start in range(end):
            piece = text[start:end]
            if piece in log_prob and best[start] + log_prob[piece] > best[end]:
                best[end], came_from[end] = best[start] + log_prob[piece], start
    out, end = [], len(text)
    while end:
        out.insert(0, text[came_from[end] : end])
        end = came_from[end]
    return tuple(out)


@pytest.mark.parametrize("lang", LANGS)
def test_viterbi_accepts_other_right_answers(lang):
    for answer in (solution_my_viterbi, viterbi_top_down, viterbi_with_dicts):
        assert_correct(check_viterbi(answer, lang=lang), lang)


def _dp(text, log_prob, start=0.0, worst=float("-inf"), piece_score=None, keep=None, combine=None):
    """The loop most answers share, written once for the wrong ones below (each states what it changes)."""
    piece_score = piece_score or (lambda piece: log_prob[piece])
    keep = keep or (lambda candidate, best: candidate > best)
    combine = combine or (lambda a, b: a + b)
    n = len(text)
    best, back = [start] + [worst] * n, [None] * (n + 1)
    for i in range(1, n + 1):
        for j in range(i):
            if text[j:i] in log_prob and (j == 0 or back[j] is not None):
                candidate = combine(best[j], piece_score(text[j:i]))
                if keep(candidate, best[i]):
                    best[i], back[i] = candidate, j
    pieces, i = [], n
    while i > 0:
        pieces.append(text[back[i] : i])
        i = back[i]
    return pieces[::-1]


def viterbi_longest_first(text, log_prob):
    """As WordPiece encodes: the longest piece of the vocabulary that starts here."""
    pieces, start = [], 0
    while start < len(text):
        end = len(text)
        while text[start:end] not in log_prob:
            end -= 1
        pieces.append(text[start:end])
        start = end
    return pieces


def viterbi_greedy(text, log_prob):
    pieces, start = [], 0
    while start < len(text):
        options = [text[start:end] for end in range(start + 1, len(text) + 1) if text[start:end] in log_prob]
        piece = max(options, key=lambda p: log_prob[p])
        pieces.append(piece)
        start += len(piece)
    return pieces


def viterbi_min(text, log_prob):
    return _dp(text, log_prob, worst=float("inf"), keep=lambda candidate, best: candidate < best)


def viterbi_adds_probabilities(text, log_prob):
    import math

    return _dp(text, log_prob, piece_score=lambda piece: math.exp(log_prob[piece]))


def viterbi_fewest(text, log_prob):
    """Breadth-first: the split with the fewest pieces."""
    from collections import deque

    came_from, queue = {0: None}, deque([0])
    while queue:
        i = queue.popleft()
        for j in range(i + 1, len(text) + 1):
            if text[i:j] in log_prob and j not in came_from:
                came_from[j] = i
                queue.append(j)
    pieces, j = [], len(text)
    while j:
        pieces.append(text[came_from[j] : j])
        j = came_from[j]
    return pieces[::-1]


def viterbi_backtracks_by_the_best_piece(text, log_prob):
    best = [0.0] + [float("-inf")] * len(text)
    for i in range(1, len(text) + 1):
        for j in range(i):
            if text[j:i] in log_prob:
                best[i] = max(best[i], best[j] + log_prob[text[j:i]])
    pieces, i = [], len(text)
    while i > 0:  # the most probable last piece, whatever came before it
        j = max((j for j in range(i) if text[j:i] in log_prob), key=lambda j: log_prob[text[j:i]])
        pieces.append(text[j:i])
        i = j
    return pieces[::-1]


def viterbi_not_reversed(text, log_prob):
    return solution_my_viterbi(text, log_prob)[::-1]


def viterbi_get_zero(text, log_prob):
    n = len(text)
    best, back = [0.0] + [float("-inf")] * n, [0] * (n + 1)
    for i in range(1, n + 1):
        for j in range(i):
            score = best[j] + log_prob.get(text[j:i], 0)
            if score > best[i]:
                best[i], back[i] = score, j
    pieces, i = [], n
    while i > 0:
        pieces.append(text[back[i] : i])
        i = back[i]
    return pieces[::-1]


def viterbi_short_pieces(text, log_prob):
    """Only pieces of up to 6 characters: "tokens are short"."""
    n = len(text)
    best, back = [0.0] + [float("-inf")] * n, [0] * (n + 1)
    for i in range(1, n + 1):
        for j in range(max(0, i - 6), i):
            if text[j:i] in log_prob and best[j] + log_prob[text[j:i]] > best[i]:
                best[i], back[i] = best[j] + log_prob[text[j:i]], j
    pieces, i = [], n
    while i > 0:
        pieces.append(text[back[i] : i])
        i = back[i]
    return pieces[::-1]


def viterbi_multiplies(text, log_prob):
    """Probabilities multiplied: once the product is 0.0, nothing beats 0.0 and back[i] stays None."""
    import math

    return _dp(
        text, log_prob, start=1.0, worst=0.0, piece_score=lambda p: math.exp(log_prob[p]), combine=lambda a, b: a * b
    )


def viterbi_multiplies_from_minus_one(text, log_prob):
    import math

    n = len(text)
    best, back = [1.0] + [-1.0] * n, [0] * (n + 1)
    for i in range(1, n + 1):
        for j in range(i):
            if text[j:i] in log_prob and best[j] * math.exp(log_prob[text[j:i]]) > best[i]:
                best[i], back[i] = best[j] * math.exp(log_prob[text[j:i]]), j
    pieces, i = [], n
    while i > 0:
        pieces.append(text[back[i] : i])
        i = back[i]
    return pieces[::-1]


def viterbi_misses_the_end(text, log_prob):
    """The loop over the ends stops one early: the last position is never reached."""
    n = len(text)
    best, back = [0.0] + [float("-inf")] * n, [0] * (n + 1)
    for i in range(1, n):
        for j in range(i):
            if text[j:i] in log_prob and best[j] + log_prob[text[j:i]] > best[i]:
                best[i], back[i] = best[j] + log_prob[text[j:i]], j
    pieces, i = [], n
    while i > 0:
        pieces.append(text[back[i] : i])
        i = back[i]
    return pieces[::-1]


def viterbi_with_score(text, log_prob):
    pieces = solution_my_viterbi(text, log_prob)
    return pieces, sum(log_prob[p] for p in pieces)


def viterbi_joined(text, log_prob):
    return " ".join(solution_my_viterbi(text, log_prob))


def viterbi_cuts(text, log_prob):
    """Where each piece starts, not the pieces."""
    starts, at = [], 0
    for piece in solution_my_viterbi(text, log_prob):
        starts.append(at)
        at += len(piece)
    return starts


def viterbi_pops(text, log_prob):
    """Takes the pieces out of the vocabulary as it goes."""
    pieces = solution_my_viterbi(text, log_prob)
    for piece in pieces:
        log_prob.pop(piece, None)
    return pieces


def viterbi_with_tokenizers(text, log_prob):
    from tokenizers import Tokenizer, models

    return Tokenizer(models.Unigram(list(log_prob.items()), unk_id=None)).encode(text).tokens


def viterbi_with_package(text, log_prob):
    from minitransformer.tokenizer import viterbi_split

    return viterbi_split(text, log_prob)


def viterbi_without_vocabulary_check(text, log_prob):
    n = len(text)
    best, back = [0.0] + [float("-inf")] * n, [0] * (n + 1)
    for i in range(1, n + 1):
        for j in range(i):
            if best[j] + log_prob[text[j:i]] > best[i]:  # a piece that is not there: KeyError
                best[i], back[i] = best[j] + log_prob[text[j:i]], j
    pieces, i = [], n
    while i > 0:
        pieces.append(text[back[i] : i])
        i = back[i]
    return pieces[::-1]


VITERBI_WRONG = [
    (viterbi_longest_first, "longest_first"),
    (viterbi_greedy, "greedy_best"),
    (viterbi_min, "minimises"),
    (viterbi_adds_probabilities, "adds_probs"),
    (viterbi_fewest, "fewest_pieces"),
    (viterbi_backtracks_by_the_best_piece, "backtrack"),
    (viterbi_not_reversed, "split_reversed"),
    (viterbi_get_zero, "unknown_zero"),
    (viterbi_short_pieces, "short_pieces"),
    (viterbi_multiplies, "product_underflow"),
    (viterbi_multiplies_from_minus_one, "product_underflow"),
    (viterbi_misses_the_end, "misses_end"),
    (viterbi_with_score, "with_score"),
    (viterbi_joined, "split_not_list"),
    (viterbi_cuts, "split_not_list"),
    (viterbi_pops, "mutates"),
    (viterbi_with_tokenizers, "forbidden"),
    (viterbi_with_package, "forbidden"),
    (viterbi_without_vocabulary_check, "crashed"),
]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer, hint", VITERBI_WRONG, ids=lambda x: getattr(x, "__name__", None))
def test_viterbi_rejects_wrong_answers(lang, answer, hint):
    assert_rejected(check_viterbi(answer, lang=lang), lang, hint)


def test_viterbi_cases_have_one_best_split_and_the_long_one_underflows():
    """Each case's best split beats the next best by more than float noise (a right answer summing in another order
    is still right), and the long text's best split has a probability no float holds."""
    import math

    from minitransformer.exercises.tokens import _viterbi_cases
    from minitransformer.tokenizer import viterbi_split

    for text, log_prob in _viterbi_cases():
        scores = [[0.0]] + [[] for _ in text]  # the two best scores of each prefix
        for i in range(1, len(text) + 1):
            found = [s + log_prob[text[j:i]] for j in range(i) if text[j:i] in log_prob for s in scores[j]]
            scores[i] = sorted(found, reverse=True)[:2]
        best = viterbi_split(text, log_prob)
        assert math.isclose(sum(log_prob[p] for p in best), scores[-1][0])
        assert len(scores[-1]) < 2 or scores[-1][0] - scores[-1][1] > 1e-3, text
    text, log_prob = _viterbi_cases()[-1]
    assert math.prod(math.exp(log_prob[p]) for p in viterbi_split(text, log_prob)) == 0.0


def test_viterbi_forbidden_tools_work_again_after_a_check():
    from tokenizers import Tokenizer, models

    from minitransformer.tokenizer import viterbi_split

    for answer, _ in VITERBI_WRONG:
        check_viterbi(answer, lang="en")
    assert viterbi_split("ab", {"a": -1.0, "b": -1.0, "ab": -3.0}) == ["a", "b"]
    assert Tokenizer(models.Unigram([("a", -1.0), ("b", -1.0)], unk_id=None)).encode("ab").tokens == ["a", "b"]


# --- encode: realistic wrong answers ------------------------------------------------------------


def _apply(ids, merges, step=merge_pair):
    for pair, new_id in merges:
        ids = step(ids, pair, new_id)
    return ids


def encode_code_points(word, merges):
    return _apply([BYTE_ID[ord(c)] for c in word], merges)


def encode_raw_bytes(word, merges):
    return _apply(list(word.encode("utf-8")), merges)


def encode_reverse_order(word, merges):
    return _apply([BYTE_ID[b] for b in word.encode()], merges[::-1])


def encode_leftmost_first(word, merges):
    ids, table = [BYTE_ID[b] for b in word.encode()], dict(merges)
    changed = True
    while changed:
        changed = False
        for i in range(len(ids) - 1):
            if (ids[i], ids[i + 1]) in table:
                ids[i : i + 2] = [table[(ids[i], ids[i + 1])]]
                changed = True
                break
    return ids


def encode_longest_match(word, merges):
    """WordPiece's greedy longest match over the tokens the merges build."""
    vocab = {bytes([b]): BYTE_ID[b] for b in range(256)}
    by_id = {i: b for b, i in vocab.items()}
    for (a, b), new_id in merges:
        by_id[new_id] = by_id[a] + by_id[b]
        vocab[by_id[new_id]] = new_id
    data, ids, i = word.encode(), [], 0
    while i < len(data):
        j = len(data)
        while data[i:j] not in vocab:
            j -= 1
        ids.append(vocab[data[i:j]])
        i = j
    return ids


def merge_first_only(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == pair:
            return ids[:i] + [new_id] + ids[i + 2 :]
    return ids


def merge_right_to_left(ids, pair, new_id):
    out, i = [], len(ids) - 1
    while i >= 0:
        if i > 0 and (ids[i - 1], ids[i]) == pair:
            out.insert(0, new_id)
            i -= 2
        else:
            out.insert(0, ids[i])
            i -= 1
    return out


def encode_first_occurrence(word, merges):
    return _apply([BYTE_ID[b] for b in word.encode()], merges, merge_first_only)


def encode_right_to_left(word, merges):
    return _apply([BYTE_ID[b] for b in word.encode()], merges, merge_right_to_left)


def encode_latest_first(word, merges):
    """The pair of the merge learned last goes first."""
    ids, rank = [BYTE_ID[b] for b in word.encode()], {pair: r for r, (pair, _) in enumerate(merges)}
    table = dict(merges)
    while present := [p for p in zip(ids, ids[1:]) if p in table]:
        pair = max(present, key=rank.get)
        ids = merge_pair(ids, pair, table[pair])
    return ids


def encode_forgets_the_result(word, merges):
    ids = [BYTE_ID[b] for b in word.encode()]
    for pair, new_id in merges:
        merge_pair(ids, pair, new_id)  # the merged list is thrown away
    return ids


def encode_pieces(word, merges):
    return list(word)


def encode_bytes_tokens(word, merges):
    return [bytes([b]) for b in word.encode()]


ENCODE_WRONG = [
    (encode_code_points, "code_points"),
    (encode_raw_bytes, "raw_bytes"),
    (encode_reverse_order, "reverse_order"),
    (encode_leftmost_first, "by_position"),
    (encode_longest_match, "by_position"),
    (encode_first_occurrence, "encode_first_only"),
    (encode_right_to_left, "encode_right_to_left"),
    (encode_latest_first, "reverse_order"),
    (encode_forgets_the_result, "unmerged"),
    (encode_pieces, "strings"),
    (encode_bytes_tokens, "strings"),
]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer, hint", ENCODE_WRONG, ids=lambda x: getattr(x, "__name__", None))
def test_encode_rejects_wrong_answers(lang, answer, hint):
    assert_rejected(check_encode(answer, lang=lang), lang, hint)


def test_encoding_merge_after_merge_is_encoding_by_rank():
    """Exercise 3's answer: on the course's tokenizer, the merges applied one after another give the ids of
    ByteBPE.encode (which picks the merge learned first each time): every merge makes a new token."""
    tok = train_bpe(prose("es", "train") + "\n\n" + prose("en", "train"), 3000)
    assert [new for _, new in tok.merges] == list(range(256, 3000))
    merges = list(tok.merges)
    longest = sorted(set(pretokenize(prose("es", "test") + prose("en", "test"))), key=lambda p: (-len(p), p))[:200]
    for piece in longest:  # the pieces where most merges apply
        assert solution_my_encode(piece, merges) == tok.encode(piece), piece


# --- issue 37: wrong answers the checkers used to accept ----------------------------------------
# Each written as a student would, independently of the checker's own mistake programs.


def _bytes_then(word):
    return [BYTE_ID[b] for b in word.encode("utf-8")]


def encode_with_is(word, merges):
    ids = _bytes_then(word)
    for (a, b), new_id in merges:
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and ids[i] is a and ids[i + 1] is b:
                out.append(new_id)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        ids = out
    return ids


def encode_nfc(word, merges):
    import unicodedata

    return _apply(_bytes_then(unicodedata.normalize("NFC", word)), merges)


def encode_nfkc(word, merges):
    import unicodedata

    return _apply(_bytes_then(unicodedata.normalize("NFKC", word)), merges)


def encode_lowercase(word, merges):
    return _apply(_bytes_then(word.lower()), merges)


def encode_numbers_merges(word, merges):
    ids = _bytes_then(word)
    for rank, (pair, _) in enumerate(merges):
        ids = merge_pair(ids, pair, 256 + rank)
    return ids


def encode_empties_merges(word, merges):
    ids = _bytes_then(word)
    while merges:
        pair, new_id = merges.pop(0)
        ids = merge_pair(ids, pair, new_id)
    return ids


def encode_with_package_merge(word, merges):
    from minitransformer.tokenizer import merge

    ids = _bytes_then(word)
    for pair, new_id in merges:
        ids = merge(ids, pair, new_id)
    return ids


def encode_with_train_bpe(word, merges):
    from minitransformer.tokenizer import train_bpe

    base = train_bpe("", 256)  # the 256 bytes, no merge
    return _apply([base.vocab.index(bytes([b])) for b in word.encode()], merges)


def _vocab(merges):
    from minitransformer.tokenizer import BYTE_ORDER

    vocab = [bytes([b]) for b in BYTE_ORDER]
    for (a, b), new_id in merges:
        vocab += [b""] * (new_id + 1 - len(vocab))
        vocab[new_id] = vocab[a] + vocab[b]
    return vocab


def encode_with_bytebpe(word, merges):
    from minitransformer.tokenizer import ByteBPE

    return ByteBPE(tuple(merges), tuple(_vocab(merges))).encode(word)


def encode_with_tokenizers(word, merges):
    from tokenizers import Tokenizer, models, pre_tokenizers

    from minitransformer.tokenizer import BYTE_CHAR

    vocab = _vocab(merges)
    text = ["".join(BYTE_CHAR[b] for b in t) for t in vocab]
    bpe = models.BPE({t: i for i, t in enumerate(text) if t}, [(text[a], text[b]) for (a, b), _ in merges])
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    return tok.encode(word).ids


ISSUE_37 = [
    (check_encode, encode_with_is, "encode_identity"),
    (check_encode, encode_nfc, "normalises"),
    (check_encode, encode_nfkc, "normalises"),
    (check_encode, encode_lowercase, "lowercases"),
    (check_encode, encode_numbers_merges, "own_ids"),
    (check_encode, encode_empties_merges, "mutates"),
    (check_encode, encode_with_package_merge, "forbidden"),
    (check_encode, encode_with_train_bpe, "forbidden"),
    (check_encode, encode_with_bytebpe, "forbidden"),
    (check_encode, encode_with_tokenizers, "forbidden"),
]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("check, answer, hint", ISSUE_37, ids=lambda x: getattr(x, "__name__", None))
def test_issue_37_wrong_answers_are_named(lang, check, answer, hint):
    assert_rejected(check(answer, lang=lang), lang, hint)


def test_forbidden_tools_work_again_after_a_check():
    """The package's tokenizer and tokenizers are switched off only while the student's function runs."""
    from tokenizers import Tokenizer, models

    from minitransformer.tokenizer import ByteBPE, count_pairs, merge

    for check, answer, _ in ISSUE_37:
        check(answer, lang="en")
    assert merge([1, 2, 1, 2], (1, 2), 300) == [300, 300]
    assert count_pairs([[1, 2, 1]]) == {(1, 2): 1, (2, 1): 1}
    tok = train_bpe("el año y el niño", 260)
    assert isinstance(tok, ByteBPE) and tok.decode(tok.encode("el año")) == "el año"
    hf = Tokenizer(models.BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")]))
    assert hf.encode("ab").ids == [2]


# Issue 55's findings on these checkers: each answer below got through before, or got a hint that named a mistake it
# did not make, in both languages.


def stream_with_codecs_lookup(token_bytes):
    """The incremental decoder reached through the codec's entry, not codecs.getincrementaldecoder."""
    import codecs

    decoder = codecs.lookup("utf-8").incrementaldecoder("replace")
    return [decoder.decode(t) for t in token_bytes] + [decoder.decode(b"", True)]


def stream_with_the_codecs_class(token_bytes):
    import encodings.utf_8

    decoder = encodings.utf_8.IncrementalDecoder(errors="replace")
    return [decoder.decode(t) for t in token_bytes] + [decoder.decode(b"", final=True)]


def stream_with_a_text_wrapper(token_bytes):
    """io.TextIOWrapper over a growing buffer: it holds an incomplete character back by itself."""
    import io

    raw = io.BytesIO()
    text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
    out = []
    for token in token_bytes:
        at = raw.tell()
        raw.write(token)
        raw.seek(at)
        out.append(text.read())
    return out + [""]


def stream_with_a_stream_reader(token_bytes):
    import codecs
    import io

    reader = codecs.getreader("utf-8")(io.BytesIO(b"".join(token_bytes)), errors="replace")
    return [reader.read(len(t)) for t in token_bytes] + [""]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize(
    "answer",
    [stream_with_codecs_lookup, stream_with_the_codecs_class, stream_with_a_text_wrapper, stream_with_a_stream_reader],
    ids=lambda f: f.__name__,
)
def test_decode_stream_refuses_every_road_to_the_incremental_decoder(lang, answer):
    assert_rejected(check_decode_stream(answer, lang=lang), lang, "forbidden")


def test_the_incremental_decoder_and_text_files_work_again_after_a_check():
    import codecs
    import io

    check_decode_stream(stream_with_a_text_wrapper, lang="en")
    check_decode_stream(stream_with_codecs_lookup, lang="en")
    assert codecs.lookup("utf-8").incrementaldecoder().decode(b"\xc3\xb1") == "ñ"
    assert io.TextIOWrapper(io.BytesIO(b"a\xc3\xb1"), encoding="utf-8").read() == "añ"


def viterbi_from_minus_infinity(text, log_prob):
    """Every score starts at −inf, best[0] too: nothing ever beats it, and every back pointer stays at 0."""
    n = len(text)
    best, back = [float("-inf")] * (n + 1), [0] * (n + 1)
    for i in range(1, n + 1):
        for j in range(i):
            if text[j:i] in log_prob and best[j] + log_prob[text[j:i]] > best[i]:
                best[i], back[i] = best[j] + log_prob[text[j:i]], j
    pieces, i = [], n
    while i > 0:
        pieces.append(text[back[i] : i])
        i = back[i]
    return pieces[::-1]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer", [viterbi_misses_the_end, viterbi_from_minus_infinity], ids=lambda f: f.__name__)
def test_viterbi_whole_text_hint_names_both_ways_to_get_it(lang, answer):
    """best[0] = −inf gives the same answer as a loop that stops one short: the hint names both."""
    fb = check_viterbi(answer, lang=lang)
    assert_rejected(fb, lang, "misses_end")
    assert "best[0]" in fb.message and "range(1, len(text))" in fb.message


def encode_smallest_id_first(word, merges):
    """minbpe's way, with the ids taken for ranks: the pair whose new id is smallest goes first."""
    ids, table = [BYTE_ID[b] for b in word.encode()], dict(merges)
    while len(ids) >= 2:
        pairs = set(zip(ids, ids[1:]))
        pair = min(pairs, key=lambda p: table.get(p, float("inf")))
        if pair not in table:
            break
        ids = merge_pair(ids, pair, table[pair])
    return ids


def encode_most_frequent_first(word, merges):
    """As training does: the pair with a merge that appears most often in the word goes first."""
    from collections import Counter

    ids, table = [BYTE_ID[b] for b in word.encode()], dict(merges)
    while True:
        counts = Counter(p for p in zip(ids, ids[1:]) if p in table)
        if not counts:
            return ids
        pair = counts.most_common(1)[0][0]
        ids = merge_pair(ids, pair, table[pair])


@pytest.mark.parametrize("lang", LANGS)
def test_encode_names_choosing_by_new_id_and_by_frequency(lang):
    assert_rejected(check_encode(encode_smallest_id_first, lang=lang), lang, "by_new_id")
    assert_rejected(check_encode(encode_most_frequent_first, lang=lang), lang, "by_frequency")
    assert_rejected(check_encode(encode_leftmost_first, lang=lang), lang, "by_position")  # still told apart


@pytest.mark.parametrize("lang", LANGS)
def test_a_tokens_checker_sees_pytorchs_grad_mode_left_off(lang):
    """The global switches are watched in every checker: gradients left off are named and switched back on."""
    import torch

    def encode_turning_gradients_off(word, merges):
        torch.set_grad_enabled(False)
        return solution_my_encode(word, merges)

    fb = check_encode(encode_turning_gradients_off, lang=lang)
    assert_rejected(fb, lang, "grad_mode_left")
    assert torch.is_grad_enabled()
