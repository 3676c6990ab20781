"""Exporting a converted model the way its Estimator exported it: the serving signature.

Shared by ``export_saved_model`` (E2K007) and ``EvalSpec(exporters=...)`` (E2K002): the
serving_input_receiver_fn becomes a ``tf.function`` with the receiver's input signature
that returns the PREDICT predictions, saved with ``tf.saved_model.save``.
"""
from __future__ import annotations

import libcst as cst

from estimator2keras import _emit, _receiver
from estimator2keras._rule import Unsupported
from estimator2keras._symbols import tf2_respellings
from estimator2keras._units import Binding, accesses_of, bind_arguments, resolve, resolve_call

RAW = _receiver.RAW
PARSING = frozenset({"estimator.export.build_parsing_serving_input_receiver_fn"})
PREDICT_OUTPUT = frozenset({"estimator.export.PredictOutput"})
#: Export outputs whose signature TF1 built on a single string input (serialized tf.Examples)
#: only: with any other receiver the Estimator left the signature out of its export (a
#: warning, "Export includes no default signature!" when it was the default one).
EXAMPLE_OUTPUTS = frozenset({"estimator.export.RegressionOutput", "estimator.export.ClassificationOutput"})
DEFAULT_KEYS = frozenset({"saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY",
                          "saved_model.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY"})
DEFAULT_SIGNATURE = "serving_default"
SERVING_SIGNATURE = '''
def {name}(features, batch_size=None):
    """The inputs build_raw_serving_input_receiver_fn served: one per feature, any batch size."""
    return {{key: {tf}.TensorSpec([batch_size, *t.shape[1:]], t.dtype, name=key) for key, t in features.items()}}
'''


BEST_EXPORT = '''
class {name}({tf}.keras.callbacks.Callback):
    """What a BestExporter did: after each evaluation whose loss is the lowest so far (an
    earlier run's too: the lowest is kept in `export_dir_base/best_loss`, where the Estimator
    read its model_dir's eval events), the model is exported to `export_dir_base/<timestamp>`
    with its serving signatures, and only the newest `exports_to_keep` exports are kept."""

    def __init__(self, export_dir_base, signatures, exports_to_keep=5, monitor="val_loss"):
        super().__init__()
        self.export_dir_base = export_dir_base
        self.signatures = signatures
        self.exports_to_keep = exports_to_keep
        self.monitor = monitor
        self.record = os.path.join(export_dir_base, "best_loss")
        self.best = None
        if os.path.exists(self.record):
            with open(self.record) as f:
                self.best = float(f.read())

    def on_epoch_end(self, epoch, logs=None):
        loss = (logs or {{}}).get(self.monitor)
        if loss is None or (self.best is not None and loss >= self.best):
            return
        self.best = loss
        path = os.path.join(self.export_dir_base, str(int(time.time())))
        while os.path.exists(path):  # one export a second, named by its time, as the Estimator's
            time.sleep(1)
            path = os.path.join(self.export_dir_base, str(int(time.time())))
        {tf}.saved_model.save(self.model, path, signatures=self.signatures)
        with open(self.record, "w") as f:
            f.write(repr(float(loss)))
        if self.exports_to_keep:
            exports = sorted((d for d in os.listdir(self.export_dir_base) if d.isdigit()), key=int)
            for old in exports[:-self.exports_to_keep]:
                shutil.rmtree(os.path.join(self.export_dir_base, old))
'''


def best_export(plan, base: cst.BaseExpression, name: str, signatures: cst.Dict,
                keep: cst.BaseExpression | None) -> cst.BaseExpression:
    """A callback exporting as BestExporter did, into ``<base>/export/<name>`` (its class added once)."""
    plan.imports += [("os", None, None), ("shutil", None, None), ("time", None, None)]
    klass = plan.add_helper("BestExport", lambda given: _emit.statements(BEST_EXPORT, name=given, tf=plan.tf))
    directory = _emit.expr(f'os.path.join({_emit.code(base)}, "export", "{name}")')
    args = [cst.Arg(directory), cst.Arg(signatures)]
    if keep is not None:
        args.append(_emit.keyword_arg("exports_to_keep", keep))
    return cst.Call(cst.Name(klass), args=_emit.call_args(args))


