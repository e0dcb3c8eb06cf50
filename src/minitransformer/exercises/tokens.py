"""Checkers for notebook 11's exercises: counting pairs, applying one merge, encoding a word
with a list of merges.

Each checker compares the student's answer with the package's own (:mod:`minitransformer.tokenizer`,
computed before the student's code runs), on cases where the usual mistakes give different
answers (a pair that repeats inside a word, ``a a a``, merges whose order matters, letters of
two bytes, ids of 256 and above, merges whose ids are not numbered in order, decomposed accents and
capitals), and names the mistake without writing the code. The student's function gets copies of
the lists (with ints of its own, so an ``is`` between ids says what it says in a real program),
checked unchanged after the call; the package's tokenizer and ``tokenizers``, which the statements
forbid, are switched off while it runs.
The worked solutions are in the answer key :mod:`.solutions.nb11`.
"""

from __future__ import annotations

import importlib.util
import numbers
import operator
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from ..tokenizer import BYTE_ID, count_pairs, merge, pretokenize, train_bpe
from ._core import (
    EVERY_CASE,
    Feedback,
    Hints,
    Unfinished,
    attempt,
    correct,
    diagnose,
    exercise,
    forbid,
    stop,
    type_name,
)

__all__ = [
    "HINTS",
    "check_count_pairs",
    "check_merge",
    "check_encode",
]

Ids = list[int]
Merges = list[tuple[tuple[int, int], int]]

