"""What every checker shares: the feedback, the hints, safe calls to the student's code,
the one closeness check, the one "not a tensor" reply, and the tools a statement forbids.

A checker is a function decorated with :func:`checker`; inside it, :func:`attempt` runs the
student's function and anything that stops the check early (the function is not written,
raised, returned ``None``, returned something that is not a tensor, ...) is raised as
:class:`Unfinished` and becomes the checker's answer. Whatever happens, a checker returns a
:class:`Feedback` in the notebook's language; it never raises.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import functools
import inspect
import os
import pkgutil
import re
import sysconfig
import textwrap
import traceback
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

from ..i18n import check_lang, decimal_commas, language, tr

__all__ = [
    "COMMON_HINTS",
    "Feedback",
    "ForbiddenTool",
    "Hints",
    "Unfinished",
    "attempt",
    "checker",
    "close",
    "correct",
    "dtype_name",
    "STATE_HINTS",
    "watch",
    "by_key",
    "diagnose",
    "forbid",
    "loops_in",
    "not_a_tensor",
    "not_yet",
    "num",
    "python_error",
    "randn",
    "sentence",
    "stop",
    "tensor",
    "type_name",
    "wrong_shape",
]


# --------------------------------------------------------------------------- feedback


@dataclass(frozen=True)
class Feedback:
    """The answer of a checker. True when the exercise is solved; prints as its message."""

    ok: bool
    message: str
    hint: str | None = None  # the key of the hint it gives (tests name it, not the wording)

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return self.message

    __str__ = __repr__


def correct(lang: str, es: str = "", en: str = "") -> Feedback:
    """A success, with an optional extra sentence."""
    extra = tr(lang, es, en)
    head = tr(lang, "✅ ¡Correcto!", "✅ Correct!")
    return Feedback(True, f"{head} {extra}".strip())


def not_yet(lang: str, es: str, en: str, hint: str | None = None) -> Feedback:
    """A "not yet" with a hint: the one format of every hint (``hint``: its key)."""
    head = tr(lang, "❌ Todavía no:", "❌ Not yet:")
    return Feedback(False, f"{head} {tr(lang, es, en)}", hint)


class Hints(dict):
    """A module's hints, ``key -> (Spanish, English)``, with ``{fields}`` filled on use.

    ``HINTS(lang, "key", got=...)`` is the "not yet" feedback for that hint; tests name the
    hints by key. A float field gets the language's decimal sign; an exception field (the exception itself, or
    its text as Python writes it, ``"TypeError: can't concat str to bytes"``) is named by its type with Python's
    own words quoted as Python's (:func:`python_error`), so that English from Python never reads as part of a
    Spanish sentence.
    """

    def __call__(self, lang: str, key: str, /, **fields: Any) -> Feedback:
        es, en = self[key]
        fields = {k: _field(lang, v) for k, v in fields.items()}
        return not_yet(lang, es.format(**fields), en.format(**fields), key)


def _python_says(lang: str, text: str) -> str:
    """Python's words, quoted as Python's: «Python dice: “…”» in either language's own marks."""
    return tr(lang, f"Python dice: «{text}»", f'Python says: "{text}"')


def python_error(lang: str, exc: BaseException | str) -> str:
    """An exception as a hint names it: its type, then Python's own words (English in either language) quoted
    as Python's, ``TypeError; Python dice: «can't concat str to bytes»``; only the type when it says nothing.
    ``exc`` is the exception, or its text as Python writes it (``"TypeError: can't concat str to bytes"``)."""
    if isinstance(exc, BaseException):
        name, text = type(exc).__name__, str(exc)
    else:
        name, _, text = exc.partition(": ")
    lines = text.strip().splitlines()
    return f"{name}; {_python_says(lang, lines[0].strip())}" if lines else name


# "TypeError: can't concat str to bytes": an exception's text as Python writes it (one of Python's own exceptions)
_PYTHON_ERROR = re.compile(r"([A-Z][A-Za-z]*(?:Error|Exception|Warning)): .+", re.S)


def _is_python_error(text: str) -> bool:
    found = _PYTHON_ERROR.fullmatch(text)
    kind = getattr(builtins, found.group(1), None) if found else None
    return isinstance(kind, type) and issubclass(kind, BaseException)


def _field(lang: str, value: Any) -> Any:
    """A hint's field as the hint shows it in ``lang``."""
    if isinstance(value, float):
        return num(lang, value)
    if isinstance(value, BaseException) or (isinstance(value, str) and _is_python_error(value)):
        return python_error(lang, value)
    return value


# Hints that several modules share, (Spanish, English); a module's HINTS merge them.
COMMON_HINTS: dict[str, tuple[str, str]] = {
    "nan": ("el resultado contiene NaN o infinitos.", "the result contains NaN or infinite values."),
    "shape": (
        "la salida tiene forma {got} y debería tener {expected}",
        "the output has shape {got} and should have {expected}",
    ),
}