#: Functions that always return a path (a model_dir made by one is never None).
PATH_FUNCTIONS = frozenset({"tempfile.mkdtemp", "os.path.join", "os.path.abspath", "os.path.expanduser",
                            "os.path.realpath", "os.getcwd", "str"})


def model_dir_base(plan) -> cst.BaseExpression:
    """The directory the exporters of ``train_and_evaluate`` export under: the model_dir, and,
    when it may be None when the program runs (a flag without a default, a parameter), the
    directory the checkpoints callback uses in its place (a temporary one, as the Estimator's)."""
    if plan.checkpoints is None or _never_none(plan.ctx, plan.model_dir):
        return plan.model_dir
    # The model_dir when it is given (the directory the callback writes), else the callback's own.
    return _emit.expr(f"{_emit.code(plan.model_dir)} or {plan.checkpoints}.directory")


def _never_none(ctx, value: cst.BaseExpression, depth: int = 0) -> bool:
    """Is ``value`` a path whatever the program's inputs: a string, a path function's result,
    or a name bound once to one of those?"""
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Add, cst.Modulo)):
        return _never_none(ctx, value.left, depth) or isinstance(value.operator, cst.Modulo)
    if isinstance(value, cst.Call):
        from libcst.metadata import QualifiedNameProvider

        names = {q.name for q in ctx.get_metadata(QualifiedNameProvider, value.func, set())}
        return bool(names & PATH_FUNCTIONS) or isinstance(value.func, cst.Attribute) and value.func.attr.value in (
            "format", "join") and isinstance(value.func.value, (cst.SimpleString, cst.FormattedString))
    if isinstance(value, cst.Name) and depth < 4:
        bound = resolve(ctx, value)
        if isinstance(bound, Binding):
            return _never_none(ctx, bound.value, depth + 1)
        # A parameter: what its function's one call passes (`train_and_evaluate(output_dir)`).
        from estimator2keras._units import _argument_of, _single_assignment

        param = getattr(_single_assignment(ctx, value), "node", None)
        given = _argument_of(ctx, param) if isinstance(param, cst.Param) else None
        return given is not None and _never_none(ctx, given, depth + 1)
    return False


def export_path(plan, base: cst.BaseExpression, *parts: str | cst.BaseExpression) -> cst.BaseExpression:
    """``<base>/<parts...>/<timestamp>`` as bytes, as the Estimator returned it; a part is a
    name (a string) or the program's expression giving it."""
    plan.imports += [("os", None, None), ("time", None, None)]
    code = lambda node: _emit.code(plan._substituted(node))  # noqa: E731 - the plan's edits inside (config.model_dir)
    joined = ", ".join([code(base), *(f'"{p}"' if isinstance(p, str) else code(p) for p in parts),
                        "str(int(time.time()))"])
    return _emit.expr(f"os.fsencode(os.path.join({joined}))")


def signatures_dict(names: list[str], function: str) -> cst.Dict:
    """``{"name": function, ...}``; ``function`` is a name, or a call that makes the function."""
    return cst.Dict([
        cst.DictElement(cst.SimpleString(f'"{name}"'), _emit.expr(function),
                        comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if i < len(names) - 1
                        else cst.MaybeSentinel.DEFAULT)
        for i, name in enumerate(names)
    ])


def save_statement(plan, ctx, path, signatures) -> cst.BaseStatement:
    save = _emit.statement("{tf}.saved_model.save({m}, {p}, signatures={s})",
                           tf=plan.tf, m=plan.model_var, p=path, s=signatures)
    if "\n" in _emit.code(signatures):  # one signature a line already
        return save
    return _emit.fit_line(save, 0, ctx.module.default_indent)


