"""Labels a model_fn turns into class ids with a lookup table (Google's census custom
Estimator: ``table = tf.contrib.lookup.index_table_from_tensor(tf.constant(LABELS))``, then
``table.lookup(labels)``), read as the model's label preprocessing.

The table's ids become what ``preprocess`` (mapped over every dataset, in ``tf.data``) gives
as the labels, so that no string label reaches the replicas (Keras 3 under MirroredStrategy
fails on one anywhere in the batch) and the loss and the metrics compare the labels as they
come. The ids are the table's: the vocabulary's positions 0..n-1 (a ``StringLookup``, as a
canned Estimator's ``label_vocabulary`` is read, less its out-of-vocabulary index), then
``num_oov_buckets`` hashed buckets (a ``Hashing`` layer: the same FastHashSpec fingerprint
modulo the buckets), or ``default_value`` (-1) for any other label.
"""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.metadata import BuiltinScope, GlobalScope

from estimator2keras import _emit
from estimator2keras._rule import Unsupported

#: The tables a model_fn may number its labels with, by their API path less ``compat.v1.``.
INDEX_TABLE = "contrib.lookup.index_table_from_tensor"
HASH_TABLE = "lookup.StaticHashTable"
VOCABULARY_TABLE = "lookup.StaticVocabularyTable"
TABLES = frozenset({INDEX_TABLE, HASH_TABLE, VOCABULARY_TABLE})
INITIALIZER = "lookup.KeyValueTensorInitializer"
#: What keeps the ids' values (and the loss and metrics read through, as they do for labels).
ID_SHAPES = ("squeeze", "reshape", "expand_dims", "cast", "to_int32", "to_int64")
#: Functions of the ids whose first argument the lookup is followed through besides: the one-hot
#: code of the ids (a metric's `tf.one_hot(label_ids, n, True, False)`) is that of the labels
#: the model's preprocess numbered alike.
ID_FUNCTIONS = ID_SHAPES + ("one_hot",)


@dataclass
class LabelTable:
    """The table the model_fn numbered its labels with: its vocabulary (code readable where
    the model is built), its hashed buckets and the id of any other label."""

    call: cst.Call
    vocabulary: str
    buckets: str | None = None
    default: str = "-1"


def api(ctx, node: cst.CSTNode) -> str:
    path = ctx.call_api_path(node) or ""
    return path[len("compat.v1."):] if path.startswith("compat.v1.") else path


def read_index_table(ctx, call: cst.Call, to_string: bool = False):
    """``index_table_from_tensor(mapping, num_oov_buckets=0, default_value=-1)`` (or the
    reverse ``index_to_string_table_from_tensor(mapping, default_value="UNK")``): its
    arguments (mapping, num_oov_buckets, default_value), each an ``Arg`` or None; None where
    others are given (a hasher, a dtype other than strings)."""
    from estimator2keras._units import bind_arguments

    names = ("mapping", "default_value", "name") if to_string else (
        "mapping", "num_oov_buckets", "default_value", "hasher_spec", "dtype", "name")
    try:
        bound = bind_arguments(call, names)
    except Unsupported:
        return None
    mapping = bound.pop("vocabulary_list", None) or bound.pop("mapping", None)
    bound.pop("name", None)
    buckets = bound.pop("num_oov_buckets", None)
    default = bound.pop("default_value", None)
    if mapping is None or bound:
        return None
    return mapping, buckets, default


def without_constant(ctx, node: cst.BaseExpression) -> cst.BaseExpression:
    """``tf.constant(LABELS)`` -> ``LABELS``: the values it holds."""
    if isinstance(node, cst.Call) and ctx.call_api_path(node) in ("constant", "compat.v1.constant") \
            and len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star:
        return node.args[0].value
    return node


def _integer(node: cst.BaseExpression | None) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) \
            and isinstance(node.expression, cst.Integer):
        return -int(node.expression.evaluated_value)
    return None


