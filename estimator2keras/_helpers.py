"""The helpers e2k writes once per converted program, in a module the program imports.

Where Keras alone does not do what the Estimator did (an Estimator's model_dir resume,
TF1's Momentum update under a decaying rate, a canned head's metrics...), a conversion
needs a little code of its own. Rules emit each such helper as a class or function
definition into the file they convert (``ConversionPlan.add_helper``); this module then
takes every definition that is exactly one of e2k's templates out of the file and imports it
from one module beside it, ``e2k_helpers.py``, which the runner writes once per
directory (``_runner._helper_module``). A package of several trainers gets one copy, and each file
reads as the program it was plus the imports of what it uses.

The catalogue (``catalogue()``) lists the templates. A definition is taken out only when
its code is the template's, up to its name (``unique_name``'s ``_2``), the name the file
binds TensorFlow to, its docstrings and its layout: a class the program defined itself
under the same name stays where it is. Notebooks keep their helpers in the notebook.
"""
from __future__ import annotations

import ast
import builtins
import functools
import importlib
import os
import re
import sys
import textwrap
from dataclasses import dataclass

import libcst as cst

#: The module the helpers go to, beside the converted files.
MODULE = "e2k_helpers"
#: The first line of the module's docstring: how e2k knows a module of that name is its own.
HEADER = "What the Estimator did that Keras alone does not: e2k's helpers."
DOCSTRING = f'''"""{HEADER}

e2k (estimator2keras) wrote this module when it converted the program's
Estimator code; it is yours now. Each helper says which Estimator behaviour
it keeps, and e2k's docs (helpers.md) say why Keras alone differs there. A
later `e2k rewrite` adds the helpers it needs and leaves these as they are.
"""
'''

#: (key, module, constant): templates with ``{name}`` and ``{tf}`` placeholders.
_NAMED = (
    ("ModelDirCheckpoints", "estimator2keras._training", "MODEL_DIR_CHECKPOINTS"),
    ("TF1Momentum", "estimator2keras._modelfn_read_compile", "TF1_MOMENTUM"),
    ("WarmStart", "estimator2keras.rewrites.warm_start_to_restore", "WARM_START"),
    ("numeric_input_layer", "estimator2keras._modelfn_read", "NUMERIC_INPUT_LAYER"),
    ("serving_signature", "estimator2keras._export", "SERVING_SIGNATURE"),
    ("BestExport", "estimator2keras._export", "BEST_EXPORT"),
    ("set_signature_methods", "estimator2keras._export", "SIGNATURE_METHODS"),
    ("LinearModel", "estimator2keras._canned", "LINEAR_MODEL"),
    ("dense_features", "estimator2keras._canned", "DENSE_FEATURES"),
    ("head_predictions", "estimator2keras._canned", "HEAD_PREDICTIONS"),
    ("head_metrics", "estimator2keras._canned", "HEAD_METRICS_LIST"),
    ("CannedModel", "estimator2keras._canned", "CANNED_MODEL"),
    ("WideDeepModel", "estimator2keras._canned", "WIDE_DEEP_MODEL"),
    ("unsharded", "estimator2keras.rewrites.multi_worker_input_unsharded", "UNSHARDED"),
    ("TF1RMSprop", "estimator2keras.rewrites.tf1_optimizer_to_keras", "TF1_RMSPROP"),
    ("TF1Adam", "estimator2keras.rewrites.tf1_optimizer_to_keras", "TF1_ADAM"),
    ("TF1Adagrad", "estimator2keras.rewrites.tf1_optimizer_to_keras", "TF1_ADAGRAD"),
    ("TF1Adadelta", "estimator2keras.rewrites.tf1_optimizer_to_keras", "TF1_ADADELTA"),
    ("KerasV2Adagrad", "estimator2keras.rewrites.tf1_optimizer_to_keras", "KERAS_V2_ADAGRAD"),
    ("LoggingTensorCallback", "estimator2keras.rewrites.session_run_hook_to_callback", "LOGGING_TENSOR_CALLBACK"),
    ("global_batches", "estimator2keras.rewrites.per_replica_batch_to_global", "JOINED"),
    ("StopAtStep", "estimator2keras.rewrites.train_and_evaluate_to_fit", "STOP_AT_STEP"),
    ("KerasV2RMSprop", "estimator2keras.rewrites.keras_model_to_estimator_unwrap", "KERAS_V2_RMSPROP"),
)
#: Modules whose string constants (and dicts of them) that define one class of a fixed name
#: reading ``{tf}`` are templates too: the metric classes.
_FIXED = ("estimator2keras._canned", "estimator2keras.rewrites.tf1_metric_to_keras")
_CLASS = re.compile(r"\s*class (\w+)\(")
_SUFFIX = re.compile(r"_\d+$")