# Every hint these checkers give, (Spanish, English), by key.
HINTS = Hints(
    {
        "not_dict": (
            "devuelve un diccionario {{(a, b): veces}}, no {got}.",
            "return a dictionary {{(a, b): count}}, not {got}.",
        ),
        "bad_keys": (
            "las claves del diccionario deben ser tuplas de dos ids, (izquierda, derecha); tienes la clave {bad!r}.",
            "the dictionary's keys must be tuples of two ids, (left, right); you have the key {bad!r}.",
        ),
        "across_words": (
            "cuentas también los pares que cruzan de una palabra a la siguiente: los pares se cuentan dentro de "
            "cada palabra (con {words} sobra el par {extra}).",
            "you also count the pairs that cross from one word to the next: pairs are counted inside each word "
            "(with {words} the pair {extra} should not be there).",
        ),
        "once_per_word": (
            "cuentas cada par una vez por palabra: cuenta cada aparición (con {words} el par {pair} aparece {n} veces).",
            "you count each pair once per word: count every occurrence (with {words} the pair {pair} occurs {n} times).",
        ),
        "no_overlap": (
            "los pares se solapan: en {words} el par {pair} aparece {n} veces (cada posición con la siguiente), "
            "aunque al fusionar luego solo quepan menos.",
            "pairs overlap: in {words} the pair {pair} occurs {n} times (each position with the next one), even if "
            "fewer fit when merging later.",
        ),
        "set_to_one": (
            "pones cada par a 1: suma 1 cada vez que aparece (con {words} el par {pair} aparece {n} veces).",
            "you set each pair to 1: add 1 every time it occurs (with {words} the pair {pair} occurs {n} times).",
        ),
        "last_word_wins": (
            "el recuento de un par que aparece en varias palabras se suma, y el tuyo se queda con el de la última "
            "(dict.update sustituye, no suma): con {words} el par {pair} aparece {n} veces.",
            "the count of a pair that occurs in several words adds up, and yours keeps the last word's (dict.update "
            "replaces, it does not add): with {words} the pair {pair} occurs {n} times.",
        ),
        "count_type": (
            "cada recuento debe ser un número entero (int), y el del par {pair} es {got}: convierte cada valor con "
            "int(...) antes de guardarlo.",
            "each count must be an integer (int), and the one of the pair {pair} is {got}: turn each value into an "
            "int(...) before storing it.",
        ),
        "below_256": (
            "aciertas con ids menores que 256 (los bytes), pero no con ids mayores, como los de los tokens que crean "
            "las fusiones (con {case}): ¿guardas o comparas los ids con algo que solo admite 256 valores, como una "
            "tabla de 256 o bytes(...)?",
            "you are right with ids below 256 (the bytes), but not with larger ids, such as those of the tokens that "
            "merges make (with {case}): do you store or compare the ids with something that only holds 256 values, "
            "such as a table of 256 or bytes(...)?",
        ),
        "mutates": (
            "tu función cambia la lista `{arg}` que recibe (antes {before}, después {after}): quien la llama la sigue "
            "necesitando tal cual. Construye listas nuevas en vez de modificar la que recibes (con pop, remove o "
            "asignando en ella).",
            "your function changes the list `{arg}` it is given (before {before}, after {after}): the caller still "
            "needs it as it was. Build new lists instead of changing (pop, remove, assigning into) the one you "
            "are given.",
        ),
        "reversed": (
            "tus pares están al revés: la clave es (izquierda, derecha), en el orden del texto.",
            "your pairs are reversed: the key is (left, right), in the text's order.",
        ),
        "last_pair": (
            "te falta el último par de cada palabra: una palabra de n ids tiene n − 1 pares.",
            "the last pair of each word is missing: a word of n ids has n − 1 pairs.",
        ),
        "single_ids": (
            "cuentas ids sueltos: cuenta pares de ids vecinos, (ids[i], ids[i + 1]).",
            "you count single ids: count pairs of neighbouring ids, (ids[i], ids[i + 1]).",
        ),
        "counts": (
            "con las palabras {words} tu recuento es {got}: revisa qué pares cuentas y cuántas veces.",
            "with the words {words} your count is {got}: check which pairs you count and how many times.",
        ),
        "not_list": (
            "devuelve una lista de ids (enteros), no {got}.",
            "return a list of ids (integers), not {got}.",
        ),
        "strings": (
            "devuelves textos ({item_es}): el tokenizador devuelve ids, números enteros.",
            "you return texts ({item_en}): the tokenizer returns ids, integers.",
        ),
        "first_only": (
            "solo fusionas la primera aparición del par: fusiona todas (con {ids} y el par {pair}).",
            "you merge only the first occurrence of the pair: merge all of them (with {ids} and the pair {pair}).",
        ),
        "right_to_left": (
            "fusionas de derecha a izquierda: cuando dos apariciones se solapan ({ids} con el par {pair}), gana la "
            "de la izquierda.",
            "you merge from right to left: when two occurrences overlap ({ids} with the pair {pair}), the left one "
            "wins.",
        ),
        "no_skip": (
            "tras fusionar un par, salta los dos ids que acabas de juntar: el segundo ya forma parte del token "
            "nuevo (con {ids} y el par {pair}).",
            "after merging a pair, skip both ids you have just joined: the second one is already part of the new "
            "token (with {ids} and the pair {pair}).",
        ),
        "drops_last": (
            "pierdes el último id cuando no forma parte del par: recorre la lista hasta el final (con {ids}).",
            "you lose the last id when it is not part of the pair: go through the list to the end (with {ids}).",
        ),
        "both_orders": (
            "fusionas también el par al revés: solo se fusiona {pair}, con ese orden (con {ids}).",
            "you also merge the pair the other way round: only {pair} is merged, in that order (with {ids}).",
        ),
        "as_text": (
            "comparas los ids escritos como texto, y el texto del par aparece también dentro de otros números "
            "(con {ids} y el par {pair}): compara los ids como números, de dos en dos.",
            "you compare the ids written as text, and the pair's text also appears inside other numbers (with "
            "{ids} and the pair {pair}): compare the ids as numbers, two at a time.",
        ),
        "new_id": (
            "el token nuevo debe tener el id que recibes, new_id = {new_id}.",
            "the new token must have the id you are given, new_id = {new_id}.",
        ),
        "identity": (
            "comparas los ids con `is`, que pregunta si son el mismo objeto, no el mismo número: Python guarda una "
            "sola copia de los enteros pequeños (hasta 256), así que funciona con bytes y falla con ids como los "
            "de {pair} (con {ids}). Compara números con ==.",
            "you compare the ids with `is`, which asks whether they are the same object, not the same number: Python "
            "keeps a single copy of small integers (up to 256), so it works with bytes and fails with ids such as "
            "those of {pair} (with {ids}). Compare numbers with ==.",
        ),
        "merge_wrong": (
            "con {ids}, el par {pair} y new_id = {new_id} devuelves {got}: cada aparición del par, de izquierda a "
            "derecha, se convierte en new_id y el resto queda igual.",
            "with {ids}, the pair {pair} and new_id = {new_id} you return {got}: each occurrence of the pair, from "
            "left to right, becomes new_id and the rest stays as it is.",
        ),
        "code_points": (
            "partes de los puntos de código (ord) de cada carácter: el tokenizador parte de los bytes UTF-8 "
            "({word_es} tiene {n} bytes), cada uno con su id BYTE_ID[b].",
            "you start from each character's code point (ord): the tokenizer starts from the UTF-8 bytes "
            "({word_en} has {n} bytes), each with its id BYTE_ID[b].",
        ),
        "raw_bytes": (
            "usas el valor de cada byte como id: el id del byte b es BYTE_ID[b] (la tabla de GPT-2 pone primero "
            "los bytes imprimibles).",
            "you use each byte's value as its id: the id of byte b is BYTE_ID[b] (GPT-2's table puts the "
            "printable bytes first).",
        ),
        "reverse_order": (
            "aplicas las fusiones en otro orden: van en el orden en que se aprendieron, la primera antes (con "
            "{word_es}).",
            "you apply the merges in another order: they go in the order they were learned, the first one first "
            "(with {word_en}).",
        ),
        "unmerged": (
            "devuelves los ids de los bytes sin ninguna fusión: aplica cada fusión a la lista y quédate con lo que "
            "devuelve (con {word_es}).",
            "you return the bytes' ids without any merge: apply each merge to the list and keep what it returns "
            "(with {word_en}).",
        ),
        "by_position": (
            "eliges qué fusionar por la posición (el par más a la izquierda o el token más largo): BPE elige por el "
            "orden de las fusiones, la aprendida antes primero (con {word_es}).",
            "you choose what to merge by position (the leftmost pair or the longest token): BPE chooses by the "
            "order of the merges, the one learned first goes first (with {word_en}).",
        ),
        "encode_first_only": (
            "cada fusión debe aplicarse a todas las apariciones de su par, no solo a la primera (con {word_es}).",
            "each merge must be applied to every occurrence of its pair, not only the first one (with {word_en}).",
        ),
        "encode_right_to_left": (
            "cuando dos apariciones de un par se solapan, se fusiona la de la izquierda (con {word_es}).",
            "when two occurrences of a pair overlap, the left one is merged (with {word_en}).",
        ),
        "encode_identity": (
            "comparas los ids con `is`, que pregunta si son el mismo objeto, no el mismo número: funciona con los "
            "enteros pequeños (hasta 256), de los que Python guarda una sola copia, y falla con los ids que traen las "
            "fusiones a partir de 257 (con {word_es}). Compara números con ==.",
            "you compare the ids with `is`, which asks whether they are the same object, not the same number: it works "
            "with small integers (up to 256), of which Python keeps a single copy, and fails with the ids that merges "
            "bring from 257 up (with {word_en}). Compare numbers with ==.",
        ),
        "normalises": (
            "normalizas el texto (NFC o NFKC) antes de codificarlo: el tokenizador codifica los bytes tal como "
            "llegan, y {word_es} con el acento descompuesto (n + ◌̃) tiene otros bytes que con «ñ» de una pieza.",
            "you normalise the text (NFC or NFKC) before encoding it: the tokenizer encodes the bytes as they come, "
            "and {word_en} with the accent decomposed (n + ◌̃) has other bytes than with a one-piece “ñ”.",
        ),
        "lowercases": (
            "pasas el texto a minúsculas: el tokenizador codifica los bytes tal como llegan, y las mayúsculas son "
            "otros bytes (con {word_es}).",
            "you lowercase the text: the tokenizer encodes the bytes as they come, and capitals are other bytes "
            "(with {word_en}).",
        ),
        "own_ids": (
            "numeras tú los tokens nuevos (256, 257, …): cada fusión trae su id, new_id, y las fusiones siguientes "
            "se refieren a ese id (con {word_es}, las fusiones {merges}).",
            "you number the new tokens yourself (256, 257, …): each merge brings its id, new_id, and later merges "
            "refer to that id (with {word_en}, the merges {merges}).",
        ),
        "encode_wrong": (
            "con {word_es} y sus {n} fusiones devuelves {got}: pasa el texto a bytes UTF-8, cada byte a su id, y "
            "aplica las fusiones en orden.",
            "with {word_en} and its {n} merges you return {got}: turn the text into UTF-8 bytes, each byte into its "
            "id, and apply the merges in order.",
        ),
    }
)