def signature_names(plan, ctx, call) -> list[str]:
    """The Estimator's export signatures: `serving_default`, or `export_outputs`' names."""
    if plan.predictions_kind is None:
        raise Unsupported("the model_fn returns no predictions in PREDICT mode; there is nothing to export", call)
    canned = plan.export_signatures  # a canned Estimator's (set by _canned.convert)
    if canned:
        return list(canned)
    if plan.spec_export_outputs is None:
        return [DEFAULT_SIGNATURE]
    outputs, follow = plan.spec_export_outputs
    outputs = follow(outputs)
    if not isinstance(outputs, cst.Dict):
        raise Unsupported("export_outputs is not a dict e2k can read", outputs)
    names = []
    plan.omitted_outputs = []
    predictions = follow(plan.spec_predictions) if plan.spec_predictions is not None else None
    for element in outputs.elements:
        if not isinstance(element, cst.DictElement):
            raise Unsupported("export_outputs is not a dict e2k can read", outputs)
        if isinstance(element.key, cst.SimpleString):
            name = element.key.evaluated_value
        elif ctx.api_path(element.key) in DEFAULT_KEYS:
            name = DEFAULT_SIGNATURE
        else:
            raise Unsupported("an export_outputs key that is not a string", element.key)
        value = follow(element.value)
        if isinstance(value, cst.Call) and ctx.call_api_path(value) in EXAMPLE_OUTPUTS:
            plan.omitted_outputs.append((name, element))  # left out, as the Estimator did (serving_function checks)
            continue
        ok = isinstance(value, cst.Call) and ctx.call_api_path(value) in PREDICT_OUTPUT and len(value.args) == 1
        # Not the predictions: the model's own method gives it (read with the model_fn).
        if not ok or not (_same_predictions(ctx, follow(value.args[0].value), predictions) or plan.export_method):
            raise Unsupported(
                "e2k exports PredictOutput(<the PREDICT predictions>) signatures; this export output is another",
                element)
        names.append(name)
    if len(outputs.elements) == 1 and names and names[0] != DEFAULT_SIGNATURE:
        names.append(DEFAULT_SIGNATURE)  # the Estimator made a single export output the default too
    if not names:
        raise Unsupported("the Estimator's export held no signature: its regression / classification outputs need a "
                          "single string input (serialized tf.Examples), and e2k writes predict signatures only", outputs)
    return names


#: The method names TensorFlow Serving's Classify and Regress APIs require of a signature.
CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"
SIGNATURE_METHODS = '''
def {name}(export_dir, methods):
    """Mark the export's signatures as the Estimator marked them: tf.saved_model.save marks
    every one a predict signature, and TensorFlow Serving's Classify and Regress APIs only
    take signatures marked as theirs."""
    path = os.path.join(os.fsdecode(export_dir), "saved_model.pb")
    saved_model = saved_model_pb2.SavedModel()
    with {tf}.io.gfile.GFile(path, "rb") as f:
        saved_model.ParseFromString(f.read())
    for key, method in methods.items():
        saved_model.meta_graphs[0].signature_def[key].method_name = method
    with {tf}.io.gfile.GFile(path, "wb") as f:
        f.write(saved_model.SerializeToString())
'''
#: What a canned head's classify / regress signature returns, from its predictions dict.
EXAMPLE_OUTPUTS_OF = {
    "classify": '{{"classes": predictions["all_classes"], "scores": predictions["probabilities"]}}',
    "regress": '{{"outputs": predictions["{value}"]}}',
}


