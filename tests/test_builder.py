"""The notebook edit loop (tools/notebooks.py): content-derived cell ids, outputs kept for
unchanged cells, `run NN` for one pair, and `import` of an edit made in JupyterLab."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest
from notebook_tool import nbt

ROOT = Path(__file__).resolve().parents[1]

DEMO = """<!-- meta -->
es: demo | Demostración
en: demo | Demo

<!-- md es -->
## Objetivos

Texto en español.
<!-- md en -->
## Goals

English text.

<!-- code -->
```python
x = 1  # «uno|one»
print(«"hola"|"hello"», x)
```

<!-- code -->
```python
y = x + 1
```

<!-- md es -->
Fin.
<!-- md en -->
End.
"""

OTHER = """<!-- meta -->
es: otro | Otro
en: other | Other

<!-- code -->
```python
z = 3
```
"""


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository with two notebook sources, 01 (DEMO) and 02 (OTHER), built."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copy(ROOT / "CHANGELOG.md", tmp_path / "CHANGELOG.md")
    (tmp_path / "src" / "minitransformer").mkdir(parents=True)
    shutil.copy(ROOT / "src" / "minitransformer" / "__init__.py", tmp_path / "src" / "minitransformer" / "__init__.py")
    source = tmp_path / "notebooks" / "source"
    source.mkdir(parents=True)
    (source / "01_demo.md").write_text(DEMO, encoding="utf-8")
    (source / "02_other.md").write_text(OTHER, encoding="utf-8")
    monkeypatch.setattr(nbt, "ROOT", tmp_path)
    monkeypatch.setattr(nbt, "SOURCE_DIR", source)
    monkeypatch.setattr(nbt, "README", tmp_path / "README.md")
    monkeypatch.setattr(nbt, "check_profile", lambda new=False: None)  # tests/test_numerics.py tries it
    nbt.build(verbose=False)
    return tmp_path


def path(repo: Path, number: str, lang: str) -> Path:
    return next((repo / "notebooks" / lang).glob(f"{number}_*.ipynb"))


def read(p: Path) -> nbformat.NotebookNode:
    return nbformat.read(p, as_version=4)


def fake_execute(p: Path) -> None:
    """Stand-in for a kernel: every code cell gets an output naming its source."""
    nb = read(p)
    for n, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"ran: {cell.source}\n")]
        cell.execution_count = n + 1
    nbformat.write(nb, p)


def edit_source(repo: Path, old: str, new: str, name: str = "01_demo.md") -> None:
    p = repo / "notebooks" / "source" / name
    text = p.read_text(encoding="utf-8")
    assert old in text
    p.write_text(text.replace(old, new), encoding="utf-8")


def source_text(repo: Path) -> str:
    return (repo / "notebooks" / "source" / "01_demo.md").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- ids and rebuilds


def test_ids_are_derived_from_content_and_shared_by_the_two_languages(repo):
    es, en = read(path(repo, "01", "es")), read(path(repo, "01", "en"))
    assert [c.id for c in es.cells][:2] == ["es-01-title", "es-01-setup"]
    assert [c.id.removeprefix("es-") for c in es.cells] == [c.id.removeprefix("en-") for c in en.cells]
    assert len({c.id for c in es.cells}) == len(es.cells)


def test_inserting_a_cell_leaves_the_other_ids_unchanged(repo):
    before = [c.id for c in read(path(repo, "01", "en")).cells]
    edit_source(
        repo,
        "<!-- code -->\n```python\ny = x + 1",
        "<!-- code -->\n```python\nw = 0\n```\n\n<!-- code -->\n```python\ny = x + 1",
    )
    nbt.build(verbose=False)
    after = [c.id for c in read(path(repo, "01", "en")).cells]
    assert len(after) == len(before) + 1
    assert [i for i in after if i not in before] == [after[4]]  # only the new cell has a new id
    assert [i for i in after if i in before] == before


def test_repeated_cells_get_distinct_ids(repo):
    edit_source(repo, "y = x + 1\n```", "y = x + 1\n```\n\n<!-- code -->\n```python\ny = x + 1\n```")
    nbt.build(verbose=False)
    ids = [c.id for c in read(path(repo, "01", "es")).cells]
    assert len(set(ids)) == len(ids) and ids[4] + "-2" == ids[5]


def test_rebuild_keeps_outputs_of_unchanged_cells_and_leaves_the_changed_to_run(repo, capsys):
    for lang in ("es", "en"):
        fake_execute(path(repo, "01", lang))
    other_before = path(repo, "02", "es").read_bytes()
    edit_source(repo, "y = x + 1", "y = x + 2")
    written = nbt.build(["01"])
    assert sorted(p.name for p in written) == ["01_demo.ipynb", "01_demo.ipynb"]
    for lang in ("es", "en"):
        cells = read(path(repo, "01", lang)).cells
        code = {c.source: c for c in cells if c.cell_type == "code"}
        assert code["y = x + 2"].outputs == [] and code["y = x + 2"].execution_count is None
        kept = [c for s, c in code.items() if s != "y = x + 2"]
        assert kept and all(c.outputs[0].text == f"ran: {c.source}\n" for c in kept)
    assert "python tools/notebooks.py run 01" in capsys.readouterr().out
    assert path(repo, "02", "es").read_bytes() == other_before
    assert nbt.build(["01"], verbose=False) == []  # nothing changed since: nothing written


# --------------------------------------------------------------------------- the version the notebooks install


def set_version(repo: Path, version: str) -> None:
    init = repo / "src" / "minitransformer" / "__init__.py"
    text = re.sub(
        r'^__version__ = "[^"]+"$', f'__version__ = "{version}"', init.read_text(encoding="utf-8"), flags=re.M
    )
    init.write_text(text, encoding="utf-8")


def installs(cells: list) -> tuple[str, str]:
    """The git ref the setup cell installs the package from, and the one the title's Colab badge opens."""
    setup = re.search(r'"minitransformer @ git\+https://github\.com/[^/]+/[^@"]+@([^"]+)"', cells[1].source)
    badge = re.search(r"colab\.research\.google\.com/github/[^/]+/[^/]+/blob/([^/]+)/notebooks/", cells[0].source)
    return setup.group(1), badge.group(1)


