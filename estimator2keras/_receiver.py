"""A hand-written serving_input_receiver_fn as the serving ``tf.function`` a Keras user writes.

TF1 programs wrote their serving input by hand::

    def serving_input_fn():
        feature_placeholders = {"x": tf.placeholder(tf.float32, [None, 3])}
        features = {k: tf.expand_dims(t, -1) for k, t in feature_placeholders.items()}
        return tf.estimator.export.ServingInputReceiver(features, feature_placeholders)

The receiver tensors (placeholders) are what a client feeds: they become the function's
``input_signature`` (a ``tf.TensorSpec`` per placeholder, named by its receiver key, as the
Estimator's SignatureDef named its inputs) and its parameters; the function's own code (the
feature computation) stays as it was; and it returns what the Estimator's PREDICT signature
returned, the model's ``predict_step`` on those features::

    @tf.function(input_signature=[{"x": tf.TensorSpec([None, 3], tf.float32, name="x")}])
    def serving_input_fn(feature_placeholders):
        features = {k: tf.expand_dims(t, -1) for k, t in feature_placeholders.items()}
        return model.predict_step(features)

Where the model is not visible from the function (it is built inside another function), the
function takes the model's method giving what is served: ``def serving_input_fn(predict)``
returns the ``tf.function`` (``serve``), and an export passes ``model.predict_step`` (or the
model's ``serving_outputs``, where the Estimator exported other outputs than its predictions).
Anything else in the function e2k cannot account for refuses the conversion (fail closed).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Unsupported
from estimator2keras._modelfn_read import _walk
from estimator2keras._symbols import tf2_respellings
from estimator2keras._units import _single_return, accesses_of, bind_arguments, resolve, unpacking, Binding

#: Receivers a serving_input_receiver_fn returns; the value says what the model_fn got as
#: features: the dict as it is ("dict": a tensor is wrapped as {"feature": tensor}), or the tensor.
RECEIVERS = {
    "estimator.export.ServingInputReceiver": "dict",
    "estimator.export.TensorServingInputReceiver": "tensor",
}
RECEIVER_SIGNATURE = ("features", "receiver_tensors", "receiver_tensors_alternatives")
#: The builder of a receiver of one placeholder per feature (``_export`` reads it too).
RAW = frozenset({"estimator.export.build_raw_serving_input_receiver_fn"})
PLACEHOLDER = "placeholder"
WITH_DEFAULT = "placeholder_with_default"
#: Calls whose result is a dict of tensors (the features' kind is told through them).
DICT_CALLS = ("parse_example", "parse_single_example", "io.parse_example", "io.parse_single_example")
#: Parts of the API paths of TensorFlow calls that return structures (not one tensor), whose
#: result e2k does not take for a tensor.
STRUCTURED = ("parse", "nest", "estimator", "data.", "decode_csv", "split", "unstack", "py_function", "numpy_function",
              "while_loop", "cond", "case", "switch_case", "scan", "foldl", "foldr", "unique", "top_k", "compat.v1.")
#: ServingInputReceiver named a single receiver tensor "input", a single feature "feature".
SINGLE_RECEIVER = "input"
SINGLE_FEATURE = "feature"
COMMENT = "The serving signature the Estimator exported: the receiver tensors in, the PREDICT predictions out."


@dataclass
class Receiver:
    """What a hand-written serving_input_receiver_fn was made of."""

    function: cst.FunctionDef
    returned: cst.SimpleStatementLine
    features: cst.BaseExpression
    #: The tf.function's parameters, in order: (name, its TensorSpec structure as text).
    params: list[tuple[str, str]] = field(default_factory=list)
    #: Statements of the function that bound the placeholders (they become the parameters).
    removed: list[cst.BaseStatement] = field(default_factory=list)
    #: The one dict parameter's signature laid out one receiver tensor per line.
    vertical: str | None = None
    #: Parameters that are a dict of tensors (the others are one tensor each).
    dict_params: set[str] = field(default_factory=set)
    #: The model_fn's features are the receiver's features wrapped as {"feature": ...}.
    wrap_feature: bool = False


def handwritten(ctx, node: cst.BaseExpression) -> cst.FunctionDef | None:
    """The function of this file (or, in a program's unit pass, of another of its modules:
    ``model.serving_input_fn``) that ``node`` names, when it returns a serving receiver."""
    function = resolve(ctx, node) if isinstance(node, (cst.Name, cst.Attribute)) else None
    if not isinstance(function, cst.FunctionDef):
        return None
    returned = _single_return(function)
    if isinstance(returned, cst.Call) and (ctx.call_api_path(returned) in RECEIVERS or _raw_built(ctx, returned)):
        return function
    if _returns_receiver(ctx, function):
        raise Unsupported(
            f"`{function.name.value}` returns its serving receiver other than as its one last `return`", function)
    return None


def _raw_built(ctx, call: cst.Call) -> cst.BaseExpression | None:
    """The tensors of ``build_raw_serving_input_receiver_fn(tensors)()``, a receiver built and
    returned at once: it receives placeholders of their shapes, names and dtypes, which a
    function's own placeholders (batch dimension None) are; None for any other call."""
    inner = call.func
    if call.args or not isinstance(inner, cst.Call) or ctx.call_api_path(inner) not in RAW:
        return None
    args = bind_arguments(inner, ("features", "default_batch_size"))
    batch = args.get("default_batch_size")
    if batch is not None and _emit.code(batch.value) != "None":
        raise Unsupported("build_raw_serving_input_receiver_fn(..., default_batch_size=...)() receives a fixed "
                          "batch size: not converted", call)
    if "features" not in args:
        raise Unsupported("build_raw_serving_input_receiver_fn() without features", call)
    return args["features"].value