# ---- shared by the exercises below ---------------------------------------------------------------


def _ids(lang: str, got: Any) -> Ids:
    """The student's answer as a list of ints, or a stop naming what it is instead."""
    if not isinstance(got, (list, tuple)):
        raise stop(HINTS(lang, "not_list", got=type_name(got)))
    for item in got:
        if isinstance(item, (str, bytes)):
            raise stop(HINTS(lang, "strings", item_es=_quoted("es", item), item_en=_quoted("en", item)))
        if isinstance(item, bool) or not isinstance(item, int):
            raise stop(HINTS(lang, "not_list", got=f"{type_name(got)} ({type_name(item)})"))
    return list(got)


def _counts(lang: str, got: Any) -> dict[tuple[int, int], int]:
    """The student's counts without zero entries, or a stop naming what is wrong."""
    if not isinstance(got, Mapping):
        raise stop(HINTS(lang, "not_dict", got=type_name(got)))
    if got and all(isinstance(k, int) for k in got):
        raise stop(HINTS(lang, "single_ids"))
    out = {}
    for key, value in got.items():
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, int) for k in key)):
            raise stop(HINTS(lang, "bad_keys", bad=key))
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):  # a tensor, a float, ...
            raise stop(HINTS(lang, "count_type", pair=key, got=_short(value, 40)))
        if value != 0:
            out[key] = int(value)
    return out


