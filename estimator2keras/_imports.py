"""File-level TensorFlow set-up after a conversion: the `tf` alias and TF1 behaviour switches.

Two things stand between converted Keras code and TensorFlow 2 at the level of a file:

- ``import tensorflow.compat.v1 as tf``: the converted code needs ``tf`` to be TensorFlow 2.
  The import becomes ``import tensorflow as tf`` and every other reference through ``tf``
  keeps its meaning: its TF2 spelling where TensorFlow 2 has the same API
  (``tf.log`` -> ``tf.math.log``), ``tf.compat.v1.<name>`` otherwise.
- ``tf.disable_v2_behavior()`` / ``disable_eager_execution()``: Keras 3 needs eager
  execution. The call is removed when nothing left in the file needs graph mode (sessions,
  placeholders); otherwise it is kept and reported.
"""
from __future__ import annotations

import functools
import os
import sys
from typing import Iterable

import libcst as cst
from libcst.metadata import GlobalScope, QualifiedNameProvider

from estimator2keras import _emit
from estimator2keras._context import RewriteContext
from estimator2keras._edits import is_docstring
from estimator2keras._symbols import COMPAT, _is_compat_v1, respell_or_compat, tf2_respellings
from estimator2keras._nodes import walk as _walk

CODE = "E2K005"
COMPAT_V1_MODULES = ("tensorflow.compat.v1",)
V2_SWITCHES = frozenset({"disable_v2_behavior", "disable_eager_execution", "compat.v1.disable_v2_behavior"})
GRAPH_ONLY = frozenset({
    "Session", "InteractiveSession", "placeholder", "placeholder_with_default", "get_default_graph",
    "global_variables_initializer", "train.Saver", "train.MonitoredTrainingSession",
    "train.SingularMonitoredSession", "train.start_queue_runners",
})


def compat_alias(ctx: RewriteContext) -> tuple[cst.ImportAlias, str] | None:
    """``import tensorflow.compat.v1 as tf`` (or ``from tensorflow.compat import v1 as tf``)
    binding the name ``tf`` at module level: the alias node, and the name."""
    scope = ctx.scope(ctx.module.body[0]) if ctx.module.body else None
    if not isinstance(scope, GlobalScope):
        return None
    for assignment in scope.assignments["tf"]:
        node = getattr(assignment, "node", None)
        if isinstance(node, cst.Import):
            for alias in node.names:
                if _emit.code(alias.name) in COMPAT_V1_MODULES and alias.asname and alias.asname.name.value == "tf":
                    return alias, "tf"
        if isinstance(node, cst.ImportFrom) and node.module is not None and _emit.code(node.module) == "tensorflow.compat":
            if not isinstance(node.names, cst.ImportStar):
                for alias in node.names:
                    if _emit.code(alias.name) == "v1" and alias.asname and alias.asname.name.value == "tf":
                        return alias, "tf"
    return None


def _inside(ctx: RewriteContext, node: cst.CSTNode, statements: set) -> bool:
    current = node
    while current is not None:
        if current in statements:
            return True
        current = ctx.parent(current)
    return False


def rebind_tf(ctx: RewriteContext, alias: cst.ImportAlias, replaced: set) -> None:
    """Make ``tf`` TensorFlow 2 and keep every reference outside ``replaced`` meaning what it did."""
    import_statement = ctx.enclosing_statement(alias)
    node = ctx.parent(alias)
    if isinstance(node, cst.ImportFrom):
        # `from tensorflow.compat import v1 as tf` -> `import tensorflow as tf`
        if len(node.names) != 1:
            return
        new = _emit.statement("import tensorflow as tf")
        ctx.edits.replace_statement(import_statement, [new.with_changes(leading_lines=())])
    else:
        ctx.edits.replace(alias.name, _emit.expr("tensorflow"))
    for reference in _references(ctx, alias):
        if _inside(ctx, reference, replaced) or _already_rewritten(ctx, reference):
            continue
        for node, new in respell_or_compat(ctx, reference, "tf"):
            ctx.edits.replace(node, new)
    ctx.report(alias, "`tensorflow.compat.v1 as tf` -> `tensorflow as tf`; the file's other TF1 names keep their meaning", code=CODE)


