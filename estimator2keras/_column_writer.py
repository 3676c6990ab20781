"""Feature columns as Keras code, for every model that reads them.

A canned Estimator's model (``_canned.ModelWriter``) and a custom model_fn's
``tf.feature_column.input_layer`` (``_modelfn_read``) both write, from the columns
``_feature_columns`` read:

- the preprocessing layers (``StringLookup``, ``Hashing``, ``HashedCrossing``,
  ``Discretization``) and the embeddings' ``Dense`` layers, made in the model's ``__init__``;
- the code that computes each column's input from the raw features (floats, and ids in the
  Estimator's numbering), run in ``tf.data`` so that no string reaches the replicas;
- the dense input TF1's ``input_layer`` made of those inputs: the columns sorted by name,
  numeric values as they are, categorical ids one-hot or embedded, concatenated.
"""
from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._nodes import walk as _walk
from estimator2keras._feature_columns import Column, ColumnReader, all_columns, identifier, respelled, substituted

ID_CAST_COMMENT = "# Ids come as floats when Keras 3 first traces the model (on the replicas' mean batch)."


class ColumnsWriter:
    """Source lines computing what the feature columns ``top`` (and the columns they wrap or
    cross) computed. ``given``: constructor parameters a column's argument became (its code
    reads names of the function building the Estimator) -> that code."""

    def __init__(self, ctx, tf: str, reader: ColumnReader, top: list[Column]):
        self.ctx = ctx
        self.tf = tf
        self.column_reader = reader
        self.top = top
        self.columns = all_columns(top)
        self.values_vars: dict[str, str] = {}
        #: Constructor parameters -> the code the Estimator's site passes.
        self.given: dict[str, str] = {}
        #: The variables ``preprocess_lines`` computes for the model, in order.
        self.inputs: list[str] = []
        #: Writing the model's ``__init__``, and the constructor arguments read outside it.
        self.in_init = False
        self.attributes_read: set[str] = set()

    # -- small pieces ---------------------------------------------------------------------------
    def code(self, node: cst.BaseExpression) -> str:
        return _emit.code(self.attributes(respelled(self.ctx, node, self.tf)))

    def attributes(self, node: cst.BaseExpression) -> cst.BaseExpression:
        """The model's constructor arguments a model_fn's columns read (``embedding_size``, its
        factory's parameter): as they are in ``__init__`` (``in_init``), elsewhere the
        attributes the model keeps them in (``attributes_read``)."""
        read = [n.value for n in _walk(node) if isinstance(n, cst.Name) and n.value in self.column_reader.arguments_read]
        if not read or self.in_init:
            return node
        self.attributes_read.update(read)
        return substituted(node, {n: cst.parse_expression(f"self.{n}") for n in read})

    def arg(self, column: Column, name: str) -> str:
        """A column's argument as code, the loop's variable and temporaries replaced by their
        values; one that reads names of the function building the Estimator is a constructor
        argument, kept as an attribute (``self.occupation_dimension``)."""
        node = respelled(self.ctx, column.value(name), self.tf)
        code = _emit.code(self.attributes(substituted(node, column.env) if column.env else node))
        if name not in column.given:
            return code
        param = f"{column.var}_{'vocabulary' if name == 'vocabulary_list' else name}"
        self.given[param] = code
        return f"self.{param}"

    def width(self, column: Column) -> str:
        """A numeric column's width, as code."""
        width = self.column_reader.numeric_width(column)
        return f"self.{column.var}_width" if width is None else str(width)

    def runtime_size(self, column: Column) -> bool:
        """The column's width is counted when the model is built (``self.<column>_size``)."""
        if column.kind == "bucketized":
            return self.column_reader.literal_sequence(column.value("boundaries")) is None
        if column.kind == "vocabulary":
            vocabulary = column.value("vocabulary_list")
            if self.column_reader.literal_sequence(vocabulary) is not None:
                return False
            return "vocabulary_list" in column.given or not (
                isinstance(vocabulary, cst.Name) and vocabulary.value not in column.env)
        return False

    def size(self, column: Column) -> str:
        """The number of ids of a categorical column (its one-hot width), as code."""
        kind = column.kind
        if kind == "weighted":
            return self.size(column.parent)
        if self.runtime_size(column):
            return f"self.{column.var}_size"
        if kind == "bucketized":
            return str(len(self.column_reader.literal_sequence(column.value("boundaries"))) + 1)
        if kind == "vocabulary":
            return _plus(self.vocabulary_size(column), self.oov(column))
        if kind == "vocabulary_file":
            return _plus(self.vocabulary_size(column), self.oov(column))
        if kind == "hash" or kind == "crossed":
            return self.arg(column, "hash_bucket_size")
        if kind == "identity":
            return self.arg(column, "num_buckets")
        raise AssertionError(kind)

    def vocabulary_size(self, column: Column) -> str:
        if column.kind == "vocabulary_file":
            size = column.value("vocabulary_size")
            return self.code(size) if size is not None else f"self.{column.var}_size"
        if self.runtime_size(column):
            return f"self.{column.var}_size"
        vocabulary = column.value("vocabulary_list")
        literal = self.column_reader.literal_sequence(vocabulary)
        if isinstance(vocabulary, (cst.List, cst.Tuple)) or (literal is not None and not isinstance(vocabulary, cst.Name)):
            return str(len(literal))
        return f"len({self.code(vocabulary)})"

    def oov(self, column: Column) -> int:
        return self.column_reader.integer(column.value("num_oov_buckets"), 0)

    def dtype(self, column: Column) -> str:
        if column.kind in ("vocabulary",):
            if column.runtime_dtype:
                return "unknown"
            given = self.column_reader.dtype(column.value("dtype"))
            if given:
                return given
            literal = self.column_reader.literal_sequence(column.value("vocabulary_list")) or []
            return "int64" if literal and all(isinstance(v, cst.Integer) for v in literal) else "string"
        if column.kind in ("vocabulary_file", "hash"):
            return self.column_reader.dtype(column.value("dtype")) or "string"
        return "int64"

    def missing(self, column: Column) -> str:
        """The raw value feature columns ignore for this column's feature."""
        return '""' if self.dtype(column) == "string" else "-1"

    def raw_values(self, key: str, lines: list[str]) -> str:
        var = self.values_vars.get(key)
        if var is None:
            var = _emit.unique_name(f"{identifier(key)}_values", self.taken())
            self.values_vars[key] = var
            lines.append(f'{var} = {self.tf}.reshape(features[{key!r}], [-1])'.replace("'", '"') if '"' not in key
                         else f"{var} = {self.tf}.reshape(features[{key!r}], [-1])")
        return var

    def crossed_raw(self, key: str, lines: list[str]) -> str:
        """A raw feature in a cross; a numeric one (a numeric_column reads it) is crossed as
        integers, as the Estimator casts it (HashedCrossing refuses floats)."""
        values = self.raw_values(key, lines)
        if not any(c.kind == "numeric" and c.key == key for c in self.columns):
            return values
        return f"{self.tf}.cast({values}, {self.tf}.int64)"

    def taken(self) -> set[str]:
        return {c.var for c in self.columns} | set(self.values_vars.values()) | {
            "features", "labels", "weights", "inputs", "net", "logits", "self", "training"}

    # -- the model's __init__ ---------------------------------------------------------------------
    def layer_lines(self) -> list[str]:
        """The preprocessing layers (and sizes counted when the model is built)."""
        tf = self.tf
        lines = []
        for column in self.columns:
            var = column.var
            if column.kind == "numeric" and column.runtime_shape:
                lines.append(f"self.{var}_width = {tf}.TensorShape({self.arg(column, 'shape')}).num_elements()")
            if column.family is not None:
                lines.append("# The Estimator's inputs, in its order: one column per key, sorted by name.")
                lines.append(f"self.{var}_keys = sorted({self.code(column.family)})")
            elif column.kind == "bucketized":
                lines.append(f"self.{var} = {tf}.keras.layers.Discretization("
                             f"bin_boundaries={self.arg(column, 'boundaries')})")
                if self.runtime_size(column):
                    lines.append(f"self.{var}_size = len(self.{var}.bin_boundaries) + 1")
            elif column.kind in ("vocabulary", "vocabulary_file"):
                source = self.arg(column, "vocabulary_list" if column.kind == "vocabulary" else "vocabulary_file")
                if column.runtime_dtype:
                    lines.append(f"self.{var}_lookup = self.vocabulary_lookup({source})")
                else:
                    lookup = "StringLookup" if self.dtype(column) == "string" else "IntegerLookup"
                    lines.append(f"self.{var}_lookup = {tf}.keras.layers.{lookup}(vocabulary={source})")
                if column.kind == "vocabulary_file" and column.value("vocabulary_size") is None:
                    lines.append(f"self.{var}_size = self.{var}_lookup.vocabulary_size() - 1  # the file's lines")
                elif self.runtime_size(column):
                    lines.append(f"self.{var}_size = self.{var}_lookup.vocabulary_size() - 1")
                if self.oov(column):
                    lines.append(f"self.{var}_oov = {tf}.keras.layers.Hashing(num_bins={self.oov(column)})")
            elif column.kind == "hash":
                lines.append(f"self.{var}_hashing = {tf}.keras.layers.Hashing("
                             f"num_bins={self.arg(column, 'hash_bucket_size')})")
            elif column.kind == "crossed":
                lines.append(f"self.{var} = {tf}.keras.layers.HashedCrossing("
                             f"num_bins={self.arg(column, 'hash_bucket_size')})")
        return lines

    def embedding_lines(self, columns: list[Column]) -> list[str]:
        """The embeddings of ``columns``, sorted by name as TF1 made their tables: a ``Dense``
        of one-hot ids, its kernel the [buckets, dimension] table initialized as TF1 did."""
        tf = self.tf
        lines = []
        for column in sorted(columns, key=lambda c: c.name):
            if column.kind == "embedding":
                dimension = self.arg(column, "dimension")
                extra = ", trainable=False" if _emit.code(column.value("trainable") or cst.Name("True")) == "False" else ""
                lines.append(
                    f"self.{column.var} = {tf}.keras.layers.Dense({dimension}, use_bias=False, "
                    f"kernel_initializer={tf}.keras.initializers.TruncatedNormal(stddev={_power(dimension)}){extra})")
        return lines

    # -- the preprocessing, in tf.data ----------------------------------------------------------
    def preprocess_lines(self) -> list[str]:
        """What the feature columns computed from the raw features ``features``: a variable
        per column the model reads (``inputs``, their names), none returned."""
        tf = self.tf
        lines: list[str] = []
        needed = self.needed_inputs()
        for column in self.columns:
            var, kind = column.var, column.kind
            if kind == "numeric":
                if column not in needed and not any(c.parent is column for c in self.columns):
                    continue
                value = self.normalized(column)
                width = self.width(column)
                if column.family is not None:
                    lines.append(f"{var} = {tf}.concat([")
                    lines.append(f"    {tf}.reshape({tf}.cast({value}, {tf}.float32), [-1, {width}])")
                    lines.append(f"    for key in self.{var}_keys], axis=1)")
                    continue
                lines.append(f"{var} = {tf}.reshape({tf}.cast({value}, {tf}.float32), [-1, {width}])")
            elif kind == "bucketized":
                lines.append(f"{var} = {tf}.reshape(self.{var}({column.parent.var}), [-1])")
            elif kind in ("vocabulary", "vocabulary_file"):
                values = self.raw_values(column.key, lines)
                oov = self.oov(column)
                missing = '""' if self.dtype(column) == "string" else "-1"
                if oov:
                    lines.append(f"# The Estimator's ids: the vocabulary's, then {oov} out-of-vocabulary "
                                 f"bucket{'s' if oov > 1 else ''}; {missing} has no id (-1).")
                else:
                    lines.append("# The Estimator's ids: the vocabulary's; anything else has no id (-1).")
                lines.append(f"{var} = self.{var}_lookup({values}) - 1")
                if column.kind == "vocabulary_file" and column.value("vocabulary_size") is not None:
                    size = self.vocabulary_size(column)
                    lines.append(f"# Lines after the first {size} are out of the vocabulary, as for the Estimator.")
                    lines.append(f"{var} = {tf}.where({var} >= {size}, {tf}.constant(-1, {tf}.int64), {var})")
                if oov:
                    lines.append(f"{var} = {tf}.where({var} < 0, {self.vocabulary_size(column)} + "
                                 f"self.{var}_oov({values}), {var})")
                    lines.append(f"{var} = {tf}.where({values} == {missing}, {tf}.constant(-1, {tf}.int64), {var})")
            elif kind == "hash":
                values = self.raw_values(column.key, lines)
                missing = '""' if self.dtype(column) == "string" else "-1"
                lines.append(f"{var} = self.{var}_hashing({values})")
                lines.append(f"# Feature columns ignore {missing}: no id (-1).")
                lines.append(f"{var} = {tf}.where({values} == {missing}, {tf}.constant(-1, {tf}.int64), {var})")
            elif kind == "identity":
                values = self.raw_values(column.key, lines)
                lines.append(f"{var} = {tf}.cast({values}, {tf}.int64)")
            elif kind == "crossed":
                ids = [k for k in column.keys if isinstance(k, Column)]
                raws = [self.crossed_raw(k, lines) for k in column.keys if isinstance(k, str)]
                # The Estimator crosses its categorical keys' ids first, then the raw features.
                crossed = ", ".join([k.var for k in ids] + raws)
                lines.append(f"{var} = self.{var}(({crossed}))")
                # An ignored value ("" or -1) of a key leaves nothing to cross (an out-of-vocabulary
                # value is crossed, with its id -1, as the Estimator does).
                ignored = [f"({self.raw_values(k.key, lines)} == {self.missing(k)})" for k in ids
                           if k.kind in ("vocabulary", "vocabulary_file", "identity")]
                if ignored:
                    condition = " | ".join(ignored)
                    lines.append(f"{var} = {tf}.where({condition}, {tf}.constant(-1, {tf}.int64), {var})")
            elif kind == "weighted":
                lines.append(f'{var} = {tf}.reshape({tf}.cast(features["{column.key}"], {tf}.float32), [-1])')
        self.inputs = [c.var for c in self.columns if c in needed]
        return lines

    def needed_inputs(self) -> list[Column]:
        """The tensors ``call`` reads: numeric values, ids, weights."""
        needed: list[Column] = []

        def need(column: Column) -> None:
            if all(column is not c for c in needed):
                needed.append(column)

        for column in self.top:
            if column.kind == "numeric":
                need(column)
            elif column.kind in ("indicator", "embedding"):
                need(column.parent.base)
                if column.parent.kind == "weighted":
                    need(column.parent)
            elif column.kind == "weighted":
                need(column.base)
                need(column)
            else:
                need(column)
        return needed

    def normalized(self, column: Column) -> str:
        value = "features[key]" if column.family is not None else f'features["{column.key}"]'
        normalizer = column.value("normalizer_fn")
        return self.apply(normalizer, value) if normalizer is not None else value

    def apply(self, function: cst.BaseExpression, argument: str) -> str:
        """``function(argument)`` as code; a one-parameter lambda is inlined."""
        params = function.params if isinstance(function, cst.Lambda) else None
        if params is not None and len(params.params) == 1 and not isinstance(params.star_arg, (cst.Param, cst.ParamStar)) \
                and not params.kwonly_params and params.star_kwarg is None:
            name = function.params.params[0].name.value
            body = respelled(self.ctx, function.body, self.tf)
            return _emit.code(body.visit(_Inline(name, cst.parse_expression(argument))))
        return f"{_emit.code(_parenthesized(respelled(self.ctx, function, self.tf)))}({argument})"

    def one_hot(self, column: Column, combiner: str) -> str:
        """A categorical column as the Estimator's sparse lookups see it: one-hot of its id,
        times its weight for a weighted column (normalized as the combiner divides)."""
        tf = self.tf
        base = column.base
        text = f"{tf}.one_hot({base.var}, {self.size(base)})"
        if column.kind == "weighted":
            w = column.var
            scale = {"sum": w, "mean": f"{tf}.math.divide_no_nan({w}, {w})",
                     "sqrtn": f"{tf}.math.divide_no_nan({w}, {tf}.abs({w}))"}[combiner]
            text = f"{text} * {scale}[:, None]"
        return text

    def dense_input(self, column: Column) -> str:
        """A DNN input column's dense tensor, as feature columns' input layer computes it."""
        if column.kind == "numeric":
            return column.var
        if column.kind == "bucketized":
            return f"{self.tf}.one_hot({column.var}, {self.size(column)})"
        if column.kind == "indicator":
            return self.one_hot(column.parent, "sum")
        if column.kind == "embedding":
            combiner = self.column_reader.string(column.value("combiner")) if column.value("combiner") is not None else "mean"
            return f"self.{column.var}({self.one_hot(column.parent, combiner)})"
        raise AssertionError(column.kind)

    # -- inside the model ----------------------------------------------------------------------
    def id_inputs(self) -> list[str]:
        """The inputs that are ids: Keras 3 turns them into floats when it first traces the
        model under a strategy (on the replicas' mean batch), and the model casts them back."""
        if self.ctx.rules.target != "tensorflow":
            return []  # (JAX takes the ids as int32, always)
        return [c.var for c in self.needed_inputs() if c.is_categorical and c.kind != "weighted"]

    def id_cast_lines(self) -> list[str]:
        """The ids back to integers (``id_inputs``)."""
        lines: list[str] = []
        ids = self.id_inputs()
        if ids:
            names = ", ".join(ids)
            lines.append(ID_CAST_COMMENT)
            cast = f"{names} = ({self.tf}.cast(ids, {self.tf}.int64) for ids in ({names}))"
            if len(ids) > 2 and len(cast) + 8 <= _emit.max_line():
                lines.append(cast)
            else:
                lines += [f"{v} = {self.tf}.cast({v}, {self.tf}.int64)" for v in ids]
        return lines

    def concat_lines(self, columns: list[Column], start: str = "net = ") -> list[str]:
        """``net = ...`` (``start``): the dense input of ``columns``, as TF1's input_layer made
        it (sorted by name, concatenated)."""
        lines: list[str] = []
        dense = [self.dense_input(c) for c in sorted(columns, key=lambda c: c.name)]
        one_line = f"{start}{self.tf}.concat([{', '.join(dense)}], axis=1)"
        if len(dense) == 1:
            lines.append(f"{start}{dense[0]}")
        elif len(one_line) + 8 <= _emit.max_line():
            lines.append(one_line)
        else:
            lines.append(f"{start}{self.tf}.concat([")
            lines += [f"    {d}," for d in dense]
            lines.append("], axis=1)")
        return lines