# What the statements forbid: the package's tokenizer and Hugging Face's tokenizers (where installed).
_PACKAGE_TOOLS = (
    ("minitransformer.tokenizer.count_pairs", "count_pairs"),
    ("minitransformer.tokenizer.merge", "merge"),
    ("minitransformer.tokenizer.train_bpe", "train_bpe"),
    ("minitransformer.tokenizer.ByteBPE.__post_init__", "ByteBPE"),
    ("minitransformer.tokenizer.ByteBPE.encode", "ByteBPE"),
    ("minitransformer.tokenizer.ByteBPE._bpe", "ByteBPE"),
)
_HF_TOOLS = (
    ("tokenizers.Tokenizer.encode", "tokenizers"),
    ("tokenizers.Tokenizer.encode_batch", "tokenizers"),
    ("tokenizers.models.Model.tokenize", "tokenizers"),
    ("tokenizers.models.BPE", "tokenizers"),  # the class, as `models.BPE(...)` reaches it
)


def _tools() -> tuple[tuple[str, str], ...]:
    return _PACKAGE_TOOLS + (_HF_TOOLS if importlib.util.find_spec("tokenizers") else ())


def _fresh(x: Any) -> Any:
    """``x`` (ints in lists and tuples) rebuilt with ints of its own: an id above 256 is then a new object,
    as the ids a program computes are, and ``a is b`` between two equal ones is False (CPython keeps one
    copy of each int up to 256 only)."""
    if isinstance(x, bool) or not isinstance(x, (int, list, tuple)):
        return x
    if isinstance(x, int):
        return int(str(x))
    return type(x)(_fresh(i) for i in x)


def _call(lang: str, fn: Callable[..., Any], args: dict[str, Any], why: tuple[str, str]) -> Any:
    """The student's ``fn`` on fresh copies of ``args`` (name -> value), with the forbidden tools switched
    off; a list it changes stops the check with the ``mutates`` hint."""
    copies = {name: _fresh(value) for name, value in args.items()}
    with forbid(_tools(), *why):
        got = attempt(lang, fn, *copies.values())
    for name, before in args.items():
        after = copies[name]
        if repr(after) != repr(before):  # repr: whatever the student put in it, never an error
            raise stop(HINTS(lang, "mutates", arg=name, before=_short(before, 50), after=_short(after, 50)))
    return got


def _big(ids: Any) -> bool:
    """Whether ids (nested in lists and tuples) hold one of 256 or more: one no byte has."""
    if isinstance(ids, int):
        return ids >= 256
    return isinstance(ids, (list, tuple)) and any(_big(i) for i in ids)


def _answers(
    cases: list[Any],
    answer: Callable[[Any], Any],
    right: Callable[[Any], Any],
    below_256: Callable[[Any], Feedback] | None = None,
) -> list[Any]:
    """The student's answer to each case, in order. If a case raises (or returns something that is not an
    answer) after an earlier answer was already wrong, the answers so far: a mistake is named from the cases
    the answer reached; otherwise that case's feedback. A forbidden tool or a changed list stops at once. A
    crash on the first case with an id of 256 or more, every earlier case right, is ``below_256(case)``."""
    out: list[Any] = []
    for case in cases:
        try:
            out.append(answer(case))
        except Unfinished as early:
            if early.feedback.hint in ("forbidden", "mutates"):
                raise
            if any(got != right(c) for c, got in zip(cases, out)):
                break
            if below_256 is not None and early.feedback.hint == "crashed" and _big(case):
                raise stop(below_256(case)) from None
            raise
    return out