def export_signatures(node, plan, ctx, code: str, names: list[str]) -> tuple[cst.Dict, list[cst.BaseStatement], str]:
    """The signatures an export writes (a dict), the statements to put before it, and the
    template (``{path}``) of a statement to put after it ("": none). A canned Estimator whose
    receiver is one string tensor (serialized tf.Examples) also exported classify / regress
    signatures, `serving_default` among them: each is a tf.function of the same input named
    `inputs`, giving the outputs TensorFlow Serving's API expects, marked as such after the save."""
    single: list[bool] = []
    function, inline = serving_function(node, plan, ctx, code, names, single=single)
    if not single:
        return signatures_dict(names, function), inline, ""
    if not isinstance(_emit.expr(function), cst.Name):  # `serving_input_fn(model.predict_step)`: made once
        made = plan.unique_name("serving_fn")
        inline.append(_emit.statement("{n} = {v}", n=made, v=function))
        function = made
    head, tf = plan.canned_head, plan.tf
    kinds = ["regress"] if head == "regression" else ["classify", "regress"] if head == "binary" else ["classify"]
    methods: dict[str, str] = {}
    signatures: dict[str, str] = {}
    for kind in kinds:
        name = plan.unique_name(f"{function}_{kind}")
        outputs = EXAMPLE_OUTPUTS_OF[kind].format(value="logistic" if head == "binary" else "predictions")
        statement = _emit.statement(
            "@{tf}.function(input_signature=[{tf}.TensorSpec([None], {tf}.string, name=\"inputs\")])\n"
            "def {name}(inputs):\n    predictions = {function}(inputs)\n    return " + _braces(outputs),
            tf=tf, name=name, function=function)
        also = " (serving_default too)" if kind == kinds[0] else ""
        inline.append(_emit.with_comment(statement, f"The Estimator's {kind} signature{also}: the same input, "
                                                    "named `inputs`."))
        key = "classification" if kind == "classify" else "regression"
        for signature in (["serving_default", key] if kind == kinds[0] else [key]):
            signatures[signature] = name
            methods[signature] = CLASSIFY_METHOD if kind == "classify" else REGRESS_METHOD
    signatures.update({n: function for n in names})
    plan.imports += [("os", None, None), ("tensorflow.core.protobuf", "saved_model_pb2", None)]
    helper = plan.add_helper("set_signature_methods",
                             lambda given: _emit.statements(SIGNATURE_METHODS, name=given, tf=tf))
    listed = "".join(f'\n    "{k}": "{v}",' for k, v in methods.items())
    signatures_code = "{" + "".join(f'\n    "{k}": {v},' for k, v in signatures.items()) + "\n}"
    return _emit.expr(signatures_code), inline, f"{helper}({{path}}, {{{{{listed}\n}}}})"


