"""Feature columns, read from the source, and the Keras preprocessing that computes the same.

A canned Estimator's ``feature_columns`` are read statically into :class:`Column` objects
(followed through names bound once, list literals, ``+`` of lists and comprehensions over
literal lists). Each column then says how its values are computed, as code of the model that
replaces the Estimator:

- ``preprocess`` (runs in ``tf.data``): raw features -> floats (numeric columns) and *ids* in
  the Estimator's own id space (vocabulary ids first, then out-of-vocabulary buckets; ``-1``
  for "no id", which feature columns give to out-of-vocabulary values without OOV buckets and
  to the ``""`` / ``-1`` values they ignore);
- ``call`` (inside the model): ids -> one-hot vectors (indicator and bucketized columns) or
  a ``Dense(dimension, use_bias=False)`` of them (embedding columns: the rows of the same
  [buckets, dimension] table a feature column looks up, trained with dense gradients).

Names follow TF1 (``age_bucketized``, ``a_X_b``, ``city_embedding``): canned Estimators order
their inputs and create their variables sorted by those names, and the Keras model must do
the same for its weights to line up with the Estimator's.
"""
from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import BuiltinScope, ComprehensionScope, GlobalScope

from estimator2keras import _emit
from estimator2keras._context import RewriteContext
from estimator2keras._rule import Unsupported
from estimator2keras._symbols import tf2_respellings
from estimator2keras._units import (
    Binding, _in_estimator_call, _single_assignment, _single_return, accesses_of, bind_arguments, resolve, value_of,
)

CODE = "E2K504"

SIGNATURES = {
    "numeric_column": ("key", "shape", "default_value", "dtype", "normalizer_fn"),
    "bucketized_column": ("source_column", "boundaries"),
    "categorical_column_with_vocabulary_list": ("key", "vocabulary_list", "dtype", "default_value", "num_oov_buckets"),
    "categorical_column_with_vocabulary_file": (
        "key", "vocabulary_file", "vocabulary_size", "num_oov_buckets", "default_value", "dtype",
    ),
    "categorical_column_with_hash_bucket": ("key", "hash_bucket_size", "dtype"),
    "categorical_column_with_identity": ("key", "num_buckets", "default_value"),
    "crossed_column": ("keys", "hash_bucket_size", "hash_key"),
    "indicator_column": ("categorical_column",),
    "embedding_column": (
        "categorical_column", "dimension", "combiner", "initializer", "ckpt_to_load_from",
        "tensor_name_in_ckpt", "max_norm", "trainable", "use_safe_embedding_lookup",
    ),
    "weighted_categorical_column": ("categorical_column", "weight_feature_key", "dtype"),
}
KINDS = {
    "numeric_column": "numeric",
    "bucketized_column": "bucketized",
    "categorical_column_with_vocabulary_list": "vocabulary",
    "categorical_column_with_vocabulary_file": "vocabulary_file",
    "categorical_column_with_hash_bucket": "hash",
    "categorical_column_with_identity": "identity",
    "crossed_column": "crossed",
    "indicator_column": "indicator",
    "embedding_column": "embedding",
    "weighted_categorical_column": "weighted",
}
CATEGORICAL = frozenset({"bucketized", "vocabulary", "vocabulary_file", "hash", "identity", "crossed", "weighted"})
#: Columns whose ids can be -1 ("no id"): their consumers must not hash or look up -1.
STRING_DTYPES = frozenset({"string"})
INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})


@dataclass(eq=False)
class Column:
    """One feature column as the source builds it."""

    kind: str
    call: cst.Call
    args: dict[str, cst.Arg]
    name: str  # the column's TF1 name: canned Estimators sort their inputs by it
    binding: Binding | None = None
    parent: "Column | None" = None  # source (bucketized) or categorical column (indicator, embedding, weighted)
    keys: list = field(default_factory=list)  # crossed: str (a raw feature) or Column, as given
    var: str = ""  # the Python name the emitted code gives it
    key: str | None = None  # the raw feature it reads (numeric and base categorical columns)
    env: dict = field(default_factory=dict)  # loop variable or loop temporary -> its value (as source)
    #: A loop over keys known only at run time (``for key in train.keys(): ...append(
    #: numeric_column(key))``): the iterable, as source; the column stands for one column per key.
    family: cst.BaseExpression | None = None
    #: A vocabulary read at run time without dtype=: strings or integers, told when the model is built.
    runtime_dtype: bool = False
    #: A numeric column's shape read at run time (``shape=images.shape[1:]``): its width is
    #: counted when the model is built.
    runtime_shape: bool = False
    #: Arguments whose code reads names of the function that builds the Estimator
    #: (``dimension=embedding_size``): the model's constructor takes their values there.
    given: set = field(default_factory=set)

    def value(self, name: str) -> cst.BaseExpression | None:
        arg = self.args.get(name)
        return arg.value if arg is not None else None

    @property
    def is_categorical(self) -> bool:
        return self.kind in CATEGORICAL

    @property
    def base(self) -> "Column":
        """The categorical column whose ids this one uses (itself, unless weighted)."""
        return self.parent if self.kind == "weighted" else self


