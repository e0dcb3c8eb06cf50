"""Checkers for notebook 10's exercises: RoPE by pairs, SwiGLU, the online softmax, a cached decode step of
grouped-query attention with RoPE.

Each checker compares the student's answer with the package's own (computed before the
student's code runs), on cases chosen so that the usual mistakes give different numbers
(non-square shapes, a base other than 10000, a late large score), and names the mistake
without writing the code. The tools a statement forbids are switched off while the
student's function runs, and using one is answered as such.
The worked solutions are in the answer key :mod:`.solutions.nb10`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.overrides import TorchFunctionMode

from .. import modern
from ..attention import masked_softmax
from ..i18n import tr
from ..kv_cache import AttentionCache, KVCache
from ._core import (
    COMMON_HINTS,
    Feedback,
    ForbiddenTool,
    Hints,
    Unfinished,
    attempt,
    close,
    correct,
    diagnose,
    dtype_name,
    exercise,
    forbid,
    randn,
    sentence,
    stop,
    tensor,
    wrong_shape,
)

__all__ = [
    "HINTS",
    "check_rope",
    "check_swiglu",
    "check_online_softmax",
    "check_cached_step",
]

# Every hint these checkers give, (Spanish, English), by key.
HINTS = Hints(
    {
        **COMMON_HINTS,
        "forbidden": (
            "usaste {tool}, que el enunciado no permite: {why}",
            "you used {tool}, which the statement does not allow: {why}",
        ),
        "complex": (
            "devuelve un tensor real con la forma de `x`, no complejo: si usas números complejos, vuelve a pares reales "
            "al final.",
            "return a real tensor with the shape of `x`, not a complex one: if you use complex numbers, go back to real "
            "pairs at the end.",
        ),
        "dtype": (
            "el resultado debe ser un tensor de números reales (float), no {dtype}.",
            "the result must be a tensor of real numbers (float), not {dtype}.",
        ),
        # RoPE
        "rope_halves": (
            "giras los pares (i, i + Dh/2), la disposición de LLaMA. El enunciado pide los pares de dimensiones vecinas "
            "(2i, 2i+1).",
            "you turn the pairs (i, i + Dh/2), LLaMA's layout. The statement asks for the pairs of neighbouring "
            "dimensions (2i, 2i+1).",
        ),
        "rope_direction": (
            "giras en sentido contrario: revisa los signos de los senos en la rotación (el ángulo es +p·ω_i).",
            "you turn the other way: check the signs of the sines in the rotation (the angle is +p·ω_i).",
        ),
        "rope_frequency": (
            "las frecuencias no son las de la codificación sinusoidal: el par i tiene ω_i = base^(−2i/Dh). Revisa el "
            "exponente.",
            "the frequencies are not the sinusoidal encoding's: pair i has ω_i = base^(−2i/Dh). Check the exponent.",
        ),
        "rope_start": (
            "las posiciones empiezan en 0, y la posición 0 no gira.",
            "positions start at 0, and position 0 does not turn.",
        ),
        "rope_base": (
            "con base = 10000 acierta, pero no con otra base: usa el argumento `base`.",
            "it is right with base = 10000 but not with another base: use the `base` argument.",
        ),
        "rope_identity": (
            "la salida es igual a la entrada: no has girado nada.",
            "the output equals the input: nothing was turned.",
        ),
        "rope_half_pair": (
            "en una rotación cambian los dos elementos del par, cada uno con su coseno y su seno.",
            "in a rotation both elements of the pair change, each with its cosine and its sine.",
        ),
        "rope_inplace": (
            "el segundo elemento de cada par sale del primero ya girado: escribes en `x` (o en una vista de `x`) "
            "mientras aún necesitas sus valores originales. Calcula los dos elementos del par a partir de los valores "
            "de antes de girar.",
            "the second element of each pair comes from the already-turned first one: you write into `x` (or a view "
            "of `x`) while you still need its original values. Compute both elements of the pair from the values "
            "before turning.",
        ),
        "rope_other": (
            "el resultado no coincide: el par (2i, 2i+1) de la posición p debe girar un ángulo p·base^(−2i/Dh), como "
            "la matriz de rotación de la sección 2.",
            "the result does not match: the pair (2i, 2i+1) at position p must turn by the angle p·base^(−2i/Dh), like "
            "the rotation matrix of section 2.",
        ),
        # SwiGLU
        "swiglu_swapped": (
            "SiLU va sobre la compuerta, x·W_gate, no sobre x·W_up.",
            "SiLU goes on the gate, x·W_gate, not on x·W_up.",
        ),
        "swiglu_relu": (
            "usas ReLU: SwiGLU usa SiLU, z·σ(z).",
            "you use ReLU: SwiGLU uses SiLU, z·σ(z).",
        ),
        "swiglu_sigmoid": (
            "SiLU es z·σ(z), no σ(z) sola.",
            "SiLU is z·σ(z), not σ(z) alone.",
        ),
        "swiglu_gelu": (
            "usas GELU: SwiGLU usa SiLU, z·σ(z).",
            "you use GELU: SwiGLU uses SiLU, z·σ(z).",
        ),
        "swiglu_no_up": (
            "falta el producto con x·W_up: la compuerta multiplica, elemento a elemento, a la otra proyección.",
            "the product with x·W_up is missing: the gate multiplies the other projection, element by element.",
        ),
        "swiglu_sum": (
            "la compuerta y la otra proyección se multiplican elemento a elemento, no se suman.",
            "the gate and the other projection are multiplied element by element, not added.",
        ),
        "swiglu_late_silu": (
            "SiLU se aplica solo a la compuerta, antes del producto, no al producto.",
            "SiLU is applied to the gate alone, before the product, not to the product.",
        ),
        "swiglu_no_down": (
            "falta la proyección de vuelta con W_down.",
            "the projection back with W_down is missing.",
        ),
        "swiglu_batched_only": (
            "funciona con `x` de forma {works} pero no con {fails}: `x` tiene forma (…, D), con cualquier número de "
            "ejes delante. `x @ W` (o un einsum con `...`) multiplica el último eje sea cual sea la forma.",
            "it works for `x` of shape {works} but not for {fails}: `x` has shape (…, D), with any number of axes in "
            "front. `x @ W` (or an einsum with `...`) multiplies the last axis whatever the shape.",
        ),
        "swiglu_other": (
            "el resultado no coincide con W_down(SiLU(x·W_gate) ⊙ x·W_up).",
            "the result does not match W_down(SiLU(x·W_gate) ⊙ x·W_up).",
        ),
        # online softmax
        "online_whole_row": (
            "calculas un máximo o una suma sobre {width} columnas a la vez, más que un bloque (block_size = {block}): "
            "la softmax en línea no mira nunca la fila entera; lee `block_size` columnas cada vez y corrige el máximo "
            "y la suma bloque a bloque.",
            "you compute a maximum or a sum over {width} columns at once, more than a block (block_size = {block}): "
            "the online softmax never looks at the whole row; it reads `block_size` columns at a time and corrects "
            "the maximum and the sum block by block.",
        ),
        "online_ignores_block": (
            "tus bloques no son de `block_size` columnas: con block_size = {block} y {columns} columnas, los bloques "
            "son de {expected} columnas, y tú lees {widths}. Recorre las columnas de `block_size` en `block_size` (el "
            "último bloque puede ser más corto).",
            "your blocks are not of `block_size` columns: with block_size = {block} and {columns} columns, the blocks "
            "have {expected} columns, and you read {widths}. Walk over the columns `block_size` at a time (the last "
            "block may be shorter).",
        ),
        "online_zero_start": (
            "en filas con todas las puntuaciones muy negativas (−1000) el resultado no es la softmax: tu máximo "
            "acumulado empieza en 0, y entonces exp(s − 0) se redondea a 0 y la suma también. Empieza el máximo en "
            "−∞, que cualquier puntuación supera.",
            "on rows whose scores are all very negative (−1000) the result is not the softmax: your running maximum "
            "starts at 0, so exp(s − 0) rounds to 0 and so does the sum. Start the maximum at −∞, which any score "
            "beats.",
        ),
        "online_no_rescale": (
            "cuando un bloque trae un máximo mayor, la suma acumulada hay que corregirla: sus términos se calcularon con "
            "el máximo viejo.",
            "when a block brings a larger maximum, the running sum must be corrected: its terms were computed with the "
            "old maximum.",
        ),
        "online_inverted": (
            "el factor de corrección está al revés: la suma vieja se multiplica por exp(m_viejo − m_nuevo), que es ≤ 1 "
            "(y 0 en el primer bloque, donde m_viejo = −∞), no por exp(m_nuevo − m_viejo).",
            "the correction factor is upside down: the old sum is multiplied by exp(m_old − m_new), which is ≤ 1 (and 0 "
            "at the first block, where m_old = −∞), not by exp(m_new − m_old).",
        ),
        "online_not_finite": (
            "el resultado tiene NaN o infinitos incluso con puntuaciones pequeñas, así que no es un desbordamiento: "
            "mira el primer bloque, donde el máximo viejo es −∞. Allí el factor de corrección exp(m_viejo − m_nuevo) "
            "vale 0; el factor al revés, exp(m_nuevo − m_viejo), vale +∞, y ∞ · 0 es NaN.",
            "the result has NaN or infinite values even with small scores, so it is not an overflow: look at the "
            "first block, where the old maximum is −∞. There the correction factor exp(m_old − m_new) is 0; the "
            "factor upside down, exp(m_new − m_old), is +∞, and ∞ · 0 is NaN.",
        ),
        "online_per_block": (
            "normalizas cada bloque por su cuenta: cada fila debe sumar 1 entera, no cada bloque.",
            "you normalise each block on its own: each whole row must sum to 1, not each block.",
        ),
        "online_overflow": (
            "con una puntuación de 1000 el resultado no es finito: resta el máximo antes de la exponencial.",
            "with a score of 1000 the result is not finite: subtract the maximum before the exponential.",
        ),
        "online_underflow": (
            "con todas las puntuaciones cerca de −1000 el resultado no es finito: exp(s) se redondea a 0 y la suma "
            "también. Resta el máximo acumulado antes de la exponencial.",
            "with every score near −1000 the result is not finite: exp(s) rounds to 0 and so does the sum. Subtract "
            "the running maximum before the exponential.",
        ),
        "online_missing_block": (
            "la suma deja fuera las últimas columnas: ¿llega tu bucle al último bloque, aunque sea más corto?",
            "the sum leaves out the last columns: does your loop reach the last block, even when it is shorter?",
        ),
        "online_unnormalised": (
            "cada fila debe sumar 1: al final, divide entre la suma acumulada.",
            "each row must sum to 1: at the end, divide by the running sum.",
        ),
        # a cached step of grouped-query attention with RoPE
        "cached_layout": (
            "la salida tiene forma {got}, (B, H, T, D_h): devuélvela en la disposición de `q`, (B, T, H, D_h), "
            "trasponiendo las cabezas y los tokens al final.",
            "the output has shape {got}, (B, H, T, D_h): return it in `q`'s layout, (B, T, H, D_h), by swapping "
            "the heads and the tokens back at the end.",
        ),
        "cached_not_appended": (
            "después de tu paso la caché sigue guardando {S} posiciones: no has añadido las claves y los valores "
            "nuevos. Añádelos a la caché que recibes, que es la que leerá el paso siguiente.",
            "after your step the cache still holds {S} positions: you did not append the new keys and values. "
            "Append them to the cache you are given, the one the next step will read.",
        ),
        "cached_length": (
            "después de tu paso la caché guarda {got} posiciones, y debería guardar {expected} (las {S} de antes "
            "más los {T} tokens nuevos): añade cada token nuevo una sola vez.",
            "after your step the cache holds {got} positions, and it should hold {expected} (the {S} from before "
            "plus the {T} new tokens): append each new token once.",
        ),
        "cached_stored_heads": (
            "la caché guarda {got} cabezas por posición, no H_kv = {Hkv}: añades las claves y los valores ya "
            "repetidos. Guarda las H_kv cabezas de `k` y `v` (por eso ocupa H / H_kv veces menos) y repítelas solo "
            "para atender.",
            "the cache holds {got} heads per position, not H_kv = {Hkv}: you append the keys and values already "
            "repeated. Store the H_kv heads of `k` and `v` (that is why it takes H / H_kv times less) and repeat "
            "them only to attend.",
        ),
        "cached_old_changed": (
            "las {S} posiciones que la caché ya guardaba han cambiado: ¿modificas en su sitio un tensor que es una "
            "vista de la caché? Lo guardado no se toca; solo se añaden las posiciones nuevas.",
            "the {S} positions the cache already held have changed: do you modify in place a tensor that is a view "
            "of the cache? What is stored is left alone; only the new positions are appended.",
        ),
        "cached_empty": (
            "aciertas con una caché llena, pero falla con la vacía: antes del primer paso `cache.k` es `None`. "
            "Cuenta las posiciones guardadas de una forma que valga también entonces.",
            "you are right with a filled cache, but it fails with the empty one: before the first step `cache.k` "
            "is `None`. Count the stored positions in a way that also works then.",
        ),
        "cached_no_repeat": (
            "funciona cuando H_kv = H o H_kv = 1, pero falla con grupos (H = {H}, H_kv = {Hkv}): las H cabezas de "
            "consulta no casan con las H_kv de clave y valor. Cada cabeza de clave y valor sirve a un grupo de "
            "G = H / H_kv cabezas de consulta: repítela G veces antes de atender.",
            "it works when H_kv = H or H_kv = 1, but fails with groups (H = {H}, H_kv = {Hkv}): the H query heads do "
            "not match the H_kv key/value heads. Each key/value head serves a group of G = H / H_kv query heads: "
            "repeat it G times before attending.",
        ),
        "cached_grouping": (
            "repites las cabezas de clave y valor en otro orden: la cabeza de consulta h usa la h // G (0, 0, 1, 1, "
            "… con G = 2), no la h % H_kv (0, 1, 0, 1, …). Repite cada cabeza G veces seguidas, no el bloque entero "
            "de cabezas.",
            "you repeat the key/value heads in another order: query head h uses head h // G (0, 0, 1, 1, … with "
            "G = 2), not h % H_kv (0, 1, 0, 1, …). Repeat each head G times in a row, not the whole block of heads.",
        ),
        "cached_at_zero": (
            "giras los tokens nuevos en las posiciones 0, 1, …, como si empezaran la secuencia: la caché ya guarda "
            "las posiciones anteriores, y el primer token nuevo va detrás de ellas. Gira `q` y `k` en las posiciones "
            "verdaderas de los tokens nuevos.",
            "you turn the new tokens at positions 0, 1, …, as if they started the sequence: the cache already holds "
            "the earlier positions, and the first new token comes after them. Turn `q` and `k` at the new tokens' "
            "true positions.",
        ),
        "cached_plus_one": (
            "te pasas en uno: con S posiciones guardadas (0 … S − 1), el primer token nuevo va en la posición S, no "
            "en S + 1.",
            "you are one too high: with S positions stored (0 … S − 1), the first new token goes at position S, not "
            "S + 1.",
        ),
        "cached_capacity": (
            "giras en la capacidad de la caché (el sitio que tiene reservado), no en las posiciones que ya guarda: "
            "la capacidad no dice dónde va la secuencia.",
            "you turn at the cache's capacity (the room it has reserved), not at the positions it already holds: "
            "the capacity does not say where the sequence is.",
        ),
        "cached_after_append": (
            "tomas la posición después de añadir a la caché: entonces ya cuenta los T tokens nuevos (S + T), y lo "
            "que añadiste aún no estaba girado. Toma la posición antes de añadir, gira `q` y `k` y añade las claves "
            "ya giradas.",
            "you take the position after appending to the cache: by then it already counts the T new tokens "
            "(S + T), and what you appended was not turned yet. Take the position before appending, turn `q` and "
            "`k`, and append the turned keys.",
        ),
        "cached_q_unrotated": (
            "no giras las consultas: RoPE gira `q` y `k`, cada uno en su posición, para que su producto dependa de "
            "la distancia entre los dos tokens.",
            "you do not turn the queries: RoPE turns `q` and `k`, each at its position, so that their product "
            "depends on the distance between the two tokens.",
        ),
        "cached_k_unrotated": (
            "no giras las claves nuevas: la caché las guarda sin girar y la atención las usa así. Gira `k` en las "
            "posiciones de los tokens nuevos antes de añadirla a la caché.",
            "you do not turn the new keys: the cache stores them unturned and attention uses them so. Turn `k` at "
            "the new tokens' positions before appending it to the cache.",
        ),
        "cached_stored_unrotated": (
            "atiendes con las claves giradas, pero guardas en la caché las de antes de girar: el paso siguiente las "
            "leerá sin girar. Añade a la caché las claves ya giradas.",
            "you attend with the turned keys, but store the unturned ones in the cache: the next step will read "
            "them unturned. Append the turned keys to the cache.",
        ),
        "cached_rotated_again": (
            "vuelves a girar claves que la caché ya guardaba giradas: cada clave se gira una sola vez, en su "
            "posición, antes de guardarla. Gira solo las claves nuevas y atiende con las guardadas tal cual.",
            "you turn again keys the cache already held turned: each key is turned once, at its position, before "
            "it is stored. Turn only the new keys and attend with the stored ones as they are.",
        ),
        "cached_interleaved": (
            "giras los pares vecinos (2i, 2i+1), los del ejercicio 1; el modelo usa los pares por mitades "
            "(i, i + D_h/2), los de `apply_rope` por defecto.",
            "you turn neighbouring pairs (2i, 2i+1), exercise 1's; the model uses pairs by halves (i, i + D_h/2), "
            "`apply_rope`'s default.",
        ),
        "cached_base": (
            "con base = 10000 acierta, pero no con otra base: usa el argumento `base`.",
            "it is right with base = 10000 but not with another base: use the `base` argument.",
        ),
        "cached_rotated_values": (
            "giras también los valores: RoPE gira solo las consultas y las claves (lo que se compara); los valores "
            "se guardan y se mezclan tal cual.",
            "you turn the values too: RoPE turns only queries and keys (what is compared); the values are stored "
            "and mixed as they are.",
        ),
        "cached_no_causal": (
            "con varios tokens nuevos (T > 1), cada uno ve también los que vienen después de él: falta la máscara "
            "causal entre los tokens nuevos. El token nuevo i ve las posiciones guardadas y los nuevos hasta él.",
            "with several new tokens (T > 1), each one also sees those after it: the causal mask among the new "
            "tokens is missing. New token i sees the stored positions and the new ones up to itself.",
        ),
        "cached_hides_cache": (
            "tu máscara oculta posiciones guardadas que los tokens nuevos deben ver: cada token nuevo ve todas las "
            "posiciones de la caché. La diagonal de la máscara causal del token nuevo i es su posición, S + i, no i.",
            "your mask hides stored positions that the new tokens must see: each new token sees every position of "
            "the cache. The diagonal of new token i's causal mask is its position, S + i, not i.",
        ),
        "cached_scale_model": (
            "divides las puntuaciones entre √(H·D_h) = √d_model; la escala es √D_h, la dimensión de una cabeza.",
            "you divide the scores by √(H·D_h) = √d_model; the scale is √D_h, the width of one head.",
        ),
        "cached_no_scale": (
            "no escalas las puntuaciones: divídelas entre √D_h antes de la softmax.",
            "you do not scale the scores: divide them by √D_h before the softmax.",
        ),
        "cached_keys_other": (
            "las claves que añadiste a la caché no son `k` girada en las posiciones de los tokens nuevos (con "
            "H = {H}, H_kv = {Hkv}, S = {S}, T = {T}).",
            "the keys you appended to the cache are not `k` turned at the new tokens' positions (with H = {H}, "
            "H_kv = {Hkv}, S = {S}, T = {T}).",
        ),
        "cached_values_other": (
            "los valores que añadiste a la caché no son `v` tal cual (con S = {S}, T = {T}).",
            "the values you appended to the cache are not `v` as it is (with S = {S}, T = {T}).",
        ),
        "cached_output_other": (
            "la caché está bien, pero la salida no coincide (con H = {H}, H_kv = {Hkv}, S = {S}, T = {T}): revisa "
            "el giro de `q`, la repetición de las cabezas, la máscara y la escala.",
            "the cache is right, but the output does not match (with H = {H}, H_kv = {Hkv}, S = {S}, T = {T}): "
            "check the turn of `q`, the repetition of the heads, the mask and the scale.",
        ),
        "online_other": (
            "el resultado no coincide con la softmax de cada fila.",
            "the result does not match the softmax of each row.",
        ),
    }
)


# ---- shared by the exercises below ---------------------------------------------------------------


def _run(lang: str, fn: Callable[..., Any], args: tuple, tools: Iterable[str | tuple[str, str]], why: tuple[str, str]):
    """The student's answer with the ``tools`` the statement forbids switched off (``why``: the reason);
    using one stops the check with this notebook's hint, which names the tool."""

    def guarded(*a: Any) -> Any:
        try:
            return fn(*a)
        except ForbiddenTool as used:
            return used

    with forbid(tools, *why):
        got = attempt(lang, guarded, *args)
    if isinstance(got, ForbiddenTool):
        raise _Forbidden(HINTS(lang, "forbidden", tool=f"`{got.name}`", why=tr(lang, got.es, got.en)))
    return got


