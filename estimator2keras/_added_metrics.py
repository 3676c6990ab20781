"""``estimator = tf.estimator.add_metrics(estimator, metric_fn)``: metrics added to an Estimator.

``add_metrics`` (``tf.estimator``, ``tf.contrib.estimator``) wrapped the Estimator: in EVAL
its model_fn's EstimatorSpec got, besides its own ``eval_metric_ops``, the dict
``metric_fn(labels=..., predictions=spec.predictions[, features, config])`` returns. The
Keras model computes them as more ``compile`` metrics, under the same names:

- the unit follows the name the wrapped Estimator is bound to (``follow``): its uses are the
  Estimator's, and the ``add_metrics`` statement goes (rule E2K205);
- the metric_fn is read like ``eval_metric_ops`` (``read_metric_fn``): its locals stand for
  their values, ``predictions["key"]`` for what the model_fn's EVAL spec predicted under that
  key (a custom Estimator), or for the canned head's prediction of that key (a canned one);
  each ``tf.metrics`` call is translated by the metric rule (E2K202) with those predictions.

What the conversion cannot express is refused with the reason: metrics of the features or of
the RunConfig (a compile() metric sees only the labels and the model output), a metric_fn e2k
cannot read, add_metrics applied on some paths only.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Unsupported

#: The API paths of add_metrics.
ADD_METRICS = frozenset({"estimator.add_metrics", "contrib.estimator.add_metrics"})
#: The API paths of forward_features, the other wrapper of an Estimator followed here.
FORWARD_FEATURES = frozenset({"contrib.estimator.forward_features", "estimator.forward_features"})
#: The parameters add_metrics passes a metric_fn (by name), as TensorFlow checks them.
METRIC_FN_PARAMS = ("labels", "predictions", "features", "config")
CODE = "E2K205"


@dataclass
class Wrapper:
    """``name = add_metrics(estimator, metric_fn)`` or ``name = forward_features(estimator,
    keys)``: the statement, the call, the read of the Estimator it wraps, and the metric_fn
    expression (add_metrics) or the keys (forward_features; None: all the features)."""

    statement: cst.SimpleStatementLine
    call: cst.Call
    read: cst.Name
    metric_fn: cst.BaseExpression | None
    kind: str = "metrics"
    keys: cst.BaseExpression | None = None


@dataclass
class MetricFn:
    """A metric_fn read: its definition, its locals (name -> value) and the metrics it
    returns: (key, the dict element, the ``tf.metrics`` call or what else it holds)."""

    fn: cst.FunctionDef | cst.Lambda
    env: dict[str, cst.BaseExpression] = field(default_factory=dict)
    entries: list[tuple[str, cst.DictElement, cst.BaseExpression]] = field(default_factory=list)
    #: Some metric was left for a human (marked in the metric_fn, which then stays).
    left: bool = False


def wrapper_of(ctx, read: cst.Name) -> Wrapper | None:
    """The add_metrics that ``read`` (of an Estimator's name) is the wrapped Estimator of."""
    arg = ctx.parent(read)
    call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
    path = ctx.call_api_path(call) if isinstance(call, cst.Call) else None
    if path not in ADD_METRICS and path not in FORWARD_FEATURES:
        return None
    from estimator2keras._units import bind_arguments

    forward = path in FORWARD_FEATURES
    name = "forward_features" if forward else "add_metrics"
    args = bind_arguments(call, ("estimator", "keys", "sort_outputs") if forward else ("estimator", "metric_fn"))
    if args.get("estimator") is not arg:
        return None
    if not forward and "metric_fn" not in args:
        raise Unsupported("add_metrics(...) without a metric_fn", call, CODE)
    statement = ctx.enclosing_statement(call)
    small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
    if not (isinstance(small, cst.Assign) and small.value is call and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)):
        raise Unsupported(f"{name}(...) is used inside an expression; e2k follows `estimator = "
                          f"{name}(estimator, ...)` as a statement", call, CODE)
    if forward:
        keys = args.get("keys")
        return Wrapper(statement, call, read, None, "features", keys.value if keys is not None else None)
    return Wrapper(statement, call, read, args["metric_fn"].value)