def serving_function(node, plan, ctx, code: str, names: list[str],
                     single: list | None = None) -> tuple[str, list[cst.BaseStatement]]:
    """The serving tf.function of a serving_input_receiver_fn: how the export names it, and the
    statements to put before the export (a receiver fn that was not a named one; the function a
    hand-written one's factory makes for this model, when more than one signature names it).
    ``single``: the caller (``export_signatures``) writes a canned Estimator's classify /
    regress signatures where the receiver is one string tensor: True is appended to it then,
    rather than that receiver reported."""
    inline: list[cst.BaseStatement] = []
    # `serving_fn = csv_serving_input_fn` in each branch: the function it names, for every check below.
    node = _alias_in_every_branch(node, plan, ctx)
    receiver, binding = resolve_call(ctx, node, RAW | PARSING)
    if plan.export_signatures:
        if _one_string_input(node, receiver, plan, ctx, code, report=single is None):
            single.append(True)
    omitted = plan.omitted_outputs
    if omitted:
        listed = ", ".join(f"`{name}`" for name, _ in omitted)
        _one_string_input(node, receiver, plan, ctx, code, why=(
            f"the Estimator exported {listed} (a regression / classification output) on this single string input "
            "(serialized Examples); tf.saved_model.save writes predict signatures only"))
        for name, element in omitted:
            plan.fixed(element, "E2K007", f"export output `{name}` left out: the Estimator left it out of its export "
                                          "too (a regression / classification signature needs serialized tf.Examples "
                                          "as its one input, and this receiver has other inputs)")
    if receiver is None:
        made = _handwritten(node, plan, ctx, code)
        if "{model}" not in made:
            return made, []
        # The function takes the model's method giving what is served (two models, a canned
        # one's predict_step and a model_fn's serving_outputs, may share the function).
        method = f"{plan.model_var}.{plan.export_method or 'predict_step'}"
        if plan.export_method is None and plan.predictions_kind != "dict":
            # The export named its one tensor "output"; the function serves what it is handed.
            method = f'lambda features: {{"output": {method}(features)}}'
        made = made.format(model=method)
        if len(names) == 1:
            return made, []
        name = plan.unique_name("serving_fn")
        return name, [_emit.statement("{n} = {v}", n=name, v=made)]
    known = plan.serving_functions.get(receiver)
    if known is not None:
        return known, []
    raw = ctx.call_api_path(receiver) in RAW
    args = bind_arguments(receiver, ("features", "default_batch_size") if raw else ("feature_spec", "default_batch_size"))
    batch = args["default_batch_size"].value if "default_batch_size" in args else cst.Name("None")
    outputs = "model.predict_step({x})" if plan.predictions_kind == "dict" else '{{"output": model.predict_step({x})}}'
    if plan.export_method is not None:
        outputs = f"model.{plan.export_method}({{x}})"  # a dict: the export's PredictOutput
    outputs = outputs.replace("model.", f"{plan.model_var}.")
    if raw:
        signature = _raw_signature(args["features"].value, batch, plan, ctx)
        comment = "The serving signature the Estimator exported: one input per feature, predictions out."
        template = "@{tf}.function(input_signature=[{sig}])\ndef {name}(features):\n    return " + _braces(
            outputs.format(x="features"))
    else:
        spec = args["feature_spec"].value
        spec = _emit.replace_in(spec, dict(tf2_respellings(ctx, spec, plan.tf)))
        signature = _emit.expr('{tf}.TensorSpec([{b}], {tf}.string, name="examples")', tf=plan.tf, b=batch)
        comment = "The serving signature the Estimator exported: serialized tf.train.Examples in, predictions out."
        parsed = _emit.code(_emit.expr("{tf}.io.parse_example(examples, {s})", tf=plan.tf, s=spec))
        template = "@{tf}.function(input_signature=[{sig}])\ndef {name}(examples):\n    return " + _braces(
            outputs.format(x=parsed))
    if binding is not None:
        reads = accesses_of(ctx, binding.target) or []
        if not all(plan.owns(read) for read in reads):
            raise Unsupported(f"`{binding.name}` is used outside this Estimator's calls", binding.target)
        if ctx.scope(binding.target) is not ctx.scope(plan.unit.target):
            raise Unsupported("the serving_input_receiver_fn is defined where the model is not visible", binding.target)
        name = binding.name
    else:
        name = plan.unique_name("serving_fn")
    function = _emit.statement(template, tf=plan.tf, sig=signature, name=name)
    function = _emit.with_comment(function, comment)
    blank = [_emit.blank_line()] * (2 if ctx.parent(plan.unit.statement) is ctx.module else 1)
    function = function.with_changes(body=function.body.with_changes(footer=blank))
    if binding is not None:
        # Blank lines before a definition (the replaced statement's own blank lines give way).
        plan.replace_statement(binding.statement, [function.with_changes(leading_lines=[*blank, *function.leading_lines])])
    else:
        inline.append(function.with_changes(leading_lines=[*blank, *function.leading_lines]))
    plan.serving_functions[receiver] = name
    return name, inline


def _one_string_input(node, receiver, plan, ctx, code: str, why: str | None = None, report: bool = True) -> bool:
    """Report the receivers of an export that had a single string tensor (serialized
    tf.train.Examples) when its classification / regression signatures were made on them:
    a canned Estimator's (``serving_default`` among them), or a model_fn's export outputs,
    which e2k does not write. The predict signature is exported all the same; the signatures
    left out are a finding at the receiver, for the human who knows the serving clients."""
    why = why or ("a canned Estimator exported classify/regress signatures (serving_default among them) on this "
                  "single string input; tf.saved_model.save writes predict signatures only, so e2k exports only its "
                  "predict signature: clients of the Classify/Regress APIs or of serving_default need a change")
    if receiver is not None:
        if ctx.call_api_path(receiver) in PARSING:
            if report:
                plan.leftover(receiver, code, why)
            return True
        features = bind_arguments(receiver, ("features", "default_batch_size")).get("features")
        value = features.value if features is not None else None
        if isinstance(value, cst.Name):
            bound = resolve(ctx, value)
            value = bound.value if isinstance(bound, Binding) else None
        if not isinstance(value, cst.Dict) or len(value.elements) == 1 and "string" in _emit.code(value):
            plan.leftover(receiver, code, why if isinstance(value, cst.Dict) else (
                "the raw receiver's features are not a dict e2k can read: it cannot tell which signatures the "
                "canned Estimator exported; e2k exports its predict signature"))
        return False
    table = _table(ctx, node)
    for candidate in [e.value for e in table.value.elements] if table is not None else [node]:
        # Each serving function of a dict (``SERVING_FUNCTIONS[args.export_format]``) may be the one.
        function = _receiver.handwritten(ctx, candidate)
        if function is None:
            continue  # refused where it is converted
        if _single_string_function(ctx, plan, function):
            if table is None and not report:
                return True  # the caller writes its classify / regress signatures
            plan.leftover(function, code, why)
    return False


