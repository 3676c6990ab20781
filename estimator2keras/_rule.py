"""The rule API: what every rule declares (code, docs, safety, cases) and the kinds of rule.

A rule reads top to bottom like its documentation: the class docstring *is* the user
documentation (sections "What it does", "Why", "Fix safety", optionally "Limitations" and
"References"), then ``code``, ``summary``, ``safety``, its ``cases``, then the transform.
"""
from __future__ import annotations

import enum
import inspect
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Sequence

import libcst as cst

if TYPE_CHECKING:
    from estimator2keras._context import RewriteContext

CODE_PATTERN = re.compile(r"^E2K\d{3}$")
REQUIRED_SECTIONS = ("What it does", "Why", "Fix safety")
OPTIONAL_SECTIONS = ("Limitations", "References")


class Safety(str, enum.Enum):
    """How far a rule's output can be trusted without review."""

    #: Same training behaviour; proven by the rule's parity fixtures.
    SAFE = "safe"
    #: Converts, but the result can behave differently in cases the docs name; review it.
    REVIEW = "review"
    #: Converts nothing: marks the code with a ``# e2k:`` comment and reports it.
    MANUAL = "manual"


@dataclass(frozen=True)
class Case:
    """One example a rule carries: ``before`` becomes ``after``.

    ``after=None`` means the code must stay byte-identical. ``findings`` lists the rule codes
    that must be reported as needing a human (leftovers) for ``before``. For a
    ``ModuleRule`` or ``UnitRule`` both are whole modules run through the full engine; for an
    expression rule they are expressions, written with the standard aliases ``tf`` and ``tf1``.
    """

    before: str
    after: str | None = None
    findings: tuple[str, ...] = ()
    id: str | None = None
    #: The target the case converts for (``e2k rewrite --target``).
    target: str = "tensorflow"

    @property
    def changes(self) -> bool:
        return self.after is not None and self.after != self.before


@dataclass(frozen=True)
class RuleDocs:
    """A rule's documentation, split into its sections."""

    title: str
    sections: dict[str, str] = field(default_factory=dict)

    def missing_sections(self) -> list[str]:
        return [name for name in REQUIRED_SECTIONS if not self.sections.get(name, "").strip()]


class Unsupported(Exception):
    """Raised by a rule when it meets code it cannot convert faithfully.

    ``node`` is where a human has to look; ``code`` the rule that gave up (defaults to the
    raising rule's code when the engine records it).
    """

    def __init__(self, reason: str, node: cst.CSTNode | None = None, code: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.node = node
        self.code = code


class Rule:
    """Base class of every rule, built-in or a user's.

    Subclass one of the kinds (``ModuleRule``, ``UnitRule``, ``ExpressionRule``), not this.
    """

    #: ``E2K`` + three digits; never changes meaning once released.
    code: ClassVar[str]
    #: kebab-case name; derived from the class name when not given.
    name: ClassVar[str] = ""
    #: One line: the pattern the rule finds and what it becomes.
    summary: ClassVar[str]
    safety: ClassVar[Safety] = Safety.SAFE
    #: A file is only parsed when its text contains one of these (the cheap pre-filter).
    #: An empty tuple means "always parse" (slow on large trees: declare keywords).
    keywords: ClassVar[tuple[str, ...]] = ("estimator",)
    cases: ClassVar[Sequence[Case]] = ()
    #: The notes the rule writes above code it converts that say what the conversion changed
    #: (``"Global batch: ..."``), rather than why the code beside them is as it is: e2k takes
    #: each from where it was written and lists it once in the file's header, with the code.
    notes: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name") and "code" in cls.__dict__:
            cls.name = _kebab(cls.__name__)

    @classmethod
    def kind(cls) -> str:
        for base in cls.__mro__:
            if base in _KINDS:
                return _KINDS[base]
        return "rule"

    @classmethod
    def docs(cls) -> RuleDocs:
        return parse_docs(inspect.getdoc(cls) or "")

    @classmethod
    def qualified_name(cls) -> str:
        return f"{cls.__module__}:{cls.__qualname__}"


class ModuleRule(Rule):
    """A pass over a whole module. Override ``transform``.

    Use ``ctx`` to resolve names, queue imports and report findings; return the new module
    (or the same one). Raise ``Unsupported`` only for a whole-file refusal; prefer
    ``ctx.mark(...)`` for one construct.
    """

    #: Passes run in ascending order; built-in unit conversion runs at 500.
    order: ClassVar[int] = 100
    #: True: in a file where Estimator units may convert, the rule runs in the unit pass,
    #: before the units, on the same tree (one metadata resolution instead of two). It must
    #: then only queue node replacements through ``ctx.edits`` (returning the module it was
    #: given); a unit that moves or rewrites the code around such a node writes them in.
    with_units: ClassVar[bool] = False

    def transform(self, module: cst.Module, ctx: "RewriteContext") -> cst.Module:
        raise NotImplementedError


class UnitRule(Rule):
    """A step in converting one Estimator *unit*: the Estimator, its model_fn, RunConfig,
    input_fns and the calls that train and evaluate it.

    A unit is converted as a whole or not at all: a step that raises ``Unsupported`` leaves
    the unit untouched and marked. Steps run in ascending ``order``.
    """

    order: ClassVar[int] = 100
    #: API paths of the calls that start a unit this rule *owns* (builds the model for).
    constructors: ClassVar[tuple[str, ...]] = ()
    #: Positional parameter names of those constructors, to bind positional arguments.
    signature: ClassVar[tuple[str, ...]] = ()

    def plan(self, unit, plan, ctx: "RewriteContext") -> None:
        raise NotImplementedError

    def required(self, unit, plan, ctx: "RewriteContext") -> str | None:
        """When this rule is disabled (``--ignore``): why the unit cannot be converted
        faithfully without it, or None when it can."""
        return None


class ExpressionRule(Rule):
    """Translates one TF1 call (a layer, loss, optimizer, metric...) into its Keras form.

    ``targets`` are TF API paths without the ``tf.``/``tf.compat.v1.`` prefix (for example
    ``"train.AdagradOptimizer"``); ``role`` says what the model_fn conversion uses it for.
    Expression rules only act inside code that a unit conversion owns.
    """

    role: ClassVar[str]
    targets: ClassVar[tuple[str, ...]] = ()


class Diagnostic(Rule):
    """A code e2k reports when it leaves something for a human; it rewrites nothing itself.

    Its cases show programs that produce the diagnostic (``Case.findings``).
    """

    safety: ClassVar[Safety] = Safety.MANUAL


_KINDS = {ModuleRule: "module", UnitRule: "unit", ExpressionRule: "expression", Diagnostic: "diagnostic"}


def _kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z][a-z])|(?<=[a-z0-9])(?=[A-Z])", "-", name).lower()


_SECTION = re.compile(r"^##\s+(?P<name>.+?)\s*$", re.MULTILINE)


def parse_docs(docstring: str) -> RuleDocs:
    """Split a rule docstring into its title (first paragraph) and ``## Section`` parts."""
    parts = _SECTION.split(docstring)
    title = parts[0].strip()
    sections = {}
    for i in range(1, len(parts) - 1, 2):
        sections[parts[i].strip()] = parts[i + 1].strip()
    return RuleDocs(title=title, sections=sections)
