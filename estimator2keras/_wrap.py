"""Every statement e2k writes fits the file's line length; the lines it did not touch stay
byte-identical.

The limit is the project's (``line-length`` of ``[tool.black]`` or ``[tool.ruff]`` in the nearest
``pyproject.toml``, ``max-line-length`` of ``[flake8]`` / ``[pycodestyle]`` in ``setup.cfg``,
``tox.ini`` or ``.flake8``), else the file's own longest line, and at least 79. A statement
with a line e2k wrote that is over it is formatted by black, on its own (at the limit less its
indent, keeping the quotes it has): black wraps calls, collections and imports the way
most Python written today is wrapped. Where the file's own wrapped brackets close at the end
of their last line (``f(a,\n    b)``, the Google and PEP 8 habit) rather than on a line of
their own (black's), the brackets black closes on lines of their own close where the line
before ends, as the file's do. A statement black cannot bring under the limit (one long
string) is left as it was written.
"""
from __future__ import annotations

import ast
import configparser
import difflib
import functools
import os

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

#: PEP 8's limit: the least a file's limit is taken to be.
PEP8 = 79
_MARKERS = ("pyproject.toml", "setup.cfg", "tox.ini", ".flake8", ".git")


def line_limit(path: str, original: str) -> int:
    configured = _configured(os.path.dirname(os.path.abspath(path))) if path and os.path.exists(path) else None
    if configured:
        return configured
    return max([PEP8, *(len(line) for line in original.splitlines())])


@functools.lru_cache(maxsize=256)
def _configured(directory: str) -> int | None:
    """The line length the project containing ``directory`` sets for its formatter or linter."""
    while True:
        found = None
        pyproject = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(pyproject):
            try:
                with open(pyproject, "rb") as stream:
                    tool = tomllib.load(stream).get("tool", {})
            except (OSError, tomllib.TOMLDecodeError):
                tool = {}
            for name in ("black", "ruff"):
                value = tool.get(name, {}).get("line-length")
                if isinstance(value, int) and value > 0:
                    found = found or value
        for name in ("setup.cfg", "tox.ini", ".flake8"):
            path = os.path.join(directory, name)
            if found is None and os.path.isfile(path):
                parser = configparser.ConfigParser(interpolation=None)
                try:
                    parser.read(path, encoding="utf-8")
                except (OSError, configparser.Error, UnicodeDecodeError):
                    continue
                for section in ("flake8", "pycodestyle", "pep8"):
                    value = parser.get(section, "max-line-length", fallback=None) or \
                        parser.get(section, "max_line_length", fallback=None)
                    if value and value.strip().isdigit():
                        found = int(value)
                        break
        if found is not None:
            return found
        if any(os.path.exists(os.path.join(directory, m)) for m in _MARKERS):
            return None  # the project's root, which sets none
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def wrap(new: str, original: str, limit: int) -> str:
    """``new`` with each statement that has a line e2k wrote (not one of ``original``'s) over
    ``limit`` formatted to fit it, and its continuation lines aligned with their brackets."""
    new = realign(new, original)
    lines = new.splitlines(keepends=True)
    if all(len(line.rstrip("\r\n")) <= limit for line in lines):
        return new
    written = _written_lines(original.splitlines(keepends=True), lines)
    long_lines = {i for i in written if len(lines[i].rstrip("\r\n")) > limit}
    if not long_lines:
        return new
    moved = _comments_above(lines, long_lines, limit)
    if moved is not None:
        # A line over the limit only for its comment: the comment goes above it, on its own.
        return wrap(moved, original, limit)
    try:
        tree = ast.parse(new)
    except SyntaxError:
        return new
    hug = closers_hug(original)
    found = [(first, last, kind) for first, last, kind in _spans(tree, lines)
             if any(first <= i <= last for i in long_lines)]
    statements = [(f, l) for f, l, kind in found if kind == "statement"]
    comments = dict.fromkeys((*_paragraph(lines, i, written), "comment") for i in long_lines
                             if lines[i].strip().startswith("#") and not lines[i].strip().startswith("# e2k:"))
    for first, last, kind in sorted([*((f, l, "statement") for f, l in _outermost(statements)),
                                     *(span for span in found if span[2] != "statement"), *comments], reverse=True):
        if kind == "comment":
            formatted = _comment(lines[first:last + 1], limit)
        elif kind == "docstring":
            formatted = _docstring(lines[first:last + 1], limit)
        else:
            formatted = _formatted(lines[first:last + 1], limit, header=kind == "header", hug=hug)
        if formatted is not None:
            lines[first:last + 1] = formatted
    return "".join(lines)


