"""What e2k writes reads as hand-written code: checked over every fixture's exact output.

- No import statement twice, and each import e2k added sits in its section's group
  (standard library, third party, the program's own modules) in isort's order: no import of
  a later section before it, none of an earlier one after it, and at its sorted place when
  the rest of its group is sorted.
- e2k's own notes (comment paragraphs on their own lines that the program did not have)
  are written once per file; ``# e2k: CODE`` marks stay at every place they mark.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import libcst as cst
import pytest

from conftest import FIXTURES
from estimator2keras import _helpers
from estimator2keras._notes import drop_repeated_notes

FUTURE, STDLIB, THIRD_PARTY, LOCAL = range(4)


def _pairs() -> list[tuple[Path, Path, Path]]:
    """(before, after, the program's root) of each converted file of the fixtures."""
    pairs = []
    for case in sorted(FIXTURES.iterdir()):
        if (case / "after.py").is_file():
            pairs.append((case / "before.py", case / "after.py", case))
        elif (case / "after").is_dir():
            for after in sorted((case / "after").rglob("*.py")):
                before = case / "before" / after.relative_to(case / "after")
                pairs.append((before, after, case / "after"))
    return pairs


PAIRS = _pairs()
IDS = [str(after.relative_to(FIXTURES)) for _, after, _ in PAIRS]


def _section(name: str, local: set[str]) -> int:
    top = name.split(".")[0]
    if name.startswith(".") or top in local:
        return LOCAL
    if top == "__future__":
        return FUTURE
    return STDLIB if top in sys.stdlib_module_names else THIRD_PARTY


def _imports(path: Path) -> list[tuple[ast.stmt, str, bool]]:
    """The module-level imports: (node, the module it names, whether a blank line or a
    comment precedes it, that is, whether it starts a group)."""
    lines = path.read_text().splitlines()
    found = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            name = node.names[0].name
        elif isinstance(node, ast.ImportFrom):
            name = "." * node.level + (node.module or "")
        else:
            continue
        above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
        found.append((node, name, not above or above.startswith("#")))
    return found


def _bindings(node: ast.stmt) -> list[tuple]:
    if isinstance(node, ast.Import):
        return [(None, a.name, a.asname) for a in node.names]
    return [("." * node.level + (node.module or ""), a.name, a.asname) for a in node.names]


@pytest.mark.parametrize("before, after, root", PAIRS, ids=IDS)
def test_no_import_written_twice(before, after, root):
    bound = [b for node, _, _ in _imports(after) for b in _bindings(node)]
    assert len(bound) == len(set(bound)), sorted(b for b in bound if bound.count(b) > 1)
    # Nor one name bound to two modules (`import tensorflow as tf` beside `import
    # tensorflow.compat.v1 as tf`): the second would change what the first one's code reads.
    targets: dict[str, set] = {}
    for module, name, alias in bound:
        bound_name = alias or (name if module is not None else name.split(".")[0])
        target = (module, name) if module is not None else (name if alias else bound_name)
        targets.setdefault(bound_name, set()).add(target)
    assert all(len(t) == 1 for t in targets.values()), {n: t for n, t in targets.items() if len(t) > 1}


@pytest.mark.parametrize("before, after, root", PAIRS, ids=IDS)
def test_added_imports_sit_in_their_group(before, after, root):
    local = {p.stem for p in root.iterdir() if p.suffix == ".py" or p.is_dir()}
    own = {ast.dump(node) for node, _, _ in _imports(before)} if before.is_file() else set()
    imports = _imports(after)
    sections = [_section(name, local) for _, name, _ in imports]
    for index, (node, name, _) in enumerate(imports):
        if ast.dump(node) in own:
            continue  # the program's own
        line = ast.unparse(node)
        section = sections[index]
        assert all(s <= section for s in sections[:index]), f"{line}: after an import of a later section"
        assert all(s >= section for s in sections[index + 1:]), f"{line}: before an import of an earlier section"
        # Its group: the imports of its section around it up to a blank line or comment.
        start = index
        while start > 0 and not imports[start][2] and sections[start - 1] == section:
            start -= 1
        end = index + 1
        while end < len(imports) and not imports[end][2] and sections[end] == section:
            end += 1
        others = [(isinstance(n, ast.ImportFrom), m.lower()) for n, m, _ in imports[start:end] if n is not node]
        if others == sorted(others):
            group = [(isinstance(n, ast.ImportFrom), m.lower()) for n, m, _ in imports[start:end]]
            assert group == sorted(group), f"{line}: not at its sorted place in its group"


_OWN_LINE_COMMENT = re.compile(r"^[ \t]*(#.*?)[ \t]*$")


def _paragraphs(text: str) -> list[tuple[str, ...]]:
    paragraphs, current = [], []
    for line in [*text.splitlines(), ""]:
        match = _OWN_LINE_COMMENT.fullmatch(line)
        if match:
            current.append(match.group(1))
        elif current:
            paragraphs.append(tuple(current))
            current = []
    return paragraphs


@pytest.mark.parametrize("before, after, root", PAIRS, ids=IDS)
def test_each_note_written_once(before, after, root):
    users = {c for p in _paragraphs(before.read_text()) for c in p} if before.is_file() else set()
    notes = [p for p in _paragraphs(after.read_text())
             if not any(line in users or line.startswith("# e2k:") for line in p)]
    assert len(notes) == len(set(notes)), sorted({n for n in notes if notes.count(n) > 1})


NOTES = [
    pytest.param("def f():\n    # Note.\n    return 1\n\n\ndef g():\n    # Note.\n    return 2\n", "",
                 "def f():\n    # Note.\n    return 1\n\n\ndef g():\n    return 2\n", id="second-note-dropped"),
    pytest.param("# Mine.\nx = 1\n# Mine.\ny = 2\n", "# Mine.\nx = 1\n",
                 "# Mine.\nx = 1\n# Mine.\ny = 2\n", id="user-comment-kept"),
    pytest.param("# e2k: E2K001 why\nx = 1\n# e2k: E2K001 why\ny = 2\n", "",
                 "# e2k: E2K001 why\nx = 1\n# e2k: E2K001 why\ny = 2\n", id="marks-kept"),
    pytest.param("# Note.\n# About x.\nx = 1\n# Note.\n# About y.\ny = 2\n", "",
                 "# Note.\n# About x.\nx = 1\n# Note.\n# About y.\ny = 2\n", id="site-specific-paragraph-kept"),
    pytest.param("# Note.\nx = 1\n\n# Note.\n# Mine.\ny = 2\n", "# Mine.\n",
                 "# Note.\nx = 1\n\n# Note.\n# Mine.\ny = 2\n", id="note-joined-to-user-comment-kept"),
    pytest.param("x = 1\n\n# Note.\nif x:\n    # Note.\n    y = 2\n", "",
                 "x = 1\n\n# Note.\nif x:\n    y = 2\n", id="nested"),
    # the user's own comment, twice, in a "\r\n" file with a trailing space: the user's, kept
    pytest.param("x = 0\r\n\r\n# mine: \r\nx = 1\r\n\r\n# mine: \r\ny = 2\r\n",
                 "x = 0\r\n\r\n# mine: \r\nx = 1\r\n\r\n# mine: \r\ny = 2\r\n",
                 "x = 0\r\n\r\n# mine: \r\nx = 1\r\n\r\n# mine: \r\ny = 2\r\n", id="users-crlf"),
]


@pytest.mark.parametrize("code, source, expected", NOTES)
def test_repeated_note_dropped(code, source, expected):
    module = cst.parse_module(code)
    assert drop_repeated_notes(module, code.encode(), source.encode()).code == expected


# -- comments of removed statements -------------------------------------------------------
REMOVED_COMMENTS = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 4}, [[2.0]] * 4)).batch(2)


