"""The two languages of the course: the glossary and the choice of label language.

The glossary is the one place where the course's Spanish and English terms are paired;
notebooks, figures and exercise messages use these terms.
"""

from __future__ import annotations

import re

__all__ = [
    "LANGS",
    "GLOSSARY",
    "check_lang",
    "tr",
    "set_language",
    "language",
    "say",
    "CourseError",
    "error",
    "decimal",
    "decimal_commas",
    "without_negative_zero",
    "integer",
    "yes_no",
]

LANGS = ("es", "en")

# English term -> Spanish term.
GLOSSARY: dict[str, str] = {
    "attention": "atención",
    "self-attention": "autoatención",
    "cross-attention": "atención cruzada",
    "multi-head attention": "atención multicabeza",
    "head": "cabeza",
    "query": "consulta",
    "key": "clave",
    "value": "valor",
    "score": "puntuación",
    "attention weights": "pesos de atención",
    "mask": "máscara",
    "padding": "relleno",
    "padding mask": "máscara de relleno",
    "causal mask": "máscara causal",
    "positional encoding": "codificación posicional",
    "embedding": "embedding (vector de representación)",
    "token": "token",
    "vocabulary": "vocabulario",
    "encoder": "codificador",
    "decoder": "decodificador",
    "layer": "capa",
    "residual connection": "conexión residual",
    "layer normalisation": "normalización de capa",
    "feed-forward network": "red prealimentada (feed-forward)",
    "dropout": "dropout",
    "teacher forcing": "forzado del profesor (teacher forcing)",
    "label smoothing": "suavizado de etiquetas",
    "warm-up": "calentamiento",
    "learning rate": "tasa de aprendizaje",
    "loss": "pérdida",
    "batch": "lote",
    "greedy decoding": "decodificación voraz",
    "beam search": "búsqueda en haz",
    "checkpoint": "punto de control",
    "weight tying": "pesos compartidos",
    "batch normalisation": "normalización por lotes",
    "hidden state": "estado oculto",
    "pretrained model": "modelo preentrenado",
    "tokenizer": "tokenizador",
    "permutation-equivariant": "equivariante por permutaciones",
    "learned positional embedding": "embedding posicional aprendido",
    "interleaved": "intercalado",
    "concatenated": "concatenado",
    "wavelength": "longitud de onda",
    "frequency": "frecuencia",
    "rotation matrix": "matriz de rotación",
    "cosine similarity": "similitud coseno",
    "broadcasting": "difusión (broadcasting)",
    "sequence-to-sequence": "secuencia a secuencia",
    "recurrence": "recurrencia",
    "memory": "memoria",
    "scaled dot-product attention": "atención de producto escalar escalada",
    "saturation": "saturación",
    "overflow": "desbordamiento",
    "split heads": "dividir en cabezas",
    "masked self-attention": "autoatención enmascarada",
    "shifted right": "desplazado a la derecha",
    "output projection": "proyección de salida",
    "forward pass": "pasada hacia delante",
    "sublayer": "subcapa",
    "bias": "sesgo",
    "position-wise": "posición a posición",
    "residual stream": "flujo residual",
    "toy data": "datos de juguete",
    "sanity check": "prueba de cordura",
    "exact match": "acierto exacto",
    "gradient clipping": "recorte del gradiente",
    "error analysis": "análisis de errores",
    "training set": "conjunto de entrenamiento",
    "validation set": "conjunto de validación",
    "test set": "conjunto de prueba",
    "alignment": "alineamiento",
    "coreference": "correferencia",
    "hook": "gancho",
    "head view": "vista de cabezas",
    "model view": "vista del modelo",
    "neuron view": "vista de neuronas",
    "decoder-only": "solo decodificador",
    "sampling": "muestreo",
    "temperature": "temperatura",
    "top-k sampling": "muestreo top-k",
    # «núcleo» is a CPU core and nothing else: a compute kernel stays «kernel» («los kernels»),
    # nucleus sampling is «muestreo top-p»; nothing «se cachea», it «se guarda en caché».
    "top-p sampling": "muestreo top-p",
    "nucleus sampling": "muestreo top-p",
    "CPU core": "núcleo",
    "kernel": "kernel",
    "is cached": "se guarda en caché",
    "key-value cache": "caché de claves y valores (KV cache)",
    # The two phases of generation with a cache (notebook 10).
    "prefill": "llenado (prefill)",
    "decode": "decodificación (decode)",
    "time to first token": "tiempo hasta el primer token (TTFT)",
    "memory traffic": "tráfico de memoria",
    "rotary positional embedding": "codificación posicional rotatoria (RoPE)",
    "grouped-query attention": "atención con consultas agrupadas",
    "ablation": "ablación",
    "online softmax": "softmax en línea",
    "subword": "subpalabra",
    "code point": "punto de código",
    "surrogate": "sustituto",
    "Unicode normalisation": "normalización Unicode",
    "normalisation form": "forma de normalización",
    "byte-pair encoding": "codificación por pares de bytes (BPE)",
    "byte-level": "a nivel de bytes",
    "merge": "fusión",
    "pre-tokenisation": "pretokenización",
    "tie-breaking rule": "regla de desempate",
    "held-out text": "texto reservado",
    "uncased": "sin mayúsculas (uncased)",
}