def realign(new: str, original: str) -> str:
    """``new`` with the continuation lines of each statement e2k wrote aligned again under
    the bracket they were aligned with (``f(a,\n  b)``, ``b`` under ``a``), where e2k moved
    that bracket: ``params={"lr": 0.1,`` became ``model = build_model({"lr": 0.1,``, and the
    next line, written for the old column, stayed where it was."""
    lines = new.splitlines(keepends=True)
    written = _written_lines(original.splitlines(keepends=True), lines)
    if not written:
        return new
    try:
        tree = ast.parse(new)
    except SyntaxError:
        return new
    spans = [(first, last) for first, last, kind in _spans(tree, lines) if kind != "docstring" and last > first]
    for first, last in _outermost(spans):
        if any(first <= i <= last for i in written):
            lines[first:last + 1] = _aligned(lines[first:last + 1])
    return "".join(_blank_runs(lines, written))


def _spans(tree: ast.Module, lines: list[str]):
    """(first, last, kind) of each statement of ``tree`` (0-based lines): a simple one's lines,
    "statement" or a "docstring"; a compound one's "header", its decorators and its line(s)
    up to its body, without the comments above the body."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        body = getattr(node, "body", None)
        if body is None:  # a simple statement
            first, last = node.lineno - 1, node.end_lineno - 1
            string = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str)
            docstring = string and ('"""' in lines[first] or "'''" in lines[first])
            yield first, last, "docstring" if docstring else "statement"
        elif body and body[0].lineno > node.lineno:
            decorators = getattr(node, "decorator_list", [])
            first = min([node.lineno, *(d.lineno for d in decorators)]) - 1
            last = body[0].lineno - 2
            while last > first and lines[last].strip()[:1] in ("#", ""):
                last -= 1
            yield first, last, "header"


def _blank_runs(lines: list[str], written: set[int]) -> list[str]:
    """No more than two blank lines in a row (PEP 8) where e2k wrote one of them: a removed
    statement's blank lines beside those of what replaced it."""
    kept, run = [], []
    for index, line in enumerate(lines + ["end"]):
        if line.strip() == "" and index < len(lines):
            run.append(index)
            continue
        if len(run) > 2 and any(i in written for i in run):
            run = run[:2]
        kept.extend(lines[i] for i in run)
        run = []
        if index < len(lines):
            kept.append(line)
    return kept


def _aligned(lines: list[str]) -> list[str]:
    """One statement's lines, each continuation line of a bracket whose contents start on the
    bracket's line (visual indentation) moved to the column after the bracket."""
    for _ in range(len(lines)):
        found = _misaligned(lines)
        if found is None:
            break
        row, shift = found
        line = lines[row]
        if shift < 0 and len(_indent(line)) < -shift:
            break
        lines[row] = " " * shift + line if shift > 0 else line[-shift:]
    return lines


