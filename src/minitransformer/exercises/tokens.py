"""Checkers for notebook 11's exercises: decoding a stream of tokens, Unigram's most probable split (Viterbi),
encoding a word with a list of merges.

Each checker compares the student's answer with the package's own (:mod:`minitransformer.tokenizer`,
computed before the student's code runs), on cases where the usual mistakes give different
answers (characters of two, three and four bytes split across tokens, a token with the end of one
character and the start of the next, invalid bytes; a long improbable piece against shorter probable ones, two
pieces against one, a text so long that a product of probabilities underflows; merges whose order matters, ids of
256 and above, merges whose ids are not numbered in order, decomposed accents and capitals), and names the mistake
without writing the code. The student's function gets copies of the lists and dictionaries (with ints of its own,
so an ``is`` between ids says what it says in a real program), checked unchanged after the call; the package's
tokenizer, ``tokenizers``, ``sentencepiece`` and ``codecs``' incremental decoder, which the statements forbid, are
switched off while it runs. The worked solutions are in the answer key :mod:`.solutions.nb11`.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import numbers
import operator
import unicodedata
from collections.abc import Callable
from typing import Any

from ..tokenizer import BYTE_ID, ByteBPE, merge, train_bpe, viterbi_split
from ._core import (
    STATE_HINTS,
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
    watch,
)

__all__ = [
    "HINTS",
    "check_decode_stream",
    "check_viterbi",
    "check_encode",
]

Ids = list[int]
Merges = list[tuple[tuple[int, int], int]]

# Every hint these checkers give, (Spanish, English), by key.
HINTS = Hints(
    {
        **STATE_HINTS,
        "stream_one_text": (
            "devuelves un solo texto ({got}): devuelve una lista de textos, uno por token y uno más al final, con "
            "lo que quede guardado.",
            "you return one text ({got}): return a list of texts, one per token and one more at the end, with "
            "whatever is still held.",
        ),
        "stream_not_list": (
            "devuelve una lista de textos (str), uno por token y uno más al final, no {got}.",
            "return a list of texts (str), one per token and one more at the end, not {got}.",
        ),
        "stream_bytes": (
            "tus trozos son bytes ({item}), no texto: decodifica los bytes de los caracteres completos con "
            '`.decode("utf-8", errors="replace")` y devuelve esos str.',
            "your pieces are bytes ({item}), not text: decode the bytes of the complete characters with "
            '`.decode("utf-8", errors="replace")` and return those strs.',
        ),
        "token_by_token": (
            "decodificas cada token por su cuenta, y un carácter partido entre dos tokens se convierte en «�» (con "
            "{tokens} devuelves {got}). Guarda los bytes del carácter incompleto del final y júntalos con los del "
            "token siguiente antes de decodificar.",
            "you decode each token on its own, and a character split between two tokens becomes “�” (with {tokens} "
            "you return {got}). Keep the bytes of the incomplete character at the end and join them to the next "
            "token's before decoding.",
        ),
        "ignores_errors": (
            'decodificas cada token por su cuenta con errors="ignore": los bytes de un carácter partido entre dos '
            "tokens se pierden sin avisar (con {tokens} devuelves {got}). Guarda los bytes del carácter incompleto "
            'del final hasta que otro token lo complete, y usa errors="replace" para los bytes que no forman ningún '
            "carácter.",
            'you decode each token on its own with errors="ignore": the bytes of a character split between two '
            "tokens are silently lost (with {tokens} you return {got}). Keep the bytes of the incomplete character "
            'at the end until another token completes it, and use errors="replace" for the bytes that form no '
            "character.",
        ),
        "holds_one_byte": (
            "guardas como mucho un byte, y un carácter de tres o cuatro bytes puede quedarse a medias con dos o tres "
            "(con {tokens} devuelves {got}, y lo esperado es {want}). Busca el byte inicial entre los últimos tres: "
            "su forma (110xxxxx, 1110xxxx, 11110xxx) dice cuántos bytes tiene el carácter, y guardas desde él si "
            "aún faltan.",
            "you hold back one byte at most, and a character of three or four bytes can be left halfway with two or "
            "three (with {tokens} you return {got}, and {want} is expected). Look for the lead byte among the last "
            "three: its shape (110xxxxx, 1110xxxx, 11110xxx) says how many bytes the character has, and you hold "
            "back from it if some are still missing.",
        ),
        "cumulative": (
            "cada trozo repite el texto de los anteriores (con {tokens} devuelves {got}): devuelve solo lo nuevo "
            "que muestra cada token, de modo que al juntar los trozos salga el texto una sola vez.",
            "each piece repeats the text of the earlier ones (with {tokens} you return {got}): return only what "
            "each token adds, so that joining the pieces gives the text once.",
        ),
        "no_flush": (
            "al final no entregas lo que queda guardado: si el último token deja un carácter a medias, el texto "
            "acaba en «�» (con {tokens} devuelves {got}, y lo esperado es {want}). El último trozo de la lista es "
            'ese resto decodificado con errors="replace" ("" si no queda nada).',
            "at the end you do not give out what is still held: if the last token leaves a character halfway, the "
            "text ends in “�” (with {tokens} you return {got}, and {want} is expected). The list's last piece is "
            'that rest decoded with errors="replace" ("" if nothing is left).',
        ),
        "flush_in_last": (
            "pones lo que queda al final dentro del trozo del último token (con {tokens} devuelves {got}): va "
            "aparte, como un trozo más al final de la lista, igual que `decoder.flush()` en la sección 3.",
            "you put what is left at the end into the last token's piece (with {tokens} you return {got}): it "
            "goes apart, as one more piece at the end of the list, as `decoder.flush()` does in section 3.",
        ),
        "holds_invalid": (
            "mientras los bytes guardados no se pueden decodificar, los guardas todos: también el texto de antes de "
            "un carácter incompleto, y para siempre lo que viene tras un byte que no forma ningún carácter (con "
            "{tokens} devuelves {got}, y lo esperado es {want}). Guarda solo el carácter incompleto del final (un "
            'byte inicial al que le faltan bytes); lo demás decodifícalo ya, con errors="replace", que muestra los '
            "bytes sueltos como «�».",
            "while the held bytes cannot be decoded, you hold them all: the text before an incomplete character "
            "too, and forever whatever follows a byte that forms no character (with {tokens} you return {got}, and "
            "{want} is expected). Hold back only the incomplete character at the end (a lead byte still missing "
            'bytes); decode the rest now, with errors="replace", which shows loose bytes as “�”.',
        ),
        "non_ascii_held": (
            "guardas todos los bytes ≥ 0x80 del final, también los de un carácter ya completo, así que un carácter "
            "no sale hasta que llega un byte ASCII (con {tokens} devuelves {got}, y lo esperado es {want}). Un "
            "carácter está completo cuando tiene los bytes que dice su byte inicial: 110xxxxx dos, 1110xxxx tres, "
            "11110xxx cuatro.",
            "you hold back every byte ≥ 0x80 at the end, those of a character already complete too, so a character "
            "does not come out until an ASCII byte arrives (with {tokens} you return {got}, and {want} is expected). "
            "A character is complete when it has the bytes its lead byte says: 110xxxxx two, 1110xxxx three, "
            "11110xxx four.",
        ),
        "continuation_as_lead": (
            "tomas un byte de continuación (10xxxxxx, de 0x80 a 0xBF) por el inicial de un carácter, porque miras si "
            "es ≥ 0x80 (con {tokens} devuelves {got}, y lo esperado es {want}). Solo un byte 11xxxxxx empieza un "
            "carácter de varios bytes: sáltate los de continuación hasta encontrarlo y cuenta desde él.",
            "you take a continuation byte (10xxxxxx, 0x80 to 0xBF) for a character's lead byte, because you check "
            "whether it is ≥ 0x80 (with {tokens} you return {got}, and {want} is expected). Only a byte 11xxxxxx "
            "starts a multi-byte character: skip the continuation bytes until you find it and count from there.",
        ),
        "not_a_lead": (
            "tomas un byte 11111xxx (de 0xF8 a 0xFF, como el 0xFF de {tokens}) por el inicial de un carácter de "
            "cuatro bytes, y lo guardas (devuelves {got}, y lo esperado es {want}). Solo 11110xxx (de 0xF0 a 0xF7) "
            "empieza uno de cuatro; un byte 11111xxx no empieza ninguno y sale como «�» en cuanto llega.",
            "you take a byte 11111xxx (0xF8 to 0xFF, like the 0xFF of {tokens}) for the lead byte of a four-byte "
            "character, and hold it back (you return {got}, and {want} is expected). Only 11110xxx (0xF0 to 0xF7) "
            "starts a four-byte one; a byte 11111xxx starts none and comes out as “�” as soon as it arrives.",
        ),
        "stream_count": (
            "con {n} tokens devuelves {n_got} trozos, y son {n_want}: uno por token y uno más al final, con lo que "
            'quede guardado ("" si no queda nada) (con {tokens}).',
            "with {n} tokens you return {n_got} pieces, and there are {n_want}: one per token and one more at the "
            'end, with whatever is still held ("" if nothing) (with {tokens}).',
        ),
        "stream_text": (
            "juntos, tus trozos dan {joined}, y el texto entero es {whole} (con {tokens}): al juntarlos debe salir "
            'lo mismo que `b"".join(token_bytes).decode("utf-8", errors="replace")`.',
            "joined, your pieces give {joined}, and the whole text is {whole} (with {tokens}): joining them must "
            'give the same as `b"".join(token_bytes).decode("utf-8", errors="replace")`.',
        ),
        "stream_timing": (
            "el texto es el correcto, pero no sale cuando toca (con {tokens} devuelves {got}, y lo esperado es "
            "{want}): cada carácter sale con el token que trae su último byte, ni antes ni después.",
            "the text is right, but it does not come out when it should (with {tokens} you return {got}, and "
            "{want} is expected): each character comes out with the token that brings its last byte, neither "
            "before nor after.",
        ),
        "split_not_list": (
            "devuelve una lista de trozos del texto (str), no {got}.",
            "return a list of pieces of the text (str), not {got}.",
        ),
        "with_score": (
            "devuelves también la puntuación: {got}. Devuelve solo la lista de trozos.",
            "you also return the score: {got}. Return only the list of pieces.",
        ),
        "longest_first": (
            "eliges cada vez el trozo más largo que empieza donde estás, como codifica WordPiece: con {text} "
            "devuelves {got}, y la partición más probable es {want}. Un trozo largo y poco probable puede obligar a "
            "usar después otros peores: compara particiones enteras, con la puntuación de todo lo anterior.",
            "you take each time the longest piece that starts where you are, as WordPiece encodes: with {text} you "
            "return {got}, and the most probable split is {want}. A long, improbable piece can force worse ones "
            "after it: compare whole splits, with the score of everything before.",
        ),
        "greedy_best": (
            "eliges cada vez el trozo más probable que empieza donde estás: con {text} devuelves {got}, y la "
            "partición más probable es {want}. La mejor elección de cada paso no da la mejor partición: guarda, para "
            "cada posición i, la mejor puntuación de text[:i] y elige con ella.",
            "you take each time the most probable piece that starts where you are: with {text} you return {got}, "
            "and the most probable split is {want}. The best choice at each step does not give the best split: keep, "
            "for each position i, the best score of text[:i] and choose with it.",
        ),
        "minimises": (
            "te quedas con la partición de suma menor: con {text} devuelves {got}. Los logaritmos de las "
            "probabilidades son negativos, y la partición más probable es la de suma mayor, la más cercana a cero: "
            "{want}.",
            "you keep the split with the smallest sum: with {text} you return {got}. The logarithms of "
            "probabilities are negative, and the most probable split is the one with the greatest sum, the closest "
            "to zero: {want}.",
        ),
        "adds_probs": (
            "sumas probabilidades, las exp de log_prob: con {text} devuelves {got}, y la partición más probable es "
            "{want}. La probabilidad de una partición es el producto de las de sus trozos, y el logaritmo de un "
            "producto es la suma de los logaritmos: suma log_prob tal cual.",
            "you add probabilities, the exp of log_prob: with {text} you return {got}, and the most probable split "
            "is {want}. A split's probability is the product of its pieces', and the logarithm of a product is the "
            "sum of the logarithms: add log_prob as it is.",
        ),
        "fewest_pieces": (
            "buscas la partición con menos trozos, sin mirar sus probabilidades: con {text} devuelves {got}, y la "
            "más probable es {want}. Dos trozos probables pueden valer más que uno raro.",
            "you look for the split with the fewest pieces, without looking at their probabilities: with {text} you "
            "return {got}, and the most probable one is {want}. Two probable pieces can be worth more than a rare "
            "one.",
        ),
        "backtrack": (
            "las puntuaciones de cada posición parecen bien, pero al volver desde el final eliges en cada paso el "
            "trozo más probable que acaba ahí: con {text} devuelves {got}, y la partición más probable es {want}. "
            "Guarda, para cada posición i, la j de la que vino su mejor puntuación, y sigue esas j hacia atrás.",
            "the scores of each position look right, but on the way back from the end you take at each step the "
            "most probable piece that ends there: with {text} you return {got}, and the most probable split is "
            "{want}. Keep, for each position i, the j its best score came from, and follow those j back.",
        ),
        "split_reversed": (
            "tus trozos van al revés: con {text} devuelves {got}. Al volver desde el final los encuentras del último "
            "al primero; dales la vuelta: {want}.",
            "your pieces are in reverse: with {text} you return {got}. Going back from the end you find them from "
            "the last to the first; turn them round: {want}.",
        ),
        "unknown_zero": (
            "con {text} usas {piece}, que no está en el vocabulario: ¿das log_prob 0, probabilidad 1, a los trozos "
            "que faltan, con `log_prob.get(trozo, 0)`? Un trozo que no está no se puede usar: sáltalo.",
            "with {text} you use {piece}, which is not in the vocabulary: do you give the missing pieces log_prob "
            "0, probability 1, with `log_prob.get(piece, 0)`? A piece that is not there cannot be used: skip it.",
        ),
        "misses_end": (
            "devuelves el texto entero como un solo trozo ({got} con {text}): la mejor puntuación del texto entero, "
            "best[len(text)], no llega a calcularse. Puede ser por dos cosas: que tu bucle no llegue a la última "
            "posición, i = len(text) (con range(1, len(text)) se queda a una), o que best[0], la puntuación del "
            "texto vacío, no empiece en 0 (con −inf, ninguna suma best[j] + log_prob supera a −inf y nada cambia).",
            "you return the whole text as one piece ({got} with {text}): the best score of the whole text, "
            "best[len(text)], is never computed. It can be one of two things: your loop does not reach the last "
            "position, i = len(text) (with range(1, len(text)) it stops one short), or best[0], the empty text's "
            "score, does not start at 0 (with −inf, no sum best[j] + log_prob beats −inf and nothing changes).",
        ),
        "short_pieces": (
            "no pruebas los trozos largos: con {text}, la partición más probable, {want}, usa {piece}, de {n} "
            "caracteres. Prueba cada trozo text[j:i] que esté en log_prob, sea cual sea su longitud.",
            "you do not try long pieces: with {text}, the most probable split, {want}, uses {piece}, of {n} "
            "characters. Try every piece text[j:i] that is in log_prob, whatever its length.",
        ),
        "product_underflow": (
            "aciertas con los textos cortos y no con el largo, de {n} caracteres, cuya mejor partición tiene "
            "probabilidad e^{score}. Si multiplicas probabilidades, el producto de tantas se queda en 0,0 (ningún "
            "float es tan pequeño) y todas las particiones empatan: suma sus logaritmos, log_prob, en vez de "
            "multiplicar probabilidades.",
            "you are right on the short texts and not on the long one, of {n} characters, whose best split has "
            "probability e^{score}. If you multiply probabilities, the product of so many becomes 0.0 (no float is "
            "that small) and every split ties: add their logarithms, log_prob, instead of multiplying "
            "probabilities.",
        ),
        "split_not_text": (
            "juntos, tus trozos dan {joined}, y el texto es {text}: cada carácter del texto va en un trozo, una sola "
            "vez y en orden.",
            "joined, your pieces give {joined}, and the text is {text}: each character of the text goes into one "
            "piece, once and in order.",
        ),
        "not_in_vocab": (
            "con {text} usas el trozo {piece}, que no está en el vocabulario: solo valen las claves de log_prob.",
            "with {text} you use the piece {piece}, which is not in the vocabulary: only the keys of log_prob will do.",
        ),
        "split_wrong": (
            "con {text} devuelves {got}, de puntuación {got_score}, y {want} puntúa {want_score}: busca la partición "
            "de suma de log_prob mayor.",
            "with {text} you return {got}, scoring {got_score}, and {want} scores {want_score}: look for the split "
            "with the greatest sum of log_prob.",
        ),
        "mutates": (
            "tu función cambia `{arg}`, que recibe (antes {before}, después {after}): quien la llama lo sigue "
            "necesitando tal cual. No lo modifiques con pop, remove o asignando en él: construye listas o "
            "diccionarios nuevos.",
            "your function changes `{arg}`, which it is given (before {before}, after {after}): the caller still "
            "needs it as it was. Do not change it with pop, remove or by assigning into it: build new lists or "
            "dictionaries.",
        ),
        "not_list": (
            "devuelve una lista de ids (enteros), no {got}.",
            "return a list of ids (integers), not {got}.",
        ),
        "strings": (
            "devuelves textos ({item_es}): el tokenizador devuelve ids, números enteros.",
            "you return texts ({item_en}): the tokenizer returns ids, integers.",
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
        "by_frequency": (
            "eliges qué fusionar por lo a menudo que aparece el par en el texto, como al entrenar: al codificar se "
            "elige por el orden de las fusiones, la aprendida antes primero, aparezca su par una vez o muchas (con "
            "{word_es}).",
            "you choose what to merge by how often the pair appears in the text, as training does: encoding chooses "
            "by the order of the merges, the one learned first goes first, whether its pair appears once or many "
            "times (with {word_en}).",
        ),
        "by_new_id": (
            "eliges qué fusionar por el `new_id` (el menor primero): el orden es el de la lista, el rango en que se "
            "aprendieron, y los `new_id` no tienen por qué ir en ese orden (con {word_es}, las fusiones {merges}).",
            "you choose what to merge by its `new_id` (the smallest first): the order is the list's, the rank in "
            "which they were learned, and the `new_id`s need not follow it (with {word_en}, the merges {merges}).",
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
    """``x`` (ints in lists, tuples and dicts) rebuilt with ints of its own: an id above 256 is then a new object,
    as the ids a program computes are, and ``a is b`` between two equal ones is False (CPython keeps one
    copy of each int up to 256 only)."""
    if isinstance(x, dict):
        return {k: _fresh(v) for k, v in x.items()}
    if isinstance(x, bool) or not isinstance(x, (int, list, tuple)):
        return x
    if isinstance(x, int):
        return int(str(x))
    return type(x)(_fresh(i) for i in x)


def _call(lang: str, fn: Callable[..., Any], args: dict[str, Any], why: tuple[str, str], more: tuple = ()) -> Any:
    """The student's ``fn`` on fresh copies of ``args`` (name -> value), with the forbidden tools (and ``more``)
    switched off; a list it changes stops the check with the ``mutates`` hint."""
    copies = {name: _fresh(value) for name, value in args.items()}
    with watch() as left, forbid(_tools() + more, *why):
        got = attempt(lang, fn, *copies.values())
    if left.left(lang, HINTS) is not None:  # PyTorch's global switches, left changed
        raise stop(left.left(lang, HINTS))
    for name, before in args.items():
        after = copies[name]
        if repr(after) != repr(before):  # repr: whatever the student put in it, never an error
            raise stop(HINTS(lang, "mutates", arg=name, before=_short(before, 50), after=_short(after, 50)))
    return got


def _answers(
    cases: list[Any],
    answer: Callable[[Any], Any],
    right: Callable[[Any], Any],
    on_crash: Callable[[Any], Feedback | None] | None = None,
) -> list[Any]:
    """The student's answer to each case, in order. If a case raises (or returns something that is not an
    answer) after an earlier answer was already wrong, the answers so far: a mistake is named from the cases
    the answer reached; otherwise that case's feedback. A forbidden tool or a changed list stops at once. A
    crash on a case, every earlier case right, is ``on_crash(case)`` where that names the mistake (not None)."""
    out: list[Any] = []
    for case in cases:
        try:
            out.append(answer(case))
        except Unfinished as early:
            if early.feedback.hint in ("forbidden", "mutates"):
                raise
            if any(got != right(c) for c, got in zip(cases, out)):
                break
            named = on_crash(case) if on_crash is not None and early.feedback.hint == "crashed" else None
            if named is not None:
                raise stop(named) from None
            raise
    return out


def _named(answers: list[Any], cases: list[Any], mistakes: list[tuple[Callable[..., Any], str]]) -> tuple | None:
    """The first mistake ``(program, key)`` whose program gives every answer the student gave, on the cases
    the answers reached (a program returns None where it does not apply); two programs may share a key.
    A case that is a tuple is the program's arguments; otherwise the program takes the case itself."""
    reached = cases[: len(answers)]
    bank = {
        i: [model(*case) if isinstance(case, tuple) else model(case) for case in reached]
        for i, (model, _) in enumerate(mistakes)
    }
    found = diagnose(answers, bank, same=operator.eq)
    return None if found is None else mistakes[found]