class ColumnReader:
    """Reads the feature columns an Estimator argument builds, resolving names."""

    def __init__(self, ctx: RewriteContext):
        self.ctx = ctx
        self.columns: dict[int, Column] = {}  # id(call) -> Column: one object per column built
        self.bindings: list[Binding] = []  # statements that only build columns for the Estimator
        self.list_bindings: list[Binding] = []
        self.extended_bindings: list[Binding] = []  # `columns = [...]` and what appends to it
        self.alias_bindings: list[Binding] = []  # `fc = tf.feature_column`
        #: `wide, deep = build_model_columns()`: one binding per name the statement binds.
        self.unpacked_bindings: list[Binding] = []
        #: A read of the columns by other code: their statements then stay (``removable`` is empty).
        self.kept: cst.CSTNode | None = None
        #: The parameters of the helper being read (``add_more_features(feats)``): name -> the
        #: argument it was called with.
        self.params: dict[str, cst.BaseExpression] = {}
        #: The scope the Estimator is built in: code reading its names is evaluated there.
        self.site_scope = None

    # -- lists of columns -----------------------------------------------------------------------
    def read_list(self, expr: cst.BaseExpression) -> list[Column]:
        if isinstance(expr, (cst.List, cst.Tuple)):
            out = []
            for element in expr.elements:
                if isinstance(element, cst.StarredElement):
                    out += self.read_list(element.value)
                else:
                    out.append(self.read_column(element.value))
            return out
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            return self.read_list(expr.left) + self.read_list(expr.right)
        if isinstance(expr, cst.ListComp):
            return self._comprehension(expr)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("list", "tuple") \
                and len(expr.args) == 1 and not expr.args[0].keyword:
            return self.read_list(expr.args[0].value)
        if isinstance(expr, cst.Name) and expr.value in self.params and self._is_param(expr):
            return self._argument(expr, self.read_list)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and (
                expr.args or isinstance(resolve(self.ctx, expr.func), cst.FunctionDef)
                and resolve(self.ctx, expr.func).params.params):
            returned = self._helper_with_arguments(expr)
            if returned is not None:
                return returned
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and not expr.args:
            # `feature_columns=build_columns()`: what the function of the file returns; the
            # function goes with the Estimator when nothing else calls it.
            helper = resolve(self.ctx, expr.func)
            returned = _single_return(helper) if isinstance(helper, cst.FunctionDef) else None
            if returned is not None and not helper.params.params and not helper.decorators:
                self._use_binding(Binding(helper.name.value, helper, helper.name, expr), self.bindings)
                return self.read_list(returned)
        if isinstance(expr, cst.Call) and (self.ctx.call_api_path(expr) or "").startswith(
                ("feature_column.shared_embedding", "feature_column.sequence_")):
            raise Unsupported(f"`{_emit.code(expr.func)}` is not converted yet", expr, CODE)
        if isinstance(expr, cst.Name):
            bound = resolve(self.ctx, expr) or self._first_binding(expr)
            if isinstance(bound, Binding):
                built = self._built_list(expr, bound)
                if built is not None:
                    return built
                self._use_binding(bound, self.list_bindings)
                return self.read_list(bound.value)
            returned = self._returned_by_helper(expr)
            if returned is not None:
                return self.read_list(returned)
        raise Unsupported("these feature columns are not a list e2k can read (a list literal, names bound once, "
                          "`+`, `+=`, append or extend of lists, a comprehension or loop over values the source spells)",
                          expr, CODE)

    def _helper_with_arguments(self, call: cst.Call) -> list[Column] | None:
        """``feature_cols = add_more_features(INPUT_COLUMNS)`` (the taxifare trainer) or
        ``get_deep_and_wide_columns()`` with ``embedding_size=8`` (census): a function of the
        file returning the columns, read with the arguments it is called with (or its
        defaults). Its parameters may only be read (not changed) in its body. It goes with the
        Estimator when nothing else calls it."""
        helper = resolve(self.ctx, call.func)
        if not isinstance(helper, cst.FunctionDef) or helper.decorators or helper.asynchronous:
            return None
        returned = _single_return(helper)
        names = {p.name.value for p in helper.params.params}
        changed = [n for n in _walk(helper.body) if isinstance(n, cst.Name) and n.value in names
                   and not self.ctx.within(n, (returned,)) and not _pure_read(self.ctx, n)]
        if returned is None or changed:
            raise Unsupported(f"`{helper.name.value}` changes its parameters or returns more than once; e2k reads "
                              "a helper that returns the columns, reading its parameters only", call, CODE)
        params = helper.params
        if params.star_arg is not cst.MaybeSentinel.DEFAULT and params.star_arg is not None or params.kwonly_params \
                or params.star_kwarg is not None or params.posonly_params:
            raise Unsupported(f"`{helper.name.value}` takes *args, **kwargs or keyword-only parameters", call, CODE)
        bound = bind_arguments(call, tuple(p.name.value for p in params.params))
        env = {}
        for param in params.params:
            arg = bound.get(param.name.value)
            if arg is None and param.default is None:
                raise Unsupported(f"`{helper.name.value}` is called without `{param.name.value}`", call, CODE)
            env[param.name.value] = arg.value if arg is not None else param.default
        self._use_binding(Binding(helper.name.value, helper, helper.name, call), self.bindings)
        outer, self.params = self.params, env
        try:
            return self.read_list(returned)
        finally:
            self.params = outer

    def _is_param(self, name: cst.Name) -> bool:
        scope = self.ctx.scope(name)
        assignments = list(scope[name.value]) if scope is not None else []
        return len(assignments) == 1 and isinstance(getattr(assignments[0], "node", None), cst.Param)

    def _argument(self, name: cst.Name, read):
        """A parameter of the helper being read: its argument, read where the call is."""
        value = self.params[name.value]
        outer, self.params = self.params, {}
        try:
            return read(value)
        finally:
            self.params = outer

    def _returned_by_helper(self, name: cst.Name) -> cst.BaseExpression | None:
        """``wide, deep = build_model_columns()`` (TensorFlow's official wide & deep): what the
        function of the file returns there. The function goes with the Estimator when only
        that statement calls it, and the statement when only the Estimators read its names."""
        value = value_of(self.ctx, name)
        assignment = _single_assignment(self.ctx, name)
        target = getattr(assignment, "node", None)
        statement = self.ctx.enclosing_statement(target) if target is not None else None
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
        if value is None or not (isinstance(small, cst.Assign) and isinstance(small.value, cst.Call)
                                 and isinstance(small.value.func, cst.Name)):
            return None
        helper = resolve(self.ctx, small.value.func)
        if not isinstance(helper, cst.FunctionDef) or small.value.args:
            return None  # a helper taking arguments would need them bound
        names = [e.value for e in small.targets[0].target.elements]
        for element in names:
            self._use_binding(Binding(element.value, statement, element, small.value), self.unpacked_bindings)
        self._use_binding(Binding(helper.name.value, helper, helper.name, small.value), self.bindings)
        return value

    def _feeds_only(self, statement, consumers: list[cst.CSTNode], seen: set) -> bool:
        """``deep_columns = [indicator_column(gender), ...]`` read only by the Estimators
        converted together (the other members of the group): a read there is no use elsewhere."""
        target = _assigned_name(statement) if statement is not None else None
        if target is None or id(statement) in seen:
            return False
        seen.add(id(statement))
        reads = accesses_of(self.ctx, target)
        return bool(reads) and all(
            self.ctx.within(read, consumers)
            or self._feeds_only(self.ctx.enclosing_statement(read), consumers, seen)
            for read in reads)

    def _first_binding(self, name: cst.Name) -> Binding | None:
        """``columns = [...]`` when ``columns += [...]`` follows it (what reaches the read is
        the ``+=``): the one plain assignment of the name, the rest read as changes to it."""
        scope = self.ctx.scope(name)
        if scope is None:
            return None
        plain = []
        for assignment in scope.assignments[name.value]:
            target = getattr(assignment, "node", None)
            statement = self.ctx.enclosing_statement(target) if isinstance(target, cst.Name) else None
            small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and small.targets[0].target is target:
                plain.append(Binding(name.value, statement, target, small.value))
            elif not (isinstance(small, cst.AugAssign) and small.target is target and isinstance(small.operator, cst.AddAssign)):
                return None
        return plain[0] if len(plain) == 1 else None

    def _built_list(self, name: cst.Name, bound: Binding) -> list[Column] | None:
        """``columns = []`` then ``columns.append(...)``, ``columns.extend([...])``, ``columns +=
        [...]`` or ``for key in KEYS: columns.append(numeric_column(key))`` in the same block
        (TensorFlow's premade-Estimator tutorial): the columns, in the order they were added.
        None when the list is not changed after it is bound; refused when it is changed in a
        way e2k cannot read."""
        block = self.ctx.parent(bound.statement)
        body = getattr(block, "body", None)
        if not isinstance(body, (list, tuple)):
            return None
        start = next(i for i, statement in enumerate(body) if statement is bound.statement)
        reader = self.ctx.enclosing_statement(name)
        parts: list[tuple[cst.BaseStatement, object]] = []
        for statement in body[start + 1:]:
            if reader is not None and self.ctx.within(reader, (statement,)):
                break
            mentions = [n for n in _walk(statement) if isinstance(n, cst.Name) and n.value == name.value]
            if all(_in_estimator_call(self.ctx, n) for n in mentions):
                continue  # no mention, or only other Estimators reading the list (converted with this one)
            part = self._mutation(statement, name.value)
            if part is None and all(_pure_read(self.ctx, n) for n in mentions):
                continue  # `age_column = feature_columns[7]`: read elsewhere too (the columns then stay)
            if part is None:
                raise Unsupported(f"`{name.value}` is changed here in a way e2k cannot read", statement, CODE)
            parts.append((statement, part))
        if not parts:
            return None
        self._use_binding(bound, self.extended_bindings)
        columns = self.read_list(bound.value)
        for statement, (kind, value) in parts:
            self._use_binding(Binding(name.value, statement, bound.target, bound.value), self.extended_bindings)
            if kind == "list":
                columns += self.read_list(value)
            elif kind == "column":
                columns.append(self.read_column(value))
            else:
                variable, values, iterable, call, temps = value
                if values is not None:
                    columns += [self._column_call(call, None, env={**temps, variable: v}) for v in values]
                else:
                    columns.append(self._family(call, variable, iterable, temps))
        return columns

    def _family(self, call: cst.Call, variable: str, iterable: cst.BaseExpression, temps: dict) -> Column:
        """``for key in train.keys(): columns.append(numeric_column(key))``: the keys are known
        only at run time, so one column stands for all of them."""
        self.runtime(iterable, {}, "the loop's keys")
        column = self._column_call(call, None, env={**temps, variable: cst.Name(variable)}, family=iterable)
        if column.kind != "numeric":
            raise Unsupported("a loop over keys known only at run time builds columns other than numeric_column: "
                              "not converted yet", call, CODE)
        key = column.value("key")
        if not (isinstance(key, cst.Name) and key.value == variable):
            raise Unsupported(f"the column's key is not the loop's `{variable}`", call, CODE)
        for arg in ("shape", "normalizer_fn", "default_value"):
            value = column.value(arg)
            if value is not None and any(isinstance(n, cst.Name) and n.value in column.env for n in _walk(value)):
                raise Unsupported(f"numeric_column({arg}=...) depends on the loop's key", value, CODE)
        return column

    def _mutation(self, statement: cst.BaseStatement, name: str):
        """What ``statement`` adds to the list ``name``: ("list", expr), ("column", expr),
        ("loop", (variable, values, column call)); None when it is anything else."""
        if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
            small = statement.body[0]
            if isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign) \
                    and isinstance(small.target, cst.Name) and small.target.value == name:
                return "list", small.value
            call = small.value if isinstance(small, cst.Expr) else None
            if (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)
                    and call.func.value.value == name and len(call.args) == 1 and not call.args[0].keyword
                    and not call.args[0].star):
                method = call.func.attr.value
                if method in ("append", "extend"):
                    return ("column" if method == "append" else "list"), call.args[0].value
            return None
        if (isinstance(statement, cst.For) and statement.orelse is None and isinstance(statement.target, cst.Name)
                and isinstance(statement.body, cst.IndentedBlock) and not statement.asynchronous):
            # `for name in CATEGORICAL: vocabulary = df[name].unique(); columns.append(...)`
            # (TensorFlow's linear-model tutorial): temporaries, then the append.
            body = statement.body.body
            temps: dict[str, cst.BaseExpression] = {}
            for line in body[:-1]:
                target = _assigned_name(line)
                if target is None or target.value in temps or not self._loop_local(target, statement):
                    return None
                temps[target.value] = line.body[0].value
            inner = self._mutation(body[-1], name)
            if inner is None or inner[0] != "column" or not isinstance(inner[1], cst.Call):
                return None
            return "loop", (statement.target.value, self.literal_sequence(statement.iter), statement.iter,
                            inner[1], temps)
        return None

    def _loop_local(self, target: cst.Name, loop: cst.For) -> bool:
        """A temporary of the loop body: bound there only and read nowhere else."""
        scope = self.ctx.scope(target)
        if scope is None:
            return False
        assignments = list(scope.assignments[target.value])
        accesses = list(scope.accesses[target.value])
        return len(assignments) == 1 and all(self.ctx.within(a.node, (loop,)) for a in accesses)

    def runtime(self, expr: cst.BaseExpression, env: dict, what: str, column: Column | None = None,
                arg: str | None = None) -> None:
        """``expr`` is carried over as code evaluated when the model is built: every name it
        reads must be a loop variable or temporary (substituted), a builtin, or a module-level
        name bound once (an import, a definition, ``df = pd.read_csv(...)``). A name bound once
        in the function that builds the Estimator (``embedding_size``, ``mnist``) is read there:
        the column's argument is then given to the model's constructor."""
        for node in _walk(expr):
            if not isinstance(node, cst.Name):
                continue
            if node.value in env:
                value = env[node.value]
                if not (isinstance(value, cst.Name) and value.value == node.value):  # a family's own key
                    self.runtime(value, {k: v for k, v in env.items() if k != node.value}, what, column, arg)
                continue
            parent = self.ctx.parent(node)
            if isinstance(parent, cst.Attribute) and parent.attr is node:
                continue
            if isinstance(parent, (cst.Arg, cst.Param)) and getattr(parent, "keyword", None) is node:
                continue
            if isinstance(parent, cst.Param):
                continue
            scope = self.ctx.scope(node)
            assignments = list(scope[node.value]) if scope is not None else []
            if assignments and (all(isinstance(a.scope, (BuiltinScope, ComprehensionScope)) for a in assignments)
                                or (len(assignments) == 1 and isinstance(assignments[0].scope, GlobalScope))):
                continue
            if (column is not None and self.site_scope is not None and scope is self.site_scope
                    and len(assignments) == 1 and assignments[0].scope is self.site_scope):
                column.given.add(arg)
                continue
            raise Unsupported(f"{what} reads `{node.value}`, which is not a module-level name bound once: e2k "
                              "evaluates it when the model is built", node, CODE)

    def _comprehension(self, comp: cst.ListComp) -> list[Column]:
        loop = comp.for_in
        if loop.inner_for_in is not None or loop.ifs or not isinstance(loop.target, cst.Name) or loop.asynchronous:
            raise Unsupported("only a comprehension with one `for name in <literal list>` is read", comp, CODE)
        values = self.literal_sequence(loop.iter)
        if values is None:
            raise Unsupported("the comprehension does not loop over a literal list", loop.iter, CODE)
        name = loop.target.value
        if not isinstance(comp.elt, cst.Call):
            raise Unsupported("the comprehension does not build a feature column call", comp.elt, CODE)
        for arg in comp.elt.args[1:]:
            if any(isinstance(n, cst.Name) and n.value == name for n in _walk(arg)):
                raise Unsupported(f"only the first argument of the column may read `{name}`", arg, CODE)
        return [self._column_call(comp.elt, None, env={name: value}) for value in values]

    def literal_sequence(self, expr: cst.BaseExpression, _depth: int = 0) -> list[cst.BaseExpression] | None:
        """The values a loop over ``expr`` takes, when the source spells them: a list or tuple
        literal, the keys of a dict literal (``.keys()``, ``list(...)``, a ``pd.DataFrame({...})``
        of one), a slice or sum of such, through names bound once."""
        if _depth > 8:
            return None
        again = lambda e: self.literal_sequence(e, _depth + 1)  # noqa: E731
        if isinstance(expr, cst.Name):
            value = value_of(self.ctx, expr)
            return again(value) if value is not None else None
        if isinstance(expr, (cst.List, cst.Tuple)) and all(not isinstance(e, cst.StarredElement) for e in expr.elements):
            return [e.value for e in expr.elements]
        if isinstance(expr, cst.Dict) and all(isinstance(e, cst.DictElement) for e in expr.elements):
            return [e.key for e in expr.elements]
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            left, right = again(expr.left), again(expr.right)
            return left + right if left is not None and right is not None else None
        if isinstance(expr, cst.Call) and not any(a.keyword or a.star for a in expr.args):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value == "keys" and not expr.args:
                return again(func.value)
            if isinstance(func, cst.Name) and func.value in ("list", "tuple") and len(expr.args) == 1:
                return again(expr.args[0].value)
            if isinstance(func, (cst.Name, cst.Attribute)) and _emit.code(func).rsplit(".", 1)[-1] == "DataFrame" \
                    and len(expr.args) == 1 and isinstance(expr.args[0].value, (cst.Dict, cst.Name)):
                return again(expr.args[0].value)
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Slice):
            values, part = again(expr.value), expr.slice[0].slice
            bounds = []
            for bound in (part.lower, part.upper):
                number = _signed_int(bound) if bound is not None else None
                if bound is not None and number is None:
                    return None
                bounds.append(number)
            if values is None or part.step is not None:
                return None
            return values[bounds[0]:bounds[1]]
        return None

    # -- one column -----------------------------------------------------------------------------
    def read_column(self, expr: cst.BaseExpression, env: dict | None = None) -> Column:
        if env:
            # A column inside a column of a loop's body (`indicator_column(
            # categorical_column_with_vocabulary_list(name, vocabulary))`): the loop's variable and
            # temporaries hold this pass's values, the inner column is made once per pass too.
            if isinstance(expr, cst.Name) and expr.value in env:
                expr = env[expr.value]
            if isinstance(expr, cst.Call):
                return self._column_call(expr, None, env=env)
        if isinstance(expr, cst.Name) and expr.value in self.params and self._is_param(expr):
            return self._argument(expr, self.read_column)
        if isinstance(expr, cst.Name) and not isinstance(resolve(self.ctx, expr), Binding):
            value = value_of(self.ctx, expr)  # `a, b = [numeric_column("a"), ...]`
            if isinstance(value, cst.Call):
                known = self.columns.get(id(value))
                return known if known is not None else self._column_call(value, None)
        if isinstance(expr, cst.Name):
            bound = resolve(self.ctx, expr)
            if isinstance(bound, Binding) and isinstance(bound.value, cst.Call):
                known = self.columns.get(id(bound.value))
                if known is not None:
                    return known
                self._use_binding(bound, self.bindings)
                return self._column_call(bound.value, bound)
        if isinstance(expr, cst.Call):
            known = self.columns.get(id(expr))
            return known if known is not None else self._column_call(expr, None)
        raise Unsupported("this feature column is not a feature_column call e2k can follow", expr, CODE)

    def _use_binding(self, binding: Binding, into: list[Binding]) -> None:
        if all(b.statement is not binding.statement for b in into):
            into.append(binding)

    def _column_call(self, call: cst.BaseExpression, binding: Binding | None, env: dict | None = None,
                     family: cst.BaseExpression | None = None) -> Column:
        if not isinstance(call, cst.Call):
            raise Unsupported("this feature column is not a feature_column call e2k can follow", call, CODE)
        path = self._aliased_path(call) or self.ctx.call_api_path(call)  # the alias goes with the columns
        function = path.split(".", 1)[1] if path and path.startswith("feature_column.") else None
        if function not in SIGNATURES:
            what = _emit.code(call.func)
            raise Unsupported(f"`{what}` is not a feature column e2k converts", call, CODE)
        args = bind_arguments(call, SIGNATURES[function])
        kind = KINDS[function]
        if self.params:  # inside a helper being read: its parameters hold the call's arguments
            env = {**self.params, **(env or {})}
        column = Column(kind, call, args, name="", binding=binding, env=env or {}, family=family)
        if env is None:
            self.columns[id(call)] = column
        getattr(self, f"_read_{kind}")(column)
        return column

    def _aliased_path(self, call: cst.Call) -> str | None:
        """``fc.numeric_column(...)`` after ``fc = tf.feature_column`` (a module bound to a name)."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
            return None
        bound = resolve(self.ctx, func.value)
        if not isinstance(bound, Binding) or self.ctx.api_path(bound.value) != "feature_column":
            return None
        self._use_binding(bound, self.alias_bindings)
        return f"feature_column.{func.attr.value}"

    def _key(self, column: Column) -> str:
        key = self.string(column.value("key"), column.env)
        if key is None:
            raise Unsupported("the feature column's key is not a string literal", column.call, CODE)
        return key

    def string(self, expr: cst.BaseExpression | None, env: dict | None = None) -> str | None:
        if isinstance(expr, cst.Name) and env and expr.value in env:
            expr = env[expr.value]
        if isinstance(expr, cst.Name):
            bound = resolve(self.ctx, expr)
            expr = bound.value if isinstance(bound, Binding) else expr
        if isinstance(expr, cst.SimpleString):
            value = expr.evaluated_value
            return value if isinstance(value, str) else None
        return None

    def integer(self, expr: cst.BaseExpression | None, default: int | None = None, env: dict | None = None) -> int | None:
        if expr is None:
            return default
        if isinstance(expr, cst.Name) and env and expr.value in env:
            expr = env[expr.value]
        if isinstance(expr, cst.Name):
            expr = value_of(self.ctx, expr) or expr  # a binding, or a parameter given at its one call
        if isinstance(expr, cst.Integer):
            return int(expr.evaluated_value)
        return None

    def dtype(self, expr: cst.BaseExpression | None) -> str | None:
        """``"string"``, ``"int64"``, ``"float32"``..., from ``tf.string`` / ``tf.int64``."""
        if expr is None:
            return None
        path = self.ctx.api_path(expr) or ""
        name = path.rsplit(".", 1)[-1]
        if path in (name, f"dtypes.{name}") and name in INT_DTYPES | STRING_DTYPES | {"float16", "float32", "float64"}:
            return name
        raise Unsupported("this dtype is not one e2k reads (tf.string, tf.int64, tf.float32...)", expr, CODE)

    # -- each kind ------------------------------------------------------------------------------
    def _count(self, column: Column, name: str, what: str) -> None:
        """A width the emitted model writes as code (``hash_bucket_size=int(1e4)``,
        ``dimension=EMBEDDING_SIZE``): an int literal, or code it can evaluate where it is."""
        value = column.value(name)
        if value is not None and self.integer(value, env=column.env) is None:
            self.runtime(value, column.env, what, column, name)

    def _read_numeric(self, column: Column) -> None:
        if column.family is not None:
            column.name = "numeric_features"
        else:
            column.key = column.name = self._key(column)
        shape = column.value("shape")
        if shape is not None and _dimension(shape) is None:
            # `shape=mnist.train.images.shape[1:]`: read from the data when the model is built.
            self.runtime(shape, column.env, "the column's shape", column, "shape")
            column.runtime_shape = True
        if self.dtype(column.value("dtype")) in STRING_DTYPES:
            raise Unsupported("a numeric column of strings", column.call, CODE)

    def _read_bucketized(self, column: Column) -> None:
        source = self.read_column(column.value("source_column"), column.env)
        if source.kind != "numeric":
            raise Unsupported("bucketized_column of something other than a numeric_column", column.call, CODE)
        if self.numeric_width(source) != 1:
            raise Unsupported("bucketized_column of a numeric column with shape > 1 is not converted yet", column.call, CODE)
        boundaries = column.value("boundaries")
        if boundaries is None:
            raise Unsupported("bucketized_column without boundaries", column.call, CODE)
        if self.literal_sequence(boundaries) is None:
            # `np.arange(15, 45, 1).tolist()`: evaluated when the model is built, counted by the layer.
            self.runtime(boundaries, column.env, "the bucket boundaries", column, "boundaries")
        column.parent = source
        column.name = f"{source.name}_bucketized"

    def _read_vocabulary(self, column: Column) -> None:
        column.key = column.name = self._key(column)
        vocabulary = column.value("vocabulary_list")
        literal = self.literal_sequence(vocabulary)
        dtype = self.dtype(column.value("dtype"))
        if dtype is None and literal:
            dtype = "string" if all(isinstance(v, (cst.SimpleString, cst.ConcatenatedString)) for v in literal) else (
                "int64" if all(isinstance(v, cst.Integer) for v in literal) else None)
        if literal is None:
            # `dftrain[name].unique()`: read from the data when the model is built.
            self.runtime(vocabulary, column.env, "the vocabulary", column, "vocabulary_list")
        if dtype is None and literal is None:
            column.runtime_dtype = True
            if self.integer(column.value("num_oov_buckets"), 0):
                raise Unsupported("a vocabulary read at run time with out-of-vocabulary buckets: pass dtype= so "
                                  "that e2k knows which values feature columns ignore", vocabulary, CODE)
        elif dtype is None or dtype not in STRING_DTYPES | INT_DTYPES:
            raise Unsupported("the vocabulary's type is not known: write its values as literals or pass dtype=",
                              vocabulary, CODE)
        self._check_oov(column)

    def _read_vocabulary_file(self, column: Column) -> None:
        column.key = column.name = self._key(column)
        path = column.value("vocabulary_file")
        if path is not None and self.string(path, column.env) is None:
            self.runtime(path, column.env, "the vocabulary file", column, "vocabulary_file")
        dtype = self.dtype(column.value("dtype")) or "string"
        if dtype not in STRING_DTYPES | INT_DTYPES:
            raise Unsupported("a vocabulary file of this dtype", column.call, CODE)
        if column.value("vocabulary_size") is not None and self.integer(column.value("vocabulary_size")) is None:
            raise Unsupported("vocabulary_size= is not an int literal", column.value("vocabulary_size"), CODE)
        self._check_oov(column)

    def _check_oov(self, column: Column) -> None:
        if self.integer(column.value("num_oov_buckets"), 0) is None:
            raise Unsupported("num_oov_buckets= is not an int literal", column.value("num_oov_buckets"), CODE)
        default = column.value("default_value")
        if default is not None and _emit.code(default) not in ("-1", "None"):
            raise Unsupported("a default_value other than -1 is not converted yet", default, CODE)

    def _read_hash(self, column: Column) -> None:
        column.key = column.name = self._key(column)
        self._count(column, "hash_bucket_size", "the number of hash buckets")
        dtype = self.dtype(column.value("dtype")) or "string"
        if dtype not in STRING_DTYPES | INT_DTYPES:
            raise Unsupported("a hashed column of this dtype", column.call, CODE)

    def _read_identity(self, column: Column) -> None:
        column.key = column.name = self._key(column)
        self._count(column, "num_buckets", "the number of buckets")
        default = column.value("default_value")
        if default is not None and _emit.code(default) != "None":
            raise Unsupported("categorical_column_with_identity(default_value=...) is not converted yet", default, CODE)

    def _read_crossed(self, column: Column) -> None:
        self._count(column, "hash_bucket_size", "the number of hash buckets")
        if column.value("hash_key") is not None and _emit.code(column.value("hash_key")) != "None":
            raise Unsupported("crossed_column(hash_key=...): Keras's HashedCrossing has no hash key", column.call, CODE)
        keys = self.literal_sequence(column.value("keys"))
        if not keys or len(keys) < 2:
            raise Unsupported("the crossed keys are not a literal list of two or more", column.value("keys"), CODE)
        names = []
        for key in keys:
            text = self.string(key, column.env)
            if text is not None:
                column.keys.append(text)
                names.append(text)
                continue
            inner = self.read_column(key, column.env)
            if inner.kind == "hash":
                raise Unsupported("a hashed column cannot be crossed (the Estimator refuses it too): cross the "
                                  "feature's name", key, CODE)
            if inner.kind not in ("bucketized", "vocabulary", "vocabulary_file", "identity"):
                raise Unsupported(f"crossing a {inner.kind} column is not converted yet", key, CODE)
            if inner.runtime_dtype:
                raise Unsupported("crossing a vocabulary read at run time without dtype= is not converted yet",
                                  key, CODE)
            column.keys.append(inner)
            names.append(inner.name)
        column.name = "_X_".join(sorted(names))

    def _read_indicator(self, column: Column) -> None:
        column.parent = self._categorical(column)
        column.name = f"{column.parent.name}_indicator"

    def _read_embedding(self, column: Column) -> None:
        column.parent = self._categorical(column)
        self._count(column, "dimension", "the embedding's dimension")
        column.name = f"{column.parent.name}_embedding"
        if self.integer(column.value("dimension")) is None and column.value("dimension") is None:
            raise Unsupported("embedding_column without a dimension", column.call, CODE)
        combiner = self.string(column.value("combiner")) if column.value("combiner") is not None else "mean"
        if combiner not in ("mean", "sum", "sqrtn"):
            raise Unsupported("this embedding combiner is not a literal 'mean', 'sum' or 'sqrtn'", column.call, CODE)
        for name in ("ckpt_to_load_from", "tensor_name_in_ckpt", "max_norm", "initializer"):
            value = column.value(name)
            if value is not None and _emit.code(value) != "None":
                raise Unsupported(f"embedding_column({name}=...) is not converted yet", value, CODE)

    def _read_weighted(self, column: Column) -> None:
        column.parent = self._categorical(column)
        if column.parent.kind == "weighted":
            raise Unsupported("a weighted column of a weighted column", column.call, CODE)
        weight_key = self.string(column.value("weight_feature_key"))
        if weight_key is None:
            raise Unsupported("the weight feature key is not a string literal", column.call, CODE)
        column.key = weight_key
        column.name = f"{column.parent.name}_weighted_by_{weight_key}"

    def _categorical(self, column: Column) -> Column:
        inner = self.read_column(column.value("categorical_column"), column.env)
        if not inner.is_categorical:
            raise Unsupported("this column wraps a column that is not categorical", column.call, CODE)
        return inner

    def numeric_width(self, column: Column) -> int | None:
        """The number of values the column gives each example (None: counted at run time)."""
        shape = column.value("shape")
        return 1 if shape is None else _dimension(shape)

    # -- what the conversion removes ------------------------------------------------------------
    def removable(self, consumers: list[cst.CSTNode]) -> list[Binding]:
        """The statements that bound columns (or lists of them) and go with the Estimator. One
        that other code reads too (`age_column = feature_columns[7]` before a
        `tf.keras.layers.DenseFeatures([age_column])`) stays, with every statement it needs
        (the columns it reads, the rest of its list's appends, the helper it calls); the model
        does not need them."""
        bindings = self.list_bindings + self.extended_bindings + self.bindings + self.unpacked_bindings
        inside = [b.statement for b in bindings] + list(consumers)
        reads_of = []
        for binding in bindings:
            if isinstance(binding.statement, cst.FunctionDef):
                reads = accesses_of(self.ctx, binding.statement.name) or [None]
            elif any(binding is b for b in self.extended_bindings):
                scope = self.ctx.scope(binding.target)
                reads = [a.node for a in scope.accesses[binding.name]]
            else:
                reads = accesses_of(self.ctx, binding.target) or [None]
            if any(read is None for read in reads):
                raise Unsupported(
                    f"`{binding.name}` may be rebound where it is read; e2k converts feature columns it can "
                    "follow", binding.target, CODE)
            reads_of.append(reads)
        kept: set[int] = set()
        for index, reads in enumerate(reads_of):
            for read in reads:
                if not (self.ctx.within(read, inside)
                        or self._feeds_only(self.ctx.enclosing_statement(read), consumers, set())):
                    kept.add(index)
                    self.kept = read
        while True:  # what a statement that stays needs stays too
            statements = [bindings[i].statement for i in kept]
            more = {j for j, binding in enumerate(bindings) if j not in kept and (
                any(self.ctx.within(read, statements) for read in reads_of[j])
                or any(binding.statement is bindings[i].statement for i in kept)  # `wide, deep = ...`
                or any(binding.name == bindings[i].name and any(binding is b for b in self.extended_bindings)
                       for i in kept)  # the rest of a list's appends
                or self.ctx.within(self.ctx.parent(binding.statement), statements))}  # inside a helper that stays
            if not more:
                break
            kept |= more
        going = [b for i, b in enumerate(bindings) if i not in kept]
        # `fc = tf.feature_column` goes too when nothing else reads it.
        inside = [b.statement for b in going] + list(consumers) + [b.statement for b in self.alias_bindings]
        for alias in self.alias_bindings:
            reads = accesses_of(self.ctx, alias.target) or [None]
            if all(read is not None and self.ctx.within(read, inside) for read in reads):
                going.append(alias)
        # A statement inside a function that goes (a helper building the columns) goes with it.
        functions = [b.statement for b in going if isinstance(b.statement, cst.FunctionDef)]
        return [b for b in going if not self.ctx.within(self.ctx.parent(b.statement), functions)]


def _assigned_name(statement) -> cst.Name | None:
    small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
        return small.targets[0].target
    return None


def _pure_read(ctx: RewriteContext, name: cst.Name) -> bool:
    """``columns[7]``, ``len(columns)``, ``crossed_column(wide, ...)`` (another feature column
    reads it) or ``return wide, deep``: a read that cannot change the list."""
    parent = ctx.parent(name)
    if isinstance(ctx.enclosing_statement(name), cst.SimpleStatementLine) and isinstance(
            ctx.enclosing_statement(name).body[0], cst.Return) and len(ctx.enclosing_statement(name).body) == 1:
        return True
    if isinstance(parent, cst.Arg) and parent.value is name:
        call = ctx.parent(parent)
        if isinstance(call, cst.Call) and (ctx.call_api_path(call) or "").startswith("feature_column."):
            return True
    if isinstance(parent, cst.Subscript) and parent.value is name:
        statement = ctx.enclosing_statement(name)
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
        targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else []
        return all(not ctx.within(parent, (t,)) for t in targets) and not isinstance(small, (cst.Del, cst.AugAssign))
    if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.ComparisonTarget, cst.Comparison)):
        return True  # `size + 1`, `feats + extra` (a new value)
    if isinstance(parent, (cst.CompFor, cst.For)) and parent.iter is name:
        return True  # iterated over (what the loop does with the columns is another mention)
    arg = parent if isinstance(parent, cst.Arg) else None
    call = ctx.parent(arg) if arg is not None else None
    return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "len"


def substituted(node: cst.BaseExpression, env: dict) -> cst.BaseExpression:
    """``node`` with the loop's variable and temporaries replaced by their values (a
    temporary's value may read the variable: replaced again)."""
    for _ in range(4):
        replaced = node.visit(_Substitute(env))
        if replaced.deep_equals(node):
            return replaced
        node = replaced
    return node


class _Substitute(cst.CSTTransformer):
    def __init__(self, env: dict):
        super().__init__()
        self.env = env

    def visit_Attribute(self, node):  # only the value side of `x.attr`
        node.value.visit(self)
        return False

    def leave_Attribute(self, original, updated):
        return updated.with_changes(value=original.value.visit(self))

    def visit_Arg(self, node):
        return True

    def leave_Arg(self, original, updated):
        return updated.with_changes(keyword=original.keyword)

    def leave_Name(self, original, updated):
        value = self.env.get(original.value)
        return value.deep_clone() if isinstance(value, cst.BaseExpression) else updated


def _docstring(statement) -> bool:
    return (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr)
            and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))) or (
        isinstance(statement, cst.SimpleStatementLine) and all(isinstance(b, cst.Pass) for b in statement.body))


