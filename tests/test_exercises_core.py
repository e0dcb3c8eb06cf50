"""What every checker promises a student: it never crashes, never says "correct" to junk,
explains errors with the student's own line, enforces what a statement forbids, and keeps
a worked solution for every exercise that its checker accepts."""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import json
import os
import re
import string
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
import torch
from feedback_asserts import assert_junk_never_crashes

from minitransformer.exercises import attempt, checker, correct, not_yet, registry
from minitransformer.exercises._core import SOLUTIONS, close, forbid, loops_in, num
from minitransformer.exercises.registry import (
    check_solution,
    exercise_of,
    exercises,
    show_solution,
    solution_function,
)

LANGS = ("es", "en")
ROOT = Path(__file__).resolve().parents[1]
NOT_YET = {"es": "❌ Todavía no:", "en": "❌ Not yet:"}


EXERCISES = exercises()


def checkers():
    for name, (check, _) in EXERCISES.items():
        yield name, check


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("name,check", list(checkers()), ids=list(EXERCISES))
def test_junk_never_crashes_and_is_never_correct(name, check, lang):
    assert_junk_never_crashes(check, lang)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("name,check", list(checkers()), ids=list(EXERCISES))
def test_an_unwritten_stub_is_not_yet_and_says_how_to_see_the_solution(name, check, lang):
    def stub(*args):
        raise NotImplementedError

    fb = check(stub, lang=lang)
    assert not fb and fb.hint == "not_written", fb.message
    assert f'show_solution("{name}")' in fb.message


# --------------------------------------------------------------------------- the student's own error


@checker
def _check_double(fn, lang="es"):
    got = attempt(lang, fn, torch.ones(2, 3))
    return correct(lang) if close(got, 2 * torch.ones(2, 3)) else not_yet(lang, "no", "no")


def _shape_error(x):
    doubled = 2 * x
    return doubled @ torch.ones(2, 2)  # (2, 3) @ (2, 2): the shapes do not fit


@pytest.mark.parametrize("lang", LANGS)
def test_an_error_shows_the_failing_line_and_what_it_means(lang):
    fb = _check_double(_shape_error, lang=lang)
    assert not fb.ok
    line = _shape_error.__code__.co_firstlineno + 2
    assert f"{'línea' if lang == 'es' else 'line'} {line}" in fb.message
    assert "return doubled @ torch.ones(2, 2)" in fb.message
    assert (
        "las formas de los tensores no encajan" if lang == "es" else "the shapes of the tensors do not fit"
    ) in fb.message.lower()
    assert "RuntimeError" in fb.message


@pytest.mark.parametrize("lang", LANGS)
def test_a_tensor_used_as_a_truth_value_is_named_as_such_not_as_mixed_dtypes(lang):
    """`if cache.k:` raises "Boolean value of Tensor with more than one value is ambiguous": its explanation is about
    truth values (the word "Boolean" once matched the dtype explanation's "Bool")."""

    def truthy(x):
        if x:
            return 2 * x
        return x

    fb = _check_double(truthy, lang=lang)
    assert not fb.ok
    assert ("como verdadero o falso" if lang == "es" else "as true or false") in fb.message
    assert ("tipos de datos" if lang == "es" else "data types") not in fb.message


@pytest.mark.parametrize("lang", LANGS)
def test_an_error_inside_pytorch_points_at_the_students_line_not_pytorchs(lang):
    def uses_one_hot(x):
        return torch.nn.functional.one_hot(torch.tensor([5]), 3)

    fb = _check_double(uses_one_hot, lang=lang)
    assert "return torch.nn.functional.one_hot(torch.tensor([5]), 3)" in fb.message
    assert "torch/" not in fb.message


@checker
def _check_as_float(fn, lang="es"):
    got = attempt(lang, fn, 3)
    return correct(lang) if float(got) == 8.0 else not_yet(lang, "no", "no")  # float(2**5000) overflows here


PYTHON_SAYS = {"es": "Python dice: «{}»", "en": 'Python says: "{}"'}