class LabelTableReading:
    """Mixed into the model_fn's reader: ``label_lookup`` follows the labels a loss or a
    metric compares back through a table's ``lookup`` (and the squeezes and casts around it),
    recording the table in ``self.label_table``."""

    label_table: LabelTable | None = None

    def label_lookup(self, expr: cst.BaseExpression, at: int) -> cst.BaseExpression | None:
        """``expr`` (followed through the model_fn's names, squeezes, reshapes and casts) with
        a table's lookup of the labels replaced by what it looked up; None without one."""
        found = False

        def follow(node: cst.BaseExpression, before: int, depth: int = 0) -> cst.BaseExpression:
            nonlocal found
            if depth > 20:
                return node
            if isinstance(node, cst.Name):
                d = self.latest_def(node.value, before)
                if d is None or not isinstance(d.small, cst.Assign):
                    return node
                new = follow(d.value, d.index, depth + 1)
                return new if found else node
            if not isinstance(node, cst.Call) or not node.args or node.args[0].keyword is not None:
                return node
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "lookup" and len(node.args) == 1:
                table = self.resolve(node.func.value, before)
                if isinstance(table, cst.Call) and api(self.ctx, table) in TABLES:
                    self.read_label_table(table)
                    found = True
                    return follow(node.args[0].value, before, depth + 1)
                return node
            if api(self.ctx, node) in ID_FUNCTIONS:
                inner = follow(node.args[0].value, before, depth + 1)
                if found:
                    return node.with_changes(args=[node.args[0].with_changes(value=inner), *node.args[1:]])
            return node

        new = follow(expr, at)
        return new if found else None

    def read_label_table(self, call: cst.Call) -> LabelTable:
        """The table's vocabulary, buckets and default id, as e2k writes them in the model's
        preprocessing; refused (E2K901) where its ids cannot be told or written exactly."""
        if self.label_table is not None:
            if self.label_table.call is not call:
                self.refuse(call, "a second lookup table of the labels in the model_fn is not converted")
            return self.label_table
        path = api(self.ctx, call)
        what = f"`{_emit.code(call.func)}(...)`"
        if path == INDEX_TABLE:
            read = read_index_table(self.ctx, call)
            if read is None:
                self.refuse(call, f"{what} with a hasher or a dtype other than strings is not converted")
            mapping, buckets, default = (a.value if a is not None else None for a in read)
            keys = without_constant(self.ctx, self.resolve(mapping, len(self.order)))
        else:
            from estimator2keras._units import bind_arguments

            names = ("initializer", "default_value", "name") if path == HASH_TABLE else (
                "initializer", "num_oov_buckets", "lookup_key_dtype", "name")
            try:
                bound = bind_arguments(call, names)
            except Unsupported:
                self.refuse(call, f"e2k cannot read the arguments of {what}")
            bound.pop("name", None)
            initializer = bound.pop("initializer", None)
            buckets = getattr(bound.pop("num_oov_buckets", None), "value", None)
            default = getattr(bound.pop("default_value", None), "value", None)
            if bound or initializer is None:
                self.refuse(call, f"{what} with {', '.join(bound) or 'no initializer'} is not converted")
            init = self.resolve(initializer.value, len(self.order))
            if not (isinstance(init, cst.Call) and api(self.ctx, init) == INITIALIZER):
                self.refuse(call, f"{what} of an initializer other than KeyValueTensorInitializer(keys, ids) is not "
                                  "converted")
            try:
                pair = bind_arguments(init, ("keys", "values", "key_dtype", "value_dtype", "name"))
            except Unsupported:
                self.refuse(init, "e2k cannot read the arguments of this KeyValueTensorInitializer")
            if set(pair) - {"keys", "values", "value_dtype", "name"} or "values" not in pair:
                self.refuse(init, "a KeyValueTensorInitializer given a key_dtype is not converted")
            keys = without_constant(self.ctx, self.resolve(pair["keys"].value, len(self.order)))
            if not self._positions(keys, self.resolve(pair["values"].value, len(self.order))):
                self.refuse(init, "the table gives the labels ids other than their positions in its keys "
                                  "(`tf.range(len(keys))`), which e2k does not write")
        vocabulary = self._vocabulary(keys, call)
        if default is not None and _integer(default) is None:
            self.refuse(call, f"{what}'s default_value is not an integer literal")
        if buckets is not None and _integer(buckets) == 0:
            buckets = None
        if buckets is not None and not (isinstance(buckets, cst.Integer) or self._global(buckets)):
            self.refuse(call, f"{what}'s num_oov_buckets is not a literal or a module constant")
        if getattr(self, "root", self) is not self or self.plan is None:
            self.refuse(call, "a lookup table of the labels here is not converted (e2k converts one in a model_fn)")
        self.plan.dataset_map = f"{self.plan.model_var}.preprocess"
        self.label_table = LabelTable(call, vocabulary, _emit.code(buckets) if buckets is not None else None,
                                      _emit.code(default) if default is not None else "-1")
        return self.label_table

    def _vocabulary(self, keys: cst.BaseExpression, call: cst.Call) -> str:
        """The keys as code the model's ``__init__`` reads: a list of strings or module constants."""
        if isinstance(keys, (cst.List, cst.Tuple)) and keys.elements and all(
                isinstance(e, cst.Element) and isinstance(e.value, cst.SimpleString) for e in keys.elements):
            return _emit.code(keys)
        if isinstance(keys, cst.List | cst.Tuple) or not self._global(keys):
            self.refuse(call, "the table's keys are not a list of strings or a module constant, which the model's "
                              "preprocessing would read")
        return _emit.code(keys)

    def _global(self, node: cst.BaseExpression) -> bool:
        """Every name ``node`` reads is a module constant or a builtin (readable in ``__init__``)."""
        names = [n for n in _names(node)]
        if not names:
            return False
        for name in names:
            scope = self.ctx.scope(name)
            if scope is None:
                return False
            accesses = [a for a in scope.accesses[name.value] if a.node is name]
            if not accesses or not all(isinstance(r.scope, (GlobalScope, BuiltinScope)) for r in accesses[0].referents):
                return False
        return True

    def _positions(self, keys: cst.BaseExpression, values: cst.BaseExpression) -> bool:
        """``values`` are 0..n-1 for the n ``keys``: ``tf.range(len(keys))`` (or ``tf.size``,
        a dtype given), ``tf.range(n)`` or ``[0, 1, ...]`` for a list literal of n keys."""
        from estimator2keras._units import bind_arguments, value_of

        listed = value_of(self.ctx, keys) if isinstance(keys, cst.Name) else keys  # LABELS = [...]
        size = len(listed.elements) if isinstance(listed, (cst.List, cst.Tuple)) else None
        if isinstance(values, (cst.List, cst.Tuple)):
            return size is not None and [_integer(e.value) for e in values.elements] == list(range(size))
        if not (isinstance(values, cst.Call) and api(self.ctx, values) == "range"):
            return False
        try:
            bound = bind_arguments(values, ("start", "limit", "delta", "dtype", "name"))
        except Unsupported:
            return False
        if set(bound) - {"start", "dtype", "name"} or "start" not in bound:
            return False
        limit = self.resolve(bound["start"].value, len(self.order))
        if _integer(limit) is not None:
            return size == _integer(limit)
        if isinstance(limit, cst.Call) and limit.args and limit.args[0].keyword is None and (
                isinstance(limit.func, cst.Name) and limit.func.value == "len" and len(limit.args) == 1
                or api(self.ctx, limit) == "size"):
            counted = without_constant(self.ctx, self.resolve(limit.args[0].value, len(self.order)))
            return counted.deep_equals(keys)
        return False

    # -- the model's preprocessing -------------------------------------------------------------
    def label_init_lines(self) -> list[str]:
        table, tf = self.label_table, self.tf
        lines = [f"self.label_lookup = {tf}.keras.layers.StringLookup(vocabulary={table.vocabulary})"]
        if table.buckets is not None:
            lines.append(f"self.label_oov = {tf}.keras.layers.Hashing(num_bins={table.buckets})")
        return lines

    def label_preprocess_lines(self, inputs: str) -> list[str]:
        """The end of ``preprocess``: the labels as the table numbered them, returned with ``inputs``."""
        table, tf = self.label_table, self.tf
        lines = ["if labels is None:", f"    return {inputs}"]
        if table.buckets is not None:
            lines += [f"# The model_fn's table numbered the labels: their place in {table.vocabulary}, then",
                      f"# {table.buckets} hashed bucket(s) for any other label.",
                      "ids = self.label_lookup(labels) - 1",
                      f"ids = {tf}.where(ids < 0, len({table.vocabulary}) + self.label_oov(labels), ids)",
                      f"return {inputs}, ids"]
            return lines
        lines.append(f"# The model_fn's table numbered the labels: their place in {table.vocabulary}, "
                     f"else {table.default}.")
        if table.default == "-1":
            return lines + [f"return {inputs}, self.label_lookup(labels) - 1"]
        return lines + ["ids = self.label_lookup(labels) - 1",
                        f"return {inputs}, {tf}.where(ids < 0, {tf}.constant({table.default}, ids.dtype), ids)"]


def _names(node: cst.CSTNode):
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            yield current
        elif isinstance(current, cst.Attribute):
            stack.append(current.value)
        else:
            stack.extend(current.children)
