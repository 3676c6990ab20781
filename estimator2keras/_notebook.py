"""Jupyter notebooks (.ipynb): the code cells are converted together, as one program.

An Estimator program in a notebook is usually spread over cells (imports, input_fn,
model_fn, the Estimator, training), so the code cells are joined into one module, with a
boundary statement between cells, converted like a .py file, and split back into the same
cells. Markdown and raw cells, outputs, execution counts and all metadata are left as they
were; a cell whose code does not change keeps its exact source. The notebook is written back
with the JSON layout it was read with (indent, key order, escaping).

Cells are read as IPython reads them (see "IPython's input syntax" below): its syntax
(``!shell`` lines, continued by trailing backslashes, ``x = !cmd``, ``%magic``, ``x =
%magic``, ``obj?``, the autocall escapes, a one-line ``pip install ...`` cell) stands in the
program as a placeholder line, Python where it binds a name, and is put back verbatim; a
cell that starts with ``%%time``, ``%%timeit``, ``%%capture`` or ``%%prun`` is converted
below that line; any other cell magic (``%%bash``, ``%%writefile``...) keeps the whole cell
out of the program. If the conversion would change a name such a line uses, or would move,
drop or change such a line, the notebook is left unchanged and E2K904 says where.

A cell that still does not parse (Python 2, a typo) is left out of the program, left as it
was and reported (E2K904): the other cells are converted without it, unless it may bind a
name that converted code reads, in which case the notebook is left unchanged.

Findings are reported as ``path:cell N:line:col``: N counts every cell from 1, markdown
included (the position of the cell in the notebook), and the line is the line in the cell.
"""
from __future__ import annotations

import ast
import difflib
import json
import keyword
import re
from dataclasses import dataclass, field

from estimator2keras._context import Finding
from estimator2keras._engine import UNREADABLE, FileResult, keywords_of, rewrite_source
from estimator2keras._registry import RuleSet

IPYTHON = "E2K904"
#: Cell magics whose body is IPython code run in the kernel: converted below the magic line.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})
_BOUNDARY = "'e2k: cell {}'"
_BOUNDARY_LINE = re.compile(r"^'e2k: cell (\d+)'$")
_MARK = "# e2k-ipython {}"
_PLACEHOLDER_LINE = re.compile(r"^(?P<indent>[ \t]*)(?P<body>.*?)# e2k-ipython (?P<k>\d+)$")
_NAME = re.compile(r"(?<![.\w])[A-Za-z_]\w*")  # a name, not an attribute


# -- IPython's input syntax ----------------------------------------------------------------
# Jupyter's Python kernel (IPython) rewrites each cell before Python sees it. These are its
# rules, written out from IPython.core.inputtransformer2 (IPython 7 to 9: TransformerManager)
# and, for a cell of one line, from its prefilter's automagic. e2k does not import IPython
# to apply them: the rewriter must install with libcst alone, and IPython brings a dozen
# packages with it. tests/test_notebooks.py compares these rules with IPython's own
# TransformerManager wherever IPython is installed.
#
# - The cell's leading blank lines go, and an indentation its first line has is removed
#   from every line (IPython 9 removes the indentation common to all lines, 7 and 8 the
#   first line's from the lines that have it: e2k follows them where they agree, when every
#   line has the first line's indentation).
# - A first line `%%name ...` makes the whole cell a cell magic.
# - Then, one logical line at a time (Python's tokens, so strings, comments and brackets are
#   respected): a line that ends in `?` after a name (`obj?`, `tf.estimator??`) asks for
#   help; a line whose first token is `!`, `!!`, `?`, `??`, `%` or one of the autocall
#   escapes `,` `;` `/` is a command, continued over the next physical lines by a trailing
#   backslash; an assignment whose first `=` outside brackets is followed by `%name` or `!`
#   assigns a magic's or a shell command's output. Each is replaced by one line of Python
#   and the cell is read again from there.
# - A cell that is then one line, is not Python and starts with the name of a line magic
#   (`pip install -q tensorflow==1.15`, `cd models`) runs that magic (automagic).
# Prompts pasted with the code (`>>> `, `In [1]: `), which IPython also removes, are not
# followed: such a cell is reported and left as it was.