@pytest.mark.parametrize("lang", LANGS)
def test_an_error_inside_the_checker_quotes_pythons_words_as_pythons(lang):
    """An answer the checker cannot read (an int too large for a float) gets the "could not make sense" reply, and
    Python's English words are quoted as Python's, not set inside the sentence as if they were its own."""
    fb = _check_as_float(lambda n: 2 ** int(5000 + n), lang=lang)
    assert not fb.ok and fb.hint == "checker_confused", fb.message
    assert "OverflowError; " + PYTHON_SAYS[lang].format("int too large to convert to float") in fb.message
    assert "OverflowError: int too large" not in fb.message


def test_python_error_names_the_type_and_quotes_the_first_line():
    from minitransformer.exercises._core import python_error

    assert python_error("es", ValueError("boom\nmore")) == "ValueError; Python dice: «boom»"
    assert python_error("en", KeyError()) == "KeyError"
    assert python_error("en", "TypeError: can't concat str to bytes") == (
        'TypeError; Python says: "can\'t concat str to bytes"'
    )


@pytest.mark.parametrize("lang", LANGS)
def test_unwritten_none_and_not_callable(lang):
    def stub(x):
        raise NotImplementedError

    assert "NotImplementedError" in _check_double(stub, lang=lang).message
    assert "`None`" in _check_double(lambda x: None, lang=lang).message
    fb = _check_double(torch.ones(3), lang=lang)
    assert not fb.ok and ("sin paréntesis" if lang == "es" else "without brackets") in fb.message


def test_forbid_switches_tools_off_only_inside_the_block():
    from minitransformer.exercises._core import ForbiddenTool

    with forbid(["torch.softmax", "torch.Tensor.softmax"], "es", "en"):
        with pytest.raises(ForbiddenTool):
            torch.softmax(torch.ones(3), dim=-1)
        with pytest.raises(ForbiddenTool):
            torch.ones(3).softmax(-1)
    torch.testing.assert_close(torch.ones(2).softmax(-1), torch.full((2,), 0.5))
    assert "softmax" not in vars(torch.Tensor)  # the inherited method is back as it was, not copied


CAPTURED_SOFTMAX = torch.Tensor.softmax  # as a student's earlier cell could keep it
from torch import softmax as imported_softmax  # noqa: E402


@pytest.mark.parametrize(
    "call,shown",
    [
        (lambda x: imported_softmax(x, -1), "torch.softmax"),
        (lambda x: CAPTURED_SOFTMAX(x, -1), "Tensor.softmax"),
        (lambda x: torch._softmax(x, -1, False), "torch._softmax"),
        (lambda x: torch.special.softmax(x, -1), "torch.special.softmax"),
        (lambda x: torch.ops.aten._softmax(x, -1, False), "torch.ops.aten._softmax"),
        (lambda x: torch._log_softmax(x, -1, False), "torch._log_softmax"),
        (lambda x: torch.nn.functional.log_softmax(x, -1), "F.log_softmax"),
        (lambda x: torch.special.logsumexp(x, -1), "torch.special.logsumexp"),
        (lambda x: x.logsumexp(-1), "Tensor.logsumexp"),
    ],
)
def test_forbid_refuses_the_call_under_any_name(call, shown):
    """The call is refused, not the name: an alias, a captured method, a private or torch.special
    spelling of the same operation; the refusal names what was called."""
    from minitransformer.exercises._core import ForbiddenTool

    x = torch.randn(2, 3)
    with forbid(["torch.softmax", "torch.nn.functional.log_softmax", "torch.logsumexp"], "es", "en"):
        with pytest.raises(ForbiddenTool) as refused:
            call(x)
    assert refused.value.name == shown
    call(x)  # allowed again after the block


def test_forbid_cannot_be_hidden_by_except_exception():
    from minitransformer.exercises._core import ForbiddenTool

    def hides(x):
        try:
            return torch.softmax(x, -1)
        except Exception:  # noqa: BLE001
            return x

    with forbid(["torch.softmax"], "es", "en"), pytest.raises(ForbiddenTool):
        hides(torch.ones(3))


