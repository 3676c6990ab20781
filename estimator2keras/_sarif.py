"""SARIF 2.1.0 (the OASIS standard that code-scanning UIs read) from a rewrite run.

One run, one result per finding: ``error`` for a file e2k could not process, ``warning`` for
what is left for a human, ``note`` for what e2k converts (or would convert, under
``--check``). Every rule of the run is described in ``tool.driver.rules`` with its docs.
Paths under the current directory are relative to ``%SRCROOT%``.
"""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

from estimator2keras import __version__
from estimator2keras._docs import render_markdown
from estimator2keras._rule import Rule

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {"error": "error", "manual": "warning", "fixed": "note"}


def _uri(path: str, base: Path) -> tuple[str, str | None]:
    absolute = Path(os.path.abspath(path))
    try:
        return quote(absolute.relative_to(base).as_posix()), "%SRCROOT%"
    except ValueError:
        return absolute.as_uri(), None


def _rule_descriptor(rule: type[Rule]) -> dict:
    docs = rule.docs()
    return {
        "id": rule.code,
        "name": "".join(part.capitalize() for part in rule.name.split("-")),
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": docs.title or rule.summary},
        "help": {"text": docs.sections.get("What it does", rule.summary), "markdown": render_markdown(rule)},
        "defaultConfiguration": {"level": "warning" if rule.safety.value == "manual" else "note"},
        "properties": {"kind": rule.kind(), "safety": rule.safety.value},
    }


def sarif_log(results, rules: dict[str, type[Rule]], base: Path | None = None, *, successful: bool = True) -> dict:
    """The SARIF log of ``results`` (FileResults); ``rules`` maps codes to rule classes."""
    base = Path(os.path.abspath(base or Path.cwd()))
    codes = sorted({f.code for r in results for f in r.findings} | set(rules))
    descriptors = [_rule_descriptor(rules[c]) if c in rules else {"id": c} for c in codes]
    index = {code: i for i, code in enumerate(codes)}
    out = []
    for result in sorted(results, key=lambda r: r.path):
        uri, base_id = _uri(result.path, base)
        for finding in result.findings:
            artifact = {"uri": uri}
            if base_id:
                artifact["uriBaseId"] = base_id
            location: dict = {"physicalLocation": {"artifactLocation": artifact}}
            line = finding.file_line if finding.cell is not None else finding.line
            if line and line > 0:
                region = {"startLine": line}
                if finding.cell is None and finding.col > 0:
                    region["startColumn"] = finding.col
                location["physicalLocation"]["region"] = region
            message = finding.message
            if finding.cell is not None:
                location["logicalLocations"] = [{"name": f"cell {finding.cell}", "kind": "module"}]
                message = f"cell {finding.cell}, line {finding.line}: {message}"
            entry = {
                "ruleId": finding.code,
                "ruleIndex": index[finding.code],
                "level": LEVELS.get(finding.kind, "warning"),
                "message": {"text": message},
                "locations": [location],
                "properties": {"kind": finding.kind},
            }
            out.append(entry)
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "e2k",
                        "fullName": "estimator2keras",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": descriptors,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": base.as_uri() + "/"}},
                "invocations": [{"executionSuccessful": successful}],
                "columnKind": "unicodeCodePoints",
                "results": out,
            }
        ],
    }
