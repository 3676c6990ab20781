"""Per-file state a rule works with: metadata, findings, queued edits and imports."""
from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from types import MappingProxyType
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

import libcst as cst
from libcst.metadata import (
    ExpressionContext,
    ExpressionContextProvider,
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    QualifiedNameProvider,
    ScopeProvider,
)

from libcst._metadata_dependent import LazyValue  # not re-exported; see get_metadata

from estimator2keras import _names
from estimator2keras._nodes import _FIELDS, fields_children, node_fields as _node_fields
from estimator2keras._edits import Edits
from estimator2keras._suppress import Suppressions

if TYPE_CHECKING:
    from estimator2keras._registry import RuleSet

MARK_PREFIX = "# e2k: "

#: While ``sharing()`` is active: parsed trees by (path, source), and each parsed tree's
#: metadata (by identity, the tree kept alive with it).
_SHARED: dict | None = None


@contextmanager
def sharing():
    """Within it, a file's source is parsed once and its tree's metadata resolved once: the
    files of a program are converted alone, then together (analysis.federation), and the
    second conversion starts from the first one's trees (libcst's trees are immutable; edits
    are queued, never made in place)."""
    global _SHARED
    previous, _SHARED = _SHARED, {"parsed": {}, "metadata": {}}
    try:
        yield
    finally:
        _SHARED = previous


def parse_shared(path: str, source: bytes) -> cst.Module:
    """``cst.parse_module(source)``, once per (path, source) while ``sharing()`` is active."""
    if _SHARED is None:
        return cst.parse_module(source)
    key = (path, source)
    module = _SHARED["parsed"].get(key)
    if module is None:
        module = _SHARED["parsed"][key] = cst.parse_module(source)
    return module


_MISSING = object()


class _ModuleMetadata:
    """One tree's metadata, computed as libcst's providers compute it, each part when first
    needed: scopes (libcst's ``ScopeProvider``) and parents when made, positions on the first
    position query, each node's qualified names on the first query for that node.

    libcst's own resolution of the four providers walked the tree four times with its
    visitors (which rebuild every node they leave) and computed every node's qualified names
    and position, most of them never read: it was most of a conversion's time. The parents
    are the same map as ``ParentNodeProvider``'s, read from the nodes' fields; the qualified
    names are what ``QualifiedNameProvider`` computes, on demand (its visitor only asks the
    node's scope); positions are ``PositionProvider``'s, for the trees a report reaches."""

    def __init__(self, wrapper: MetadataWrapper):
        self.wrapper = wrapper
        self.module = wrapper.module
        self.scopes = _scopes(wrapper)
        self.parents = parent_map(self.module)
        self._positions = None

    @property
    def positions(self):
        if self._positions is None:
            # The provider itself: the wrapper's resolution of a provider that is not
            # batchable walks the whole tree once more after it, with an empty batch.
            self._positions = PositionProvider()._gen(self.wrapper)
        return self._positions


def _scopes(wrapper: MetadataWrapper):
    """``wrapper.resolve(ScopeProvider)``, without its two walks that compute nothing.

    The wrapper resolves the expression contexts the scopes depend on with a visitor that
    rebuilds every node (``expression_contexts`` computes the same map from the nodes'
    fields), then runs the provider in a batch: its ``visit_Module`` walks the tree with
    libcst's ``ScopeVisitor``, and the batch then walks the whole tree again, for no provider
    has anything else to do there."""
    if ScopeProvider.METADATA_DEPENDENCIES != (ExpressionContextProvider,):
        return wrapper.resolve(ScopeProvider)  # another libcst: its own way
    provider = ScopeProvider()
    provider.metadata = {ExpressionContextProvider: MappingProxyType(expression_contexts(wrapper.module))}
    try:
        provider.visit_Module(wrapper.module)
    finally:
        provider.metadata = {}
    return MappingProxyType(dict(provider._computed))