# The language of the package's own messages (errors, warnings, progress bars): the notebook's,
# once its setup cell has called runtime.setup(lang=LANG); English before that.
_language = "en"


def check_lang(lang: str) -> str:
    """Return ``lang`` if it is ``"es"`` or ``"en"``, else raise ``ValueError``."""
    if lang not in LANGS:
        raise CourseError(f"lang debe ser 'es' o 'en', no {lang!r}", f"lang must be 'es' or 'en', got {lang!r}")
    return lang


def tr(lang: str, es: str, en: str) -> str:
    """Pick the Spanish or the English text."""
    return es if check_lang(lang) == "es" else en


def set_language(lang: str) -> None:
    """Set the language of the package's messages ("es" or "en")."""
    global _language
    _language = check_lang(lang)


def language() -> str:
    """The language of the package's messages (see :func:`set_language`)."""
    return _language


def say(es: str, en: str) -> str:
    """The Spanish or the English text, in the language of the package's messages."""
    return es if _language == "es" else en


class CourseError(ValueError):
    """A ``ValueError`` a student can meet: its message speaks the notebook's language.

    Both texts are kept (``.es``, ``.en``), so tests can check each.
    """

    def __init__(self, es: str, en: str):
        self.es, self.en = es, en
        super().__init__(es if _language == "es" else en)


def error(es: str, en: str) -> CourseError:
    """The error to raise for a bad argument: ``raise error("texto", "text")``."""
    return CourseError(es, en)


def decimal(x: float, digits: int = 2, lang: str | None = None) -> str:
    """``x`` with ``digits`` decimals: a decimal comma in Spanish (0,65), a point in English (0.65).

    ``lang`` defaults to the language of the package's messages (the notebook's).
    """
    return decimal_commas(without_negative_zero(f"{float(x):.{digits}f}"), lang)


def without_negative_zero(text: str) -> str:
    """A formatted number that rounded to zero without its sign: "-0.00" -> "0.00", "-0%" -> "0%"."""
    return text[1:] if text.startswith("-") and not text.strip("-0.%") else text


_DECIMAL_POINT = re.compile(r"(\d)\.(\d)")


def decimal_commas(text: str, lang: str | None = None, comma: str = ",") -> str:
    """``text`` with the decimal point of every number as a comma in Spanish ("τ = 0.5" ->
    "τ = 0,5"); unchanged in English. ``lang`` defaults to the package's messages' language;
    ``comma`` is what replaces the point (matplotlib's mathtext wants ``"{,}"``)."""
    return _DECIMAL_POINT.sub(rf"\1{comma}\2", text) if (lang or _language) == "es" else text


def integer(n: int) -> str:
    """An integer with the course's one thousands separator, a space: 1 503, 37 000, 250 666 in
    both languages (as the SI writes them: a comma or a point would read as a decimal sign in the
    other language)."""
    return f"{int(n):,}".replace(",", " ")


def yes_no(value: bool, lang: str | None = None) -> str:
    """A yes/no answer in the reader's language: «sí»/«no» in Spanish, "yes"/"no" in English
    (a printed ``True``/``False`` would be English in a Spanish notebook). ``lang`` defaults to
    the language of the package's messages."""
    return ("sí" if value else "no") if (lang or _language) == "es" else ("yes" if value else "no")