def _only_bytes(cases: list[Any], answers: list[Any], right: Callable[[Any], Any]) -> bool:
    """Every case without ids of 256 or more right, and some case with one wrong."""
    pairs = list(zip(cases, answers))
    return all(got == right(c) for c, got in pairs if not _big(c)) and any(
        got != right(c) for c, got in pairs if _big(c)
    )


def _named(answers: list[Any], cases: list[Any], mistakes: list[tuple[Callable[..., Any], str]]) -> tuple | None:
    """The first mistake ``(program, key)`` whose program gives every answer the student gave, on the cases
    the answers reached (a program returns None where it does not apply); two programs may share a key.
    A case that is a tuple is the program's arguments; otherwise the program takes the case itself."""
    reached = cases[: len(answers)]
    bank = {
        i: [model(*case) if isinstance(case, tuple) else model(case) for case in reached]
        for i, (model, _) in enumerate(mistakes)
    }
    # EVERY_CASE: each program is a whole way of solving it wrong, and it must explain every answer
    found = diagnose(answers, bank, EVERY_CASE, same=operator.eq)
    return None if found is None else mistakes[found]


def _quoted(lang: str, text: str | bytes) -> str:
    """A text as a message quotes it («…» in Spanish, “…” in English); bytes as Python writes them."""
    if isinstance(text, bytes):
        return repr(text)
    return f"«{text}»" if lang == "es" else f"“{text}”"


def _short(x: Any, most: int = 90) -> str:
    text = repr(x)
    return text if len(text) <= most else text[: most - 1] + "…"


# ---- 11.count_pairs ------------------------------------------------------------------------------


def _words(text: str) -> list[Ids]:
    return [[BYTE_ID[b] for b in piece.encode("utf-8")] for piece in pretokenize(text)]


def _count_cases() -> list[list[Ids]]:
    return [
        [[1, 2, 3], [2, 3, 4, 2]],  # (3, 2) and (4, 2)... only inside words
        [[5, 5, 5, 5], [6, 5, 5]],  # overlapping (5, 5)
        [[7], [], [8, 9], [9, 8]],
        [[5, 6], [5, 5, 5]],  # a pair in two words: the counts add up
        _words("el año, el niño y el ñandú"),  # real bytes: ñ is two
        # the ids of merged tokens, after every case of bytes: 256 (the first new one), 257 and more
        [[256, 300, 256, 300], [257, 1, 257, 1, 257]],
        [[1000, 1000, 1000], [300, 1000], [256]],
    ]


def _once_per_word(words: list[Ids]) -> dict:
    return dict(Counter(p for ids in words for p in set(zip(ids, ids[1:]))))


def _non_overlapping(words: list[Ids]) -> dict:
    counts: Counter = Counter()
    for ids in words:
        i = 0
        while i + 1 < len(ids):
            counts[(ids[i], ids[i + 1])] += 1
            i += 2 if ids[i] == ids[i + 1] else 1  # a run a a a counted as a merge would take it
    return dict(counts)


def _last_word_wins(words: list[Ids]) -> dict:
    """``counts.update(Counter(pairs of one word))``, word after word: replaces instead of adding."""
    counts: dict = {}
    for ids in words:
        counts.update(Counter(zip(ids, ids[1:])))
    return counts


def _present(words: list[Ids]) -> dict:
    """Every pair set to 1 (``counts[pair] = 1``)."""
    return dict.fromkeys(count_pairs(words), 1)


_COUNT_MISTAKES: list[tuple[Callable[[list[Ids]], dict], str]] = [
    (lambda words: dict(count_pairs([[i for w in words for i in w]])), "across_words"),
    (_once_per_word, "once_per_word"),
    (_non_overlapping, "no_overlap"),
    (_present, "set_to_one"),
    (_last_word_wins, "last_word_wins"),
    (lambda words: {(b, a): n for (a, b), n in count_pairs(words).items()}, "reversed"),
    (lambda words: dict(count_pairs([w[:-1] for w in words])), "last_pair"),
]


_COUNT_WHY = (
    "cuenta tú los pares, sin `count_pairs` ni el resto del tokenizador del paquete, ni `tokenizers`.",
    "count the pairs yourself, without the package's `count_pairs` or the rest of its tokenizer, or `tokenizers`.",
)