def _returns_receiver(ctx, function: cst.FunctionDef) -> bool:
    stack = [function.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call) and ctx.call_api_path(node) in RECEIVERS:
            return True
        stack.extend(node.children)
    return False


def read(ctx, plan, function: cst.FunctionDef, respell: dict) -> Receiver:
    """The receiver tensors, features and code of ``function``; Unsupported for what e2k cannot follow."""
    name = function.name.value
    if function.decorators or function.asynchronous is not None:
        raise Unsupported(f"`{name}` is decorated or async", function)
    params = function.params
    if params.params or params.posonly_params or params.kwonly_params or not isinstance(params.star_arg, cst.MaybeSentinel) \
            or params.star_kwarg is not None:
        raise Unsupported(f"the serving_input_receiver_fn `{name}` takes parameters; the Estimator called it without", function)
    body = function.body.body if isinstance(function.body, cst.IndentedBlock) else []
    returned = body[-1]
    call = returned.body[-1].value
    raw = _raw_built(ctx, call)
    if raw is not None:
        # `build_raw_serving_input_receiver_fn(tensors)()`: the tensors are fed as they are.
        kind, args = "dict", {"features": cst.Arg(raw), "receiver_tensors": cst.Arg(raw)}
    else:
        kind = RECEIVERS[ctx.call_api_path(call)]
        args = bind_arguments(call, RECEIVER_SIGNATURE)
    alternatives = args.get("receiver_tensors_alternatives")
    if alternatives is not None and _emit.code(alternatives.value) != "None":
        raise Unsupported("receiver_tensors_alternatives (more serving signatures) are not converted", alternatives)
    if "features" not in args or "receiver_tensors" not in args:
        raise Unsupported("a serving receiver without features or receiver_tensors", call)
    found = Receiver(function, returned, args["features"].value)
    placeholders = _placeholders(ctx, function)
    used: set[cst.Call] = set()
    receiver = args["receiver_tensors"].value
    local = _local_binding(ctx, function, receiver)
    value = local.value if local is not None else receiver
    filled = _filled_in_loops(ctx, function, local) if local is not None else None
    if filled:
        # `inputs = {}` and `for feat in COLUMNS: inputs[feat.name] = tf.placeholder(...)`: the
        # signature is the comprehension the loop spells (several loops: their comprehensions
        # merged, in the loops' order).
        comprehensions = []
        for loop, key, placeholder in filled:
            used.add(placeholder)
            spec = _spec(ctx, placeholder, key, respell)
            header = _emit.code(loop.with_changes(body=cst.SimpleStatementSuite([cst.Pass()]), leading_lines=[]))
            header = header.strip().removesuffix(": pass")
            comprehensions.append(f"{{{_emit.code(key)}: {spec} {header}}}")
            found.removed.append(loop)
        merged = comprehensions[0] if len(comprehensions) == 1 else "{" + ", ".join(f"**{c}" for c in comprehensions) + "}"
        found.params = [(local.name, merged)]
        found.removed.insert(0, local.statement)
        found.dict_params.add(local.name)
        value = None
    if value is None:
        pass
    elif isinstance(value, cst.Dict) and value.elements:
        specs, names = [], []
        for element in value.elements:
            if not isinstance(element, cst.DictElement):
                raise Unsupported("receiver tensors given with ** are not converted", element)
            leaf = element.value
            bound = _local_binding(ctx, function, leaf)
            placeholder = bound.value if bound is not None else leaf
            if not _is_placeholder(ctx, placeholder):
                raise Unsupported("a receiver tensor that is not a placeholder of this function", leaf)
            used.add(placeholder)
            spec = _spec(ctx, placeholder, element.key, respell)
            if bound is not None:
                names.append((bound.name, spec))
                found.removed.append(bound.statement)
            else:
                specs.append((element.key, spec))
        if specs and names:
            raise Unsupported("receiver tensors partly bound to names, partly written in the dict", value)
        if names:
            found.params = names
            reads = accesses_of(ctx, local.target) if local is not None else None
            features_read = local is not None and any(
                isinstance(n, cst.Name) and n.value == local.name for n in _walk(found.features))
            if reads is not None and all(ctx.within(r, (returned,)) for r in reads) and not features_read:
                found.removed.append(local.statement)  # it only gathered them for the receiver
        else:
            if local is None:
                raise Unsupported("a dict of placeholders written in the receiver call; bind it to a name", value)
            lines = [f"{_emit.code(key)}: {spec}" for key, spec in specs]
            found.params = [(local.name, "{" + ", ".join(lines) + "}")]
            found.vertical = "{\n" + "".join(f"    {line},\n" for line in lines) + "}"
            found.removed.append(local.statement)
            found.dict_params.add(local.name)
    elif isinstance(value, cst.DictComp) and local is not None and _is_placeholder(ctx, value.value):
        used.add(value.value)
        spec = _spec(ctx, value.value, value.key, respell)
        comprehension = value.with_changes(value=_emit.expr(spec))
        found.params = [(local.name, _emit.code(comprehension))]
        found.removed.append(local.statement)
        found.dict_params.add(local.name)
    elif local is not None and _is_placeholder(ctx, value):
        used.add(value)
        found.params = [(local.name, _spec(ctx, value, cst.SimpleString(f'"{SINGLE_RECEIVER}"'), respell))]
        found.removed.append(local.statement)
    else:
        raise Unsupported("receiver tensors e2k cannot follow to the placeholders they are (a dict of placeholders, "
                          "a dict comprehension of one, or a placeholder bound in the function; not a dict filled "
                          "in a loop)", receiver)
    for placeholder in placeholders:
        if placeholder not in used:
            raise Unsupported("a placeholder that is not one of the receiver tensors", placeholder)
    for removed in found.removed:
        if removed not in body:
            raise Unsupported("a receiver tensor bound inside a block of the function", removed)
    param_names = {n for n, _ in found.params}
    if kind == "dict":
        is_dict = _is_dict(ctx, function, found.features, param_names, found.dict_params, 0)
        if is_dict is None:
            raise Unsupported("e2k cannot tell whether the serving features are a dict of tensors or one tensor",
                              found.features)
        found.wrap_feature = not is_dict
    return found


