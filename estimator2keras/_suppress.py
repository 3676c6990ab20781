"""``# e2k: ignore`` and ``# e2k: ignore[E2K123,E2K4]``: leave one line alone.

A suppression covers one line: the line it trails, or, written alone on a line, the next
line of code (other comment lines may stand between them; a blank line ends it). Codes may
be prefixes, as with ``--ignore``; without codes every rule is suppressed on that line.

On a covered line nothing is reported, marked or converted: findings reported there are
dropped, a module rule's edits of code that starts there are dropped, and an Estimator unit
is not converted when it would report a conversion on a line suppressed for that code, or
replace code that starts on a line suppressed for the rule that owns the unit (E2K001) or
for every rule. A unit whose Estimator construction line is suppressed is left entirely
alone; otherwise the refusal is reported at the Estimator (E2K902) with the line.
"""
from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from estimator2keras._rule import Unsupported

if TYPE_CHECKING:
    from estimator2keras._context import RewriteContext

_COMMENT = re.compile(r"#\s*e2k:\s*ignore\b(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE)
_CODE = re.compile(r"^E2K\d{0,3}$")
_SKIPPED_TOKENS = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}


def _parse(comment: str) -> tuple[bool, frozenset[str] | None]:
    """(is a suppression, codes or None for all)."""
    match = _COMMENT.search(comment)
    if match is None:
        return False, None
    if match.group("codes") is None:
        return True, None
    codes = frozenset(c.strip().upper() for c in match.group("codes").split(",") if c.strip())
    codes = frozenset(c for c in codes if _CODE.match(c))
    return (bool(codes), codes or None)


@dataclass
class Suppressions:
    """Suppressed lines of one source: line -> codes (None: every code)."""

    lines: dict[int, frozenset[str] | None] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.lines)

    def add(self, line: int, codes: frozenset[str] | None) -> None:
        if line in self.lines:
            known = self.lines[line]
            codes = None if known is None or codes is None else known | codes
        self.lines[line] = codes

    def covers(self, line: int, code: str | None = None) -> bool:
        """Whether ``code`` (any code, when None) is suppressed on ``line``."""
        if line not in self.lines:
            return False
        codes = self.lines[line]
        if codes is None:
            return True
        if code is None:
            return False
        return any(code.startswith(prefix) for prefix in codes)

    @classmethod
    def from_source(cls, source: bytes) -> "Suppressions":
        found = cls()
        if b"e2k" not in source or b"ignore" not in source:
            return found  # the common case costs one scan of the bytes
        pending: list[frozenset[str] | None] = []
        try:
            for token in tokenize.tokenize(io.BytesIO(source).readline):
                if token.type == tokenize.COMMENT:
                    is_suppression, codes = _parse(token.string)
                    if not is_suppression:
                        continue
                    own_line = not token.line[: token.start[1]].strip()
                    if own_line:
                        pending.append(codes)
                    else:
                        found.add(token.start[0], codes)
                elif token.type == tokenize.NL and not token.line.strip():
                    pending = []  # a blank line: the comment above belongs to nothing
                elif token.type not in _SKIPPED_TOKENS and token.type != tokenize.ENDMARKER:
                    for codes in pending:
                        found.add(token.start[0], codes)
                    pending = []
        except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):
            return cls._from_lines(source)
        return found

    @classmethod
    def _from_lines(cls, source: bytes) -> "Suppressions":
        """Fallback when the tokenizer gives up: trailing comments only, line by line."""
        found = cls()
        for number, raw in enumerate(source.decode("utf-8", errors="replace").splitlines(), start=1):
            is_suppression, codes = _parse(raw)
            if is_suppression and raw.lstrip() and not raw.lstrip().startswith("#"):
                found.add(number, codes)
        return found


def check_unit(plan, ctx: "RewriteContext") -> None:
    """Refuse a unit conversion that would change code on a suppressed line.

    Raises ``Unsupported`` (reported at the Estimator, as E2K902) naming the line."""
    suppressions = ctx.suppressions
    if not suppressions:
        return
    owner = plan.unit.owner.code
    for node, code in plan.changes():
        line = ctx.position(node)[0]
        # A conversion reported on the line is refused for its own code; code replaced on the
        # line, for the rule that owns the unit (and for a bare `# e2k: ignore`).
        if suppressions.covers(line, code or owner):
            raise Unsupported(
                f"the Estimator is not converted: line {line} is marked `# e2k: ignore`, and converting "
                "the Estimator would change it",
                plan.unit.call,
                "E2K902",
            )