def test_a_release_installs_its_tag_and_main_between_releases_installs_main(repo):
    """A release's notebooks install and open its tag (a student's saved copy keeps the package it was written for);
    a development version's install main; the README's badges open the latest release either way."""
    (repo / "README.md").write_text("<!-- notebooks:start --><!-- en -->\n<!-- notebooks:end -->\n", encoding="utf-8")
    set_version(repo, "2.3.4")
    (repo / "CHANGELOG.md").write_text("# Changelog\n\n## 2.3.4 (2027-01-02)\n\n## 2.3.3\n", encoding="utf-8")
    for lang in ("es", "en"):
        fake_execute(path(repo, "01", lang))
        nb = read(path(repo, "01", lang))
        nb.cells[1].outputs = []  # the setup cell prints nothing outside Colab
        nbformat.write(nb, path(repo, "01", lang))
    assert nbt.main(["build"]) == 0
    for lang in ("es", "en"):
        cells = read(path(repo, "01", lang)).cells
        assert installs(cells) == ("v2.3.4", "v2.3.4")
        assert cells[1].execution_count == 1 and cells[1].outputs == []  # kept: the setup cell prints nothing
        assert all(c.outputs[0].text == f"ran: {c.source}\n" for c in cells[2:] if c.cell_type == "code")
    assert "/blob/v2.3.4/notebooks/en/01_demo.ipynb)" in (repo / "README.md").read_text(encoding="utf-8")

    set_version(repo, "2.4.0.dev0")
    (repo / "CHANGELOG.md").write_text("# Changelog\n\n## Unreleased\n\n## 2.3.4 (2027-01-02)\n", encoding="utf-8")
    assert nbt.main(["build"]) == 0
    for lang in ("es", "en"):
        assert installs(read(path(repo, "02", lang)).cells) == ("main", "main")
    assert "/blob/v2.3.4/notebooks/en/01_demo.ipynb)" in (repo / "README.md").read_text(encoding="utf-8")


def test_a_setup_cell_that_printed_something_is_run_again(repo):
    set_version(repo, "9.9.8")  # a release, whatever the checkout's own version: the next build changes the cell
    (repo / "CHANGELOG.md").write_text("# Changelog\n\n## 9.9.8 (2027-01-02)\n", encoding="utf-8")
    assert nbt.main(["build"]) == 0
    fake_execute(path(repo, "01", "en"))  # the stand-in kernel gives the setup cell an output
    set_version(repo, "9.9.9.dev1")
    nbt.build(["01"], verbose=False)
    assert read(path(repo, "01", "en")).cells[1].execution_count is None


@pytest.mark.parametrize("version", ["1.0", "1.0.0rc1", "1.0.0.post1", "v1.0.0", "1.0.0.dev"])
def test_a_version_that_is_neither_a_release_nor_a_development_one_is_refused(version):
    with pytest.raises(ValueError, match="neither a release"):
        nbt.git_ref(version)