def _filled_in_loops(ctx, function, local: Binding) -> list[tuple[cst.For, cst.BaseExpression, cst.Call]]:
    """``d = {}`` then, right after it, one or more ``for ... in ...: d[key] = placeholder(...)``
    (each loop's only statement, no else): (the loop, the key, the placeholder) for each;
    empty for anything else."""
    if not (isinstance(local.value, cst.Dict) and not local.value.elements):
        return []
    body = list(function.body.body)
    index = next(i for i, s in enumerate(body) if s is local.statement)
    found = []
    for loop in body[index + 1:]:
        filled = _filled_in_loop(ctx, loop, local)
        if filled is None:
            break
        found.append(filled)
    return found


def _filled_in_loop(ctx, loop, local: Binding):
    if not isinstance(loop, cst.For) or loop.orelse is not None or loop.asynchronous is not None \
            or not isinstance(loop.body, cst.IndentedBlock) or len(loop.body.body) != 1:
        return None
    line = loop.body.body[0]
    assign = line.body[0] if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 else None
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and _is_placeholder(ctx, assign.value)):
        return None
    target = assign.targets[0].target
    if not (isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name)
            and target.value.value == local.name and len(target.slice) == 1
            and isinstance(target.slice[0].slice, cst.Index)):
        return None
    return loop, target.slice[0].slice.value, assign.value