def parent_map(module: cst.Module) -> dict[cst.CSTNode, cst.CSTNode]:
    """Each node of ``module`` but the module itself -> its parent: ``ParentNodeProvider``'s
    map (the children of a node are the nodes its fields hold, alone or in a sequence),
    without a visitor's walk."""
    out: dict = {}
    stack: list = [module]
    fields, node_type, sequence = _FIELDS, cst.CSTNode, (list, tuple)
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        kind = type(node)
        names = fields.get(kind) or _node_fields(kind)
        for name in names:
            value = getattr(node, name)
            if isinstance(value, node_type):
                out[value] = node
                push(value)
            elif isinstance(value, sequence):
                for item in value:
                    if isinstance(item, node_type):
                        out[item] = node
                        push(item)
    return out


def expression_contexts(module: cst.Module) -> dict[cst.CSTNode, ExpressionContext]:
    """``ExpressionContextProvider``'s map (what libcst's scopes are computed from), from a
    walk of the nodes' fields instead of its visitor's, which rebuilds every node: the same
    nodes get the same context (its visitor's methods, one case each below; any other node
    passes its context on to its children)."""
    load, store, delete = ExpressionContext.LOAD, ExpressionContext.STORE, ExpressionContext.DEL
    out: dict = {}
    stack: list = [(module, load)]
    pop, push = stack.pop, stack.append
    node_type, sequence = cst.CSTNode, (list, tuple)
    while stack:
        node, context = pop()
        kind = type(node)
        if kind is cst.Name:
            out[node] = context
            continue
        if kind is cst.Attribute:
            out[node] = context
            push((node.value, load))  # the attribute's own Name gets no context
            continue
        if kind is cst.Subscript:
            out[node] = context
            push((node.value, load))
            for element in (node.slice if isinstance(node.slice, sequence) else (node.slice,)):
                push((element, load))
            continue
        if kind is cst.Assign:
            for target in node.targets:
                push((target, store))
            push((node.value, context))
            continue
        if kind is cst.AnnAssign:
            push((node.target, store))
            push((node.annotation, context))
            if node.value:
                push((node.value, context))
            continue
        if kind is cst.AugAssign or kind is cst.NamedExpr:
            push((node.target, store))
            push((node.value, context))
            continue
        if kind is cst.AsName:
            push((node.name, store))
            continue
        if kind is cst.CompFor:
            push((node.target, store))
            push((node.iter, context))
            for test in node.ifs:
                push((test, context))
            if node.inner_for_in:
                push((node.inner_for_in, context))
            continue
        if kind is cst.For:
            push((node.target, store))
            push((node.iter, context))
            push((node.body, context))
            if node.orelse:
                push((node.orelse, context))
            continue
        if kind is cst.Del:
            push((node.target, delete))
            continue
        if kind is cst.ClassDef:
            push((node.name, store))
            for child in (node.body, *node.bases, *node.keywords, *node.decorators):
                push((child, context))
            continue
        if kind is cst.FunctionDef:
            push((node.name, store))
            for child in (node.params, node.body, *node.decorators):
                push((child, context))
            if node.returns:
                push((node.returns, context))
            continue
        if kind is cst.Param:
            push((node.name, store))
            if node.annotation:
                push((node.annotation, context))
            if node.default:
                push((node.default, context))
            continue
        if kind is cst.Tuple or kind is cst.List or kind is cst.StarredElement:
            out[node] = context
        for name in _node_fields(kind):
            value = getattr(node, name)
            if isinstance(value, node_type):
                push((value, context))
            elif isinstance(value, sequence):
                for item in value:
                    if isinstance(item, node_type):
                        push((item, context))
    return out


def _module_metadata(wrapper: MetadataWrapper, module: cst.Module, parsed: bool) -> _ModuleMetadata:
    """``module``'s metadata, once per parsed tree while ``sharing()`` is active."""
    if _SHARED is None or not parsed:
        return _ModuleMetadata(wrapper)
    known = _SHARED["metadata"].get(id(module))
    if known is None or known[0] is not module:
        known = _SHARED["metadata"][id(module)] = (module, _ModuleMetadata(wrapper))
    return known[1]


