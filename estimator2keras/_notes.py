"""e2k's own notes, written once per file.

A rule explains what it changed in a comment above the code it wrote. The notes that say
what the conversion changed (``Global batch: Keras splits it across replicas ...``, which a
rule declares in its ``notes``) are then taken from there and listed once, in a short header
at the top of the file, each with its rule's code for ``e2k explain``. The others say why
the code beside them is as it is, and stay there; where the same one comes out at several
places of one file, only the first is kept. A note is a paragraph of
comment lines on their own; it is e2k's when none of its lines is in the file as it was, so
the user's comments, wherever they moved, are never dropped. ``# e2k: CODE`` marks stay at
every place they mark.
"""
from __future__ import annotations

import re
import textwrap

import libcst as cst

_OWN_LINE_COMMENT = re.compile(r"^[ \t]*(#.*?)[ \t]*$", re.MULTILINE)


def drop_repeated_notes(module: cst.Module, code: bytes, source: bytes) -> cst.Module:
    """``module`` (whose text is ``code``; ``source``, the file as it was) with each of e2k's
    notes kept only where it first appears."""
    text, original = (b.decode(module.encoding, errors="replace") for b in (code, source))
    repeated = _repeated_paragraphs(text, _user_comments(original))
    if not repeated:
        return module
    return module.visit(_DropRepeated(repeated))


def _user_comments(original: str) -> set[str]:
    """The own-line comments of the file as it was, read line by line as the notes are: in a
    "\r\n" file too (a multiline regex's $ stops before "\n", not "\r", and would miss them)."""
    return {m.group(1) for line in original.splitlines() if (m := _OWN_LINE_COMMENT.fullmatch(line))}


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


#: The first line of the header that lists e2k's notes on a file.
HEADER = "# e2k converted this file to Keras (`e2k explain CODE` says more):"


def notes_to_header(module: cst.Module, source: bytes, notes: dict[str, str], limit: int) -> cst.Module:
    """``module`` with each of ``notes`` (a note's text: the code of the rule that writes it)
    taken from where e2k wrote it and listed once in the file's header, under ``HEADER``: at
    the top of the module, after its docstring, shebang and leading comments. A header
    already there (a file converted in part, then again) gets the notes it lacks."""
    if not notes or not module.body:
        return module
    original = source.decode(module.encoding, errors="replace")
    gather = _Gather(notes, _user_comments(original))
    gathered = module.visit(gather)
    if not gather.found:
        return module
    return with_header(gathered, lambda items: items + [note for note in gather.found if note not in items],
                       limit) or module


def with_header(module: cst.Module, update, limit: int) -> cst.Module | None:
    """``module`` with its header listing ``update(notes)`` (the (text, code) pairs it lists,
    none where it has no header yet); None where a module of a docstring alone has no place
    for one."""
    body = list(module.body)
    docstring = bool(body) and _is_docstring(body[0])
    if not body or docstring and len(body) == 1:
        return None
    lines = list(body[1].leading_lines if docstring else module.header)
    start, end, items = _header_at(lines)
    if start is None:
        start = end = _header_place(lines)
    header = [cst.EmptyLine(comment=cst.Comment(HEADER))]
    for text, code in update(items):
        wrapped = textwrap.wrap(f"{code} {text}", max(limit - 4, 40), break_long_words=False,
                                break_on_hyphens=False)
        header += [cst.EmptyLine(comment=cst.Comment(("# - " if i == 0 else "#   ") + part))
                   for i, part in enumerate(wrapped)]
    if start > 0 and lines[start - 1].comment is not None:
        header.insert(0, cst.EmptyLine())  # after the file's own comments, apart from them
    if end < len(lines) and lines[end].comment is not None:
        header.append(cst.EmptyLine())
    lines[start:end] = header
    if docstring:
        body[1] = body[1].with_changes(leading_lines=lines)
        return module.with_changes(body=body)
    return module.with_changes(header=lines)


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and \
        isinstance(statement.body[0], cst.Expr) and \
        isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


def _header_place(lines: list[cst.EmptyLine]) -> int:
    """Where a new header goes among the lines above the first statement: after the last
    blank line (the comments after it are the statement's), else after a shebang or coding
    line, else first."""
    blanks = [i for i, line in enumerate(lines) if line.comment is None]
    if blanks:
        return blanks[-1] + 1
    place = 0
    while place < len(lines) and re.match(r"#!|#.*coding[:=]", lines[place].comment.value):
        place += 1
    return place


def _header_at(lines: list[cst.EmptyLine]) -> tuple[int | None, int, list[tuple[str, str]]]:
    """(where e2k's header is among ``lines``, the index after it, the notes it lists)."""
    starts = [i for i, line in enumerate(lines) if line.comment is not None and line.comment.value == HEADER]
    if not starts:
        return None, 0, []
    start = starts[0]
    items: list[list[str]] = []
    end = start + 1
    while end < len(lines) and lines[end].comment is not None:
        value = lines[end].comment.value
        if value.startswith("# - "):
            items.append([value[4:]])
        elif value.startswith("#   ") and items:
            items[-1].append(value[4:])
        else:
            break
        end += 1
    parsed = []
    for item in items:
        code, _, text = " ".join(item).partition(" ")
        parsed.append((text, code))
    return start, end, parsed


class _Gather(cst.CSTTransformer):
    """Takes the notes out of the lines above statements (and the module's first ones), in
    the order the file reads."""

    def __init__(self, notes: dict[str, str], users: set[str]):
        super().__init__()
        self.notes = notes
        self.users = users
        self.found: list[tuple[str, str]] = []
        self.kept: dict[int, list[cst.EmptyLine]] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        lines = node.header if isinstance(node, cst.Module) else getattr(node, "leading_lines", None)
        if lines:
            kept = self._kept(list(lines))
            if len(kept) != len(lines):
                self.kept[id(node)] = kept
        return True

    def on_leave(self, original_node, updated_node):
        kept = self.kept.pop(id(original_node), None)
        if kept is not None:
            field = "header" if isinstance(updated_node, cst.Module) else "leading_lines"
            updated_node = updated_node.with_changes(**{field: kept})
        return updated_node

    def _kept(self, lines: list[cst.EmptyLine]) -> list[cst.EmptyLine]:
        kept: list[cst.EmptyLine] = []
        index = 0
        while index < len(lines):
            taken = self._note_at(lines, index)
            if taken is None:
                kept.append(lines[index])
                index += 1
            else:
                index = taken
        return kept

    def _note_at(self, lines: list[cst.EmptyLine], index: int) -> int | None:
        """The index after the note that starts at ``lines[index]`` (a note may take several
        lines), or None when none does."""
        comment = lines[index].comment
        if comment is None or comment.value.rstrip() in self.users or not comment.value.startswith("# "):
            return None
        first = comment.value.rstrip()[2:]
        for text, code in self.notes.items():
            if not text.startswith(first):
                continue
            words, taken = first, index + 1
            while words != text and taken < len(lines) and lines[taken].comment is not None:
                words += " " + lines[taken].comment.value.rstrip()[2:]
                taken += 1
            if words == text:
                if (text, code) not in self.found:
                    self.found.append((text, code))
                return taken
        return None
