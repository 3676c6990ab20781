"""Rewriting one file's bytes: pre-filter, parse, run the passes, check the result parses.

Nothing here touches the filesystem, so the same function serves the CLI, the process pool,
the library API and the tests. A file is never half-converted by a failure: any error
leaves the original bytes as the result.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import traceback
from dataclasses import dataclass, field

import libcst as cst

from estimator2keras import _emit, _helpers, _leftovers, _wrap
from estimator2keras._context import Finding, RewriteContext, parse_shared
from estimator2keras._names import api_path_of_qualified
from estimator2keras._notes import drop_repeated_notes, notes_to_header
from estimator2keras._prefilter import mentions_any, screen
from estimator2keras._registry import RuleSet
from estimator2keras._rule import Unsupported
from estimator2keras._suppress import Suppressions
from estimator2keras._units import convert_units

UNREADABLE = "E2K900"
RULE_FAILED = "E2K903"
#: Estimator code left in a file after every pass: the check that fails closed (_leftovers).
ESTIMATOR_CODE_LEFT = "E2K905"
#: The unit conversion runs between the module passes ordered before and after it.
UNIT_PASS_ORDER = 500


@dataclass
class FileResult:
    """What became of one file.

    ``status``: ``"converted"`` (changed, nothing left for a human), ``"partial"`` (findings
    need a human; the file may also have changed), ``"unchanged"``, or ``"error"`` (the file
    could not be processed and is left as it was).
    """

    path: str
    status: str
    original: bytes
    new: bytes
    findings: list[Finding] = field(default_factory=list)
    #: (name, first line, last line) of the functions and classes defined at the top level
    #: of the file that still hold Estimator code (a finding left for a human, or a
    #: reference to an Estimator API, in their lines): the program pass reports the calls
    #: into them from other files (_program).
    definitions: tuple[tuple[str, int, int], ...] = ()
    #: Names of the top-level functions and classes that referred to an Estimator API in the
    #: original file, and that the conversion kept under their names without one: a file
    #: that only calls them (a trainer's task.py) is converted with them (_program).
    converted_definitions: tuple[str, ...] = ()
    #: The helpers the conversion took out of the file (``_helpers``), key -> code, for the
    #: module beside it that the file imports them from; and the file's indent, for that module.
    helpers: dict = field(default_factory=dict)
    indent: str = "    "
    limit: int = 79
    #: Set by ``release``: whether the file changed, once its bytes are gone.
    _changed: bool | None = field(default=None, repr=False)

    @property
    def changed(self) -> bool:
        if self._changed is not None:
            return self._changed
        return self.new != self.original

    def release(self) -> None:
        """Forget the file's bytes (written already), keeping what the report needs: a run
        over a large tree must not hold every file in memory."""
        self._changed = self.changed
        self.original = self.new = b""

    @property
    def manual(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "manual"]

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "status": self.status,
            "changed": self.changed,
            "findings": [f.to_dict() for f in self.findings],
        }


def keywords_of(rules: RuleSet) -> tuple[bytes, ...] | None:
    """Words one of which a file must contain to be worth reading at all: one a rule needs,
    or one that an Estimator API left in the file must spell (``_leftovers.KEYWORDS``, while
    E2K905 is enabled). None: every file."""
    return _words(rules)[0]


_WORDS: dict[int, tuple[RuleSet, tuple[bytes, ...] | None, tuple[bytes, ...] | None]] = {}


def _words(rules: RuleSet) -> tuple[tuple[bytes, ...] | None, tuple[bytes, ...] | None]:
    """(``keywords_of(rules)``, the rules' own keywords), computed once per rule set."""
    known = _WORDS.get(id(rules))
    if known is not None and known[0] is rules:
        return known[1], known[2]
    own = rules.keywords()
    words = own
    if own is not None and rules.enabled(ESTIMATOR_CODE_LEFT):
        # One scan per word of every file of a tree: "estimator" is found by "stimator".
        union = {*own, *_leftovers.KEYWORDS}
        words = tuple(sorted(w for w in union if not any(o != w and o in w for o in union)))
    if len(_WORDS) > 64:
        _WORDS.clear()
    _WORDS[id(rules)] = (rules, words, own)
    return words, own


def is_library_file(path: str) -> bool:
    """A module of the tensorflow_estimator package itself (``.../tensorflow_estimator/python/
    estimator/canned/dnn.py``), as when e2k runs over an environment's site-packages."""
    return "tensorflow_estimator/python/estimator/" in str(path).replace("\\", "/")


def rewrite_source(source: bytes, path: str, rules: RuleSet, keywords: tuple[bytes, ...] | None = None,
                   program=None) -> FileResult:
    """Rewrite one file's bytes with ``rules``. Never raises for a bad file or a failing rule.

    ``program`` (``analysis.program.Program``): the other files it converts together with,
    for a model_fn one defines and another gives an Estimator.

    A model_fn that is a method of a class of the file is converted as the function of the
    module it amounts to (``_method_model_fn``): the file so written is kept where it converts."""
    from estimator2keras import _method_model_fn

    result = _rewrite_source(source, path, rules, keywords, program)
    # Only a file the conversion met a method model_fn in is lifted (parsed again): every other
    # file is converted once, and the prefilter's limits (size, nesting) stay in force.
    if not any(f.code == "E2K001" and ("the model_fn is a method" in f.message
                                       or "the model_fn is not a function defined in this file" in f.message)
               for f in result.manual):
        return result
    lifted = _method_model_fn.lift(source)
    why = lifted if isinstance(lifted, str) else None
    if isinstance(lifted, _method_model_fn.Lift):
        # Laid out for the file's own line length, not the lifted copy's (its partial is long).
        converted = _rewrite_source(lifted.source, path, rules, keywords, program, layout=source)
        if converted.status != "error" and not _method_model_fn.defines(converted.new, lifted.name):
            return dataclasses.replace(converted, original=source)
        why = next((f"{f.message} ({f.code})" for f in converted.manual
                    if lifted.first_line <= f.line <= lifted.last_line), "its conversion was refused")
    token = _method_model_fn.WHY.set(why)
    try:  # the refusal, now saying why
        return _rewrite_source(source, path, rules, keywords, program)
    finally:
        _method_model_fn.WHY.reset(token)


def _rewrite_source(source: bytes, path: str, rules: RuleSet, keywords: tuple[bytes, ...] | None = None,
                    program=None, layout: bytes | None = None) -> FileResult:
    job = Job(source, path, rules, keywords, program)
    job.layout = layout if layout is not None else source
    if job.result is not None:
        return job.result
    for step in job.passes:
        if not job.run(step):
            return job.result
    return job.finish()


class Job:
    """One file on its way through the passes. ``rewrite_source`` runs them in order; a
    program of several files (``analysis.federation``) runs each file's passes before the
    unit pass, then one unit pass over all of them, then the rest.

    ``result`` is set as soon as the file's outcome is known early (nothing to do, it does
    not parse, a rule failed)."""

    def __init__(self, source: bytes, path: str, rules: RuleSet, keywords: tuple[bytes, ...] | None = None,
                 program=None, force: bool = False):
        """``force``: parse the file and take it into the unit pass whatever the pre-filter
        says (a module of a program: its functions may be another module's input_fns)."""
        self.source, self.path, self.rules, self.program = source, path, rules, program
        self.layout = source  # the text whose line length what e2k writes fits
        self.result: FileResult | None = None
        self.passes: list[tuple] = []
        if is_library_file(path):
            # tensorflow_estimator's own modules build its Estimators: no program to migrate.
            self.result = FileResult(path, "unchanged", source, source)
            return
        words, own = _words(rules)
        if keywords is None:
            keywords = words
        if not force and keywords is not None and not any(word in source for word in keywords):
            self.result = FileResult(path, "unchanged", source, source)
            return
        if not force and own is not None and not any(word in source for word in own):
            # No rule can match: only the check for Estimator code left may have something to say.
            if not (rules.enabled(ESTIMATOR_CODE_LEFT) and _leftovers.mentions_estimator(source)):
                self.result = FileResult(path, "unchanged", source, source)
                return
        # A module rule runs on the files that mention one of its keywords (every file, without any).
        module_rules = [
            rule for rule in rules.module_rules()
            if not rule.keywords or mentions_any(source, set(rule.keywords))
        ]
        # The syntactic pre-filter: most files that mention "estimator" build none (_prefilter).
        screening = screen(source, rules.constructor_paths(), bool(module_rules))
        self.requested = program is not None and bool(program.requests_for(path))
        told = program is not None and bool(program.left_for(path))  # its model_fn left: said there
        if (self.requested or told or force) and not screening.error:
            screening = dataclasses.replace(screening, parse=True, units=True)  # its model_fn converts for another file
        self.screening = screening
        if screening.error:
            self.result = _error(path, source, screening.line, 1, UNREADABLE, screening.error)
            return
        if not screening.parse:
            self.result = _finish(FileResult(path, "unchanged", source, source), rules, screening.tree)
            return
        try:
            module = parse_shared(path, source)
        except cst.ParserSyntaxError as exc:
            line, col, message = _syntax_error(source, exc)
            self.result = _error(path, source, line, col, UNREADABLE, f"cannot parse: {message}")
            return
        except (UnicodeDecodeError, LookupError, SyntaxError) as exc:
            self.result = _error(path, source, 1, 1, UNREADABLE, f"cannot decode: {exc}")
            return
        except Exception as exc:  # libcst rejects some inputs with other exceptions; never a traceback
            self.result = _error(path, source, 1, 1, UNREADABLE, f"cannot parse: {type(exc).__name__}: {exc}")
            return
        self.module = self.parsed = module
        self.ctx = RewriteContext(path, rules, Suppressions.from_source(source))
        self.ctx.program = program
        # Module rules that can share the unit pass do, where units may convert: one resolution
        # of libcst's metadata for both (it is most of the time of a pass).
        self.shared = [rule for rule in module_rules if rule.with_units] if screening.units else []
        passes = [(rule.order, rule.code, rule) for rule in module_rules if rule not in self.shared]
        passes.append((UNIT_PASS_ORDER, "E2K001", None))
        self.passes = sorted(passes, key=lambda p: (p[0], p[1]))

    @property
    def unit_index(self) -> int:
        return next(i for i, step in enumerate(self.passes) if step[2] is None)

    def skips_units(self) -> bool:
        """No call in the file can build a unit (and no earlier pass changed it)."""
        return not self.screening.units and self.module is self.parsed

    def run(self, step) -> bool:
        """Run one pass; False when the file's result is decided (a rule failed)."""
        _, code, rule = step
        ctx = self.ctx
        if rule is None and self.skips_units():
            return True
        token = _emit.LINE_LIMIT.set(self.line_limit)
        try:
            tree = ctx.begin_pass(self.module, code, parsed=self.module is self.parsed)
            if rule is None:
                self.run_shared(tree, code)
            result = rule().transform(tree, ctx) if rule is not None else convert_units(ctx)
            if rule is not None:
                ctx.discard_suppressed_edits()
            self.module = ctx.finish_pass(result)
        except Unsupported as exc:
            # A module rule's whole-file refusal: its pass changes nothing, the rest goes on.
            line, col = ctx.position(exc.node) if exc.node is not None else (1, 1)
            ctx.abandon_pass()
            ctx.findings.append(Finding(self.path, line, col, exc.code or code, exc.reason, "manual"))
        except (Exception, SystemExit) as exc:  # a user's rule may even call sys.exit()
            self.fail(exc, code)
            return False
        finally:
            _emit.LINE_LIMIT.reset(token)
        return True

    @functools.cached_property
    def line_limit(self) -> int:
        """The file's line length (``_wrap.line_limit``), which what e2k writes is laid out for."""
        return _wrap.line_limit(self.path, self.layout.decode("utf-8", errors="replace"))

    def run_shared(self, tree: cst.Module, code: str, ctx: RewriteContext | None = None) -> None:
        """The module rules sharing the unit pass, on ``tree``, before the units: their plans
        write these edits into the code they move too."""
        ctx = ctx or self.ctx
        for other in self.shared:
            ctx._rule_code = other.code
            if other().transform(tree, ctx) is not tree:
                raise RuntimeError(f"{other.code} runs in the unit pass: it must queue edits, not return a tree")
            ctx.discard_suppressed_edits()
            ctx._rule_code = code

    def fail(self, exc: BaseException, code: str) -> None:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        message = f"{_blame(exc, code)} raised {type(exc).__name__}: {_brief(exc)} ({where.filename}:{where.lineno})"
        self.result = _error(self.path, self.source, 1, 1, RULE_FAILED, message)

    def finish(self) -> FileResult:
        ctx, module, source, path = self.ctx, self.module, self.source, self.path
        helpers: dict = {}
        limit = _wrap.PEP8
        try:
            module = ctx.apply_imports(module)
            if module is self.parsed:
                new = source  # nothing changed: the input itself, byte for byte
            else:
                new = module.bytes
                if not path.endswith(".ipynb"):
                    # A notebook's notes stay in the cells they explain (its first cell may be IPython's).
                    limit = _wrap.line_limit(path, self.layout.decode(module.encoding, errors="replace"))
                    module = notes_to_header(module, source, self.rules.notes(), limit)
                    new = module.bytes
                noted = drop_repeated_notes(module, new, source)
                if noted is not module:
                    module, new = noted, noted.bytes
                if not path.endswith(".ipynb"):
                    # Helpers go to the module beside the file, once per program (a notebook keeps its own).
                    module, helpers = _helpers.extract(module, path, new.decode(module.encoding, errors="replace"))
                    if helpers:
                        module = _helpers.without_unused_imports(module, source)
                        new = module.bytes
                if self.rules.target != "tensorflow":
                    module, helpers = self.retarget(module, helpers, limit)
                    new = module.bytes
                new, limit = _wrapped(new, source, path, module.encoding, self.layout)
                cst.parse_module(new)  # every output parses, or the file is left alone
                if self.rules.target != "tensorflow":
                    ctx.findings.extend(_target_findings(path, new.decode(module.encoding, errors="replace")))
                    ctx.findings.append(Finding(path, 1, 1, "E2K700", "written for Keras 3 on JAX (keras.distribution, "
                                                "keras.ops in the model)", "fixed"))
        except Exception as exc:
            return _error(path, source, 1, 1, RULE_FAILED, f"the rewritten file would not parse: {exc}")

        manual = any(f.kind == "manual" for f in ctx.findings)
        status = "partial" if manual else ("converted" if new != source else "unchanged")
        result = FileResult(path, status, source, new, ctx.findings)
        if new != source and not path.endswith(".ipynb"):
            result.helpers, result.indent, result.limit = helpers, module.default_indent, limit
        if self.requested:
            result.program_honoured = ctx.program_honoured
        return _finish(result, self.rules, self.screening.tree, ctx.suppressions, ctx.suppressed)


    def retarget(self, module: cst.Module, helpers: dict[str, str], limit: int) -> tuple[cst.Module, dict[str, str]]:
        """The converted ``module`` and its ``helpers`` for the run's target (``targets``):
        what has no form there is marked in the module (``_target_findings`` reports it)."""
        from estimator2keras.targets import jax

        if self.path.endswith(".ipynb"):
            statement = module.body[0] if module.body else None
            if statement is not None:
                mark = cst.EmptyLine(comment=cst.Comment(
                    f"# e2k: {jax.CODE} a notebook converts for the TensorFlow target only (--target tensorflow)"))
                module = module.with_changes(body=[statement.with_changes(
                    leading_lines=[*statement.leading_lines, mark]), *module.body[1:]])
            return module, helpers
        retargeted = jax.retarget(module, limit)
        helpers, refused = jax.helpers(helpers)
        module = retargeted.module
        if refused:
            module = _mark_helper_import(module, refused, jax.CODE)
        return module, helpers


def _mark_helper_import(module: cst.Module, refused: list[tuple[str, str]], code: str) -> cst.Module:
    """The import of the helpers module, marked with each helper that has no form for the
    target (``# e2k: CODE the helper `X` has no JAX form: why``)."""
    body = list(module.body)
    for index, statement in enumerate(body):
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else None
        if isinstance(small, cst.ImportFrom) and small.module is not None \
                and _helpers.MODULE in _emit.code(small.module):
            marks = [cst.EmptyLine(comment=cst.Comment(f"# e2k: {code} the helper `{key}` has no JAX form: {why}"))
                     for key, why in refused]
            body[index] = statement.with_changes(leading_lines=[*statement.leading_lines, *marks])
            return module.with_changes(body=body)
    return module


def _target_findings(path: str, text: str) -> list[Finding]:
    """A finding for each mark the target's pass left (``# e2k: E2K701 why`` above what it marks)."""
    from estimator2keras.targets.jax import CODE

    prefix = f"# e2k: {CODE} "
    findings = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith(prefix):
            findings.append(Finding(path, number + 1, len(line) - len(line.lstrip()) + 1, CODE,
                                    stripped[len(prefix):], "manual"))
    return findings


def _wrapped(new: bytes, source: bytes, path: str, encoding: str, layout: bytes | None = None) -> tuple[bytes, int]:
    """``new`` with the statements e2k wrote over the file's line length (that of ``layout``,
    by default ``source``) wrapped (``_wrap``), and that length."""
    try:
        text, original = new.decode(encoding), source.decode(encoding)
        limit = _wrap.line_limit(path, (layout or source).decode(encoding))
    except (UnicodeDecodeError, LookupError):
        return new, _wrap.PEP8
    wrapped = _wrap.wrap(text, original, limit)
    return (new if wrapped == text else wrapped.encode(encoding)), limit


def _finish(
    result: FileResult,
    rules: RuleSet,
    tree: ast.Module | None,
    suppressions: Suppressions | None = None,
    suppressed: list[Finding] | None = None,
) -> FileResult:
    """Fail closed: a file whose result still refers to an Estimator API, whatever the
    passes recognised, is never "unchanged" or "converted": each reference is reported
    (E2K905). And keep the file's top-level definitions that still hold Estimator code, for
    the program pass (_program).

    E2K905 speaks only where the conversion said nothing: a file the passes leave for a
    human already exits 1 with findings that name what stopped the conversion, and a
    reference inside an Estimator unit left as it was would only repeat the unit's finding.
    The engine does not know the unit's extent: in such a file it reports the references in
    code that no finding speaks for, nor the construction of an Estimator left as it was,
    through the names that connect code (``_silent_code``). A file where the user told the
    conversion to leave something alone (a finding dropped by ``# e2k: ignore``, or ``# e2k:
    ignore`` on an Estimator's construction, which keeps its whole unit) keeps that code by
    choice.

    ``tree`` is CPython's tree of the original source, when the pre-filter built one."""
    source, new = result.original, result.new
    references: list[_leftovers.Reference] = []
    lines = None
    parsed_new = None  # CPython's tree of the new bytes, where parsed here (or the original's)
    enabled = rules.enabled(ESTIMATOR_CODE_LEFT)
    finders = [_leftovers.find_references] if enabled and _leftovers.mentions_estimator(new) else []
    if enabled and new != source and (b"contrib" in new or b"examples.tutorials" in new) \
            and _leftovers.mentions_estimator(source):
        # A converted file runs on TensorFlow 2, which has no tf.contrib: what is left of it fails there.
        finders.append(_leftovers.find_contrib)
    if enabled and b"dtensor" in new:
        # Keras 2's DTensor integration: gone from Keras 3 with Estimator (TensorFlow 2.16)
        finders.append(_leftovers.find_keras_removed)
    if finders:
        parsed_new = tree if (new is source or new == source) and tree is not None else _leftovers.parse(new)
        if parsed_new is not None:
            references = sorted((r for find in finders for r in find(parsed_new)), key=lambda r: (r.line, r.offset))
    if references:
        lines = _leftovers.LineMap(source.splitlines(), new.splitlines())
        if suppressions is None:
            suppressions = Suppressions.from_source(source) if b"e2k" in source else Suppressions()
        told = bool(suppressed) and any(f.kind == "manual" for f in suppressed) or _kept_by_choice(
            references, lines, suppressions, rules
        )
        if not result.manual and not told:
            _report_left(result, references, lines, suppressions, suppressed)
        elif not told:
            # A file left partial for another reason still names each tf.contrib call (and each
            # use of Keras 2's DTensor API) it keeps where no finding stands (TensorFlow 2 has
            # none, Keras 3 neither: every one is a blocker), and each
            # reference in a function, class or statement no finding speaks of (a SessionRunHook
            # class left beside a converted Estimator that a warning made "partial", a
            # WarmStartSettings the converted Estimator no longer reads: fail closed).
            marked = {f.line for f in result.manual}
            after = parsed_new if parsed_new is not None else _leftovers.parse(new)
            silent = _silent_code(after, lines, marked | _units_left(after, references, lines, rules),
                                  references) if after is not None else ()
            left = [r for r in references if lines(r.line)[0] not in marked and (
                _leftovers.is_contrib(r) or _leftovers.is_keras_removed(r)
                or any(first <= r.line <= last for _, first, last in silent))]
            if left:
                _report_left(result, left, lines, suppressions, suppressed)
    if result.manual or references:
        if tree is None:
            tree = _leftovers.parse(source)
        if tree is not None:
            held = {f.line for f in result.manual}
            if lines is not None and result.manual:
                held.update(lines(r.line)[0] for r in references)
            result.definitions = _leftovers.holding(_leftovers.top_level_definitions(tree), held)
    if new != source and _leftovers.mentions_estimator(source):
        result.converted_definitions = _converted_definitions(result, tree, parsed_new)
    return result


def _units_left(after: ast.Module, references: list[_leftovers.Reference], lines: _leftovers.LineMap,
                rules: RuleSet) -> set[int]:
    """The lines (of the original file) of the Estimator constructions still in the new file.
    Every construction of an enabled unit rule's constructor is a unit or a refusal, and a
    converted unit's construction goes: one left is a refused unit's, and the finding that
    refused it speaks for it, wherever the finding stands (the feature column, the hook
    class, the use that stopped it)."""
    constructors = rules.constructor_paths()
    calls = {(func.lineno, func.col_offset) for func in _leftovers.index(after).calls}
    return {lines(r.line)[0] for r in references
            if (r.line, r.offset) in calls and (api_path_of_qualified(r.qualified) or "") in constructors}


def _silent_code(after: ast.Module, lines: _leftovers.LineMap, marked: set[int],
                 references: list[_leftovers.Reference] = ()):
    """The top-level code of the new file (its lines there, as (name, first, last); a
    statement of the module's own code is named "<module>") that no finding speaks for.

    A finding (``marked``: lines of the original file) speaks for the code at its lines, and
    for the code connected to that by name: what that code reads (the model_fn a refused
    Estimator reads is its unit's, said once where the unit was refused; the RunConfig and
    the specs it reads), and what reads the code it marks, or code that still refers to an
    Estimator API so connected (the Estimator built with the feature column or the hook
    class a finding marks; the `est.train(...)`, the `train_and_evaluate(est, ...)` of a
    refused Estimator; the module-level `est = build_estimator()`). Reading a name that plain
    code bound (a directory, the data) connects nothing more: a `ws =
    tf.estimator.WarmStartSettings(...)` statement left beside an Estimator converted with a
    warning is its own code, silent until a finding marks it."""
    holding = {r.line for r in references}
    nodes = _leftovers.top_level_code(after)
    binders: dict[str, list[int]] = {}
    readers: dict[str, list[int]] = {}
    for index, node in enumerate(nodes):
        for name in node.binds:
            binders.setdefault(name, []).append(index)
        for name in node.reads:
            readers.setdefault(name, []).append(index)
    refers = [any(node.first <= line <= node.last for line in holding) for node in nodes]
    at = {line for original in marked for line in lines.forward(original)}
    spoken: set[int] = set()
    onward: set[int] = set()  # spoken code whose readers are spoken for too: marked, or Estimator code
    queue: list[int] = []

    def speak(index: int, carried: bool) -> None:
        carried = carried or refers[index]
        if index in spoken and (index in onward or not carried):
            return
        spoken.add(index)
        if carried:
            onward.add(index)
        queue.append(index)

    for index, node in enumerate(nodes):
        if any(node.first <= line <= node.last for line in at):
            speak(index, True)
    while queue:
        index = queue.pop()
        node = nodes[index]
        for name in node.reads:
            for other in binders.get(name, ()):
                speak(other, False)
        if index in onward:
            for name in node.binds:
                for other in readers.get(name, ()):
                    speak(other, True)
    return [(node.name, node.first, node.last) for index, node in enumerate(nodes) if index not in spoken]


def _converted_definitions(result: FileResult, tree: ast.Module | None, after: ast.Module | None = None
                           ) -> tuple[str, ...]:
    """The top-level definitions that referred to an Estimator API before the conversion and
    do not after, under the same name. ``tree``, ``after``: CPython's trees of the original
    and new bytes, where the caller has them."""
    before = tree if tree is not None else _leftovers.parse(result.original)
    if after is None:
        after = _leftovers.parse(result.new)
    if before is None or after is None:
        return ()
    lines = {r.line for r in _leftovers.find_references(before)}
    held = {name for name, _, _ in _leftovers.holding(_leftovers.top_level_definitions(before), lines)}
    kept = {name for name, _, _ in _leftovers.top_level_definitions(after)}
    still = {name for name, _, _ in result.definitions}
    return tuple(sorted((held & kept) - still))


def _kept_by_choice(
    references: list[_leftovers.Reference], lines: _leftovers.LineMap, suppressions: Suppressions, rules: RuleSet
) -> bool:
    """Whether ``# e2k: ignore`` (for the rule that owns it) is on the construction of an
    Estimator: the conversion leaves its whole unit as it is."""
    if not suppressions:
        return False
    owners = {path: rule.code for rule in rules.unit_rules(include_disabled=True) for path in rule.constructors}
    for reference in references:
        owner = owners.get(api_path_of_qualified(reference.qualified) or "")
        if owner is not None and suppressions.covers(lines(reference.line)[0], owner):
            return True
    return False


def _report_left(
    result: FileResult,
    references: list[_leftovers.Reference],
    lines: _leftovers.LineMap,
    suppressions: Suppressions,
    suppressed: list[Finding] | None,
) -> None:
    """One E2K905 finding per reference, at its place in the original file (once per line
    and name), not on a line marked ``# e2k: ignore``."""
    new_lines = result.new.splitlines()
    seen = set()
    for reference in references:
        line, kept = lines(reference.line)
        if (line, reference.text) in seen:
            continue
        seen.add((line, reference.text))
        col = _leftovers.column(new_lines, reference.line, reference.offset) if kept else 1
        if _leftovers.is_keras_removed(reference):
            what = "Keras 2 API left (Keras 3 has no tf.keras.dtensor nor layout arguments)"
        elif _leftovers.is_contrib(reference):
            what = f"TensorFlow 1 API left (TensorFlow 2 has no {_leftovers.removed_module(reference)})"
        else:
            what = "Estimator API left"
        finding = Finding(result.path, line, col, ESTIMATOR_CODE_LEFT, f"{what}: {reference.describe()}", "manual")
        if suppressions.covers(line, ESTIMATOR_CODE_LEFT):
            if suppressed is not None:
                suppressed.append(finding)
            continue
        result.findings.append(finding)
    if result.manual:
        result.status = "partial"


def _blame(exc: BaseException, default: str) -> str:
    """The code of the rule whose method raised (the innermost one on the traceback): the
    unit pass runs many rules, users' among them, and the report must name the right one."""
    from estimator2keras._rule import Rule

    tb = exc.__traceback__
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        owner = frame.f_locals.get("self", frame.f_locals.get("cls"))
        rule = owner if isinstance(owner, type) else type(owner)
        if isinstance(rule, type) and issubclass(rule, Rule) and getattr(rule, "code", None):
            return rule.code
    return default


def _brief(exc: BaseException, limit: int = 200) -> str:
    """An exception's message on one line, cut short: a KeyError's message is the repr of its
    key, which for a CST node runs to pages."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _syntax_error(source: bytes, exc: cst.ParserSyntaxError) -> tuple[int, int, str]:
    """Where and why the file does not parse: CPython's parser says it best (libcst's
    positions can be off by a line), falling back to libcst's message."""
    try:
        ast.parse(source)
    except SyntaxError as error:
        return error.lineno or 1, error.offset or 1, error.msg
    except Exception:
        pass
    return exc.raw_line, exc.raw_column + 1, exc.message.removeprefix("parser error: ")


def _error(path: str, source: bytes, line: int, col: int, code: str, message: str) -> FileResult:
    return FileResult(path, "error", source, source, [Finding(path, line, col, code, message, "error")])