def respell_tf1_names(ctx: RewriteContext, tf: str, replaced: set) -> None:
    """In a converted file whose ``tf`` is TensorFlow's root (a TF 1.x program's ``import
    tensorflow as tf``), the TF1 names left outside the converted code keep their meaning on
    TensorFlow 2: ``tf.reset_default_graph()`` -> ``tf.compat.v1.reset_default_graph()``,
    ``tf.log`` -> ``tf.math.log`` (what tf_upgrade_v2 does to them); TF2's own names stay."""
    respelled = []
    found = list(tf2_respellings(ctx, ctx.module, tf)) + list(_tf1_module_references(ctx, tf))
    for node, new in found:
        if _inside(ctx, node, replaced) or ctx.edits.covers(node, ctx.parent) or _is_compat_v1(ctx, node):
            continue
        if isinstance(node, cst.Attribute) and _emit.code(new) == _emit.code(node):
            continue
        ctx.edits.replace(node, new)
        respelled.append((node, new))
    if respelled:
        node, new = respelled[0]
        more = f" and {len(respelled) - 1} more" if len(respelled) > 1 else ""
        ctx.report(node, f"TF1 names outside the converted code keep their meaning on TensorFlow 2 "
                         f"(`{_emit.code(node)}` -> `{_emit.code(new)}`{more})", code=CODE)


def _lookup_table(ctx: RewriteContext, call: cst.Call, tf: str, to_string: bool) -> cst.BaseExpression | None:
    """``tf.contrib.lookup.index_table_from_tensor(LABELS)`` -> the TF2 table it built (TF
    1.15 lookup_ops.py): the keys' ids 0..n-1 in a ``StaticHashTable`` with ``default_value``
    (-1), or, with ``num_oov_buckets``, a ``StaticVocabularyTable`` (an out-of-vocabulary key
    goes to n + its FastHashSpec fingerprint modulo the buckets, in TF1's IdTableWithHashBuckets
    and TF2's table alike). ``index_to_string_table_from_tensor`` -> the reverse table, "UNK"
    by default. None where the call's arguments are not read (a hasher, integer keys)."""
    from estimator2keras._label_table import read_index_table, without_constant

    read = read_index_table(ctx, call, to_string)
    if read is None:  # a hasher, or a dtype other than the strings' default
        return None
    mapping, buckets, default = read
    sized = without_constant(ctx, mapping.value)  # `tf.constant(LABELS)`: the size of LABELS
    ids = _emit.code(_emit.expr("{tf}.range({tf}.size({m}, out_type={tf}.int64))", tf=tf, m=sized))
    keys = _emit.code(mapping.value)
    if to_string:
        value = _emit.code(default.value) if default is not None else '"UNK"'
        return _emit.expr(f"{tf}.lookup.StaticHashTable({tf}.lookup.KeyValueTensorInitializer({ids}, {keys}), "
                          f"default_value={value})")
    initializer = f"{tf}.lookup.KeyValueTensorInitializer({keys}, {ids})"
    if buckets is None or isinstance(buckets.value, cst.Integer) and buckets.value.evaluated_value == 0:
        value = _emit.code(default.value) if default is not None else "-1"
        return _emit.expr(f"{tf}.lookup.StaticHashTable({initializer}, default_value={value})")
    if default is not None:  # TF1 refused a default value with hashed buckets
        return None
    return _emit.expr(f"{tf}.lookup.StaticVocabularyTable({initializer}, {_emit.code(buckets.value)})")


#: tf.contrib calls that TensorFlow 2 writes with other objects: the call -> its TF2 value.
CONTRIB_CALLS = {
    "contrib.lookup.index_table_from_tensor": functools.partial(_lookup_table, to_string=False),
    "contrib.lookup.index_to_string_table_from_tensor": functools.partial(_lookup_table, to_string=True),
}


def rewrite_contrib_calls(ctx: RewriteContext, tf: str, replaced: set) -> None:
    """The CONTRIB_CALLS of a converted file (outside what was already rewritten) get their TF2
    value; the references inside them are then left alone."""
    for node in _walk(ctx.module):
        if not isinstance(node, cst.Call) or _inside(ctx, node, replaced) or ctx.edits.covers(node, ctx.parent):
            continue
        write = CONTRIB_CALLS.get(ctx.call_api_path(node) or "")
        new = write(ctx, node, tf) if write is not None else None
        if new is not None:
            ctx.edits.replace(node, new)
            ctx.report(node, f"`{_emit.code(node.func)}(...)` -> `{_emit.code(new.func)}(...)`, the table it built "
                             "(TensorFlow 2 has no tf.contrib)", code=CODE)