class _Metadata:
    """The metadata of a pass's modules (one, or a program pass's), each module resolved on
    the first query that needs it: a query for a node of no resolved module resolves the
    others in order until one has it (``first``: the primary module, then the rest)."""

    def __init__(self, wrappers, modules, parsed, first):
        self.wrappers, self.modules, self.parsed = wrappers, modules, parsed
        self.pending = list(first)
        self.resolved: set[str] = set()
        self.scopes: dict = {}
        self.parents: dict = {}
        #: id of each resolved tree -> (the tree, its metadata)
        self.roots: dict[int, tuple[cst.Module, _ModuleMetadata]] = {}
        self.names: dict = {}
        self.views = {
            PositionProvider: _View(self, self._position),
            ScopeProvider: _View(self, self.scopes.__getitem__),
            QualifiedNameProvider: _View(self, self._qualified_names),
            ParentNodeProvider: _View(self, self.parents.__getitem__),
        }

    def ensure(self, path: str) -> None:
        if path not in self.pending:
            return
        self.pending.remove(path)
        found = _module_metadata(self.wrappers[path], self.modules[path], self.parsed.get(path, False))
        if not self.roots:  # the first: its maps, not copies
            self.scopes, self.parents = found.scopes, found.parents
            self.views[ScopeProvider].find = found.scopes.__getitem__
            self.views[ParentNodeProvider].find = found.parents.__getitem__
        else:
            if len(self.roots) == 1:
                self.scopes, self.parents = dict(self.scopes), dict(self.parents)
                self.views[ScopeProvider].find = self.scopes.__getitem__
                self.views[ParentNodeProvider].find = self.parents.__getitem__
            self.scopes.update(found.scopes)
            self.parents.update(found.parents)
        self.roots[id(found.module)] = (found.module, found)
        self.resolved.add(path)

    def _root(self, node):
        """The resolved tree that holds ``node`` (KeyError: none)."""
        parents, current = self.parents, node
        while True:
            parent = parents.get(current)
            if parent is None:
                break
            current = parent
        entry = self.roots.get(id(current))
        if entry is None or entry[0] is not current:
            raise KeyError(node)
        return entry[1]

    def _position(self, node):
        return self._root(node).positions[node]

    def _qualified_names(self, node):
        # QualifiedNameProvider's visitor: the names the node's scope gives it, or none.
        names = self.names.get(node, _MISSING)
        if names is _MISSING:
            scope = self.scopes.get(node)
            if scope is None:
                self._root(node)  # a node of no resolved tree: KeyError
            names = self.names[node] = scope.get_qualified_names_for(node) if scope else set()
        return names


