"""``[tool.e2k]`` in pyproject.toml: which rules run on which files.

For each file, the nearest ``pyproject.toml`` with a ``[tool.e2k]`` table (walking up from
the file's directory) applies; ``pyproject.toml`` files without that table are passed over.
Command-line flags win over configuration: ``--select`` / ``--ignore`` replace the
configured lists (overrides included), ``--rules`` and ``--exclude`` add to them.

```toml
[tool.e2k]
select = ["E2K"]                   # codes or prefixes; default: every rule
ignore = ["E2K400"]
rules = ["team_e2k_rules"]         # extra rule modules (pkg.module or pkg.module:Rule)
exclude = ["third_party/", "*_pb2.py"]
target = "jax"                     # Keras 3 with keras.distribution; default "tensorflow"

[[tool.e2k.overrides]]             # later overrides win
paths = ["experiments/*"]
ignore = ["E2K400", "E2K602"]      # replaces the top-level list for these files
```
"""
from __future__ import annotations

import fnmatch
import functools
import sys
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from estimator2keras._registry import TARGETS, RuleLoadError, RuleSet

CONFIG_FILE = "pyproject.toml"
TOP_LEVEL_KEYS = ("select", "ignore", "rules", "exclude", "overrides", "target")
OVERRIDE_KEYS = ("paths", "select", "ignore")


class ConfigError(Exception):
    """A configuration file is malformed: one line naming the file and the key."""


@dataclass(frozen=True)
class Override:
    paths: tuple[str, ...]
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Config:
    """One ``[tool.e2k]`` table; paths in it are relative to ``root``."""

    path: Path
    root: Path
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    overrides: tuple[Override, ...] = ()
    target: str | None = None

    def relative(self, file: Path) -> str | None:
        try:
            return file.resolve().relative_to(self.root).as_posix()
        except ValueError:
            return None


