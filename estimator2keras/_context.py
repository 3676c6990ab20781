"""Per-file state a rule works with: metadata, findings, queued edits and imports."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.metadata import (
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    QualifiedNameProvider,
    ScopeProvider,
)

from libcst._metadata_dependent import LazyValue  # not re-exported; see get_metadata

from estimator2keras import _names
from estimator2keras._edits import Edits
from estimator2keras._suppress import Suppressions

if TYPE_CHECKING:
    from estimator2keras._registry import RuleSet

MARK_PREFIX = "# e2k: "


@dataclass(frozen=True)
class Finding:
    """Something a rule did or could not do, at a place in a file.

    ``kind`` is ``"fixed"`` (converted), ``"manual"`` (left for a human, marked in the file)
    or ``"error"`` (the file could not be processed). In a notebook, ``cell`` is the 1-based
    index of the cell (every cell counts, markdown too), ``line`` the line in that cell, and
    ``file_line`` the line of the .ipynb file that holds it, where known.
    """

    path: str
    line: int
    col: int
    code: str
    message: str
    kind: str = "manual"
    cell: int | None = None
    file_line: int | None = None

    @property
    def location(self) -> str:
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.line}:{self.col}"

    def format(self) -> str:
        return f"{self.location}: {self.code} {self.message}"

    def to_dict(self) -> dict:
        out = {
            "line": self.line,
            "col": self.col,
            "code": self.code,
            "message": self.message,
            "kind": self.kind,
        }
        if self.cell is not None:
            out["cell"] = self.cell
        return out


class RewriteContext:
    """What a rule sees of the file being rewritten.

    During a pass, ``module`` is the tree the rule must analyse (node identity matters: edits
    and marks are keyed by these nodes) and ``get_metadata`` resolves positions, scopes,
    parents and qualified names on it.
    """

    METADATA = (PositionProvider, ScopeProvider, QualifiedNameProvider, ParentNodeProvider)

    def __init__(self, path: str, rules: "RuleSet", suppressions: Suppressions | None = None):
        self.path = path
        self.rules = rules
        self.findings: list[Finding] = []
        #: ``# e2k: ignore`` lines of the file; findings there are dropped (kept here instead).
        self.suppressions = suppressions or Suppressions()
        self.suppressed: list[Finding] = []
        self._imports_before_pass: dict = {}
        self._pass_count = 0
        self._codemod = CodemodContext(filename=path)
        self._wrapper: MetadataWrapper | None = None
        self._metadata: dict = {}
        self.edits: Edits | None = None
        self._rule_code: str | None = None
        #: The unit conversion being planned, if any: leftovers go to it, and are dropped
        #: with it when the unit is not converted.
        self.active_plan = None

    # -- passes ---------------------------------------------------------------------------
    def begin_pass(self, module: cst.Module, rule_code: str) -> cst.Module:
        """Prepare metadata and an empty edit list for a pass; returns the tree to analyse."""
        self._wrapper = MetadataWrapper(module)
        self._metadata = self._wrapper.resolve_many(self.METADATA)
        self.edits = Edits()
        self._rule_code = rule_code
        if self.suppressions:
            self._imports_before_pass = {k: list(v) for k, v in self._codemod.scratch.items() if isinstance(v, list)}
            if self._pass_count:
                # An earlier pass may have moved lines: read the comments where they are now.
                self.suppressions = Suppressions.from_source(module.bytes)
        self._pass_count += 1
        return self._wrapper.module

    def finish_pass(self, result: cst.Module | None) -> cst.Module:
        """Apply the pass's queued edits (or take the rule's own result) and reset."""
        assert self._wrapper is not None and self.edits is not None
        module = self._wrapper.module
        if result is not None and result is not module:
            if self.edits:
                raise RuntimeError("a rule returned a new module and also queued edits")
            out = result
        else:
            out = self.edits.apply(module) if self.edits else module
        self._wrapper, self._metadata, self.edits = None, {}, None
        return out

    def abandon_pass(self) -> None:
        """Drop the current pass's edits (a rule refused the file); the tree stays as it was."""
        self._wrapper, self._metadata, self.edits = None, {}, None

    @property
    def module(self) -> cst.Module:
        assert self._wrapper is not None, "only valid during a pass"
        return self._wrapper.module

    def get_metadata(self, key, node, default=None):
        try:
            value = self._metadata[key][node]
        except KeyError:
            if default is not None:
                return default
            raise
        # libcst computes some metadata (qualified names) lazily when resolved directly.
        return value() if isinstance(value, LazyValue) else value

    # -- names ----------------------------------------------------------------------------
    def api_path(self, node: cst.CSTNode) -> str | None:
        """The TensorFlow API path ``node`` refers to (``"estimator.Estimator"``), or None."""
        return _names.api_path(node, self.get_metadata)

    def call_api_path(self, node: cst.CSTNode) -> str | None:
        return _names.call_api_path(node, self.get_metadata)

    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        """1-based line, 1-based column (as editors and `path:line:col` reports count)."""
        try:
            pos = self._metadata[PositionProvider][node].start
        except KeyError:
            return (0, 0)
        return pos.line, pos.column + 1

    def scope(self, node: cst.CSTNode):
        return self._metadata[ScopeProvider].get(node)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._metadata[ParentNodeProvider].get(node)

    def enclosing_statement(self, node: cst.CSTNode) -> cst.BaseStatement | None:
        current: cst.CSTNode | None = node
        while current is not None and not isinstance(
            current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)
        ):
            current = self.parent(current)
        return current

    # -- findings -------------------------------------------------------------------------
    def report(self, node: cst.CSTNode, message: str, code: str | None = None, kind: str = "fixed"):
        """Record a finding at ``node`` without touching the file (dropped on a line marked
        ``# e2k: ignore``)."""
        line, col = self.position(node)
        finding = Finding(self.path, line, col, code or self._rule_code or "E2K000", message, kind)
        if self.suppressions.covers(line, finding.code):
            self.suppressed.append(finding)
        else:
            self.findings.append(finding)

    def is_suppressed(self, node: cst.CSTNode, code: str | None = None) -> bool:
        """Whether ``node`` starts on a line marked ``# e2k: ignore`` for ``code`` (default:
        the running rule's). Rules that return a new module instead of queueing edits must
        check this themselves."""
        return self.suppressions.covers(self.position(node)[0], code or self._rule_code)

    def discard_suppressed_edits(self) -> None:
        """Drop the queued edits of code that starts on a suppressed line; when that leaves
        the pass with nothing to do, drop its queued imports too."""
        if not self.suppressions or not self.edits:
            return
        dropped = self.edits.discard(lambda node: self.is_suppressed(node))
        if dropped and not self.edits:
            scratch = self._codemod.scratch
            for key, value in self._imports_before_pass.items():
                scratch[key] = list(value)
            for key in [k for k, v in scratch.items() if isinstance(v, list) and k not in self._imports_before_pass]:
                del scratch[key]

    def mark(self, node: cst.CSTNode, message: str, code: str | None = None) -> None:
        """Leave ``node`` for a human: a ``# e2k: CODE message`` line above its statement, and a
        finding in the report (neither on a line marked ``# e2k: ignore``)."""
        code = code or self._rule_code or "E2K000"
        self.report(node, message, code=code, kind="manual")
        if self.suppressions.covers(self.position(node)[0], code):
            return
        statement = self.enclosing_statement(node) or node
        assert self.edits is not None
        self.edits.mark(statement, f"{MARK_PREFIX}{code} {message}")

    def leftover(self, node: cst.CSTNode, message: str, code: str) -> None:
        """Converted, but a human must look here: marked and reported (with the unit being
        converted, if any, so that nothing is reported for a unit left as it was)."""
        if self.active_plan is not None:
            self.active_plan.leftover(node, code, message)
        else:
            self.mark(node, message, code)

    # -- imports --------------------------------------------------------------------------
    def add_import(self, module: str, obj: str | None = None, asname: str | None = None) -> None:
        """Queue an import; during a unit conversion it is added only if the unit converts."""
        if self.active_plan is not None:
            self.active_plan.imports.append((module, obj, asname))
            return
        AddImportsVisitor.add_needed_import(self._codemod, module, obj, asname)

    def remove_import_if_unused(self, module: str, obj: str | None = None, asname: str | None = None) -> None:
        RemoveImportsVisitor.remove_unused_import(self._codemod, module, obj, asname)

    def apply_imports(self, module: cst.Module) -> cst.Module:
        """Apply queued import edits once, after all passes."""
        scratch = self._codemod.scratch
        if scratch.get(AddImportsVisitor.CONTEXT_KEY):
            module = AddImportsVisitor(self._codemod).transform_module(module)
        if scratch.get(RemoveImportsVisitor.CONTEXT_KEY):
            before = module
            module = RemoveImportsVisitor(self._codemod).transform_module(module)
            # Only when the first statement itself went (libcst rebuilds every node).
            if module.body and before.body and not module.body[0].deep_equals(before.body[0]):
                module = _strip_top_blank_lines(module)
        return module

    # -- rules ----------------------------------------------------------------------------
    def enabled(self, code: str) -> bool:
        return self.rules.enabled(code)


def _strip_top_blank_lines(module: cst.Module) -> cst.Module:
    """A removed first import must not leave the file starting with a blank line."""
    first = module.body[0]
    lines = list(first.leading_lines)
    while lines and lines[0].comment is None and not any(line.comment for line in module.header):
        lines.pop(0)
    return module.with_changes(body=[first.with_changes(leading_lines=lines), *module.body[1:]])


def statements_of(body: cst.CSTNode) -> Sequence[cst.BaseStatement]:
    """The statements of a Module or a compound statement's block."""
    if isinstance(body, cst.Module):
        return body.body
    if isinstance(body, (cst.FunctionDef, cst.ClassDef, cst.With, cst.If, cst.For, cst.While, cst.Try)):
        body = body.body
    if isinstance(body, cst.IndentedBlock):
        return body.body
    return ()


def iter_calls(node: cst.CSTNode) -> Iterable[cst.Call]:
    """Every call inside ``node``, outermost first."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Call):
            yield current
        stack.extend(reversed(list(current.children)))