class _View:
    """``ctx._metadata[key]``: ``[node]`` and ``.get(node)``."""

    __slots__ = ("metadata", "find")

    def __init__(self, metadata: _Metadata, find):
        self.metadata, self.find = metadata, find

    def __getitem__(self, node):
        try:
            return self.find(node)
        except KeyError:
            pass
        metadata = self.metadata
        while metadata.pending:
            metadata.ensure(metadata.pending[0])
            try:
                return self.find(node)
            except KeyError:
                pass
        raise KeyError(node)

    def get(self, node, default=None):
        try:
            return self[node]
        except KeyError:
            return default


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
        self._codemod_context = None  # made on first use: see _codemod
        self._wrapper: MetadataWrapper | None = None
        self._flow = None
        self._before: cst.Module | None = None
        self._metadata: dict = {}
        #: ``api_path`` of the nodes asked about in this pass.
        self._api_paths: dict = {}
        self.edits: Edits | None = None
        self._rule_code: str | None = None
        #: The unit conversion being planned, if any: leftovers go to it, and are dropped
        #: with it when the unit is not converted.
        self.active_plan = None
        #: The files converted together with this one (``analysis.program.Program``), if any.
        self.program = None
        #: Whether the conversions the program asked of this file were all made.
        self.program_honoured = False
        #: A pass over several modules of one program (``begin_program_pass``): path -> its
        #: tree, and each tree's path by identity; None for a pass over this file alone.
        self._modules: dict[str, cst.Module] | None = None
        self._module_paths: dict[int, str] = {}
        self._flows: dict[str, object] = {}
        #: The module whose code is being written (program passes): ``module`` returns it.
        self.current: str = path
        #: Program passes: imports the converted code needs, added to each module that reads
        #: the name they bind; and per-path suppressions.
        self._program_imports: list[tuple[str, str | None, str | None]] = []
        self._program_removals: dict[str, list[tuple[str, str | None, str | None]]] = {}
        self._suppressions_of: dict[str, Suppressions] = {}

    @property
    def _codemod(self):
        # libcst.codemod imports libcst.matchers (~0.4 s): only for a file that queues imports.
        if self._codemod_context is None:
            from libcst.codemod import CodemodContext

            self._codemod_context = CodemodContext(filename=self.path)
        return self._codemod_context

    # -- passes ---------------------------------------------------------------------------
    def begin_pass(self, module: cst.Module, rule_code: str, parsed: bool = False) -> cst.Module:
        """Prepare metadata and an empty edit list for a pass; returns the tree to analyse.

        ``parsed``: ``module`` is straight from the parser, so no node object is in it twice
        and libcst's defensive deep copy (a tenth of a conversion) can be skipped; a tree that
        edits built may share nodes, and is copied."""
        self._wrapper = MetadataWrapper(module, unsafe_skip_copy=parsed)
        self._flow = None
        self._before = module
        metadata = _Metadata({self.path: self._wrapper}, {self.path: module}, {self.path: parsed}, [self.path])
        metadata.ensure(self.path)
        # One module: its maps themselves where they are plain ones (the most read).
        self._metadata = {**metadata.views, ScopeProvider: metadata.scopes, ParentNodeProvider: metadata.parents}
        self._api_paths = {}
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
        elif self.edits:
            out = self.edits.apply(module)
        else:
            out = self._before  # unchanged: the caller's tree, so that it can tell
        self._wrapper, self._metadata, self.edits, self._api_paths = None, {}, None, {}
        return out

    def abandon_pass(self) -> None:
        """Drop the current pass's edits (a rule refused the file); the tree stays as it was."""
        self._wrapper, self._metadata, self.edits, self._api_paths = None, {}, None, {}
        self._modules, self._module_paths, self._flows = None, {}, {}

    # -- a pass over the modules of a program (analysis.federation) -------------------------
    def begin_program_pass(self, modules: dict[str, cst.Module], rule_code: str, parsed: dict[str, bool],
                           suppressions: dict[str, Suppressions]) -> dict[str, cst.Module]:
        """One pass over several modules: node-keyed queries (metadata, scopes, positions,
        reaching definitions, findings, edits) answer for whichever module holds the node;
        ``module`` is the module being written (``current``). Returns the trees to analyse."""
        wrappers = {path: MetadataWrapper(m, unsafe_skip_copy=parsed.get(path, False)) for path, m in modules.items()}
        # Each module's metadata is resolved when a query first needs it (most of a pass's
        # time): a module of the program no unit reads is never resolved.
        first = [self.path, *(p for p in wrappers if p != self.path)]
        self._program_metadata = _Metadata(wrappers, modules, parsed, first)
        self._metadata = self._program_metadata.views
        self._api_paths = {}
        self._modules = {path: w.module for path, w in wrappers.items()}
        self._module_paths = {id(m): path for path, m in self._modules.items()}
        self._wrapper = wrappers[self.path]
        self._flow, self._flows = None, {}
        self._before = modules[self.path]
        self._suppressions_of = dict(suppressions)
        self.edits = Edits()
        self._rule_code = rule_code
        self._pass_count += 1
        self.current = self.path
        return dict(self._modules)

    def resolve_module(self, path: str) -> None:
        """Resolve the metadata of the program's module ``path`` now (a query about to read it)."""
        if self._modules is not None:
            self._program_metadata.ensure(path)

    def resolved_modules(self) -> dict[str, cst.Module]:
        """The trees of this pass that a query has reached (every one outside a program pass)."""
        if self._modules is None:
            return {self.path: self.module}
        return {p: m for p, m in self._modules.items() if p in self._program_metadata.resolved}

    @property
    def program_modules(self) -> dict[str, cst.Module]:
        """The trees of this pass by path (one, outside a program pass)."""
        return dict(self._modules) if self._modules is not None else {self.path: self.module}

    def path_of(self, node: cst.CSTNode) -> str:
        """The file of the module that holds ``node`` (this file, outside a program pass)."""
        if self._modules is None:
            return self.path
        current = node
        while current is not None:
            if isinstance(current, cst.Module):
                return self._module_paths.get(id(current), self.path)
            current = self.parent(current)
        return self.path

    def module_of(self, node: cst.CSTNode) -> cst.Module:
        return self._modules[self.path_of(node)] if self._modules is not None else self.module

    def _suppressions_for(self, node: cst.CSTNode | None) -> Suppressions:
        if self._modules is None or node is None:
            return self.suppressions
        return self._suppressions_of.get(self.path_of(node), Suppressions())

    def finish_program_pass(self) -> dict[str, cst.Module]:
        """Each module with the pass's edits applied (the module itself where none touch it)."""
        assert self._modules is not None and self.edits is not None
        edits = self.edits
        touched = {self.path_of(n) for n in (*edits._nodes, *edits._statements, *edits._marks)}
        touched |= {self._module_paths[i] for i in edits._after_imports_for if i in self._module_paths}
        out = {path: (edits.apply(module) if path in touched else module) for path, module in self._modules.items()}
        self._wrapper, self._metadata, self.edits, self._api_paths = None, {}, None, {}
        self._modules, self._module_paths, self._flows = None, {}, {}
        self.current = self.path
        return out

    def insert_after_imports(self, statements: list[cst.BaseStatement], near: cst.CSTNode | None = None) -> None:
        """Module-level statements after the imports of the module holding ``near`` (this
        file's, outside a program pass)."""
        assert self.edits is not None
        if self._modules is None or near is None:
            self.edits.insert_after_imports(statements)
        else:
            self.edits.insert_after_imports(statements, module=self.module_of(near))

    @property
    def module(self) -> cst.Module:
        assert self._wrapper is not None, "only valid during a pass"
        if self._modules is not None:
            return self._modules[self.current]
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
    def api_path(self, node: cst.CSTNode, _depth: int = 0) -> str | None:
        """The TensorFlow API path ``node`` refers to (``"estimator.Estimator"``), or None.

        Names are resolved through imports, and through aliases by assignment that reach the
        read (``tf1 = tf.compat.v1``, ``layers = tf1.layers``, ``est = tf.estimator``)."""
        if _depth == 0:
            # The same node's path is asked for again and again within a pass (a tenth of the
            # corpus's conversion time went to these questions); metadata is fixed meanwhile.
            known = self._api_paths.get(node, _MISSING)
            if known is _MISSING:
                known = self._api_paths[node] = self._api_path(node, 0)
            return known
        return self._api_path(node, _depth)

    def _api_path(self, node: cst.CSTNode, _depth: int) -> str | None:
        path = _names.api_path(node, self.get_metadata)
        if path is not None or _depth > 8 or not isinstance(node, (cst.Name, cst.Attribute)):
            return path
        root, rest = node, []
        while isinstance(root, cst.Attribute):
            rest.append(root.attr.value)
            root = root.value
        if not isinstance(root, cst.Name):
            return None
        value = self._alias_value(root)
        if value is None:
            return None
        base = self.api_path(value, _depth + 1)
        if base is None:
            return None
        return ".".join([base, *reversed(rest)]) if base else ".".join(reversed(rest))

    def _alias_value(self, name: cst.Name) -> cst.BaseExpression | None:
        """``x`` in ``name = x`` when that plain assignment (of a dotted name) is the one
        value reaching ``name``."""
        scope = self.scope(name)
        if scope is None or not any(a.node is name for a in scope.accesses[name.value]):
            return None
        reaching = self.reaching(name)
        if reaching is None:
            access = next(a for a in scope.accesses[name.value] if a.node is name)
            reaching = access.referents
        if len(reaching) != 1:
            return None
        (assignment,) = reaching
        target = getattr(assignment, "node", None)
        if not isinstance(target, cst.Name):
            return None
        assign = self.parent(self.parent(target))
        if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and assign.targets[0].target is target):
            return None
        return assign.value if isinstance(assign.value, (cst.Name, cst.Attribute)) else None

    def call_api_path(self, node: cst.CSTNode) -> str | None:
        # Only `name(...)` / `a.b(...)`: `Layer(1)(x)` calls a layer object, not the API.
        if isinstance(node, cst.Call) and isinstance(node.func, (cst.Name, cst.Attribute)):
            return self.api_path(node.func)
        return None

    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        """1-based line, 1-based column (as editors and `path:line:col` reports count)."""
        try:
            pos = self._metadata[PositionProvider][node].start
        except KeyError:
            return (0, 0)
        return pos.line, pos.column + 1

    def scope(self, node: cst.CSTNode):
        return self._metadata[ScopeProvider].get(node)

    def reaching(self, read: cst.Name):
        """The assignments that may reach ``read`` (flow-sensitive), or None when that cannot
        be told and every assignment of the name in its scope must be assumed."""
        from estimator2keras.analysis.flow import ReachingDefinitions

        if self._modules is not None:
            path = self.path_of(read)
            if path not in self._flows:
                self._flows[path] = ReachingDefinitions(self.scope, self._modules[path])
            return self._flows[path].reaching(read)
        if self._flow is None:
            self._flow = ReachingDefinitions(self.scope, self.module)
        return self._flow.reaching(read)

    def within(self, node: cst.CSTNode | None, ancestors) -> bool:
        """Is ``node``, or a node it is inside, one of ``ancestors`` (by identity)?"""
        wanted = {id(a) for a in ancestors}
        current = node
        while current is not None:
            if id(current) in wanted:
                return True
            current = self.parent(current)
        return False

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
        finding = Finding(self.path_of(node), line, col, code or self._rule_code or "E2K000", message, kind)
        if self._suppressions_for(node).covers(line, finding.code):
            self.suppressed.append(finding)
        else:
            self.findings.append(finding)

    def is_suppressed(self, node: cst.CSTNode, code: str | None = None) -> bool:
        """Whether ``node`` starts on a line marked ``# e2k: ignore`` for ``code`` (default:
        the running rule's). Rules that return a new module instead of queueing edits must
        check this themselves."""
        return self._suppressions_for(node).covers(self.position(node)[0], code or self._rule_code)

    def discard_suppressed_edits(self) -> None:
        """Drop the queued edits of code that starts on a suppressed line; when that leaves
        the pass with nothing to do, drop its queued imports too."""
        if not (self.suppressions or any(self._suppressions_of.values())) or not self.edits:
            return
        dropped = self.edits.discard(lambda node: self.is_suppressed(node))
        if dropped and not self.edits and self._modules is None:
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
        if self._suppressions_for(node).covers(self.position(node)[0], code):
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
        if self._modules is not None:
            self._program_imports.append((module, obj, asname))  # each module that reads it
            return
        from libcst.codemod.visitors import AddImportsVisitor

        AddImportsVisitor.add_needed_import(self._codemod, module, obj, asname)

    def remove_import_if_unused(self, module: str, obj: str | None = None, asname: str | None = None) -> None:
        if self._modules is not None:
            self._program_removals.setdefault(self.current, []).append((module, obj, asname))
            return
        from libcst.codemod.visitors import RemoveImportsVisitor

        RemoveImportsVisitor.remove_unused_import(self._codemod, module, obj, asname)

    def apply_imports(self, module: cst.Module) -> cst.Module:
        """Apply queued import edits once, after all passes."""
        if self._codemod_context is None:
            return module  # none queued
        from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor

        scratch = self._codemod.scratch
        queued = scratch.get(AddImportsVisitor.CONTEXT_KEY)
        if queued:
            from estimator2keras._imports import add_imports

            module = add_imports(module, queued, self.path)
        removals = scratch.get(RemoveImportsVisitor.CONTEXT_KEY)
        if removals:
            before = module
            module = _remove_unused_imports(module, removals)
            # Only when the first statement itself went (libcst rebuilds every node).
            if module is not before and module.body and before.body and not module.body[0].deep_equals(before.body[0]):
                module = _strip_top_blank_lines(module)
        return module

    # -- rules ----------------------------------------------------------------------------
    def enabled(self, code: str) -> bool:
        return self.rules.enabled(code)


