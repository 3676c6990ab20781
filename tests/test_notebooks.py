"""Notebooks: code cells converted as one program and split back; everything else (markdown,
outputs, metadata, IPython lines, the JSON layout) left as it was."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import jsonschema
import pytest

from conftest import FIXTURES, REPO
from estimator2keras._notebook import rewrite_notebook
from estimator2keras.cli import main

CANONICAL = (FIXTURES / "seed_mirrored_linear" / "before.py").read_text()
SARIF_SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
REPORT_SCHEMA = json.loads((REPO / "docs" / "report.schema.json").read_text())


def code_cell(text: str, outputs=(), as_string: bool = False) -> dict:
    source = text if as_string else text.splitlines(keepends=True)
    return {"cell_type": "code", "execution_count": 3, "metadata": {"tags": ["t"]}, "outputs": list(outputs), "source": source}


def notebook(*cells, language: str = "python") -> dict:
    return {
        "cells": list(cells),
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": language, "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def dump(nb: dict, indent=1) -> bytes:
    """As Jupyter writes notebooks (nbformat: indent 1, sorted keys, UTF-8)."""
    return (json.dumps(nb, indent=indent, sort_keys=True, ensure_ascii=False) + "\n").encode()


MARKDOWN = {"cell_type": "markdown", "metadata": {}, "source": ["# Träning\n", "An Estimator program, in cells."]}
OUTPUT = {"name": "stdout", "output_type": "stream", "text": ["loss = 0.1\n"]}


def canonical_cells(magic_in_first: bool = True) -> list[dict]:
    parts = CANONICAL.split("\n\n\n")
    first = parts[0]
    if magic_in_first:
        first = first.replace("import tensorflow as tf", "%matplotlib inline\n!pip install -q tensorflow==2.15\nimport tensorflow as tf")
    cells = [MARKDOWN, code_cell(first)]
    cells += [code_cell(p.strip("\n"), [OUTPUT]) for p in parts[1:-1]]
    cells.append(code_cell(parts[-1].strip("\n"), [OUTPUT], as_string=True))
    return cells


def source_of(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def test_notebook_converts_across_cells_and_keeps_everything_else(rules):
    original = notebook(*canonical_cells())
    data = dump(original)
    result = rewrite_notebook(data, "nb.ipynb", rules)
    assert result.status == "converted"
    new = json.loads(result.new)
    assert result.new == dump(new)  # the same JSON layout as read
    assert len(new["cells"]) == len(original["cells"])
    for before, after in zip(original["cells"], new["cells"]):
        assert {k: v for k, v in before.items() if k != "source"} == {k: v for k, v in after.items() if k != "source"}
        assert type(before["source"]) is type(after["source"])
    assert new["cells"][0] == MARKDOWN and new["metadata"] == original["metadata"]
    first = source_of(new["cells"][1])
    assert "\n%matplotlib inline\n!pip install -q tensorflow==2.15\nimport tensorflow as tf\n" in first
    assert "tf.config.set_logical_device_configuration" in first
    assert "def _build_model():" in source_of(new["cells"][4])
    assert source_of(new["cells"][-1]).endswith("model.evaluate(_eval_input_fn())")  # no newline added
    assert not source_of(new["cells"][-1]).endswith("\n")
    # The cells hold the very program a .py file would become (its notes in the cells they explain).
    after = _without_notes((FIXTURES / "seed_mirrored_linear" / "after.py").read_text())
    for cell in new["cells"][2:]:
        assert _without_notes(source_of(cell)) in after
    again = rewrite_notebook(result.new, "nb.ipynb", rules)
    assert again.status == "unchanged" and again.new == result.new


def test_findings_name_the_cell_and_the_line_in_it(rules):
    result = rewrite_notebook(dump(notebook(*canonical_cells())), "nb.ipynb", rules)
    by_code = {f.code: f for f in result.findings}
    estimator = by_code["E2K001"]
    assert estimator.cell == 6 and estimator.format().startswith("nb.ipynb:cell 6:6:13: E2K001")
    lines = dump(notebook(*canonical_cells())).decode().splitlines()
    assert "estimator = tf1.estimator.Estimator(" in lines[estimator.file_line - 1]


def test_ipython_line_using_a_converted_name_leaves_the_notebook_alone(rules):
    cells = canonical_cells()
    last = source_of(cells[-1]).replace("tf1.estimator.train_and_evaluate(", "%time tf1.estimator.train_and_evaluate(")
    cells[-1] = code_cell(last)
    data = dump(notebook(*cells))
    result = rewrite_notebook(data, "nb.ipynb", rules)
    assert result.new == data and result.status == "partial"
    (finding,) = result.findings
    assert finding.code == "E2K904" and finding.cell == len(cells) and "`estimator`" in finding.message


def test_non_python_cells_and_kernels_are_left_alone(rules):
    cells = canonical_cells(magic_in_first=False)
    cells.insert(2, code_cell("%%bash\necho estimator > /dev/null\nif [ 1 ]; then echo; fi"))
    result = rewrite_notebook(dump(notebook(*cells)), "nb.ipynb", rules)
    assert result.status == "converted"
    assert json.loads(result.new)["cells"][2] == cells[2]
    r_kernel = dump(notebook(*canonical_cells(), language="R"))
    assert rewrite_notebook(r_kernel, "nb.ipynb", rules).status == "unchanged"


def test_writefile_cell_with_estimator_code_is_reported(rules):
    cells = [code_cell("%%writefile trainer.py\n" + CANONICAL)]
    data = dump(notebook(*cells))
    result = rewrite_notebook(data, "nb.ipynb", rules)
    assert result.new == data and [f.code for f in result.findings] == ["E2K904"]


def test_timed_cell_is_converted_below_its_magic(rules):
    cells = canonical_cells(magic_in_first=False)
    cells[-1] = code_cell("%%time\n" + source_of(cells[-1]))
    result = rewrite_notebook(dump(notebook(*cells)), "nb.ipynb", rules)
    assert result.status == "converted"
    assert source_of(json.loads(result.new)["cells"][-1]).startswith("%%time\n")


def test_captured_timed_cell_is_converted_below_its_magics(rules):
    cells = canonical_cells(magic_in_first=False)
    cells[-1] = code_cell("%%capture captured\n\n%%time\n" + source_of(cells[-1]))
    result = rewrite_notebook(dump(notebook(*cells)), "nb.ipynb", rules)
    assert result.status == "converted"
    assert source_of(json.loads(result.new)["cells"][-1]).startswith("%%capture captured\n\n%%time\n# Two virtual CPU")


def test_compact_notebook_keeps_its_layout(rules):
    compact = json.dumps(notebook(*canonical_cells()), separators=(",", ":")).encode()
    result = rewrite_notebook(compact, "nb.ipynb", rules)
    assert result.status == "converted" and b"\n" not in result.new


@pytest.mark.parametrize(
    "data,message",
    [
        (b'{"cells": [ estimator', "cannot read notebook"),
        (b'{"estimator": 1}', "not a Jupyter notebook"),
    ],
)
def test_broken_notebooks_are_errors_and_untouched(rules, data, message):
    result = rewrite_notebook(data, "nb.ipynb", rules)
    assert result.status == "error" and result.new == data
    assert message in result.findings[0].message


def test_cli_finds_notebooks_diffs_them_by_cell_and_sarif_points_into_the_file(tmp_path, capsys, monkeypatch):
    (tmp_path / "train.ipynb").write_bytes(dump(notebook(*canonical_cells())))
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "train-checkpoint.ipynb").write_bytes(dump(notebook(*canonical_cells())))
    monkeypatch.chdir(tmp_path)
    assert main(["rewrite", "--diff", "-j", "1", "."]) == 1
    out = capsys.readouterr().out
    assert "--- a/train.ipynb:cell 5" in out and "+def _build_model():" in out and "checkpoint" not in out
    assert main(["rewrite", "--check", "-j", "1", "--format", "sarif", "."]) == 1
    log = json.loads(capsys.readouterr().out)
    jsonschema.validate(log, SARIF_SCHEMA)
    result = next(r for r in log["runs"][0]["results"] if r["ruleId"] == "E2K001")
    line = result["locations"][0]["physicalLocation"]["region"]["startLine"]
    assert "estimator = tf1.estimator.Estimator(" in (tmp_path / "train.ipynb").read_text().splitlines()[line - 1]
    assert main(["rewrite", "--check", "-j", "1", "--format", "json", "."]) == 1
    report = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator(REPORT_SCHEMA).validate(report)
    assert {3, 4, 6} <= {f["cell"] for f in report["files"][0]["findings"]}
    assert main(["rewrite", "-j", "1", "--quiet", "."]) == 1
    assert main(["rewrite", "--check", "-j", "1", "--quiet", "."]) == 0


# -- IPython syntax, read as IPython reads it ----------------------------------------------
# Each case: a cell, and the lines (first, last; 1-based) e2k keeps out of the program as
# IPython syntax. "error": the cell does not parse even so (IPython fails on it too).
IPYTHON_CELLS = [
    ("!pip install -q tensorflow==1.15", [(1, 1)]),
    ("!pip install -q tensorflow==1.15 \\\n    tensorflow-datasets \\\n    pandas\nimport pandas as pd", [(1, 3)]),
    ("!!ls\n?\n??", [(1, 1), (2, 2), (3, 3)]),
    ("files = !ls *.csv\nprint(files)", [(1, 1)]),
    ("files=!ls \\\n  data", [(1, 2)]),
    ("home = %env HOME", [(1, 1)]),
    ("%matplotlib inline\n%load_ext tensorboard\nimport tensorflow as tf", [(1, 1), (2, 2)]),
    ("try:\n  # %tensorflow_version only exists in Colab.\n  %tensorflow_version 1.x\nexcept Exception:\n  pass",
     [(3, 3)]),
    ("if True:\n    !echo a \\\n      b\n    x = 1", [(2, 3)]),
    ("tf.estimator.Estimator?", [(1, 1)]),
    ("x = 1\ntf.estimator.Estimator.train??", [(2, 2)]),
    ("features[0]?\n?tf.estimator\n??tf.estimator", [(1, 1), (2, 2), (3, 3)]),
    (",print a b\n;print a b\n/print 1 2", [(1, 1), (2, 2), (3, 3)]),
    # Not IPython syntax: inside strings and comments, inside brackets, operators.
    ('!ls\ndoc = """\n!not a command\n%not a magic\n"""\ns = "x = !no"  # !no\nr = (7\n     % 3)\nq = 7 % 3\nt = a != b',
     [(1, 1)]),
    ("!echo don't\nx = 1", [(1, 1)]),
    ("%%time\n!ls\nx = 1", [(1, 1), (2, 2)]),
    ("\n%%capture\n\n%%time\nx = 1", [(2, 2), (4, 4)]),
    ("pip install -q tensorflow==1.15", [(1, 1)]),  # automagic: a cell of one line
    ("\ncd models/research", [(2, 2)]),
    ("    x = 1\n    !ls\n    y = 2", [(2, 2)]),  # IPython removes the indentation of a cell
    ("pip install -q pandas\n", [(1, 1)]),
    ("pip install -q pandas\n\n", "error"),  # not one line: no automagic
    ("pip install -q pandas\nimport pandas", "error"),
    ("print 'hello'", "error"),
    ("a = b = !ls", "error"),
    ("f(x)?", "error"),
    ("obj? # why", "error"),
]


def hidden_ranges(text: str):
    from estimator2keras._notebook import _read_cell

    cell = _read_cell(0, text, 0)
    if cell.error is not None:
        return "error"
    return [(h.line, h.line + h.text.count("\n")) for h in cell.hidden]


@pytest.mark.parametrize("text,expected", IPYTHON_CELLS, ids=range(len(IPYTHON_CELLS)))
def test_ipython_syntax_is_found_as_ipython_finds_it(text, expected):
    assert hidden_ranges(text) == expected


@pytest.mark.parametrize("text", ["%%bash\necho estimator", "%%writefile trainer.py\nimport tensorflow", "  %%html\n  <b/>"])
def test_cell_magics_that_are_not_python_stay_out_of_the_program(text):
    from estimator2keras._notebook import _read_cell

    assert not _read_cell(0, text, 0).python


def test_assignments_from_shell_and_magics_bind_their_names_in_the_program():
    from estimator2keras._notebook import _read_cell

    cell = _read_cell(0, "files = !ls *.csv\nhome = %env HOME\nprint(files, home)", 0)
    assert [line for line, _ in cell.lines] == [
        "files = get_ipython().getoutput('ls *.csv')  # e2k-ipython 0",
        "home = get_ipython().run_line_magic('env', 'HOME')  # e2k-ipython 1",
        "print(files, home)",
    ]


@pytest.mark.parametrize("text,expected", IPYTHON_CELLS, ids=range(len(IPYTHON_CELLS)))
def test_ipython_itself_reads_these_cells_the_same_way(text, expected):
    """Where IPython is installed: the Python e2k's reading gives, each piece of IPython
    syntax replaced by what IPython makes of it alone, is what IPython makes of the cell."""
    pytest.importorskip("IPython")

    from IPython.core.interactiveshell import InteractiveShell

    from estimator2keras._notebook import _PLACEHOLDER_LINE, _read_cell

    shell = InteractiveShell.instance()
    cell = _read_cell(0, text, 0)
    if expected == "error":
        with pytest.raises(SyntaxError):
            compile(shell.transform_cell(text), "<cell>", "exec")
        return
    out = []
    for line, _ in cell.lines:
        match = _PLACEHOLDER_LINE.match(line)
        if match:
            hidden = cell.hidden[int(match.group("k"))]
            if hidden.first_line_only:
                continue
            line = match.group("indent") + shell.transform_cell(hidden.text.lstrip(" \t")).rstrip("\n")
        out.append(line)
    magics = [h for h in cell.hidden if h.first_line_only]
    ours = "\n".join(out).strip("\n")
    theirs = shell.transform_cell(text)
    for magic in magics:  # run_cell_magic('time', '', body): the body is read as a cell
        name = magic.text.strip()[2:]
        prefix = f"get_ipython().run_cell_magic({name!r}, '', "
        assert theirs.startswith(prefix)
        theirs = shell.transform_cell(ast.literal_eval(theirs[len(prefix) : -2]))
    assert ours == theirs.strip("\n").replace("get_ipython().set_next_input('x = 1');", "")


# -- Notebooks as Jupyter runs them ---------------------------------------------------------
def tutorial_cells() -> list[dict]:
    """The canonical program as TensorFlow's tutorials laid notebooks out in 2019-2020: pip
    in a cell of its own, Colab's %tensorflow_version in a try, __future__ imports, magics,
    shell output in a variable, help, a timed training cell."""
    parts = [p.strip("\n") for p in CANONICAL.split("\n\n\n")]
    imports = parts[0].split('"""', 2)[2].strip("\n")
    data, imports = imports.split("\n\n", 1)[1], imports.split("\n\n", 1)[0]
    return [
        MARKDOWN,
        code_cell("%%capture\n!pip install -q tensorflow==1.15 \\\n    tensorflow-datasets==1.3.2"),
        code_cell("try:\n  # %tensorflow_version only exists in Colab.\n  %tensorflow_version 1.x\nexcept Exception:\n  pass"),
        code_cell("from __future__ import absolute_import, division, print_function, unicode_literals\n\n"
                  f"{imports}\n\n%matplotlib inline\n%load_ext tensorboard"),
        code_cell(f"{data}\nlogs = !ls /tmp\nfeatures?"),
        code_cell("pip install -q pandas"),
        code_cell(parts[1], [OUTPUT]),
        code_cell(parts[2]),
        code_cell(parts[3]),
        code_cell("%%time\n" + parts[4], [OUTPUT]),
    ]