def test_positional_ids_count_as_stale(repo):
    p = path(repo, "01", "es")
    nb = read(p)
    for i, cell in enumerate(nb.cells):
        cell.id = f"es-01-{i:03d}"
    nbformat.write(nb, p)
    assert nbt.main(["check", "01"]) == 1
    assert nbt.build(["01"], verbose=False) == [p]


def test_run_executes_only_the_pair_named(repo, monkeypatch):
    ran = []
    monkeypatch.setattr(nbt, "execute", lambda p: ran.append(p.relative_to(repo).as_posix()) or 0.0)
    assert nbt.main(["run", "02"]) == 0
    assert ran == ["notebooks/es/02_otro.ipynb", "notebooks/en/02_other.ipynb"]


# --------------------------------------------------------------------------- import


def edit_notebook(repo: Path, number: str, lang: str, change) -> Path:
    p = path(repo, number, lang)
    nb = read(p)
    change(nb.cells)
    nbformat.write(nb, p)
    return p


def set_source(old: str, new: str):
    def change(cells):
        [cell] = [c for c in cells if c.source == old]
        cell.source = new

    return change


def test_import_markdown_edit_changes_that_language_only(repo):
    p = edit_notebook(repo, "01", "en", set_source("## Goals\n\nEnglish text.", "## Goals\n\nBetter English text."))
    notes = nbt.import_notebook(p)
    assert source_text(repo) == DEMO.replace("English text.", "Better English text.")
    assert any("Spanish" in n for n in notes)


def test_import_shared_code_edit_reaches_both_languages(repo):
    for lang in ("es", "en"):
        fake_execute(path(repo, "01", lang))
    p = edit_notebook(repo, "01", "es", set_source("y = x + 1", "y = 2 * x + 1"))
    assert nbt.main(["import", str(p)]) == 0
    assert source_text(repo) == DEMO.replace("y = x + 1", "y = 2 * x + 1")
    for lang in ("es", "en"):
        code = [c for c in read(path(repo, "01", lang)).cells if c.cell_type == "code"]
        assert code[-1].source == "y = 2 * x + 1" and code[-1].outputs == []
        assert code[1].outputs, "an unchanged cell keeps its outputs"


def test_import_edit_inside_an_es_en_text_changes_that_side(repo):
    p = edit_notebook(
        repo,
        "01",
        "en",
        set_source('x = 1  # one\nprint("hello", x)', 'x = 1  # the number one\nprint("hello world", x)'),
    )
    notes = nbt.import_notebook(p)
    assert 'x = 1  # «uno|the number one»\nprint(«"hola"|"hello world"», x)' in source_text(repo)
    assert any("translate" in n for n in notes)


def test_import_code_edit_around_es_en_texts(repo):
    p = edit_notebook(
        repo, "01", "es", set_source('x = 1  # uno\nprint("hola", x)', 'x = 10  # uno\nprint("hola", x, x)')
    )
    nbt.import_notebook(p)
    assert 'x = 10  # «uno|one»\nprint(«"hola"|"hello"», x, x)' in source_text(repo)


def test_import_deleted_and_moved_cells(repo):
    def change(cells):
        code = [c for c in cells if c.source == "y = x + 1"][0]
        cells.remove(code)
        cells.insert(2, code)  # before the goals
        cells.remove([c for c in cells if c.source == "End."][0])

    nbt.import_notebook(edit_notebook(repo, "01", "en", change))
    src = nbt.parse_source(repo / "notebooks" / "source" / "01_demo.md")
    assert [t["en"] for _, t in src.cells] == [
        "y = x + 1",
        "## Goals\n\nEnglish text.",
        'x = 1  # one\nprint("hello", x)',
    ]
    assert "Fin." not in source_text(repo)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda cells: setattr(cells[0], "source", cells[0].source + " extra"), r"title cell\) is generated"),
        (lambda cells: setattr(cells[1], "source", cells[1].source + "\nprint(1)"), "SETUP_CODE"),
        (lambda cells: cells.insert(3, nbformat.v4.new_code_cell("w = 0")), "one language only"),
        (set_source('x = 1  # one\nprint("hello", x)', "x = 1  # one\nlog(x)"), "together with the code"),
        (
            set_source('x = 1  # one\nprint("hello", x)', 'x = 1  # one\nprint("hel" + "lo", x)'),
            "differ outside comments",
        ),
        (set_source("End.", "![new](attachment:new.png)"), "image 'new.png' is new"),
    ],
    ids=["title", "setup", "new cell", "straddles a pair", "code in one language", "new image"],
)
def test_import_refuses_what_it_cannot_map(repo, change, reason):
    before = source_text(repo)
    p = edit_notebook(repo, "01", "en", change)
    with pytest.raises(nbt.CannotImport, match=reason):
        nbt.import_notebook(p)
    assert source_text(repo) == before