def follow(ctx, reached: list, depth: int = 0) -> tuple[list, list[Wrapper]]:
    """The reads of an Estimator's name, with those of the names add_metrics binds it to
    (``estimator = add_metrics(estimator, my_rmse)``: the later ``estimator.train(...)``),
    in place of the reads add_metrics made; and the add_metrics found."""
    from estimator2keras._units import reads_reached

    out, wrappers = [], []
    for read, others in reached:
        wrapper = wrapper_of(ctx, read) if isinstance(read, cst.Name) else None
        if wrapper is None:
            out.append((read, others))
            continue
        if others:
            raise Unsupported(f"{_name(wrapper)} wraps an Estimator this name may not hold here", read, CODE)
        if depth > 4:
            raise Unsupported("add_metrics / forward_features are applied more than five times in a row", wrapper.call,
                              CODE)
        target = wrapper.statement.body[0].targets[0].target
        later = reads_reached(ctx, target)
        if later is None:
            raise Unsupported(f"the uses of `{target.value}` cannot be followed", target, CODE)
        for later_read, later_others in later:
            if later_others:
                raise Unsupported(f"`{target.value}` here may hold the Estimator with or without what "
                                  f"{_name(wrapper)} added (it was applied on some paths only)", later_read, CODE)
        for later_read, _ in later:
            parent = ctx.parent(later_read)
            if isinstance(parent, cst.Return):
                raise Unsupported(f"the Estimator wrapped by {_name(wrapper)} is returned; e2k converts "
                                  f"{_name(wrapper)} where the Estimator is used", later_read, CODE)
        inner, inner_wrappers = follow(ctx, later, depth + 1)
        out.extend(inner)
        wrappers += [wrapper, *inner_wrappers]
    return out, wrappers


def _name(wrapper: Wrapper) -> str:
    return "forward_features" if wrapper.kind == "features" else "add_metrics"


def forwarded_keys(ctx, unit) -> list[cst.BaseExpression] | None:
    """The features ``forward_features`` passes on, as expressions of the program (a string,
    or a name bound to one), in order; None for all of them (``keys`` left out)."""
    from estimator2keras._units import Binding, resolve

    def literal(value):
        bound = resolve(ctx, value) if isinstance(value, cst.Name) else None
        return bound.value if isinstance(bound, Binding) else value

    def is_string(value) -> bool:
        return isinstance(literal(value), (cst.SimpleString, cst.ConcatenatedString))

    keys: list[cst.BaseExpression] = []
    for wrapper in unit.forwarded:
        value = wrapper.keys
        if value is None or isinstance(value, cst.Name) and value.value == "None":
            return None
        listed = literal(value)
        if is_string(value):
            keys.append(value)
        elif isinstance(listed, (cst.List, cst.Tuple)) and all(
                isinstance(e, cst.Element) and is_string(e.value) for e in listed.elements):
            keys += [e.value for e in listed.elements]
        else:
            raise Unsupported("forward_features' keys are not a string, or a list of strings, e2k can read",
                              value, CODE)
    return keys


def check_earlier_evaluations(ctx, unit) -> None:
    """An evaluation of the Estimator before add_metrics reported fewer metrics than those
    after it; a Keras model has one list of compiled metrics."""
    if not unit.wrappers:
        return
    first = min(ctx.position(w.call) for w in unit.wrappers)
    for use in unit.uses:
        what = use.method if use.kind == "method" else use.kind
        if what in ("evaluate", "train_and_evaluate") and ctx.position(use.name) < first:
            raise Unsupported("the Estimator is evaluated before add_metrics adds metrics to it; the Keras model "
                              "has one list of compiled metrics", use.name)


