"""bertviz's views of our models' attention, and the JavaScript they need, offline.

bertviz (head view, model view) draws attention in the browser with three JavaScript libraries
that it loads from a CDN; :func:`offline_scripts` gives the page those libraries from packages
installed with the course, so the views also draw offline (``tools/slides.py`` puts the same
files in the slide decks). The maps always come from the model's own forward pass
(``Transformer.forward(..., return_attention=True)``, ``Encoder.forward``,
:func:`~minitransformer.viz.heads.translator_attention`): nothing here recomputes attention.
(The same heads in static matplotlib figures: :mod:`~minitransformer.viz.heads`.)

Letters: B batch, H heads, T query (target) length, S key (source) length.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..i18n import error, say
from ..model import AttentionMaps

__all__ = [
    "bertviz_arguments",
    "head_view",
    "model_view",
    "SCRIPTS",
    "script_files",
    "offline_scripts",
    "write_offline_page",
]


def _one_example(w: Tensor, index: int, rows: int, cols: int, decimals: int | None, what: str) -> Tensor:
    """(B, H, ·, ·) or (H, ·, ·) -> (1, H, rows, cols), float64 on the CPU, rounded."""
    if w.dim() == 3:
        w = w[None]  # (1, H, ·, ·)
    if w.dim() != 4:
        raise error(
            f"{what}: se esperaban mapas de forma (B, H, ·, ·) o (H, ·, ·), no {tuple(w.shape)}",
            f"{what}: expected maps of shape (B, H, ·, ·) or (H, ·, ·), got {tuple(w.shape)}",
        )
    if not -w.size(0) <= index < w.size(0):
        raise error(
            f"{what}: el índice {index} está fuera del lote de {w.size(0)}",
            f"{what}: index {index} is outside the batch of {w.size(0)}",
        )
    if w.size(2) < rows or w.size(3) < cols:
        raise error(
            f"{what}: los mapas de forma {tuple(w.shape[2:])} son más pequeños que los tokens dados "
            f"({rows} tokens de consulta, {cols} tokens de clave)",
            f"{what}: maps of shape {tuple(w.shape[2:])} are smaller than the tokens given "
            f"({rows} query tokens, {cols} key tokens)",
        )
    w = w[index : index + 1, :, :rows, :cols].detach().to("cpu", torch.float64)  # (1, H, rows, cols)
    return w.round(decimals=decimals) if decimals is not None else w


def bertviz_arguments(
    maps: AttentionMaps | Sequence[Tensor],
    tokens: Sequence[str] | None = None,
    *,
    src_tokens: Sequence[str] | None = None,
    tgt_tokens: Sequence[str] | None = None,
    index: int = 0,
    decimals: int | None = 3,
) -> dict[str, Any]:
    """The keyword arguments of bertviz's ``head_view`` and ``model_view`` for our maps.

    Args:
        maps: an :class:`AttentionMaps` (encoder-decoder: give ``src_tokens`` and
            ``tgt_tokens``) or one self-attention map per layer, e.g. the ``maps`` of
            ``Encoder.forward`` (give ``tokens``).
        tokens, src_tokens, tgt_tokens: the words. The maps are cut to their lengths, so
            padding at the end of a batch is left out.
        index: which example of the batch.
        decimals: attention is rounded to this many decimals before bertviz embeds it in
            the page (small, stable outputs); ``None`` keeps every digit.

    Shapes: each map (B, H, T, S) or (H, T, S) -> (1, H, T', S') in float64.
    """
    if isinstance(maps, AttentionMaps):
        if tokens is not None:
            raise error(
                "para los AttentionMaps de un codificador-decodificador da src_tokens y tgt_tokens, no tokens",
                "for an encoder-decoder's AttentionMaps give src_tokens and tgt_tokens, not tokens",
            )
        if src_tokens is None or tgt_tokens is None:
            raise error(
                "los AttentionMaps de un codificador-decodificador necesitan src_tokens y tgt_tokens",
                "an encoder-decoder's AttentionMaps needs src_tokens and tgt_tokens",
            )
        S, T = len(src_tokens), len(tgt_tokens)
        kwargs: dict[str, Any] = {"encoder_tokens": list(src_tokens), "decoder_tokens": list(tgt_tokens)}
        parts = [
            ("encoder_attention", maps.encoder, S, S, "encoder"),
            ("decoder_attention", maps.decoder_self, T, T, "decoder_self"),
            ("cross_attention", maps.cross, T, S, "cross"),
        ]
        for key, layers, rows, cols, what in parts:
            if layers:
                kwargs[key] = [_one_example(w, index, rows, cols, decimals, what) for w in layers]
        if len(kwargs) == 2:
            raise error("los AttentionMaps no tienen ningún mapa", "the AttentionMaps hold no maps")
        return kwargs
    if src_tokens is not None or tgt_tokens is not None:
        raise error(
            "los mapas de autoatención llevan tokens=..., no src_tokens/tgt_tokens",
            "self-attention maps take tokens=..., not src_tokens/tgt_tokens",
        )
    if tokens is None:
        raise error("da los tokens de la frase", "give the tokens of the sentence")
    layers = list(maps)
    if not layers:
        raise error("no se ha dado ningún mapa de atención", "no attention maps given")
    n = len(tokens)
    return {
        "attention": [_one_example(w, index, n, n, decimals, "attention") for w in layers],
        "tokens": list(tokens),
    }


# The keyword-only arguments of bertviz_arguments, which head_view and model_view take as well.
_ARGUMENTS = [p.name for p in inspect.signature(bertviz_arguments).parameters.values() if p.kind is p.KEYWORD_ONLY]


def _view(show, maps: AttentionMaps | Sequence[Tensor], tokens: Sequence[str] | None, options: dict[str, Any]):
    """Call bertviz's ``show`` with our maps: the keywords of :func:`bertviz_arguments` go there,
    every other keyword goes to ``show``."""
    ours = {name: options.pop(name) for name in _ARGUMENTS if name in options}
    return show(**bertviz_arguments(maps, tokens, **ours), **options)


def head_view(maps: AttentionMaps | Sequence[Tensor], tokens: Sequence[str] | None = None, **options: Any):
    """bertviz's head view of our maps.

    ``maps``, ``tokens`` and the keywords ``src_tokens``, ``tgt_tokens``, ``index`` and
    ``decimals`` are those of :func:`bertviz_arguments`; every other keyword goes to
    ``bertviz.head_view`` (``layer``, ``heads``, ``include_layers``, ``html_action="return"``
    for the HTML instead of displaying it...).
    """
    from bertviz import head_view as bertviz_head_view

    return _view(bertviz_head_view, maps, tokens, options)


def model_view(
    maps: AttentionMaps | Sequence[Tensor],
    tokens: Sequence[str] | None = None,
    *,
    display_mode: str = "light",
    **options: Any,
):
    """bertviz's model view (every layer × every head) of our maps.

    Arguments as :func:`head_view`; the other keywords go to ``bertviz.model_view``
    (``include_layers``, ``include_heads``, ``html_action``...).
    """
    from bertviz import model_view as bertviz_model_view

    return _view(bertviz_model_view, maps, tokens, {"display_mode": display_mode, **options})


# --------------------------------------------------------------------------- offline views

# bertviz's views ask require.js for the modules "d3" (version 4 or later) and "jquery", and
# load require.js itself from a CDN. These packages, installed with the course's `lab` extra,
# ship the three files: name -> (package, file inside the package).
SCRIPTS = {
    "d3": ("mpld3", "js/d3.v5.min.js"),
    "jquery": ("nbclassic", "static/components/jquery/jquery.min.js"),
    "requirejs": ("nbclassic", "static/components/requirejs/require.js"),
}


def script_files() -> dict[str, Path] | None:
    """Where the installed packages keep d3, jQuery and require.js; ``None`` if one is missing."""
    found = {}
    for name, (package, inner) in SCRIPTS.items():
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(next(iter(spec.submodule_search_locations))) / inner
        if not path.is_file():
            return None
        found[name] = path
    return found


def _inline(code: str) -> str:
    """JavaScript made safe inside a <script> element."""
    return code.replace("</script", "<\\/script").replace("<!--", "<\\!--")


def offline_scripts():
    """bertviz's three libraries, from installed packages, as one script to display once.

    Display it in a notebook before bertviz's views (or put it in a page before them): it defines
    the require.js modules ``"d3"`` and ``"jquery"`` that the views ask for, so they draw with no
    network and bertviz's CDN addresses are never used. d3 and jQuery run with the AMD loader
    hidden (they become the globals ``d3`` and ``jQuery``); require.js becomes the page's loader
    unless the page already has one (a slide deck does). Displaying it twice is harmless.

    It is a JavaScript output (as bertviz's own views are), so JupyterLab runs it in order with
    them, also when it shows the stored outputs of a trusted notebook. Without the packages (in
    Colab, which is online) it is a one-line note and bertviz loads its libraries from the internet.
    """
    from IPython.display import HTML, Javascript

    files = script_files()
    if files is None:
        return HTML(
            "<p>"
            + say(
                "bertviz cargará sus bibliotecas de JavaScript de internet (instala el extra «lab» del curso "
                "para usarlas sin conexión).",
                "bertviz will load its JavaScript libraries from the internet (install the course's 'lab' "
                "extra to use them offline).",
            )
            + "</p>"
        )
    code = {name: _inline(path.read_text(encoding="utf-8")) for name, path in files.items()}
    return Javascript(
        "// bertviz's libraries: d3, jQuery and require.js from installed packages\n"
        "(function (define, module, exports) {\n"
        f"{code['d3']}\n;\n{code['jquery']}\n;\n}}).call(window);\n"
        f"{code['requirejs']}\n;\n"
        "// run inside a function (as JupyterLab does), require.js is not yet the page's loader\n"
        'if (typeof window.define === "undefined") {\n'
        "  window.requirejs = requirejs; window.require = require; window.define = define;\n"
        "}\n"
        'window.define("d3", [], function () { return window.d3; });\n'
        'window.define("jquery", [], function () { return window.jQuery; });\n'
    )


def write_offline_page(view: Any, path: str | os.PathLike, title: str = "bertviz") -> Path:
    """Save a bertviz view (``html_action="return"``) as one page that draws offline.

    The page holds :func:`offline_scripts` and then the view, unchanged: it can be copied to any
    computer and opened with a browser.
    """
    html = getattr(view, "data", view)
    if not isinstance(html, str):
        raise error(
            "view debe ser el objeto HTML de bertviz (html_action='return') o su texto",
            "view must be bertviz's HTML object (html_action='return') or its text",
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    from IPython.display import Javascript

    scripts = offline_scripts()  # JavaScript, or without the packages a note in HTML
    head = f"<script>\n{scripts.data}\n</script>" if isinstance(scripts, Javascript) else scripts.data
    path.write_text(
        f'<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n</head>\n<body>\n'
        f"{head}\n{html}\n</body>\n</html>\n",
        encoding="utf-8",
    )
    return path
