"""Rewriting one file's bytes: pre-filter, parse, run the passes, check the result parses.

Nothing here touches the filesystem, so the same function serves the CLI, the process pool,
the library API and the tests. A file is never half-converted by a failure: any error
leaves the original bytes as the result.
"""
from __future__ import annotations

import ast
import traceback
from dataclasses import dataclass, field

import libcst as cst

from estimator2keras._context import Finding, RewriteContext
from estimator2keras._prefilter import mentions_any, screen
from estimator2keras._registry import RuleSet
from estimator2keras._rule import Unsupported
from estimator2keras._suppress import Suppressions
from estimator2keras._units import convert_units

UNREADABLE = "E2K900"
RULE_FAILED = "E2K903"
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


def rewrite_source(source: bytes, path: str, rules: RuleSet, keywords: tuple[bytes, ...] | None = None) -> FileResult:
    """Rewrite one file's bytes with ``rules``. Never raises for a bad file or a failing rule."""
    if keywords is None:
        keywords = rules.keywords()
    if keywords is not None and not any(word in source for word in keywords):
        return FileResult(path, "unchanged", source, source)
    # A module rule runs on the files that mention one of its keywords (every file, without any).
    module_rules = [
        rule for rule in rules.module_rules()
        if not rule.keywords or mentions_any(source, set(rule.keywords))
    ]
    # The syntactic pre-filter: most files that mention "estimator" build none (_prefilter).
    screening = screen(source, rules.constructor_paths(), bool(module_rules))
    if screening.error:
        return _error(path, source, screening.line, 1, UNREADABLE, screening.error)
    if not screening.parse:
        return FileResult(path, "unchanged", source, source)
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        line, col, message = _syntax_error(source, exc)
        return _error(path, source, line, col, UNREADABLE, f"cannot parse: {message}")
    except (UnicodeDecodeError, LookupError, SyntaxError) as exc:
        return _error(path, source, 1, 1, UNREADABLE, f"cannot decode: {exc}")
    except Exception as exc:  # libcst rejects some inputs with other exceptions; never a traceback
        return _error(path, source, 1, 1, UNREADABLE, f"cannot parse: {type(exc).__name__}: {exc}")

    ctx = RewriteContext(path, rules, Suppressions.from_source(source))
    passes = [(rule.order, rule.code, rule) for rule in module_rules]
    passes.append((UNIT_PASS_ORDER, "E2K001", None))
    parsed = module
    for _, code, rule in sorted(passes, key=lambda p: (p[0], p[1])):
        if rule is None and not screening.units and module is parsed:
            continue  # no call in the file can build a unit (and no earlier pass changed it)
        try:
            tree = ctx.begin_pass(module, code, parsed=module is parsed)
            result = rule().transform(tree, ctx) if rule is not None else convert_units(ctx)
            if rule is not None:
                ctx.discard_suppressed_edits()
            module = ctx.finish_pass(result)
        except Unsupported as exc:
            # A module rule's whole-file refusal: its pass changes nothing, the rest goes on.
            line, col = ctx.position(exc.node) if exc.node is not None else (1, 1)
            ctx.abandon_pass()
            ctx.findings.append(Finding(path, line, col, exc.code or code, exc.reason, "manual"))
        except (Exception, SystemExit) as exc:  # a user's rule may even call sys.exit()
            where = traceback.extract_tb(exc.__traceback__)[-1]
            message = f"{_blame(exc, code)} raised {type(exc).__name__}: {_brief(exc)} ({where.filename}:{where.lineno})"
            return _error(path, source, 1, 1, RULE_FAILED, message)
    try:
        module = ctx.apply_imports(module)
        if module is parsed:
            new = source  # nothing changed: the input itself, byte for byte
        else:
            new = module.bytes
            cst.parse_module(new)  # every output parses, or the file is left alone
    except Exception as exc:
        return _error(path, source, 1, 1, RULE_FAILED, f"the rewritten file would not parse: {exc}")

    manual = any(f.kind == "manual" for f in ctx.findings)
    status = "partial" if manual else ("converted" if new != source else "unchanged")
    return FileResult(path, status, source, new, ctx.findings)


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