def _single_string_function(ctx, plan, function: cst.FunctionDef) -> bool:
    """Does the hand-written serving_input_receiver_fn receive one string tensor?"""
    respell = {"tf": plan.tf, "map": dict(tf2_respellings(ctx, function, plan.tf))}
    specs = [spec for _, spec in _receiver.read(ctx, plan, function, respell).params]
    text = " ".join(specs)
    # One TensorSpec: one input, or a comprehension of them (its dtype written once).
    return "string" in text and text.count("TensorSpec(") == 1


def _alias_in_every_branch(node, plan, ctx):
    """``serving_fn = cnn_serving_input_receiver_fn`` in each branch of an if/elif (kubeflow's
    mnist): the function every branch names. The aliases go when only the unit reads them."""
    if not isinstance(node, cst.Name) or resolve(ctx, node) is not None:
        return node
    from estimator2keras._training import _same_in_every_branch
    from estimator2keras._units import reads_reached

    same = _same_in_every_branch(ctx, node)
    if not same or not isinstance(same[0].value, (cst.Name, cst.Attribute)):
        return node
    for binding in same:
        reads = [r for r, _ in reads_reached(ctx, binding.target) or []]
        if not reads or not all(plan.owns(r) for r in reads):
            return node
    for binding in same:
        plan.take_binding(binding)
    return same[0].value


def _table(ctx, node) -> Binding | None:
    """``FUNCTIONS[key]``: the binding of a dict of functions (of this module or another
    module of the program) that a key picks from; None when ``node`` is no such pick."""
    if not (isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)):
        return None
    table = resolve(ctx, node.value) if isinstance(node.value, (cst.Name, cst.Attribute)) else None
    if not (isinstance(table, Binding) and isinstance(table.value, cst.Dict) and table.value.elements and all(
            isinstance(e, cst.DictElement) and isinstance(e.value, cst.Name) for e in table.value.elements)):
        raise Unsupported("the serving_input_receiver_fn is picked from something other than a dict of "
                          "serving functions of the program", node)
    return table


def _braces(text: str) -> str:
    """Code put into a template as it is: its braces (a dict) doubled."""
    return text.replace("{", "{{").replace("}", "}}")


def _same_predictions(ctx, output: cst.BaseExpression, predictions: cst.BaseExpression | None) -> bool:
    """Does the export output give the PREDICT predictions: the same node, or the same
    expression written again in the same statement (``EstimatorSpec(mode, predictions={"p": p},
    export_outputs={...: PredictOutput({"p": p})})``), where its names cannot differ?"""
    if predictions is None:
        return False
    if output is predictions:
        return True
    return output.deep_equals(predictions) and ctx.enclosing_statement(output) is ctx.enclosing_statement(predictions)