def read_metric_fn(ctx, node: cst.BaseExpression) -> MetricFn:
    """The metric_fn ``node`` names: a function of the program whose parameters are among
    labels, predictions, features and config, whose statements bind names once, and whose
    last statement returns a dict with string keys (or a name bound to one)."""
    from estimator2keras._units import Binding, resolve

    fn = resolve(ctx, node) if isinstance(node, (cst.Name, cst.Attribute)) else node
    if isinstance(fn, Binding):
        fn = fn.value
    if isinstance(fn, cst.Lambda):
        return _lambda_metric_fn(fn)
    if not isinstance(fn, cst.FunctionDef):
        raise Unsupported("the metric_fn is not a function or a lambda of the program e2k can read", node, CODE)
    if fn.decorators:
        raise Unsupported("the metric_fn is decorated", fn, CODE)
    params = fn.params
    if params.star_arg != cst.MaybeSentinel.DEFAULT or params.kwonly_params or params.star_kwarg \
            or params.posonly_params:
        raise Unsupported("the metric_fn takes *args, **kwargs or keyword-only parameters", fn, CODE)
    names = [p.name.value for p in params.params]
    unknown = [n for n in names if n not in METRIC_FN_PARAMS]
    if unknown:
        raise Unsupported(f"metric_fn parameter `{unknown[0]}` is none add_metrics passes", fn, CODE)
    found = MetricFn(fn)
    body = list(fn.body.body) if isinstance(fn.body, cst.IndentedBlock) else []
    for statement in body[:-1]:
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
        if isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
            continue  # the docstring
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)):
            raise Unsupported("the metric_fn does more than bind names and return its metrics", statement, CODE)
        target = small.targets[0].target.value
        if target in found.env or target in METRIC_FN_PARAMS:
            raise Unsupported(f"the metric_fn binds `{target}` twice", statement, CODE)
        found.env[target] = small.value
    last = body[-1] if body else None
    small = last.body[0] if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 else None
    returned = small.value if isinstance(small, cst.Return) else None
    if isinstance(returned, cst.Name) and returned.value in found.env:
        returned = found.env.pop(returned.value)
    if not isinstance(returned, cst.Dict):
        raise Unsupported("the metric_fn does not end by returning a dict of metrics", last or fn, CODE)
    for element in returned.elements:
        if not (isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString)
                and isinstance(element.key.evaluated_value, str)):
            raise Unsupported("the metric_fn's metric names are not strings written out", element, CODE)
        value = element.value
        if isinstance(value, cst.Name) and value.value in found.env:
            value = found.env[value.value]
        found.entries.append((element.key.evaluated_value, element, value))
    return found


def _lambda_metric_fn(fn: cst.Lambda) -> MetricFn:
    """``lambda labels, predictions: {"mae": tf.metrics.mean_absolute_error(...)}``."""
    params = fn.params
    if params.star_arg != cst.MaybeSentinel.DEFAULT or params.kwonly_params or params.star_kwarg \
            or params.posonly_params or any(p.name.value not in METRIC_FN_PARAMS for p in params.params):
        raise Unsupported("the metric_fn lambda takes other parameters than add_metrics passes", fn, CODE)
    if not isinstance(fn.body, cst.Dict):
        raise Unsupported("the metric_fn lambda does not return a dict of metrics", fn, CODE)
    found = MetricFn(fn)
    for element in fn.body.elements:
        if not (isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString)
                and isinstance(element.key.evaluated_value, str)):
            raise Unsupported("the metric_fn's metric names are not strings written out", element, CODE)
        found.entries.append((element.key.evaluated_value, element, element.value))
    return found


class Substitution:
    """Reads an expression of a metric_fn as an expression of the model: its locals stand for
    their values, ``predictions`` (or ``predictions["key"]``) for ``predicted(key)``. Reads of
    ``features`` or ``config`` are refused: a compile() metric sees the labels and the model
    output only."""

    def __init__(self, metric_fn: MetricFn, predicted):
        self.metric_fn = metric_fn
        self.predicted = predicted  # key (or None: the whole predictions) -> expression

    def read(self, node: cst.BaseExpression, depth: int = 0) -> cst.BaseExpression:
        if depth > 20:
            raise Unsupported("the metric_fn's names refer to each other too deeply", node, CODE)
        values: dict[cst.CSTNode, cst.CSTNode] = {}
        stack: list[cst.CSTNode] = [node]
        while stack:
            current = stack.pop()
            if isinstance(current, cst.Subscript) and isinstance(current.value, cst.Name) \
                    and current.value.value == "predictions" and len(current.slice) == 1 \
                    and isinstance(current.slice[0].slice, cst.Index) \
                    and isinstance(current.slice[0].slice.value, cst.SimpleString):
                values[current] = self.predicted(current.slice[0].slice.value.evaluated_value, current)
                continue
            if isinstance(current, cst.Name):
                if current.value == "predictions":
                    values[current] = self.predicted(None, current)
                elif current.value in ("features", "config"):
                    raise Unsupported(f"the metric reads `{current.value}`, which a Keras metric in compile() does not "
                                      "see (it gets the labels and the model output)", current, CODE)
                elif current.value in self.metric_fn.env:
                    values[current] = self.read(self.metric_fn.env[current.value], depth + 1)
                continue
            if isinstance(current, cst.Attribute):
                stack.append(current.value)  # not `.attr`
                continue
            if isinstance(current, cst.Arg):
                stack.append(current.value)  # not `keyword=`
                continue
            if isinstance(current, cst.Lambda):
                raise Unsupported("a lambda in the metric_fn's metric is not read", current, CODE)
            stack.extend(current.children)
        if node in values:
            return values[node]
        return _emit.replace_in(node, values) if values else node


