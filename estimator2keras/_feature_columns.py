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
import os
import re
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import BuiltinScope, ComprehensionScope, GlobalScope

from estimator2keras import _emit
from estimator2keras._context import RewriteContext
from estimator2keras._rule import Unsupported
from estimator2keras._symbols import tf2_respellings
from estimator2keras._units import (
    Binding, _in_estimator_call, _single_return, accesses_of, bind_arguments, changed_in_place, resolve, unpacking,
    value_of,
)
from estimator2keras._nodes import walk as _walk

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
class Bound:
    """A parameter of a function of the program, as a call of it binds it: the argument's
    code (or the parameter's default) and the values of the names that code reads there."""

    expr: cst.BaseExpression
    env: dict


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
    #: Each argument's value where the code that makes the column spells it through a name of
    #: ``env`` (``vocabulary_list=vocab``, a parameter: the call's ``["male", "female"]``), and
    #: the env that value is read in.
    values: dict = field(default_factory=dict)
    frames: dict = field(default_factory=dict)

    def value(self, name: str) -> cst.BaseExpression | None:
        if name in self.values:
            return self.values[name]
        arg = self.args.get(name)
        return arg.value if arg is not None else None

    def frame(self, name: str) -> dict:
        """The env that ``value(name)`` is read in."""
        return self.frames.get(name, self.env)

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
        #: A call of a function of the program, read: (returned expression, its parameters' values).
        self._frames: dict[tuple[int, int], tuple[cst.BaseExpression, dict]] = {}
        #: The columns of a list read for the names unpacked from it (``age, hours = [...]``).
        self._lists: dict[tuple[int, int], list[Column]] = {}
        self._envs: list[dict] = []  # the envs whose ids key the caches, kept alive
        self._passes: dict[tuple[int, int, int], dict] = {}  # a loop's pass -> its env
        self._by_binding: dict[int, list[Column]] = {}  # a binding's target -> the columns it made
        #: A call's frame -> the function it calls, and an env -> the env it was made in.
        self._function_of: dict[int, cst.FunctionDef] = {}
        self._outer: dict[int, dict] = {}
        #: The scope the Estimator is built in: code reading its names is evaluated there.
        self.site_scope = None
        #: A model_fn's: the names of its factory's (or partial's) parameters, which its Keras
        #: model takes as constructor arguments; the columns' code reads them as ``self.<name>``.
        self.arguments: dict[str, cst.Param] = {}
        #: Those the columns read.
        self.arguments_read: set[str] = set()

    # -- lists of columns -----------------------------------------------------------------------
    def read_list(self, expr: cst.BaseExpression, env: dict | None = None) -> list[Column]:
        """The columns ``expr`` builds. ``env``: the values of the names of the code being
        read that are not its own (a function's parameters bound to a call's arguments, a
        loop's variable and temporaries)."""
        expr, env = self._deref(expr, {} if env is None else env)
        if isinstance(expr, (cst.List, cst.Tuple)):
            out = []
            for element in expr.elements:
                if isinstance(element, cst.StarredElement):
                    out += self.read_list(element.value, env)
                else:
                    out.append(self.read_column(element.value, env))
            return out
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            return self.read_list(expr.left, env) + self.read_list(expr.right, env)
        if isinstance(expr, cst.ListComp):
            return self._comprehension(expr, env)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("list", "tuple") \
                and len(expr.args) == 1 and not expr.args[0].keyword and not expr.args[0].star:
            return self.read_list(expr.args[0].value, env)
        if isinstance(expr, cst.Call):
            # `feature_columns=build_columns()`, `cols.get_columns()`, `add_more_features(INPUT_COLUMNS)`:
            # what the function of the program returns, its parameters bound to the call's arguments.
            entered = self._enter(expr, env)
            if entered is not None:
                return self.read_list(*entered)
        if isinstance(expr, cst.Call) and (self.ctx.call_api_path(expr) or "").startswith(
                ("feature_column.shared_embedding", "feature_column.sequence_")):
            raise Unsupported(f"`{_emit.code(expr.func)}` is not converted yet", expr, CODE)
        if isinstance(expr, cst.Name):
            bound = resolve(self.ctx, expr) or self._first_binding(expr)
            if isinstance(bound, Binding):
                inner = self._env_of(bound.target, env)
                built = self._built_list(expr, bound, inner)
                if built is not None:
                    return built
                self._use_binding(bound, self.list_bindings)
                return self.read_list(bound.value, inner)
            unpacked = self._unpacked(expr, env)
            if isinstance(unpacked, list):  # built by appends after it (`wide, deep = [], []`)
                return unpacked
            if unpacked is not None and not isinstance(unpacked, Column):
                return self.read_list(*unpacked)
        raise Unsupported("these feature columns are not a list e2k can read (a list literal, names bound once, "
                          "`+`, `+=`, append or extend of lists, a comprehension or loop over values the source "
                          "spells, what a function of the program returns)", expr, CODE)

    def _deref(self, expr: cst.BaseExpression, env: dict) -> tuple[cst.BaseExpression, dict]:
        """A name of ``env`` (a parameter, a loop's variable or temporary) -> its value, with
        the names that value reads; anything else as it is."""
        for _ in range(64):
            if not (isinstance(expr, cst.Name) and expr.value in env):
                break
            value = env[expr.value]
            if isinstance(value, Bound):
                expr, env = value.expr, value.env
            elif isinstance(value, cst.Name) and value.value == expr.value:
                break  # a loop over keys known at run time: the key itself
            else:
                expr = value  # a loop's temporary, read in the loop's pass
        return expr, env

    def _env_of(self, node: cst.CSTNode, env: dict) -> dict:
        """The names a binding's value reads: a module-level one reads no function's parameters."""
        return {} if isinstance(self.ctx.scope(node), GlobalScope) else env

    def _made(self, node: cst.CSTNode, env: dict | None) -> tuple[int, int]:
        """A column made by ``node`` in one call of its function (or one pass of its loop)."""
        if env:
            self._envs.append(env)  # kept alive: its id stands for the call
        return id(node), id(env) if env else 0

    def _function(self, call: cst.Call) -> cst.FunctionDef | None:
        """The function of the program that ``call`` calls (``build_columns()``, ``cols.get_columns()``)."""
        if not isinstance(call.func, (cst.Name, cst.Attribute)):
            return None
        helper = resolve(self.ctx, call.func)
        return helper if isinstance(helper, cst.FunctionDef) else None

    def _enter(self, call: cst.Call, env: dict) -> tuple[cst.BaseExpression, dict] | None:
        """A call of a function of the program (of any of its modules): the expression its one
        ``return`` gives, and its parameters bound to the call's arguments (read where the call
        is) or to their defaults. The function goes with the Estimator when nothing else calls
        it. None when ``call`` calls no function of the program; refused when the function
        cannot be read so."""
        helper = self._function(call)
        if helper is None:
            return None
        key = self._made(call, env)
        if key in self._frames:  # the same call, read again (`wide, deep = build_columns()`)
            return self._frames[key]
        name = helper.name.value
        outer = env
        while outer is not None:  # the calls being read: a function calling itself, directly or not, has no end
            if self._function_of.get(id(outer)) is helper:
                raise Unsupported(f"`{name}` calls itself; e2k reads the columns a function returns", call, CODE)
            outer = self._outer.get(id(outer))
        if helper.decorators or helper.asynchronous:
            raise Unsupported(f"`{name}` is decorated or async; e2k reads the columns a plain function returns",
                              call, CODE)
        returned = _single_return(helper)
        params = helper.params
        names = {p.name.value for p in params.params}
        changed = [n for n in _walk(helper.body) if isinstance(n, cst.Name) and n.value in names
                   and not self.ctx.within(n, (returned,)) and not _pure_read(self.ctx, n)] if returned else []
        if returned is None or changed:
            raise Unsupported(f"`{name}` changes its parameters or returns more than once; e2k reads a helper that "
                              "returns the columns, reading its parameters only", call, CODE)
        if params.star_arg is not cst.MaybeSentinel.DEFAULT and params.star_arg is not None or params.kwonly_params \
                or params.star_kwarg is not None or params.posonly_params:
            raise Unsupported(f"`{name}` takes *args, **kwargs or keyword-only parameters", call, CODE)
        try:
            bound = bind_arguments(call, tuple(p.name.value for p in params.params))
        except Unsupported as refusal:
            raise Unsupported(f"the call of `{name}`: {refusal.reason}", call, CODE) from None
        unknown = sorted(set(bound) - names)
        if unknown:
            raise Unsupported(f"`{name}` has no parameter `{unknown[0]}`", call, CODE)
        frame: dict = {}
        for param in params.params:
            arg = bound.get(param.name.value)
            if arg is None and param.default is None:
                raise Unsupported(f"`{name}` is called without `{param.name.value}`", call, CODE)
            # A default is evaluated where the function is defined: it reads no call's names.
            value, value_env = self._deref(arg.value, env) if arg is not None else (param.default, {})
            frame[param.name.value] = Bound(value, value_env)
        self._use_binding(Binding(name, helper, helper.name, call), self.bindings)
        self._envs.append(frame)
        self._function_of[id(frame)], self._outer[id(frame)] = helper, env
        self._frames[key] = (returned, frame)
        return returned, frame

    def _unpacked(self, name: cst.Name, env: dict):
        """``age, hours = [numeric_column(k) for k in ("age", "hours")]``, ``(gender, race) =
        INPUT_COLUMNS``, ``wide, deep = build_model_columns(embedding_size)``: the value the
        statement gives ``name``, as (expression, env) where the value spells its elements (a
        tuple or list literal, or a function's returned one), else the Column. None when
        ``name`` is not bound so."""
        found = unpacking(self.ctx, name)
        if found is None:
            return None
        target, assign, tuple_, index = found
        if any(not isinstance(e.value, cst.Name) for e in tuple_.elements):
            return None
        statement = self.ctx.enclosing_statement(assign)
        count = len(tuple_.elements)
        for each in tuple_.elements:  # the statement goes when only the Estimators read its names
            if accesses_of(self.ctx, each.value):
                self._use_binding(Binding(each.value.value, statement, each.value, assign.value),
                                  self.unpacked_bindings, by_target=True)
        env = self._env_of(target, env)
        value, env = self._deref(assign.value, env)
        if isinstance(value, cst.Call):
            entered = self._enter(value, env)
            if entered is not None:
                value, env = self._deref(*entered)
        if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == count \
                and all(isinstance(e, cst.Element) for e in value.elements):
            for read in accesses_of(self.ctx, target) or []:
                # `wide, deep = [], []` then `wide.append(...)`: the list is built by what follows,
                # as one bound alone (`wide = []`) would be.
                outer = self.ctx.parent(read)
                if read is not name and isinstance(outer, cst.Attribute) and outer.value is read \
                        and outer.attr.value in ("append", "extend", "insert", "remove", "pop", "clear") \
                        or isinstance(outer, cst.AugAssign) and outer.target is read:
                    built = None
                    if value is assign.value and isinstance(statement, cst.SimpleStatementLine):
                        built = self._built_list(name, Binding(target.value, statement, target,
                                                               value.elements[index].value), env)
                    if built is None:
                        raise Unsupported(f"`{name.value}` is changed here in a way e2k cannot read (it is unpacked "
                                          "from a tuple, then changed: bind it alone, `cols = []`, for e2k to follow "
                                          "it)", self.ctx.enclosing_statement(read), CODE)
                    return built
            return value.elements[index].value, env
        key = self._made(value, env)
        if key not in self._lists:
            self._lists[key] = self.read_list(value, env)
        columns = self._lists[key]
        if len(columns) != count:
            raise Unsupported(f"{count} names are bound to {len(columns)} feature columns", assign, CODE)
        return columns[index]

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

    def _built_list(self, name: cst.Name, bound: Binding, env: dict) -> list[Column] | None:
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
        columns = self.read_list(bound.value, env)
        for statement, (kind, value) in parts:
            self._use_binding(Binding(name.value, statement, bound.target, bound.value), self.extended_bindings)
            if kind == "list":
                columns += self.read_list(value, env)
            elif kind == "column":
                columns.append(self.read_column(value, env))
            else:
                variable, _, iterable, call, temps = value
                values, values_env = self._sequence(iterable, env)
                if values is not None:
                    columns += [self.read_column(call, self._pass(statement, i, env, {
                        **env, **temps, **self._loop_names(variable, v, values_env, statement)}))
                        for i, v in enumerate(values)]
                elif isinstance(variable, tuple):
                    raise Unsupported("a loop unpacking values known only at run time builds these columns",
                                      statement, CODE)
                else:
                    columns.append(self._family(call, variable, iterable, {**env, **temps}))
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
        if (isinstance(statement, cst.For) and statement.orelse is None and _target_names(statement.target) is not None
                and isinstance(statement.body, cst.IndentedBlock) and not statement.asynchronous):
            # `for name in CATEGORICAL: vocabulary = df[name].unique(); columns.append(...)`
            # (TensorFlow's linear-model tutorial): temporaries, then the append.
            # A loop filling two lists at once (`cat = ...; deep.append(embedding_column(cat, 8));
            # wide.append(cat)`, the wide & deep idiom): the other list's appends are its own.
            temps: dict[str, cst.BaseExpression] = {}
            inner = None
            for line in statement.body.body:
                target = _assigned_name(line)
                if target is not None and inner is None:
                    if target.value in temps or not self._loop_local(target, statement):
                        return None
                    temps[target.value] = line.body[0].value
                    continue
                mine = self._mutation(line, name)
                if mine is not None and inner is None:
                    inner = mine
                elif not _appends_to_another(line, name):
                    return None
            if inner is None or inner[0] != "column" or not (isinstance(inner[1], cst.Call) or (
                    isinstance(inner[1], cst.Name) and isinstance(temps.get(inner[1].value), cst.Call))):
                return None  # (a temporary column: `wide.append(cat)` after `cat = ...`)
            return "loop", (_target_names(statement.target), self.literal_sequence(statement.iter), statement.iter,
                            inner[1], temps)
        return None

    def _loop_names(self, variable, value: cst.BaseExpression, env: dict, loop: cst.CSTNode) -> dict:
        """A pass's loop variable(s) with their values: ``for name, vocab in VOCABS.items()``
        takes each (key, value) pair apart."""
        if isinstance(variable, str):
            return {variable: Bound(value, env)}
        if not (isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(variable)
                and all(isinstance(e, cst.Element) for e in value.elements)):
            raise Unsupported("the loop unpacks values that are not pairs e2k can read", loop, CODE)
        return {name: Bound(element.value, env) for name, element in zip(variable, value.elements)}

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
                if isinstance(value, Bound):  # a parameter: its argument, where the call is
                    self.runtime(value.expr, value.env, what, column, arg)
                elif not (isinstance(value, cst.Name) and value.value == node.value):  # a family's own key
                    self.runtime(value, {k: v for k, v in env.items() if k != node.value}, what, column, arg)
                continue
            parent = self.ctx.parent(node)
            if isinstance(parent, cst.Attribute) and parent.attr is node:
                continue
            if isinstance(parent, (cst.Arg, cst.Param)) and getattr(parent, "keyword", None) is node:
                continue
            if isinstance(parent, cst.Param):
                continue
            if self.argument(node):  # `dimension=embedding_size`, the factory's: the model takes it
                self.arguments_read.add(node.value)
                continue
            scope = self.ctx.scope(node)
            assignments = list(scope[node.value]) if scope is not None else []
            if assignments and all(isinstance(a.scope, (BuiltinScope, ComprehensionScope)) for a in assignments):
                continue
            if len(assignments) == 1 and isinstance(assignments[0].scope, GlobalScope):
                if self.site_scope is not None and assignments[0].scope is not self.site_scope.globals:
                    raise Unsupported(
                        f"{what} reads `{node.value}` of {os.path.basename(self.ctx.path_of(node))}, a module other "
                        "than the one "
                        "building the model, where e2k evaluates it", node, CODE)
                continue
            if (column is not None and self.site_scope is not None and scope is self.site_scope
                    and len(assignments) == 1 and assignments[0].scope is self.site_scope):
                column.given.add(arg)
                continue
            raise Unsupported(f"{what} reads `{node.value}`, which is not a module-level name bound once: e2k "
                              "evaluates it when the model is built", node, CODE)

    def _comprehension(self, comp: cst.ListComp, env: dict) -> list[Column]:
        loop = comp.for_in
        variable = _target_names(loop.target)
        if loop.inner_for_in is not None or loop.ifs or variable is None or loop.asynchronous:
            raise Unsupported("only a comprehension with one `for name in <values>` is read", comp, CODE)
        values, values_env = self._sequence(loop.iter, env)
        if values is None:
            raise Unsupported("the comprehension does not loop over values the source spells or computes from "
                              "constants", loop.iter, CODE)
        # One column per pass, its code reading the pass's value (`numeric_column(k)`,
        # `one_hot_cat_column(name, VOCABULARY[name])`).
        return [self.read_column(comp.elt, self._pass(comp, i, env, {
            **env, **self._loop_names(variable, value, values_env, comp)})) for i, value in enumerate(values)]

    def _pass(self, loop: cst.CSTNode, index: int, env: dict, values: dict) -> dict:
        """The env of a loop's pass ``index`` (its values ``values``), the same each time the
        loop is read in ``env``: a list built once and read twice (by a wide & deep model's
        two parts) holds the same columns."""
        made = self._passes.setdefault((*self._made(loop, env), index), values)
        self._outer[id(made)] = env
        return made

    def _sequence(self, expr: cst.BaseExpression, env: dict) -> tuple[list[cst.BaseExpression] | None, dict]:
        """``literal_sequence``, and the env its values are read in."""
        expr, env = self._deref(expr, env)
        if isinstance(expr, cst.Name):
            bound = resolve(self.ctx, expr)
            if isinstance(bound, Binding):
                env = self._env_of(bound.target, env)
        return self.literal_sequence(expr, env=env), env

    def argument(self, node: cst.CSTNode) -> bool:
        """``node`` names a parameter the Keras model takes (``self.arguments``): its value is
        known only when the model is built. The same name bound otherwise, where the columns
        are read, is refused: the columns' code writes that name as the model's attribute."""
        if not (isinstance(node, cst.Name) and node.value in self.arguments):
            return False
        scope = self.ctx.scope(node)
        assignments = list(scope[node.value]) if scope is not None else []
        if len(assignments) == 1 and getattr(assignments[0], "node", None) is self.arguments[node.value]:
            return True
        raise Unsupported(f"the columns read `{node.value}`, bound here otherwise than as the parameter of that name "
                          "the model is built with", node, CODE)

    def literal_sequence(self, expr: cst.BaseExpression, _depth: int = 0,
                         env: dict | None = None) -> list[cst.BaseExpression] | None:
        """The values a loop over ``expr`` takes, when the source spells them: a list or tuple
        literal, the keys of a dict literal (``.keys()``, ``list(...)``, a ``pd.DataFrame({...})``
        of one), a slice or sum of such, through names bound once."""
        if _depth > 8:
            return None
        if env:
            expr, env = self._deref(expr, env)
        again = lambda e: self.literal_sequence(e, _depth + 1, env)  # noqa: E731
        if isinstance(expr, cst.Name):
            if self.argument(expr):
                return None  # given when the model is built
            if changed_in_place(self.ctx, expr):
                return None  # `KEYS = ["a"]` then `KEYS.append("b")`: not the literal's values
            value = value_of(self.ctx, expr)
            return again(value) if value is not None else None
        if isinstance(expr, cst.Attribute):  # `data.COLUMNS`: another module's, in a program pass
            bound = resolve(self.ctx, expr)
            return again(bound.value) if isinstance(bound, Binding) else None
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
        entry = self._dict_entry(expr, env)
        if entry is not None:  # `VOCABULARIES[name]`, `name` a loop's or a call's string
            return again(entry)
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
        return self._computed_sequence(expr)

    def _computed_sequence(self, expr: cst.BaseExpression) -> list[cst.BaseExpression] | None:
        """A sequence the program computes from constants (``"a,b,c".split(",")``, ``["f%d" % i
        for i in range(4)]``, ``CATEGORICAL.items()``), spelled out as the literals Python makes."""
        from estimator2keras._constants import NotConstant, as_node, constant_value

        try:
            value = constant_value(expr, self._constant_binding)
            if isinstance(value, dict):
                value = list(value)  # a loop over a dict: its keys
            if not isinstance(value, (list, tuple)):
                return None
            return [as_node(v) for v in value]
        except NotConstant:
            return None

    def _constant_binding(self, name: cst.Name) -> cst.BaseExpression | None:
        """What a name read by a constant computation is bound to: once, and never changed
        after (``FEATURES.append(...)`` would make the value another)."""
        scope = self.ctx.scope(name)
        assignments = list(scope[name.value]) if scope is not None else []
        if len(assignments) != 1 or isinstance(assignments[0].scope, BuiltinScope) or changed_in_place(self.ctx, name) \
                or isinstance(getattr(assignments[0], "node", None), cst.Param):
            return None  # a parameter stays one: the code built from it keeps taking it
        return value_of(self.ctx, name)

    def read_column(self, expr: cst.BaseExpression, env: dict | None = None) -> Column:
        """The column ``expr`` makes, read with ``env`` (see ``read_list``): a column inside a
        column of a loop's body (``indicator_column(categorical_column_with_vocabulary_list(
        name, vocabulary))``) is made once per pass, one in a function once per call."""
        expr, env = self._deref(expr, {} if env is None else env)
        if isinstance(expr, cst.Name):
            bound = resolve(self.ctx, expr)
            if isinstance(bound, Binding) and isinstance(bound.value, cst.Call):
                env = self._env_of(bound.target, env)
                known = self.columns.get(self._made(bound.value, env))
                if known is not None:
                    return known
                self._use_binding(bound, self.bindings)
                return self._read_call(bound.value, bound, env)
            if not isinstance(bound, Binding):
                unpacked = self._unpacked(expr, env)
                if isinstance(unpacked, Column):
                    return unpacked
                if isinstance(unpacked, list):
                    raise Unsupported(f"`{expr.value}` is a list of columns where one column is read", expr, CODE)
                if unpacked is not None:
                    return self.read_column(*unpacked)
                value = value_of(self.ctx, expr)  # a parameter of the function building the Estimator
                if isinstance(value, cst.Call):
                    known = self.columns.get(self._made(value, {}))
                    return known if known is not None else self._read_call(value, None, {})
        if isinstance(expr, cst.Call):
            known = self.columns.get(self._made(expr, env))
            return known if known is not None else self._read_call(expr, None, env)
        raise Unsupported("this feature column is not a feature_column call e2k can follow", expr, CODE)

    def _read_call(self, call: cst.Call, binding: Binding | None, env: dict) -> Column:
        """A feature column's call, or a call of a function of the program returning one
        (``one_hot_cat_column("sex", ["male", "female"])``, TensorFlow's boosted-trees tutorial)."""
        entered = self._enter(call, env)
        if entered is None:
            return self._column_call(call, binding, env)
        column = self.read_column(*entered)
        if binding is not None and column.var == "":
            column.binding = binding  # `gender = one_hot_cat_column("sex", ...)`: named where it is called
        return column

    def _use_binding(self, binding: Binding, into: list[Binding], by_target: bool = False) -> None:
        if all(b.target is not binding.target if by_target else b.statement is not binding.statement for b in into):
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
        env = {} if env is None else env
        column = Column(kind, call, args, name="", binding=binding, env=env, family=family)
        # Arguments spelled through the names of `env` are read as their values, where those are.
        merged = dict(env)
        for name, arg in args.items():
            value, frame = self._deref(arg.value, env)
            entry = self._dict_entry(value, frame)  # `VOCABULARIES[name]`: the pass's own entry, as spelled
            value = entry if entry is not None and _literal(entry) else self._foreign_constant(value, frame) or value
            column.frames[name] = frame
            if value is arg.value:
                continue
            column.values[name] = value
            for key, entry in frame.items():
                if key in merged and merged[key] is not entry and not self._same(key, merged, frame):
                    raise Unsupported(f"`{_emit.code(arg.value)}` reads `{key}`, which the code making the column "
                                      "reads as another value: e2k cannot write both", arg, CODE)
                merged.setdefault(key, entry)
        column.env = merged  # what the emitted code substitutes
        if binding is not None:
            # A name bound in a function that several calls read makes a column per call: none is
            # named after it (each is named after its call's name, or its own).
            made = self._by_binding.setdefault(id(binding.target), [])
            made.append(column)
            for each in made if len(made) > 1 else ():
                if each.binding is binding or each.binding is not None and each.binding.target is binding.target:
                    each.binding = None
        self.columns[self._made(call, env)] = column
        getattr(self, f"_read_{kind}")(column)
        return column

    def _dict_entry(self, expr: cst.BaseExpression, env: dict | None) -> cst.BaseExpression | None:
        """``VOCABULARIES["sex"]`` (or ``[name]``, a name of ``env`` holding a string) of a dict
        literal bound once to a name: the entry's value."""
        if not (isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index)
                and isinstance(expr.value, (cst.Name, cst.Attribute))):
            return None
        key = self.string(expr.slice[0].slice.value, env)
        bound = resolve(self.ctx, expr.value)
        if key is None or not isinstance(bound, Binding) or not isinstance(bound.value, cst.Dict):
            return None
        for element in bound.value.elements:
            if isinstance(element, cst.DictElement) and self.string(element.key) == key:
                return element.value
        return None

    def _foreign_constant(self, expr: cst.BaseExpression, env: dict) -> cst.BaseExpression | None:
        """``VOCABULARY`` or ``VOCABULARIES[name]``, a module-level constant of another module of
        the program than the one building the model: its literal value, which the model's code
        can hold."""
        if self.site_scope is None:
            return None
        value = self._dict_entry(expr, env)
        name = expr.value if value is not None else expr
        bound = resolve(self.ctx, name) if isinstance(name, (cst.Name, cst.Attribute)) else None
        if not isinstance(bound, Binding):
            return None
        value = bound.value if value is None else value
        scope = self.ctx.scope(bound.target)
        foreign = isinstance(scope, GlobalScope) and scope is not self.site_scope.globals
        for _ in range(8):  # `VOCABULARY = names.VOCABULARY`: the constant it names
            again = resolve(self.ctx, value) if isinstance(value, (cst.Name, cst.Attribute)) else None
            if not isinstance(again, Binding):
                break
            value = again.value
        if foreign and not _literal(value):
            raise Unsupported(f"`{_emit.code(expr)}` is a value of {os.path.basename(self.ctx.path_of(bound.target))}, "
                              "a module other than the one building the model, and not a literal e2k can write "
                              "there", expr, CODE)
        return value if foreign else None

    def _same(self, key: str, first: dict, second: dict) -> bool:
        one, two = self._deref(cst.Name(key), first), self._deref(cst.Name(key), second)
        return one[0] is two[0] or one[0].deep_equals(two[0]) and not one[1] and not two[1]

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
        key = self.string(column.value("key"), column.frame("key"))
        if key is None:
            raise Unsupported("the feature column's key is not a string literal", column.call, CODE)
        return key

    def string(self, expr: cst.BaseExpression | None, env: dict | None = None, computed: bool = True) -> str | None:
        """The string ``expr`` spells, or (``computed``) that Python computes from constants
        (``"x%d" % i`` in a pass of a loop over ``range(N)``); None otherwise."""
        if isinstance(expr, cst.Name) and env:
            expr, _ = self._deref(expr, env)
        if isinstance(expr, cst.Name):
            bound = resolve(self.ctx, expr)
            expr = bound.value if isinstance(bound, Binding) else expr
        if isinstance(expr, cst.SimpleString):
            value = expr.evaluated_value
            return value if isinstance(value, str) else None
        value = self._constant(expr, env) if computed else None
        return value if isinstance(value, str) else None

    def _constant(self, expr: cst.BaseExpression | None, env: dict | None):
        """``expr``'s value where it is computed from constants and the values of ``env`` (a
        loop's pass); None otherwise."""
        from estimator2keras._constants import NotConstant, constant_value

        if expr is None:
            return None

        def lookup(name: cst.Name):
            if env and name.value in env:
                value, _ = self._deref(name, env)
                return None if value is name or isinstance(value, cst.Name) and value.value == name.value else value
            return self._constant_binding(name)

        try:
            return constant_value(expr, lookup)
        except NotConstant:
            return None

    def integer(self, expr: cst.BaseExpression | None, default: int | None = None, env: dict | None = None) -> int | None:
        if expr is None:
            return default
        if isinstance(expr, cst.Name) and env:
            expr, _ = self._deref(expr, env)
        if self.argument(expr):
            return None  # given when the model is built
        if isinstance(expr, cst.Name):
            expr = value_of(self.ctx, expr) or expr  # a binding, or a parameter given at its one call
        if isinstance(expr, cst.Integer):
            return int(expr.evaluated_value)
        from estimator2keras._constants import integer_of

        return integer_of(self.ctx, expr)  # `len(TARGET_LABELS)` of a module constant, `2 * K`

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
        if value is not None and self.integer(value, env=column.frame(name)) is None:
            self.runtime(value, column.frame(name), what, column, name)

    def _read_numeric(self, column: Column) -> None:
        if column.family is not None:
            column.name = "numeric_features"
        else:
            column.key = column.name = self._key(column)
        shape = column.value("shape")
        if shape is not None and _dimension(shape) is None:
            # `shape=mnist.train.images.shape[1:]`: read from the data when the model is built.
            self.runtime(shape, column.frame("shape"), "the column's shape", column, "shape")
            column.runtime_shape = True
        if self.dtype(column.value("dtype")) in STRING_DTYPES:
            raise Unsupported("a numeric column of strings", column.call, CODE)

    def _read_bucketized(self, column: Column) -> None:
        source = self.read_column(column.value("source_column"), column.frame("source_column"))
        if source.kind != "numeric":
            raise Unsupported("bucketized_column of something other than a numeric_column", column.call, CODE)
        if self.numeric_width(source) != 1:
            raise Unsupported("bucketized_column of a numeric column with shape > 1 is not converted yet", column.call, CODE)
        boundaries = column.value("boundaries")
        if boundaries is None:
            raise Unsupported("bucketized_column without boundaries", column.call, CODE)
        if self.literal_sequence(boundaries, env=column.frame("boundaries")) is None:
            # `np.arange(15, 45, 1).tolist()`: evaluated when the model is built, counted by the layer.
            self.runtime(boundaries, column.frame("boundaries"), "the bucket boundaries", column, "boundaries")
        column.parent = source
        column.name = f"{source.name}_bucketized"

    def _read_vocabulary(self, column: Column) -> None:
        column.key = column.name = self._key(column)
        vocabulary = column.value("vocabulary_list")
        literal = self.literal_sequence(vocabulary, env=column.frame("vocabulary_list"))
        dtype = self.dtype(column.value("dtype"))
        if dtype is None and literal:
            dtype = "string" if all(isinstance(v, (cst.SimpleString, cst.ConcatenatedString)) for v in literal) else (
                "int64" if all(isinstance(v, cst.Integer) for v in literal) else None)
        if literal is None:
            # `dftrain[name].unique()`: read from the data when the model is built.
            self.runtime(vocabulary, column.frame("vocabulary_list"), "the vocabulary", column, "vocabulary_list")
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
        if path is not None and self.string(path, column.frame("vocabulary_file"), computed=False) is None:
            # Not a literal: the path is computed where the model is built, from what it reads.
            self.runtime(path, column.frame("vocabulary_file"), "the vocabulary file", column, "vocabulary_file")
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
        keys, keys_env = self._sequence(column.value("keys"), column.frame("keys"))
        if not keys or len(keys) < 2:
            raise Unsupported("the crossed keys are not a literal list of two or more", column.value("keys"), CODE)
        names = []
        for key in keys:
            text = self.string(key, keys_env)
            if text is not None:
                column.keys.append(text)
                names.append(text)
                continue
            inner = self.read_column(key, keys_env)
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
        inner = self.read_column(column.value("categorical_column"), column.frame("categorical_column"))
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


