"""The notebook builder's «es|en» swaps: one "|" each, or a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest
from notebook_tool import nbt as notebooks

META = "<!-- meta -->\nes: prueba | Prueba\nen: test | Test\n\n"


def _source(tmp_path: Path, code: str) -> Path:
    path = tmp_path / "99_test.md"
    path.write_text(META + "<!-- code -->\n```python\n" + code + "\n```\n", encoding="utf-8")
    return path


def test_a_swap_picks_each_language(tmp_path):
    src = notebooks.parse_source(_source(tmp_path, 'x = 1  # «uno|one»\nprint(«"hola"|"hello"», «"a"|"b"»)'))
    ((kind, code),) = src.cells
    assert code["es"] == 'x = 1  # uno\nprint("hola", "a")'
    assert code["en"] == 'x = 1  # one\nprint("hello", "b")'


def test_the_spanish_side_may_quote_with_guillemets(tmp_path):
    src = notebooks.parse_source(
        _source(tmp_path, 'print(«"«it» mira a «animal»"|"“it” looks at “animal”"»)  # «un «sí»|a “yes”»')
    )
    assert src.cells[0][1]["es"] == 'print("«it» mira a «animal»")  # un «sí»'
    assert src.cells[0][1]["en"] == 'print("“it” looks at “animal”")  # a “yes”'


def test_a_bar_outside_the_swaps_is_kept(tmp_path):
    src = notebooks.parse_source(_source(tmp_path, "# «las puntuaciones son|the scores are» log p(y | x)"))
    assert src.cells[0][1]["es"] == "# las puntuaciones son log p(y | x)"
    assert src.cells[0][1]["en"] == "# the scores are log p(y | x)"


@pytest.mark.parametrize(
    "swap", ["«log p(y | x) en español|log p(y | x) in English»", "«sin barra»", "«a|b|c»", "«dice «sí»|says «yes»|no»"]
)
def test_a_swap_without_exactly_one_bar_is_refused(tmp_path, swap):
    path = _source(tmp_path, f"x = 1\ny = 2  # {swap}")
    with pytest.raises(ValueError) as err:
        notebooks.parse_source(path)
    message = str(err.value)
    assert "99_test.md:5" in message  # the file and the line of the cell's marker
    assert "line 2 of the code cell" in message
    assert swap in message


def test_the_course_sources_have_no_ambiguous_swap():
    notebooks.sources()  # parses every source; raises on a swap with two "|"