def respell_contrib(ctx: RewriteContext, tf: str, replaced: set) -> None:
    """In a converted file, the tf.contrib names that TensorFlow moved into TF2 (the same
    objects: ``tf.contrib.data.AUTOTUNE`` -> ``tf.data.AUTOTUNE``, a resolver imported as
    ``from tensorflow.contrib import cluster_resolver``) get their TF2 names wherever they
    are, through whatever alias: TensorFlow 2 has no tf.contrib."""
    for node, new in tf2_respellings(ctx, ctx.module, tf):
        if not (ctx.api_path(node) or "").startswith("contrib.") or _inside(ctx, node, replaced) \
                or ctx.edits.covers(node, ctx.parent) or _already_rewritten(ctx, node):
            continue
        ctx.edits.replace(node, new)
        ctx.report(node, f"`{_emit.code(node)}` -> `{_emit.code(new)}` (TensorFlow 2 has no tf.contrib)", code=CODE)


#: Modules of TensorFlow 1's root that TensorFlow 2 no longer has but keeps under tf.compat.v1
#: (what tf_upgrade_v2 renames them to); the symbol table lists functions and classes only.
TF1_ONLY_MODULES = frozenset({"logging", "app", "flags", "gfile"})


def _tf1_module_references(ctx: RewriteContext, tf: str):
    """``tf.logging`` of ``tf.logging.info(...)`` -> ``tf.compat.v1.logging`` (and so on for
    TF1_ONLY_MODULES), where ``tf`` is TensorFlow's root."""
    for node in _walk(ctx.module):
        if (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == tf
                and node.attr.value in TF1_ONLY_MODULES and ctx.api_path(node) == node.attr.value):
            yield node, _emit.expr("{tf}.compat.v1.{m}", tf=tf, m=node.attr.value)


def _already_rewritten(ctx: RewriteContext, node: cst.CSTNode) -> bool:
    """A reference that a unit rule already rewrote (e2k601's TF2 strategy class) is kept so."""
    current = node
    while current is not None and not isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        if ctx.edits.replaces(current):
            return True
        current = ctx.parent(current)
    return False


def _references(ctx: RewriteContext, alias: cst.ImportAlias) -> Iterable[cst.Name]:
    scope = ctx.scope(ctx.module.body[0])
    for assignment in scope.assignments["tf"]:
        for access in assignment.references:
            if isinstance(access.node, cst.Name):
                yield access.node


def v2_switches(ctx: RewriteContext, replaced: set) -> None:
    """Remove `disable_v2_behavior()`-style calls that would stop the Keras code from running."""
    switches, graph_only = [], []
    for node in _walk(ctx.module):
        if isinstance(node, cst.Call) and not _inside(ctx, node, replaced):
            path = ctx.call_api_path(node)
            if path in V2_SWITCHES:
                switches.append(node)
            elif path in GRAPH_ONLY:
                graph_only.append(node)
    for call in switches:
        statement = ctx.enclosing_statement(call)
        if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(statement.body[0], cst.Expr)):
            continue
        if graph_only:
            ctx.mark(call, "the converted Keras code needs eager execution, but this file still runs TF1 graph code", CODE)
            continue
        ctx.edits.remove_statement(statement)
        ctx.report(call, "TF1 behaviour switch removed: the Keras code runs eagerly", code=CODE)


# -- imports the converted code needs ----------------------------------------------------
# Each goes where isort (its default profile) would put it, in the file's own layout: into
# the group of its section (future, standard library, third party, the program's own
# modules), at its sorted place when that group is sorted, else after the group's last
# import of its section. Only the added line (and the blank line that separates a new
# group) is written; the file's own import lines stay as they are, but for a name added to
# an existing `from m import ...` of the same module. The standard library is told apart
# by `sys.stdlib_module_names` and the program's modules by the files beside it, which
# is all isort's placement reads here: no dependency is needed for it.

FUTURE, STDLIB, THIRD_PARTY, LOCAL = range(4)