# What a student's function may leave behind, (Spanish, English): a module that hands the student a model or tensors
# merges them into its HINTS (``**STATE_HINTS``); :func:`watch` names them.
STATE_HINTS: dict[str, tuple[str, str]] = {
    "grad_mode_left": (
        "el resultado es el correcto, pero dejas los gradientes {after} (estaban {before}): "
        "`torch.set_grad_enabled(...)` o `torch.no_grad().__enter__()` los cambian para todo el cuaderno. Usa "
        "`with torch.no_grad():`, que los deja como estaban al salir.",
        "the result is right, but you leave gradients {after} (they were {before}): `torch.set_grad_enabled(...)` "
        "or `torch.no_grad().__enter__()` change them for the whole notebook. Use `with torch.no_grad():`, which "
        "puts them back as they were on the way out.",
    ),
    "inference_mode_left": (
        "el resultado es el correcto, pero dejas activado el modo de inferencia (`torch.inference_mode()` sin "
        "`with`): cambia todo el cuaderno. Úsalo como `with torch.inference_mode():`.",
        "the result is right, but you leave inference mode on (`torch.inference_mode()` without `with`): it changes "
        "the whole notebook. Use it as `with torch.inference_mode():`.",
    ),
    "default_dtype_left": (
        "el resultado es el correcto, pero dejas el tipo por defecto de PyTorch en {got} (era {want}): "
        "`torch.set_default_dtype` lo cambia para todo el cuaderno. Da el tipo a tus tensores (`.double()`, "
        "`dtype=torch.float64`) o vuelve a poner el de antes al final.",
        "the result is right, but you leave PyTorch's default dtype as {got} (it was {want}): "
        "`torch.set_default_dtype` changes it for the whole notebook. Give your tensors their dtype (`.double()`, "
        "`dtype=torch.float64`) or put the old one back at the end.",
    ),
    "default_device_left": (
        "el resultado es el correcto, pero dejas el dispositivo por defecto de PyTorch en {got} (era {want}): "
        "`torch.set_default_device` lo cambia para todo el cuaderno. Pon el dispositivo a tus tensores "
        "(`device=...`) o vuelve a poner el de antes al final.",
        "the result is right, but you leave PyTorch's default device as {got} (it was {want}): "
        "`torch.set_default_device` changes it for the whole notebook. Give your tensors their device "
        "(`device=...`) or put the old one back at the end.",
    ),
    "input_changed": (
        "tu función cambia el tensor `{name}` que recibe (en su sitio: `masked_fill_`, `mul_`, `+=`, `t[...] = 0`): "
        "quien la llama lo sigue necesitando tal cual. Trabaja con una copia (`.clone()`) o con operaciones que "
        "devuelven un tensor nuevo (`masked_fill`, `*`).",
        "your function changes the tensor `{name}` it is given (in place: `masked_fill_`, `mul_`, `+=`, "
        "`t[...] = 0`): the caller still needs it as it was. Work on a copy (`.clone()`) or with operations that "
        "return a new tensor (`masked_fill`, `*`).",
    ),
    "model_changed": (
        "el resultado es el correcto, pero el modelo se queda cambiado: `{name}` no vuelve a ser el que era. "
        "Calcula con copias (`.clone()`, o sin operaciones «in place» como `mul_`) y no toques los pesos.",
        "the result is right, but the model stays changed: `{name}` is not what it was. Compute with copies "
        "(`.clone()`, or without in-place operations such as `mul_`) and leave the weights alone.",
    ),
    "model_dtype": (
        "el resultado es el correcto, pero dejas `{name}` como {got} y era {want}: ¿llamas a `.double()`, "
        "`.to(...)` o `.half()` sobre el modelo? Trabaja con copias, o devuélvelo al tipo y al dispositivo "
        "que tenía.",
        "the result is right, but you leave `{name}` as {got} and it was {want}: do you call `.double()`, "
        "`.to(...)` or `.half()` on the model? Work on copies, or put it back to the dtype and device it had.",
    ),
    "model_frozen": (
        "el resultado es el correcto, pero `{name}` tenía `requires_grad={want}` y lo dejas en {got}: el modelo "
        "ya no aprendería igual. Si lo cambias (`requires_grad_`), restáuralo al final; para no calcular "
        "gradientes basta `with torch.no_grad():`.",
        "the result is right, but `{name}` had `requires_grad={want}` and you leave it {got}: the model would "
        "no longer learn the same. If you change it (`requires_grad_`), restore it at the end; to compute no "
        "gradients `with torch.no_grad():` is enough.",
    ),
    "model_mode": (
        "el modelo estaba en modo {before} y lo dejas en modo {after}: `model.eval()` y `model.train()` lo cambian "
        "para quien lo use después. Déjalo como estaba (`model.train(was_training)` con "
        "`was_training = model.training`, guardado al principio).",
        "the model was in {before} mode and you leave it in {after} mode: `model.eval()` and `model.train()` change "
        "it for whoever uses it next. Leave it as it was (`model.train(was_training)` with "
        "`was_training = model.training`, kept at the start).",
    ),
    "model_patched": (
        "el resultado es el correcto, pero dejas cambiado un método del modelo: `{name}`. Cada llamada "
        "posterior seguiría pasando por tu versión: guarda el original y vuelve a ponerlo al final (mejor "
        "en un `finally`), o usa un gancho y quítalo.",
        "the result is right, but you leave a method of the model changed: `{name}`. Every later call would "
        "still go through your version: keep the original and put it back at the end (best in a `finally`), "
        "or use a hook and remove it.",
    ),
    "hook_left": (
        "dejas un gancho registrado en el modelo ({where}): cada llamada posterior seguiría pasando por él. "
        "Guarda lo que devuelve `register_forward_pre_hook` (o `register_forward_hook`) y llama a su `.remove()` "
        "al final (mejor en un `finally`).",
        "you leave a hook registered on the model ({where}): every later call would still go through it. Keep "
        "what `register_forward_pre_hook` (or `register_forward_hook`) returns and call its `.remove()` at the end "
        "(best in a `finally`).",
    ),
}