class _Forbidden(Unfinished):
    """The check stopped because the answer used a tool the statement forbids."""


def _float_answer(lang: str, got: Any, expected: Tensor) -> Tensor:
    """The answer as a float tensor of ``expected``'s shape; anything else stops the check with its hint."""
    got = tensor(lang, got)
    if got.is_complex():
        raise stop(HINTS(lang, "complex"))
    if not got.is_floating_point():
        raise stop(HINTS(lang, "dtype", dtype=dtype_name(got)))
    if got.shape != expected.shape:
        raise stop(wrong_shape(lang, got, expected.shape))
    return got.float()


# ---- 10.rope -------------------------------------------------------------------------------------


def _rope_cases() -> list[tuple[Tensor, float]]:
    """(x, base): x (T, Dh) with T ≠ Dh, and two bases."""
    return [(randn(7, 10, seed=10), 10000.0), (randn(5, 6, seed=11) * 2, 500.0)]


def _rope_with(
    x: Tensor, base: float, exponent: float = 2.0, sign: float = 1.0, start: int = 0, halves: bool = False
) -> Tensor:
    T, Dh = x.shape
    omega = base ** (-exponent * torch.arange(0, Dh // 2, dtype=torch.float32) / Dh)
    angle = sign * (torch.arange(T, dtype=torch.float32)[:, None] + start) * omega
    return modern.apply_rope(x, angle.cos(), angle.sin(), interleaved=not halves)


def _rope_in_place(x: Tensor, base: float) -> Tensor:
    """The pair's second element computed from the already-turned first one."""
    T, Dh = x.shape
    angle = torch.arange(T, dtype=torch.float32)[:, None] * base ** (-torch.arange(0, Dh, 2) / Dh)
    out = x.clone()
    out[:, 0::2] = x[:, 0::2] * angle.cos() - x[:, 1::2] * angle.sin()
    out[:, 1::2] = out[:, 0::2] * angle.sin() + x[:, 1::2] * angle.cos()
    return out


def _rope_mistakes(x: Tensor, base: float, right: Tensor) -> list[tuple[str, list[Tensor]]]:
    """What each typical mistake gives on x (T, Dh), whose right rotation is ``right``; two ways to make
    one mistake share its key."""
    half, other_half = right.clone(), right.clone()
    half[:, 1::2] = x[:, 1::2]
    other_half[:, 0::2] = x[:, 0::2]
    mistakes = [
        ("rope_halves", [_rope_with(x, base, halves=True)]),
        ("rope_direction", [_rope_with(x, base, sign=-1.0)]),
        ("rope_frequency", [_rope_with(x, base, exponent=1.0)]),
        ("rope_frequency", [_rope_with(x, base, exponent=4.0)]),
        ("rope_start", [_rope_with(x, base, start=1)]),
        ("rope_identity", [x]),
        ("rope_inplace", [_rope_in_place(x, base)]),
    ]
    if base != 10000.0:  # a hard-coded base only shows with another one
        mistakes.append(("rope_base", [_rope_with(x, 10000.0)]))
    return mistakes + [("rope_half_pair", [half]), ("rope_half_pair", [other_half])]


_ROPE_TOOLS = (
    ("minitransformer.modern.apply_rope", "apply_rope"),
    ("minitransformer.modern.rope_cos_sin", "rope_cos_sin"),
    ("minitransformer.modern.RotaryEmbedding.forward", "RotaryEmbedding"),
)
_ROPE_WHY = (
    "escribe tú la rotación de cada par, sin las funciones de RoPE del paquete.",
    "write the rotation of each pair yourself, without the package's RoPE functions.",
)


@exercise("10.rope")
def check_rope(rope: Callable[[Tensor, float], Tensor], lang: str | None = None) -> Feedback:
    """Check ``rope(x, base)``: x (T, Dh), positions 0 … T − 1, interleaved pairs (2i, 2i+1)."""
    for x, base in _rope_cases():
        T, Dh = x.shape
        expected = modern.apply_rope(x, *modern.rope_cos_sin(torch.arange(T), Dh, base), interleaved=True)
        got = _float_answer(lang, _run(lang, rope, (x.clone(), base), _ROPE_TOOLS, _ROPE_WHY), expected)
        if close(got, expected, atol=1e-4):
            continue
        key = diagnose([got], _rope_mistakes(x, base, expected), atol=1e-4)
        if key is not None:
            return HINTS(lang, key)
        if not bool(torch.isfinite(got).all()):
            return HINTS(lang, "nan")
        return HINTS(lang, "rope_other")
    return correct(
        lang,
        "Coincide con `apply_rope(..., interleaved=True)` del paquete.",
        "It matches the package's `apply_rope(..., interleaved=True)`.",
    )


# ---- 10.swiglu -----------------------------------------------------------------------------------


def _swiglu_cases() -> tuple[tuple[Tensor, Tensor, Tensor], list[tuple[tuple[int, ...], Tensor]]]:
    """(W_gate, W_up, W_down), D = 6, F = 10, and (shape, x) for every shape of x the package accepts:
    (B, T, D), (T, D) and (B, H, T, D)."""
    D, Fw = 6, 10
    weights = (randn(D, Fw, seed=21), randn(D, Fw, seed=22), randn(Fw, D, seed=23))
    shapes = [(2, 3, D), (5, D), (2, 2, 3, D)]
    return weights, [(shape, randn(*shape, seed=20 + n) * 1.5) for n, shape in enumerate(shapes)]


def _swiglu_mistakes(gate: Tensor, up: Tensor, W_down: Tensor) -> list[tuple[str, list[Tensor]]]:
    """What each typical mistake gives from x W_gate and x W_up (..., F); two ways to swap share a key."""
    return [
        ("swiglu_swapped", [(gate * F.silu(up)) @ W_down]),
        ("swiglu_swapped", [(F.silu(up) * gate) @ W_down]),
        ("swiglu_relu", [(F.relu(gate) * up) @ W_down]),
        ("swiglu_sigmoid", [(torch.sigmoid(gate) * up) @ W_down]),
        ("swiglu_gelu", [(F.gelu(gate) * up) @ W_down]),
        ("swiglu_no_up", [F.silu(gate) @ W_down]),
        ("swiglu_sum", [(F.silu(gate) + up) @ W_down]),
        ("swiglu_late_silu", [F.silu(gate * up) @ W_down]),
    ]


_SILU_TOOLS = ("torch.nn.functional.silu", "torch.silu", "torch.nn.SiLU.forward")
_SWIGLU_WHY = (
    "escribe SiLU tú mismo, z·σ(z), con `torch.sigmoid`.",
    "write SiLU yourself, z·σ(z), with `torch.sigmoid`.",
)


@exercise("10.swiglu")
def check_swiglu(swiglu: Callable[..., Tensor], lang: str | None = None) -> Feedback:
    """Check ``swiglu(x, W_gate, W_up, W_down)``: x (..., D), W_gate and W_up (D, F), W_down (F, D).

    Every shape of x the package accepts is tried, (B, T, D), (T, D) and (B, H, T, D); an answer
    right on some of them and not on the others is told so.
    """
    (W_gate, W_up, W_down), xs = _swiglu_cases()
    runs = []
    for shape, x in xs:
        args = (x.clone(), W_gate.clone(), W_up.clone(), W_down.clone())
        try:
            got: Any = _run(lang, swiglu, args, _SILU_TOOLS, _SWIGLU_WHY)
        except _Forbidden:
            raise
        except Unfinished as stopped:  # an error, None, ...: kept, in case another shape works
            got = stopped
        expected = (F.silu(x @ W_gate) * (x @ W_up)) @ W_down
        runs.append((shape, x, got, expected))
    right = [shape for shape, _, got, expected in runs if close(got, expected, atol=1e-3)]
    if len(right) == len(runs):
        return correct(lang, "Es la red SwiGLU de LLaMA.", "It is LLaMA's SwiGLU network.")
    if right:
        shape, _, got, _ = next(run for run in runs if run[0] not in right)
        hint = HINTS(lang, "swiglu_batched_only", works=_words(lang, [str(r) for r in right]), fails=str(shape))
        if isinstance(got, Unfinished):  # what went wrong there, as attempt() said it
            said = sentence(got.feedback.message.split(" ", 3)[-1])
            return Feedback(False, f"{hint.message}\n{said}", hint.hint)
        return hint
    _, x, got, expected = runs[0]
    if isinstance(got, Unfinished):
        raise got
    gate, up = x @ W_gate, x @ W_up
    if isinstance(got, Tensor) and got.shape == gate.shape and got.is_floating_point():
        return HINTS(lang, "swiglu_no_down")
    got = _float_answer(lang, got, expected)
    key = diagnose([got], _swiglu_mistakes(gate, up, W_down), atol=1e-3)
    if key is not None:
        return HINTS(lang, key)
    if not bool(torch.isfinite(got).all()):
        return HINTS(lang, "nan")
    return HINTS(lang, "swiglu_other")


# ---- 10.online_softmax ---------------------------------------------------------------------------


def _online_cases() -> list[tuple[Tensor, int]]:
    """(scores, block_size): scores (R, S), small scores first, then a huge score in the last, shorter
    block, then every score far below 0."""
    late = randn(3, 23, seed=30) * 4
    late[0, 21] = 1000.0  # a huge score in the last, shorter block
    late[1, :4] = 50.0  # the maximum in the first block
    negative = torch.full((2, 10), -1000.0)  # every score far below 0: the running maximum must start at −∞
    negative[1] += torch.arange(10.0)
    return [(randn(2, 9, seed=31) * 3, 7), (late, 4), (negative, 3)]  # small scores first


def _online_variant(scores: Tensor, block_size: int, kind: str) -> Tensor:
    start_max = 0.0 if kind == "zero_start" else float("-inf")
    m = torch.full(scores.shape[:-1] + (1,), start_max, dtype=scores.dtype)
    l = torch.zeros_like(m)
    S = scores.size(-1)
    stop = S - block_size if kind == "missing" else S
    for start in range(0, max(stop, 1), block_size):
        block = scores[..., start : start + block_size]
        m_new = torch.maximum(m, block.amax(dim=-1, keepdim=True))
        if kind == "no_rescale":
            l = l + torch.exp(block - m_new).sum(dim=-1, keepdim=True)
        elif kind == "inverted":
            l = l * torch.exp(m_new - m).nan_to_num(0.0, 0.0, 0.0) + torch.exp(block - m_new).sum(dim=-1, keepdim=True)
        else:
            l = l * torch.exp(m - m_new) + torch.exp(block - m_new).sum(dim=-1, keepdim=True)
        m = m_new
    return torch.exp(scores - m) / l


def _online_mistakes(scores: Tensor, block: int, right: Tensor) -> dict[str, list[Tensor]]:
    """What each typical mistake gives on ``scores`` (..., S) read ``block`` columns at a time, leaving out
    those that give the ``right`` answer on this case (there they cannot be the mistake)."""
    mistakes = {
        "online_zero_start": _online_variant(scores, block, "zero_start"),
        "online_no_rescale": _online_variant(scores, block, "no_rescale"),
        "online_inverted": _online_variant(scores, block, "inverted"),
        "online_per_block": torch.cat([torch.softmax(b, dim=-1) for b in scores.split(block, dim=-1)], dim=-1),
        "online_missing_block": _online_variant(scores, block, "missing"),
        "online_unnormalised": torch.exp(scores - scores.amax(dim=-1, keepdim=True)),
    }
    return {key: [wrong] for key, wrong in mistakes.items() if not close(wrong, right)}


_SOFTMAX_TOOLS = (
    "torch.softmax",
    "torch.nn.functional.softmax",
    ("torch.Tensor.softmax", "Tensor.softmax"),
    "torch.special.softmax",
    "torch._softmax",
    "torch.nn.Softmax.forward",
    "torch.nn.functional.log_softmax",
    "torch.special.log_softmax",
    "torch.log_softmax",
    "torch._log_softmax",
    ("torch.Tensor.log_softmax", "Tensor.log_softmax"),
    "torch.nn.LogSoftmax.forward",
    "torch.logsumexp",
    "torch.special.logsumexp",
    ("torch.Tensor.logsumexp", "Tensor.logsumexp"),
    ("minitransformer.attention_cost.online_softmax", "online_softmax"),
)
_ONLINE_WHY = (
    "calcula tú el máximo y la suma bloque a bloque, sin la softmax de PyTorch ni `logsumexp`.",
    "compute the maximum and the sum block by block yourself, without PyTorch's softmax or `logsumexp`.",
)

# Operations that reduce an axis: over the last one, their width is how many columns were read at once.
_REDUCTIONS = frozenset(
    "max amax min amin sum nansum mean logsumexp softmax log_softmax cumsum cumprod logcumsumexp cummax cummin "
    "prod topk sort argmax argmin aminmax norm median nanmedian var std kthvalue".split()
)


class _ColumnReads(TorchFunctionMode):
    """Records how many columns of a row the student's function takes at once: the width of every
    reduction over the last axis, and of every slice of columns cut from ``scores`` (or a copy of it)."""

    def __init__(self, scores: Tensor):
        super().__init__()
        self.reduced: list[int] = []  # widths of reductions over the last axis
        self.sliced: list[int] = []  # widths of slices of columns of scores
        self.whole = [scores]  # scores and the tensors of its shape made from it

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        try:
            self._record(func, args, kwargs, out)
        except Exception:  # noqa: BLE001 — recording never changes what the student's code does
            pass
        return out

    def _record(self, func, args, kwargs, out) -> None:
        if not args or not isinstance(args[0], Tensor) or args[0].dim() == 0:
            return
        x, name = args[0], getattr(func, "__name__", "").lstrip("_")
        if name in _REDUCTIONS:
            dim = kwargs.get("dim", args[1] if len(args) > 1 and not isinstance(args[1], Tensor) else None)
            if len(args) > 1 and isinstance(args[1], Tensor):
                return  # torch.max(a, b): element by element
            dims = range(x.dim()) if dim is None else dim if isinstance(dim, (tuple, list)) else (dim,)
            if any(int(d) % x.dim() == x.dim() - 1 for d in dims):
                self.reduced.append(x.size(-1))
            return
        if not any(x is w for w in self.whole):
            return
        S = x.size(-1)
        outputs = out if isinstance(out, (tuple, list)) else (out,)
        for o in outputs:
            if not isinstance(o, Tensor):
                continue
            if o.shape == x.shape:
                self.whole.append(o)
            elif name == "getitem":
                width = _last_axis_width(x, args[1] if len(args) > 1 else None)
                if width is not None and width < S:
                    self.sliced.append(width)
            elif o.dim() == x.dim() and o.shape[:-1] == x.shape[:-1] and o.size(-1) < S:
                self.sliced.append(o.size(-1))


def _last_axis_width(x: Tensor, index: Any) -> int | None:
    """How many entries of ``x``'s last axis ``x[index]`` keeps (None: all of them, or unknown)."""
    items = [i for i in (index if isinstance(index, tuple) else (index,)) if i is not None]
    if items and items[-1] is Ellipsis:
        return None
    if not any(i is Ellipsis for i in items) and len(items) != x.dim():
        return None
    item, S = items[-1], x.size(-1)
    if isinstance(item, bool):
        return None
    if isinstance(item, int) or (isinstance(item, Tensor) and item.dim() == 0 and not item.is_floating_point()):
        return 1
    if isinstance(item, slice):
        return len(range(S)[item])
    if isinstance(item, Tensor) and item.dtype == torch.bool:
        return int(item.sum())
    try:
        return len(item)
    except TypeError:
        return None


def _block_widths(S: int, block: int) -> list[int]:
    return [min(block, S - start) for start in range(0, S, block)]


@exercise("10.online_softmax")
def check_online_softmax(online_softmax: Callable[[Tensor, int], Tensor], lang: str | None = None) -> Feedback:
    """Check ``online_softmax(scores, block_size)``: scores (R, S) -> the softmax of each row, read in
    blocks of ``block_size`` columns (the last one may be shorter) with a running maximum and sum."""
    for scores, block in _online_cases():
        expected = torch.softmax(scores, dim=-1)
        reads = _ColumnReads(scores)
        with reads:
            got = _run(lang, online_softmax, (scores, block), _SOFTMAX_TOOLS, _ONLINE_WHY)
        got = _float_answer(lang, got, expected)
        S, allowed = scores.size(-1), set(_block_widths(scores.size(-1), block))
        if reads.reduced and max(reads.reduced) > block:
            return HINTS(lang, "online_whole_row", width=max(reads.reduced), block=block)
        widths = reads.reduced or reads.sliced
        if set(widths) - allowed:
            return HINTS(
                lang,
                "online_ignores_block",
                block=block,
                columns=S,
                expected=_words(lang, sorted(allowed, reverse=True)),
                widths=_words(lang, sorted(set(widths), reverse=True)),
            )
        if close(got, expected):
            continue
        key = diagnose([got], _online_mistakes(scores, block, expected))
        if key is not None:
            return HINTS(lang, key)
        if not bool(torch.isfinite(got).all()):
            if scores.max() > 100:
                return HINTS(lang, "online_overflow")
            return HINTS(lang, "online_underflow" if scores.max() < -100 else "online_not_finite")
        return HINTS(lang, "online_other")
    return correct(
        lang,
        "Es la softmax, calculada por bloques como en FlashAttention.",
        "It is the softmax, computed in blocks as in FlashAttention.",
    )


def _words(lang: str, numbers: list[int]) -> str:
    """1, 2 and 3 / 1, 2 y 3."""
    text = [str(n) for n in numbers]
    return text[0] if len(text) == 1 else ", ".join(text[:-1]) + tr(lang, " y ", " and ") + text[-1]


# ---- 10.cached_step ------------------------------------------------------------------------------


class _StepCase:
    """One call of the student's step: new q (B, T, H, Dh), k and v (B, T, Hkv, Dh), a preallocated cache of
    capacity C already holding S positions (``old_k``, ``old_v``: (B, S, Hkv, Dh)), and RoPE's base."""

    def __init__(self, B: int, T: int, H: int, Hkv: int, Dh: int, S: int, C: int, base: float, seed: int):
        self.B, self.T, self.H, self.Hkv, self.Dh, self.S, self.C, self.base = B, T, H, Hkv, Dh, S, C, base
        self.q = randn(B, T, H, Dh, seed=seed)
        self.k, self.v = randn(B, T, Hkv, Dh, seed=seed + 1), randn(B, T, Hkv, Dh, seed=seed + 2)
        self.old_k, self.old_v = randn(B, S, Hkv, Dh, seed=seed + 3), randn(B, S, Hkv, Dh, seed=seed + 4)

    def cache(self) -> AttentionCache:
        cache = AttentionCache(capacity=self.C)
        if self.S:
            cache.update(self.old_k.clone(), self.old_v.clone())
        return cache


# Every shape differs from the others (B ≠ T ≠ H ≠ Hkv ≠ Dh where it matters), C differs from S + 1 and
# S + T, grouped heads with G = 2 and G = 3, plain heads (Hkv = H) and one shared head (Hkv = 1), T = 1 and
# T > 1, two empty caches, and bases other than 10000.
_STEP_CASES = [
    _StepCase(B=2, T=1, H=4, Hkv=2, Dh=8, S=5, C=9, base=10000.0, seed=50),
    _StepCase(B=1, T=3, H=6, Hkv=2, Dh=6, S=4, C=11, base=500.0, seed=55),
    _StepCase(B=3, T=2, H=4, Hkv=4, Dh=4, S=0, C=5, base=100.0, seed=60),
    _StepCase(B=2, T=3, H=2, Hkv=1, Dh=10, S=6, C=13, base=50.0, seed=65),
    _StepCase(B=1, T=1, H=3, Hkv=1, Dh=6, S=0, C=4, base=1000.0, seed=70),
    _StepCase(B=1, T=2, H=6, Hkv=3, Dh=4, S=7, C=12, base=10000.0, seed=75),
]


def _step_reference(case: _StepCase) -> tuple[Tensor, AttentionCache]:
    """The package's own step: the package's ``GroupedQueryAttention`` with the cache (RoPE at the positions and
    the mask that ``KVCache.extend`` gives), fed q, k and v through projections that only pick them out of one
    input. Returns the output (B, T, H, Dh) and the cache it appended to."""
    B, T, H, Hkv, Dh, S = case.B, case.T, case.H, case.Hkv, case.Dh, case.S
    widths = [H * Dh, Hkv * Dh, Hkv * Dh]
    D = sum(widths)
    rope = modern.RotaryEmbedding(Dh, S + T, case.base)
    attn = modern.GroupedQueryAttention(D, H, Hkv, rope, d_head=Dh).eval()
    with torch.no_grad():
        eye = torch.eye(D)
        for layer, rows in zip((attn.W_q, attn.W_k, attn.W_v), eye.split(widths)):
            layer.weight.copy_(rows)  # picks q, k or v out of x
        attn.W_o.weight.copy_(eye[:, : H * Dh])  # the heads in the first H · Dh columns
        positions = KVCache(1)
        if S:
            positions.extend(torch.ones(B, S, dtype=torch.bool))
        at, mask = positions.extend(torch.ones(B, T, dtype=torch.bool))  # (B, T), (B, 1, T, S + T)
        x = torch.cat([case.q.flatten(2), case.k.flatten(2), case.v.flatten(2)], dim=-1)  # (B, T, D)
        cache = case.cache()
        out, _ = attn(x, mask, positions=at, cache=cache)
    return out[..., : H * Dh].reshape(B, T, H, Dh), cache


def _turn(x: Tensor, at: int | None, base: float, interleaved: bool = False) -> Tensor:
    """x (B, T, h, Dh) turned at positions at … at + T − 1 (``None``: not turned), as (B, h, T, Dh)."""
    x = x.transpose(1, 2)
    if at is None:
        return x
    cos, sin = modern.rope_cos_sin(torch.arange(at, at + x.size(-2)), x.size(-1), base)
    return modern.apply_rope(x, cos, sin, interleaved=interleaved)


def _step_variant(
    case: _StepCase,
    q_at: int | None,
    k_at: int | None,
    *,
    store_turned: bool = True,
    again: bool = False,
    interleaved: bool = False,
    base: float | None = None,
    turn_values: bool = False,
    repeat: str = "interleave",
    mask: str = "causal",
    scale: float | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """What a step written with one mistake gives: (output (B, T, H, Dh), the keys and the values it appends
    (B, T, Hkv, Dh)). ``q_at``/``k_at``: where q and the new keys are turned (None: not turned);
    ``store_turned``: the turned keys are stored (else k as given); ``again``: all the keys, stored and new,
    are turned at 0 … S + T − 1 after appending; ``repeat``: "interleave" (the package's grouping) or "tile";
    ``mask``: "causal", "none", "unshifted" (the causal diagonal at column i, not S + i) or "new_only"."""
    T, H, Hkv, Dh, S = case.T, case.H, case.Hkv, case.Dh, case.S
    base = case.base if base is None else base
    q = _turn(case.q, q_at, base, interleaved)  # (B, H, T, Dh)
    new_k = _turn(case.k, k_at, base, interleaved)  # (B, Hkv, T, Dh)
    new_v = _turn(case.v, S if turn_values else None, base, interleaved)
    stored_k = new_k if store_turned else case.k.transpose(1, 2)
    keys = torch.cat([case.old_k.transpose(1, 2), stored_k if again else new_k], dim=2)  # (B, Hkv, S + T, Dh)
    if again:
        keys = _turn(keys.transpose(1, 2), 0, base, interleaved)
    values = torch.cat([case.old_v.transpose(1, 2), new_v], dim=2)
    G = H // Hkv
    if repeat == "interleave":
        keys, values = keys.repeat_interleave(G, dim=1), values.repeat_interleave(G, dim=1)  # (B, H, S + T, Dh)
    else:
        keys, values = keys.repeat(1, G, 1, 1), values.repeat(1, G, 1, 1)
    allowed = {
        "causal": torch.ones(T, S + T, dtype=torch.bool).tril(diagonal=S),
        "none": None,
        "unshifted": torch.ones(T, S + T, dtype=torch.bool).tril(),
        "new_only": torch.cat([torch.zeros(T, S, dtype=torch.bool), torch.ones(T, T, dtype=torch.bool).tril()], 1),
    }[mask]
    scores = q @ keys.transpose(-2, -1) * (1 / math.sqrt(Dh) if scale is None else scale)  # (B, H, T, S + T)
    out = masked_softmax(scores, allowed) @ values  # (B, H, T, Dh)
    return out.transpose(1, 2), stored_k.transpose(1, 2), new_v.transpose(1, 2)


def _step_mistakes(cases: list[_StepCase]) -> list[tuple[str, list[tuple[Tensor, Tensor, Tensor] | None]]]:
    """What each typical mistake gives on each case, (output, appended keys, appended values); two ways to make
    one mistake share its key. A mistake whose program is right on a case gives the right answer there."""

    def each(**how: Any) -> list[tuple[Tensor, Tensor, Tensor] | None]:
        return [_step_variant(c, **{k: f(c) if callable(f) else f for k, f in how.items()}) for c in cases]

    def at(shift: Callable[[_StepCase], int]) -> dict[str, Callable[[_StepCase], int]]:
        return {"q_at": shift, "k_at": shift}

    right = at(lambda c: c.S)
    mistakes = [
        ("cached_at_zero", each(**at(lambda c: 0))),
        ("cached_plus_one", each(**at(lambda c: c.S + 1))),
        ("cached_capacity", each(**at(lambda c: c.C))),
        ("cached_after_append", each(**at(lambda c: c.S + c.T), store_turned=False)),
        ("cached_after_append", each(q_at=lambda c: c.S + c.T, k_at=None, store_turned=False, again=True)),
        ("cached_after_append", each(**at(lambda c: c.S + c.T))),
        ("cached_q_unrotated", each(q_at=None, k_at=lambda c: c.S)),
        ("cached_k_unrotated", each(q_at=lambda c: c.S, k_at=None)),
        ("cached_stored_unrotated", each(**right, store_turned=False)),
        ("cached_rotated_again", each(q_at=lambda c: c.S, k_at=None, store_turned=False, again=True)),
        ("cached_rotated_again", each(**right, again=True)),
        ("cached_interleaved", each(**right, interleaved=True)),
        ("cached_rotated_values", each(**right, turn_values=True)),
        ("cached_grouping", each(**right, repeat="tile")),
        ("cached_no_causal", each(**right, mask="none")),
        ("cached_hides_cache", each(**right, mask="unshifted")),
        ("cached_hides_cache", each(**right, mask="new_only")),
        ("cached_scale_model", each(**right, scale=lambda c: 1 / math.sqrt(c.H * c.Dh))),
        ("cached_no_scale", each(**right, scale=1.0)),
    ]
    if any(c.base != 10000.0 for c in cases):  # a hard-coded base only shows with another one
        mistakes.append(("cached_base", each(**right, base=10000.0)))
    return mistakes


def _same_step(answer: tuple[Tensor, Tensor, Tensor], gives: tuple[Tensor, Tensor, Tensor]) -> bool:
    return all(close(a, b, atol=1e-4) for a, b in zip(answer, gives))


_STEP_TOOLS = (
    "torch.nn.functional.scaled_dot_product_attention",
    ("minitransformer.attention.fast_attention", "fast_attention"),
    ("minitransformer.modern.GroupedQueryAttention.forward", "GroupedQueryAttention"),
    ("minitransformer.modern.ModernBlock.forward", "ModernBlock"),
    ("minitransformer.modern.ModernTransformer.forward", "ModernTransformer"),
)
_STEP_WHY = (
    "repite tú las cabezas de clave y valor y escribe tú la máscara, sin la atención de PyTorch ni los módulos de "
    "atención del paquete.",
    "repeat the key/value heads and write the mask yourself, without PyTorch's attention or the package's "
    "attention modules.",
)


def _cache_state(cache: AttentionCache) -> tuple[int, Tensor | None, Tensor | None]:
    """How many positions the cache holds after the student's step, and its keys and values (None if it holds
    something that is not a tensor)."""
    k, v = cache.k, cache.v
    if not isinstance(k, Tensor) or not isinstance(v, Tensor) or k.dim() < 2:
        return 0 if k is None else -1, None, None
    return k.size(1), k.detach().cpu(), v.detach().cpu()


def _step_answer(lang: str, case: _StepCase, got: Any, cache: AttentionCache) -> tuple[Tensor, Tensor, Tensor]:
    """The answer on ``case`` as (output, appended keys, appended values); what is wrong with its shape or with
    the cache's length stops the check with its hint."""
    B, T, H, Hkv, Dh, S = case.B, case.T, case.H, case.Hkv, case.Dh, case.S
    got = tensor(lang, got)
    if got.is_complex():
        raise stop(HINTS(lang, "complex"))
    if not got.is_floating_point():
        raise stop(HINTS(lang, "dtype", dtype=dtype_name(got)))
    if got.shape != (B, T, H, Dh):
        if got.shape == (B, H, T, Dh):
            raise stop(HINTS(lang, "cached_layout", got=tuple(got.shape)))
        raise stop(wrong_shape(lang, got, (B, T, H, Dh)))
    length, keys, values = _cache_state(cache)
    if length == S:
        raise stop(HINTS(lang, "cached_not_appended", S=S))
    if length != S + T or keys is None:
        raise stop(HINTS(lang, "cached_length", got=length, expected=S + T, S=S, T=T))
    if keys.dim() == 4 and keys.shape[2] != Hkv and keys.shape[0] == B:
        raise stop(HINTS(lang, "cached_stored_heads", got=keys.shape[2], Hkv=Hkv))
    if keys.shape != (B, S + T, Hkv, Dh) or values.shape != keys.shape:
        raise stop(HINTS(lang, "cached_length", got=length, expected=S + T, S=S, T=T))
    if not (close(keys[:, :S], case.old_k) and close(values[:, :S], case.old_v)):
        raise stop(HINTS(lang, "cached_old_changed", S=S))
    return got.float(), keys[:, S:].float(), values[:, S:].float()


@exercise("10.cached_step")
def check_cached_step(cached_step: Callable[..., Tensor], lang: str | None = None) -> Feedback:
    """Check ``cached_step(q, k, v, cache, base)``: one decode step of grouped-query attention with RoPE
    (halves) under a preallocated :class:`~minitransformer.kv_cache.AttentionCache`. q (B, T, H, Dh), k and v
    (B, T, Hkv, Dh), cache (B, S, Hkv, Dh) -> (B, T, H, Dh); the cache must hold S + T positions after it.

    Every case is run first; an answer that fails only on the empty caches, or only where the heads are grouped
    (1 < Hkv < H), is told so; otherwise a mistake is named when it explains every case.
    """
    runs: list[Any] = []  # per case: (output, keys, values), or the Unfinished it stopped with
    for case in _STEP_CASES:
        cache = case.cache()
        args = (case.q.clone(), case.k.clone(), case.v.clone(), cache, case.base)
        try:
            runs.append(_step_answer(lang, case, _run(lang, cached_step, args, _STEP_TOOLS, _STEP_WHY), cache))
        except _Forbidden:
            raise
        except Unfinished as stopped:
            runs.append(stopped)
    expected = []
    for case in _STEP_CASES:
        out, cache = _step_reference(case)
        expected.append((out, cache.k[:, case.S :], cache.v[:, case.S :]))
    right = [not isinstance(r, Unfinished) and _same_step(r, e) for r, e in zip(runs, expected)]
    if all(right):
        return correct(
            lang,
            "Es el paso que da cada capa de `ModernTransformer` al generar con caché.",
            "It is the step each layer of `ModernTransformer` takes when it generates with a cache.",
        )
    crashed = {i for i, r in enumerate(runs) if isinstance(r, Unfinished) and r.feedback.hint == "crashed"}
    for key, where in [
        ("cached_empty", {i for i, c in enumerate(_STEP_CASES) if c.S == 0}),
        ("cached_no_repeat", {i for i, c in enumerate(_STEP_CASES) if 1 < c.Hkv < c.H}),
    ]:
        if crashed == where:  # it fails there, and only there
            case = _STEP_CASES[min(where)]
            hint = HINTS(lang, key, H=case.H, Hkv=case.Hkv)
            said = sentence(runs[min(where)].feedback.message.split(" ", 3)[-1])
            return Feedback(False, f"{hint.message}\n{said}", hint.hint)
    for run in runs:  # the repeated heads do not fit a cache that holds H_kv: the crashes elsewhere follow from it
        if isinstance(run, Unfinished) and run.feedback.hint == "cached_stored_heads":
            raise run
    first = right.index(False)
    if isinstance(runs[first], Unfinished):
        raise runs[first]
    ran = [i for i, r in enumerate(runs) if not isinstance(r, Unfinished)]
    key = diagnose(
        [runs[i] for i in ran],
        [(k, [gives[i] for i in ran]) for k, gives in _step_mistakes(_STEP_CASES)],
        same=_same_step,
    )
    if key is not None:
        return HINTS(lang, key)
    case, (out, keys, values), (_, want_keys, want_values) = _STEP_CASES[first], runs[first], expected[first]
    shapes = {"H": case.H, "Hkv": case.Hkv, "S": case.S, "T": case.T}
    if not close(keys, want_keys, atol=1e-4):
        return HINTS(lang, "cached_keys_other", **shapes)
    if not close(values, want_values, atol=1e-4):
        return HINTS(lang, "cached_values_other", **shapes)
    if not bool(torch.isfinite(out).all()):
        return HINTS(lang, "nan")
    return HINTS(lang, "cached_output_other", **shapes)