def add_imports(module: cst.Module, queued: Iterable, path: str | None = None,
                local: frozenset = frozenset()) -> cst.Module:
    """``module`` with the imports in ``queued`` (libcst ``ImportItem``s) that it lacks; ``local``:
    modules of the program besides those beside ``path`` (one e2k writes with it)."""
    local = _local_modules(path) | local
    wanted = []
    for item in queued:
        key = (item.module, item.obj_name, item.alias)
        if key not in wanted:
            wanted.append(key)
    wanted.sort(key=lambda k: (_section(k[0], local), _sort_key(k[1] is not None, k[0])))
    body = list(module.body)
    for name, obj, alias in wanted:
        if _imported(body, name, obj, alias):
            continue
        if obj is not None and _merged(body, name, obj, alias):
            continue
        text = f"from {name} import {obj}" if obj is not None else f"import {name}"
        new = cst.parse_statement(text + (f" as {alias}" if alias else ""), config=module.config_for_parsing)
        _place(body, new, _section(name, local), local)
    return module if body == list(module.body) else module.with_changes(body=body)


def _section(name: str, local: frozenset) -> int:
    top = name.split(".")[0]
    if name.startswith(".") or top in local:
        return LOCAL
    if top == "__future__":
        return FUTURE
    return STDLIB if top in sys.stdlib_module_names else THIRD_PARTY


def _sort_key(is_from: bool, name: str) -> tuple:
    """isort's default order: ``import x`` before ``from x import y``, case aside."""
    return (is_from, name.lower())


def _sort_key_within(is_from: bool, name: str) -> tuple:
    """isort's ``force_sort_within_sections`` (Google's style): by module, either form."""
    return (name.lower(), is_from)


@functools.lru_cache(maxsize=256)
def _local_modules(path: str | None) -> frozenset:
    """The top-level names the file's program imports its own modules by: the modules and
    packages beside it, and beside the outermost package holding it (none for code that is
    not a file there: its output must not depend on the directory it is converted from)."""
    if not path or not os.path.isfile(path):
        return frozenset()
    directory = os.path.dirname(os.path.abspath(path))
    roots = {directory}
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        directory = os.path.dirname(directory)
        roots.add(directory)
    names = set()
    for root in roots:
        try:
            entries = os.listdir(root)
        except OSError:
            continue
        for entry in entries:
            stem, ext = os.path.splitext(entry)
            if ext == ".py" and stem.isidentifier():
                names.add(stem)
            elif not ext and entry.isidentifier() and os.path.isdir(os.path.join(root, entry)):
                names.add(entry)
    return frozenset(names)


def _import_of(statement: cst.CSTNode) -> cst.Import | cst.ImportFrom | None:
    if (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], (cst.Import, cst.ImportFrom))):
        return statement.body[0]
    return None


def _from_module(node: cst.ImportFrom) -> str:
    return "." * len(node.relative) + (_emit.code(node.module) if node.module is not None else "")


def _described(statement: cst.CSTNode) -> tuple[bool, str] | None:
    """(whether it is a ``from`` import, the module it names) of an import statement."""
    node = _import_of(statement)
    if isinstance(node, cst.Import):
        return False, _emit.code(node.names[0].name)
    if isinstance(node, cst.ImportFrom):
        return True, _from_module(node)
    return None


def _top_block(body: list) -> tuple[int, int]:
    """The module's first run of import statements (after a docstring): where imports go."""
    start = 1 if body and (is_docstring(body[0]) or _is_strict(body[0])) else 0
    end = start
    while end < len(body) and _import_of(body[end]) is not None:
        end += 1
    return start, end


def _is_strict(statement: cst.CSTNode) -> bool:
    return (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Assign) and len(statement.body[0].targets) == 1
            and isinstance(statement.body[0].targets[0].target, cst.Name)
            and statement.body[0].targets[0].target.value == "__strict__")