#: Escapes at the start of a logical line (ESCAPE_SINGLES; `!!` and `??` start with them).
_ESCAPES = frozenset({"!", "?", "%", ",", ";", "/"})
#: What may stand before a final `?` (IPython's _help_end_re).
_HELP_END = re.compile(r"(%{0,2}(?!\d)[\w*]+(?:\.(?!\d)[\w*]+|\[-?[0-9]+\])*)(\?\??)$")
#: How the prefilter splits a line: space, escape, the "function" part, the rest.
_LINE_SPLIT = re.compile(r"^(\s*)([,;/%]|!!?|\?\??)?\s*(%{0,2}[\w.*]*)(.*?$|$)")
#: Line magics IPython runs without their `%` (automagic): IPython 9's own and its default
#: shell aliases, and those of Colab (`tensorflow_version`) and TensorBoard's extension.
_AUTOMAGICS = frozenset(
    "alias alias_magic autoawait autocall automagic bookmark cat cd clear code_wrap colors conda config cp "
    "debug dhist dirs doctest_mode ed edit env gui hist history killbgscripts ldir less lf lk ll load "
    "load_ext loadpy logoff logon logstart logstate logstop ls lsmagic lx macro magic mamba man matplotlib "
    "micromamba mkdir more mv notebook page pastebin pdb pdef pdoc pfile pinfo pinfo2 pip popd pprint "
    "precision prun psearch psource pushd pwd pycat pylab quickref recall rehashx reload_ext rep rerun "
    "reset reset_selective rm rmdir run save sc set_env sx system tb time timeit unalias unload_ext uv "
    "who who_ls whos xdel xmode tensorflow_version tensorboard".split()
)
#: Python's tokens, as far as IPython's rules look at them (Python 3.11's tokenize: `!`,
#: `?`, `$` and an unterminated quote are error tokens of one character).
_TOKEN = re.compile(
    r"""(?P<ws>[ \t\f]+)
      | (?P<comment>\#[^\n]*)
      | (?P<string>(?:[rRbBuUfF]|[rR][bBfF]|[bBfF][rR])?(?:'''|\"\"\"|'|"))
      | (?P<name>[^\W\d]\w*)
      | (?P<number>\.?\d(?:[\w.]|(?<=[eE])[-+])*)
      | (?P<op>\*\*=|//=|>>=|<<=|\.\.\.|!=|==|<=|>=|->|:=|\*\*|//|<<|>>|[-+*/%&|^@]=|[-+*/%&|^@~<>=.,:;()\[\]{}])
      | (?P<cont>\\\n)
      | (?P<newline>\n)
      | (?P<other>.)""",
    re.VERBOSE,
)
_STRING_END = {  # the rest of a string, from after its opening quote
    "'": re.compile(r"(?:[^\\'\n]|\\.)*'", re.DOTALL),
    '"': re.compile(r'(?:[^\\"\n]|\\.)*"', re.DOTALL),
    "'''": re.compile(r"(?:[^\\']|\\.|'(?!''))*'''", re.DOTALL),
    '"""': re.compile(r'(?:[^\\"]|\\.|"(?!""))*"""', re.DOTALL),
}

_OPEN, _CLOSE = frozenset("([{"), frozenset(")]}")


@dataclass
class _Token:
    kind: str
    text: str
    line: int  # 0-based, an index into the lines read
    col: int


def _logical_lines(lines: list[str], first: int):
    """The tokens of ``lines[first:]``, grouped into logical lines as IPython groups them
    (a group ends at a newline outside brackets); whitespace left out."""
    text = "\n".join(lines[first:]) + "\n"
    starts = [0]
    for line in lines[first:]:
        starts.append(starts[-1] + len(line) + 1)
    group: list[_Token] = []
    depth = 0
    pos = 0
    line = 0
    while pos < len(text):
        while starts[line + 1] <= pos:
            line += 1
        match = _TOKEN.match(text, pos)
        kind, value = match.lastgroup, match.group()
        if kind == "string":
            end = _STRING_END[value.lstrip("rRbBuUfF")].match(text, match.end())
            if end is None and len(value.lstrip("rRbBuUfF")) == 3:
                break  # a string that never ends: IPython's tokenizer stops there too
            if end is None:  # an unterminated quote: an error token, and on from the next character
                kind, value = "other", text[pos]
            else:
                value += end.group()
        pos += len(value)
        if kind == "ws" or kind == "cont":
            continue
        group.append(_Token(kind, value, first + line, pos - len(value) - starts[line]))
        if kind == "op" and value in _OPEN:
            depth += 1
        elif kind == "op" and value in _CLOSE:
            depth = max(0, depth - 1)
        elif kind == "newline" and depth == 0:
            yield group
            group = []
    if group:
        yield group