@exercise("11.count_pairs")
def check_count_pairs(fn: Callable[[list[Ids]], Any], lang: str | None = None) -> Feedback:
    """``fn(words)`` -> ``{(a, b): count}``: adjacent pairs inside each word (a list of ids)."""
    cases = _count_cases()

    def right(words: list[Ids]) -> dict:
        return dict(count_pairs(words))

    def below_256(words: list[Ids]) -> Feedback:
        return HINTS(lang, "below_256", case=_short(words, 70))

    answers = _answers(
        cases, lambda words: _counts(lang, _call(lang, fn, {"words": words}, _COUNT_WHY)), right, below_256
    )
    if all(got == right(words) for words, got in zip(cases, answers)):
        return correct(
            lang,
            "Con los recuentos de todo un corpus (cada palabra pesada por sus apariciones), el par más frecuente "
            "es la siguiente fusión.",
            "With the counts of a whole corpus (each word weighted by how often it occurs), the most frequent pair "
            "is the next merge.",
        )
    words, got = next((w, g) for w, g in zip(cases, answers) if g != right(w))
    want, shown = right(words), _short(words, 70)
    named = _named(answers, cases, _COUNT_MISTAKES)
    if named is not None:
        model, key = named
        wrong = model(words)
        pair = next(p for p in {**want, **wrong} if want.get(p, 0) != wrong.get(p, 0))
        extra = next((p for p in wrong if p not in want), pair)
        raise stop(HINTS(lang, key, words=shown, pair=pair, extra=extra, n=want.get(pair, 0)))
    if _only_bytes(cases, answers, right):
        raise stop(below_256(next(w for w, g in zip(cases, answers) if _big(w) and g != right(w))))
    raise stop(HINTS(lang, "counts", words=shown, got=_short(got, 70)))


# ---- 11.merge ------------------------------------------------------------------------------------


def _merge_cases() -> list[tuple[Ids, tuple[int, int], int]]:
    word = _words(" año, ñu y ñandú")
    flat = [i for w in word for i in w]
    n_tilde = (BYTE_ID[0xC3], BYTE_ID[0xB1])  # the two bytes of ñ
    return [
        ([1, 2, 3, 1, 2, 7], (1, 2), 9),
        ([5, 5, 5], (5, 5), 9),
        ([2, 1, 2, 1, 4], (1, 2), 99),
        ([5, 5, 5, 5, 6], (5, 5), 200),
        ([3], (3, 4), 9),
        ([], (3, 4), 9),
        ([11, 2, 1, 21, 2, 1, 2], (1, 2), 99),  # «1 2» written as text is also inside «11 2» and «21 2»
        # the ids of merged tokens, after every case of bytes: 256 (the first new one; CPython keeps one copy
        # of it, so `is` still works), then 257 and more, which are not consecutive
        (flat, n_tilde, 256),
        ([256, 5, 256, 256, 5, 7], (256, 5), 257),
        ([300, 257, 300, 257, 257, 300, 9], (257, 300), 1000),
        ([258, 258, 258, 9, 258], (258, 258), 700),
    ]


def _first_only(ids: Ids, pair: tuple[int, int], new: int) -> Ids:
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == pair:
            return ids[:i] + [new] + ids[i + 2 :]
    return list(ids)


def _right_to_left(ids: Ids, pair: tuple[int, int], new: int) -> Ids:
    return merge(ids[::-1], pair[::-1], new)[::-1]


def _no_skip(ids: Ids, pair: tuple[int, int], new: int) -> Ids:
    out = []
    i = 0
    while i < len(ids):
        out.append(new if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair else ids[i])
        i += 1
    return out


def _drops_last(ids: Ids, pair: tuple[int, int], new: int) -> Ids:
    """A loop that stops one id early: the last id is lost unless it ends a merged pair."""
    out, i = [], 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _both_orders(ids: Ids, pair: tuple[int, int], new: int) -> Ids:
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) in (pair, pair[::-1]):
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _as_text(ids: Ids, pair: tuple[int, int], new: int) -> Ids:
    """The ids written as text and the pair replaced as text: «1 2» also matches inside «11 2»."""
    text = " ".join(map(str, ids)).replace(f"{pair[0]} {pair[1]}", str(new))
    return [int(x) for x in text.split()]


