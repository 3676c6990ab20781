"""Finding rules: the built-in catalogue and users' packs, through one mechanism.

A *pack* is a module (or a package, whose submodules are all read) holding Rule subclasses.
Packs come from the entry-point group ``estimator2keras.rewrites`` — the built-in catalogue
registers itself there too — and from ``--rules MODULE`` / configuration. A single rule can
be named as ``package.module:ClassName``.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from types import ModuleType
from typing import Iterable, Sequence

from estimator2keras._rule import CODE_PATTERN, Diagnostic, ExpressionRule, ModuleRule, Rule, UnitRule

ENTRY_POINT_GROUP = "estimator2keras.rewrites"
BUILTIN_PACK = "estimator2keras.rewrites"


#: What ``e2k rewrite --target`` may name: the Keras a conversion writes.
TARGETS = ("tensorflow", "jax")


class RuleLoadError(Exception):
    """A rule pack could not be imported, or its rules are malformed."""


def rules_in_module(module: ModuleType) -> list[type[Rule]]:
    """Rule classes defined in ``module`` (and, for a package, in all of its submodules)."""
    modules = [module]
    if hasattr(module, "__path__"):
        for info in sorted(pkgutil.iter_modules(module.__path__), key=lambda i: i.name):
            if not info.name.startswith("_"):
                modules.append(importlib.import_module(f"{module.__name__}.{info.name}"))
    found = []
    for mod in modules:
        for _, obj in inspect.getmembers(mod, inspect.isclass):
            if issubclass(obj, Rule) and obj.__module__ == mod.__name__ and "code" in obj.__dict__:
                found.append(obj)
    return found


def load_pack(spec: str) -> list[type[Rule]]:
    """Load ``package.module`` (every rule in it) or ``package.module:Rule`` (one rule)."""
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a user's pack may fail in any way; say which and why
        raise RuleLoadError(f"cannot import rule module {module_name!r}: {type(exc).__name__}: {exc}") from exc
    if not attr:
        return rules_in_module(module)
    obj = getattr(module, attr, None)
    if not (inspect.isclass(obj) and issubclass(obj, Rule)):
        raise RuleLoadError(f"{spec!r} is not a Rule class")
    return [obj]


def _entry_point_packs() -> list[str]:
    specs = [ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)]
    # Running from a source tree that was never installed: still find the catalogue.
    if BUILTIN_PACK not in specs:
        specs.insert(0, BUILTIN_PACK)
    return specs


def _validate(rules: Iterable[type[Rule]]) -> dict[str, type[Rule]]:
    by_code: dict[str, type[Rule]] = {}
    for rule in rules:
        code = getattr(rule, "code", "")
        if not CODE_PATTERN.match(code):
            raise RuleLoadError(f"{rule.qualified_name()}: code {code!r} is not E2K + three digits")
        other = by_code.get(code)
        if other is not None and other is not rule:
            raise RuleLoadError(f"rule code {code} is used twice: {other.qualified_name()} and {rule.qualified_name()}")
        by_code[code] = rule
    return by_code


def _matches(code: str, patterns: Sequence[str]) -> bool:
    return any(code.startswith(p) for p in patterns)


@dataclass
class RuleSet:
    """The rules of one run, after ``select``/``ignore`` (codes or code prefixes such as E2K1)."""

    rules: dict[str, type[Rule]]
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    specs: tuple[str, ...] = field(default=())
    #: What the conversion writes: Keras on TensorFlow ("tensorflow"), or Keras 3 on any
    #: backend, distributed by keras.distribution ("jax": ``estimator2keras.targets.jax``).
    target: str = "tensorflow"

    @classmethod
    def load(cls, extra: Sequence[str] = (), select: Sequence[str] = (), ignore: Sequence[str] = (),
             target: str = "tensorflow") -> "RuleSet":
        specs = [*_entry_point_packs(), *extra]
        rules: list[type[Rule]] = []
        for spec in specs:
            rules.extend(load_pack(spec))
        by_code = _validate(rules)
        for pattern in [*select, *ignore]:
            if not any(code.startswith(pattern) for code in by_code):
                raise RuleLoadError(f"no rule has a code matching {pattern!r} (see `e2k rules`)")
        if target not in TARGETS:
            raise RuleLoadError(f"unknown target {target!r} (known: {', '.join(TARGETS)})")
        return cls(dict(sorted(by_code.items())), tuple(select), tuple(ignore), tuple(specs), target)

    def enabled(self, code: str) -> bool:
        if self.select and not _matches(code, self.select):
            return False
        return not _matches(code, self.ignore)

    def active(self) -> list[type[Rule]]:
        return [rule for code, rule in self.rules.items() if self.enabled(code)]

    def module_rules(self) -> list[type[ModuleRule]]:
        return sorted((r for r in self.active() if issubclass(r, ModuleRule)), key=lambda r: (r.order, r.code))

    def unit_rules(self, include_disabled: bool = False) -> list[type[UnitRule]]:
        rules = self.rules.values() if include_disabled else self.active()
        return sorted((r for r in rules if issubclass(r, UnitRule)), key=lambda r: (r.order, r.code))

    def constructor_paths(self) -> frozenset[str]:
        """The API paths of the calls that start a unit of an enabled unit rule
        (``"estimator.Estimator"``): a file that calls none of them cannot hold a unit (see
        ``_prefilter``)."""
        return frozenset(path for rule in self.unit_rules() for path in rule.constructors)

    def expression_rule(self, role: str, api_path: str) -> type[ExpressionRule] | None:
        for rule in self.active():
            if issubclass(rule, ExpressionRule) and rule.role == role and api_path in rule.targets:
                return rule
        return None

    def expression_role(self, api_path: str) -> str | None:
        """The role of the enabled or disabled expression rule that knows ``api_path``."""
        for rule in self.rules.values():
            if issubclass(rule, ExpressionRule) and api_path in rule.targets:
                return rule.role
        return None

    def notes(self) -> dict[str, str]:
        """The notes the enabled rules list in a file's header (``Rule.notes``): text -> code."""
        return {text: rule.code for rule in self.active() for text in rule.notes}

    def keywords(self) -> tuple[bytes, ...] | None:
        """Words one of which a file must contain to be worth parsing; None: parse every file."""
        words: set[bytes] = set()
        for rule in self.active():
            if issubclass(rule, Diagnostic):
                continue
            if not rule.keywords:
                return None
            words.update(k.encode() for k in rule.keywords)
        return tuple(sorted(words))