def _continued(lines: list[str], line: int) -> int:
    """The last line of a command continued by trailing backslashes (find_end_of_continued_line)."""
    while lines[line].endswith("\\") and line + 1 < len(lines):
        line += 1
    return line


def _joined(lines: list[str], line: int, col: int, end: int) -> str:
    """A continued command as one line (assemble_continued_line)."""
    parts = [lines[line][col:]] + lines[line + 1 : end + 1]
    return " ".join([p.rstrip()[:-1] for p in parts[:-1]] + [parts[-1].rstrip()])


@dataclass
class _Special:
    """IPython syntax in a cell: lines ``start`` to ``end`` (0-based), replaced by one line
    of Python: ``head`` (what comes before the syntax on its first line) and ``call``."""

    start: int
    end: int
    head: str
    call: str | None = None  # the Python an assignment gets; None: a statement of its own


def _special(group: list[_Token], lines: list[str]) -> _Special | None:
    """The IPython syntax that starts this logical line, if any, as IPython's
    TransformerManager finds it (HelpEnd first, then EscapedCommand, MagicAssign, SystemAssign)."""
    first = group[0]
    if len(group) > 2 and group[-1].kind == "newline" and group[-2].text == "?":
        question = group[-2].line
        content = "\n".join(lines[first.line : question + 1])[first.col :]
        if _HELP_END.search(content):
            return _Special(first.line, question, lines[first.line][: first.col])
    if first.text in _ESCAPES and first.kind in ("op", "other"):
        return _Special(first.line, _continued(lines, first.line), lines[first.line][: first.col])
    depth = 0
    for i, token in enumerate(group):
        if token.kind == "op" and token.text == "=" and depth == 0:
            after = group[i + 1 : i + 3]
            if len(after) == 2 and after[0].text == "%" and after[1].kind == "name":
                sign = after[0]
                end = _continued(lines, sign.line)
                name, _, args = _joined(lines, sign.line, sign.col, end)[1:].partition(" ")
                call = f"get_ipython().run_line_magic({name!r}, {args!r})"
            elif after and after[0].text == "!" and not lines[token.line].strip().startswith("="):
                sign = after[0]
                end = _continued(lines, sign.line)
                call = f"get_ipython().getoutput({_joined(lines, sign.line, sign.col, end)[1:]!r})"
            else:
                return None
            return _Special(sign.line, end, lines[sign.line][: sign.col], call)
        if token.kind == "op" and token.text in _OPEN:
            depth += 1
        elif token.kind == "op" and token.text in _CLOSE:
            depth = max(0, depth - 1)
    return None


def _specials(lines: list[str], first: int) -> list[_Special]:
    """Every piece of IPython syntax in ``lines[first:]``, in order: after each, the lines
    that follow it are read afresh, as IPython reads them once it has replaced it."""
    found: list[_Special] = []
    line = first
    while line < len(lines):
        for group in _logical_lines(lines, line):
            special = _special(group, lines)
            if special is not None:
                found.append(special)
                line = special.end + 1
                break
        else:
            break
    return found


def _automagic(line: str) -> bool:
    """Whether IPython's prefilter runs this line, a cell of its own, as a line magic."""
    _, escape, name, rest = _LINE_SPLIT.match(line).groups()
    return not escape and name in _AUTOMAGICS and not rest.lstrip().startswith(("=", ","))


# -- the program ---------------------------------------------------------------------------
@dataclass
class _Hidden:
    """IPython syntax kept out of the program: it stands there as a placeholder line."""

    cell: int  # index among all cells, 0-based
    line: int  # first line in the cell, 1-based
    text: str  # its lines in the cell, verbatim
    python: str  # the placeholder, without its indentation
    indent: str  # the placeholder's indentation in the program
    first_line_only: bool = False  # a %%time line: nothing but blank lines may come before it