def _identity(ids: Ids, pair: tuple[int, int], new: int) -> Ids:
    """``ids[i] is pair[0]``: true for equal ints up to 256 only (CPython keeps one copy of each)."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and all(x == y and -5 <= x <= 256 for x, y in zip(ids[i : i + 2], pair)):
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


_MERGE_MISTAKES: list[tuple[Callable[[Ids, tuple[int, int], int], Ids], str]] = [
    (_first_only, "first_only"),
    (_right_to_left, "right_to_left"),
    (_no_skip, "no_skip"),
    (_drops_last, "drops_last"),
    (_both_orders, "both_orders"),
    (_as_text, "as_text"),
    (_identity, "identity"),
]

_MERGE_WHY = (
    "escribe tú la fusión, sin `merge` ni el resto del tokenizador del paquete, ni `tokenizers`.",
    "write the merge yourself, without the package's `merge` or the rest of its tokenizer, or `tokenizers`.",
)


@exercise("11.merge")
def check_merge(fn: Callable[[Ids, tuple[int, int], int], Any], lang: str | None = None) -> Feedback:
    """``fn(ids, pair, new_id)`` -> ``ids`` with every occurrence of ``pair``, from left to right,
    replaced by ``new_id``."""
    cases = _merge_cases()

    def below_256(case: tuple[Ids, tuple[int, int], int]) -> Feedback:
        return HINTS(lang, "below_256", case=f"{_short(case[0], 50)}, {case[1]}, {case[2]}")

    def answer(case: tuple[Ids, tuple[int, int], int]) -> Ids:
        return _ids(lang, _call(lang, fn, dict(zip(("ids", "pair", "new_id"), case)), _MERGE_WHY))

    answers = _answers(cases, answer, lambda c: merge(*c), below_256)
    if all(got == merge(*case) for case, got in zip(cases, answers)):
        return correct(
            lang,
            "Entrenar BPE es repetir esto con el par más frecuente, y codificar, repetirlo con las fusiones "
            "aprendidas.",
            "Training BPE is repeating this with the most frequent pair, and encoding is repeating it with the "
            "learned merges.",
        )
    (ids, pair, new), got = next((c, g) for c, g in zip(cases, answers) if g != merge(*c))
    where = dict(ids=_short(ids, 60), pair=pair, new_id=new)
    named = _named(answers, cases, _MERGE_MISTAKES)
    if named is not None:
        raise stop(HINTS(lang, named[1], **where))

    def other_id(case: tuple[Ids, tuple[int, int], int], got: Ids) -> bool:  # right, but for the new token's id
        want = merge(*case)
        return len(got) == len(want) and all(g == w for g, w in zip(got, want) if w != case[2])

    if all(other_id(case, got) for case, got in zip(cases, answers)):
        raise stop(HINTS(lang, "new_id", **where))
    if _only_bytes(cases, answers, lambda c: merge(*c)):
        raise stop(below_256(next(c for c, g in zip(cases, answers) if _big(c) and g != merge(*c))))
    raise stop(HINTS(lang, "merge_wrong", got=_short(got, 60), **where))


# ---- 11.encode -----------------------------------------------------------------------------------


def _byte_ids(word: str) -> Ids:
    return [BYTE_ID[b] for b in word.encode("utf-8")]


def _apply(ids: Ids, merges: Merges, step: Callable[[Ids, tuple[int, int], int], Ids] = merge) -> Ids:
    for pair, new in merges:
        ids = step(ids, pair, new)
    return ids


def _encode_cases() -> list[tuple[str, Merges]]:
    a, b, c = (BYTE_ID[ord(x)] for x in "abc")
    learned = list(train_bpe("el año y el niño y el ñandú comen, el año que viene", 256 + 14).merges)
    return [
        ("abc", [((a, b), 256), ((256, c), 257)]),  # a merge that uses an earlier one's token
        ("abc", [((b, c), 256), ((a, b), 257)]),  # the rank, not the position, decides
        ("abc", [((a, b), 256), ((b, c), 257)]),  # the rank, not the latest merge, decides
        ("aaaa", [((a, a), 256)]),  # every occurrence
        ("aaa", [((a, a), 256)]),  # overlapping: the left one
        (" año", learned),  # ñ: two bytes
        ("", learned),
        (" ñandú", learned),
        ("el niño🙂", learned),
        # ids given, not numbered in order: 700 before 301, and a later merge refers to 700
        ("abc", [((a, b), 700), ((700, c), 301)]),
        ("ababx", [((a, b), 999), ((999, 999), 500)]),
        (unicodedata.normalize("NFD", " año"), learned),  # a decomposed accent: n + ◌̃, other bytes than ñ
        ("El", learned),  # a capital: other bytes than «el»
        (" Año", learned),
    ]


def _by_position(word: str, merges: Merges) -> Ids:
    """Leftmost-first: at each step merge the leftmost pair that has any merge."""
    ids, table = _byte_ids(word), dict(merges)
    while True:
        for i in range(len(ids) - 1):
            if (ids[i], ids[i + 1]) in table:
                ids = ids[:i] + [table[(ids[i], ids[i + 1])]] + ids[i + 2 :]
                break
        else:
            return ids


def _latest_first(word: str, merges: Merges) -> Ids:
    """At each step the pair of the merge learned last."""
    ids, rank = _byte_ids(word), {pair: (r, new) for r, (pair, new) in enumerate(merges)}
    while present := [p for p in zip(ids, ids[1:]) if p in rank]:
        pair = max(present, key=lambda p: rank[p][0])
        ids = merge(ids, pair, rank[pair][1])
    return ids


def _code_points(word: str, merges: Merges) -> Ids | None:
    return _apply([BYTE_ID[ord(ch)] for ch in word], merges) if all(ord(ch) < 256 for ch in word) else None


def _own_ids(word: str, merges: Merges) -> Ids:
    """The new tokens numbered 256, 257, ... by the merge's rank, whatever new_id each merge brings."""
    return _apply(_byte_ids(word), [(pair, 256 + rank) for rank, (pair, _) in enumerate(merges)])