def _quoted(lang: str, text: str | bytes) -> str:
    """A text as a message quotes it («…» in Spanish, “…” in English); bytes as Python writes them."""
    if isinstance(text, bytes):
        return repr(text)
    return f"«{text}»" if lang == "es" else f"“{text}”"


def _short(x: Any, most: int = 90) -> str:
    text = repr(x)
    return text if len(text) <= most else text[: most - 1] + "…"


# ---- 11.decode_stream ----------------------------------------------------------------------------


@functools.cache
def _byte_tokenizer() -> ByteBPE:
    """The 256 bytes and no merge: every byte string is a list of its ids."""
    return train_bpe("", 256)


def _streamed(tokens: list[bytes]) -> list[str]:
    """The package's stream_decoder fed each token's bytes, then flushed: the reference."""
    decoder = _byte_tokenizer().stream_decoder()
    return [decoder.feed([BYTE_ID[b] for b in token]) for token in tokens] + [decoder.flush()]


_STREAM_CASES: list[list[bytes]] = [
    [b" a\xc3", b"\xb1o"],  # ñ: two bytes, two tokens
    [b"5 \xe2", b"\x82", b"\xac"],  # €: three bytes, three tokens
    [b"\xf0", b"\x9f", b"\x99", b"\x82!"],  # 🙂: four bytes, four tokens
    [b"el", b" gato", b"."],  # ASCII only
    [],
    [b"ni\xc3\xb1o"],  # every character whole inside one token
    [b"\xc3", b"\xb1\xc3", b"\xba"],  # a token with the end of ñ and the start of ú
    [b"\xe2\x82", b"\xac\xe2", b"\x82\xac"],  # € €: the same with three bytes
    [b"\xf0\x9f", b"\x99\x82\xe2\x82", b"\xac y"],  # 🙂 then €
    [b"ni", b"\xc3"],  # ends inside ñ
    [b"ok ", b"\xe2\x82"],  # ends inside €
    [b"\xf0\x9f", b"\x99"],  # ends inside 🙂
    [b"a\x80", b"b"],  # a continuation byte with no lead byte
    [b"x\xff", b"y\xc3\xa1"],  # a byte that starts no character
    [b"\xc3", b"a"],  # a lead byte cut short by an ASCII character
    [b"\xe2\x82", b"\xc3\xb1"],  # a three-byte character cut short by another character
    [b"a\xff\xc3", b"\xb1", b"!"],
]