def _remove_unused_imports(module: cst.Module, removals) -> cst.Module:
    """What libcst's ``RemoveImportsVisitor`` does with ``removals`` (``(module, obj, alias)``
    triples), without its analysis of the whole module.

    That analysis (scopes, exports, string annotations, each a walk of the tree by a visitor
    that introspects itself when built) was half the time of converting a program, to learn
    whether two or three imports are still used. CPython's ``ast`` answers conservatively in
    a millisecond: a name is in use if it appears anywhere as a name, or as a word of a
    string that is not a docstring (``__all__``, string annotations). The removal itself is
    the visitor's: the same commas, parentheses and comments (tests/test_import_removal.py
    holds the two to the same output).
    """
    used = _names_in_use(module.code)
    if used is None:  # CPython cannot parse it: libcst's own way
        from libcst.codemod import CodemodContext
        from libcst.codemod.visitors import RemoveImportsVisitor

        return RemoveImportsVisitor(CodemodContext(), removals).transform_module(module)
    unused = {(name, obj, alias) for name, obj, alias in removals if _bound_name(name, obj, alias) not in used}
    if not unused:
        return module
    return module.visit(_RemoveImports(unused))


def _names_in_use(code: str) -> set[str] | None:
    """Every name the code mentions outside import statements, and every word of its strings
    but docstrings (``__all__`` and string annotations name what they use); None when CPython
    cannot parse it."""
    import ast
    import re

    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    used: set[str] = set()
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            docstrings.add(id(node.value))  # a string on its own line documents, it does not use
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            used.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", node.value))
    return used