@dataclass
class _Cell:
    """A code cell as the program holds it."""

    index: int
    text: str
    prefix: str = ""  # the indentation IPython removes from every line
    #: the cell's lines as Python, each with its line in the cell (1-based)
    lines: list[tuple[str, int]] = field(default_factory=list)
    hidden: list[_Hidden] = field(default_factory=list)
    python: bool = True  # False: a cell magic whose body is not Python (%%bash, %%writefile)
    error: tuple[int, int, str] | None = None  # (line in the cell, column, message)

    @property
    def source(self) -> str:
        return "".join(line + "\n" for line, _ in self.lines)


@dataclass
class _Program:
    cells: list  # every cell of the notebook
    source: str = ""
    #: joined line (1-based, index 0 unused) -> (cell index, line in cell)
    lines: list = field(default_factory=lambda: [None])
    included: list[int] = field(default_factory=list)  # code cells in the program, in order
    read: dict[int, _Cell] = field(default_factory=dict)  # the included cells
    hidden: list[_Hidden] = field(default_factory=list)
    excluded: list[tuple[int, str]] = field(default_factory=list)  # (cell, its text): not Python
    bad: list[_Cell] = field(default_factory=list)  # cells that do not parse, left out


#: Line magics whose argument is Python code the program runs.
_CODE_MAGICS = frozenset({"time", "timeit", "prun", "debug"})


def _names_used(text: str) -> set[str]:
    """The Python names IPython lines may read: not a magic's own name (`%%time`) nor a shell
    command's words, but what IPython expands in them (`{expr}`, `$name`), the code `%time`
    and the like run, and the name `files = !ls` binds; any other line, every name in it."""
    names: set[str] = set()
    for line in text.splitlines():
        stripped = line.strip()
        target = re.match(r"([\w\s,()\[\].]+?)\s*=\s*(?=[!%])", stripped)
        if target:
            names |= set(_NAME.findall(target.group(1)))
            stripped = stripped[target.end():]
        if not stripped.startswith(("%", "!")):
            names |= set(_NAME.findall(stripped))
            continue
        for expression in re.findall(r"\{([^{}]*)\}", stripped):
            names |= set(_NAME.findall(expression))
        names |= set(re.findall(r"\$(\w+)", stripped))
        if stripped.startswith("%") and not stripped.startswith("%%"):
            magic, _, rest = stripped[1:].partition(" ")
            if magic in _CODE_MAGICS:
                names |= set(_NAME.findall(rest))
    return names


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
    except (RecursionError, MemoryError) as exc:
        return SyntaxError(f"nested too deeply for Python's own parser ({type(exc).__name__})")
    return None


def _read_cell(index: int, text: str, number: int) -> _Cell:
    """A code cell read as IPython reads it; ``number`` numbers its placeholders."""
    raw = text.splitlines()
    cell = _Cell(index, text, lines=[(line, n) for n, line in enumerate(raw, start=1)])
    if _parses(text) is None:
        return cell  # Python as it is (no IPython syntax is valid Python)
    first = next((i for i, line in enumerate(raw) if line.strip()), 0)
    prefix = raw[first][: len(raw[first]) - len(raw[first].lstrip(" \t"))]
    work = raw
    if prefix and all(line.startswith(prefix) for line in raw if line.strip()):
        cell.prefix = prefix
        work = [line[len(prefix) :] if line.startswith(prefix) else "" for line in raw]
    specials: list[tuple[_Special, bool]] = []  # (syntax, whether it is a cell magic line)
    body = first
    while body < len(work):  # %%capture, %%time...: their body is a cell of its own
        line = work[body]
        if not line.startswith("%%") or re.match(r"%%\w+\?", line):
            break
        if line[2:].rstrip().partition(" ")[0] not in PYTHON_CELL_MAGICS:
            cell.python = False
            return cell
        specials.append((_Special(body, body, ""), True))
        body = next((i for i in range(body + 1, len(work)) if work[i].strip()), len(work))
    specials += [(special, False) for special in _specials(work, body)]
    if body == len(work) - 1 and not any(not magic for _, magic in specials) and _automagic(work[body]):
        specials.append((_Special(body, body, ""), False))  # a cell (or a %%time body) of one line

    lines: list[tuple[str, int]] = []
    at = 0
    for special, magic in specials:
        lines += [(work[i], i + 1) for i in range(at, special.start)]
        k = number + len(cell.hidden)
        if special.call is not None:
            python = f"{special.head.lstrip()}{special.call}  {_MARK.format(k)}"
        else:
            python = _MARK.format(k) if magic else f"pass  {_MARK.format(k)}"
        indent = special.head[: len(special.head) - len(special.head.lstrip())]
        text_lines = raw[special.start : special.end + 1]
        cell.hidden.append(_Hidden(index, special.start + 1, "\n".join(text_lines), python, indent, magic))
        lines.append((indent + python, special.start + 1))
        at = special.end + 1
    lines += [(work[i], i + 1) for i in range(at, len(work))]
    cell.lines = lines
    error = _parses(cell.source)
    if error is not None:
        where = min(max(error.lineno or 1, 1), len(lines)) if lines else 1
        line = lines[where - 1][1] if lines else 1
        placeholder = _PLACEHOLDER_LINE.match(lines[where - 1][0]) if lines else None
        cell.error = (line, max(error.offset or 1, 1) + (0 if placeholder else len(cell.prefix)), error.msg)
    return cell