def _literal(node: cst.BaseExpression) -> bool:
    """A constant the source spells: numbers, strings, True/False/None, lists and tuples of them."""
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.Name):
        return node.value in ("True", "False", "None")
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return isinstance(node.expression, (cst.Integer, cst.Float))
    if isinstance(node, (cst.List, cst.Tuple)):
        return all(isinstance(e, cst.Element) and _literal(e.value) for e in node.elements)
    return False


def _assigned_name(statement) -> cst.Name | None:
    small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
        return small.targets[0].target
    return None


def _pure_read(ctx: RewriteContext, name: cst.Name, _depth: int = 0) -> bool:
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
    if isinstance(parent, (cst.Index, cst.Element, cst.FormattedStringExpression)):
        return True  # `VOCABULARIES[name]`, `[name, "city"]`, `f"{name}_x"`: read into a new value
    arg = parent if isinstance(parent, cst.Arg) and parent.value is name and not parent.star else None
    call = ctx.parent(arg) if arg is not None else None
    if not isinstance(call, cst.Call):
        return False
    if isinstance(call.func, cst.Name) and call.func.value in _PURE_BUILTINS:
        return True
    # Given to a function of the program that only reads its parameters in turn.
    function = resolve(ctx, call.func)
    return isinstance(function, cst.FunctionDef) and _depth < 4 and _reads_only(ctx, function, _depth + 1)