def test_forbid_switches_python_functions_off_wherever_they_are_referenced():
    from minitransformer.exercises._core import ForbiddenTool
    from minitransformer.modern import apply_rope as imported

    x, cos = torch.randn(3, 4), torch.ones(3, 2)
    with forbid([("minitransformer.modern.apply_rope", "apply_rope")], "es", "en"):
        with pytest.raises(ForbiddenTool, match="apply_rope"):
            imported(x, cos, cos * 0)
    torch.testing.assert_close(imported(x, cos, cos * 0), x)


def test_forbid_leaves_other_operations_alone():
    with forbid(["torch.softmax", "torch.logsumexp"], "es", "en"):
        x = torch.randn(2, 5)
        e = torch.exp(x - x.amax(-1, keepdim=True))
        out = e / e.sum(-1, keepdim=True)
    torch.testing.assert_close(out, torch.softmax(x, -1))


def test_loops_in_finds_loops_and_comprehensions():
    def vectorised(n):
        return torch.arange(n) * 2

    def with_for(n):
        out = []
        for i in range(n):
            out.append(i)
        return out

    def with_comprehension(n):
        return torch.tensor([i * 2 for i in range(n)])

    assert loops_in(vectorised) == 0
    assert loops_in(with_for) == 3
    assert loops_in(with_comprehension) == 2
    assert loops_in(len) is None  # no source: the rule cannot be checked


def test_numbers_in_spanish_messages_have_a_decimal_comma():
    assert num("es", 0.1234567) == "0,1235"
    assert num("en", 0.1234567) == "0.1235"


# --------------------------------------------------------------------------- solutions


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("name", list(EXERCISES))
def test_every_solution_is_accepted_by_its_checker(name, lang):
    fb = check_solution(name, lang)
    assert fb.ok, f"{name}: {fb.message}"


def _def_line(code: str, stub: str) -> int:
    """The index of the line where the solution's function starts, after its imports."""
    lines = code.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"def {stub}("))
    assert all(line == "" or line.startswith(("import ", "from ")) for line in lines[:start]), code
    return start


@pytest.mark.parametrize("name", list(EXERCISES))
def test_every_solution_is_shown_with_code_and_an_explanation_in_both_languages(name):
    es, en = show_solution(name, lang="es"), show_solution(name, lang="en")
    stub = solution_function(name).__name__.removeprefix("solution_")
    for shown in (es, en):
        _def_line(shown.code, stub)
        assert "@solution" not in shown.code and "solution_" not in shown.code
        assert "«" not in shown.code and "»" not in shown.code  # every «es|en» comment resolved
        ast.parse(shown.code)  # the code shown is valid Python
        assert len(shown.explanation) > 80
        assert f"```python\n{shown.code}" in shown._repr_markdown_()
    assert es.explanation != en.explanation
    assert str(es).startswith("Solución") and str(en).startswith("Solution")


def _comments_and_docstrings(code: str) -> list[str]:
    texts = [t.string for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type == tokenize.COMMENT]
    functions = [node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.FunctionDef)]
    return texts + [ast.get_docstring(f) for f in functions if ast.get_docstring(f)]


@pytest.mark.parametrize("name", EXERCISES)
def test_the_spanish_solution_has_no_english_comment_or_docstring(name):
    """A comment or docstring with words (not only shapes such as "# (B, H, T, S)") is written in each
    language: the Spanish code shows the Spanish one."""
    es = _comments_and_docstrings(show_solution(name, lang="es").code)
    en = _comments_and_docstrings(show_solution(name, lang="en").code)
    assert len(es) == len(en)
    for spanish, english in zip(es, en):
        if re.search(r"[a-záéíóúñ]{3,} [a-záéíóúñ]{3,}", english, re.I):
            assert spanish != english, f"{name}: an English comment in the Spanish solution: {english}"