def _lead_length(b: int) -> int:
    """The bytes of a character whose first byte is ``b`` (1 for ASCII and for bytes that start none)."""
    return 2 if b >> 5 == 0b110 else 3 if b >> 4 == 0b1110 else 4 if b >> 3 == 0b11110 else 1


def _whole(held: bytes) -> int:
    """Where the incomplete character at the end of ``held`` starts (``len(held)`` if there is none)."""
    for back in range(1, min(4, len(held)) + 1):
        if held[-back] >> 6 != 0b10:  # not a continuation byte: the last character starts here
            return len(held) - back if _lead_length(held[-back]) > back else len(held)
    return len(held)


def _held_back(cut: Callable[[bytes], int], flush: bool = True) -> Callable[[list[bytes]], list[str]]:
    """A streaming decoder that keeps ``held[cut(held):]`` after each token, flushed at the end or not."""

    def run(tokens: list[bytes]) -> list[str]:
        out, held = [], b""
        for token in tokens:
            held += token
            k = cut(held)
            out.append(held[:k].decode("utf-8", errors="replace"))
            held = held[k:]
        return out + ([held.decode("utf-8", errors="replace")] if flush else [])

    return run


def _alone(errors: str, end: bool) -> Callable[[list[bytes]], list[str]]:
    """Each token decoded on its own, with or without an empty last piece."""
    return lambda tokens: [t.decode("utf-8", errors=errors) for t in tokens] + ([""] if end else [])