def _joined_comments(text: str) -> str:
    """``text`` with each run of comment lines on one line."""
    return re.sub(r"(#[^\n]*)\n[ \t]*# ", r"\1 ", text)


def _without_notes(text: str) -> str:
    """``text`` with its comments joined (``_joined_comments``) and without the notes e2k lists
    in a script's header, there or where a notebook keeps them, in the cells they explain."""
    from estimator2keras._notes import HEADER
    from estimator2keras._registry import RuleSet

    notes = {f"# {note}" for note in RuleSet.load().notes()}
    lines = text.split("\n")
    if HEADER in lines:
        start = end = lines.index(HEADER)
        while end + 1 < len(lines) and lines[end + 1].startswith(("# - ", "#   ")):
            end += 1
        lines[start:end + 1] = []
    lines = _joined_comments("\n".join(lines)).split("\n")
    return "\n".join(line for line in lines if line.strip() not in notes).strip("\n")


def converted_parts() -> list[str]:
    """The canonical program's conversion, in the parts the cells hold."""
    after = (FIXTURES / "seed_mirrored_linear" / "after.py").read_text()
    return [p.strip("\n") for p in after.split("\n\n\n")]


def test_tutorial_notebook_converts_around_its_ipython_syntax(rules):
    cells = tutorial_cells()
    result = rewrite_notebook(dump(notebook(*cells)), "nb.ipynb", rules)
    assert result.status == "partial", [f.format() for f in result.findings]
    new = [source_of(c) for c in json.loads(result.new)["cells"]]
    old = [source_of(c) for c in cells]
    assert new[1:3] == old[1:3] and new[5] == old[5]  # IPython's cells are left as they are
    after = converted_parts()
    # e2k's notes are wrapped at each file's own line length (the notebook's differs from the
    # script's), and the script lists in its header those the notebook keeps in its cells.
    new, after = [_without_notes(n) for n in new], [_without_notes(a) for a in after]
    assert new[3] == (
        "from __future__ import absolute_import, division, print_function, unicode_literals\n\n"
        f"{after[0].split(chr(10) + chr(10) + 'features =')[0].split(chr(34) * 3, 2)[2].strip()}\n\n"
        "%matplotlib inline\n%load_ext tensorboard"
    )
    assert new[4].endswith("\nlogs = !ls /tmp\nfeatures?") and new[4].startswith("features = [[1., 1.5]")
    assert new[6:9] == after[1:4]
    assert new[9] == "%%time\n" + after[4]
    # The lines that pin TensorFlow 1 are the user's to change.
    manual = [(f.cell, f.line, f.message.split(";")[0]) for f in result.manual]
    assert manual == [
        (2, 2, "this line installs or selects TensorFlow 1 (`tensorflow==1.15`)"),
        (3, 3, "this line installs or selects TensorFlow 1 (`tensorflow_version 1.x`)"),
    ]
    again = rewrite_notebook(result.new, "nb.ipynb", rules)
    assert again.status == "unchanged" and again.new == result.new