def added_metrics(ctx, unit) -> list[MetricFn]:
    """The metric_fns of the unit's add_metrics, read; the unit records that its model's
    conversion took them (``unit.metric_fns``, which rule E2K205 checks)."""
    unit.metric_fns = [read_metric_fn(ctx, w.metric_fn) for w in unit.wrappers]
    return unit.metric_fns


# -- canned Estimators ------------------------------------------------------------------------
#: What a canned head predicted under each key, as the model output (its logits) gives it.
CANNED_PREDICTIONS = {
    "regression": {"predictions": "output"},
    "binary": {"logits": "output", "logistic": "sigmoid", "class_ids": "positive"},
    "multi": {"logits": "output", "probabilities": "softmax", "class_ids": "argmax"},
}


def canned_metrics(ctx, unit, plan, head: str, weighted: bool):
    """The add_metrics of a canned Estimator's unit as head metrics: (key, attribute, metric
    code, definitions) each; metrics left for a human are marked and left out."""
    if not unit.wrappers:
        return []
    if weighted:
        raise Unsupported("add_metrics on a canned Estimator with a weight_column: its head's metrics were weighted "
                          "and the added ones were not, which one compile() cannot tell apart",
                          unit.wrappers[0].call, CODE)
    known = CANNED_PREDICTIONS[head]
    out = []
    for metric_fn in added_metrics(ctx, unit):
        def predicted(key, node):
            if key is None or key not in known:
                raise Unsupported(f"predictions[{key!r}] is no prediction of this canned head e2k maps to its output "
                                  f"({', '.join(sorted(known))})" if key is not None else
                                  "the metric reads the whole predictions dict", node)
            return cst.Name(f"__canned_{known[key]}")

        substitution = Substitution(metric_fn, predicted)

        def derive(expr, substitution=substitution):
            value = substitution.read(expr)
            return _canned_derive(ctx, value)

        for key, element, value in metric_fn.entries:
            converted = _translate(ctx, plan, key, element, value, derive, metric_fn)
            if converted is None:
                continue
            metric, definitions = converted
            attr = _emit.unique_name("".join(c if c.isalnum() else "_" for c in key).strip("_") or "metric",
                                     {"loss_tracker", "head_loss", "linear", "linear_optimizer", "dnn"})
            out.append((key, attr, _emit.code(metric), definitions))
    return out


def _canned_derive(ctx, value: cst.BaseExpression):
    """How ``value`` (a metric_fn's predictions, read with ``__canned_<kind>`` for the head's
    predictions) derives from the logits: casts kept, argmax of the logits or their softmax."""
    from estimator2keras._modelfn import Derived

    for _ in range(10):
        if isinstance(value, cst.Name) and value.value.startswith("__canned_"):
            return Derived(value.value[len("__canned_"):])
        if isinstance(value, cst.Call):
            path = ctx.call_api_path(value) or ""
            first = value.args[0].value if value.args else None
            if path in ("cast", "dtypes.cast", "to_float", "to_int32", "to_int64", "squeeze") and first is not None:
                value = first
                continue
        return None
    return None