def _one_byte(held: bytes) -> int:
    """A lead byte at the very end is held back, alone."""
    return len(held) - 1 if held and held[-1] >= 0xC0 else len(held)


def _one_byte_on_error(held: bytes) -> int:
    try:
        held.decode("utf-8")
    except UnicodeDecodeError:
        return len(held) - 1
    return len(held)


def _until_valid(held: bytes) -> int:
    """Everything held while the bytes do not decode strictly."""
    try:
        held.decode("utf-8")
    except UnicodeDecodeError:
        return 0
    return len(held)


def _until_error(held: bytes) -> int:
    """Held from the first error on: an invalid byte is never given out."""
    try:
        held.decode("utf-8")
    except UnicodeDecodeError as bad:
        return bad.start
    return len(held)


def _non_ascii_tail(most: int | None) -> Callable[[bytes], int]:
    """Every byte >= 0x80 at the end held back (at most ``most`` of them)."""

    def cut(held: bytes) -> int:
        k = len(held)
        while k > 0 and held[k - 1] >= 0x80 and (most is None or len(held) - k < most):
            k -= 1
        return k

    return cut


def _continuation_as_lead(held: bytes) -> int:
    """The last byte >= 0x80 taken for a lead byte, continuation bytes too."""
    for back in range(1, min(4, len(held)) + 1):
        b = held[-back]
        if b >= 0x80:
            need = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            return len(held) - back if need > back else len(held)
    return len(held)