def _misaligned(lines: list[str]) -> tuple[int, int] | None:
    """(line, columns to move it by) of the first continuation line not under its bracket."""
    import io
    import tokenize

    opened: list[tuple[int, int, bool]] = []  # row, column, contents follow on its line
    previous_row = 0
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("".join(lines)).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    for index, token in enumerate(tokens):
        row, col = token.start[0] - 1, token.start[1]
        if token.type in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT,
                          tokenize.ENDMARKER):
            continue
        if row > previous_row and opened and token.string not in ")]}":
            bracket_row, bracket_col, visual = opened[-1]
            if visual and row > bracket_row and col != bracket_col + 1:
                return row, bracket_col + 1 - col
        previous_row = max(previous_row, token.end[0] - 1)
        if token.type == tokenize.OP and token.string in "([{":
            following = next((t for t in tokens[index + 1:] if t.type != tokenize.COMMENT), None)
            visual = following is not None and following.type not in (tokenize.NL, tokenize.NEWLINE) \
                and following.start[0] == token.start[0] and following.string not in ")]}"
            opened.append((row, col, visual))
        elif token.type == tokenize.OP and token.string in ")]}" and opened:
            opened.pop()
    return None


def _comments_above(lines: list[str], long_lines: set[int], limit: int) -> str | None:
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("".join(lines)).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    moves = {}
    for token, following in zip(tokens, tokens[1:]):
        row = token.start[0] - 1
        if token.type != tokenize.COMMENT or row not in long_lines or following.type != tokenize.NEWLINE:
            continue
        line = lines[row]
        code = line[:token.start[1]].rstrip()
        if not code.strip() or len(code) > limit:
            continue
        moves[row] = [*_comment(_indent(line) + token.string + _ending(line), limit), code + _ending(line)]
    if not moves:
        return None
    for row in sorted(moves, reverse=True):
        lines[row:row + 1] = moves[row]
    return "".join(lines)


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


def _ending(line: str) -> str:
    return "\r\n" if line.endswith("\r\n") else "\n"


def _outermost(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    spans = sorted(set(spans))
    kept: list[tuple[int, int]] = []
    for first, last in spans:
        if kept and first <= kept[-1][1]:
            continue  # a statement on a line of another (`a; b`): left as it is
        kept.append((first, last))
    return kept


def _written_lines(old: list[str], new: list[str]) -> set[int]:
    """Indexes of the lines of ``new`` that are not ``old``'s, kept in place."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    written = set()
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            written.update(range(j1, j2))
    return written


def _paragraph(lines: list[str], at: int, written: set[int]) -> tuple[int, int]:
    """(first, last) of the own-line comments e2k wrote around line ``at`` at its indent that
    continue one sentence (a line not ending it: ".", ":", "!", "?"), filled again together
    (not "so\n# that the")."""
    def same(i: int) -> bool:
        text = lines[i].strip()
        return i in written and text.startswith("#") and not text.startswith("# e2k:") and text != "#" \
            and _indent(lines[i]) == _indent(lines[at])

    def ends(i: int) -> bool:  # a sentence ends on this line: the next starts another
        return lines[i].rstrip().endswith((".", ":", "!", "?"))

    first = last = at
    while first > 0 and same(first - 1) and not ends(first - 1):
        first -= 1
    while last + 1 < len(lines) and same(last + 1) and not ends(last):
        last += 1
    texts = [lines[i].strip()[1:] for i in range(first, last + 1)]
    if any(text.startswith(("  ", " - ", " * ")) for text in texts):
        return at, at  # a list, or a code example: its lines stay lines
    return first, last


def _comment(block: list[str], limit: int) -> list[str]:
    """Own-line comments e2k wrote, one over the limit: their words on as many lines as it takes."""
    import textwrap

    line = block[0]
    indent, ending = _indent(line), _ending(line)
    text = " ".join(part.strip()[1:].strip() for part in block)
    width = max(limit - len(indent) - 2, 30)
    return [f"{indent}# {part}{ending}" for part in textwrap.wrap(text, width, break_long_words=False,
                                                                     break_on_hyphens=False)] or block


def _docstring(lines: list[str], limit: int) -> list[str] | None:
    """A docstring with a line over the limit: the paragraphs with such a line re-filled to
    fit, its other lines, its quotes and its indent kept."""
    import textwrap

    ending = _ending(lines[0])
    body = [line.rstrip("\r\n") for line in lines]
    if "\\" in "".join(body) or not body[0].lstrip().startswith(('"""', "'''")):
        return None
    paragraphs: list[list[str]] = [[]]
    for line in body:
        if line.strip():
            paragraphs[-1].append(line)
        else:
            paragraphs.append([])
            paragraphs[-1].append(line)
            paragraphs.append([])
    out: list[str] = []
    for paragraph in paragraphs:
        if not paragraph or not any(len(line) > limit for line in paragraph):
            out.extend(paragraph)
            continue
        here = _indent(paragraph[0])
        words = " ".join(line.strip() for line in paragraph)
        width = limit - len(here)
        filled = textwrap.wrap(words, width, break_long_words=False, break_on_hyphens=False)
        if filled and len(filled[-1]) > width:
            return None
        out.extend(here + line for line in filled)
    if any(len(line) > limit for line in out):
        return None
    return [line + ending for line in out]


def closers_hug(original: str) -> bool:
    """Whether the file closes the brackets it wraps at the end of their last line (``f(a,\n
    b)``) more often than on a line of their own (``f(\n    a, b\n)``). A file that wraps
    nothing shows no habit: black's is taken."""
    import io
    import tokenize

    own = hugging = 0
    opened: list[int] = []
    last_code_row = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(original).readline):
            if token.type == tokenize.OP and token.string in "([{":
                opened.append(token.start[0])
            elif token.type == tokenize.OP and token.string in ")]}" and opened:
                if opened.pop() != token.start[0]:
                    if last_code_row < token.start[0]:
                        own += 1
                    else:
                        hugging += 1
            if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT,
                                  tokenize.DEDENT):
                last_code_row = token.end[0]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return False
    return hugging > own


