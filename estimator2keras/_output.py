"""What `e2k rewrite` prints for people: `path:line:col: CODE message`, coloured on a terminal.

Colour is plain ANSI escapes (the core install needs nothing but libcst); it is on for a
terminal, off when piped, and follows ``NO_COLOR`` / ``FORCE_COLOR`` and ``--color``.
"""
from __future__ import annotations

import os
from typing import TextIO

from estimator2keras._context import Finding
from estimator2keras._engine import FileResult

_RESET = "\033[0m"
_STYLES = {
    "path": "\033[1m",  # bold
    "where": "\033[2m",  # dim
    "manual": "\033[33m",  # yellow: left for a human
    "error": "\033[1;31m",  # bold red: the file could not be processed
    "fixed": "\033[32m",  # green: converted
}


def use_color(choice: str, stream: TextIO) -> bool:
    """``choice`` is ``always``, ``never`` or ``auto`` (a terminal, unless NO_COLOR is set)."""
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


class Style:
    def __init__(self, color: bool):
        self.color = color

    def __call__(self, kind: str, text: str) -> str:
        if not self.color or kind not in _STYLES:
            return text
        return f"{_STYLES[kind]}{text}{_RESET}"

    def finding(self, finding: Finding) -> str:
        rest = finding.location[len(finding.path):]
        where = self("path", finding.path) + self("where", rest + ":")
        return f"{where} {self(finding.kind, finding.code)} {finding.message}"


def sort_key(finding: Finding) -> tuple:
    return (finding.cell or 0, finding.line, finding.col, finding.code)


def write_human(results: list[FileResult], out: TextIO, *, verbose: bool, verb: str, style: Style) -> None:
    """Per changed file ``path: <verb>``, then its findings in file order (only those left for
    a human or in error, unless ``verbose``)."""
    for result in sorted(results, key=lambda r: r.path):
        if result.changed:
            prefix = "partially " if result.status == "partial" else ""
            print(f"{style('path', result.path)}: {prefix}{verb}", file=out)
        for finding in sorted(result.findings, key=sort_key):
            if finding.kind != "fixed" or verbose:
                print(style.finding(finding), file=out)


#: Blockers listed in the coverage summary.
TOP_BLOCKERS = 5


def write_coverage(coverage: dict, out: TextIO, *, style: Style, width: int = 100) -> None:
    """The coverage summary (``RunSummary.coverage()``), after the per-file lines: a few lines
    a team lead reads after `e2k rewrite --check DIR`."""
    files = coverage["estimator_files"]
    if not files:
        line = "coverage: no file with Estimator code"
    else:
        share = f" ({100 * coverage['converted'] / files:.0f}%)"
        line = (
            f"coverage: {files} file{'s' if files != 1 else ''} with Estimator code: "
            f"{style('fixed', str(coverage['converted']) + ' converted fully')}{share}, "
            f"{style('manual', str(coverage['partial']) + ' partial')}"
        )
    if coverage["error"]:
        line += f"; {style('error', str(coverage['error']) + ' could not be read')}"
    print(line, file=out)
    blockers = coverage["blockers"][:TOP_BLOCKERS]
    if blockers:
        print("most frequent blockers (files):", file=out)
        for blocker in blockers:
            message = blocker["message"]
            if len(message) > width:
                message = message[: width - 3] + "..."
            print(f"{blocker['files']:6d}  {style('manual', blocker['code'])} {message}", file=out)
