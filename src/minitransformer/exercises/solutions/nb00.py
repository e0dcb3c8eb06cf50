"""The answer key of notebook 00, in notebook order: ``00.attention_shapes``, ``00.mha_parameters``."""

from __future__ import annotations

from ..registry import solution


@solution(
    "00.attention_shapes",
    "Cada mapa tiene una fila por consulta y una columna por clave, y uno por cabeza: (B, H, consultas, "
    "claves). En el codificador el origen se mira a sí mismo (S × S); en la autoatención del decodificador, "
    "el destino a sí mismo (T × T); en la atención cruzada las consultas son del destino y las claves del "
    "origen (T × S).",
    "Each map has one row per query and one column per key, and there is one per head: (B, H, queries, "
    "keys). In the encoder the source looks at itself (S × S); in the decoder's self-attention the target "
    "looks at itself (T × T); in cross-attention the queries come from the target and the keys from the "
    "source (T × S).",
)
def solution_attention_shapes(B, S, T, n_heads):
    return (B, n_heads, S, S), (B, n_heads, T, T), (B, n_heads, T, S)


@solution(
    "00.mha_parameters",
    "Cuatro `nn.Linear(d_model, d_model)`: cada una tiene d_model² pesos y d_model sesgos. Las cabezas se "
    "reparten las columnas de esas mismas matrices, así que el número no depende de `n_heads`: "
    "4·(d_model² + d_model).",
    "Four `nn.Linear(d_model, d_model)`: each has d_model² weights and d_model biases. The heads share out "
    "the columns of those same matrices, so the count does not depend on `n_heads`: 4·(d_model² + d_model).",
)
def solution_mha_parameters(d_model, n_heads):
    return 4 * (d_model * d_model + d_model)