def _normalised(form: str) -> Callable[[str, Merges], Ids]:
    return lambda word, merges: _apply(_byte_ids(unicodedata.normalize(form, word)), merges)


_ENCODE_MISTAKES: list[tuple[Callable[[str, Merges], Ids | None], str]] = [
    (_code_points, "code_points"),
    (lambda word, merges: _apply(list(word.encode("utf-8")), merges), "raw_bytes"),
    (lambda word, merges: _byte_ids(word), "unmerged"),
    (_by_position, "by_position"),
    (lambda word, merges: _apply(_byte_ids(word), merges[::-1]), "reverse_order"),
    (_latest_first, "reverse_order"),
    (lambda word, merges: _apply(_byte_ids(word), merges, _first_only), "encode_first_only"),
    (lambda word, merges: _apply(_byte_ids(word), merges, _right_to_left), "encode_right_to_left"),
    (_normalised("NFC"), "normalises"),
    (_normalised("NFKC"), "normalises"),
    (lambda word, merges: _apply(_byte_ids(word.lower()), merges), "lowercases"),
    (_own_ids, "own_ids"),
    (lambda word, merges: _apply(_byte_ids(word), merges, _identity), "encode_identity"),
]

_ENCODE_WHY = (
    "aplica tú las fusiones, sin el tokenizador del paquete (`merge`, `train_bpe`, `ByteBPE`) ni `tokenizers`; tu "
    "`my_merge` sí vale.",
    "apply the merges yourself, without the package's tokenizer (`merge`, `train_bpe`, `ByteBPE`) or "
    "`tokenizers`; your own `my_merge` is fine.",
)


@exercise("11.encode")
def check_encode(fn: Callable[[str, Merges], Any], lang: str | None = None) -> Feedback:
    """``fn(word, merges)`` -> the token ids of ``word`` (one piece of text): its UTF-8 bytes as
    ids, then each merge ``((a, b), new_id)`` applied in order."""
    cases = _encode_cases()

    def right(case: tuple[str, Merges]) -> Ids:
        return _apply(_byte_ids(case[0]), case[1])

    def answer(case: tuple[str, Merges]) -> Ids:
        return _ids(lang, _call(lang, fn, {"word": case[0], "merges": list(case[1])}, _ENCODE_WHY))

    answers = _answers(cases, answer, right)
    if all(got == right(case) for case, got in zip(cases, answers)):
        return correct(
            lang,
            "¿Dan lo mismo que `encode_by_hand`? Sí: un token nuevo solo aparece en fusiones aprendidas después que "
            "él, así que aplicarlas una tras otra es elegir cada vez la aprendida antes, como hacen `encode_by_hand` "
            "y `ByteBPE.encode` (mientras cada fusión cree un token nuevo, como en este cuaderno).",
            "Do they give the same as `encode_by_hand`? Yes: a new token only appears in merges learned after it, so "
            "applying them one after another is choosing each time the one learned first, as `encode_by_hand` and "
            "`ByteBPE.encode` do (as long as every merge makes a new token, as in this notebook).",
        )
    (word, merges), got = next((c, g) for c, g in zip(cases, answers) if g != right(c))
    where = dict(word_es=_quoted("es", word), word_en=_quoted("en", word), n=len(merges), merges=_short(merges, 60))
    named = _named(answers, cases, _ENCODE_MISTAKES)
    if named is not None:
        if named[1] == "code_points":
            where["n"] = len(word.encode("utf-8"))
        raise stop(HINTS(lang, named[1], **where))
    raise stop(HINTS(lang, "encode_wrong", got=_short(got, 60), **where))