def _placeholders(ctx, function) -> list[cst.Call]:
    found, stack = [], [function.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call) and _is_placeholder(ctx, node):
            found.append(node)
        stack.extend(node.children)
    return found


def _is_placeholder(ctx, node) -> bool:
    return isinstance(node, cst.Call) and ctx.call_api_path(node) in (PLACEHOLDER, WITH_DEFAULT)


def _local_binding(ctx, function, node) -> Binding | None:
    """``name = value``, the only binding of ``name``, a statement of ``function``'s own body."""
    if not isinstance(node, cst.Name):
        return None
    bound = resolve(ctx, node)
    if not isinstance(bound, Binding):
        return None
    body = function.body.body if isinstance(function.body, cst.IndentedBlock) else []
    if not any(bound.statement is s for s in body):
        return None
    return bound


def _spec(ctx, call: cst.Call, key: cst.BaseExpression, respell: dict) -> str:
    """``tf.TensorSpec(shape, dtype, name=key)`` as text, for a placeholder."""
    if ctx.call_api_path(call) == WITH_DEFAULT:
        found = bind_arguments(call, ("input", "shape", "name"))
        dtype = _literal_dtype(found.get("input"))
        if dtype is None:
            raise Unsupported("a placeholder_with_default whose dtype e2k cannot tell from its default", call)
        dtype = f"{respell['tf']}.{dtype}"
    else:
        found = bind_arguments(call, ("dtype", "shape", "name"))
        if "dtype" not in found:
            raise Unsupported("a placeholder without a dtype", call)
        dtype = _emit.code(_emit.replace_in(found["dtype"].value, respell["map"]))
    shape = found.get("shape")
    shape_code = _emit.code(_emit.replace_in(shape.value, respell["map"])) if shape is not None else "None"
    tf = respell["tf"]
    return f"{tf}.TensorSpec({shape_code}, {dtype}, name={_emit.code(key)})"


def _literal_dtype(arg) -> str | None:
    """The dtype of a placeholder_with_default's default: a literal, or tf.constant of one."""
    if arg is None:
        return None
    value = arg.value
    if isinstance(value, cst.Call) and len(value.args) == 1 and _emit.code(value.func).endswith("constant"):
        value = value.args[0].value
    while isinstance(value, (cst.List, cst.Tuple)) and value.elements:
        value = value.elements[0].value
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString)):
        return "string"
    if isinstance(value, cst.Float):
        return "float32"
    if isinstance(value, cst.Integer):
        return "int32"
    if isinstance(value, cst.Name) and value.value in ("True", "False"):
        return "bool"
    return None


def _is_dict(ctx, function, node, params: set[str], dict_params: set[str], depth: int) -> bool | None:
    """Is ``node`` (in ``function``) a dict of tensors? None when it cannot be told."""
    if depth > 8:
        return None
    if isinstance(node, (cst.Dict, cst.DictComp)):
        return True
    if isinstance(node, cst.Name):
        if node.value in params:
            return node.value in dict_params
        bound = resolve(ctx, node)
        if isinstance(bound, Binding):
            return _is_dict(ctx, function, bound.value, params, dict_params, depth + 1)
        unpacked = _unpacked(ctx, node)
        if unpacked is not None:  # `features, _ = parse(row)`: the first value `parse` returns
            value, index = unpacked
            element = _element(ctx, value, index)
            return None if element is None else _is_dict(ctx, None, element, set(), set(), depth + 1)
        return None
    if isinstance(node, cst.Call):
        if _is_placeholder(ctx, node):
            return False
        if isinstance(node.func, cst.Call):  # `make_parser(with_target=False)(row)`
            returned = _returned(ctx, node)
            return None if returned is None else _is_dict(ctx, None, returned, set(), set(), depth + 1)
        path = ctx.call_api_path(node) or ""
        if path.endswith(DICT_CALLS):
            return True
        if isinstance(node.func, cst.Name) and node.func.value == "dict" and resolve(ctx, node.func) is None:
            return True
        if path and not any(part in path for part in STRUCTURED):
            return False  # a TensorFlow op (tf.map_fn, tf.image.decode_jpeg...): one tensor
        callee = resolve(ctx, node.func) if isinstance(node.func, cst.Name) else None
        if isinstance(callee, cst.FunctionDef):
            returned = _single_return(callee)
            return None if returned is None else _is_dict(ctx, callee, returned, set(), set(), depth + 1)
    return None