def _build(cells: list, skip: dict[int, tuple[int, int, str]] | None = None) -> _Program:
    """The program of a notebook's code cells; ``skip``: cells to leave out as not parsing,
    with where and why (cells libcst's parser refused)."""
    program = _Program(cells)
    chunks: list[str] = []
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        text = _cell_text(cell)
        read = _read_cell(index, text, len(program.hidden))
        if not read.python:
            program.excluded.append((index, text))
            continue
        if skip and index in skip:
            read.error = skip[index]
        if read.error is not None:
            program.bad.append(read)
            continue
        if program.included:
            chunks.append(_BOUNDARY.format(index) + "\n")
            program.lines.append(None)
        program.included.append(index)
        program.read[index] = read
        program.hidden.extend(read.hidden)
        for line, number in read.lines:
            chunks.append(line + "\n")
            program.lines.append((index, number))
    program.source = "".join(chunks)
    return program


def _restore(hidden: _Hidden, indent: str, prefix: str) -> str:
    """The hidden lines, where the placeholder now stands at ``indent``."""
    if indent == hidden.indent:
        return hidden.text
    first, *rest = hidden.text.split("\n")
    return "\n".join([prefix + indent + first.lstrip(" \t"), *rest])


def _is_cell_magic(program: _Program, line: str) -> bool:
    match = _PLACEHOLDER_LINE.match(line)
    return bool(match) and program.hidden[int(match.group("k"))].first_line_only


def _split(program: _Program, new_source: str) -> tuple[dict[int, str] | None, _Hidden | None, str]:
    """Cell index -> new text of every changed cell; or the hidden line that would be lost."""
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
    seen: set[int] = set()
    texts: dict[int, str] = {}
    for cell, lines in segments.items():
        read = program.read[cell]
        if lines == [line for line, _ in read.lines]:
            seen.update(id(hidden) for hidden in read.hidden)
            continue
        out = []
        for number, line in enumerate(lines):
            match = _PLACEHOLDER_LINE.match(line)
            if not match:
                out.append(read.prefix + line if line.strip() else line)
                continue
            hidden = program.hidden[int(match.group("k"))]
            if id(hidden) in seen or hidden.cell != cell or (hidden.first_line_only and not all(
                not earlier.strip() or _is_cell_magic(program, earlier) for earlier in lines[:number]
            )):
                return None, hidden, "the conversion would move this IPython line"
            if match.group("body") + _MARK.format(match.group("k")) != hidden.python:
                return None, hidden, "the conversion would change this IPython line"
            seen.add(id(hidden))
            out.append(_restore(hidden, match.group("indent"), read.prefix))
        texts[cell] = "\n".join(out)
    for hidden in program.hidden:
        if id(hidden) not in seen:
            return None, hidden, "the conversion would drop this IPython line"
    return texts, None, ""


