"""Building the code e2k emits: templates parsed by libcst, names that do not clash."""
from __future__ import annotations

import contextvars

import re
import textwrap
from typing import Iterable

import libcst as cst

from estimator2keras._nodes import walk  # noqa: F401 - `_emit.walk`, as the rules call it

_EMPTY_MODULE = cst.Module(body=[])


def code(node: cst.CSTNode) -> str:
    """Source text of a node, as it would print in a module."""
    return _EMPTY_MODULE.code_for_node(node)


def expr(template: str, **nodes: cst.BaseExpression | str) -> cst.BaseExpression:
    """Parse an expression; ``{name}`` placeholders take source text or nodes (kept as the
    same objects: see ``_parse``)."""
    return _parse(cst.parse_expression, template, nodes)


def statement(template: str, **nodes: cst.BaseExpression | str) -> cst.BaseStatement:
    """Parse one statement (templates use 4-space indents; the module's indent wins on output)."""
    return _parse(cst.parse_statement, textwrap.dedent(template).strip() + "\n", nodes)


def statements(template: str, **nodes: cst.BaseExpression | str) -> list[cst.BaseStatement]:
    """Parse a block of module-level statements (a helper class, a function)."""
    return list(_parse(cst.parse_module, textwrap.dedent(template).strip() + "\n", nodes).body)


def _parse(parse, template: str, nodes: dict):
    """``template`` filled and parsed, with each expression node put in as itself, not as a
    re-parsed copy of its text: a unit's plan substitutes original nodes by identity wherever
    they end up (``ConversionPlan.replace``), and a copy would silently miss the substitution.
    A placeholder that a template puts inside a string or a longer name is filled as text."""
    slots: dict[str, cst.CSTNode] = {}
    values = {}
    for key, value in nodes.items():
        if isinstance(value, cst.BaseExpression):
            slot = f"__e2k_slot_{key}__"
            values[key], slots[slot] = slot, value
        else:
            values[key] = code(value) if isinstance(value, cst.CSTNode) else value
    if not slots:
        return parse(_fill(template, nodes))
    text = template.format(**values)
    filler = _SlotFiller(slots)
    try:
        tree = parse(text).visit(filler)
    except Exception:  # a slot where only a name may stand (a keyword, a parameter)
        filler.filled = -1
    if filler.filled != sum(text.count(slot) for slot in slots):
        return parse(_fill(template, nodes))
    return tree


class _SlotFiller(cst.CSTTransformer):
    """Puts each slot's node in; one that binds less tightly than the operator the template
    gives it to (``{max} - {start}`` given ``A if c else B``) is parenthesized, as Python
    would read the template's text: ``(A if c else B) - start``, not ``A if c else B - start``."""

    def __init__(self, slots: dict[str, cst.CSTNode]):
        super().__init__()
        self.slots = slots
        self.filled = 0
        self.nodes: set[int] = set()

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        node = self.slots.get(original_node.value)
        if node is None:
            return updated_node
        self.filled += 1
        self.nodes.add(id(node))
        return node

    def _bound(self, node, least: int):
        if id(node) not in self.nodes or _precedence(node) >= least:
            return node
        wrapped = node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        self.nodes.add(id(wrapped))
        return wrapped

    @staticmethod
    def _rebuilt(node, **fields):
        """``node`` with ``fields`` where one is another object, else ``node`` itself."""
        changed = {name: value for name, value in fields.items() if value is not getattr(node, name)}
        return node.with_changes(**changed) if changed else node

    def leave_BinaryOperation(self, original_node, updated_node):
        level = _precedence(updated_node, own_parentheses=False)
        power = isinstance(updated_node.operator, cst.Power)
        return self._rebuilt(updated_node, left=self._bound(updated_node.left, level + power),
                             right=self._bound(updated_node.right, level + (not power)))

    def leave_UnaryOperation(self, original_node, updated_node):
        level = _precedence(updated_node, own_parentheses=False)
        return self._rebuilt(updated_node, expression=self._bound(updated_node.expression, level))

    def leave_Comparison(self, original_node, updated_node):
        comparisons = [self._rebuilt(c, comparator=self._bound(c.comparator, 6)) for c in updated_node.comparisons]
        if all(new is old for new, old in zip(comparisons, updated_node.comparisons)):
            comparisons = updated_node.comparisons
        return self._rebuilt(updated_node, left=self._bound(updated_node.left, 6), comparisons=comparisons)

    def leave_BooleanOperation(self, original_node, updated_node):
        level = _precedence(updated_node, own_parentheses=False)
        return self._rebuilt(updated_node, left=self._bound(updated_node.left, level),
                             right=self._bound(updated_node.right, level + 1))

    def leave_Attribute(self, original_node, updated_node):
        return self._rebuilt(updated_node, value=self._bound(updated_node.value, _PRIMARY))

    def leave_Subscript(self, original_node, updated_node):
        return self._rebuilt(updated_node, value=self._bound(updated_node.value, _PRIMARY))

    def leave_Call(self, original_node, updated_node):
        return self._rebuilt(updated_node, func=self._bound(updated_node.func, _PRIMARY))