def test_indented_cell_converts_and_keeps_its_indentation(rules):
    cells = canonical_cells(magic_in_first=False)
    cells[-1] = code_cell("".join("  " + line for line in source_of(cells[-1]).splitlines(keepends=True)))
    result = rewrite_notebook(dump(notebook(*cells)), "nb.ipynb", rules)
    assert result.status == "converted"
    assert source_of(json.loads(result.new)["cells"][-1]) == "".join(
        "  " + line if line.strip() else line for line in converted_parts()[4].splitlines(keepends=True)
    )


def with_cell(cells: list[dict], position: int, text: str) -> list[dict]:
    return cells[:position] + [code_cell(text)] + cells[position:]


def test_cell_that_does_not_parse_is_left_alone_and_the_rest_converts(rules):
    plain = rewrite_notebook(dump(notebook(*canonical_cells())), "nb.ipynb", rules)
    cells = with_cell(canonical_cells(), 3, "# Python 2, as many 2018 notebooks still had it\nprint 'features:', len(features)")
    result = rewrite_notebook(dump(notebook(*cells)), "nb.ipynb", rules)
    assert result.status == "partial"
    new = json.loads(result.new)["cells"]
    assert new[3] == cells[3]
    assert [source_of(c) for c in new[:3] + new[4:]] == [source_of(c) for c in json.loads(plain.new)["cells"]]
    (finding,) = [f for f in result.findings if f.code == "E2K904"]
    assert finding.kind == "manual" and (finding.cell, finding.line, finding.col) == (4, 2, 1)
    assert finding.message.startswith("cannot parse cell: Missing parentheses in call to 'print'")
    assert finding.message.endswith("the cell is left as it was, and the other cells are converted without it")
    # The findings of the other cells still name their own cells.
    assert {f.cell for f in result.findings if f.code == "E2K001"} == {7}