def _four_from_f0(held: bytes) -> int:
    """Every byte from 0xF0 up taken for the lead of a four-byte character, 0xF8 to 0xFF too."""
    for back in range(1, min(4, len(held)) + 1):
        b = held[-back]
        if b >> 6 != 0b10:
            need = 4 if b >= 0xF0 else 3 if b >= 0xE0 else 2 if b >= 0xC0 else 1
            return len(held) - back if need > back else len(held)
    return len(held)


_STREAM_MISTAKES: list[tuple[Callable[[list[bytes]], list[str]], str]] = [
    (_alone("replace", True), "token_by_token"),
    (_alone("replace", False), "token_by_token"),
    (_alone("ignore", True), "ignores_errors"),
    (_alone("ignore", False), "ignores_errors"),
    (_held_back(_whole, flush=False), "no_flush"),
    (lambda tokens: _held_back(_whole, flush=False)(tokens) + [""], "no_flush"),
    (_held_back(_one_byte), "holds_one_byte"),
    (_held_back(_one_byte_on_error), "holds_one_byte"),
    (_held_back(_until_valid), "holds_invalid"),
    (_held_back(_until_error), "holds_invalid"),
    (_held_back(_non_ascii_tail(None)), "non_ascii_held"),
    (_held_back(_non_ascii_tail(3)), "non_ascii_held"),
    (_held_back(_continuation_as_lead), "continuation_as_lead"),
    (_held_back(_four_from_f0), "not_a_lead"),
]


def _cumulative(cases: list[list[bytes]], answers: list[list[str]]) -> bool:
    """Each piece (before the last) starts with the one before it, in every case, and repeats it in some."""
    pieces = [(got[: len(tokens)]) for tokens, got in zip(cases, answers)]
    grows = all(all(b.startswith(a) for a, b in zip(p, p[1:])) for p in pieces)
    return grows and any(a and b.startswith(a) for p in pieces for a, b in zip(p, p[1:]))


def _pieces(lang: str, got: Any) -> list[str]:
    """The student's answer as a list of str, or a stop naming what it is instead."""
    if isinstance(got, str):
        raise stop(HINTS(lang, "stream_one_text", got=_short(got, 40)))
    if not isinstance(got, (list, tuple)):
        raise stop(HINTS(lang, "stream_not_list", got=type_name(got)))
    for item in got:
        if isinstance(item, (bytes, bytearray)):
            raise stop(HINTS(lang, "stream_bytes", item=_short(item, 30)))
        if not isinstance(item, str):
            raise stop(HINTS(lang, "stream_not_list", got=f"{type_name(got)} ({type_name(item)})"))
    return list(got)


# What the statement forbids: codecs' incremental decoder and the package's tokenizer (stream_decoder).
_STREAM_TOOLS = (
    ("codecs.getincrementaldecoder", "codecs.getincrementaldecoder"),
    ("codecs.iterdecode", "codecs.iterdecode"),
    ("codecs.utf_8_decode", "codecs.utf_8_decode"),
    ("_codecs.utf_8_decode", "codecs.utf_8_decode"),
    # the other roads to it: codecs.lookup("utf-8").incrementaldecoder, the codec's classes themselves, a
    # StreamReader, io.TextIOWrapper (which decodes with it); the names only, not the classes, which Python's own
    # reading of source files (a traceback's lines) needs while the student's code runs
    ("codecs.lookup", "codecs.lookup"),
    ("codecs.getreader", "codecs.getreader"),
    ("codecs.StreamReader", "codecs.StreamReader"),
    ("codecs.BufferedIncrementalDecoder", "codecs.BufferedIncrementalDecoder"),
    ("encodings.utf_8.IncrementalDecoder", "encodings.utf_8.IncrementalDecoder"),
    ("encodings.utf_8.StreamReader", "encodings.utf_8.StreamReader"),
    ("io.TextIOWrapper", "io.TextIOWrapper"),
    ("_io.TextIOWrapper", "io.TextIOWrapper"),
    ("minitransformer.tokenizer.ByteBPE.stream_decoder", "stream_decoder"),
    ("minitransformer.tokenizer.StreamDecoder.__init__", "StreamDecoder"),
    ("minitransformer.tokenizer.StreamDecoder.feed", "StreamDecoder"),
    ("minitransformer.tokenizer.ByteBPE.decode", "ByteBPE.decode"),
)