@dataclass(frozen=True)
class Helper:
    key: str
    code: str  # the definition, reading TensorFlow as `tf`, with 4-space indents
    dump: str  # what is compared: its tree without docstrings

    @property
    def summary(self) -> str:
        node = ast.parse(self.code).body[0]
        doc = ast.get_docstring(node) or ""
        return " ".join(doc.split("\n\n")[0].split())


def _text(template: str, key: str) -> str:
    return textwrap.dedent(template).strip().format(name=key, tf="tf") + "\n"


@functools.lru_cache(maxsize=1)
def catalogue() -> dict[str, Helper]:
    """Every helper e2k may write, by the name it is defined under in the module."""
    found: dict[str, str] = {}
    for key, module, constant in _NAMED:
        found[key] = _text(getattr(importlib.import_module(module), constant), key)
    for module in _FIXED:
        for value in vars(importlib.import_module(module)).values():
            texts = value.values() if isinstance(value, dict) else [value]
            texts = [part for text in texts for part in (text if isinstance(text, tuple) else [text])]
            for text in texts:  # a dict's values, ("Name", definition) pairs among them
                if isinstance(text, str) and "{tf}" in text and "{name}" not in text:
                    match = _CLASS.match(text)
                    if match and text.count("\nclass ") + text.startswith("class ") == 1:
                        found.setdefault(match.group(1), _text(text, match.group(1)))
    return {key: Helper(key, code, _dump(ast.parse(code).body[0], {})) for key, code in found.items()}


class _Renamer(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, node):
        node.id = self.names.get(node.id, node.id)
        return node

    def _definition(self, node):
        node.name = self.names.get(node.name, node.name)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        self.generic_visit(node)
        return node

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _definition


def _dump(node: ast.AST, names: dict[str, str]) -> str:
    import copy

    return ast.dump(_Renamer(names).visit(copy.deepcopy(node)))


def _tf_aliases(tree: ast.Module) -> set[str]:
    """The names the module binds TensorFlow's root to."""
    aliases = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "tensorflow":
                    aliases.add(alias.asname or "tensorflow")
    return aliases


def _reads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


@functools.lru_cache(maxsize=256)
def _free(code: str) -> frozenset[str]:
    """The names ``code`` reads and does not bind (its imports and the helpers it builds on)."""
    tree = ast.parse(code)
    bound = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update(a.asname or a.name.split(".")[0] for a in node.names)
    return frozenset({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound)


def import_path(path: str, module: cst.Module) -> str:
    """How the file at ``path`` imports the helpers module beside it: by its bare name, as a
    script's siblings are, or in a package as the file imports its package's own modules
    (relatively, or from the package's root)."""
    directory = os.path.dirname(os.path.abspath(path)) if path else ""
    name = module_name(directory) if path and os.path.isfile(path) else MODULE
    if not path or not os.path.isfile(os.path.join(directory, "__init__.py")):
        return name
    relative = bare = False
    siblings = {os.path.splitext(e)[0] for e in _listdir(directory) if e.endswith(".py")}
    for statement in module.body:
        for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.ImportFrom) and small.relative:
                relative = True
            elif isinstance(small, cst.ImportFrom) and small.module is not None:
                bare |= _root(small.module) in siblings
            elif isinstance(small, cst.Import):
                bare |= any(_root(a.name) in siblings for a in small.names)
    if relative:
        return f".{name}"
    if bare:
        return name
    parts = [name]
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        parts.insert(0, os.path.basename(directory))
        directory = os.path.dirname(directory)
    return ".".join(parts)


