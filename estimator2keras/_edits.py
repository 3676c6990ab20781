"""Edits queued against the original tree of a pass, applied together in one traversal.

libcst rebuilds every node it visits, so an edit must be keyed by the node of the tree the
rule analysed and applied while that tree is walked. Statement-level edits keep what the
user wrote around them: comments and blank lines above a removed statement move to the next
statement that stays.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import libcst as cst

from estimator2keras._nodes import fields_children

_Body = (cst.Module, cst.IndentedBlock)


class EditConflict(RuntimeError):
    """Two edits touch the same code (a bug in a rule, never the user's fault)."""


class Edits:
    def __init__(self) -> None:
        self._nodes: dict[cst.CSTNode, cst.CSTNode] = {}
        self._statements: dict[cst.BaseStatement, list[cst.BaseStatement]] = {}
        self._marks: dict[cst.BaseStatement, list[str]] = {}
        #: Statements to insert right above a statement of a body, in the order given.
        self._before: dict[cst.BaseStatement, list[cst.BaseStatement]] = {}
        self._after_imports: list[cst.BaseStatement] = []
        #: Program passes: statements for one module's imports (by the module's identity).
        self._after_imports_for: dict[int, list[cst.BaseStatement]] = {}
        #: Node edits a unit wrote into its new statements (``absorb``): a unit converted with
        #: it that writes the same shared code must write them too.
        self._absorbed: dict[cst.CSTNode, cst.CSTNode] = {}

    def __bool__(self) -> bool:
        return bool(self._nodes or self._statements or self._marks or self._before or self._after_imports
                    or self._after_imports_for)

    def replace(self, node: cst.CSTNode, new: cst.CSTNode) -> None:
        """Replace ``node`` (anything but a whole statement of a body) with ``new``."""
        if node in self._nodes and not self._nodes[node].deep_equals(new):
            raise EditConflict(f"two different replacements for one {type(node).__name__}")
        self._nodes[node] = new

    def replace_statement(self, statement: cst.BaseStatement, new: Sequence[cst.BaseStatement]) -> None:
        """Replace a statement of a module or block with ``new`` (none: remove it)."""
        if statement in self._statements:
            # Units converted together (an Estimator per branch) write their shared code once.
            old = self._statements[statement]
            if len(old) == len(new) and all(a.deep_equals(b) for a, b in zip(old, new)):
                return
            if len(old) == len(new) and old and all(a.deep_equals(b) for a, b in zip(old[1:], new[1:])) \
                    and hasattr(old[0], "leading_lines") and old[0].with_changes(leading_lines=[]).deep_equals(
                        new[0].with_changes(leading_lines=[])):
                # The same code with different notes above it (one unit's leftover there): both kept.
                lines = list(old[0].leading_lines)
                lines += [line for line in new[0].leading_lines if not any(line.deep_equals(o) for o in lines)]
                self._statements[statement] = [old[0].with_changes(leading_lines=lines), *old[1:]]
                return
            raise EditConflict("two replacements for one statement")
        self._statements[statement] = list(new)

    def remove_statement(self, statement: cst.BaseStatement) -> None:
        self.replace_statement(statement, [])

    def insert_before(self, statement: cst.BaseStatement, new: Sequence[cst.BaseStatement]) -> None:
        """Insert ``new`` right above ``statement`` of a module or block (after what earlier
        calls inserted there): the models of Estimators a dict literal holds, each built
        above it. The comments and blank lines above ``statement`` move above the first."""
        self._before.setdefault(statement, []).extend(new)

    def absorb(self, node: cst.CSTNode) -> None:
        """``node``'s queued replacement was written into a unit's new statements: it is no
        edit of the tree any more, but what ``substitutions`` gives the next unit."""
        self._absorbed[node] = self._nodes.pop(node)

    def substitutions(self) -> dict[cst.CSTNode, cst.CSTNode]:
        """Every replacement of an original node queued so far, absorbed ones included."""
        return {**self._absorbed, **self._nodes} if self._absorbed else self._nodes

    def replaces(self, node: cst.CSTNode) -> bool:
        """Is there already a replacement queued for exactly this node?"""
        return node in self._nodes

    def replaced_statements(self):
        """The statements replaced or removed so far."""
        return self._statements.keys()

    def discard(self, drop) -> int:
        """Forget the replacements of the nodes and statements for which ``drop(node)`` is
        true (code marked ``# e2k: ignore``); returns how many were dropped."""
        nodes = [n for n in self._nodes if drop(n)]
        statements = [s for s in self._statements if drop(s)]
        before = [s for s in self._before if drop(s)]
        for node in nodes:
            del self._nodes[node]
        for statement in statements:
            del self._statements[statement]
        for statement in before:
            del self._before[statement]
        return len(nodes) + len(statements) + len(before)

    def covers(self, node: cst.CSTNode, parent_of) -> bool:
        """Is ``node`` inside code an edit replaces or removes (``parent_of``: the tree's
        parent links)?"""
        current = node
        while current is not None:
            if current in self._nodes or current in self._statements:
                return True
            current = parent_of(current)
        return False

    def is_replaced(self, statement: cst.BaseStatement) -> bool:
        return statement in self._statements

    def mark(self, statement: cst.BaseStatement, comment: str) -> None:
        """Put ``comment`` (a full ``# ...`` line) right above ``statement``, once."""
        # A message quoting code may span lines: a comment is one line (else libcst refuses it).
        comment = " ".join(comment.split())
        comments = self._marks.setdefault(statement, [])
        if comment not in comments:
            comments.append(comment)

    def insert_after_imports(self, statements: Sequence[cst.BaseStatement], module: cst.Module | None = None) -> None:
        """Insert module-level statements right after the module's first block of imports
        (of ``module`` only, in a pass over several modules)."""
        if module is None:
            self._after_imports.extend(statements)
        else:
            self._after_imports_for.setdefault(id(module), []).extend(statements)

    def apply(self, module: cst.Module) -> cst.Module:
        return module.visit(_Applier(self))


class _Applier(cst.CSTTransformer):
    def __init__(self, edits: Edits):
        super().__init__()
        self.edits = edits
        self.applied: set[cst.CSTNode] = set()

    def on_leave(self, original_node, updated_node):
        updated_node = super().on_leave(original_node, updated_node)
        replacement = self.edits._nodes.get(original_node)
        if replacement is not None:
            self._check_nothing_inside_applied(original_node)
            self.applied.add(original_node)
            updated_node = replacement
        if isinstance(original_node, _Body):
            updated_node = self._rebuild_body(original_node, updated_node)
        if isinstance(updated_node, cst.If) and isinstance(updated_node.orelse, cst.Else) \
                and _emptied(original_node.orelse.body, updated_node.orelse.body):
            # An `else:` whose statements all went (a RunConfig of that branch): no `else: pass`.
            updated_node = updated_node.with_changes(orelse=None)
        return updated_node

    def _check_nothing_inside_applied(self, original: cst.CSTNode) -> None:
        if not self.applied:
            return
        stack = fields_children(original)
        while stack:
            node = stack.pop()
            if node in self.applied:
                raise EditConflict(f"an edit inside a replaced {type(original).__name__} would be lost")
            stack.extend(fields_children(node))

    def _rebuild_body(self, original, updated):
        edits = self.edits
        new_body: list[cst.BaseStatement] = []
        pending: list[cst.EmptyLine] = []
        for orig, upd in zip(original.body, updated.body):
            inserted = edits._before.get(orig)
            own_lines = list(getattr(orig, "leading_lines", ()))
            if inserted:
                # The comments and blank lines above the statement go above what is inserted.
                new_body.append(_with_leading(inserted[0], _merge(pending + own_lines, list(inserted[0].leading_lines))))
                new_body.extend(inserted[1:])
                pending, own_lines = [], []
                upd = _with_leading(upd, [])
            if orig in edits._statements:
                self._check_nothing_inside_applied(orig)
                self.applied.add(orig)
                replacement = edits._statements[orig]
                carried, before, pending = pending + own_lines, pending, []
                if not replacement:
                    pending = _without_attached_comments(before, own_lines)
                    continue
                first = replacement[0]
                # A replacement made with `orig.with_changes(...)` already has orig's lines.
                own = [] if first.leading_lines is orig.leading_lines or inserted else list(first.leading_lines)
                replacement = [_with_leading(first, _merge(carried, own)), *replacement[1:]]
                new_body.extend(replacement)
                continue
            if orig in edits._marks:
                upd = _add_marks(upd, edits._marks[orig])
            if pending:
                upd = _with_leading(upd, _merge(pending, list(upd.leading_lines)))
                pending = []
            new_body.append(upd)

        after_imports = [*edits._after_imports, *edits._after_imports_for.get(id(original), ())]
        if isinstance(updated, cst.Module) and after_imports:
            index = _after_import_block(new_body)
            inserted = list(after_imports)
            inserted[0] = _with_leading(inserted[0], [cst.EmptyLine(), *inserted[0].leading_lines])
            new_body[index:index] = inserted
            if index < len(new_body) - len(inserted):
                following = new_body[index + len(inserted)]
                if not following.leading_lines:
                    new_body[index + len(inserted)] = _with_leading(following, [cst.EmptyLine()])

        if isinstance(updated, cst.Module):
            new_body = _space_new_definitions(new_body, set(map(id, updated.body)))
            footer = list(pending) + list(updated.footer)
            return updated.with_changes(body=new_body, footer=footer)
        if not new_body:
            new_body = [cst.SimpleStatementLine([cst.Pass()], leading_lines=pending)]
            pending = []
        return updated.with_changes(body=new_body, footer=list(pending) + list(updated.footer))


def _emptied(original: cst.BaseSuite, updated: cst.BaseSuite) -> bool:
    """Did the edits leave ``updated``, once ``original`` (which did something), with only the
    ``pass`` they put there, and no comment?"""
    def only_pass(block):
        return isinstance(block, cst.IndentedBlock) and len(block.body) == 1 and isinstance(
            block.body[0], cst.SimpleStatementLine) and len(block.body[0].body) == 1 and isinstance(
            block.body[0].body[0], cst.Pass)
    if not only_pass(updated) or only_pass(original):
        return False
    lines = [*updated.body[0].leading_lines, *updated.footer]
    return all(line.comment is None for line in lines)


def _space_new_definitions(body: list[cst.BaseStatement], kept: set[int]) -> list[cst.BaseStatement]:
    """Two blank lines around a module-level class or function that an edit wrote, or next to
    one (PEP 8); the user's own code keeps its spacing."""
    spaced = list(body)
    for index in range(1, len(spaced)):
        previous, current = spaced[index - 1], spaced[index]
        if id(previous) in kept and id(current) in kept:
            continue
        if not (_is_definition(previous) or _is_definition(current)):
            continue
        blank = _trailing_blank_lines(previous) + _blank_run(current.leading_lines)
        if blank < 2:
            spaced[index] = _with_leading(current, [cst.EmptyLine()] * (2 - blank) + list(current.leading_lines))
    return spaced


def _trailing_blank_lines(statement: cst.BaseStatement) -> int:
    """Blank lines a compound statement's last block ends with (its footer)."""
    block = getattr(statement, "body", None)
    if not isinstance(block, cst.IndentedBlock):
        return 0
    return _blank_run(reversed(block.footer))


def _blank_run(lines: Iterable[cst.EmptyLine]) -> int:
    """How many of ``lines`` are blank before the first comment."""
    count = 0
    for line in lines:
        if line.comment is not None:
            break
        count += 1
    return count


def _is_definition(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, (cst.ClassDef, cst.FunctionDef))


def _without_attached_comments(before: list[cst.EmptyLine], own: list[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """The lines above a removed statement that move on to the next statement: its own
    comments written right above it (no blank line between) describe it and go with it
    ("# Create the TrainSpec."); a comment a blank line separates from it is about more than
    the statement and stays, as do e2k's own marks and the lines of statements removed
    before it."""
    last_blank = max((i for i, line in enumerate(own) if line.comment is None), default=-1)
    attached = own[last_blank + 1:]
    kept = [line for line in attached if line.comment is not None and line.comment.value.startswith("# e2k:")]
    return [*before, *own[:last_blank + 1], *kept]


def _merge(carried: list[cst.EmptyLine], own: list[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """Lines of removed statements above a statement's own: comments always move along, but
    blank lines only where the statement has none (two separations must not add up)."""
    if own and own[0].comment is None:
        carried = [line for line in carried if line.comment is not None]
    merged, run = [], 0
    for line in carried + own:  # the blank lines of several removed statements: two at most (PEP 8)
        run = run + 1 if line.comment is None else 0
        if run <= 2:
            merged.append(line)
    return merged


def _with_leading(statement: cst.BaseStatement, lines: list[cst.EmptyLine]) -> cst.BaseStatement:
    return statement.with_changes(leading_lines=lines)


def _add_marks(statement: cst.BaseStatement, comments: list[str]) -> cst.BaseStatement:
    present = {line.comment.value for line in statement.leading_lines if line.comment is not None}
    new = [cst.EmptyLine(comment=cst.Comment(c)) for c in comments if c not in present]
    if not new:
        return statement
    return _with_leading(statement, [*statement.leading_lines, *new])


def _is_import(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body
    )


def is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _after_import_block(body: Sequence[cst.BaseStatement]) -> int:
    """Where module-level set-up goes: right after the statement that imports TensorFlow
    (it must run after that import and before any TensorFlow op); without one, after the
    first run of imports (where an added ``import tensorflow`` goes), after a docstring."""
    for index, statement in enumerate(body):
        if _is_import(statement) and _imports_tensorflow(statement):
            while index + 1 < len(body) and _is_import(body[index + 1]):
                index += 1  # keep the import block together
            return index + 1
    index = 1 if body and is_docstring(body[0]) else 0
    while index < len(body) and _is_import(body[index]):
        index += 1
    return index


def _imports_tensorflow(statement: cst.SimpleStatementLine) -> bool:
    for small in statement.body:
        if isinstance(small, cst.Import):
            if any(_dotted(a.name).split(".")[0] == "tensorflow" for a in small.names):
                return True
        elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
            if _dotted(small.module).split(".")[0] == "tensorflow":
                return True
    return False


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""