def _translate(ctx, plan, key: str, element, value, derive, metric_fn: MetricFn):
    """The Keras metric for one entry (with the definitions it needs), or None when it is left
    for a human (marked at the entry)."""
    path = ctx.call_api_path(value) if isinstance(value, cst.Call) else None
    rule = ctx.rules.expression_rule("metric", path) if path else None
    if rule is None:
        metric_fn.left = True
        ctx.leftover(element, f"added metric {key!r} is not a tf.metrics call e2k converts; add it to "
                              "compile(metrics=...) by hand", "E2K202")
        return None
    try:
        result = rule().convert(value, ctx, plan.tf, key, derive)
    except Unsupported as exc:
        metric_fn.left = True
        ctx.leftover(element, f"added metric {key!r} is not converted: {exc.reason}", exc.code or "E2K202")
        return None
    plan.fixed(value, rule.code, f"`{_emit.code(value.func)}` -> Keras ({rule.name})")
    from estimator2keras._modelfn import MetricConversion

    if isinstance(result, MetricConversion):
        return result.metric, list(result.definitions)
    return result, []


# -- custom Estimators ------------------------------------------------------------------------
def convert_model_fn(fn, ctx, tf, taken, plan, extra, stem, unit):
    """``_modelfn.convert_model_fn``, reading the unit's add_metrics with EVAL's metrics."""
    from estimator2keras import _modelfn

    stem = stem or fn.name.value
    taken = taken - {fn.name.value, stem}
    name = _emit.unique_name(_emit.builder_name(stem), taken)
    class_name = _emit.unique_name(_modelfn.class_name_for(stem), taken | {name})
    converter = _AddedMetricsConverter(fn, ctx, tf, plan, extra)
    converter.added = added_metrics(ctx, unit)
    converter.taken_names = set(taken) | {name, class_name, stem}
    conversion = converter.convert(name, class_name)
    if not converter.added_read:
        # Fail closed: the converter read EVAL's metrics some other way than read_metrics.
        raise Unsupported("e2k could not add the metric_fn's metrics to the model's compile()", unit.wrappers[0].call, CODE)
    return _modelfn._freed_builder_name(conversion, converter, _emit.builder_name(stem), class_name)


def _converter_class():
    from estimator2keras._modelfn import _Converter

    return _Converter


class _AddedMetricsConverter(_converter_class()):
    """A model_fn's converter that also reads the metrics add_metrics added, in EVAL, where
    the Estimator computed them: ``predictions`` is what the EVAL EstimatorSpec predicted."""

    added: list[MetricFn] = []
    added_read = False

    def spec(self, path):
        args = super().spec(path)
        if not hasattr(self, "_spec_args"):
            self._spec_args = {}
        self._spec_args[path.mode] = args
        return args

    def read_metrics(self, ops):
        self.added_read = True
        metrics = super().read_metrics(ops)
        from estimator2keras._modes import EVAL

        spec = getattr(self, "_spec_args", {}).get(EVAL, {})
        estimator_keys, keras_keys = self.plan.eval_keys if self.plan is not None else (set(), set())
        for metric_fn in self.added:
            substitution = Substitution(metric_fn, lambda key, node: self._predicted(spec, key, node))

            def derive(expr, substitution=substitution):
                return self.derive(substitution.read(expr), len(self.order))

            for key, element, value in metric_fn.entries:
                estimator_keys = estimator_keys | {key}
                converted = _translate(self.ctx, self.plan, key, element, value, derive, metric_fn)
                if converted is None:
                    continue
                metric, definitions = converted
                for definition in definitions:
                    if not any(definition.deep_equals(known) for known in self.definitions):
                        self.definitions.append(definition)
                metrics.append(metric)
                keras_keys = keras_keys | {key}
        if self.plan is not None:
            self.plan.eval_keys = (estimator_keys, keras_keys)
        return metrics

    def _predicted(self, spec: dict, key, node) -> cst.BaseExpression:
        """What the EVAL spec predicted (under ``key``): an expression of the model_fn."""
        predictions = spec.get("predictions")
        if predictions is None:
            raise Unsupported("the model_fn's EVAL EstimatorSpec has no predictions, which add_metrics gives the "
                              "metric_fn", node, CODE)
        if key is None:
            return predictions
        value, at = predictions, len(self.order)
        if isinstance(value, cst.Name):
            d = self.latest_def(value.value, at)
            value = d.value if d is not None else value
        if isinstance(value, cst.Dict):
            for element in value.elements:
                if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) \
                        and element.key.evaluated_value == key:
                    return element.value
            raise Unsupported(f"the model_fn's EVAL EstimatorSpec predicts no {key!r}", node, CODE)
        raise Unsupported("the model_fn's EVAL predictions are not a dict e2k can read", node, CODE)