def test_cell_that_does_not_parse_and_uses_a_converted_name_is_named(rules):
    cells = with_cell(canonical_cells(), 6, "print 'model in', estimator.model_dir")
    result = rewrite_notebook(dump(notebook(*cells)), "nb.ipynb", rules)
    assert result.status == "partial" and json.loads(result.new)["cells"][6] == cells[6]
    (finding,) = [f for f in result.findings if f.code == "E2K904"]
    assert finding.cell == 7 and "; it uses `estimator`, which the conversion changes: convert it by hand" in finding.message


def test_cell_that_does_not_parse_and_may_bind_a_name_converted_code_uses_stops_the_conversion(rules):
    # The conversion, made without this cell, could not know which `_input_fn` training reads.
    cells = with_cell(canonical_cells(), 5, "def _input_fn():\n  print 'reading'\n  return dataset")
    data = dump(notebook(*cells))
    result = rewrite_notebook(data, "nb.ipynb", rules)
    assert result.status == "partial" and result.new == data
    (finding,) = result.findings
    assert (finding.code, finding.cell, finding.line, finding.col) == ("E2K904", 6, 2, 3)
    assert "may bind `_input_fn`, which converted code uses" in finding.message
    assert finding.message.endswith("the notebook is left as it was")


def test_cell_libcst_cannot_parse_is_left_out_like_one_python_cannot(rules, monkeypatch):
    import estimator2keras._notebook as nb
    from estimator2keras._engine import rewrite_source

    def picky(source: bytes, path: str, rules):  # as if libcst refused what CPython reads
        lines = source.decode().splitlines()
        if "x = 'libcst says no'" in lines:
            finding = nb.Finding(path, lines.index("x = 'libcst says no'") + 1, 5, "E2K900", "cannot parse: no", "error")
            return nb.FileResult(path, "error", source, source, [finding])
        return rewrite_source(source, path, rules)

    monkeypatch.setattr(nb, "rewrite_source", picky)
    cells = with_cell(canonical_cells(), 3, "y = 1\nx = 'libcst says no'")
    result = rewrite_notebook(dump(notebook(*cells)), "nb.ipynb", rules)
    assert result.status == "partial" and json.loads(result.new)["cells"][3] == cells[3]
    (finding,) = [f for f in result.findings if f.code == "E2K904"]
    assert (finding.cell, finding.line, finding.col) == (4, 2, 5) and finding.message.startswith("cannot parse cell: no;")