def _hugged(lines: list[str], width: int) -> list[str]:
    """Black's lines with each line that starts with closing brackets joined to the line before
    it where that fits ``width``, the trailing comma black added there dropped (kept where it
    makes a tuple: the code stays the same)."""
    for drop_commas in (True, False):
        out = list(lines)
        index = 1
        while index < len(out):
            rest, before = out[index].lstrip(), out[index - 1].rstrip()
            if rest[:1] in (")", "]", "}") and "#" not in before and before.strip():
                if drop_commas and before.endswith(","):
                    before = before[:-1]
                if len(before) + len(rest) <= width:
                    out[index - 1:index + 1] = [before + rest]
                    continue
            index += 1
        try:
            if ast.dump(ast.parse("\n".join(out))) == ast.dump(ast.parse("\n".join(lines))):
                return out
        except SyntaxError:
            pass
    return lines


def _formatted(lines: list[str], limit: int, header: bool = False, hug: bool = False) -> list[str] | None:
    first = lines[0]
    indent, ending = _indent(first), _ending(first)
    if "\t" in indent or ";" in first and first.count(";") != first.count("';'"):
        return None
    body = [first[len(indent):]] + [line[len(indent):] if line.startswith(indent) else line.lstrip(" ")
                                    for line in lines[1:]]
    source = "".join(line.rstrip("\r\n") + "\n" for line in body)
    if header:
        source += "    pass\n"
    try:
        import black

        mode = black.Mode(line_length=max(limit - len(indent), 40), string_normalization=False)
        result = black.format_str(source, mode=mode)
    except Exception:  # black cannot format it (a syntax it does not know): leave it
        return None
    result_lines = result.rstrip("\n").split("\n")
    if hug:
        result_lines = _hugged(result_lines, limit - len(indent))
    if header:
        if result_lines[-1].strip() != "pass":
            return None
        result_lines = result_lines[:-1]
    out = [indent + line + ending if line else ending for line in result_lines]
    widest = max(len(line.rstrip("\r\n")) for line in out)
    if widest > limit and widest >= max(len(line.rstrip("\r\n")) for line in lines):
        return None
    return out