_STREAM_WHY = (
    "sigue tú la regla del byte inicial, sin el decodificador incremental de `codecs` (por ningún camino: "
    "`codecs.lookup`, `codecs.getreader`, `io.TextIOWrapper`) ni el tokenizador del paquete (`stream_decoder`, "
    "`ByteBPE`); `bytes.decode` sí vale.",
    "follow the lead-byte rule yourself, without `codecs`' incremental decoder (by any road: `codecs.lookup`, "
    "`codecs.getreader`, `io.TextIOWrapper`) or the package's tokenizer (`stream_decoder`, `ByteBPE`); "
    "`bytes.decode` is fine.",
)


@exercise("11.decode_stream")
def check_decode_stream(fn: Callable[[list[bytes]], Any], lang: str | None = None) -> Feedback:
    """``fn(token_bytes)`` -> ``len(token_bytes) + 1`` texts: what a streaming decoder gives after each token
    (an incomplete UTF-8 character held back until a later token completes it), then what is left at the end
    (U+FFFD for an incomplete character, ``""`` if nothing). The reference is the package's ``stream_decoder``."""
    cases = _STREAM_CASES

    def answer(tokens: list[bytes]) -> list[str]:
        return _pieces(lang, _call(lang, fn, {"token_bytes": tokens}, _STREAM_WHY, _STREAM_TOOLS))

    answers = _answers(cases, answer, _streamed)
    if all(got == _streamed(tokens) for tokens, got in zip(cases, answers)):
        return correct(
            lang,
            "Es lo que hace `stream_decoder()`: así se muestra lo que escribe un modelo mientras genera, sin «�» "
            "a medias.",
            "It is what `stream_decoder()` does: this is how what a model writes is shown while it generates, "
            "without half characters turned into “�”.",
        )
    tokens, got = next((t, g) for t, g in zip(cases, answers) if g != _streamed(t))
    want = _streamed(tokens)
    where = dict(tokens=_short(tokens, 70), got=_short(got, 70), want=_short(want, 70))
    named = _named(answers, cases, _STREAM_MISTAKES)
    if named is not None:
        raise stop(HINTS(lang, named[1], **where))
    if _cumulative(cases, answers):
        raise stop(HINTS(lang, "cumulative", **where))
    if len(got) != len(want):
        if len(got) == len(tokens) and got[:-1] == want[:-2] and got[-1:] == ["".join(want[-2:])]:
            raise stop(HINTS(lang, "flush_in_last", **where))
        raise stop(HINTS(lang, "stream_count", n=len(tokens), n_got=len(got), n_want=len(want), **where))
    if "".join(got) != "".join(want):
        raise stop(
            HINTS(lang, "stream_text", joined=_short("".join(got), 50), whole=_short("".join(want), 50), **where)
        )
    raise stop(HINTS(lang, "stream_timing", **where))


# ---- 11.viterbi ----------------------------------------------------------------------------------

Split = list[str]
LogProb = dict[str, float]

# A long text, as SentencePiece reads one (the space is «▁», one character more): its best split has so many
# pieces that the product of their probabilities is far below the smallest float.
_LONG_TEXT = "▁" + (
    "Los modelos abiertos de hoy siguen siendo el decodificador del cuaderno 09, pero cambian cuatro piezas: las "
    "posiciones rotatorias, la RMSNorm, la red SwiGLU y la atención de consultas agrupadas. Cada cambio se mide con "
    "una ablación honesta, con varias semillas, y el coste de la atención crece con el cuadrado de la longitud."
).replace(" ", "▁")
_LONG_PIECES = (
    "▁el ▁la ▁de ▁que ▁en ▁los ▁las ción mente ▁un ▁una ar er os as es en an on or ra re ta te to do da de la lo "
    "▁con ▁por ▁modelo ▁atención ▁cambi ▁siguen ▁siendo ▁cuaderno ado ido ▁pero ia io ie ▁a ▁s ▁c ▁p ▁m ▁d ▁t ndo "
    "nte st tr in co ▁coste ▁crece ▁cada ▁red ▁cuatro ▁piezas ▁varias ▁semillas ▁longitud ▁cuadrado"
).split()


def _piece_log_prob(piece: str) -> float:
    """A made-up, fixed log probability: longer pieces are rarer, and no two splits of a case score the same."""
    return -round(3.2 + 1.05 * len(piece) + (sum(map(ord, piece)) % 23) * 0.071, 3)


def _char_log_prob(ch: str) -> float:
    return -round(7.6 + (ord(ch) % 19) * 0.137, 3)


def _vocabulary(text: str, pieces: dict[str, float] | list[str]) -> LogProb:
    """Every character of ``text`` (so that some split always exists) and the ``pieces``."""
    log_prob = {ch: _char_log_prob(ch) for ch in sorted(set(text))}
    log_prob.update(pieces if isinstance(pieces, dict) else {p: _piece_log_prob(p) for p in pieces})
    return log_prob


@functools.cache
def _viterbi_cases() -> tuple[tuple[str, LogProb], ...]:
    """Cases whose best split is one alone (by more than float noise), where each mistake below gives another one;
    the long text last."""
    unfortunately = "▁desafortunadamente"
    return (
        ("abc", {"a": -3.0, "b": -3.5, "c": -2.5, "ab": -4.0, "bc": -3.0, "abc": -9.5}),  # the statement's example
        (
            unfortunately,  # WordPiece's longest match gives desa·fortuna·da·mente; the best, des·afortunada·mente
            _vocabulary(
                unfortunately,
                {
                    "▁de": -4.1,
                    "▁des": -6.2,
                    "▁desa": -9.0,
                    "sa": -6.9,
                    "afortunada": -9.8,
                    "afortunad": -10.6,
                    "fortuna": -7.4,
                    "da": -5.0,
                    "mente": -5.3,
                    "amente": -8.9,
                    "ente": -6.4,
                    "a": -4.4,
                    "fort": -8.8,
                },
            ),
        ),
        ("ab", {"a": -2.0, "b": -2.5, "ab": -10.0}),  # two pieces beat one
        (
            "▁tokenizador",
            _vocabulary("▁tokenizador", "▁to ▁tok ken ▁token iza izador dor ador za en ke ni ▁toke niza".split()),
        ),
        ("", {"a": -1.0}),
        (_LONG_TEXT, _vocabulary(_LONG_TEXT, _LONG_PIECES)),
    )