# The core's own replies: to an answer that is not written, crashed, returned None or is not a tensor.
CORE_HINTS = Hints(
    {
        "not_callable": (
            "pasa al comprobador tu función (su nombre, sin paréntesis), no {got}.",
            "pass your function to the checker (its name, without brackets), not {got}.",
        ),
        "not_written": (
            "falta escribir la función: sustituye `raise NotImplementedError` por tu código.",
            "the function is not written yet: replace `raise NotImplementedError` with your code.",
        ),
        "forbidden": ("el enunciado pide no usar `{tool}`: {why}", "the statement asks you not to use `{tool}`: {why}"),
        "recursion": (
            "tu función se llama a sí misma sin fin (RecursionError): ¿usas su propio nombre dentro?",
            "your function calls itself without end (RecursionError): do you use its own name inside it?",
        ),
        "crashed": ("tu función lanzó {error}{said}", "your function raised {error}{said}"),
        "returns_none": (
            "tu función devuelve `None`: ¿te falta un `return`? (Ojo: `list.append`, `list.insert` o "
            "`list.sort` modifican la lista y devuelven `None`.)",
            "your function returns `None`: are you missing a `return`? (Careful: `list.append`, `list.insert` "
            "and `list.sort` change the list in place and return `None`.)",
        ),
        "not_a_tensor": (
            "tu función debe devolver un tensor de PyTorch, no {got}.",
            "your function must return a PyTorch tensor, not {got}.",
        ),
        "checker_confused": (
            "el comprobador no pudo interpretar tu respuesta ({error}). Revisa que devuelves lo que pide el "
            "enunciado (tipo y forma).",
            "the checker could not make sense of your answer ({error}). Check that you return what the statement "
            "asks for (type and shape).",
        ),
    }
)


def num(lang: str, x: float, digits: int = 4) -> str:
    """``x`` rounded to ``digits`` significant figures, with a decimal comma in Spanish."""
    return decimal_commas(f"{float(x):.{digits}g}", lang)


class Unfinished(Exception):
    """Carries the feedback of a check that stopped early; :func:`checker` returns it."""

    def __init__(self, feedback: Feedback):
        super().__init__(feedback.message)
        self.feedback = feedback


def stop(feedback: Feedback) -> Unfinished:
    """``raise stop(HINTS(lang, "key"))``: end the check here with this feedback."""
    return Unfinished(feedback)


# --------------------------------------------------------------------------- comparing answers

K = TypeVar("K")


def type_name(x: Any) -> str:
    return "None" if x is None else type(x).__name__


def dtype_name(x: Tensor) -> str:
    """``"int64"`` for a tensor of ``torch.int64``."""
    return str(x.dtype).removeprefix("torch.")


def randn(*shape: int, seed: int) -> Tensor:
    """A case of normal numbers from its own seed (the notebook's random state is left alone)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def not_a_tensor(lang: str, got: Any) -> Feedback:
    """The one "not a tensor" reply, naming what the answer is instead."""
    return CORE_HINTS(lang, "not_a_tensor", got=type_name(got))


def tensor(lang: str, x: Any, shape: tuple[int, ...] | None = None, es: str = "", en: str = "") -> Tensor:
    """The student's answer as a detached CPU tensor; anything else stops the check, and so does
    a tensor of another ``shape`` when one is given (``es``/``en``: an optional reason, as in
    :func:`wrong_shape`)."""
    if not isinstance(x, Tensor):
        raise stop(not_a_tensor(lang, x))
    if shape is not None and tuple(x.shape) != tuple(shape):
        raise stop(wrong_shape(lang, x, shape, es, en))
    return x.detach().cpu()


def close(a: Any, b: Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """The one closeness check: ``a`` is a tensor of ``b``'s shape, finite where ``b`` is, and close.

    Compared in double precision whatever the dtypes (an integer or boolean answer is compared
    by value, never an error).
    """
    if not isinstance(a, Tensor) or a.shape != b.shape or a.is_complex():
        return False
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    return bool(torch.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True))


def diagnose(
    answers: Sequence[Any],
    mistakes: Mapping[K, Sequence[Any]] | Iterable[tuple[K, Sequence[Any]]],
    /,
    *,
    same: Callable[[Any, Any], bool] | None = None,
    **tol: float,
) -> K | None:
    """Which mistake the student's ``answers`` (one per case) are: the first key of the bank ``mistakes``
    (key -> what that mistake gives, one per case; or pairs ``(key, gives)``, where two ways to make one
    mistake share a key) whose mistake gives the answer in every case, or ``None``. A checker that stops at
    the first case the answer gets wrong passes that case alone; one that runs every case passes them all, so
    that a mistake is named only when it explains every answer. ``same(answer, what_the_mistake_gives)``
    compares; by default :func:`close` with ``tol``. Where a mistake does not apply to a case it gives ``None``.
    """
    same = same or functools.partial(close, **tol)
    for key, gives in mistakes.items() if isinstance(mistakes, Mapping) else mistakes:
        if answers and all(gives[i] is not None and same(answers[i], gives[i]) for i in range(len(answers))):
            return key
    return None


def by_key(banks: Sequence[Mapping[K, Any] | Iterable[tuple[K, Any]]]) -> list[tuple[K, list[Any]]]:
    """Banks of mistakes written case by case (one bank per case: key -> what that mistake gives there, or
    pairs ``(key, gives)``) as :func:`diagnose` takes them, ``(key, [what it gives in each case])``, in the
    first case's order. The n-th mistake of a key in one case goes with the n-th of that key in the others;
    where a case has no such mistake, it gives ``None`` there."""
    cases = []
    for bank in banks:
        seen: dict[Any, int] = {}
        case = {}
        for key, gives in bank.items() if isinstance(bank, Mapping) else bank:
            seen[key] = seen.get(key, -1) + 1
            case[key, seen[key]] = gives
        cases.append(case)
    return [(key, [case.get((key, n)) for case in cases]) for key, n in (cases[0] if cases else {})]


def wrong_shape(lang: str, got: Tensor, want: tuple[int, ...], es: str = "", en: str = "") -> Feedback:
    """The one "wrong shape" reply, with an optional reason."""
    end = "" if es.endswith("?") else "."
    shapes = {"got": tuple(got.shape), "expected": tuple(want)}
    said_es, said_en = COMMON_HINTS["shape"]
    return not_yet(lang, said_es.format(**shapes) + es + end, said_en.format(**shapes) + en + end, "shape")


# --------------------------------------------------------------------------- running the student's code

_TORCH_DIR = os.path.dirname(torch.__file__)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_STDLIB_DIRS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")})


def _student_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The last frame of the traceback that is the student's code (not PyTorch, the package or Python's)."""
    frames = traceback.extract_tb(exc.__traceback__)[1:]  # [0] is attempt() itself
    for frame in reversed(frames):
        path = os.path.abspath(frame.filename)
        if path.startswith((_TORCH_DIR, _PACKAGE_DIR, *_STDLIB_DIRS)):
            continue
        return frame
    return None