def _root(node: cst.BaseExpression) -> str:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else ""


def _listdir(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []


@functools.lru_cache(maxsize=1)
def _definition_pattern() -> re.Pattern:
    keys = "|".join(sorted(map(re.escape, catalogue()), key=len, reverse=True))
    return re.compile(rf"^(?:class|def) (?:{keys})(?:_\d+)?\b", re.MULTILINE)


def extract(module: cst.Module, path: str, source: str | None = None) -> tuple[cst.Module, dict[str, str]]:
    """``module`` (whose code is ``source``, when the caller has it) without the helpers e2k
    emitted into it, importing them instead; and the helpers the module beside it must define
    (key -> code), those they build on included."""
    known = catalogue()
    source = module.code if source is None else source
    if not _definition_pattern().search(source):
        return module, {}  # no top-level definition under a helper's name: most files
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return module, {}
    candidates: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            key = node.name if node.name in known else _SUFFIX.sub("", node.name)
            if key in known and node.name not in candidates:
                candidates[node.name] = key
    if not candidates:
        return module, {}
    names = dict(candidates)
    for alias in _tf_aliases(tree):
        names[alias] = "tf"
    taken: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name in candidates:
            key = candidates[node.name]
            if _dump(node, names) == known[key].dump and key not in taken.values():
                taken[node.name] = key
    if not taken:
        return module, {}
    # The module defines what the taken helpers build on too (AccuracyBaseline on LabelMean).
    helpers = _closure({taken[n] for n in taken}, known)
    body = []
    dropped_before = False
    marks: list[cst.EmptyLine] = []  # `# e2k:` marks a unit put above a helper: they stay in the file
    for statement in module.body:
        if isinstance(statement, (cst.ClassDef, cst.FunctionDef)) and statement.name.value in taken:
            dropped_before = True
            marks += [line for line in statement.leading_lines
                      if line.comment is not None and line.comment.value.startswith("# e2k:")]
            continue
        if dropped_before:
            statement = _spaced(statement, after_definition=bool(body) and isinstance(
                body[-1], (cst.ClassDef, cst.FunctionDef)))
            dropped_before = False
        if marks:
            lines = list(statement.leading_lines)
            at = next((i for i, line in enumerate(lines) if line.comment is not None), len(lines))
            statement = statement.with_changes(leading_lines=[*lines[:at], *marks, *lines[at:]])
            marks = []
        body.append(statement)
    module = module.with_changes(body=body)
    rest = _reads(ast.parse(module.code))
    wanted = [(taken_name, key) for taken_name, key in taken.items() if taken_name in rest]
    if wanted:
        from libcst.codemod.visitors._add_imports import ImportItem

        from estimator2keras._imports import add_imports

        where = import_path(path, module)
        module = add_imports(module, [ImportItem(where, key, None if given == key else given)
                                      for given, key in sorted(wanted, key=lambda w: w[1])], path,
                             local=frozenset({where.lstrip(".").split(".")[0]}))
    return module, {key: known[key].code for key in helpers}


def _closure(keys: set[str], known: dict[str, Helper]) -> set[str]:
    todo, done = list(keys), set()
    while todo:
        key = todo.pop()
        if key in done:
            continue
        done.add(key)
        todo.extend(k for k in _free(known[key].code) if k in known and k not in done)
    return done


def _spaced(statement: cst.BaseStatement, after_definition: bool = False) -> cst.BaseStatement:
    """A statement after removed definitions: the blank lines above it as PEP 8 has them (two
    above a definition, or after one)."""
    lines = list(statement.leading_lines)
    while lines and lines[0].comment is None and not lines[0].whitespace.value.strip():
        lines.pop(0)
    blank = 2 if after_definition or isinstance(statement, (cst.ClassDef, cst.FunctionDef)) else 1
    return statement.with_changes(leading_lines=[cst.EmptyLine()] * blank + lines)


def without_unused_imports(module: cst.Module, original: bytes) -> cst.Module:
    """``module`` without the module-level imports it gained (not in ``original``) that
    nothing in it reads: those a helper taken out of it needed."""
    from estimator2keras._imports import _import_of

    code = module.code
    had_lines = {line.strip() for line in original.decode(module.encoding, errors="replace").splitlines()}
    if all(line.strip() in had_lines for line in code.splitlines() if line.startswith(("import ", "from "))):
        return module  # every import a line the file had (a multi-line one is looked at closely)
    try:
        before = ast.parse(original)
        tree = ast.parse(code)
    except SyntaxError:
        return module
    had = {ast.dump(n) for n in before.body if isinstance(n, (ast.Import, ast.ImportFrom))}
    had_names = {(a.name, a.asname) for n in before.body if isinstance(n, (ast.Import, ast.ImportFrom))
                 for a in n.names}
    reads = _reads(tree)
    body: list[cst.BaseStatement] = []
    changed = False
    group_gone: list[cst.EmptyLine] | None = None  # the leading lines of a whole group of imports dropped
    for statement in module.body:
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 \
            else None
        if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
            parsed = ast.parse(cst.Module(body=[statement.with_changes(leading_lines=[])]).code).body[0]
            if ast.dump(parsed) not in had:
                keep = []
                for alias, node in zip(small.names, parsed.names):
                    bound = node.asname or node.name.split(".")[0]
                    if bound in reads or (node.name, node.asname) in had_names:
                        keep.append(alias)
                if not keep:
                    changed = True
                    starts_group = not body or _import_of(body[-1]) is None or any(
                        line.comment is None for line in statement.leading_lines)
                    if group_gone is None and starts_group:
                        group_gone = list(statement.leading_lines)
                    continue
                if len(keep) != len(small.names):
                    changed = True
                    keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                    statement = statement.with_changes(body=[small.with_changes(names=keep)])
        if group_gone is not None:
            # The statement after a group of imports that is gone takes the group's place.
            own = list(statement.leading_lines)
            while own and own[0].comment is None:
                own.pop(0)
            statement = statement.with_changes(leading_lines=[*group_gone, *own])
            group_gone = None
        body.append(statement)
    return module.with_changes(body=body) if changed else module


# -- the module -------------------------------------------------------------------------------
_MODULES = {"tf": "import tensorflow as tf", "np": "import numpy as np", "keras": "import keras",
            "saved_model_pb2": "from tensorflow.core.protobuf import saved_model_pb2"}


def render(helpers: dict[str, str], indent: str = "    ", existing: str | None = None, limit: int = 79) -> str:
    """The helpers module's text: ``existing`` (one e2k wrote before, maybe edited since)
    with those of ``helpers`` it lacks added, or a new module; what it adds fits in ``limit``."""
    from estimator2keras import _wrap

    return _wrap.wrap(_render(helpers, indent, existing), existing or "", limit)


def _render(helpers: dict[str, str], indent: str, existing: str | None) -> str:
    have: set[str] = set()
    if existing is not None:
        tree = ast.parse(existing)
        have = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    order = _ordered({k: v for k, v in helpers.items() if k not in have})
    if existing is not None and not order:
        return existing
    definitions = [helpers[key] for key in order]
    if existing is not None:
        module = cst.parse_module(existing)
        indent = module.default_indent
    code = "\n\n".join(_indented(d, indent) for d in definitions)
    if existing is None:
        imports = _imports_for(set().union(*(_free(d) for d in definitions)) - set(helpers))
        return f"{DOCSTRING}{imports}\n\n{code}"
    module = cst.parse_module(existing.rstrip("\n") + "\n\n\n" + code)
    missing = _free(module.code)
    if missing:
        from libcst.codemod.visitors._add_imports import ImportItem

        from estimator2keras._imports import add_imports

        items = []
        for name in sorted(missing):
            line = _import_line(name)
            parsed = ast.parse(line).body[0]
            if isinstance(parsed, ast.ImportFrom):
                items.append(ImportItem(parsed.module, parsed.names[0].name, None))
            else:
                items.append(ImportItem(parsed.names[0].name, None, parsed.names[0].asname))
        module = add_imports(module, items)
    return module.code


def _ordered(helpers: dict[str, str]) -> list[str]:
    """By name, each after the helpers it builds on."""
    order: list[str] = []

    def visit(key: str, seen: tuple = ()) -> None:
        if key in order or key in seen:
            return
        for other in sorted(_free(helpers[key]) & set(helpers)):
            if other != key:
                visit(other, (*seen, key))
        order.append(key)

    for key in sorted(helpers, key=str.lower):
        visit(key)
    return order


@functools.lru_cache(maxsize=256)
def _indented(code: str, indent: str) -> str:
    if indent == "    ":
        return code.rstrip("\n") + "\n"
    from estimator2keras import _emit

    statements = _emit.reindent_docstrings(list(cst.parse_module(code).body), indent)
    return cst.Module(body=statements, default_indent=indent).code.rstrip("\n") + "\n"


def _import_line(name: str) -> str:
    if name in _MODULES:
        return _MODULES[name]
    if name in sys.stdlib_module_names:
        return f"import {name}"
    raise ValueError(f"a helper reads {name!r}, which e2k does not know how to import")


def _imports_for(names: set[str]) -> str:
    lines = [_import_line(n) for n in names]
    stdlib = sorted(line for line in lines if line.startswith("import ") and line.split()[1] in sys.stdlib_module_names)
    other = sorted((line for line in lines if line not in stdlib), key=lambda l: (l.startswith("from "), l.lower()))
    groups = [g for g in (stdlib, other) if g]
    return "\n\n".join("\n".join(g) for g in groups) + "\n" if groups else ""


QUOTES = (chr(34) * 3, chr(39) * 3)
#: What every version of the module's docstring says (its first line may change).
_SIGNATURE = "e2k (estimator2keras) wrote this module"


def is_ours(text: str) -> bool:
    """Is ``text`` (a module's start) the helpers module e2k wrote, whichever version?"""
    head = text.lstrip()
    if not head.startswith(QUOTES):
        return False
    end = head.find(head[:3], 3)
    docstring = head[3:end if end > 0 else len(head)]
    return docstring.startswith(HEADER) or _SIGNATURE in " ".join(docstring.split())


def module_name(directory: str) -> str:
    """The helpers module's name in ``directory``: ``e2k_helpers``, unless the program has a
    module of its own by that name (then ``e2k_helpers_e2k``, and so on)."""
    name = MODULE
    while True:
        path = os.path.join(directory, f"{name}.py")
        try:
            with open(path, encoding="utf-8") as stream:
                if is_ours(stream.read(4096)):
                    return name
        except (FileNotFoundError, NotADirectoryError):
            if not os.path.isdir(os.path.join(directory, name)):
                return name
        except OSError:
            pass
        name += "_e2k"


def inline(new: str, helpers: dict[str, str]) -> str:
    """``new`` as one file: its import of the helpers module replaced by their definitions
    (for code run on its own, as tests exec a conversion's classes)."""
    from estimator2keras import _emit

    if not helpers:
        return new
    module = cst.parse_module(new)
    body, placed = [], False
    definitions = "\n\n".join(_indented(helpers[k], module.default_indent) for k in _ordered(helpers))
    for statement in module.body:
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else None
        if isinstance(small, cst.ImportFrom) and small.module is not None and \
                _emit.code(small.module).split(".")[-1].startswith(MODULE):
            if not placed:
                body.extend(cst.parse_module(definitions, config=module.config_for_parsing).body)
                placed = True
            continue
        body.append(statement)
    text = module.with_changes(body=body).code
    # What the helpers read that the file did not import (numpy, time): the modules e2k knows.
    imports = []
    for name in sorted(_free(text)):
        try:
            imports.append(_import_line(name) + "\n")
        except ValueError:
            continue  # a name of the program's own, not a module
    return "".join(imports) + text


def docs_table() -> str:
    """The Markdown table of docs/helpers.md: each helper and what it keeps (its docstring's
    first paragraph)."""
    rows = ["| Helper | What it keeps of the Estimator |", "|---|---|"]
    for key, helper in sorted(catalogue().items(), key=lambda item: item[0].lower()):
        rows.append(f"| `{key}` | {helper.summary.replace('|', '&#124;')} |")
    return "\n".join(rows) + "\n"