_PRIMARY = 15
_BINARY = {cst.BitOr: 6, cst.BitXor: 7, cst.BitAnd: 8, cst.LeftShift: 9, cst.RightShift: 9, cst.Add: 10,
           cst.Subtract: 10, cst.Multiply: 11, cst.Divide: 11, cst.FloorDivide: 11, cst.Modulo: 11,
           cst.MatrixMultiply: 11, cst.Power: 13}


def _precedence(node: cst.CSTNode, own_parentheses: bool = True) -> int:
    """How tightly ``node`` binds, as Python's grammar orders its operators (lambda 0 to an
    atom, or anything in parentheses, 15; ``own_parentheses`` False: its operator's, whatever
    parentheses it has)."""
    if own_parentheses and getattr(node, "lpar", None):
        return _PRIMARY
    if isinstance(node, cst.Lambda):
        return 0
    if isinstance(node, cst.IfExp):
        return 1
    if isinstance(node, cst.BooleanOperation):
        return 3 if isinstance(node.operator, cst.And) else 2
    if isinstance(node, cst.UnaryOperation):
        return 4 if isinstance(node.operator, cst.Not) else 12
    if isinstance(node, cst.Comparison):
        return 5
    if isinstance(node, cst.BinaryOperation):
        return _BINARY[type(node.operator)]
    if isinstance(node, (cst.NamedExpr, cst.Yield)):
        return 0
    if isinstance(node, cst.Await):
        return 14
    return _PRIMARY


def _fill(template: str, nodes: dict) -> str:
    values = {k: (code(v) if isinstance(v, cst.CSTNode) else v) for k, v in nodes.items()}
    return template.format(**values) if values else template


def comment_line(text: str) -> cst.EmptyLine:
    return cst.EmptyLine(comment=cst.Comment(f"# {text}"))


def with_comment(stmt: cst.BaseStatement, text: str) -> cst.BaseStatement:
    """``stmt`` with a ``# text`` line right above it."""
    return stmt.with_changes(leading_lines=[*stmt.leading_lines, comment_line(text)])


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )


def call_args(args: Iterable[cst.Arg]) -> list[cst.Arg]:
    """Arguments ready to print on one line: `a, b=c`, whatever spacing they had before."""
    args = list(args)
    out = []
    for i, arg in enumerate(args):
        comma = cst.MaybeSentinel.DEFAULT if i == len(args) - 1 else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        out.append(arg.with_changes(comma=comma, whitespace_after_arg=cst.SimpleWhitespace(""), whitespace_after_star=cst.SimpleWhitespace("")))
    return out


def one_line_call(call: cst.Call, args: Iterable[cst.Arg]) -> cst.Call:
    """``call`` with ``args``, laid out on one line (the arguments' own values keep theirs)."""
    return call.with_changes(
        args=call_args(args), whitespace_before_args=cst.SimpleWhitespace(""), whitespace_after_func=cst.SimpleWhitespace("")
    )


def blank_line() -> cst.EmptyLine:
    """An empty line (with no indentation whitespace on it)."""
    return cst.EmptyLine(indent=False)


def unique_name(preferred: str, taken: set[str]) -> str:
    """``preferred`` if free, else ``preferred_2``, ``preferred_3``..."""
    if preferred not in taken:
        return preferred
    n = 2
    while f"{preferred}_{n}" in taken:
        n += 1
    return f"{preferred}_{n}"


def builder_name(model_fn_name: str) -> str:
    """``_model_fn`` -> ``_build_model``; ``cnn_model_fn`` -> ``build_cnn_model``."""
    lead = re.match(r"_*", model_fn_name).group(0)
    core = model_fn_name[len(lead):]
    core = re.sub(r"_?(fn|func|function)$", "", core) or "model"
    core = re.sub(r"^(make|create|get|build)_", "", core) or "model"  # a factory's name
    if not core.endswith("model"):
        core = f"{core}_model"
    return f"{lead}build_{core}"


def replace_in(node: cst.CSTNode, replacements: dict[cst.CSTNode, cst.CSTNode]) -> cst.CSTNode:
    """``node`` with the given descendants (matched by identity) replaced: by a node, or by
    what a function makes of the descendant once its own descendants are replaced."""
    if not replacements:
        return node
    return node.visit(_Replacer(replacements))


class _Replacer(cst.CSTTransformer):
    def __init__(self, replacements):
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original_node, updated_node):
        new = self.replacements.get(original_node, updated_node)
        if callable(new):
            # A node that wraps the original, the edits inside it kept (``ConversionPlan.wrap``);
            # never the original itself, which a second pass would wrap again.
            return new(updated_node.deep_clone() if updated_node is original_node else updated_node)
        return new


