"""The answer key of notebook 11, in notebook order: ``11.decode_stream``, ``11.viterbi``, ``11.encode``."""

from __future__ import annotations

from ..registry import solution


@solution(
    "11.decode_stream",
    "Los bytes que llegan se juntan con los guardados. Entre los tres últimos se busca el byte inicial del último "
    "carácter (el primero que no es de continuación, 10xxxxxx): su forma dice cuántos bytes tiene el carácter, y si "
    'aún faltan se guarda desde él; lo de antes se decodifica ya, con errors="replace" para los bytes que no '
    "forman ningún carácter. Al final, lo guardado se decodifica igual: un carácter a medias sale como «�».",
    "The bytes that arrive are joined to the held ones. Among the last three, look for the lead byte of the last "
    "character (the first that is not a continuation byte, 10xxxxxx): its shape says how many bytes the character "
    "has, and if some are missing it is held back from there; what comes before is decoded now, with "
    'errors="replace" for the bytes that form no character. At the end, the held bytes are decoded the same way: '
    "a character left halfway comes out as “�”.",
)
def solution_my_decode_stream(token_bytes):
    """«Lo que muestra un decodificador por flujo tras cada token, y lo que queda al final.|What a streaming decoder shows after each token, and what is left at the end.»"""
    pieces, held = [], b""
    for token in token_bytes:
        held += token
        cut = len(held)
        for back in range(1, min(3, len(held)) + 1):  # «los tres últimos bytes|the last three bytes»
            b = held[-back]
            if b >> 6 == 0b10:  # «10xxxxxx: de continuación|10xxxxxx: a continuation byte»
                continue
            size = 2 if b >> 5 == 0b110 else 3 if b >> 4 == 0b1110 else 4 if b >> 3 == 0b11110 else 1
            if size > back:  # «le faltan bytes: se guarda desde aquí|bytes missing: hold back from here»
                cut = len(held) - back
            break
        pieces.append(held[:cut].decode("utf-8", errors="replace"))
        held = held[cut:]
    pieces.append(held.decode("utf-8", errors="replace"))  # «lo que queda al final|whatever is left at the end»
    return pieces


@solution(
    "11.viterbi",
    "`best[i]` es la mejor puntuación de `text[:i]`: la partición de los i primeros caracteres acaba en un trozo "
    "`text[j:i]` del vocabulario, y antes lleva la mejor partición de `text[:j]`, así que `best[i]` es el máximo de "
    "`best[j] + log_prob[text[j:i]]`. `back[i]` recuerda de qué `j` vino, y la partición se lee desde el final "
    "siguiendo esas `j`, al revés. Se suman logaritmos: multiplicar probabilidades se queda en 0,0 con un texto "
    "largo.",
    "`best[i]` is the best score of `text[:i]`: a split of the first i characters ends in a piece `text[j:i]` of "
    "the vocabulary, and before it comes the best split of `text[:j]`, so `best[i]` is the greatest "
    "`best[j] + log_prob[text[j:i]]`. `back[i]` remembers which `j` it came from, and the split is read from the "
    "end following those `j`, backwards. Logarithms are added: multiplying probabilities becomes 0.0 on a long "
    "text.",
)
def solution_my_viterbi(text, log_prob):
    """«La partición más probable de text con el vocabulario de Unigram log_prob.|The most probable split of text under the Unigram vocabulary log_prob.»"""
    n = len(text)
    best = [0.0] + [float("-inf")] * n  # «best[i]: la mejor puntuación de text[:i]|best[i]: the best score of text[:i]»
    back = [0] * (n + 1)  # «back[i]: dónde empieza el último trozo|back[i]: where the last piece starts»
    for i in range(1, n + 1):
        for j in range(i):
            piece = text[j:i]
            if piece in log_prob and best[j] + log_prob[piece] > best[i]:
                best[i], back[i] = best[j] + log_prob[piece], j
    pieces, i = [], n
    while i > 0:  # «del final al principio|from the end to the start»
        pieces.append(text[back[i] : i])
        i = back[i]
    return pieces[::-1]


@solution(
    "11.encode",
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
