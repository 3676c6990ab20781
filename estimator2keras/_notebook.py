"""Jupyter notebooks (.ipynb): the code cells are converted together, as one program.

An Estimator program in a notebook is usually spread over cells (imports, input_fn,
model_fn, the Estimator, training), so the code cells are joined into one module, with a
boundary statement between cells, converted like a .py file, and split back into the same
cells. Markdown and raw cells, outputs, execution counts and all metadata are left as they
were; a cell whose code does not change keeps its exact source. The notebook is written back
with the JSON layout it was read with (indent, key order, escaping).

IPython syntax is left as it is: ``%magic`` and ``!shell`` lines (and ``x = !cmd``,
``obj?``) stand in the program as placeholder comments and are put back verbatim; a cell
that starts with ``%%time``, ``%%timeit``, ``%%capture`` or ``%%prun`` is converted below
that line; any other cell magic (``%%bash``, ``%%writefile``...) keeps the whole cell out
of the program. If the conversion would change a name such a line or cell uses, or would
move or drop such a line, the notebook is left unchanged and E2K904 says where.

Findings are reported as ``path:cell N:line:col``: N counts every cell from 1, markdown
included (the position of the cell in the notebook), and the line is the line in the cell.
"""
from __future__ import annotations

import ast
import difflib
import json
import re
from dataclasses import dataclass, field

from estimator2keras._context import Finding
from estimator2keras._engine import UNREADABLE, FileResult, rewrite_source
from estimator2keras._registry import RuleSet

IPYTHON = "E2K904"
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})
_BOUNDARY = "'e2k: cell {}'"
_BOUNDARY_LINE = re.compile(r"^'e2k: cell (\d+)'$")
_PLACEHOLDER = "# e2k-ipython {}"
_PLACEHOLDER_LINE = re.compile(r"^(?P<indent>[ \t]*)(?:pass  )?# e2k-ipython (?P<k>\d+)$")
_MAGIC_LINE = re.compile(
    r"^\s*(?:[%!]|\?)"  # %magic, !shell, ?help
    r"|^\s*[\w.\[\]'\", ]+\s*=\s*[%!]"  # x = !ls, x = %who_ls
    r"|^\s*[\w.]+\s*\?\??\s*$"  # obj?
)
_NAME = re.compile(r"[A-Za-z_]\w*")


@dataclass
class _Hidden:
    """An IPython line (or a whole non-Python cell) kept out of the program."""

    cell: int  # index among all cells, 0-based
    line: int  # line in the cell, 1-based
    text: str
    first_line_only: bool = False  # a %%time line: must stay the cell's first line


@dataclass
class _Program:
    cells: list  # every cell of the notebook
    source: str = ""
    #: joined line (1-based, index 0 unused) -> (cell index, line in cell)
    lines: list = field(default_factory=lambda: [None])
    included: list[int] = field(default_factory=list)  # code cells in the program, in order
    hidden: list[_Hidden] = field(default_factory=list)
    excluded: list[tuple[int, str]] = field(default_factory=list)  # (cell, its text)
    error: tuple[int, int, str] | None = None  # (cell, line, message)