class _Inline(cst.CSTTransformer):
    def __init__(self, name: str, value: cst.BaseExpression):
        super().__init__()
        self.name, self.value = name, value

    def leave_Name(self, original, updated):
        return self.value if original.value == self.name else updated

    def leave_Attribute(self, original, updated):
        # `x.shape`: only the value side of an attribute is the parameter
        return updated.with_changes(attr=original.attr)


def _parenthesized(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float, cst.SimpleString)):
        return node
    if node.lpar:
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _packed(opening: str, names: list[str], closing: str, width: int | None = None) -> list[str]:
    """``opening a, b, c closing`` on one line, or the names packed on indented lines."""
    width = width if width is not None else _emit.max_line() - 8
    one_line = f"{opening}{', '.join(names)}{',' if len(names) == 1 and opening.endswith('(') else ''}{closing}"
    if len(one_line) <= width:
        return [one_line]
    lines, current = [opening], "   "
    for name in names:
        if len(current) + len(name) + 2 > width:
            lines.append(current)
            current = "   "
        current += f" {name},"
    lines.append(current)
    lines.append(closing)
    return lines


def _plus(size: str, oov: int) -> str:
    if not oov:
        return size
    if size.isdigit():
        return str(int(size) + oov)
    return f"{size} + {oov}"


def _power(dimension: str) -> str:
    simple = dimension.isdigit() or all(part.isidentifier() for part in dimension.split("."))
    return f"{dimension} ** -0.5" if simple else f"({dimension}) ** -0.5"


def _reindent(text: str, indent: str) -> str:
    """Text written with 4-space indents, in the module's indentation."""
    if indent == "    ":
        return text
    out = []
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        out.append(indent * ((len(line) - len(stripped)) // 4) + stripped)
    return "\n".join(out) + "\n"