def _signed_int(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and isinstance(node.expression, cst.Integer):
        return -int(node.expression.evaluated_value)
    return None


def _dimension(shape: cst.BaseExpression) -> int | None:
    """The number of values of a literal shape (``3``, ``(28, 28)``: 784), as the Estimator's
    input layer flattens them."""
    if isinstance(shape, cst.Integer):
        return int(shape.evaluated_value)
    if isinstance(shape, (cst.Tuple, cst.List)) and shape.elements and all(
            isinstance(e, cst.Element) and isinstance(e.value, cst.Integer) for e in shape.elements):
        width = 1
        for element in shape.elements:
            width *= int(element.value.evaluated_value)
        return width
    return None


def _walk(node: cst.CSTNode):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


# ---------------------------------------------------------------------------------------------
# Naming
# ---------------------------------------------------------------------------------------------
def identifier(text: str) -> str:
    """A Python identifier for a TF1 column name (``age_bucketized_X_city`` -> ``age_bucketized_x_city``)."""
    ident = re.sub(r"\W+", "_", text).strip("_").lower() or "feature"
    if ident[0].isdigit() or keyword.iskeyword(ident):
        ident = f"f_{ident}"
    return ident


def assign_names(columns: list[Column], taken: set[str]) -> None:
    """Give every column a variable name: the name it was bound to in the source, if any."""
    used = set(taken)
    for column in columns:
        if column.var:
            continue
        if column.binding is not None:
            preferred = column.binding.name
        elif column.kind == "weighted":
            preferred = identifier(column.key)  # the weights themselves
        elif column.kind in ("indicator", "embedding") and column.parent.var:
            preferred = f"{column.parent.var}_{column.kind}"
        else:
            preferred = identifier(column.name)
        column.var = _emit.unique_name(preferred, used)
        used.add(column.var)


def all_columns(columns: list[Column]) -> list[Column]:
    """``columns`` and every column they wrap or cross, each once, inner ones first."""
    out: list[Column] = []

    def visit(column: Column) -> None:
        if any(column is c for c in out):
            return
        if column.parent is not None:
            visit(column.parent)
        for key in column.keys:
            if isinstance(key, Column):
                visit(key)
        out.append(column)

    for column in columns:
        visit(column)
    return out


def respelled(ctx: RewriteContext, node: cst.BaseExpression, tf: str) -> cst.BaseExpression:
    return _emit.replace_in(node, dict(tf2_respellings(ctx, node, tf)))