#: Emitted lines longer than this are wrapped, one argument per line (where the file's own
#: length is longer, that: ``max_line``); shorter ones over the file's length, black wraps.
MAX_LINE = 99
#: The line length of the file being converted (the engine sets it for each file's passes).
LINE_LIMIT: contextvars.ContextVar[int] = contextvars.ContextVar("e2k_line_limit", default=MAX_LINE)


def max_line() -> int:
    """The length over which e2k lays a statement it writes out on several lines itself."""
    return max(MAX_LINE, LINE_LIMIT.get())


def _hanging(indent: str) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(), indent=True, last_line=cst.SimpleWhitespace(indent)
    )


def fit_line(statement: cst.SimpleStatementLine, depth: int, module_indent: str) -> cst.SimpleStatementLine:
    """Wrap the outermost call of a too-long statement, one argument per line::

        model.compile(
            optimizer=optimizer,
            loss=tf.keras.losses.MeanSquaredError())
    """
    if not isinstance(statement, cst.SimpleStatementLine):
        return statement  # a block kept as written (an `if` choosing the loss): its lines are the program's
    width = len(module_indent) * depth + max(len(line) for line in code(statement).splitlines() or [""])
    if width <= max_line():
        return statement
    small = statement.body[0]
    value = getattr(small, "value", None)
    if isinstance(value, cst.ListComp):
        wrapped = value.with_changes(
            lbracket=cst.LeftSquareBracket(whitespace_after=_hanging("    ")),
            for_in=value.for_in.with_changes(whitespace_before=_hanging("    ")),
            rbracket=cst.RightSquareBracket(whitespace_before=_hanging("")),
        )
        return statement.with_changes(body=[small.with_changes(value=wrapped), *statement.body[1:]])
    if not isinstance(value, cst.Call) or len(value.args) < 1:
        return statement
    args = []
    for i, arg in enumerate(value.args):
        last = i == len(value.args) - 1
        comma = cst.MaybeSentinel.DEFAULT if last else cst.Comma(whitespace_after=_hanging("    "))
        args.append(arg.with_changes(comma=comma))
    wrapped = value.with_changes(args=args, whitespace_before_args=_hanging("    "))
    return statement.with_changes(body=[small.with_changes(value=wrapped), *statement.body[1:]])


def vertical_list(values: list[cst.BaseExpression], indent: str = "    ") -> cst.List:
    """``[\n    a,\n    b,\n]``: one element per line, with a trailing comma. ``indent`` is
    relative to the statement (deeper when the list is itself a wrapped argument)."""
    closing = indent[:-4]
    elements = [
        cst.Element(v, comma=cst.Comma(whitespace_after=_hanging(indent if i < len(values) - 1 else closing)))
        for i, v in enumerate(values)
    ]
    return cst.List(elements, lbracket=cst.LeftSquareBracket(whitespace_after=_hanging(indent)))


def reindent_docstrings(statements: list[cst.BaseStatement], indent: str) -> list[cst.BaseStatement]:
    """Templates are written with 4-space indents; libcst re-indents their code to the file's
    own width, but not the continuation lines of a docstring, which are text. Those lines
    get the file's indent too (``indent`` per level instead of 4 spaces)."""
    if indent == "    ":
        return statements

    class _Docstrings(cst.CSTTransformer):
        def __init__(self):
            self.depth = 0

        def visit_IndentedBlock(self, node):
            self.depth += 1

        def leave_IndentedBlock(self, original, updated):
            self.depth -= 1
            return updated

        def leave_SimpleString(self, original, updated):
            value = updated.value
            if "\n" not in value:
                return updated
            old, new = "    " * self.depth, indent * self.depth
            lines = value.split("\n")
            lines[1:] = [new + line[len(old):] if line.startswith(old) else line for line in lines[1:]]
            return updated.with_changes(value="\n".join(lines))

    return [s.visit(_Docstrings()) for s in statements]


def nested(definitions: list[cst.BaseStatement], indent: str) -> list[cst.BaseStatement]:
    """Definitions written for the module put one block deeper (in a function's body):
    libcst indents their code, not the continuation lines of their docstrings (text), which
    get ``indent`` more here; a blank line between two of them, as the file's own code has."""
    class _Docstrings(cst.CSTTransformer):
        def leave_SimpleString(self, original, updated):
            if "\n" not in updated.value:
                return updated
            lines = updated.value.split("\n")
            lines[1:] = [indent + line if line.strip() else line for line in lines[1:]]
            return updated.with_changes(value="\n".join(lines))

    out = []
    for i, statement in enumerate(definitions):
        statement = statement.visit(_Docstrings())
        if i and isinstance(statement, (cst.ClassDef, cst.FunctionDef)) and not statement.leading_lines:
            statement = statement.with_changes(leading_lines=[blank_line()])
        out.append(statement)
    return out