def test_placeholders_come_back_verbatim_where_the_conversion_put_them():
    from estimator2keras._notebook import _build, _split

    cells = [code_cell("x = 1\n!pip install a \\\n  b\nfiles = !ls\n%%time")]
    program = _build(cells)
    assert program.source == (
        "x = 1\npass  # e2k-ipython 0\nfiles = get_ipython().getoutput('ls')  # e2k-ipython 1\npass  # e2k-ipython 2\n"
    )
    moved = "with scope():\n    pass  # e2k-ipython 0\n    files = get_ipython().getoutput('ls')  # e2k-ipython 1\npass  # e2k-ipython 2\n"
    texts, lost, _ = _split(program, moved)
    assert texts == {0: "with scope():\n    !pip install a \\\n  b\n    files = !ls\n%%time"} and lost is None
    renamed = program.source.replace("files =", "names =")
    texts, lost, why = _split(program, renamed)
    assert texts is None and lost.line == 4 and why == "the conversion would change this IPython line"
    texts, lost, why = _split(program, program.source.replace("pass  # e2k-ipython 2\n", ""))
    assert texts is None and lost.line == 5 and why == "the conversion would drop this IPython line"


@pytest.mark.parametrize(
    "line,pinned",
    [
        ("!pip install -q tensorflow==1.15", "tensorflow==1.15"),
        ("!pip install tensorflow-gpu==1.14.0 pandas", "tensorflow-gpu==1.14.0"),
        ("!pip install 'tensorflow>=1.13,<2'", "tensorflow>=1.13,<2"),
        ("%tensorflow_version 1.x", "tensorflow_version 1.x"),
        ("!pip install -q tensorflow==2.15", None),
        ("!pip install tensorflow-datasets==1.3.2", None),
        ("%tensorflow_version 2.x", None),
    ],
)
def test_lines_that_pin_tensorflow_1_are_recognised(line, pinned):
    from estimator2keras._notebook import _selects_tf1

    assert _selects_tf1(line) == pinned