def _where(lang: str, frame: traceback.FrameSummary | None) -> str:
    """ " at line 4 of your cell:\n    <the line>" (or less, where less is known)."""
    if frame is None:
        return ""
    name = os.path.basename(frame.filename)
    in_cell = "ipykernel" in frame.filename or name.startswith("<")
    place = (
        tr(lang, f"en la línea {frame.lineno} de tu celda", f"at line {frame.lineno} of your cell")
        if in_cell
        else tr(lang, f"en la línea {frame.lineno} de {name}", f"at line {frame.lineno} of {name}")
    )
    code = (frame.line or "").strip()
    return f" {place}:\n    {code}\n" if code else f" {place}.\n"


def sentence(text: str) -> str:
    """``text`` with a capital first letter (the rest untouched)."""
    return text[:1].upper() + text[1:]


# What an error means, in words a student can act on: (type, pattern in its message, Spanish, English).
_ERRORS: list[tuple[type, str, str, str]] = [
    (
        RuntimeError,
        r"shapes cannot be multiplied|must match the size|size mismatch|mismatch in shape|"
        r"not broadcastable|expanded size|invalid for input of size|Expected size",
        "las formas de los tensores no encajan en esa operación: imprime `.shape` de cada uno y comprueba "
        "qué ejes se multiplican o se suman.",
        "the shapes of the tensors do not fit that operation: print each one's `.shape` and check which axes "
        "are multiplied or added.",
    ),
    (
        RuntimeError,
        r"Boolean value of Tensor .* is ambiguous",
        "usas un tensor de varios elementos como verdadero o falso (`if t:`, `and`, `or`, `not t`): compara de forma "
        "explícita, por ejemplo `t.numel() > 0`, `len(cache) > 0` o `(t > 0).all()`.",
        "you use a tensor of several elements as true or false (`if t:`, `and`, `or`, `not t`): compare explicitly, "
        "for example `t.numel() > 0`, `len(cache) > 0` or `(t > 0).all()`.",
    ),
    (
        RuntimeError,
        r"expected scalar type|dtype|\bLong\b|\bFloat\b|\bBool\b",
        "mezclas tipos de datos (dtype) que esa operación no acepta juntos, por ejemplo enteros y decimales.",
        "you mix data types (dtypes) that the operation does not take together, for example integers and floats.",
    ),
    (
        IndexError,
        r"tensors used as indices|must be long",
        "solo se puede indexar con enteros (`torch.long`) o booleanos, no con decimales.",
        "you can only index with integers (`torch.long`) or booleans, not with floats.",
    ),
    (
        RuntimeError,
        r"num_classes|out of bounds|out of range",
        "un índice se sale del rango: algún id es mayor o igual que el tamaño que le das.",
        "an index is out of range: some id is greater than or equal to the size you give.",
    ),
    (
        IndexError,
        r"",
        "un índice se sale del tamaño del eje (o el tensor tiene menos ejes de los que crees).",
        "an index is out of the axis' range (or the tensor has fewer axes than you think).",
    ),
    (
        NameError,
        r"",
        "usas un nombre que no está definido: ¿una errata, o falta ejecutar la celda que lo define?",
        "you use a name that is not defined: a typo, or the cell that defines it has not run?",
    ),
    (
        AttributeError,
        r"NoneType",
        "un valor es `None`: alguna operación que usas no devuelve nada (p. ej. `list.append` o `.insert` "
        "modifican la lista y devuelven `None`).",
        "a value is `None`: an operation you use returns nothing (e.g. `list.append` or `.insert` change the "
        "list in place and return `None`).",
    ),
    (
        AttributeError,
        r"",
        "ese objeto no tiene el atributo o método que usas: comprueba su tipo.",
        "that object has no such attribute or method: check its type.",
    ),
    (
        TypeError,
        r"NoneType",
        "un valor es `None`: alguna operación que usas no devuelve nada (p. ej. `list.append` o `.insert` "
        "modifican la lista y devuelven `None`).",
        "a value is `None`: an operation you use returns nothing (e.g. `list.append` or `.insert` change the "
        "list in place and return `None`).",
    ),
    (
        TypeError,
        r"",
        "una función recibió un argumento de un tipo que no espera (o un número de argumentos distinto).",
        "a function got an argument of a type it does not expect (or a different number of arguments).",
    ),
    (ZeroDivisionError, r"", "divides entre cero.", "you divide by zero."),
    (ValueError, r"", "una función recibió un valor que no acepta.", "a function got a value it does not accept."),
]