def _imported(body: list, name: str, obj: str | None, alias: str | None) -> bool:
    """Whether a module-level import before the first definition binds it already."""
    for statement in body:
        if isinstance(statement, cst.BaseCompoundStatement):
            break
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import) and obj is None:
                for a in small.names:
                    written, asname = _emit.code(a.name), a.asname.name.value if a.asname else None
                    if asname == alias and (written == name or (alias is None and written.startswith(name + "."))):
                        return True
            elif isinstance(small, cst.ImportFrom) and obj is not None and _from_module(small) == name:
                if isinstance(small.names, cst.ImportStar):
                    return True
                if any(_emit.code(a.name) == obj and (a.asname.name.value if a.asname else None) == alias
                       for a in small.names):
                    return True
    return False


def _merged(body: list, name: str, obj: str, alias: str | None) -> bool:
    """``obj`` added to the top block's ``from name import ...``, at its sorted place when
    that statement's names are sorted."""
    start, end = _top_block(body)
    for index in reversed(range(start, end)):
        node = _import_of(body[index])
        if not (isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar)
                and _from_module(node) == name):
            continue
        names = list(node.names)
        new = cst.ImportAlias(cst.Name(obj), asname=cst.AsName(cst.Name(alias)) if alias else None)
        order = [_emit.code(a.name).lower() for a in names]
        at = len(names)
        if order == sorted(order):
            at = next((i for i, written in enumerate(order) if written > obj.lower()), len(names))
        between = next((a.comma for a in names if isinstance(a.comma, cst.Comma)
                        and a is not names[-1]), cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        if at == len(names):
            names[-1], new = names[-1].with_changes(comma=between), new.with_changes(comma=names[-1].comma)
        else:
            new = new.with_changes(comma=between)
        names.insert(at, new)
        body[index] = body[index].with_changes(body=[node.with_changes(names=names)])
        return True
    return False


def _place(body: list, new: cst.SimpleStatementLine, section: int, local: frozenset) -> None:
    start, end = _top_block(body)
    described = {i: _described(body[i]) for i in range(start, end)}
    sections = {i: _section(described[i][1], local) for i in range(start, end)}
    groups, group = {}, 0
    for i in range(start, end):
        if i > start and _blank_before(body[i]):
            group += 1
        groups[i] = group
    # Sections told apart by blank lines (isort's layout), or one block that mixes them.
    mixed = any(groups[i] == groups[i - 1] and sections[i] != sections[i - 1] for i in range(start + 1, end))
    same = [i for i in range(start, end) if sections[i] == section]
    is_from = isinstance(new.body[0], cst.ImportFrom)
    name = _described(new)[1]
    if same:
        members = [i for i in same if groups[i] == groups[same[-1]]]
        at = members[-1] + 1
        for key in (_sort_key, _sort_key_within):
            keys = [key(*described[i]) for i in members]
            if keys == sorted(keys):
                at = next((i for i in members if key(*described[i]) > key(is_from, name)), members[-1] + 1)
                break
        if at == members[0] and (at == start or groups[at - 1] != groups[at]):
            # First of its group: the new import takes the group's blank line and comments.
            body.insert(at, new.with_changes(leading_lines=body[at].leading_lines))
            body[at + 1] = body[at + 1].with_changes(leading_lines=())
        else:
            body.insert(at, new)
        _space_code_after(body, at + 1, end + 1)
        return
    earlier = [i for i in range(start, end) if sections[i] < section]
    blank = () if mixed else (cst.EmptyLine(),)
    if earlier:
        at = earlier[-1] + 1
        body.insert(at, new.with_changes(leading_lines=blank))
        if at < end and not _blank_before(body[at + 1]):
            body[at + 1] = body[at + 1].with_changes(leading_lines=(*blank, *body[at + 1].leading_lines))
    else:
        at = start
        if at < end:
            body.insert(at, new.with_changes(leading_lines=body[at].leading_lines))
            body[at + 1] = body[at + 1].with_changes(leading_lines=blank)
        else:
            body.insert(at, new)
    _space_code_after(body, at + 1, end + 1)


def _blank_before(statement: cst.CSTNode) -> bool:
    return any(line.comment is None for line in statement.leading_lines)


def _space_code_after(body: list, index: int, end: int) -> None:
    """A blank line between the imports and the code after them (libcst's rule)."""
    if index == end and index < len(body) and not body[index].leading_lines:
        body[index] = body[index].with_changes(leading_lines=(cst.EmptyLine(),))


__all__ = ["add_imports", "compat_alias", "rebind_tf", "v2_switches", "COMPAT", "QualifiedNameProvider"]