def _viterbi_by(
    score: Callable[[float], float],
    better: Callable[[float, float], bool],
    start: float,
    worst: float,
    combine: Callable[[float, float], float] = operator.add,
    longest: int | None = None,
) -> Callable:
    """A dynamic programme over the positions that scores a piece with ``score(log_prob)``, combines scores with
    ``combine`` and keeps a candidate when ``better(candidate, best)``: the loop several mistakes below share."""

    def run(text: str, log_prob: LogProb) -> Split | None:
        n = len(text)
        best, back = [start] + [worst] * n, [None] * (n + 1)
        for i in range(1, n + 1):
            for j in range(0 if longest is None else max(0, i - longest), i):
                piece = text[j:i]
                if piece in log_prob and (j == 0 or back[j] is not None):
                    candidate = combine(best[j], score(log_prob[piece]))
                    if better(candidate, best[i]):
                        best[i], back[i] = candidate, j
        pieces, i = [], n
        while i > 0:
            if back[i] is None:
                return None  # the program would crash here: it explains no answer
            pieces.append(text[back[i] : i])
            i = back[i]
        return pieces[::-1]

    return run


def _longest_first(text: str, log_prob: LogProb) -> Split:
    """WordPiece's encoding: the longest piece that starts here, again and again."""
    pieces, i = [], 0
    while i < len(text):
        j = max(j for j in range(i + 1, len(text) + 1) if text[i:j] in log_prob)
        pieces.append(text[i:j])
        i = j
    return pieces


def _greedy_best(text: str, log_prob: LogProb) -> Split:
    """The most probable piece that starts here, again and again."""
    pieces, i = [], 0
    while i < len(text):
        j = max((j for j in range(i + 1, len(text) + 1) if text[i:j] in log_prob), key=lambda j: log_prob[text[i:j]])
        pieces.append(text[i:j])
        i = j
    return pieces


def _backtracks_by_piece(text: str, log_prob: LogProb) -> Split:
    """The scores right, the way back wrong: from the end, the most probable piece that ends here."""
    best = [0.0] + [-math.inf] * len(text)
    for i in range(1, len(text) + 1):
        for j in range(i):
            if text[j:i] in log_prob:
                best[i] = max(best[i], best[j] + log_prob[text[j:i]])
    pieces, i = [], len(text)
    while i > 0:
        j = max(
            (j for j in range(i) if text[j:i] in log_prob and best[j] > -math.inf), key=lambda j: log_prob[text[j:i]]
        )
        pieces.append(text[j:i])
        i = j
    return pieces[::-1]


def _unknown_zero(text: str, log_prob: LogProb) -> Split:
    """``log_prob.get(piece, 0)``: every piece that is not in the vocabulary has probability 1."""
    best, back = [0.0] + [-math.inf] * len(text), [0] * (len(text) + 1)
    for i in range(1, len(text) + 1):
        for j in range(i):
            if best[j] + log_prob.get(text[j:i], 0.0) > best[i]:
                best[i], back[i] = best[j] + log_prob.get(text[j:i], 0.0), j
    pieces, i = [], len(text)
    while i > 0:
        pieces.append(text[back[i] : i])
        i = back[i]
    return pieces[::-1]


def _right_split(text: str, log_prob: LogProb) -> Split:
    return viterbi_split(text, log_prob)


_VITERBI_MISTAKES: list[tuple[Callable[[str, LogProb], Split | None], str]] = [
    (_longest_first, "longest_first"),
    (_greedy_best, "greedy_best"),
    (_viterbi_by(lambda lp: lp, operator.lt, 0.0, math.inf), "minimises"),
    (_viterbi_by(math.exp, operator.gt, 0.0, -math.inf), "adds_probs"),
    (_viterbi_by(lambda lp: -1.0, operator.gt, 0.0, -math.inf), "fewest_pieces"),
    (_backtracks_by_piece, "backtrack"),
    (lambda text, log_prob: _right_split(text, log_prob)[::-1], "split_reversed"),
    (_unknown_zero, "unknown_zero"),
    (lambda text, log_prob: [text] if text else [], "misses_end"),  # best[len(text)] never computed: back[n] is 0
    *((_viterbi_by(lambda lp: lp, operator.gt, 0.0, -math.inf, longest=k), "short_pieces") for k in range(2, 10)),
    # probabilities multiplied: right until the product underflows to 0.0, then every split ties
    (_viterbi_by(math.exp, operator.gt, 1.0, -1.0, operator.mul), "product_underflow"),
    (_viterbi_by(math.exp, operator.ge, 1.0, 0.0, operator.mul), "product_underflow"),
]

# What the statement forbids: the package's split and the libraries that encode with Unigram.
_VITERBI_TOOLS = (
    ("minitransformer.tokenizer.viterbi_split", "viterbi_split"),
    ("tokenizers.models.Unigram", "tokenizers"),
    ("sentencepiece.SentencePieceProcessor", "sentencepiece"),
)

_VITERBI_WHY = (
    "escribe tú la programación dinámica, sin `viterbi_split` del paquete ni el modelo Unigram de `tokenizers` o "
    "de `sentencepiece`.",
    "write the dynamic programme yourself, without the package's `viterbi_split` or the Unigram model of "
    "`tokenizers` or `sentencepiece`.",
)


def _viterbi_tools() -> tuple[tuple[str, str], ...]:
    return _tools() + tuple(
        (path, name) for path, name in _VITERBI_TOOLS if importlib.util.find_spec(path.split(".")[0]) is not None
    )


