"""Notebooks: code cells converted as one program and split back; everything else (markdown,
outputs, metadata, IPython lines, the JSON layout) left as it was."""
from __future__ import annotations

import json
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
    # The cells hold the very program a .py file would become.
    after = (FIXTURES / "seed_mirrored_linear" / "after.py").read_text()
    for cell in new["cells"][2:]:
        assert source_of(cell).strip() in after
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


def test_compact_notebook_keeps_its_layout(rules):
    compact = json.dumps(notebook(*canonical_cells()), separators=(",", ":")).encode()
    result = rewrite_notebook(compact, "nb.ipynb", rules)
    assert result.status == "converted" and b"\n" not in result.new


@pytest.mark.parametrize(
    "data,message",
    [
        (b'{"cells": [ estimator', "cannot read notebook"),
        (dump(notebook(code_cell("import tensorflow as tf\nestimator = (\n"))), "cannot parse cell"),
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