def test_import_refuses_when_the_other_language_was_edited_too(repo, capsys):
    edit_notebook(repo, "01", "es", set_source("Fin.", "Final."))
    p = edit_notebook(repo, "01", "en", set_source("End.", "The end."))
    assert nbt.main(["import", str(p)]) == 1
    assert "one language at a time" in capsys.readouterr().err
    assert source_text(repo) == DEMO


@pytest.mark.slow
def test_run_executes_with_a_kernel_and_a_rebuild_keeps_what_it_stored(repo):
    edit_source(repo, "z = 3", "z = 3\nprint(z * 2)", name="02_other.md")
    assert nbt.main(["run", "02"]) == 0
    for lang in ("es", "en"):
        cells = read(path(repo, "02", lang)).cells
        assert [o.text for o in cells[-1].outputs] == ["6\n"] and cells[-1].execution_count == 2
    edit_source(
        repo,
        "print(z * 2)\n```",
        "print(z * 2)\n```\n\n<!-- code -->\n```python\nprint(z + 1)\n```",
        name="02_other.md",
    )
    nbt.build(["02"], verbose=False)
    cells = read(path(repo, "02", "en")).cells
    assert [o.text for o in cells[-2].outputs] == ["6\n"] and cells[-1].outputs == []


TRAINING = """<!-- meta -->
es: entrenar | Entrenar
en: training | Training

<!-- code -->
```python
from minitransformer.data import ReverseDigits
from minitransformer.model import Transformer, TransformerConfig
from minitransformer.train import train

task = ReverseDigits(1, 3)
config = TransformerConfig(src_vocab_size=14, tgt_vocab_size=14, d_model=16, n_heads=2, d_ff=32, n_layers=1,
                           dropout=0.0, max_len=16)
history = train(Transformer(config), lambda: task.train_batch(4), 60, warmup=2, desc=«"invertir"|"reverse"»)
```
"""


@pytest.mark.slow
def test_run_stores_the_finished_progress_bar(repo):
    # The bar is a widget while it runs; the stored notebook keeps its text at the end of the
    # run (100 %, the last loss in the notebook's language), without a widget view nobody can restore.
    (repo / "notebooks" / "source" / "03_training.md").write_text(TRAINING, encoding="utf-8")
    assert nbt.main(["run", "03"]) == 0
    for lang, label, loss in (("es", "invertir", "pérdida"), ("en", "reverse", "loss")):
        (output,) = read(path(repo, "03", lang)).cells[-1].outputs
        assert list(output.data) == ["text/plain"]
        assert re.fullmatch(
            rf"{label}: 100%\|█+\| 60/60 \[[\d:]+<00:00, {loss}=\d+[.,]\d{{3}}\]", output.data["text/plain"]
        )
        assert ("," in output.data["text/plain"].split("=")[-1]) == (lang == "es")


def test_contributing_shows_the_loop_with_commands_that_exist():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    loop = text[text.index("The edit loop") :].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line for line in loop.splitlines() if line.strip()]
    assert len(lines) == 5, loop
    commands = [line.split()[2] for line in lines if line.startswith("python tools/notebooks.py")]
    assert commands == ["import", "run"]  # both exercised by the tests above


@pytest.mark.parametrize(
    "es,en,same",
    [
        # the expressions inside an f-string are code (Python 3.10 and 3.11 see one string token)
        ('print(f"{decimal_commas(name):>21}: válidas")', 'print(f"{name:>21}: valid")', False),
        ('print(f"{x + 1} pasos")', 'print(f"{x} steps")', False),
        ('print(f"{x!r}")', 'print(f"{x}")', False),
        # their text, the strings inside them and their layout may be translated
        ('print(f"{x} pasos")', 'print(f"{x} steps")', True),
        ("print(f\"{'capa':>12s}\")", "print(f\"{'layer':>12s}\")", True),
        ('print(f"{x:>14}")', 'print(f"{x:>12}")', True),
        # adjacent strings are one run, however each language splits it
        ('print(f"{a} pasos, " f"{b} hilos")', 'print(f"{a} steps, {b} threads")', True),
        ('print(f"{a} y " "texto")', 'print(f"{a} and text")', True),
        ('print("texto")', 'print(f"text")', True),
        ('print("texto", x)', 'print(f"text", y)', False),
    ],
)
def test_code_skeleton_sees_the_code_inside_f_strings(es, en, same):
    assert (nbt.code_skeleton(es) == nbt.code_skeleton(en)) is same
