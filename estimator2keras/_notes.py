"""e2k's own notes, written once per file.

A rule explains what it changed in a comment above the code it wrote (``# Global batch:
Keras splits it across replicas ...`` above each converted input_fn); where the same note
comes out at several places of one file, only the first is kept. A note is a paragraph of
comment lines on their own; it is e2k's when none of its lines is in the file as it was, so
the user's comments, wherever they moved, are never dropped. ``# e2k: CODE`` marks stay at
every place they mark.
"""
from __future__ import annotations

import re

import libcst as cst

_OWN_LINE_COMMENT = re.compile(r"^[ \t]*(#.*?)[ \t]*$", re.MULTILINE)


def drop_repeated_notes(module: cst.Module, code: bytes, source: bytes) -> cst.Module:
    """``module`` (whose text is ``code``; ``source``, the file as it was) with each of e2k's
    notes kept only where it first appears."""
    text, original = (b.decode(module.encoding, errors="replace") for b in (code, source))
    repeated = _repeated_paragraphs(text, set(_OWN_LINE_COMMENT.findall(original)))
    if not repeated:
        return module
    return module.visit(_DropRepeated(repeated))


def _repeated_paragraphs(code: str, users: set[str]) -> set[tuple[str, ...]]:
    """The notes that appear more than once in ``code``: runs of own-line comments (a quick
    read of the text, so that a file without any is not walked)."""
    seen: set[tuple[str, ...]] = set()
    repeated: set[tuple[str, ...]] = set()
    paragraph: list[str] = []
    for line in [*code.splitlines(), ""]:
        match = _OWN_LINE_COMMENT.fullmatch(line)
        if match:
            paragraph.append(match.group(1))
            continue
        if paragraph and _is_note(paragraph, users):
            key = tuple(paragraph)
            (repeated if key in seen else seen).add(key)
        paragraph = []
    return repeated


def _is_note(paragraph, users: set[str]) -> bool:
    return not any(line in users or line.startswith("# e2k:") for line in paragraph)


class _DropRepeated(cst.CSTTransformer):
    """Drops the second and later occurrences of each repeated note from statements' leading
    lines, in the order the file reads (a statement's leading lines come before its body)."""

    def __init__(self, repeated: set[tuple[str, ...]]):
        super().__init__()
        self.repeated = repeated
        self.written: set[tuple[str, ...]] = set()
        self.kept: dict[int, tuple[cst.EmptyLine, ...]] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        lines = getattr(node, "leading_lines", None)
        if lines:
            kept = self._kept(lines)
            if len(kept) != len(lines):
                self.kept[id(node)] = kept
        return True

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        kept = self.kept.pop(id(original_node), None)
        if kept is not None:
            updated_node = updated_node.with_changes(leading_lines=kept)
        return updated_node

    def _kept(self, lines) -> tuple[cst.EmptyLine, ...]:
        kept: list[cst.EmptyLine] = []
        paragraph: list[cst.EmptyLine] = []
        for line in [*lines, None]:
            if line is not None and line.comment is not None:
                paragraph.append(line)
                continue
            key = tuple(p.comment.value.rstrip() for p in paragraph)
            if key in self.repeated and key in self.written:
                paragraph = []  # said before in this file
            self.written.add(key)
            kept.extend(paragraph)
            paragraph = []
            if line is not None:
                kept.append(line)
        return tuple(kept)