@pytest.mark.parametrize("lang", LANGS)
def test_the_shown_code_runs_pasted_into_a_fresh_kernel_and_passes_the_checker(lang):
    """The exact text show_solution shows, executed by a new Python process (nothing imported but the checkers,
    no future import: annotations are evaluated), each solution in a namespace of its own as in a fresh cell,
    defines a function its checker accepts."""
    lines = ["import json, importlib", "said = {}"]
    for name, (check, solution) in EXERCISES.items():
        code = show_solution(name, lang=lang).code
        stub = solution.__name__.removeprefix("solution_")
        lines += [
            "cell = {}",
            f"exec(compile({code!r}, '<cell>', 'exec', dont_inherit=True), cell)",
            f"check = getattr(importlib.import_module({check.__module__!r}), {check.__name__!r})",
            f"said[{name!r}] = check(cell[{stub!r}], lang={lang!r}).message",
        ]
    lines.append("print(json.dumps(said))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(lines)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    said = json.loads(done.stdout)
    assert list(said) == list(EXERCISES)
    for name, message in said.items():
        assert message.startswith("✅ ¡Correcto!" if lang == "es" else "✅ Correct!"), f"{name}: {message}"


def test_a_comment_in_both_languages_is_shown_in_the_solutions_language():
    from minitransformer.exercises.registry import _source

    def solution_double(x):
        return 2 * x  # «el doble|twice» (B, T)

    assert _source(solution_double, "es").endswith("return 2 * x  # el doble (B, T)")
    assert _source(solution_double, "en").endswith("return 2 * x  # twice (B, T)")


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("name,check", list(checkers()), ids=list(EXERCISES))
def test_a_checker_without_lang_answers_in_the_notebooks_language(name, check, lang, language):
    """runtime.setup(lang=...) sets the package's language; a checker called without lang= (or with
    lang=None) answers in it, whatever the language of the previous notebook was."""
    language(lang)
    for answer in (lambda *a: None, "not a function"):
        for fb in (check(answer), check(answer, lang=None), check(answer, None)):
            assert not fb.ok and fb.message.startswith(NOT_YET[lang]), (name, fb.message)
    other = "en" if lang == "es" else "es"
    assert check(lambda *a: None, lang=other).message.startswith(NOT_YET[other])  # an explicit lang wins


@pytest.mark.parametrize("lang", LANGS)
def test_a_not_yet_says_how_to_see_the_solution(lang):
    from minitransformer.exercises.attention import check_softmax

    fb = check_softmax(lambda x: x, lang=lang)
    assert 'show_solution("01.softmax")' in fb.message
    assert exercise_of(check_softmax) == "01.softmax"


def test_a_teacher_sees_every_solution_of_a_notebook():
    shown = show_solution("02", lang="es")
    assert [s.name for s in shown] == ["02.split_heads", "02.masked_attention", "02.decoder_mask"]
    assert shown._repr_markdown_().count("**Solución · 02.") == 3


def test_an_unknown_exercise_is_a_course_error_that_lists_the_notebooks_exercises():
    from minitransformer.i18n import CourseError

    with pytest.raises(CourseError, match="01.softmax"):
        show_solution("01.softmaks", lang="en")


def test_an_exercise_is_registered_by_its_id_on_the_solution():
    @registry.solution("99.double", "Dos veces.", "Twice.")
    def solution_double(x):
        return torch.cat([x, x])

    try:
        assert exercise_of(solution_double) == "99.double"
        assert _def_line(show_solution("99.double", lang="en").code, "double") == 3  # after "import torch"
    finally:
        del SOLUTIONS["99.double"]


def test_every_checker_has_a_solution_and_every_solution_a_checker():
    from minitransformer.exercises._core import CHECKERS

    assert set(CHECKERS) == set(SOLUTIONS) == set(EXERCISES)
    for name, (check, solution) in EXERCISES.items():
        assert exercise_of(check) == exercise_of(solution) == name
        assert solution.__module__.endswith(f".solutions.nb{name[:2]}"), (name, solution.__module__)


def test_every_exercise_cell_of_the_notebooks_is_registered_with_its_stub():
    """Each checker call in a notebook source names an exercise whose solution has the stub's name."""
    by_checker = {check.__name__: (name, sol.__name__) for name, (check, sol) in EXERCISES.items()}
    seen = set()
    for source in sorted((ROOT / "notebooks" / "source").glob("[0-9][0-9]_*.md")):
        for check, stub in re.findall(r"^(check_\w+)\((\w+), lang=LANG\)", source.read_text(), re.M):
            assert check in by_checker, f"{source.name}: {check} is not an exercise's checker"
            name, solution = by_checker[check]
            assert name.startswith(source.name[:2]), (source.name, name)
            assert solution == f"solution_{stub}", (source.name, check, stub)
            seen.add(name)
    assert seen == set(EXERCISES)


# --------------------------------------------------------------------------- hints


def _hint_tables():
    """Every hint table: the core's, and each checker module's HINTS (one per module that has checkers)."""
    from minitransformer.exercises._core import CORE_HINTS, Hints

    tables = {"_core": CORE_HINTS}
    for name in sorted({check.__module__ for check, _ in EXERCISES.values()}):
        module = importlib.import_module(name)
        assert isinstance(getattr(module, "HINTS", None), Hints), f"{name} has no keyed HINTS table"
        tables[name.rpartition(".")[2]] = module.HINTS
    return tables


def test_checker_modules_write_no_hint_outside_their_table():
    """A "not yet" is always a key of a table: no checker module calls not_yet() with its own text."""
    for name in sorted({check.__module__ for check, _ in EXERCISES.values()}):
        source = inspect.getsource(importlib.import_module(name))
        assert "not_yet(" not in source, f"{name} writes a hint outside HINTS"


HINT_KEYS = [(module, key) for module, table in _hint_tables().items() for key in table]


@pytest.mark.parametrize("module,key", HINT_KEYS, ids=[f"{m}.{k}" for m, k in HINT_KEYS])
def test_every_hint_renders_in_both_languages(module, key):
    """Each hint formats with its fields filled (a missing one would raise), is not empty, carries its key,
    and is written in each language."""
    table = _hint_tables()[module]
    es, en = table[key]
    fields = {
        name: "X"
        for text in (es, en)
        for _, name, _, _ in string.Formatter().parse(text)
        if name  # a {field}; literal text and {{escaped}} braces give none
    }
    shown = {lang: table(lang, key, **fields) for lang in LANGS}
    for lang, fb in shown.items():
        assert not fb.ok and fb.hint == key
        assert fb.message.startswith(NOT_YET[lang]) and len(fb.message) > len(NOT_YET[lang]) + 5
    assert shown["es"].message != shown["en"].message
    assert es != en, f"{module}.{key}: the Spanish hint is the English one"


# --------------------------------------------------------------------------- naming a mistake


def test_diagnose_names_the_first_mistake_that_gives_every_answer():
    from minitransformer.exercises._core import diagnose

    right = [torch.tensor(1.0), torch.tensor(2.0), torch.tensor(3.0)]
    answers = [torch.tensor(1.0), torch.tensor(-2.0), torch.tensor(30.0)]  # right, then two mistakes
    bank = {
        "negated": [-r for r in right],  # gives the second answer only
        "times_ten": [10 * r for r in right],  # gives the third answer only
        "off": [r + 100 for r in right],  # gives none
    }
    assert diagnose(answers, bank) is None  # no mistake explains every answer
    assert diagnose([-r for r in right], bank) == "negated"
    assert diagnose(answers[1:2], {k: v[1:2] for k, v in bank.items()}) == "negated"  # the first wrong case alone
    assert diagnose(right, {"also_negated": [-r for r in right], **bank}) is None  # nothing wrong, nothing named
    # pairs: two ways to make one mistake share its key; None: the mistake does not apply to that case
    pairs = [("scaled", [None, torch.tensor(-2.0), torch.tensor(6.0)]), ("scaled", [torch.tensor(1.0)] * 3)]
    assert diagnose(answers, pairs) is None
    assert diagnose(answers[:2], [("scaled", [torch.tensor(1.0), torch.tensor(-2.0)]), *pairs]) == "scaled"
    assert diagnose([3], {"three": [3]}, same=lambda a, b: a == b) == "three"
    assert diagnose([], bank) is None


def test_by_key_turns_banks_written_case_by_case_into_the_bank_diagnose_takes():
    from minitransformer.exercises._core import by_key, diagnose

    per_case = [{"double": 2, "square": 1}, {"double": 4, "square": 4}, {"square": 9}]  # 3 has no "double"
    assert by_key(per_case) == [("double", [2, 4, None]), ("square", [1, 4, 9])]
    assert diagnose([1, 4, 9], by_key(per_case), same=lambda a, b: a == b) == "square"
    # pairs: the n-th way to make a mistake goes with the n-th of the same key in the other cases
    pairs = [[("off", 10), ("off", -10)], [("off", 20), ("off", -20)]]
    assert by_key(pairs) == [("off", [10, 20]), ("off", [-10, -20])]
    assert diagnose([-10, -20], by_key(pairs), same=lambda a, b: a == b) == "off"
    assert by_key([]) == []


def test_a_forbidden_generator_function_is_refused_when_iterated_and_works_again_after():
    """The code that replaces a generator function's is a generator's (Python 3.13 warns, an error here, when a
    function's code changes kind): codecs.iterdecode, which notebook 11's streaming exercise forbids."""
    import codecs
    import warnings

    from minitransformer.exercises._core import ForbiddenTool

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with forbid(["codecs.iterdecode"], "prohibida", "forbidden"):
            pieces = codecs.iterdecode([b"a"], "utf-8")
            with pytest.raises(ForbiddenTool):
                list(pieces)
    assert list(codecs.iterdecode([b"a\xc3", b"\xb1"], "utf-8")) == ["a", "ñ"]


# --------------------------------------------------------------------------- the model left as it was


def _promises_the_model():
    """The checkers whose statement promises that the model given to the student's function is left as it was."""
    return [
        (name, check, solution)
        for name, (check, solution) in EXERCISES.items()
        if "left as it was" in (check.__doc__ or "")
    ]


def _first_linear(model):
    return next(m for m in model.modules() if isinstance(m, torch.nn.Linear))


def _patch_forward(model):
    linear = _first_linear(model)
    original = linear.forward
    linear.forward = lambda x: original(x)


# What a right answer can leave behind on the model it was given: each one is done after the answer is computed.
LEFT_BEHIND = {
    "a weight changed": lambda model: next(model.parameters()).data.add_(1e-3),
    "float64": lambda model: model.double(),
    "half precision": lambda model: model.half(),
    "another device": lambda model: model.to("meta"),
    "a parameter frozen": lambda model: next(model.parameters()).requires_grad_(False),
    "train mode": lambda model: model.train(),
    "a hook": lambda model: _first_linear(model).register_forward_pre_hook(lambda module, args: None),
    "a forward hook": lambda model: model.register_forward_hook(lambda module, args, out: None),
    "a method replaced on a module": _patch_forward,
}


def test_the_promise_is_made_by_the_checkers_that_hand_over_a_model():
    assert [name for name, _, _ in _promises_the_model()] == ["13.ov_circuit", "13.ablate_head"]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("left", list(LEFT_BEHIND))
@pytest.mark.parametrize("name,check,solution", _promises_the_model(), ids=[n for n, _, _ in _promises_the_model()])
def test_a_checker_that_promises_the_model_is_left_as_it_was_sees_what_is_left(name, check, solution, left, lang):
    """A right answer that leaves the model changed in any way is not correct, and gets a hint of the checker's
    own table (never a crash or the generic fallback)."""

    def answer(*args):
        result = solution(*args)
        result = result.detach().clone() if isinstance(result, torch.Tensor) else result
        for arg in args:
            if isinstance(arg, torch.nn.Module):
                LEFT_BEHIND[left](arg)
        return result

    fb = check(answer, lang=lang)
    assert not fb.ok, f"{name} accepted a model left with {left}"
    assert fb.message.startswith(NOT_YET[lang]), fb.message
    module = importlib.import_module(check.__module__)
    assert fb.hint in module.HINTS, (name, left, fb.hint, fb.message)
    assert fb.hint not in ("crashed", "not_understood"), fb.message