def _cell_text(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _parses(text: str) -> SyntaxError | None:
    try:
        compile(text, "<cell>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError as exc:
        return exc
    except ValueError as exc:  # null bytes
        return SyntaxError(str(exc))
    return None


def _build(cells: list) -> _Program:
    program = _Program(cells)
    chunks: list[str] = []

    def add(text: str, cell: int | None) -> None:
        for number, line in enumerate(text.splitlines(), start=1):
            chunks.append(line + "\n")
            program.lines.append((cell, number) if cell is not None else None)

    for index, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        text = _cell_text(cell)
        lines = text.splitlines()
        hidden: list[_Hidden] = []
        first = lines[0].strip() if lines else ""
        if first.startswith("%%"):
            name = first[2:].split(None, 1)[0] if first[2:].strip() else ""
            if name not in PYTHON_CELL_MAGICS:
                program.excluded.append((index, text))
                continue
            hidden.append(_Hidden(index, 1, lines[0], first_line_only=True))
            lines[0] = _PLACEHOLDER.format(len(program.hidden) + len(hidden) - 1)
        body = "\n".join(lines) + "\n"
        if _parses(body) is not None:
            for number, line in enumerate(lines, start=1):
                if number == 1 and hidden:
                    continue
                if _MAGIC_LINE.match(line):
                    k = len(program.hidden) + len(hidden)
                    hidden.append(_Hidden(index, number, line))
                    indent = line[: len(line) - len(line.lstrip())]
                    lines[number - 1] = f"{indent}pass  {_PLACEHOLDER.format(k)}" if indent else _PLACEHOLDER.format(k)
            body = "\n".join(lines) + "\n"
            error = _parses(body)
            if error is not None:
                program.error = (index, error.lineno or 1, error.msg)
                return program
        if program.included:
            add(_BOUNDARY.format(index), None)
        program.included.append(index)
        program.hidden.extend(hidden)
        add(body, index)
    program.source = "".join(chunks)
    return program


def _split(program: _Program, new_source: str) -> tuple[dict[int, str] | None, _Hidden | None, str]:
    """Cell index -> new text of every included cell; or the hidden line that would be lost."""
    segments: dict[int, list[str]] = {program.included[0]: []} if program.included else {}
    current = program.included[0] if program.included else None
    order = [current]
    for line in new_source.splitlines():
        match = _BOUNDARY_LINE.match(line)
        if match:
            current = int(match.group(1))
            order.append(current)
            segments[current] = []
            continue
        segments[current].append(line)
    if order != program.included:
        return None, program.hidden[0] if program.hidden else None, "the conversion would move code across cells"
    seen: dict[int, int] = {}
    for cell, lines in segments.items():
        for number, line in enumerate(lines):
            match = _PLACEHOLDER_LINE.match(line)
            if match:
                k = int(match.group("k"))
                hidden = program.hidden[k]
                if k in seen or hidden.cell != cell or (hidden.first_line_only and number != 0):
                    return None, hidden, "the conversion would move this IPython line"
                seen[k] = cell
                lines[number] = hidden.text
    for k, hidden in enumerate(program.hidden):
        if k not in seen:
            return None, hidden, "the conversion would drop this IPython line"
    return {cell: "\n".join(lines) for cell, lines in segments.items()}, None, ""


def _bindings(source: str) -> dict[str, list[str]]:
    """Module-level name -> the module-level statements that bind it (as ast dumps)."""
    bound: dict[str, list[str]] = {}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return bound

    def names(statement) -> set[str]:
        found: set[str] = set()
        stack = [statement]
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(node.name)
                stack.extend(node.decorator_list)
                continue
            if isinstance(node, ast.Lambda):
                continue
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                found.add(node.id)
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    found.add((alias.asname or alias.name).split(".")[0])
            stack.extend(ast.iter_child_nodes(node))
        return found

    for statement in tree.body:
        for name in names(statement):
            bound.setdefault(name, []).append(ast.dump(statement))
    return bound


def _changed_names(before: str, after: str) -> set[str]:
    old, new = _bindings(before), _bindings(after)
    return {name for name in old.keys() | new.keys() if old.get(name) != new.get(name)}


# -- the JSON layout ---------------------------------------------------------------------
@dataclass
class _Layout:
    indent: int | str | None
    separators: tuple[str, str]
    ensure_ascii: bool
    trailing: str
    exact: bool  # dumping the notebook as read gives back the very same text

    def dumps(self, notebook) -> str:
        text = json.dumps(notebook, indent=self.indent, separators=self.separators, ensure_ascii=self.ensure_ascii)
        return text + self.trailing


def _layout(text: str, notebook) -> _Layout:
    match = re.match(r"\{\r?\n([ \t]+)\"", text)
    indent: int | str | None = None
    if match:
        indent = len(match.group(1)) if match.group(1).strip(" ") == "" else match.group(1)
    trailing = text[len(text.rstrip("\r\n")) :]
    options = [(",", ": "), (", ", ": "), (",", ":")] if indent is not None else [(", ", ": "), (",", ":")]
    for ensure_ascii in (False, True):
        for separators in options:
            layout = _Layout(indent, separators, ensure_ascii, trailing, True)
            if layout.dumps(notebook) == text:
                return layout
    return _Layout(indent, options[0], False, trailing, False)


def _file_lines(notebook, layout: _Layout) -> dict[int, tuple[int, bool]]:
    """Cell index -> (line of the .ipynb file holding the cell's first source line, whether
    each source line has a JSON line of its own); only when the layout is reproduced exactly."""
    if not layout.exact or layout.indent is None:
        return {}
    marked = json.loads(json.dumps(notebook))
    for index, cell in enumerate(marked["cells"]):
        source = cell.get("source") if isinstance(cell, dict) else None
        if isinstance(source, list) and source:
            source[0] = f"@@e2k-cell-{index}@@" + source[0]
        elif isinstance(source, str):
            cell["source"] = f"@@e2k-cell-{index}@@" + source
    found = {}
    for number, line in enumerate(layout.dumps(marked).splitlines(), start=1):
        match = re.search(r"@@e2k-cell-(\d+)@@", line)
        if match:
            index = int(match.group(1))
            found[index] = (number, isinstance(notebook["cells"][index].get("source"), list))
    return found


def _is_python(notebook) -> bool:
    metadata = notebook.get("metadata") or {}
    language = (metadata.get("kernelspec") or {}).get("language") or (metadata.get("language_info") or {}).get("name")
    return language is None or str(language).lower() == "python"


# -- the rewrite -------------------------------------------------------------------------
def rewrite_notebook(source: bytes, path: str, rules: RuleSet) -> FileResult:
    """Rewrite one notebook's bytes with ``rules``. Never raises for a bad notebook."""
    keywords = rules.keywords()
    if keywords is not None and not any(word in source for word in keywords):
        return FileResult(path, "unchanged", source, source)

    def error(message: str, line: int = 1, col: int = 1, cell: int | None = None) -> FileResult:
        finding = Finding(path, line, col, UNREADABLE, message, "error", cell=cell)
        return FileResult(path, "error", source, source, [finding])

    try:
        text = source.decode("utf-8-sig")
        notebook = json.loads(text)
    except UnicodeDecodeError as exc:
        return error(f"cannot decode notebook: {exc}")
    except json.JSONDecodeError as exc:
        return error(f"cannot read notebook: {exc.msg}", exc.lineno, exc.colno)
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        return error("not a Jupyter notebook in nbformat 4 (no list of cells)")
    if not _is_python(notebook):
        return FileResult(path, "unchanged", source, source)

    program = _build(notebook["cells"])
    layout = _layout(text, notebook)
    starts = _file_lines(notebook, layout)

    def file_line(cell: int, line: int) -> int | None:
        if cell not in starts:
            return None
        start, one_per_line = starts[cell]
        return start + line - 1 if one_per_line else start

    def locate(finding: Finding) -> Finding:
        where = program.lines[finding.line] if 0 < finding.line < len(program.lines) else None
        if where is None:  # on a boundary (or nowhere): the next cell's first line
            later = [w for w in program.lines[finding.line :] if w] if finding.line > 0 else []
            where = later[0] if later else (program.included[0] if program.included else 0, 1)
        cell, line = where
        return Finding(path, line, finding.col, finding.code, finding.message, finding.kind, cell + 1, file_line(cell, line))

    def note(cell: int, line: int, message: str) -> Finding:
        return Finding(path, line, 1, IPYTHON, message, "manual", cell + 1, file_line(cell, line))

    if program.error is not None:
        cell, line, message = program.error
        finding = Finding(path, line, 1, UNREADABLE, f"cannot parse cell: {message}", "error", cell + 1, file_line(cell, line))
        return FileResult(path, "error", source, source, [finding])

    notes = []
    for cell, cell_text in program.excluded:
        magic = cell_text.lstrip().split(None, 1)[0] if cell_text.strip() else ""
        if magic == "%%writefile" and (keywords is None or any(w.decode() in cell_text for w in keywords)):
            if "e2k: ignore" not in cell_text:
                notes.append(note(cell, 1, "this %%writefile cell is not converted (e2k converts the notebook's "
                                           "own code); convert the file it writes with e2k"))

    if not program.included:
        return FileResult(path, "partial" if notes else "unchanged", source, source, notes)
    inner = rewrite_source(program.source.encode(), path, rules)
    findings = [locate(f) for f in inner.findings] + notes
    if inner.status == "error":
        return FileResult(path, "error", source, source, findings)
    if not inner.changed:
        status = "partial" if any(f.kind == "manual" for f in findings) else "unchanged"
        return FileResult(path, status, source, source, findings)

    new_source = inner.new.decode("utf-8")
    cells, lost, why = _split(program, new_source)
    if cells is None:
        return FileResult(path, "partial", source, source, [note(lost.cell, lost.line, f"{why}; the notebook is left as it was")]
                          if lost else [note(program.included[0], 1, f"{why}; the notebook is left as it was")])
    changed = _changed_names(program.source, new_source)
    for hidden in program.hidden:
        used = changed & set(_NAME.findall(hidden.text))
        if used:
            message = (f"this IPython line uses `{sorted(used)[0]}`, which the conversion changes; write it as Python "
                       "or convert the notebook by hand; the notebook is left as it was")
            return FileResult(path, "partial", source, source, [note(hidden.cell, hidden.line, message)])

    for index, new_text in cells.items():
        cell = notebook["cells"][index]
        old_text = _cell_text(cell)
        trailing = old_text[len(old_text.rstrip("\n")) :]
        new_text = new_text.rstrip("\n") + trailing if new_text.strip() else ""
        if new_text == old_text:
            continue
        if isinstance(cell.get("source"), list):
            cell["source"] = new_text.splitlines(keepends=True)
        else:
            cell["source"] = new_text
    new_bytes = layout.dumps(notebook).encode("utf-8")
    if source.startswith(b"\xef\xbb\xbf"):
        new_bytes = b"\xef\xbb\xbf" + new_bytes
    status = "partial" if any(f.kind == "manual" for f in findings) else "converted"
    return FileResult(path, status, source, new_bytes, findings)


def notebook_diff(result: FileResult) -> str:
    """A unified diff of the code cells that changed, headed ``a/path:cell N``."""
    try:
        old = json.loads(result.original.decode("utf-8-sig"))["cells"]
        new = json.loads(result.new.decode("utf-8-sig"))["cells"]
    except (ValueError, KeyError, TypeError):
        return ""
    out = []
    for index, (before, after) in enumerate(zip(old, new), start=1):
        a, b = _cell_text(before), _cell_text(after)
        if a != b:
            out.extend(
                difflib.unified_diff(
                    (a + "\n").splitlines(keepends=True) if not a.endswith("\n") else a.splitlines(keepends=True),
                    (b + "\n").splitlines(keepends=True) if not b.endswith("\n") else b.splitlines(keepends=True),
                    f"a/{result.path}:cell {index}",
                    f"b/{result.path}:cell {index}",
                )
            )
    return "".join(out)