def _unpacked(ctx, name: cst.Name) -> tuple[cst.BaseExpression, int] | None:
    """``a, b = value`` (the one assignment reaching ``name``, a whole statement): (value, the
    position of ``name`` in the targets)."""
    found = unpacking(ctx, name)
    return None if found is None else (found[1].value, found[3])


def _returned(ctx, call: cst.Call, depth: int = 0) -> cst.BaseExpression | None:
    """What ``call`` returns, where it calls a function of the program with one ``return``
    (``parse(row)``), or the function a factory of the program returns
    (``make_parser(with_target=False)(row)``, the factory returning a function it defines)."""
    if depth > 4:
        return None
    if isinstance(call.func, cst.Name):
        callee = resolve(ctx, call.func)
    elif isinstance(call.func, cst.Call):
        made = _returned(ctx, call.func, depth + 1)
        callee = resolve(ctx, made) if isinstance(made, cst.Name) else None
    else:
        return None
    return _single_return(callee) if isinstance(callee, cst.FunctionDef) else None


def _element(ctx, value: cst.BaseExpression, index: int) -> cst.BaseExpression | None:
    """The ``index``-th value of a tuple literal, or of the tuple a call returns."""
    if isinstance(value, cst.Call):
        value = _returned(ctx, value)
    if isinstance(value, (cst.Tuple, cst.List)) and index < len(value.elements) \
            and not any(isinstance(e, cst.StarredElement) for e in value.elements):
        return value.elements[index].value
    return None


def _alias_read_by_unit(ctx, plan, read: cst.Name) -> bool:
    """Is ``read`` the value of ``alias = function`` whose every read is the unit's own (an
    export names the function through the alias)?"""
    from estimator2keras._units import reads_reached

    statement = ctx.enclosing_statement(read)
    small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
    if not (isinstance(small, cst.Assign) and small.value is read and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)):
        return False
    reads = reads_reached(ctx, small.targets[0].target)
    return bool(reads) and all(plan.owns(r) for r, _ in reads)