@dataclass(frozen=True)
class RuleSettings:
    """What one file's rules are: hashable and picklable, so that a worker process builds
    (and caches) the same RuleSet from it."""

    rules: tuple[str, ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    #: Directories (of config files) where rule modules named in the config may also live.
    search_path: tuple[str, ...] = ()
    target: str = "tensorflow"

    def load(self) -> RuleSet:
        return _load_rule_set(self)


@functools.lru_cache(maxsize=None)
def _load_rule_set(settings: RuleSettings) -> RuleSet:
    for directory in settings.search_path:
        if directory not in sys.path:
            sys.path.append(directory)  # after installed packages: those win
    return RuleSet.load(settings.rules, settings.select, settings.ignore, settings.target)


def _matches(relative: str, patterns: Sequence[str]) -> bool:
    name = relative.rsplit("/", 1)[-1]
    return any(
        fnmatch.fnmatch(relative, p) or fnmatch.fnmatch(name, p) or relative.startswith(p.rstrip("/") + "/")
        for p in patterns
    )


def _string_list(value, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of strings")
    return tuple(value)


def _codes(value, where: str) -> tuple[str, ...]:
    return tuple(code.strip().upper() for code in _string_list(value, where))


def load_config(pyproject: Path) -> Config | None:
    """The ``[tool.e2k]`` table of ``pyproject``, or None when it has none."""
    try:
        with open(pyproject, "rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{pyproject}: invalid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"{pyproject}: cannot read: {exc.strerror or exc}") from exc
    tool = data.get("tool", {})
    if not isinstance(tool, dict) or "e2k" not in tool:
        return None
    table = tool["e2k"]
    where = f"{pyproject}: [tool.e2k]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    for key in table:
        if key not in TOP_LEVEL_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(TOP_LEVEL_KEYS)})")
    overrides = []
    raw_overrides = table.get("overrides", [])
    if not isinstance(raw_overrides, list) or not all(isinstance(o, dict) for o in raw_overrides):
        raise ConfigError(f"{where} overrides: expected an array of tables ([[tool.e2k.overrides]])")
    for index, raw in enumerate(raw_overrides):
        here = f"{pyproject}: [[tool.e2k.overrides]] #{index + 1}"
        for key in raw:
            if key not in OVERRIDE_KEYS:
                raise ConfigError(f"{here}: unknown key {key!r} (known: {', '.join(OVERRIDE_KEYS)})")
        if "paths" not in raw:
            raise ConfigError(f"{here}: missing key 'paths'")
        overrides.append(
            Override(
                paths=_string_list(raw["paths"], f"{here} paths"),
                select=_codes(raw["select"], f"{here} select") if "select" in raw else None,
                ignore=_codes(raw["ignore"], f"{here} ignore") if "ignore" in raw else None,
            )
        )
    target = table.get("target")
    if target is not None and target not in TARGETS:
        raise ConfigError(f"{where} target: {target!r} is not one of {', '.join(TARGETS)}")
    return Config(
        target=target,
        path=pyproject,
        root=pyproject.parent.resolve(),
        select=_codes(table.get("select", []), f"{where} select"),
        ignore=_codes(table.get("ignore", []), f"{where} ignore"),
        rules=_string_list(table.get("rules", []), f"{where} rules"),
        exclude=_string_list(table.get("exclude", []), f"{where} exclude"),
        overrides=tuple(overrides),
    )


@dataclass
class CommandLine:
    """What the command line said; empty means "not given" (configuration applies)."""

    rules: Sequence[str] = ()
    select: Sequence[str] = ()
    ignore: Sequence[str] = ()
    target: str | None = None


@dataclass
class Resolver:
    """Finds each file's configuration and turns it into RuleSettings (cached per directory)."""

    cli: CommandLine = field(default_factory=CommandLine)
    isolated: bool = False
    _by_directory: dict[Path, Config | None] = field(default_factory=dict)
    _validated: set[Path] = field(default_factory=set)

    def config_for(self, directory: Path) -> Config | None:
        """The nearest configuration at or above ``directory``."""
        if self.isolated:
            return None
        directory = directory.resolve()
        walked = []
        found: Config | None = None
        current: Path | None = directory
        while current is not None:
            if current in self._by_directory:
                found = self._by_directory[current]
                break
            walked.append(current)
            candidate = current / CONFIG_FILE
            if candidate.is_file():
                found = load_config(candidate)
                if found is not None:
                    break
            current = current.parent if current.parent != current else None
        for path in walked:
            self._by_directory[path] = found
        if found is not None and found.path not in self._validated:
            self._validate(found)
            self._validated.add(found.path)
        return found

    def base_settings(self, config: Config | None) -> RuleSettings:
        rules = (*(config.rules if config else ()), *self.cli.rules)
        search = (str(config.root),) if config and config.rules else ()
        return RuleSettings(tuple(dict.fromkeys(rules)), search_path=search)

    def settings_for(self, file: Path) -> RuleSettings | None:
        """The rules for ``file``; None when its configuration excludes it."""
        config = self.config_for(file.parent)
        base = self.base_settings(config)
        select: tuple[str, ...] = tuple(self.cli.select)
        ignore: tuple[str, ...] = tuple(self.cli.ignore)
        if config is not None:
            relative = config.relative(file)
            if relative is not None and config.exclude and _matches(relative, config.exclude):
                return None
            config_select, config_ignore = config.select, config.ignore
            if relative is not None:
                for override in config.overrides:
                    if _matches(relative, override.paths):
                        config_select = override.select if override.select is not None else config_select
                        config_ignore = override.ignore if override.ignore is not None else config_ignore
            select = select or config_select
            ignore = ignore or config_ignore
        target = self.cli.target or (config.target if config is not None else None) or "tensorflow"
        return RuleSettings(base.rules, select, ignore, base.search_path, target)

    def _validate(self, config: Config) -> None:
        """Load the configured rule modules and check every configured code against them."""
        settings = self.base_settings(config)
        try:
            known = settings.load().rules
        except RuleLoadError as exc:
            raise ConfigError(f"{config.path}: [tool.e2k] rules: {exc}") from exc
        lists = [("[tool.e2k] select", config.select), ("[tool.e2k] ignore", config.ignore)]
        for index, override in enumerate(config.overrides):
            lists.append((f"[[tool.e2k.overrides]] #{index + 1} select", override.select or ()))
            lists.append((f"[[tool.e2k.overrides]] #{index + 1} ignore", override.ignore or ()))
        for where, codes in lists:
            for code in codes:
                if not any(known_code.startswith(code) for known_code in known):
                    raise ConfigError(f"{config.path}: {where}: no rule has a code matching {code!r} (see `e2k rules`)")