def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features["x"], 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


# Training, then evaluation on the same data.

# Running configuration.
run_config = tf.estimator.RunConfig(model_dir="/tmp/styled")
# Create the TrainSpec.
train_spec = tf.estimator.TrainSpec(input_fn, max_steps=2)
eval_spec = tf.estimator.EvalSpec(input_fn, steps=1)
estimator = tf.estimator.Estimator(model_fn, config=run_config)
tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
'''


def test_comments_of_a_removed_statement_go_with_it_and_section_comments_stay(rules):
    """A comment right above a statement that the conversion removes described it ("# Create
    the TrainSpec."): it goes too. One a blank line separates from it is about more than
    that statement and moves on to the next statement that stays."""
    from estimator2keras._engine import rewrite_source

    result = rewrite_source(REMOVED_COMMENTS.encode(), "styled.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert "# Training, then evaluation on the same data." in new
    assert "# Running configuration." not in new and "# Create the TrainSpec." not in new, new



def test_a_model_fns_comments_go_above_the_compile_argument_they_describe(rules):
    """The comment above the loss goes above `loss=`; one above a statement no argument was
    read from (the EstimatorSpec) stays above compile(), not above the argument read next."""
    from estimator2keras._engine import rewrite_source

    source = (
        "import tensorflow as tf\n\n\n"
        "def model_fn(features, labels, mode):\n"
        "    logits = tf.compat.v1.layers.dense(features['x'], 1)\n"
        "    # The loss.\n"
        "    loss = tf.compat.v1.losses.mean_squared_error(labels, logits)\n"
        "    # Plain gradient descent.\n"
        "    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(\n"
        "        loss, tf.compat.v1.train.get_global_step())\n"
        "    # The spec, for every mode.\n"
        "    spec = tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)\n"
        "    return spec\n\n\n"
        "est = tf.estimator.Estimator(model_fn)\n"
        "est.train(lambda: tf.data.Dataset.from_tensor_slices(({'x': [[1.0]]}, [[2.0]])).batch(1), steps=1)\n")
    result = rewrite_source(source.encode(), "p.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert ("    # The spec, for every mode.\n"
            "    model.compile(\n"
            "        # Plain gradient descent.\n"
            "        optimizer=tf.keras.optimizers.SGD(0.1),\n"
            "        # The loss.\n"
            "        loss=tf.keras.losses.MeanSquaredError())\n") in result.new.decode(), result.new.decode()



def test_the_comment_of_a_prediction_goes_with_it_into_predict_step(rules):
    """A statement the predictions are computed with goes to predict_step, and its comment
    with it (it used to be stacked above compile(), orphaned)."""
    from estimator2keras._engine import rewrite_source

    source = (
        "import tensorflow as tf\n\n\n"
        "def model_fn(features, labels, mode):\n"
        "    logits = tf.compat.v1.layers.dense(features['x'], 3)\n\n"
        "    # The predicted class.\n"
        "    classes = tf.argmax(logits, 1)\n"
        "    if mode == tf.estimator.ModeKeys.PREDICT:\n"
        "        return tf.estimator.EstimatorSpec(mode, predictions={'classes': classes})\n"
        "    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)\n"
        "    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(\n"
        "        loss, tf.compat.v1.train.get_global_step())\n"
        "    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)\n\n\n"
        "est = tf.estimator.Estimator(model_fn)\n"
        "est.train(lambda: tf.data.Dataset.from_tensor_slices(({'x': [[1.0]]}, [[2]])).batch(1), steps=1)\n")
    result = rewrite_source(source.encode(), "p.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert new.count("# The predicted class.") == 1, new
    assert ("        logits = self(features, training=False)\n\n"
            "        # The predicted class.\n"
            "        classes = tf.argmax(logits, 1)\n") in new, new


# -- line length, helpers written once, how much is written ---------------------------------
sys.path.insert(0, str(FIXTURES.parent / "benchmarks"))
import emitted_lines  # noqa: E402  (benchmarks/emitted_lines.py: the same figures, printed)

TREES = emitted_lines.trees(FIXTURES)
#: The total after/before line ratio of the converted files over every fixture may not grow
#: past this. 1.3634 at the last change (10,652 lines for 7,813): method_model_fn_trainer (68
#: for 49). Before it, fixtures each writing more than the average: custom_estimator_factory_columns
#: (148 for 85), warm_start_fine_tune (88 for 61), custom_estimator_census_label_table (144 for
#: 94), whose preprocess and input_layer methods spell out what the feature columns did; 1.356
#: when the three most frequent header notes came to fit one line; 1.56 before canned models and
#: their head's metrics had base classes and a helper. Issue 15 aims at 1.1.
RATIO_CEILING = 1.3635


@pytest.mark.parametrize("tree", TREES, ids=[t.name for t in TREES])
def test_no_line_e2k_wrote_is_over_its_files_limit(tree):
    # The limit: the project's, else the file's own longest line, at least 79 (_wrap); the
    # helpers module's, that of the files beside it that import it.
    over = {str(p.after.relative_to(FIXTURES)): emitted_lines.over_limit(p) for p in tree.pairs}
    assert not any(over.values()), {path: lines for path, lines in over.items() if lines}


@pytest.mark.parametrize("tree", TREES, ids=[t.name for t in TREES])
def test_no_helper_is_defined_in_two_files_of_a_tree(tree):
    where: dict[str, list[str]] = {}
    for pair in tree.pairs:
        own = set()
        if pair.before is not None and pair.before.is_file():
            own = {n.name for n in ast.parse(pair.before.read_text()).body
                   if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        for node in ast.parse(pair.after.read_text()).body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name not in own:
                where.setdefault(node.name, []).append(str(pair.after.relative_to(FIXTURES)))
    twice = {name: files for name, files in where.items() if len(set(files)) > 1}
    assert not twice, twice
    # And none of e2k's helpers left in a converted file: nothing there for _helpers to take out.
    for pair in tree.pairs:
        if pair.before is not None:
            _, left = _helpers.extract(cst.parse_module(pair.after.read_text()), str(pair.after))
            assert not left, (pair.after.name, sorted(left))


def test_the_converted_files_are_not_longer_than_before(capsys):
    before = sum(t.before_lines for t in TREES)
    after = sum(t.after_lines(helpers=False) for t in TREES)
    with_helpers = sum(t.after_lines(helpers=True) for t in TREES)
    with capsys.disabled():
        print(f"\nafter/before lines over {len(TREES)} fixtures: {after / before:.2f} "
              f"({with_helpers / before:.2f} with the helpers modules)")
    assert after / before <= RATIO_CEILING


CATALOGUE = sorted(_helpers.catalogue())


@pytest.mark.parametrize("key", CATALOGUE)
def test_each_helper_fits_79_columns_and_imports_what_it_reads(key):
    known = _helpers.catalogue()
    helpers = {k: known[k].code for k in _helpers._closure({key}, known)}
    for indent in ("    ", "  "):
        text = _helpers.render(helpers, indent, limit=79)
        assert all(len(line) <= 79 for line in text.splitlines()), key
        tree = ast.parse(text)
        assert ast.get_docstring(tree).startswith(_helpers.HEADER)
        assert not _helpers._free(text), (key, _helpers._free(text))  # every name it reads, bound
        assert ast.get_docstring(tree.body[-1]), f"{key}: a helper says what it keeps of the Estimator"


def _newest_python():
    import os

    python = os.environ.get("E2K_TARGET_PYTHON") or str(FIXTURES.parent / ".venv-newest" / "bin" / "python")
    return python if Path(python).exists() else None


@pytest.mark.parametrize("python", ["legacy", "newest"])
def test_every_helper_imports_on_both_tensorflows(python, tmp_path):
    """The whole catalogue in one module, imported on TF 2.15 and on the newest TF (Keras 3):
    a helper that names an API one of them lacks fails here (the fixtures' parity runs each
    helper they use)."""
    import subprocess

    interpreter = sys.executable if python == "legacy" else _newest_python()
    if interpreter is None:
        pytest.skip("no interpreter with the newest TensorFlow (E2K_TARGET_PYTHON or .venv-newest)")
    known = _helpers.catalogue()
    (tmp_path / f"{_helpers.MODULE}.py").write_text(_helpers.render({k: h.code for k, h in known.items()}))
    done = subprocess.run([interpreter, "-c", f"import {_helpers.MODULE} as m; print(len(dir(m)))"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


# -- the header of notes -----------------------------------------------------------------
from estimator2keras._notes import HEADER, notes_to_header  # noqa: E402

HEADER_NOTES = {"Global batch: split.": "E2K602", "Two lines of a note that the rule writes on two lines.": "E2K401"}


@pytest.mark.parametrize("code, source, expected", [
    pytest.param('"""Doc."""\nimport tf\n\n\ndef f():\n    # Global batch: split.\n    return 1\n', "",
                 f'"""Doc."""\n{HEADER}\n# - E2K602 Global batch: split.\nimport tf\n\n\ndef f():\n    return 1\n',
                 id="after-the-docstring"),
    pytest.param("import tf\n# Two lines of a note that the rule\n# writes on two lines.\nx = 1\n# Global batch: split.\ny = 2\n",
                 "", f"{HEADER}\n# - E2K401 Two lines of a note that the rule writes on two lines.\n"
                 "# - E2K602 Global batch: split.\nimport tf\nx = 1\ny = 2\n", id="several-in-reading-order"),
    pytest.param("# Mine.\nimport tf\n# Global batch: split.\nx = 1\n", "# Mine.\nimport tf\n",
                 f"{HEADER}\n# - E2K602 Global batch: split.\n\n# Mine.\nimport tf\nx = 1\n",
                 id="above-the-comment-of-the-first-statement"),
    pytest.param("# Licence.\n\n# Mine.\nimport tf\n# Global batch: split.\nx = 1\n", "# Licence.\n\n# Mine.\nimport tf\n",
                 f"# Licence.\n\n{HEADER}\n# - E2K602 Global batch: split.\n\n# Mine.\nimport tf\nx = 1\n",
                 id="after-the-files-first-comments"),
    pytest.param("#!/usr/bin/env python\nimport tf\n# Global batch: split.\nx = 1\n", "#!/usr/bin/env python\n",
                 f"#!/usr/bin/env python\n\n{HEADER}\n# - E2K602 Global batch: split.\nimport tf\nx = 1\n",
                 id="after-a-shebang"),
    pytest.param("import tf\n# Global batch: split.\nx = 1\n", "import tf\n# Global batch: split.\nx = 1\n",
                 "import tf\n# Global batch: split.\nx = 1\n", id="the-users-own-words-stay"),
    pytest.param(f"{HEADER}\n# - E2K401 Two lines of a note that the rule writes on two lines.\nimport tf\n"
                 "# Global batch: split.\nx = 1\n",
                 f"{HEADER}\n# - E2K401 Two lines of a note that the rule writes on two lines.\nimport tf\n",
                 f"{HEADER}\n# - E2K401 Two lines of a note that the rule writes on two lines.\n"
                 "# - E2K602 Global batch: split.\nimport tf\nx = 1\n", id="a-header-already-there-grows"),
    pytest.param("import tf\n# Another note.\nx = 1\n", "", "import tf\n# Another note.\nx = 1\n", id="other-notes-stay"),
])
def test_notes_that_say_what_changed_go_to_the_header(code, source, expected):
    module = cst.parse_module(code)
    assert notes_to_header(module, source.encode(), HEADER_NOTES, 79).code == expected


def test_a_long_note_is_wrapped_in_the_header():
    note = "A note long enough that at the file's length of seventy-nine columns it takes two lines."
    module = notes_to_header(cst.parse_module(f"# {note}\nx = 1\n"), b"", {note: "E2K999"}, 79)
    lines = module.code.splitlines()
    assert lines[0] == HEADER and lines[1].startswith("# - E2K999 A note") and lines[2].startswith("#   ")
    assert lines[3] == "x = 1"
    assert all(len(line) <= 79 for line in lines)


@pytest.mark.parametrize("before, after, root", PAIRS, ids=IDS)
def test_the_notes_that_say_what_changed_are_in_the_header_only(before, after, root):
    from estimator2keras._registry import RuleSet

    text = after.read_text()
    sites = [note for note in RuleSet.load().notes() if f"# {note}" in text]
    assert not sites, sites
    if "\n# - E2K" in text:
        assert text.count(HEADER) == 1


DOCUMENTED = '''\
import tensorflow as tf


def model_fn(features, labels, mode):
    """A small network, described once."""
    net = tf.compat.v1.layers.dense(features["x"], 4)
    logits = tf.compat.v1.layers.dense(net, 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 4}, [[2.0]] * 4)).batch(2)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)
'''


@pytest.mark.parametrize("model_input, holder", [('features["x"]', "class Model("), ("features", "def build_model(")])
def test_the_model_fns_docstring_describes_the_model(rules, model_input, holder):
    """On the model's class where there is one; on the builder of a Sequential model."""
    from estimator2keras._engine import rewrite_source

    program = DOCUMENTED.replace('dense(features["x"], 4)', f"dense({model_input}, 4)")
    if model_input == "features":
        program = program.replace('{"x": [[1.0]] * 4}', "[[1.0]] * 4")
    result = rewrite_source(program.encode(), "documented.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert new.count('"""A small network, described once."""') == 1, new
    assert new.index(holder) < new.index('"""A small network') < new.index(holder) + len(holder) + 40, new