def convert(ctx, plan, function: cst.FunctionDef, visible: bool, code: str, orphan: bool = False) -> str:
    """Replace ``function`` by its serving tf.function (``visible``: the model is visible
    where the function is defined) and return how an export names it: the function, or
    ``function(<model>)``'s name placeholder ``{model}``. ``orphan``: nothing calls it (an
    alternative the program kept, `linear_serving_input_receiver_fn` beside the one it
    exports with): it becomes the function taking the method that gives what is served."""
    respell = {"tf": plan.tf, "map": dict(tf2_respellings(ctx, function, plan.tf))}
    receiver = read(ctx, plan, function, respell)
    name = function.name.value
    reads = accesses_of(ctx, function.name)
    if orphan:
        if reads != []:
            raise Unsupported(f"`{name}` is used: e2k converts it with the export that uses it", function)
        visible = False
    elif reads is None or not reads:
        raise Unsupported(f"`{name}` is rebound; e2k cannot tell which function the Estimator exported with", function)
    outside = [r for r in reads if not plan.owns(r) and not _alias_read_by_unit(ctx, plan, r)]
    if outside:
        raise Unsupported(f"`{name}` is used outside this Estimator's exports, which still need it as it is", outside[0])
    taken = _names_in(function)
    features = _emit.code(receiver.features)
    if receiver.wrap_feature:
        features = f'{{"{SINGLE_FEATURE}": {features}}}'
    if visible:
        predictions = f"{plan.model_var}.{plan.export_method or 'predict_step'}({features})"
    else:
        # It takes the model's method that gives what is served: models sharing it (a canned
        # Estimator's and a model_fn's, by a flag) each pass their own.
        predict = _emit.unique_name("predict", taken)
        predictions = f"{predict}({features})"
    if visible and plan.export_method is None and plan.predictions_kind != "dict":
        predictions = f'{{"output": {predictions}}}'
    body = function.body.body
    new_body = []
    comments: list[cst.EmptyLine] = []  # the comments above a statement that goes stay
    for statement in body:
        if any(statement is r for r in receiver.removed):
            comments += [line for line in statement.leading_lines if line.comment is not None]
            continue
        if comments:
            statement = statement.with_changes(leading_lines=[*comments, *statement.leading_lines])
            comments = []
        if statement.body[-1] is receiver.returned.body[-1] if isinstance(statement, cst.SimpleStatementLine) else False:
            new_body.append(_emit.statement(f"return {predictions}").with_changes(leading_lines=statement.leading_lines))
        else:
            new_body.append(statement)
    docstring = None
    if visible is False and new_body and _is_docstring(new_body[0]):
        docstring, new_body = new_body[0], new_body[1:]
    if new_body:  # no blank line right under the def
        new_body[0] = new_body[0].with_changes(
            leading_lines=[line for line in new_body[0].leading_lines if line.comment is not None])
    signature = ", ".join(spec for _, spec in receiver.params)
    depth = _depth(ctx, function) + (0 if visible else 1)
    width = len(ctx.module.default_indent) * depth + len(f"@{plan.tf}.function(input_signature=[{signature}])")
    if width > _emit.max_line() and receiver.vertical is not None:
        signature = receiver.vertical
    decorator = cst.Decorator(_emit.expr(f"{plan.tf}.function(input_signature=[{signature}])"))
    params = cst.Parameters([cst.Param(cst.Name(n)) for n, _ in receiver.params])
    inner_name = name if visible else _emit.unique_name("serve", taken)
    inner = function.with_changes(
        name=cst.Name(inner_name), params=params, decorators=[decorator],
        body=function.body.with_changes(body=new_body), leading_lines=[])
    inner = _emit.replace_in(inner, respell["map"])
    if visible:
        new = _emit.with_comment(inner, COMMENT)
    else:
        closing = _emit.statement(f"return {inner_name}")
        outer = [*([docstring] if docstring is not None else []), inner.with_changes(leading_lines=[_emit.comment_line(COMMENT)]), closing]
        new = function.with_changes(params=cst.Parameters([cst.Param(cst.Name(predict))]),
                                    body=function.body.with_changes(body=outer), leading_lines=[])
    plan.replace_statement(function, [new])
    if orphan:
        plan.fixed(function, code, f"`{name}` (a hand-written serving_input_receiver_fn nothing exports with) -> a "
                                   "serving tf.function of the method passed to it (`model.predict_step`)")
    else:
        plan.fixed(function, code, f"`{name}` (a hand-written serving_input_receiver_fn) -> a serving tf.function")
    return name if visible else f"{name}({{model}})"


def convert_unused(ctx, plan, near: cst.FunctionDef, code: str) -> None:
    """The serving_input_receiver_fns of ``near``'s module that nothing reads, converted as
    ``near`` was (an export converted it): the program's alternatives stay usable, and no
    ServingInputReceiver is left for TensorFlow 2, which has none."""
    for statement in ctx.module_of(near).body:
        if not isinstance(statement, cst.FunctionDef) or statement is near or statement in plan.serving_functions:
            continue
        last = statement.body.body[-1] if isinstance(statement.body, cst.IndentedBlock) else None
        small = last.body[0] if isinstance(last, cst.SimpleStatementLine) else None
        if not (isinstance(small, cst.Return) and isinstance(small.value, cst.Call)
                and _emit.code(small.value.func).endswith("ServingInputReceiver")):
            continue  # (a cheap look first: its last statement returns no receiver)
        returned = _single_return(statement)
        if not (isinstance(returned, cst.Call) and ctx.call_api_path(returned) in RECEIVERS):
            continue
        if accesses_of(ctx, statement.name) != []:
            continue
        plan.serving_functions[statement] = convert(ctx, plan, statement, False, code, orphan=True)


def _depth(ctx, node) -> int:
    depth, current = 0, ctx.parent(node)
    while current is not None:
        depth += isinstance(current, cst.IndentedBlock)
        current = ctx.parent(current)
    return depth


def _is_docstring(statement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Expr) \
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


def _names_in(node) -> set[str]:
    found, stack = set(), [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            found.add(current.value)
        stack.extend(current.children)
    return found