def _bound_name(name: str, obj: str | None, alias: str | None) -> str:
    """The name an import binds, as code spells its first part (``import a.b`` binds ``a``)."""
    if alias:
        return alias
    return obj if obj is not None else name.partition(".")[0]


class _RemoveImports(cst.CSTTransformer):
    """``RemoveImportsVisitor.leave_Import`` / ``leave_ImportFrom`` for imports known unused."""

    def __init__(self, unused: set[tuple[str, str | None, str | None]]):
        super().__init__()
        self.unused = unused

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        return any(isinstance(small, (cst.Import, cst.ImportFrom)) for small in node.body)

    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import):
        keep = [a for a in updated_node.names if (a.evaluated_name, None, a.evaluated_alias) not in self.unused]
        return self._kept(updated_node, updated_node.names, keep, {})

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom):
        names = updated_node.names
        if isinstance(names, cst.ImportStar) or updated_node.relative or updated_node.module is None:
            return updated_node
        module = _names.dotted(updated_node.module)
        keep: list[cst.ImportAlias] = []
        updates: dict = {}
        for alias in names:
            if (module, alias.evaluated_name, alias.evaluated_alias) not in self.unused:
                keep.append(alias)
                continue
            # The comments after a removed name's comma move to the previous name (or the
            # opening parenthesis), as libcst does.
            comma = alias.comma
            if isinstance(comma, cst.Comma):
                if keep:
                    previous = keep[-1]
                    if isinstance(previous.comma, cst.Comma):
                        previous = previous.with_deep_changes(
                            previous.comma,
                            whitespace_after=_merge_whitespace_after(previous.comma.whitespace_after, comma.whitespace_after),
                        )
                    else:
                        previous = previous.with_changes(comma=comma)
                    keep[-1] = previous
                elif isinstance(updated_node.lpar, cst.LeftParen):
                    lpar = updates.get("lpar", updated_node.lpar)
                    updates["lpar"] = lpar.with_changes(
                        whitespace_after=_merge_whitespace_after(lpar.whitespace_after, comma.whitespace_after))
        return self._kept(updated_node, names, keep, updates)

    @staticmethod
    def _kept(node, names, keep, updates):
        if len(keep) == len(names):
            return node
        if not keep:
            return cst.RemoveFromParent()
        if keep[-1] is not names[-1]:  # no trailing comma left behind
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return node.with_changes(names=keep, **updates)


def _merge_whitespace_after(left, right):
    """libcst's own (``_remove_imports._merge_whitespace_after``): keep the comment lines."""
    if not isinstance(right, cst.ParenthesizedWhitespace):
        return left
    if not isinstance(left, cst.ParenthesizedWhitespace):
        return right
    return left.with_changes(empty_lines=tuple(line for line in right.empty_lines if line.comment is not None))


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
        stack.extend(reversed(fields_children(current)))