def _handwritten(node, plan, ctx, code: str) -> str:
    """How an export names the serving tf.function of a hand-written serving_input_receiver_fn
    (``{model}`` standing for the model where the function takes it), the function converted:
    a function of the file, or ``FUNCTIONS[key]`` of a dict of such functions (each converted;
    the key, known only when the program runs, picks one as it picked the receiver fn)."""
    table = _table(ctx, node)
    if table is not None:
        reads = accesses_of(ctx, table.target)
        if reads is None or not all(plan.owns(read) for read in reads):
            raise Unsupported(f"`{table.name}` is used outside this Estimator's exports too", table.target)
        plan.owned.append(table.value)  # the functions' reads in it are the exports' own
        candidates = [e.value for e in table.value.elements]
    else:
        candidates = [node]
    functions = []
    for candidate in candidates:
        function = _receiver.handwritten(ctx, candidate)
        if function is None:
            raise Unsupported(
                "the serving_input_receiver_fn is not build_raw_serving_input_receiver_fn(...), "
                "build_parsing_serving_input_receiver_fn(...) or a function of this file that returns a "
                "ServingInputReceiver", candidate)
        functions.append(function)
    # One spelling for all of a dict's functions: each takes the model unless all see it.
    visible = all(ctx.scope(f.name) is ctx.scope(plan.unit.target) for f in functions)
    for function in functions:
        made = plan.serving_functions.get(function)
        if made is None:
            made = _receiver.convert(ctx, plan, function, visible, code)
            plan.serving_functions[function] = made
            _receiver.convert_unused(ctx, plan, function, code)
        elif ("{model}" in made) == visible:
            raise Unsupported("a serving function used both where the model is visible and where it is not", node)
    if table is None:
        if ctx.path_of(functions[0]) != ctx.path_of(node):
            # A function of another module of the program, named here through its module.
            if not isinstance(node, cst.Attribute):
                raise Unsupported("the serving function is imported by its name from another module; e2k "
                                  "renames it there", node)
            return _emit.code(node.value) + "." + made
        return made
    picked = _emit.code(node)
    return picked if visible else picked + "({model})"


def _placeholder(ctx, value: cst.BaseExpression) -> tuple[cst.Call | None, Binding | None]:
    """``tf.placeholder(...)`` itself, or a name bound once to one (``image =
    tf.placeholder(...)`` then ``{"image": image}``, TensorFlow's official models)."""
    if isinstance(value, cst.Call) and ctx.call_api_path(value) == "placeholder":
        return value, None
    bound = resolve(ctx, value) if isinstance(value, cst.Name) else None
    if isinstance(bound, Binding) and isinstance(bound.value, cst.Call) and ctx.call_api_path(bound.value) == "placeholder":
        return bound.value, bound
    return None, None


def _raw_signature(features, batch, plan, ctx) -> cst.BaseExpression:
    if isinstance(features, cst.Dict) and features.elements and all(
        isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
        and _placeholder(ctx, e.value)[0] is not None
        for e in features.elements
    ):
        # Placeholders do not exist in TensorFlow 2: their dtype and shape become a TensorSpec.
        specs = []
        for i, element in enumerate(features.elements):
            placeholder, binding = _placeholder(ctx, element.value)
            # The placeholder's statement goes: it would fail in eager TensorFlow 2.
            plan.remove_binding_if_only_here(binding, element.value)
            element = element.with_changes(value=placeholder)
            found = bind_arguments(element.value, ("dtype", "shape", "name"))
            shape = found.get("shape")
            if shape is None or not isinstance(shape.value, (cst.List, cst.Tuple)) or not shape.value.elements:
                raise Unsupported("a placeholder without a literal shape", element.value)
            dims = [batch.deep_clone(), *(e.value for e in shape.value.elements[1:])]
            dtype = found["dtype"].value
            dtype = _emit.replace_in(dtype, dict(tf2_respellings(ctx, dtype, plan.tf)))
            spec = _emit.expr("{tf}.TensorSpec([{d}], {t}, name={k})", tf=plan.tf,
                              d=", ".join(_emit.code(d) for d in dims), t=dtype, k=element.key)
            comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if i < len(features.elements) - 1 \
                else cst.MaybeSentinel.DEFAULT
            specs.append(cst.DictElement(element.key, spec, comma=comma))
        return cst.Dict(specs)
    if not isinstance(features, (cst.Dict, cst.Name, cst.DictComp)) and not (
            isinstance(features, cst.Call) and isinstance(features.func, cst.Name) and features.func.value == "dict"):
        raise Unsupported("a raw serving receiver of one tensor (not a dict of features) is not converted", features)
    helper = plan.add_helper("serving_signature", lambda name: _emit.statements(SERVING_SIGNATURE, name=name, tf=plan.tf))
    respelled = _emit.replace_in(features, dict(tf2_respellings(ctx, features, plan.tf)))
    if _emit.code(batch) == "None":
        return _emit.expr("{h}({f})", h=helper, f=respelled)
    return _emit.expr("{h}({f}, batch_size={b})", h=helper, f=respelled, b=batch)