def _reads_only(ctx: RewriteContext, function: cst.FunctionDef, _depth: int = 0) -> bool:
    """Does ``function`` only read its parameters (``_pure_read``)?"""
    names = {p.name.value for p in function.params.params}
    return all(_pure_read(ctx, n, _depth) for n in _walk(function.body) if isinstance(n, cst.Name) and n.value in names)


#: Builtins that read their argument into a new value.
_PURE_BUILTINS = frozenset({"len", "list", "tuple", "sorted", "int", "float", "str", "bool", "range", "min", "max",
                            "round", "abs"})


def substituted(node: cst.BaseExpression, env: dict) -> cst.BaseExpression:
    """``node`` with the names of ``env`` replaced by their values: a loop's variable and
    temporaries (a temporary's value may read the variable: replaced too), a function's
    parameters (their arguments, with the names those read where the call is)."""
    return node.visit(_Substitute(env)).deep_clone()


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
        if isinstance(value, Bound):  # a parameter: its argument, with the names it reads there
            return substituted(value.expr, value.env)
        if not isinstance(value, cst.BaseExpression) or isinstance(value, cst.Name) and value.value == original.value:
            return updated
        return substituted(value, {k: v for k, v in self.env.items() if k != original.value})


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


def _target_names(target: cst.BaseExpression):
    """A loop's variable: its name, or the names of a flat tuple it unpacks (``name, vocab``)."""
    if isinstance(target, cst.Name):
        return target.value
    if isinstance(target, (cst.Tuple, cst.List)) and target.elements and all(
            isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in target.elements):
        return tuple(e.value.value for e in target.elements)
    return None


def _appends_to_another(statement: cst.BaseStatement, name: str) -> bool:
    """``other.append(...)`` / ``other.extend(...)`` of a list other than ``name``."""
    small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
    call = small.value if isinstance(small, cst.Expr) else None
    return (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in ("append", "extend") and isinstance(call.func.value, cst.Name)
            and call.func.value.value != name)