def _bindings(source: str) -> dict[str, list[str]] | None:
    """Module-level name -> the module-level statements that bind it (as ast dumps); None
    when the program does not parse."""
    bound: dict[str, list[str]] = {}
    try:
        tree = compile(source, "<notebook>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except (SyntaxError, ValueError):
        return None

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


def _changed_names(before: str, after: str) -> set[str] | None:
    """The module-level names whose bindings the conversion changes; None: not known."""
    old, new = _bindings(before), _bindings(after)
    if old is None or new is None:
        return None
    return {name for name in old.keys() | new.keys() if old.get(name) != new.get(name)}


def _names(tokens) -> list[str]:
    """The names among ``tokens`` that are not attributes (``x`` of ``a.x``) or keywords."""
    out = []
    for i, token in enumerate(tokens):
        if token.kind == "name" and not keyword.iskeyword(token.text) and not (i and tokens[i - 1].text == "."):
            out.append(token.text)
    return out


def _mentions(text: str) -> tuple[set[str], set[str]]:
    """The names a cell that does not parse uses, and those it may bind, read from its
    tokens (strings and comments left out). The bindings are a superset: the names before a
    logical line's last `=` outside brackets, after `def`, `class`, `as`, `global`, `del`,
    between `for` and `in`, before `:=`, and every name of an import."""
    used: set[str] = set()
    bound: set[str] = set()
    for group in _logical_lines(text.splitlines(), 0):
        tokens = [t for t in group if t.kind in ("name", "op", "other", "number")]
        used.update(_names(tokens))
        statement: list[_Token] = []
        for token in tokens + [_Token("op", ";", 0, 0)]:
            if token.text != ";":
                statement.append(token)
                continue
            words = [t.text for t in statement]
            if words[:1] in (["import"], ["from"]):
                bound.update(_names(statement[words.index("import") + 1 :] if "import" in words else statement))
            depth, last = 0, None
            for i, t in enumerate(statement):
                depth += t.kind == "op" and t.text in _OPEN
                depth -= t.kind == "op" and t.text in _CLOSE and depth > 0
                if t.kind == "op" and t.text.endswith("=") and t.text not in ("==", "<=", ">=", "!=") and depth == 0:
                    last = i
                if t.text == ":=" and i:
                    bound.add(statement[i - 1].text)
                if i and statement[i - 1].text in ("def", "class", "as", "global", "nonlocal", "del") and t.kind == "name":
                    bound.add(t.text)
                if t.text == "for":
                    end = next((j for j in range(i + 1, len(statement)) if statement[j].text == "in"), len(statement))
                    bound.update(_names(statement[i + 1 : end]))
            if last is not None:
                bound.update(_names(statement[:last]))
            statement = []
    return used, bound


def _changed_line_names(before: str, after: str) -> set[str]:
    """The names on the lines the conversion changes, removed or added."""
    old, new = before.splitlines(), after.splitlines()
    lines: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            lines += old[i1:i2] + new[j1:j2]
    names: set[str] = set()
    for line in lines:
        for group in _logical_lines([line], 0):
            names.update(_names([t for t in group if t.kind in ("name", "op", "other", "number")]))
    return names


def _selects_tf1(text: str) -> str | None:
    """The part of an IPython line that installs or selects TensorFlow 1, if any:
    `%tensorflow_version 1.x` (Colab), `pip install tensorflow==1.15`, `tensorflow-gpu<2`."""
    match = re.search(r"(?<![\w-])tensorflow_version\s+1\S*", text)
    if match:
        return match.group()
    for match in re.finditer(r"(?<![\w-])tensorflow(?:[-_](?:gpu|cpu))?\s*((?:[<>=!~]=?\s*[\w.*]+\s*,?\s*)+)", text):
        if re.search(r"(?:==|~=|<=)\s*1(?![\d])|<\s*[12](?![\d])", match.group(1)):
            return match.group().strip().rstrip(",")
    return None


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
#: How many cells libcst may refuse before the notebook is reported as not parsing.
_MAX_UNPARSED = 8


def _unparsed(message: str) -> str:
    return (f"cannot parse cell: {message}; the cell is left as it was, and the other cells are converted "
            "without it")


def rewrite_notebook(source: bytes, path: str, rules: RuleSet) -> FileResult:
    """Rewrite one notebook's bytes with ``rules``. Never raises for a bad notebook."""
    keywords = keywords_of(rules)  # the rules' words, and those of Estimator code left (E2K905)
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

    layout = _layout(text, notebook)
    starts = _file_lines(notebook, layout)
    program = _build(notebook["cells"])

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

    def note(cell: int, line: int, message: str, col: int = 1) -> Finding:
        return Finding(path, line, col, IPYTHON, message, "manual", cell + 1, file_line(cell, line))

    def left_alone(finding: Finding) -> FileResult:
        return FileResult(path, "partial", source, source, [finding] + [f for f in unparsed if f.cell != finding.cell])

    notes = []
    for cell, cell_text in program.excluded:
        magic = cell_text.lstrip().split(None, 1)[0] if cell_text.strip() else ""
        if magic == "%%writefile" and (keywords is None or any(w.decode() in cell_text for w in keywords)):
            if "e2k: ignore" not in cell_text:
                notes.append(note(cell, 1, "this %%writefile cell is not converted (e2k converts the notebook's "
                                           "own code); convert the file it writes with e2k"))

    # A cell libcst cannot parse (Python's own parser could) is left out like any other
    # cell that does not parse, and the program converted again without it.
    skip: dict[int, tuple[int, int, str]] = {}
    while True:
        if not program.included:
            unparsed = [note(c.index, c.error[0], _unparsed(c.error[2]), c.error[1]) for c in program.bad]
            notes += unparsed
            return FileResult(path, "partial" if any(f.kind == "manual" for f in notes) else "unchanged", source, source, notes)
        inner = rewrite_source(program.source.encode(), path, rules)
        if inner.status != "error" or len(skip) >= _MAX_UNPARSED:
            break
        failure = locate(inner.findings[0]) if inner.findings else None
        if failure is None or failure.code != UNREADABLE or not failure.message.startswith("cannot parse"):
            break
        cell = failure.cell - 1
        if cell in skip or cell not in program.read:
            break
        skip[cell] = (failure.line, failure.col, failure.message.removeprefix("cannot parse: "))
        program = _build(notebook["cells"], skip)

    unparsed = [note(c.index, c.error[0], _unparsed(c.error[2]), c.error[1]) for c in program.bad]
    findings = [locate(f) for f in inner.findings] + notes
    if inner.status == "error":
        return FileResult(path, "error", source, source, findings + unparsed)
    if not inner.changed:
        findings += unparsed
        status = "partial" if any(f.kind == "manual" for f in findings) else "unchanged"
        return FileResult(path, status, source, source, findings)

    new_source = inner.new.decode("utf-8")
    cells, lost, why = _split(program, new_source)
    if cells is None:
        lost_at = (lost.cell, lost.line) if lost else (program.included[0], 1)
        return left_alone(note(*lost_at, f"{why}; the notebook is left as it was"))
    changed = _changed_names(program.source, new_source)
    for hidden in program.hidden:
        used = _names_used(hidden.text)
        used = used if changed is None else changed & used
        if used:
            message = (f"this IPython line uses `{sorted(used)[0]}`, which the conversion changes; write it as Python "
                       "or convert the notebook by hand; the notebook is left as it was")
            return left_alone(note(hidden.cell, hidden.line, message))
    # A cell left out may bind names the converted code reads: the conversion, made
    # without it, could be wrong, so none is made. One that uses a name the conversion
    # changes is converted by hand.
    touched = _changed_line_names(program.source, new_source) if program.bad else set()
    for index, bad in enumerate(program.bad):
        used, bound = _mentions(bad.text)
        if bound & touched:
            message = (f"this cell does not parse ({bad.error[2]}) and may bind `{sorted(bound & touched)[0]}`, which "
                       "converted code uses; make the cell parse and run e2k again; the notebook is left as it was")
            return left_alone(note(bad.index, bad.error[0], message, bad.error[1]))
        stale = used if changed is None else used & changed
        if stale:
            unparsed[index] = note(bad.index, bad.error[0], _unparsed(bad.error[2]) + f"; it uses `{sorted(stale)[0]}`, "
                                   "which the conversion changes: convert it by hand", bad.error[1])
    findings += unparsed
    for hidden in program.hidden:
        tf1 = _selects_tf1(hidden.text)
        if tf1:
            findings.append(note(hidden.cell, hidden.line, f"this line installs or selects TensorFlow 1 (`{tf1}`); the "
                                                           "converted notebook needs TensorFlow 2: change it"))

    for index, new_text in cells.items():
        cell = notebook["cells"][index]
        old_text = _cell_text(cell)
        trailing = old_text[len(old_text.rstrip("\n")) :]
        new_text = new_text.rstrip("\n") + trailing if new_text.strip() else ""
        if old_text.split("\n", 1)[0].strip():  # blank lines that separated it from the cell above
            new_text = re.sub(r"\A(?:[ \t]*\n)+", "", new_text)
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