def test_cli_reports_a_cell_that_does_not_parse_without_failing_the_run(tmp_path, capsys, monkeypatch):
    cells = with_cell(canonical_cells(), 3, "print 'hello'")
    (tmp_path / "train.ipynb").write_bytes(dump(notebook(*cells)))
    monkeypatch.chdir(tmp_path)
    assert main(["rewrite", "--check", "-j", "1", "."]) == 1
    out = capsys.readouterr().out
    assert "train.ipynb:cell 4:1:1: E2K904 cannot parse cell: Missing parentheses" in out
    assert main(["rewrite", "-j", "1", "--quiet", "."]) == 1
    assert source_of(json.loads((tmp_path / "train.ipynb").read_text())["cells"][3]) == "print 'hello'"


CORPUS = REPO.parent / "shared" / "corpus" / "tensorflow__docs" / "site" / "en" / "tutorials" / "estimator"


@pytest.mark.skipif(not CORPUS.is_dir(), reason="TensorFlow's tutorials (../shared/corpus) are not here")
@pytest.mark.parametrize("name", ["premade.ipynb", "linear.ipynb"])
def test_tensorflow_tutorial_notebooks_are_read_as_jupyter_runs_them(tmp_path, rules, name):
    """TensorFlow's own Estimator tutorials, and the same with the IPython syntax such
    notebooks had in 2019 and a cell of Python 2: none is an error for its syntax."""
    data = (CORPUS / name).read_bytes()
    tutorial = json.loads(data)
    for cells in (tutorial["cells"], with_cell(with_cell(with_cell(tutorial["cells"], 1, "!pip install -q tensorflow==1.15 \\\n  pandas"), 2, "try:\n  %tensorflow_version 1.x\nexcept Exception:\n  pass"), 3, "print 'TF', tf.__version__")):
        source = dump({**tutorial, "cells": cells})
        (tmp_path / name).write_bytes(source)
        result = rewrite_notebook(source, name, rules)
        assert result.status in ("converted", "partial")
        assert not [f for f in result.findings if f.code == "E2K900" or f.kind == "error"]
        assert all(f.message.startswith(("cannot parse cell: Missing parentheses", "this line installs"))
                   for f in result.findings if f.code == "E2K904")