def _split(lang: str, got: Any) -> Split:
    """The student's answer as a list of str, or a stop naming what it is instead."""
    if (
        isinstance(got, (list, tuple))
        and len(got) == 2
        and isinstance(got[0], (list, tuple))
        and isinstance(got[1], numbers.Real)
    ):
        raise stop(HINTS(lang, "with_score", got=_short(got, 60)))
    if not isinstance(got, (list, tuple)):
        raise stop(HINTS(lang, "split_not_list", got=type_name(got)))
    for item in got:
        if not isinstance(item, str):
            raise stop(HINTS(lang, "split_not_list", got=f"{type_name(got)} ({type_name(item)})"))
    return list(got)


def _score(pieces: Split, log_prob: LogProb) -> float:
    return math.fsum(log_prob[p] for p in pieces)


def _shown_text(lang: str, text: str) -> str:
    return _quoted(lang, text if len(text) <= 40 else text[:39] + "…")


@exercise("11.viterbi")
def check_viterbi(fn: Callable[[str, LogProb], Any], lang: str | None = None) -> Feedback:
    """``fn(text, log_prob)`` -> the pieces (keys of ``log_prob``) that join to ``text`` with the greatest sum of
    ``log_prob``: Unigram's most probable split. The reference is the package's ``viterbi_split``."""
    cases = _viterbi_cases()
    long_case = cases[-1]

    def answer(case: tuple[str, LogProb]) -> Split:
        args = {"text": case[0], "log_prob": case[1]}
        return _split(lang, _call(lang, fn, args, _VITERBI_WHY, _viterbi_tools()))

    def underflow(case: tuple[str, LogProb]) -> Feedback | None:  # crashed on the long text alone
        return _underflow_hint(lang) if case is long_case else None

    answers = _answers(list(cases), answer, lambda c: _right_split(*c), underflow)
    if all(got == _right_split(*case) for case, got in zip(cases, answers)):
        return correct(
            lang,
            "Así codifica Unigram (SentencePiece, T5): con «▁desafortunadamente», ▁des · afortunada · mente, "
            "donde el trozo más largo primero, como hace WordPiece, daba ▁desa · fortuna · da · mente.",
            "This is how Unigram encodes (SentencePiece, T5): with “▁desafortunadamente”, ▁des · afortunada · "
            "mente, where the longest piece first, as WordPiece does, gave ▁desa · fortuna · da · mente.",
        )
    (text, log_prob), got = next((c, g) for c, g in zip(cases, answers) if g != _right_split(*c))
    want = _right_split(text, log_prob)
    where = dict(text=_shown_text(lang, text), got=_short(got, 70), want=_short(want, 70))
    named = _named(answers, list(cases), _VITERBI_MISTAKES)
    if named is not None and named[1] == "product_underflow":
        raise stop(_underflow_hint(lang))
    if named is not None and named[1] == "short_pieces":
        piece = max(want, key=len)
        raise stop(HINTS(lang, "short_pieces", piece=_quoted(lang, piece), n=len(piece), **where))
    unknown = next((p for p in got if p not in log_prob), None)
    if named is not None:
        raise stop(HINTS(lang, named[1], piece=_quoted(lang, str(unknown)), **where))
    if text == long_case[0] and all(g == _right_split(*c) for c, g in zip(cases[:-1], answers)):
        raise stop(_underflow_hint(lang))  # wrong on the long text alone
    if "".join(got) != text:
        raise stop(HINTS(lang, "split_not_text", joined=_shown_text(lang, "".join(got)), **where))
    if unknown is not None:
        raise stop(HINTS(lang, "not_in_vocab", piece=_quoted(lang, unknown), **where))
    raise stop(
        HINTS(
            lang,
            "split_wrong",
            got_score=round(_score(got, log_prob), 3),
            want_score=round(_score(want, log_prob), 3),
            **where,
        )
    )


def _underflow_hint(lang: str) -> Feedback:
    text, log_prob = _viterbi_cases()[-1]
    return HINTS(lang, "product_underflow", n=len(text), score=round(_score(_right_split(text, log_prob), log_prob)))


# ---- 11.encode -----------------------------------------------------------------------------------


def _byte_ids(word: str) -> Ids:
    return [BYTE_ID[b] for b in word.encode("utf-8")]


def _apply(ids: Ids, merges: Merges, step: Callable[[Ids, tuple[int, int], int], Ids] = merge) -> Ids:
    for pair, new in merges:
        ids = step(ids, pair, new)
    return ids


# the wrong ways to merge one pair, applied merge after merge by the encode mistakes below
def _first_only(ids: Ids, pair: tuple[int, int], new: int) -> Ids:
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == pair:
            return ids[:i] + [new] + ids[i + 2 :]
    return list(ids)


def _right_to_left(ids: Ids, pair: tuple[int, int], new: int) -> Ids:
    return merge(ids[::-1], pair[::-1], new)[::-1]


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
        # two merges compete, the one learned first with the larger id: the rank, not the id, decides
        ("abc", [((b, c), 900), ((a, b), 300)]),
        # the pair learned last appears twice: the rank, not the count, decides (and not the position either)
        ("bcabc", [((c, a), 256), ((a, b), 257), ((b, c), 258)]),
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


def _most_frequent_first(word: str, merges: Merges) -> Ids:
    """At each step the pair with a merge that appears most often in the ids (ties: the leftmost), every occurrence
    merged: how training picks pairs, used to encode."""
    ids, table = _byte_ids(word), dict(merges)
    while present := [p for p in zip(ids, ids[1:]) if p in table]:
        pair = max(present, key=present.count)  # the first of the most frequent: the leftmost
        ids = merge(ids, pair, table[pair])
    return ids


def _smallest_id_first(word: str, merges: Merges) -> Ids:
    """At each step the pair of the merge with the smallest new id (as if ids were ranks)."""
    ids, table = _byte_ids(word), dict(merges)
    while present := [p for p in zip(ids, ids[1:]) if p in table]:
        pair = min(present, key=table.get)
        ids = merge(ids, pair, table[pair])
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
    (_most_frequent_first, "by_frequency"),
    (_smallest_id_first, "by_new_id"),
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
    "aplica tú las fusiones, sin el tokenizador del paquete (`merge`, `train_bpe`, `ByteBPE`) ni `tokenizers`; "
    "`merge_by_hand`, de la sección 3, sí vale.",
    "apply the merges yourself, without the package's tokenizer (`merge`, `train_bpe`, `ByteBPE`) or "
    "`tokenizers`; section 3's `merge_by_hand` is fine.",
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
