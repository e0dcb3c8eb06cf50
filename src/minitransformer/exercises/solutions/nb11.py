"""The answer key of notebook 11, in notebook order: ``11.count_pairs``, ``11.merge``, ``11.encode``."""

from __future__ import annotations

from .._core import exercise
from ..registry import explain


@exercise("11.count_pairs")
@explain(
    "Recorre cada palabra por separado y cuenta cada id con el siguiente (`zip(ids, ids[1:])`): así los pares "
    "nunca cruzan de una palabra a otra y cada aparición cuenta, también las que se solapan.",
    "Go through each word on its own and count each id with the next one (`zip(ids, ids[1:])`): pairs never "
    "cross from one word to another, and every occurrence counts, overlapping ones too.",
)
def solution_my_count_pairs(words):
    """«Cuenta cada par de ids vecinos dentro de cada palabra.|Count each adjacent pair inside each word.»"""
    counts = {}
    for ids in words:
        for pair in zip(ids, ids[1:]):
            counts[pair] = counts.get(pair, 0) + 1
    return counts


@exercise("11.merge")
@explain(
    "Un índice recorre la lista de izquierda a derecha: donde empieza el par se escribe new_id y se saltan los dos "
    "ids; en otro caso se copia el id y se avanza uno. Con `a a a` queda `new a`.",
    "An index walks the list from left to right: where the pair starts, new_id is written and both ids are "
    "skipped; otherwise the id is copied and the index moves by one. With `a a a` you get `new a`.",
)
def solution_my_merge(ids, pair, new_id):
    """«Sustituye cada aparición de pair, de izquierda a derecha, por new_id.|Replace every occurrence of pair, from left to right, by new_id.»"""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@exercise("11.encode")
@explain(
    "El texto pasa a bytes UTF-8 y cada byte a su id con `BYTE_ID`; después cada fusión, en el orden en que se "
    "aprendió, sustituye todas las apariciones de su par. Una fusión aprendida tarde puede usar tokens que "
    "crearon las anteriores, por eso el orden importa.",
    "The text becomes UTF-8 bytes and each byte its id with `BYTE_ID`; then each merge, in the order it was "
    "learned, replaces every occurrence of its pair. A merge learned late may use tokens that earlier ones "
    "created, which is why the order matters.",
)
def solution_my_encode(word, merges):
    """«Los ids de los tokens de un trozo de texto con una lista de fusiones, aplicadas en orden.|The token ids of one piece of text under a list of merges, applied in order.»"""
    from minitransformer.tokenizer import BYTE_ID

    ids = [BYTE_ID[b] for b in word.encode("utf-8")]
    for (a, b), new_id in merges:  # «en el orden en que se aprendieron|in the order they were learned»
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and ids[i] == a and ids[i + 1] == b:
                out.append(new_id)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        ids = out
    return ids