def _explain(lang: str, exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    meaning = ""
    for kind, pattern, es, en in _ERRORS:
        if isinstance(exc, kind) and re.search(pattern, text):
            meaning = sentence(tr(lang, es, en))
            break
    said = f"({_python_says(lang, text)})" if text else ""
    return " ".join(part for part in (meaning, said) if part)


class ForbiddenTool(BaseException):
    """Raised by a tool that :func:`forbid` switched off while the student's code runs.

    A ``BaseException``, like ``KeyboardInterrupt``: a student's ``except Exception`` around the
    call does not hide it; :func:`attempt` turns it into a "not yet"."""

    def __init__(self, name: str, es: str, en: str):
        super().__init__(name)
        self.name, self.es, self.en = name, es, en


def attempt(lang: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the student's ``fn``; turn "not written yet", ``None`` and crashes into feedback.

    Raises :class:`Unfinished` (returned by :func:`checker`) when ``fn`` raises
    ``NotImplementedError``, uses a forbidden tool, raises another exception (the message
    shows the student's failing line and says what the error means) or returns ``None``.
    """
    if not callable(fn):
        raise stop(CORE_HINTS(lang, "not_callable", got=type_name(fn)))
    try:
        result = fn(*args, **kwargs)
    except NotImplementedError:
        raise stop(CORE_HINTS(lang, "not_written")) from None
    except ForbiddenTool as no:
        raise stop(CORE_HINTS(lang, "forbidden", tool=no.name, why=tr(lang, no.es, no.en))) from None
    except RecursionError:
        raise stop(CORE_HINTS(lang, "recursion")) from None
    except Exception as exc:  # the student's code crashed: where, and what it means
        where = _where(lang, _student_frame(exc)) or ". "
        said = f"{where}{_explain(lang, exc)}".rstrip()
        raise stop(CORE_HINTS(lang, "crashed", error=type(exc).__name__, said=said)) from None
    if result is None:
        raise stop(CORE_HINTS(lang, "returns_none"))
    return result


# --------------------------------------------------------------------------- what the student's code leaves behind

# Inference-mode guards that undid a student's, kept alive: dropping one would switch the student's mode back on.
_KEPT_GUARDS: list[Any] = []


def _global_state() -> dict[str, Any]:
    """PyTorch's global switches a student's function may leave changed for the whole notebook."""
    return {
        "grad": torch.is_grad_enabled(),
        "inference": torch.is_inference_mode_enabled(),
        "dtype": torch.get_default_dtype(),
        "device": torch.get_default_device(),
    }


def _set_global_state(state: dict[str, Any]) -> None:
    if torch.is_inference_mode_enabled() != state["inference"]:
        guard = torch._C._InferenceMode(state["inference"])
        guard.__enter__()
        _KEPT_GUARDS.append(guard)
    if torch.get_default_device() != state["device"]:
        torch.set_default_device(None if state["device"] == torch.device("cpu") else state["device"])
    if torch.get_default_dtype() != state["dtype"]:
        torch.set_default_dtype(state["dtype"])
    torch.set_grad_enabled(state["grad"])


def _callables(module: torch.nn.Module) -> set[str]:
    """The callables set on a module itself (``module.forward = ...``), not its submodules."""
    return {k for k, v in vars(module).items() if callable(v) and not isinstance(v, torch.nn.Module)}


def _model_state(model: torch.nn.Module) -> dict[str, Any]:
    """Everything of ``model`` a student's function could leave changed: every parameter's and buffer's value,
    dtype, device and ``requires_grad``, every module's mode and hooks, the methods set on a module itself
    (``module.forward = ...``) and the methods of the modules' classes."""
    tensors = dict(model.named_parameters()) | dict(model.named_buffers())
    return {
        "tensors": {name: (t.detach().clone(), t.dtype, t.device, t.requires_grad) for name, t in tensors.items()},
        "training": {name: m.training for name, m in model.named_modules()},
        "own": {name: _callables(m) for name, m in model.named_modules()},
        "hooks": {
            name: (set(m._forward_pre_hooks), set(m._forward_hooks), set(m._backward_hooks))
            for name, m in model.named_modules()
        },
        "classes": {type(m): dict(vars(type(m))) for m in model.modules()},
    }


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _mode_words(lang: str, training: bool) -> str:
    return tr(lang, "entrenamiento", "train") if training else tr(lang, "evaluación", "eval")


def _on_off(lang: str, on: bool) -> str:
    return tr(lang, "activados", "on") if on else tr(lang, "desactivados", "off")


def _model_changes(model: torch.nn.Module, state: dict[str, Any], changed: str) -> tuple[str, Any] | None:
    """The first thing of ``model`` that is not as ``state`` recorded it, as (hint key, fields of lang), or None."""
    for cls, methods in state["classes"].items():
        for attr in set(methods) | set(vars(cls)):
            if vars(cls).get(attr) is not methods.get(attr):
                return "model_patched", {"name": f"{cls.__name__}.{attr}"}
    now = dict(model.named_parameters()) | dict(model.named_buffers())
    for name, (value, dtype, device, grad) in state["tensors"].items():
        if name not in now:
            return changed, {"name": name}
        t = now[name]
        if t.dtype != dtype or t.device != device:
            return "model_dtype", {"name": name, "got": f"{t.dtype} ({t.device})", "want": f"{dtype} ({device})"}
        if t.requires_grad != grad:
            return "model_frozen", {"name": name, "got": t.requires_grad, "want": grad}
        if t.shape != value.shape or not torch.equal(t.detach(), value):
            return changed, {"name": name}
    modules = dict(model.named_modules())
    for name, own in state["own"].items():
        extra = _callables(modules[name]) - own if name in modules else set()
        if extra:
            return "model_patched", {"name": ".".join(filter(None, [name, sorted(extra)[0]]))}
    hooks = [
        name or "model"
        for name, m in model.named_modules()
        if name in state["hooks"]
        and (set(m._forward_pre_hooks), set(m._forward_hooks), set(m._backward_hooks)) != state["hooks"][name]
    ]
    if hooks:
        return "hook_left", {"where": ", ".join(hooks)}
    for name, training in state["training"].items():
        if name in modules and modules[name].training != training:
            return "model_mode", lambda lang, was=training: {
                "before": _mode_words(lang, was),
                "after": _mode_words(lang, not was),
            }
    return None


def _restore_model(model: torch.nn.Module, state: dict[str, Any]) -> None:
    """``model`` (and its modules' classes) put back as ``state`` recorded it."""
    for cls, methods in state["classes"].items():
        for attr in set(vars(cls)) - set(methods):
            delattr(cls, attr)
        for attr, value in methods.items():
            if vars(cls).get(attr) is not value:
                setattr(cls, attr, value)
    modules = dict(model.named_modules())
    with torch.no_grad():
        for name, (value, _, _, grad) in state["tensors"].items():
            owner_name, _, leaf = name.rpartition(".")
            owner = modules.get(owner_name)
            if owner is None:
                continue
            now = owner._parameters.get(leaf, owner._buffers.get(leaf))
            if isinstance(now, Tensor) and (now.dtype, now.device, now.shape) == (
                value.dtype,
                value.device,
                value.shape,
            ):
                now.copy_(value)  # in place: a weight shared by two modules stays shared
                if isinstance(now, torch.nn.Parameter):
                    now.requires_grad_(grad)
            elif leaf in owner._parameters:  # a new Parameter: whatever device or dtype the old one was moved to
                owner._parameters[leaf] = torch.nn.Parameter(value.clone(), requires_grad=grad)
            elif leaf in owner._buffers:
                owner._buffers[leaf] = value.clone()
    for name, m in model.named_modules():
        for attr in _callables(m) - state["own"].get(name, set()):
            delattr(m, attr)
        if name in state["hooks"]:
            for hooks, kept in zip((m._forward_pre_hooks, m._forward_hooks, m._backward_hooks), state["hooks"][name]):
                for key in set(hooks) - kept:
                    del hooks[key]
        m.training = state["training"].get(name, m.training)


class _Watch:
    """What :func:`watch` returns: after the block, :meth:`left` names the first thing left behind."""

    def __init__(self, models: Sequence[torch.nn.Module], tensors: Mapping[str, Tensor], changed: str):
        self.models, self.tensors, self.changed = list(models), dict(tensors), changed
        self.found: tuple[str, Any] | None = None

    def __enter__(self) -> _Watch:
        self.globals = _global_state()
        self.inputs = {name: (t.detach().clone(), t.dtype, tuple(t.shape)) for name, t in self.tensors.items()}
        self.states = [_model_state(m) for m in self.models]
        return self

    def _compare(self) -> tuple[str, Any] | None:
        for model, state in zip(self.models, self.states):
            for cls, methods in state["classes"].items():  # a class patched changes every model of the kernel
                if any(vars(cls).get(a) is not methods.get(a) for a in set(methods) | set(vars(cls))):
                    return _model_changes(model, state, self.changed)
        now = _global_state()
        if now["inference"] and not self.globals["inference"]:
            return "inference_mode_left", {}
        if now["grad"] != self.globals["grad"]:
            before, after = self.globals["grad"], now["grad"]
            return "grad_mode_left", lambda lang: {"before": _on_off(lang, before), "after": _on_off(lang, after)}
        if now["dtype"] != self.globals["dtype"]:
            return "default_dtype_left", {"got": _dtype(now["dtype"]), "want": _dtype(self.globals["dtype"])}
        if now["device"] != self.globals["device"]:
            return "default_device_left", {"got": str(now["device"]), "want": str(self.globals["device"])}
        for name, (value, dtype, shape) in self.inputs.items():
            t = self.tensors[name]
            if t.dtype != dtype or tuple(t.shape) != shape or not torch.equal(t.detach().cpu(), value.cpu()):
                return "input_changed", {"name": name}
        for model, state in zip(self.models, self.states):
            found = _model_changes(model, state, self.changed)
            if found is not None:
                return found
        return None

    def __exit__(self, *exc: Any) -> bool:
        try:
            self.found = self._compare()
        finally:
            _set_global_state(self.globals)
            for model, state in zip(self.models, self.states):
                _restore_model(model, state)
            # the tensors handed over are left as the student's code left them: they are the checker's own copies,
            # and the answer may be one of them (``return k`` after changing it in place)
        return False

    def left(self, lang: str, hints: Hints, otherwise: Feedback | None = None) -> Feedback | None:
        """The hint (of the module's ``hints``, which merge :data:`STATE_HINTS`) for the first thing the block left
        changed, or ``otherwise`` when everything is as it was. (Not ``left(...) or ...``: a "not yet" is falsy.)"""
        if self.found is None:
            return otherwise
        key, fields = self.found
        return hints(lang, key, **(fields(lang) if callable(fields) else fields))


def watch(
    *models: torch.nn.Module, tensors: Mapping[str, Tensor] | None = None, changed: str = "model_changed"
) -> _Watch:
    """``with watch(model, tensors={"pattern": p}) as w: got = attempt(lang, fn, model, p)``, then
    ``w.left(lang, HINTS)``: the hint for the first thing the student's code left changed, or None.

    Watched: PyTorch's global switches (grad mode, inference mode, the default dtype and device), the tensors handed
    to the student (``tensors``: name -> the very tensor passed), and every ``model``: its weights' values, dtypes,
    devices and ``requires_grad``, its modules' modes, hooks and methods, and its modules' classes' methods (a
    weight changed gets the hint ``changed``). Whatever the block changed of PyTorch's switches and of the models is put
    back on the way out, reported or not, so that neither the notebook nor the checker's next case runs in the
    student's leftovers; the tensors handed over (the checker's own copies, which the answer may be) are not. The module's
    HINTS must merge :data:`STATE_HINTS`."""
    return _Watch(models, tensors or {}, changed)


# --------------------------------------------------------------------------- what a statement forbids


def _blocked(name: str, es: str, en: str, generator: bool = False) -> types.FunctionType:
    """A function that raises ``ForbiddenTool(name, es, en)``. Its code reaches this module through an
    import, so it does so too as the code of another module's function (whose globals it runs with). A
    ``generator`` one raises when first iterated: the code that replaces a generator function's must be
    a generator's too (Python 3.13 warns otherwise, as ``codecs.iterdecode`` showed)."""
    namespace: dict[str, Any] = {}
    exec(
        "def blocked(*args, **kwargs):\n"
        f"    raise __import__({__name__!r}, fromlist=['_']).ForbiddenTool({name!r}, {es!r}, {en!r})\n"
        + ("    yield\n" if generator else ""),
        namespace,
    )
    return namespace["blocked"]


def _op_name(func: Any) -> str:
    """The name of a PyTorch operation, whatever it is reached by: ``softmax`` for ``torch.softmax``,
    ``Tensor.softmax``, ``F.softmax``, ``torch._softmax``, ``torch.special.softmax`` and
    ``torch.ops.aten._softmax.default``."""
    name = getattr(func, "__name__", "") or ""
    return name.split(".")[0].lstrip("_").removeprefix("special_")


def _called(func: Any) -> str:
    """How a student would write the PyTorch callable ``func``: ``torch.softmax``, ``Tensor.softmax``,
    ``F.log_softmax``, ``torch.special.logsumexp``, ..."""
    name = getattr(func, "__name__", "") or repr(func)
    module = getattr(func, "__module__", None) or ""
    if (getattr(func, "__qualname__", "") or "").startswith(("TensorBase.", "Tensor.")):
        return f"Tensor.{name}"
    if module == "torch._C._special":
        return f"torch.special.{name.removeprefix('special_')}"
    if module.startswith("torch.nn.functional"):
        return f"F.{name}"
    if module.startswith("torch._ops."):
        return f"torch.ops.{module.removeprefix('torch._ops.')}.{name}"
    return f"{module or 'torch'}.{name}"


class _ForbiddenCalls(TorchFunctionMode):
    """Refuses every call of a forbidden PyTorch operation while it is active, however the student
    reached it: another name (``from torch import softmax``), a captured method, a private or
    ``torch.special`` alias of the same operation."""

    def __init__(self, names: set[str], callables: list[Any], es: str, en: str):
        super().__init__()
        self.names, self.callables, self.es, self.en = names, callables, es, en

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if _op_name(func) in self.names or any(func is c for c in self.callables):
            raise ForbiddenTool(_called(func), self.es, self.en)
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def forbid(tools: Iterable[str | tuple[str, str]], es: str, en: str) -> Iterator[None]:
    """Switch off ``tools`` while the block runs the student's code.

    A tool is a dotted path (``"torch.nn.functional.softmax"``, ``"minitransformer.modern.apply_rope"``)
    or a pair (path, the name the message shows); by default the message shows the path, with ``F.``
    and ``nn.`` for ``torch.nn.functional.`` and ``torch.nn.``. The calls themselves are refused,
    not the names in the student's source: a PyTorch operation (a ``torch.`` path) is refused by a
    ``TorchFunctionMode`` under every name that reaches it (``from torch import softmax``, a
    captured ``Tensor.softmax``, ``torch._softmax``, ``torch.special.softmax``, ``torch.ops.aten``);
    a Python function is switched off in its code (``__code__``), so every reference to it is;
    anything else is replaced on its owner. Using one raises :class:`ForbiddenTool`, which
    :func:`attempt` turns into a "not yet" that names the tool and says why (``es``/``en``). Run
    only the student's code inside.
    """
    undo: list[Callable[[], None]] = []
    names: set[str] = set()
    callables: list[Any] = []
    try:
        for tool in tools:
            if isinstance(tool, str):
                tool = (tool, tool.replace("torch.nn.functional.", "F.").replace("torch.nn.", "nn."))
            path, shown = tool
            owner_path, _, attr = path.rpartition(".")
            owner = pkgutil.resolve_name(owner_path)
            if not hasattr(owner, attr):  # not in this PyTorch version; the package's own tools always are
                if path.startswith("minitransformer."):
                    raise AttributeError(f"forbid: {path} does not exist (the checker names a tool that moved)")
                continue
            value = getattr(owner, attr)
            torch_op = path.startswith("torch.") and (inspect.ismodule(owner) or owner is torch.Tensor)
            if torch_op:  # refused by the mode, under all its names
                names.add(_op_name(value))
                callables.append(value)
            if isinstance(value, types.FunctionType) and value.__closure__ is None:
                blocked = _blocked(shown, es, en, generator=bool(value.__code__.co_flags & inspect.CO_GENERATOR))
                undo.append(functools.partial(setattr, value, "__code__", value.__code__))
                value.__code__ = blocked.__code__
            elif not torch_op:  # an inherited attribute is restored by deleting the block
                own = attr in vars(owner)
                undo.append(
                    functools.partial(setattr, owner, attr, value) if own else functools.partial(delattr, owner, attr)
                )
                setattr(owner, attr, _blocked(shown, es, en))
        with _ForbiddenCalls(names, callables, es, en) if names else contextlib.nullcontext():
            yield
    finally:
        for step in reversed(undo):
            step()


def loops_in(fn: Callable[..., Any]) -> int | None:
    """The line (within ``fn``'s source) of its first Python loop or comprehension; 0 if none.

    ``None`` when the source cannot be read (then a "no loops" rule cannot be checked).
    """
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    loops = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    found = [node.lineno for node in ast.walk(tree) if isinstance(node, loops)]
    return min(found) if found else 0


# --------------------------------------------------------------------------- checkers


def _safety_net(lang: str, exc: Exception) -> Feedback:
    return CORE_HINTS(lang, "checker_confused", error=exc)


def checker(fn: Callable[..., Feedback], name: str | None = None) -> Callable[..., Feedback]:
    """Decorator for checkers: an :class:`Unfinished` inside becomes its feedback.

    A checker takes ``lang: str | None = None``; without it (or with ``None``) it answers in the
    notebook's language, the one ``runtime.setup(lang=...)`` set (:func:`~minitransformer.i18n.language`).
    It never lets an exception out: an unexpected one (an answer of a kind nobody foresaw)
    becomes a "not yet" too. A "not yet" of exercise ``name`` (given by :func:`exercise`) ends by
    saying how to see its worked solution.
    """
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Feedback:
        bound = signature.bind(*args, **kwargs)
        lang = check_lang(bound.arguments.get("lang") or language())
        bound.arguments["lang"] = lang
        try:
            feedback = fn(*bound.args, **bound.kwargs)
        except Unfinished as early:
            feedback = early.feedback
        except Exception as exc:  # never a traceback into the checker
            feedback = _safety_net(lang, exc)
        if not feedback.ok and name is not None:
            feedback = dataclasses.replace(
                feedback,
                message=feedback.message
                + tr(
                    lang,
                    f'\nSi te atascas, `show_solution("{name}")` te muestra una solución explicada.',
                    f'\nStuck? `show_solution("{name}")` shows a worked solution.',
                ),
            )
        return feedback

    return wrapper


# The exercises met so far, by id: their checkers and their worked solutions (filled by @exercise and @solution).
CHECKERS: dict[str, Callable[..., Feedback]] = {}
SOLUTIONS: dict[str, Callable[..., Any]] = {}


def exercise(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The id of an exercise (``"01.softmax"``) on its checker (``def check_...``): it makes it a :func:`checker`
    whose "not yet" ends by naming ``show_solution(name)``. (Its worked solution carries the same id:
    ``@solution`` in :mod:`~.registry`.)
    """

    def attach(fn: Callable[..., Any]) -> Callable[..., Any]:
        wrapped = checker(fn, name)
        wrapped.__exercise__ = name  # type: ignore[attr-defined]
        CHECKERS[name] = wrapped
        return wrapped

    return attach