def test_a_notebook_that_only_names_an_estimator_api_reaches_the_check_for_code_left(rules):
    # `TPUEstimator` alone is no keyword of a rule, but an Estimator API all the same (E2K905).
    from estimator2keras._notebook import rewrite_notebook

    notebook = {
        "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                   "source": ["import tensorflow as tf\n", "est = tf.compat.v1.estimator.tpu.TPUEstimator\n"]}],
        "metadata": {"kernelspec": {"language": "python", "name": "python3"}, "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 4,
    }
    result = rewrite_notebook(json.dumps(notebook).encode(), "tpu.ipynb", rules)
    assert result.status == "partial" and [f.code for f in result.findings] == ["E2K905"]


@pytest.mark.parametrize("magic", ["%%time", "%%timeit -n 1", "%%capture"])
def test_a_timing_magic_is_not_read_as_the_name_the_conversion_adds(rules, magic):
    # The converted code imports `time` (the checkpoints callback): `%%time` names the magic,
    # not Python's `time`; the notebook was left as it was (E2K904) for it.
    program = CANONICAL.replace("estimator = tf1.estimator.Estimator(model_fn=_model_fn, config=config)",
                                "estimator = tf1.estimator.Estimator(model_fn=_model_fn, config=config, model_dir='/tmp/m')")
    assert "model_dir='/tmp/m'" in program
    parts = program.split("\n\n\n")
    cells = [code_cell(p.strip("\n")) for p in parts]
    train = next(i for i, c in enumerate(cells) if "train_and_evaluate(" in source_of(c))
    lines = source_of(cells[train]).splitlines()
    at = next(i for i, line in enumerate(lines) if "train_and_evaluate(" in line)
    if magic.startswith("%%"):
        lines = [*lines[:at], "", magic, lines[at]]  # its own cell
        cells[train] = code_cell("\n".join(lines[:at]))
        cells.insert(train + 1, code_cell("\n".join(lines[at + 1:])))
    else:
        lines[at] = magic + " " + lines[at]
        cells[train] = code_cell("\n".join(lines))
    result = rewrite_notebook(dump(notebook(*cells)), "nb.ipynb", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "import time" in result.new.decode()


def test_a_line_that_interpolates_a_name_the_conversion_changes_still_stops_it(rules):
    cells = canonical_cells()
    cells.append(code_cell("!ls {estimator.model_dir}"))
    result = rewrite_notebook(dump(notebook(*cells)), "nb.ipynb", rules)
    assert result.status == "partial"
    assert any("uses `estimator`" in f.message for f in result.findings), [f.message for f in result.findings]


def test_an_evaluation_a_cell_shows_is_still_a_dict(rules):
    # `est.evaluate(eval_fn)` alone in a cell shows the Estimator's dict of metrics; Keras's
    # evaluate returns a list unless asked for a dict (a tester's notebook showed a list).
    cells = [
        code_cell("import tensorflow as tf\n\n\n"
                  "def model_fn(features, labels, mode):\n"
                  "    logits = tf.compat.v1.layers.dense(features['x'], 1)\n"
                  "    loss = tf.compat.v1.losses.mean_squared_error(labels, logits)\n"
                  "    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize("
                  "loss, tf.compat.v1.train.get_global_step())\n"
                  "    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)\n\n\n"
                  "def eval_fn():\n"
                  "    return tf.data.Dataset.from_tensor_slices(({'x': [[1.0]]}, [[2.0]])).batch(1)\n"),
        code_cell("est = tf.estimator.Estimator(model_fn)\nest.train(eval_fn, steps=1)"),
        code_cell("est.evaluate(eval_fn)"),
    ]
    result = rewrite_notebook(dump(notebook(*cells)), "nb.ipynb", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    shown = json.loads(result.new)["cells"][2]
    assert source_of(shown) == "model.evaluate(eval_fn(), return_dict=True)"
