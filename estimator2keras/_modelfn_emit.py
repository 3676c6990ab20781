"""Writing Keras from a model_fn that has been read.

``_KerasWriter`` holds the methods of ``_modelfn._Converter`` that write the Keras code: the
builder function, the ``tf.keras.Sequential`` or ``tf.keras.Model`` subclass (``__init__``,
``call``, ``predict_step``) and the compile() call; ``_ForwardRewriter`` turns forward-pass
code into the code of the model's methods.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import iter_calls
from estimator2keras._modelfn_read import (
    KERAS_MODEL_ATTRIBUTES, LossConversion, ModelConversion, ScheduleConversion, _Def, _LayerApp, _is_none, _walk,
)
from estimator2keras._modes import EVAL, PREDICT, TRAIN
from estimator2keras._symbols import tf2_respellings
from estimator2keras._units import _keyword_or_position

if TYPE_CHECKING:
    from estimator2keras._modelfn import _Converter


class _KerasWriter:
    """Writing the Keras model, its builder and its compile() call."""

    # -- writing Keras ------------------------------------------------------------------------
    def convert(self, name: str, class_name: str) -> ModelConversion:
        self.consumed: set[cst.BaseSmallStatement] = set()
        self.kept: set[cst.BaseSmallStatement] = set()
        self.read()
        paths = [self.modes.paths[m] for m in (TRAIN, EVAL, PREDICT)]
        train, evaluation, predict = (self.spec(p) for p in paths)
        if "loss" not in train or "train_op" not in train:
            self.refuse(self.fn, "in TRAIN mode the EstimatorSpec has no loss or no train_op")
        # What each part of compile() was read from, statement by statement: the comments above
        # them go above the argument they became (carry_comments). Only what each reading
        # consumes itself: the EstimatorSpec and the inference passes are no argument's.
        self.compile_roles: dict[int, str] = {}
        spent = self._claim(None, set())
        loss, loss_at, loss_defs, regularized = self.read_loss(train["loss"], len(self.order))
        for d in loss_defs:
            self.consumed.add(d.small)
        self._claim("loss", spent)
        eval_loss = evaluation.get("loss")
        if eval_loss is not None and _emit.code(eval_loss) != _emit.code(train["loss"]):
            self.refuse(eval_loss, "EVAL returns another loss than TRAIN, which compile() cannot express")

        output = loss.predictions
        self.output_name = output.value if isinstance(output, cst.Name) else None
        self.check_rank_one_loss(loss, loss_at)
        forward = self.forward_slice(output, loss_at)
        self.forward_smalls = {d.small for d in forward}
        self.read_inference_passes(forward)
        self.read_mode_variants(forward)
        inference = {d.small for d in self.inference_passes.values()} | set(self.mode_variants)
        self._outside_forward = True  # a helper's layers here would be a second model
        try:
            self.check_beyond_catalogue([d for d in self.defs if d.small not in self.forward_smalls and d.small not in inference])
        finally:
            self._outside_forward = False
        self.read_layers(forward)
        picking = self.dispatch_smalls  # made in __init__ now (`dispatch_of`)
        forward = self.without_column_building([d for d in forward if d.small not in picking], output)
        self.id_casts = self.ids_from_features(forward)
        spent = self._claim(None, set())
        optimizer, builder_defs = self.read_train_op(train["train_op"], train["loss"])
        self.kept.update(d.small for d in builder_defs)
        spent = self._claim("optimizer", spent)
        self.mode = EVAL
        metrics = self.read_metrics(evaluation.get("eval_metric_ops"))
        self._claim("metrics", spent)
        self.mode = PREDICT
        prediction = self.read_predictions(predict.get("predictions"))
        self.export_output = self.read_export_output(prediction)
        self.mode = TRAIN
        if prediction is not None:
            self.kept.update(d.small for d in prediction[0])
        if self.export_output is not None:
            self.kept.update(d.small for d in self.export_output[0])
        self.check_rest(paths)
        self.check_regularizers(regularized)
        self.check_nested_functions()

        # No method of its own (nor a preprocessing of the features): no class needed.
        plain = prediction is None and self.export_output is None and self.column_input is None \
            and self.label_table is None
        sequential = self.sequential(forward, output) if plain else None
        direct = self.direct_model(forward, output) if plain else None
        statements: list[cst.BaseStatement] = []
        if direct is not None:
            model = self.fit(_emit.statement("model = {m}", m=direct), 1)
        elif sequential is not None:
            model = _emit.statement("model = {tf}.keras.Sequential({layers})", tf=self.tf, layers=sequential)
            if self.fit(model, 1) is not model:
                layers = _emit.vertical_list([e.value for e in sequential.elements])
                model = _emit.statement("model = {tf}.keras.Sequential({layers})", tf=self.tf, layers=layers)
        else:
            klass, class_arguments = self.model_class(class_name, forward, output, prediction)
            klass = _call_returns_directly(klass)
            # The model_fn's docstring describes the model: the class's, not its builder's.
            statements.append(_with_docstring(klass, self.fn))
            model = _emit.statement(f"model = {class_name}({', '.join(class_arguments)})")
        builder, arguments = self.builder(name, model, builder_defs, optimizer, loss, metrics,
                                          docstring=direct is not None or sequential is not None)
        statements.append(builder)
        statements[:0] = self.definitions
        statements = self.carry_comments(statements, forward if sequential is not None else [])
        kind = None
        if predict.get("predictions") is not None:
            kind = "output" if prediction is None else ("dict" if isinstance(prediction[1], cst.Dict) else "tensor")
        self.absorb_helpers()
        return ModelConversion(name, statements, arguments, kind)

    def ids_from_features(self, forward: list[_Def]) -> dict[cst.Call, int]:
        """Lookups of the features as they come (``tf.nn.embedding_lookup(table,
        features["ids"])``, ``tf.one_hot(features, 10)``): each call -> the position of its ids.
        Keras 3 builds a model under a distribution strategy on the mean of the replicas' first
        batches, floats whatever the features were, which these ops refuse; the model casts them
        (a cast of integers to int64 leaves their values as they are)."""
        found: dict[cst.Call, int] = {}
        for d in forward:
            for call in iter_calls(d.value if d.value is not None else d.small):
                spec = ID_ARGUMENTS.get(self.ctx.call_api_path(call) or "")
                ids = _keyword_or_position(call, spec[1], spec[0]) if spec else None
                if ids is None or isinstance(ids, cst.Call) and self.ctx.call_api_path(ids) in ID_CASTS:
                    continue
                arg = next(a for a in call.args if a.value is ids)
                sources: set[str] = set()
                for name in self.names_read(arg.value):
                    inner = self.latest_def(name.value, d.index)
                    if inner is None:
                        sources.add("features" if name.value == "features" else "other")
                    else:
                        sources |= self._sources(inner, set())
                if sources == {"features"}:
                    found[call] = call.args.index(arg)
        return found

    def check_rank_one_loss(self, loss, at: int) -> None:
        """A Keras loss that averages over the last axis, given a rank-1 model output
        (``tf.squeeze(logits, axis=1)``), reduces each replica's batch to one value. Under a
        distribution strategy Keras 3 does not divide such a value by the replicas (it divides
        per-example losses only): measured with e2k parity on 2 replicas, the newest
        TensorFlow reported twice the loss at step 1 and trained with twice the gradient. So
        the loss is computed per example (``reduction="none"`` on the values as one column):
        Keras averages those over the global batch and divides by the replicas in both
        versions, which is TF1's mean over each replica's batch, divided by the replicas. So
        without a strategy too: the same model, then trained under one, stays right (and two
        Estimators of one model_fn, with and without a strategy, convert it alike). With a
        reduction of its own it is reported."""
        if not isinstance(loss.keras_loss, cst.Call):
            return
        kind = _emit.code(loss.keras_loss.func).rsplit(".", 1)[-1]
        if kind not in LAST_AXIS_LOSSES:
            return
        output = loss.predictions
        d = self.latest_def(output.value, at) if isinstance(output, cst.Name) else None
        value = d.value if d is not None else output
        path = self.ctx.call_api_path(value) if isinstance(value, cst.Call) else None
        rank_one = path in ("squeeze", "compat.v1.squeeze") or (
            path in ("reshape", "compat.v1.reshape") and len(value.args) > 1
            and _emit.code(value.args[1].value).replace(" ", "") in ("[-1]", "(-1,)", "-1"))
        if not rank_one:
            return
        if any(a.keyword is not None and a.keyword.value == "reduction" for a in loss.keras_loss.args):
            self.leftover(value, (
                "the model output is rank 1 and its loss, with a reduction of its own, averages over the last axis: on "
                "the newest TensorFlow (Keras 3), under a distribution strategy, Keras does not divide that loss by the "
                "replicas (TensorFlow 2.15 trains as the Estimator did); keep the output's last axis or check with e2k "
                "parity --target-python"), "E2K201")
            return
        loss.keras_loss = cst.Name(self._per_example_loss(loss.keras_loss))
        if self.plan is not None:
            self.plan.fixed(value, "E2K201", "a loss of a rank-1 output -> computed per example, which Keras divides by "
                                             "the replicas (it does not divide a batch's one value on Keras 3)")

    def _per_example_loss(self, keras_loss: cst.Call) -> str:
        """The module-level function computing ``keras_loss`` per example on a rank-1 output."""
        name = self.definition_name("per_example_loss")
        per_example = keras_loss.with_changes(
            args=_emit.call_args([*keras_loss.args, _emit.keyword_arg("reduction", cst.SimpleString('"none"'))]))
        indent = self.ctx.module.default_indent
        fn = _emit.statement(
            f"def {name}(labels, predictions):\n"
            f'    """Each example\'s loss (the output is one value per example), which Keras divides by the\n'
            f'{indent}replicas: Keras 3 does not divide a loss object\'s one value per batch (E2K201)."""\n'
            "    loss = {loss}\n"
            "    return loss({tf}.reshape(labels, [-1, 1]), {tf}.reshape(predictions, [-1, 1]))\n",
            loss=per_example, tf=self.tf)
        self.definitions.append(fn)
        return name

    def absorb_helpers(self) -> None:
        """A helper that only this model_fn called is now a method of the model: its TF1
        definition goes (another use keeps it)."""
        self.absorbed: set[cst.FunctionDef] = set()
        if self.plan is None:
            return
        from estimator2keras._units import accesses_of

        calls = {id(call.func) for call in self.helper_calls}
        calls |= {id(d.value.func) for d in self.inference_passes.values()}  # `logits_test = conv_net(...)`
        calls |= {id(self.def_of_small[small].value.func) for small in self.mode_variants}  # EVAL's and PREDICT's calls
        if self.root is self:
            for fn, block in self.blocks.items():
                reads = accesses_of(self.ctx, fn.name)
                if reads and all(id(read) in self.block_calls for read in reads):
                    self.absorbed.add(fn)
                    self.plan.remove_statement(fn)
                    self.plan.fixed(fn, "E2K302", f"`{fn.name.value}` -> layer class `{block.class_name}`")
        for helper in self.helpers.values():
            what = (f"written out at each of its {len(helper.calls)} calls, each with layers of its own" if helper.inline
                    else f"method `{helper.method}` of the Keras model")
            if helper.nested:  # it goes with the model_fn
                self.plan.fixed(helper.fn, "E2K302", f"`{helper.fn.name.value}`, defined in the model_fn -> {what}")
                continue
            reads = accesses_of(self.ctx, helper.fn.name)
            if reads and all(id(read) in calls for read in reads):
                self.absorbed.add(helper.fn)
                self.plan.remove_statement(helper.fn)
                self.plan.fixed(helper.fn, "E2K302", f"`{helper.fn.name.value}` -> {what}")

    def check_nested_functions(self) -> None:
        """A function defined in the model_fn goes with it: each of its uses must be a call that
        the conversion wrote otherwise (a helper's, or an inference pass's)."""
        from estimator2keras._units import accesses_of

        calls = {id(call.func) for call in self.helper_calls}
        calls |= {id(d.value.func) for d in self.inference_passes.values()}
        calls |= {id(self.def_of_small[small].value.func) for small in self.mode_variants}
        for stmt in self.fn.body.body:
            if not isinstance(stmt, cst.FunctionDef):
                continue
            reads = accesses_of(self.ctx, stmt.name)
            if reads is None or any(id(read) not in calls for read in reads):
                self.refuse(stmt, f"`{stmt.name.value}`, a function defined in the model_fn, is used where e2k does not "
                                  "convert it (e2k converts such functions that make layers for the forward pass)")

    def _claim(self, role: str | None, spent: set[int]) -> set[int]:
        """The statements consumed since ``spent`` were read into compile()'s ``role``
        argument; returns every statement consumed so far (``role`` None: only that)."""
        now = {id(small) for small in self.consumed}
        if role is not None:
            self.compile_roles.update((small, role) for small in now - spent)
        return now

    def carry_comments(self, statements: list[cst.BaseStatement], folded: list[_Def]) -> list[cst.BaseStatement]:
        """Comments of the model_fn that no emitted statement carries move along: those of
        forward statements folded into a Sequential above the model; those of the statements
        compile()'s loss, optimizer or metrics were read from above that argument; the rest
        above compile."""
        emitted = {line.comment.value for stmt in statements for line in _walk(stmt) if isinstance(line, cst.EmptyLine) and line.comment}
        folded_lines = {id(d.line) for d in folded}
        roles = self.compile_roles
        to_model, to_compile = [], []
        to_argument: dict[str, list[cst.EmptyLine]] = {}
        for node in _walk_in_order(self.fn.body):
            # A block's comment (`# Configure the Training Op` above `if mode == TRAIN:`) is its
            # first statement's.
            role = next((roles[id(n)] for n in _walk_in_order(node) if id(n) in roles), None) \
                if isinstance(node, (cst.SimpleStatementLine, cst.If)) else None
            for line in getattr(node, "leading_lines", ()):
                if line.comment is not None and line.comment.value not in emitted:
                    if id(node) in folded_lines:
                        to_model.append(line.with_changes(indent=True))
                    elif role is not None:
                        to_argument.setdefault(role, []).append(line)
                    else:
                        to_compile.append(line.with_changes(indent=True))
                    emitted.add(line.comment.value)
        if not (to_model or to_compile or to_argument):
            return statements
        builder = statements[-1]
        body = list(builder.body.body)
        for i, stmt in enumerate(body):
            small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
            target = _assign_target(small)
            if target == "model" and to_model:
                body[i] = stmt.with_changes(leading_lines=[*stmt.leading_lines, *to_model])
            if _is_compile(small) and to_argument:
                placed = _comments_on_arguments(small.value, to_argument)
                if placed is None:  # not an argument of this compile (a loss the model computes)
                    to_compile += [line.with_changes(indent=True) for lines in to_argument.values() for line in lines]
                else:
                    stmt = body[i] = stmt.with_changes(body=[small.with_changes(value=placed)])
            if _is_compile(small) and to_compile:
                body[i] = stmt.with_changes(leading_lines=[*stmt.leading_lines, *to_compile])
        return [*statements[:-1], builder.with_changes(body=builder.body.with_changes(body=body))]

    def sequential(self, forward: list[_Def], output: cst.BaseExpression) -> cst.List | None:
        previous = "features"
        layers = []
        for d in forward:
            if not isinstance(d.small, cst.Assign) or d.name in self.layer_objects:
                return None
            app = self.layer_apps.get(d.value) if isinstance(d.value, cst.Call) else None
            if app is None or not (isinstance(app.inputs, cst.Name) and app.inputs.value == previous):
                return None
            if app.training not in (None, "training"):
                return None
            if not app.drop:
                layers.append(cst.Element(self.constructor(app)))
            previous = d.name
        if not (isinstance(output, cst.Name) and output.value == previous) or not layers:
            return None
        if self._call_arguments(forward):
            return None
        return cst.List(_comma_separated(layers))

    def direct_model(self, forward: list[_Def], output: cst.BaseExpression) -> cst.BaseExpression | None:
        """``model = create_model(...)`` then ``logits = model(features, training=...)``: the
        Keras model the model_fn made is the model itself."""
        if len(forward) != 2 or not isinstance(output, cst.Name):
            return None
        made, applied = forward
        if made.name not in self.model_objects or not isinstance(applied.small, cst.Assign) or applied.name != output.value:
            return None
        app = self.layer_apps.get(applied.value) if isinstance(applied.value, cst.Call) else None
        if app is None or app.constructor is None or app.training != "training":
            return None
        if not (isinstance(app.inputs, cst.Name) and app.inputs.value == "features") or _emit.code(app.call.func) != made.name:
            return None
        return self.constructor(app)

    def _call_arguments(self, defs: list[_Def], extra: list[cst.CSTNode] = ()) -> list[str]:
        """The argument names (``params``...) the forward pass itself reads (not a layer's
        constructor, nor a layer loop's iterable: both are in __init__)."""
        in_init = {id(n) for app in self.layer_apps.values() if app.loop is not None for n in _walk(app.loop.iter)}
        read = {
            n.value
            for d in defs
            if not (d.name in self.layer_objects and d.value is self.layer_objects[d.name].value)  # made in __init__
            for n in self.names_read(d.value)
            if not self._inside_constructor(n) and id(n) not in in_init
        }
        read |= {n.value for node in extra for n in self.names_read(node) if not self._inside_constructor(n)}
        return [name for name in self.arguments if name in read]

    def _inside_constructor(self, node: cst.CSTNode) -> bool:
        current = self.ctx.parent(node)
        while current is not None:
            if isinstance(current, cst.Call) and current in self.helper_calls:
                # A helper's argument is code of the forward pass only where the method takes it.
                helper = self.helper_calls[current]
                bound = next(b for c, b in helper.calls if c is current)
                return not any(self._within(node, bound[p]) for p in helper.forward)
            if isinstance(current, cst.Call):
                for app in self.layer_apps.values():
                    if current is app.call and not self._is_input(node, app):
                        return True
            current = self.ctx.parent(current)
        return False

    def _within(self, node: cst.CSTNode, ancestor: cst.CSTNode) -> bool:
        current = node
        while current is not None:
            if current is ancestor:
                return True
            current = self.ctx.parent(current)
        return False

    def _is_input(self, node: cst.CSTNode, app: _LayerApp) -> bool:
        current = node
        while current is not None and current is not app.call:
            if current is app.inputs:
                return True
            current = self.ctx.parent(current)
        return False

    def scope_initializer(self, app: _LayerApp) -> cst.BaseExpression | None:
        """``with tf.variable_scope("body", initializer=...)`` around a TF1 layer: the
        initializer of its variables made without one (a Dense's or a convolution's kernel).
        The scope's other settings that reach variables (regularizer, partitioner, dtype...)
        are refused; the innermost scope that sets an initializer wins, as in TF1."""
        for call in self.enclosing_scopes(app.call):
            for arg in call.args:
                key = arg.keyword.value if arg.keyword is not None else None
                if key in SCOPE_SETTINGS:
                    self.refuse(arg, f"`variable_scope({key}=...)` sets the {key} of the variables made inside "
                                     "it, which e2k does not carry over to Keras layers")
            given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "initializer"), None)
            if given is not None and not _is_none(given):
                return given
        return None

    def constructor(self, app: _LayerApp) -> cst.BaseExpression:
        """The layer's Keras constructor: TF2 names, and TF1 initializers/regularizers in its
        arguments translated by their rules."""
        made = app.call.func if isinstance(app.call.func, cst.Call) else app.call
        if isinstance(app.constructor, cst.Call) and (self.ctx.call_api_path(made) or "").startswith(TF1_LAYERS):
            initializer = self.scope_initializer(app)
            if initializer is not None:
                app.constructor = self.scoped_initializer(app, initializer)
        replacements = dict(tf2_respellings(self.ctx, app.call, self.tf))
        for node in _walk(app.constructor):  # `units=cells.output_size`: the RNN layer's units
            found = self.rnn_read_replacement(node) if node in self.rnn_reads else None
            if found is not None:
                replacements[node] = found
        if isinstance(app.constructor, cst.Call):
            for arg in app.constructor.args:
                value = arg.value
                role = self.role(value) if isinstance(value, cst.Call) else None
                if role in ("initializer", "regularizer"):
                    replacements[value] = self.translate(role, value)
                if arg.keyword is not None and arg.keyword.value.endswith("_regularizer") and not _is_none(value):
                    self.regularizer_under_strategy(arg)
        return _emit.replace_in(app.constructor, replacements)

    def scoped_initializer(self, app: _LayerApp, initializer: cst.BaseExpression) -> cst.Call:
        """The layer given its scope's initializer where TF1 gave it (a kernel made without
        one); a layer of another kind, whose variables e2k cannot tell apart, is refused."""
        kind = _emit.code(app.constructor.func).rsplit(".", 1)[-1]
        if kind not in KERNEL_LAYERS:
            if kind in SCOPE_UNAFFECTED:
                return app.constructor
            self.refuse(app.call, f"a `{kind}` inside `variable_scope(initializer=...)`: e2k carries the scope's "
                                  "initializer to Dense and convolution kernels only")
        given = next((a for a in app.constructor.args if a.keyword is not None and a.keyword.value == "kernel_initializer"), None)
        if given is not None and not _is_none(given.value):
            return app.constructor
        role = self.role(initializer) if isinstance(initializer, cst.Call) else None
        value = self.translate(role, initializer) if role == "initializer" else initializer
        args = [a for a in app.constructor.args if a is not given]
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        if self.plan is not None:
            self.plan.fixed(app.call, "E2K302", "the initializer of its `variable_scope` -> kernel_initializer")
        return app.constructor.with_changes(args=[*args, _emit.keyword_arg("kernel_initializer", value)])

    def regularizer_under_strategy(self, arg: cst.Arg) -> None:
        """TF1 builds a layer's penalty once, in replica 0: under MirroredStrategy only that
        replica's gradient carries it, so on N replicas it acted N times weaker than written
        (verified: the other replicas' gradient of the penalty is None). Keras applies it as
        written; say so where the Estimator trained under a strategy."""
        unit = self.plan.unit if self.plan is not None else None
        if unit is None or unit.config_value("train_distribute") is None or getattr(self, "_told_regularizer", False):
            return
        self._told_regularizer = True
        self.leftover(
            arg.value,  # an original node: the reported position is the user's
            "under MirroredStrategy the Estimator applied layer penalties' gradients on one replica only "
            "(N times weaker on N replicas, while its reported loss held them in full); Keras applies them as "
            "written: compare with e2k parity and divide the penalty by the replica count if you need the old training",
            "E2K305",
        )

    def rewrite(self, node: cst.CSTNode) -> cst.CSTNode:
        """A forward or post-model node, as it reads inside the Keras model's methods."""
        respelled = dict(tf2_respellings(self.ctx, node, self.tf))
        return node.visit(_ForwardRewriter(self, respelled))

    def dropped_note(self, original: cst.CSTNode, line: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        """``net = tf.layers.dropout(net, rate=0.1)`` that never dropped, now ``net = net``: it
        goes (``_without_self_assignments``), and a comment where it stood says so."""
        if not _self_assignment(line):
            return line
        dropped = [n for n in _walk(original) if isinstance(n, cst.Call) and getattr(self.layer_apps.get(n), "drop", False)]
        if not dropped:
            return line
        note = cst.EmptyLine(comment=cst.Comment(f"# {_emit.code(dropped[0])} left out: it never ran in the Estimator (no training=)"))
        return line.with_changes(leading_lines=[*line.leading_lines, note])

    def layer_class(self, block, forward: list[_Def], output) -> cst.ClassDef:
        """A block (``_modelfn_blocks``) as a Keras layer class: its settings the constructor's
        parameters (with their defaults), its input and training flag the call's."""
        params = {p.name.value: p for p in block.fn.params.params}
        init = [_emit.code(params[name]).strip().rstrip(",").strip() for name in block.config]
        klass, _ = self.model_class(block.class_name, forward, output, None, base=f"{self.tf}.keras.layers.Layer",
                                    inputs=block.input, init_params=init)
        klass = _call_returns_directly(klass)
        return _with_docstring(klass, block.fn).with_changes(leading_lines=[])

    def model_class(self, class_name: str, forward: list[_Def], output, prediction, base: str | None = None,
                    inputs: str = "features", init_params: list[str] | None = None):
        self._output_node = output
        self._build_reads: set[str] = set()  # settings a weight made in build() reads
        init_defs, forward = self.split_init(forward)
        init_defs, build_defs = self.split_build(init_defs, inputs) if base is not None else (init_defs, [])
        self._init_defs = init_defs
        post = prediction[0] if prediction is not None else []
        export = getattr(self, "export_output", None)
        post = [*post, *(d for d in export[0] if d not in post)] if export is not None else post
        call_arguments = self._call_arguments([*forward, *post], [output] + ([prediction[1]] if prediction else []))
        self.call_arguments = call_arguments  # the rewriter reads them as `self.<name>`
        body: list[cst.BaseStatement] = []
        emitted_loops = set()
        for d in forward:
            if d.name in self.layer_objects and d.value is self.layer_objects[d.name].value:
                continue  # the layer object itself lives in __init__
            if d.name in self.weight_names:
                continue  # a weight: made in __init__, read as `self.<attr>`
            if d.small in self.rnn_runs:  # `outputs, state = tf.nn.dynamic_rnn(...)`: the Keras layers
                if id(d.small) not in emitted_loops:
                    emitted_loops.add(id(d.small))
                    lines = self.rnn_lines(self.rnn_runs[d.small], self.rewrite)
                    body.extend(self.fit(_line(small, d.line, d.small, comments=i == 0), 2) for i, small in enumerate(lines))
                continue
            if isinstance(d.small, cst.For):
                if id(d.small) not in emitted_loops:
                    emitted_loops.add(id(d.small))
                    body.append(self.rewrite_loop(d.small))
                continue
            if isinstance(d.small, cst.If):
                if id(d.small) not in emitted_loops:  # one def per name it assigns
                    emitted_loops.add(id(d.small))
                    body.append(self.rewrite(d.small))
                continue
            new = self.rewrite(d.small)
            line = self.dropped_note(d.small, _line(new, d.line, d.small))
            if d.small in self.twinned:
                line = line.with_changes(leading_lines=[*line.leading_lines, *self.inference_comment(d)])
            if any(self.helper_calls[c].switches for c in iter_calls(d.value) if c in self.helper_calls):
                line = self.fit(line, 2)  # the switch's two values make it long
            body.append(line)
        body.append(_emit.statement("return {o}", o=self.rewrite(output)))
        body, _ = _without_self_assignments(body)
        self._call = (inputs, body)  # predict_step runs it itself where it reads inside the model
        if body and isinstance(body[0], cst.SimpleStatementLine) and all(line.comment is None for line in body[0].leading_lines):
            body[0] = body[0].with_changes(leading_lines=[])  # what stood above it went to __init__
        init_reads = self._init_arguments()
        class_arguments = [name for name in self.arguments if name in init_reads or name in call_arguments]
        # A layer class's `name` setting (the scope of TF1's variables) is the Keras layer's name.
        named = base is not None and init_params is not None and "name" in self.arguments
        init = [_emit.statement("super().__init__(name=name)" if named else "super().__init__()")]
        for name in call_arguments:
            init.append(_emit.statement(f"self.{name} = {name}"))
        columns = self.column_methods(inputs) if base is None and self.column_input is not None else None
        if columns is None and base is None and self.label_table is not None:
            columns = self.label_methods()
        if columns is not None:
            # The columns' arguments the factory's parameters give (``dimension=embedding_size``).
            read, kept = (self.column_input.reader.arguments_read, columns[2]) if self.column_input else ((), ())
            init += [_emit.statement(f"self.{n} = {n}") for n in self.arguments if n in kept and n not in call_arguments]
            init += columns[0]
            class_arguments = [n for n in self.arguments if n in class_arguments or n in read]
        for d in init_defs:
            role = self.role(d.value) if isinstance(d.value, cst.Call) and isinstance(d.small, cst.Assign) else None
            if role in ("initializer", "regularizer"):  # `weights_init = tf.truncated_normal_initializer(...)`
                init.append(_line(d.small.with_changes(value=self.translate(role, d.value)), d.line, d.small))
                continue
            init.append(_line(self.rewrite_init(d.small), d.line, d.small))
        created = set()
        built: list[cst.BaseStatement] = []
        # `[inputs.shape[-1], units]`: a layer class's weights are made when Keras builds it, from
        # its input's shape (all of them then, in the order TF1 made them)
        shape_names = {inputs, *(d.name for d in build_defs)}
        in_build = base is not None and any(
            app.weight and not app.drop and any(n.value in shape_names for n in self.names_read(app.constructor))
            for app in self.layer_apps.values())
        if build_defs:
            if not in_build:
                self.refuse(build_defs[0].small, f"a value computed from `{inputs}` configures a layer, which Keras makes "
                                                 "before it sees its input; e2k makes weights from the input's shape only")
            built = [self.fit(_line(self.built_value(d.small, inputs), d.line, d.small), 2) for d in build_defs]
        for app in self.creation_order():
            if app.drop or app.attr in created:
                continue
            created.add(app.attr)
            if app.weight and in_build:
                built.append(self.fit(_emit.statement("self.{attr} = {ctor}", attr=app.attr,
                                                      ctor=self.built_weight(app, inputs)), 2))
                continue
            if app.helper_loop:
                init.append(self.fit(self.helper_loop_layers(app), 2))
                created.add(app.attr)  # now the list's, as are the other layers of its tuple
                continue
            constructor = self.constructor(app)
            if app.loop is not None:
                constructor = _emit.expr(
                    "[{ctor} for {target} in {iterable}]",
                    ctor=constructor,
                    target=app.loop.target,
                    iterable=self.rewrite_init(app.loop.iter),
                )
            line = self.fit(_emit.statement("self.{attr} = {ctor}", attr=app.attr, ctor=constructor), 2)
            if app.note is not None:
                line = line.with_changes(leading_lines=[_emit.comment_line(app.note)])
            init.append(line)
        if init_params is not None:
            class_arguments = init_params
        for name in sorted(self._build_reads - set(call_arguments)):
            init.insert(1 + len(call_arguments), _emit.statement(f"self.{name} = {name}"))
        trains = base is None or any(isinstance(n, cst.Name) and n.value == "training" for stmt in body for n in _walk(stmt))
        methods = [_function("__init__", ", ".join(["self", *class_arguments]), init)]
        if columns is not None:
            methods += columns[1]
        if built:
            methods.append(_function("build", "self, input_shape", built, blank_before=True))
        methods.append(
            _function("call", f"self, {inputs}, training=False" if trains else f"self, {inputs}", body, blank_before=True))
        for helper in self.helpers.values():
            if not helper.inline:  # written out at each call instead
                methods.append(self.helper_method(helper))
        if prediction is not None:
            lines = [_emit.statement("features, _, _ = {tf}.keras.utils.unpack_x_y_sample_weight(data)", tf=self.tf),
                     *self.from_outputs(*prediction)]
            methods.append(_function("predict_step", "self, data", lines, blank_before=True))
        if export is not None:
            # The export's PredictOutput, which is not the predictions: its serving function calls this.
            methods.append(_function("serving_outputs", "self, features", self.from_outputs(*export), blank_before=True))
            if self.plan is not None:
                self.plan.export_method = "serving_outputs"
        served = export is not None or prediction is not None
        if columns is not None and self.plan is not None and served and self.exported():
            methods.append(self.serve_method(export is not None, prediction))
        klass = _emit.statement(f"class {class_name}({base or self.tf + '.keras.Model'}):\n    pass")
        return klass.with_changes(body=cst.IndentedBlock(body=methods)), class_arguments

    def serve_method(self, exported_outputs: bool, prediction) -> cst.FunctionDef:
        """``serve(features)``: what the export serves for the raw features a serving function
        gets, preprocessed first as ``dataset.map(model.preprocess)`` did for training (an
        input_layer of categorical columns); the serving functions call it."""
        from estimator2keras._canned import DENSE_FEATURES

        tf = self.tf
        dense = self.plan.add_helper("dense_features", lambda name: _emit.statements(DENSE_FEATURES, name=name, tf=tf))
        method = self.plan.export_method if exported_outputs else "predict_step"
        served = f"self.{method}(self.preprocess({dense}(features)))"
        if not exported_outputs and not isinstance(prediction[1], cst.Dict):
            served = f'{{"output": {served}}}'  # the export named its one tensor "output"
        doc = ('"""What the export serves: the raw features (parsed tf.Examples: SparseTensors made dense,\n'
               f'{self.ctx.module.default_indent * 2}as the feature columns read them) preprocessed as in tf.data."""')
        self.plan.export_method = "serve"
        return _function("serve", "self, features", [_emit.statement(doc), _emit.statement(f"return {served}")],
                         blank_before=True)

    def column_methods(self, features: str) -> tuple[list[cst.BaseStatement], list[cst.FunctionDef], set[str]]:
        """An input_layer of categorical columns (``read_column_input``): the lines of
        ``__init__`` making the preprocessing and embedding layers, and the methods
        ``preprocess`` (raw features -> the columns' inputs, and the features the model_fn
        reads by key, mapped over the datasets) and ``input_layer`` (those inputs -> TF1's
        dense input), written as a canned DNN's (``_column_writer``)."""
        from estimator2keras._column_writer import ID_CAST_COMMENT, ColumnsWriter, _packed, _reindent
        from estimator2keras._feature_columns import assign_names

        column_input = self.column_input
        writer = ColumnsWriter(self.plan.ctx, self.tf, column_input.reader, column_input.columns)
        # Attributes of the model and keys of the preprocessed features: none may be another's.
        taken = self.attrs_taken | set(self.call_arguments) | KERAS_MODEL_ATTRIBUTES | set(column_input.keys) | {
            "preprocess", "input_layer"}
        assign_names(writer.columns, taken | writer.taken())
        writer.in_init = True
        init = writer.layer_lines() + writer.embedding_lines(column_input.columns)
        writer.in_init = False
        if self.label_table is not None:
            init += self.label_init_lines()
        made = {line.split(" = ", 1)[0][len("self."):] for line in init if line.startswith("self.")}
        clash = sorted(made & taken)
        if clash:
            self.refuse(column_input.call, f"the preprocessing of this input_layer would be `self.{clash[0]}`, which "
                                           "the model has already")
        preprocess = writer.preprocess_lines()
        entries = [f'"{v}": {v}' for v in writer.inputs] + [f'"{k}": features["{k}"]' for k in column_input.keys]
        preprocess += _packed("inputs = {", entries, "}")
        if self.label_table is not None:
            preprocess += self.label_preprocess_lines("inputs")
        else:
            preprocess.append("return inputs if labels is None else (inputs, labels)")
        # Each input read from what `preprocess` made, an id cast back to integers (ID_CAST_COMMENT).
        ids = writer.id_inputs()
        layer = [f'{v} = {features}["{v}"]' for v in writer.inputs if v not in ids]
        layer += [ID_CAST_COMMENT] if ids else []
        layer += [f'{v} = {self.tf}.cast({features}["{v}"], {self.tf}.int64)' for v in writer.inputs if v in ids]
        layer += writer.concat_lines(column_input.columns, "return ")
        text = "\n".join([
            "class Methods:",
            "    def preprocess(self, features, labels=None):",
            '        """What the Estimator\'s feature columns computed from the raw features: floats, and',
            "        ids as the columns numbered them. Run in tf.data (`dataset.map(model.preprocess)`),",
            '        so that no string reaches the replicas."""',
            *(f"        {line}" for line in preprocess),
            "",
            f"    def input_layer(self, {features}):",
            '        """tf.feature_column.input_layer (TensorFlow 2 has none) of what `preprocess` made:',
            '        the columns sorted by name, ids one-hot or embedded, concatenated."""',
            *(f"        {line}" for line in layer),
        ])
        klass = cst.parse_statement(_reindent(text + "\n", self.ctx.module.default_indent))
        methods = [m.with_changes(leading_lines=[_emit.blank_line()]) for m in klass.body.body]
        module = cst.parse_module("\n".join(init) + "\n")
        init = [self.fit(line, 2) if isinstance(line, cst.SimpleStatementLine) else line for line in module.body]
        return init, methods, writer.attributes_read

    def label_methods(self) -> tuple[list[cst.BaseStatement], list[cst.FunctionDef]]:
        """Labels a table numbered in the model_fn, with no input_layer of categorical columns:
        the lookup layer in ``__init__`` and a ``preprocess`` numbering the labels alone."""
        from estimator2keras._column_writer import _reindent

        clash = sorted({"preprocess", "label_lookup", "label_oov"} & (self.attrs_taken | set(self.call_arguments)))
        if clash:
            self.refuse(self.label_table.call, f"the labels' lookup would be `self.{clash[0]}`, which the model has "
                                               "already")
        text = "\n".join([
            "class Methods:",
            "    def preprocess(self, features, labels=None):",
            '        """The labels as the model_fn\'s lookup table numbered them, in tf.data',
            '        (`dataset.map(model.preprocess)`), so that no string reaches the replicas."""',
            *(f"        {line}" for line in self.label_preprocess_lines("features")),
        ])
        klass = cst.parse_statement(_reindent(text + "\n", self.ctx.module.default_indent))
        methods = [m.with_changes(leading_lines=[_emit.blank_line()]) for m in klass.body.body]
        module = cst.parse_module("\n".join(self.label_init_lines()) + "\n")
        return [self.fit(line, 2) for line in module.body], methods

    def from_outputs(self, post: list[_Def], value: cst.BaseExpression) -> list[cst.BaseStatement]:
        """The model run on ``features`` (inference), the statements computing ``value`` from
        its output, and ``return value``."""
        read = {n.value for node in [*(d.value for d in post), value] for n in self.names_read(node)}
        names = [n for n in [self.output_name, *self.inference_passes] if n is not None and n in read]
        output_name = " = ".join(names or [self.output_name or "outputs"])
        lines = self.forward_read(read, names or [self.output_name or "outputs"]) or [
            _emit.statement(f"{output_name} = self(features, training=False)")]
        for d in post:  # with the user's comment on it (and the blank line above that), as written
            line = _line(self.rewrite(d.small), d.line, d.small)
            if not any(empty.comment for empty in getattr(line, "leading_lines", ())):
                line = line.with_changes(leading_lines=[])
            lines.append(line)
        lines.append(_emit.statement("return {v}", v=self.rewrite(value)))
        return lines

    def forward_read(self, read: set[str], outputs: list[str]) -> list[cst.BaseStatement]:
        """Where the predictions read a tensor inside the model (``"hidden": hidden``), the
        statements of ``call`` run for inference (``training`` False), its output bound to
        ``outputs``; none where they read the model's output only."""
        inside = {d.name for d in self.defs if d.small in self.forward_smalls} - {*outputs, *self.inference_passes}
        inside = {name for name in inside & read if name not in self.layer_objects and name not in self.weight_names}
        if not inside:
            return []
        first = sorted(inside)[0]
        inputs, body = getattr(self, "_call", (None, []))
        if inputs != "features" or self.inference_passes or not body:
            self.refuse(self.latest_def(first, len(self.order)).small,
                        f"`{first}` is inside the model; e2k predicts from the model's output only here")
        returned = body[-1].body[0].value
        lines = [line.visit(_InferenceOnly()) for line in body[:-1]]
        if not (isinstance(returned, cst.Name) and [returned.value] == outputs):
            lines.append(_emit.statement(f"{' = '.join(outputs)} = {{v}}", v=returned.visit(_InferenceOnly())))
        return lines

    def split_build(self, init_defs: list[_Def], inputs: str) -> tuple[list[_Def], list[_Def]]:
        """Of the values a layer class's constructors read, those computed from its input
        (``n_in = x.get_shape()[-1]``): made in ``build``, from the input's shape."""
        shaped: set[str] = {inputs}
        build = []
        for d in init_defs:
            if any(n.value in shaped for n in self.names_read(d.value)):
                if not isinstance(d.small, cst.Assign):
                    self.refuse(d.small, f"this statement computes from `{inputs}` what a layer is made with; e2k carries "
                                         "plain assignments to build()")
                build.append(d)
                shaped.add(d.name)
        for app in self.layer_apps.values():
            if not app.weight and not app.drop and any(n.value in shaped - {inputs} for n in self.names_read(app.constructor)):
                self.refuse(app.call, f"a layer is made with a value computed from `{inputs}`, which Keras makes before "
                                      "it sees its input; e2k makes weights from the input's shape only")
        return [d for d in init_defs if d not in build], build

    def built_value(self, node: cst.CSTNode, inputs: str) -> cst.CSTNode:
        """A statement of ``build`` (``n_in = x.get_shape()[-1]`` -> ``n_in = input_shape[-1]``)."""
        self._check_build_reads(node, inputs)
        replaced = _emit.replace_in(node, dict(tf2_respellings(self.ctx, node, self.tf)))
        return replaced.visit(_InputShape(self, inputs))

    def _check_build_reads(self, read_in: cst.CSTNode, inputs: str) -> None:
        """What code of ``build`` reads: the input through its static shape only, and settings
        (kept as ``self.<setting>``) that are not a Keras layer's own attributes."""
        from estimator2keras._modelfn import _KERAS_LAYER_ATTRIBUTES

        shape_of = _InputShape(self, inputs)
        for node in self.names_read(read_in):
            if node.value == inputs and not shape_of.reads_shape(node):
                self.refuse(node, f"the weight's shape reads `{inputs}` otherwise than its static shape "
                                  f"(`{inputs}.shape`), which Keras's build(input_shape) cannot give")
            elif node.value in self.arguments:
                if node.value in _KERAS_LAYER_ATTRIBUTES:
                    self.refuse(node, f"the weight's shape reads the setting `{node.value}`, which as an attribute of a "
                                      f"Keras layer (`self.{node.value}`) is Keras's own: rename the parameter")
                self._build_reads.add(node.value)

    def built_weight(self, app: _LayerApp, inputs: str) -> cst.BaseExpression:
        """A block's weight whose shape reads its input (``[inputs.shape[-1], units]``), as
        ``build`` makes it: the input's static shape is ``input_shape``, its settings
        ``self.<setting>``. Any other use of the input is refused: it is no shape."""
        constructor = self.constructor(app)
        self._check_build_reads(app.constructor, inputs)
        return constructor.visit(_InputShape(self, inputs))

    def helper_loop_layers(self, first: _LayerApp) -> cst.SimpleStatementLine:
        """``self.build_block_layers = [(Dense(units), BatchNormalization()) for units in
        params['hidden']]``: one tuple of a looped helper's layers per iteration, made in the
        order TF1 made them (iteration by iteration)."""
        helper = next(h for h in self.helpers.values() if h.loop is first.loop and self._in_helper(first, h))
        apps = [app for app in self.creation_order() if app.helper_loop and app.loop is helper.loop and not app.drop
                and self._in_helper(app, helper)]
        constructors = [self.constructor(app) for app in apps]
        constructors = [_emit.one_line_call(c, c.args) if isinstance(c, cst.Call) else c for c in constructors]
        element = constructors[0] if len(constructors) == 1 else cst.Tuple([cst.Element(c) for c in constructors])
        if len(constructors) > 1 and 12 + len(_emit.code(element)) > _emit.MAX_LINE:  # one layer per line
            hanging = cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), indent=True,
                                                  last_line=cst.SimpleWhitespace("     "))
            element = cst.Tuple([cst.Element(c, comma=cst.Comma(whitespace_after=hanging) if i < len(constructors) - 1
                                             else cst.MaybeSentinel.DEFAULT) for i, c in enumerate(constructors)])
        value = _emit.expr("[{ctor} for {target} in {iterable}]", ctor=element, target=helper.loop.target,
                           iterable=self.rewrite_init(helper.loop.iter))
        for app in apps:
            app.attr = helper.loop_attr
        line = _emit.statement("self.{attr} = {value}", attr=helper.loop_attr, value=value)
        notes = list(dict.fromkeys(app.note for app in apps if app.note is not None))
        return line.with_changes(leading_lines=[_emit.comment_line(n) for n in notes]) if notes else line

    def inference_comment(self, d: _Def) -> list[cst.EmptyLine]:
        """Above the training pass in `call`: where its inference pass went, and what evaluate
        computes otherwise than the Estimator did."""
        twins = ", ".join(f"`{name}`" for name in self.inference_passes)
        text = [f"# fit runs this pass with training=True; evaluate and predict with training=False ({twins})."]
        if self.eval_loss_in_training and self.modes.paths[EVAL].ret is not None:
            text.append(f"# The Estimator's evaluation loss used `{d.name}` (training=True); Keras's uses training=False.")
            if self.plan is not None:
                self.plan.fixed(d.small, "E2K302", f"the Estimator's EVAL loss came from `{d.name}`, computed with training=True "
                                                   "(dropout and batch normalization as in training); Keras's evaluate computes the "
                                                   "loss with training=False, like the metrics: evaluation loss values differ")
        return [cst.EmptyLine(indent=True, comment=cst.Comment(t)) for t in text]

    def creation_order(self) -> list[_LayerApp]:
        """The layers in the order the forward pass first applies them (as TF1 created their
        variables): a helper's where the model_fn first calls it, in the helper's own order."""
        from libcst.metadata import PositionProvider

        def done(node):  # where a call ends: nested calls run (and made their layers) first
            try:
                found = self.ctx.get_metadata(PositionProvider, node)
            except KeyError:
                return (0, 0)
            return (found.end.line, found.end.column)

        first_call = {fn: min(done(call) for call, _ in helper.calls) for fn, helper in self.helpers.items() if helper.calls}

        def key(item):
            index, (site, app) = item
            if isinstance(site, tuple):  # a helper written out at a call: that call's place
                return (done(site[0]), done(app.call), index)
            node = self.ctx.parent(app.call)
            while node is not None and not (isinstance(node, cst.FunctionDef) and node in first_call):
                node = self.ctx.parent(node)
            if node is not None:  # in a helper's method: where the model_fn first calls it
                return (first_call[node], done(app.call), index)
            return (done(app.call), (0, 0), index)

        return [app for _, (_, app) in sorted(enumerate(self.layer_apps.items()), key=key)]

    def helper_method(self, helper) -> cst.FunctionDef:
        """``def conv_net(x_dict, n_classes, dropout, reuse, is_training)`` -> a method
        ``conv_net(self, x_dict, training=False)`` whose layers the model made in __init__."""
        params = ["self", *helper.forward, *self.loop_items(helper)]
        params += ["training=False"] if helper.training or helper.tests_mode or helper.switches else []
        respelled = {}
        for stmt in helper.body:
            respelled.update(tf2_respellings(self.ctx, stmt, self.tf))
        rewriter = _ForwardRewriter(self, respelled, in_helper=helper)
        weights = {app.attr for app in self.layer_apps.values() if app.weight}
        body, _ = _without_self_assignments(_weight_aliases_inlined([stmt.visit(rewriter) for stmt in helper.body], weights))
        doc = _docstring(helper.fn)
        if doc is not None and body and body[0] is not doc and not _docstring_line(body[0]):
            body.insert(0, doc)
        return _function(helper.method, ", ".join(params), body, blank_before=True)

    def helper_call(self, original: cst.Call, inputs: list[cst.BaseExpression]) -> cst.Call:
        """``conv_net(features, num_classes, dropout, reuse=False, is_training=True)`` ->
        ``self.conv_net(features, training=training)``."""
        helper = self.helper_calls[original]
        args = [cst.Arg(value) for value in inputs] + [cst.Arg(cst.Name(item)) for item in self.loop_items(helper)]
        training = self.helper_training(original, helper)
        if training is not None:
            args.append(_emit.keyword_arg("training", cst.Name(training)))
        return cst.Call(_emit.expr(f"self.{helper.method}"), args=_emit.call_args(args))

    def loop_items(self, helper) -> list[str]:
        """A helper called in a loop: the names of one iteration's layers, in the order it makes them."""
        if helper.loop is None:
            return []
        return [app.item for app in self.creation_order() if app.helper_loop and app.loop is helper.loop and not app.drop
                and self._in_helper(app, helper)]

    def _in_helper(self, app, helper) -> bool:
        node = self.ctx.parent(app.call)
        while node is not None and node is not helper.fn:
            node = self.ctx.parent(node)
        return node is helper.fn

    def inline_call(self, site: cst.Call, inputs: list[cst.BaseExpression]) -> cst.BaseExpression:
        """``batch_norm_cnv(Y1)`` -> ``self.batch_normalization_1(Y1, training=training)``: the
        helper's one expression, with this call's layers and values."""
        helper = self.helper_calls[site]
        expr = self._one_expression(helper)
        apps = {key[1]: app for key, app in self.layer_apps.items() if isinstance(key, tuple) and key[0] is site}
        respelled = dict(tf2_respellings(self.ctx, expr, self.tf))
        new = expr.visit(_InlineRewriter(self, apps, dict(zip(helper.forward, inputs)), respelled))
        return new.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) if _needs_parentheses(new) else new

    def rewrite_loop(self, loop: cst.For) -> cst.For:
        """``for units in params[...]: net = dense(net, units)`` -> ``for dense in self.dense_layers: net = dense(net)``."""
        apps = [app for app in self.creation_order() if app.loop is loop and not app.drop]  # `for dense, dropout in ...`
        if not apps:
            self.refuse(loop, "this loop applies no layer; e2k converts loops that build layers")
        targets = {n.value for n in _walk(loop.target) if isinstance(n, cst.Name)}
        inside = {id(n) for app in apps for n in _walk(app.call)} - {
            id(n) for app in apps if app.inputs is not None for n in _walk(app.inputs)}
        helpers = [h for h in self.helpers.values() if h.loop is loop]
        for helper in helpers:  # what configured the helper's layers: in __init__'s list
            for call, bound in helper.calls:
                inside |= {id(n) for p, value in bound.items() if p not in helper.forward and isinstance(value, cst.CSTNode)
                           for n in _walk(value)}
        helpers = [h for h in helpers if not h.inline]  # written out in the loop: its layers are the loop's
        if helpers:
            if len(helpers) > 1 or any(not app.helper_loop for app in apps):
                self.refuse(loop, "this loop applies layers of its own or of several helpers; e2k converts a loop whose "
                                  "layers one helper makes")
            for node in _walk(loop.body):
                if isinstance(node, cst.Name) and node.value in targets and id(node) not in inside and self._is_read(node):
                    self.refuse(node, "the loop variable is used outside the layers' arguments, which e2k does not convert")
            items = self.loop_items(helpers[0])
            header = cst.Tuple([cst.Element(cst.Name(i)) for i in items], lpar=[], rpar=[]) if len(items) > 1 else cst.Name(items[0])
            body = self.rewrite(loop.body)
            if isinstance(body, cst.IndentedBlock):  # the call gives it one iteration's layers: long
                body = body.with_changes(body=[self.fit(line, 3) if isinstance(line, cst.SimpleStatementLine) else line
                                               for line in body.body])
            return loop.with_changes(target=header, iter=_emit.expr(f"self.{helpers[0].loop_attr}"), body=body)
        for node in _walk(loop.body):
            if isinstance(node, cst.Name) and node.value in targets and id(node) not in inside and self._is_read(node):
                self.refuse(node, "the loop variable is used outside the layers' arguments, which e2k does not convert")
        body = self.rewrite(loop.body)
        if len(apps) == 1:
            header = _emit.expr("{item}", item=apps[0].item)
            iterable = _emit.expr(f"self.{apps[0].attr}")
        else:
            header = cst.Tuple([cst.Element(cst.Name(app.item)) for app in apps], lpar=[], rpar=[])
            iterable = _emit.expr("zip({attrs})", attrs=", ".join(f"self.{app.attr}" for app in apps))
        return loop.with_changes(target=header, iter=iterable, body=body)

    def split_init(self, forward: list[_Def]) -> tuple[list[_Def], list[_Def]]:
        """Values the layers' constructors read (``l2 = tf.keras.regularizers.l2(...)`` then
        ``kernel_regularizer=l2``) belong in __init__; the rest of the forward pass in call."""
        ctor_reads = [n for app in self.layer_apps.values() if not app.drop for n in self.names_read(app.constructor)]
        # `for units in hidden:` making layers: __init__ makes them over the same values.
        loops = {id(app.loop): app.loop for app in self.layer_apps.values() if getattr(app, "loop", None) is not None}
        iter_names = {id(n) for loop in loops.values() for n in self.names_read(loop.iter)}
        ctor_reads += [n for loop in loops.values() for n in self.names_read(loop.iter)]
        init: dict[int, _Def] = {}
        pending = [(n, len(self.order)) for n in ctor_reads]
        while pending:
            name, before = pending.pop()
            d = self.latest_def(name.value, before)
            if d is None or d.index in init or name.value in self.layer_objects:
                continue
            init[d.index] = d
            pending.extend((n, d.index) for n in self.names_read(d.value))
        for d in init.values():
            if isinstance(d.small, cst.For):
                self.refuse(d.small, "a loop computes a value the layers' constructors read")
            if isinstance(d.small, cst.If):
                self.refuse(d.small, "an `if` computes a value the layers' constructors read")
            for n in self.names_read(d.value):
                if n.value in ("features", "labels", "mode"):
                    self.refuse(n, "a layer's constructor reads a value computed from the inputs")
        call_reads = {
            n.value for d in forward if d.index not in init and d.name not in self.layer_objects
            for n in self.names_read(d.value)  # a layer object (`net = Sequential(layers)`) is made in __init__
            if not self._inside_constructor(n) and id(n) not in iter_names  # the loop in call runs over the layers
        }
        call_reads |= {n.value for n in self.names_read(self._output_node)} if self._output_node is not None else set()
        call = [d for d in forward if d.index not in init or d.name in call_reads]
        return [init[i] for i in sorted(init)], call

    def _init_arguments(self) -> set[str]:
        """The argument names the layers' constructors (and the values they read) need."""
        nodes = [
            part
            for app in self.layer_apps.values()
            if not app.drop
            for part in ((app.constructor, app.loop.iter) if app.loop is not None else (app.constructor,))
        ] + [d.value for d in getattr(self, "_init_defs", [])]
        return {n.value for node in nodes for n in _walk(node) if isinstance(n, cst.Name) and n.value in self.arguments}

    def rewrite_init(self, node: cst.CSTNode) -> cst.CSTNode:
        """Code for __init__ (a loop's iterable): TF2 names; `params` is the argument there."""
        return _emit.replace_in(node, dict(tf2_respellings(self.ctx, node, self.tf)))

    def builder(self, name, model, builder_defs, optimizer, loss: LossConversion, metrics, docstring=True):
        """The function building and compiling the model; the model_fn's docstring is its
        where no class of the model holds it."""
        body: list[cst.BaseStatement] = []
        doc = _docstring(self.fn) if docstring else None
        if doc is not None:
            body.append(doc)
        body.append(model)
        for d in builder_defs:
            new = self.translate_builder_def(d)
            body.append(self.fit(_line(new, d.line, d.small), 1))
        compile_args = [_emit.keyword_arg("optimizer", optimizer)]
        if loss.keras_loss is not None:  # None: the model computes its own (`compute_loss`)
            compile_args.append(_emit.keyword_arg("loss", loss.keras_loss))

        def compiled(metrics_value):
            args = [*compile_args, _emit.keyword_arg("metrics", metrics_value)] if metrics else compile_args
            call = cst.Call(cst.Attribute(cst.Name("model"), cst.Name("compile")), args=_emit.call_args(args))
            return _emit.statement("{c}", c=call)

        statement = compiled(cst.List(_comma_separated([cst.Element(m) for m in metrics])))
        fitted = self.fit(statement, 1)
        if fitted is not statement and len(metrics) > 1:
            # Laid out one argument per line: the metrics one per line too, a level deeper.
            call = fitted.body[0].value
            args = [*call.args[:-1], call.args[-1].with_changes(value=_emit.vertical_list(metrics, indent="        "))]
            fitted = fitted.with_changes(body=[fitted.body[0].with_changes(value=call.with_changes(args=args))])
        body.append(fitted)
        body.append(_emit.statement("return model"))
        read = {n.value for stmt in body for n in _walk(stmt) if isinstance(n, cst.Name)}
        arguments = [a for a in self.arguments if a in read]
        fn = _emit.statement(f"def {name}({', '.join(arguments)}):\n    pass")
        return fn.with_changes(body=cst.IndentedBlock(body=body)), arguments

    def fit(self, statement: cst.SimpleStatementLine, depth: int) -> cst.SimpleStatementLine:
        """Wrap a long emitted line, counting the depth of the model_fn itself."""
        base = 0
        node = self.ctx.parent(self.fn)
        while node is not None:
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                base += 1
            node = self.ctx.parent(node)
        return _emit.fit_line(statement, depth + base, self.ctx.module.default_indent)

    def translate_builder_def(self, d: _Def) -> cst.BaseSmallStatement:
        value = d.value
        if d.index in self.hand_schedule_defs:
            from estimator2keras._hand_schedule import schedule

            return d.small.with_changes(value=schedule(self, value, d.index))
        role = self.role(value) if isinstance(value, cst.Call) else None
        if role == "optimizer":
            from estimator2keras._hand_schedule import translated_optimizer

            self.check_momentum_schedule(value, d.index)
            optimizer = translated_optimizer(self, value, d.index)
            if getattr(self, "clipping", None) is not None:
                keyword, threshold = self.clipping
                optimizer = optimizer.with_changes(args=_emit.call_args([*optimizer.args, _emit.keyword_arg(keyword, threshold)]))
            return d.small.with_changes(value=optimizer)
        if role == "schedule":
            schedule: ScheduleConversion = self.translate("schedule", value)
            if schedule.global_step is not None and not self.is_global_step(schedule.global_step, d.index):
                self.refuse(schedule.global_step, "the learning-rate decay does not read the global step")
            return d.small.with_changes(value=schedule.keras_schedule)
        respelled = dict(tf2_respellings(self.ctx, d.small, self.tf))
        return _emit.replace_in(d.small, respelled)


#: Keras losses that average each example's values over the last axis.
LAST_AXIS_LOSSES = frozenset({
    "MeanSquaredError", "MeanAbsoluteError", "MeanAbsolutePercentageError", "MeanSquaredLogarithmicError", "Huber",
    "LogCosh", "BinaryCrossentropy", "BinaryFocalCrossentropy", "Hinge", "SquaredHinge", "Poisson", "KLDivergence",
})
#: Keras layers whose kernel TF1 made without an initializer of its own (tf.layers' default
#: kernel_initializer=None): a variable_scope's initializer reached it.
KERNEL_LAYERS = frozenset({"Dense", "Conv1D", "Conv2D", "Conv3D", "Conv2DTranspose", "Conv3DTranspose"})
#: Layers a scope's initializer does not reach: no variables, or (tf.layers' batch
#: normalization) an initializer of their own for each.
SCOPE_UNAFFECTED = frozenset({
    "BatchNormalization", "Dropout", "Flatten", "MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "AveragePooling1D", "AveragePooling2D",
    "AveragePooling3D", "Activation", "Reshape",
})
#: TF1's layers, whose kernels default to no initializer (the scope's): Keras layers and
#: tf.contrib's (xavier by default) set their own.
TF1_LAYERS = ("layers.", "compat.v1.layers.")
#: variable_scope settings that change the variables made inside it, besides the initializer.
SCOPE_SETTINGS = frozenset({"regularizer", "partitioner", "custom_getter", "dtype", "constraint"})


#: Ops taking integer ids from the features: API path -> (position, keyword) of the ids.
ID_ARGUMENTS = {
    "nn.embedding_lookup": (1, "ids"), "compat.v1.nn.embedding_lookup": (1, "ids"),
    "gather": (1, "indices"), "compat.v1.gather": (1, "indices"),
    "one_hot": (0, "indices"), "compat.v1.one_hot": (0, "indices"),
}
ID_CASTS = frozenset({"cast", "to_int32", "to_int64", "compat.v1.to_int32", "compat.v1.to_int64"})


class _ForwardRewriter(cst.CSTTransformer):
    """Layer applications -> ``self.<layer>(...)``, ``params`` -> ``self.params``, mode tests
    -> ``training``, TF1 names -> TF2 names."""

    def __init__(self, conv: _Converter, respelled: dict, in_helper=None):
        super().__init__()
        self.conv = conv
        self.respelled = respelled
        #: The helper whose body becomes a method: its own names, its `training` parameter.
        self.in_helper = in_helper
        self.inputs: dict[cst.Call, cst.BaseExpression] = {}

    def on_visit(self, node) -> bool:
        if isinstance(node, cst.Call) and node in self.conv.helper_calls:
            # Only the arguments the method takes are code of the forward pass; the others
            # configured the layers (__init__) or were the training flag and `reuse`.
            helper = self.conv.helper_calls[node]
            bound = next(b for c, b in helper.calls if c is node)
            self.inputs[node] = [self.switched(helper, p, bound[p].visit(self)) for p in helper.forward]
            return False
        if isinstance(node, (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation)) and \
                self.conv.modes.modes_where_true(node) is not None:
            return False  # a test of the mode: Keras's `training` as a whole (on_leave)
        app = self.conv.layer_apps.get(node) if isinstance(node, cst.Call) else None
        if app is None:
            return True
        # Only the layer's input is code of the forward pass; its other arguments were
        # consumed by the layer's conversion (constructor, training flag). A weight has none.
        self.inputs[node] = app.inputs.visit(self) if app.inputs is not None else None
        return False

    @staticmethod
    def switched(helper, param: str, value: cst.BaseExpression) -> cst.BaseExpression:
        """A dropout switch the method reads besides its dropouts (a log line): TRAIN's value in
        training, the value that switched the dropout off otherwise, as the Estimator had them."""
        if param not in helper.switches:
            return value
        off = helper.switches[param]
        return _emit.expr("{on} if training else {off}", on=value, off=off)

    def on_leave(self, original, updated):
        conv = self.conv
        if original in conv.rnn_reads:  # `state[1]`, `state.h`, `outputs[-1]`: what Keras returned
            return conv.rnn_read_replacement(original)
        if isinstance(original, cst.Call) and original in conv.root.input_layers:
            return conv.root.input_layers[original](updated)
        if isinstance(original, cst.Call) and original in conv.helper_calls and original in self.inputs:
            if conv.helper_calls[original].inline:
                return conv.inline_call(original, self.inputs.pop(original))
            return conv.helper_call(original, self.inputs.pop(original))
        if isinstance(original, cst.Call) and original in getattr(conv, "id_casts", {}):
            position = conv.id_casts[original]
            arg = updated.args[position]
            cast = _emit.expr("{tf}.cast({ids}, {tf}.int64)", tf=conv.tf, ids=arg.value)
            return updated.with_changes(args=[*updated.args[:position], arg.with_changes(value=cast),
                                              *updated.args[position + 1:]])
        if isinstance(original, cst.Call) and original in self.inputs:
            app = conv.layer_apps[original]
            inputs = self.inputs.pop(original)
            if app.weight:
                return _emit.expr(app.item if app.loop is not None else f"self.{app.attr}")
            if app.drop:
                return inputs
            args = [cst.Arg(inputs)]
            if app.training is not None:
                args.append(_emit.keyword_arg("training", cst.Name(app.training)))
            layer = app.item if app.loop is not None else f"self.{app.attr}"
            return cst.Call(_emit.expr(layer), args=_emit.call_args(args))
        if isinstance(original, cst.SimpleStatementLine):
            updated = conv.dropped_note(original, updated)
        if isinstance(original, cst.IndentedBlock):
            body, footer = _without_self_assignments(list(updated.body))
            return updated.with_changes(body=body, footer=[*footer, *updated.footer])
        if self.in_helper is not None and isinstance(original, cst.SimpleStatementLine) and \
                any(small in self.in_helper.objects.values() for small in original.body):
            return cst.RemoveFromParent()  # `bn = BatchNormalization(...)`: made in __init__
        if isinstance(original, cst.Name) and conv._is_read(original) and self.in_helper is not None:
            if original.value in self.in_helper.training:
                return cst.Name("training")
            if original.value == self.in_helper.reuse:
                conv.refuse(original, f"`{original.value}` is read outside `tf.variable_scope(reuse=...)`")
        elif isinstance(original, cst.Name) and conv._is_read(original):
            if original.value in conv.weight_names:
                return _emit.expr(f"self.{conv.weight_names[original.value]}")
            if original.value in getattr(conv, "call_arguments", ()):
                return _emit.expr(f"self.{original.value}")
            if original.value == "mode":
                conv.refuse(original, "the forward pass reads `mode` in a way e2k does not translate")
            if original.value in conv.modes.flags:
                if conv.modes.flags[original.value] != frozenset({TRAIN}):
                    conv.refuse(original, f"`{original.value}` tests the mode in a way Keras's `training` cannot express")
                return cst.Name("training")
        if original in self.respelled:
            return self.respelled[original]
        if isinstance(original, (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation)) and conv.modes.modes_where_true(original) is not None:
            if not conv.modes.is_training_test(original):
                conv.refuse(original, "this test of the mode has no Keras equivalent inside the model")
            return cst.Name("training")
        return updated


class _InputShape(cst.CSTTransformer):
    """In a weight made by ``build``: ``inputs.shape`` / ``inputs.get_shape()`` (with TF1's
    ``.as_list()`` and ``Dimension.value``) -> ``input_shape``; the block's settings ->
    ``self.<setting>``."""

    def __init__(self, conv, inputs: str):
        super().__init__()
        self.conv, self.inputs = conv, inputs

    def _shape(self, node) -> bool:
        """``inputs.shape`` or ``inputs.get_shape()``."""
        if isinstance(node, cst.Call) and not node.args:
            node = node.func
            if not (isinstance(node, cst.Attribute) and node.attr.value == "get_shape"):
                return False
        elif not (isinstance(node, cst.Attribute) and node.attr.value == "shape"):
            return False
        return isinstance(node.value, cst.Name) and node.value.value == self.inputs

    def reads_shape(self, name: cst.Name) -> bool:
        parent = self.conv.ctx.parent(name)
        if isinstance(parent, cst.Attribute) and parent.attr.value == "shape":
            return True
        grand = self.conv.ctx.parent(parent) if parent is not None else None
        return isinstance(parent, cst.Attribute) and parent.attr.value == "get_shape" and isinstance(grand, cst.Call) \
            and not grand.args

    def leave_Call(self, original, updated):
        func = updated.func
        if isinstance(func, cst.Attribute) and func.attr.value == "as_list" and not updated.args \
                and isinstance(func.value, cst.Name) and func.value.value == "input_shape":
            return _emit.expr("list(input_shape)")
        if self._shape(original):
            return cst.Name("input_shape")
        return updated

    def leave_Attribute(self, original, updated):
        updated = updated.with_changes(attr=original.attr)  # `x.units` is no read of `units`
        if self._shape(original):
            return cst.Name("input_shape")
        if updated.attr.value == "value" and isinstance(updated.value, cst.Subscript) \
                and isinstance(updated.value.value, cst.Name) and updated.value.value.value == "input_shape":
            return updated.value  # TF1's Dimension.value: Keras's shapes hold ints
        return updated

    def leave_Name(self, original, updated):
        if original.value in self.conv.arguments and self.conv._is_read(original):
            return _emit.expr(f"self.{original.value}")
        return updated

    def leave_Arg(self, original, updated):
        return updated.with_changes(keyword=original.keyword)  # `name=` is no read of `name`


class _InlineRewriter(cst.CSTTransformer):
    """A helper's one expression written at one call: its parameters -> the call's (rewritten)
    values, its layer calls -> that call's layers, tests of the mode -> ``training``."""

    def __init__(self, conv: _Converter, apps: dict, values: dict, respelled: dict):
        super().__init__()
        self.conv, self.apps, self.values, self.respelled = conv, apps, values, respelled
        self.inputs: dict = {}

    def on_visit(self, node) -> bool:
        if node in self.apps:
            app = self.apps[node]
            self.inputs[node] = app.inputs.visit(self) if app.inputs is not None else None
            return False
        if isinstance(node, (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation)) and \
                self.conv.modes.modes_where_true(node) is not None:
            return False
        return True

    def on_leave(self, original, updated):
        conv = self.conv
        if original in self.inputs:
            app = self.apps[original]
            inputs = self.inputs.pop(original)
            if app.weight:
                return _emit.expr(app.item if app.loop is not None else f"self.{app.attr}")
            if app.drop:
                return inputs
            args = [cst.Arg(inputs)]
            if app.training is not None:
                args.append(_emit.keyword_arg("training", cst.Name(app.training)))
            layer = app.item if app.loop is not None else f"self.{app.attr}"
            return cst.Call(_emit.expr(layer), args=_emit.call_args(args))
        if isinstance(original, cst.Name) and original.value in self.values and conv._is_read(original):
            return self.values[original.value]
        if original in self.respelled:
            return self.respelled[original]
        if isinstance(original, (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation)) and conv.modes.modes_where_true(original) is not None:
            if not conv.modes.is_training_test(original):
                conv.refuse(original, "this test of the mode has no Keras equivalent inside the model")
            return cst.Name("training")
        return updated


def _self_assignment(node: cst.CSTNode) -> bool:
    """``net = net``: what a statement becomes when the layer it applied is left out."""
    if not isinstance(node, cst.SimpleStatementLine) or len(node.body) != 1 or not isinstance(node.body[0], cst.Assign):
        return False
    small = node.body[0]
    return len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) and isinstance(small.value, cst.Name) \
        and small.targets[0].target.value == small.value.value


def _weight_aliases_inlined(body: list, weights: set[str]) -> list:
    """``w = self.w`` (a weight, assigned once) dropped and ``self.w`` read where ``w`` was."""
    if not weights:
        return body
    assigned: dict[str, int] = {}
    for stmt in body:
        for node in _walk(stmt):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else \
                [node.target] if isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor)) else []
            for target in targets:
                for name in _walk(target):
                    if isinstance(name, cst.Name):
                        assigned[name.value] = assigned.get(name.value, 0) + 1
    aliases = {}
    for stmt in body:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
                and isinstance(small.value, cst.Attribute) and isinstance(small.value.value, cst.Name) \
                and small.value.value.value == "self" and small.value.attr.value in weights \
                and assigned.get(small.targets[0].target.value) == 1:
            aliases[small.targets[0].target.value] = (stmt, small.value)
    if not aliases:
        return body
    dropped = {id(stmt) for stmt, _ in aliases.values()}
    reads = _AliasReads({name: value for name, (_, value) in aliases.items()})
    return [stmt.visit(reads) for stmt in body if id(stmt) not in dropped]


class _AliasReads(cst.CSTTransformer):
    """Reads of the given names -> their values (not attribute names, keywords or targets)."""

    def __init__(self, values: dict):
        super().__init__()
        self.values = values

    def visit_Attribute(self, node):
        return False  # only the object is a read (leave_Attribute), not `.attr`

    def leave_Attribute(self, original, updated):
        return updated.with_changes(value=original.value.visit(self))

    def visit_Arg(self, node):
        return True

    def leave_Arg(self, original, updated):
        return updated.with_changes(keyword=original.keyword)

    def leave_Name(self, original, updated):
        return self.values.get(original.value, updated)


def _call_returns_directly(klass: cst.ClassDef) -> cst.ClassDef:
    """The class with its ``call`` ending ``return <value>`` where it ended by assigning the
    value to a name it then returned (once the class is whole: code put before the ``return``
    later, a weight penalty, must still run after the value was computed)."""
    body = [_with_body(s, _returned_directly(list(s.body.body)))
            if isinstance(s, cst.FunctionDef) and s.name.value == "call" else s for s in klass.body.body]
    return klass.with_changes(body=klass.body.with_changes(body=body))


def _with_body(function: cst.FunctionDef, body: list) -> cst.FunctionDef:
    return function.with_changes(body=function.body.with_changes(body=body))


def _returned_directly(body: list) -> list:
    """``logits = self.logits(net)`` then ``return logits``: ``return self.logits(net)`` (what
    ruff's RET504 asks of hand-written code), where neither line has a comment."""
    if len(body) < 2 or not all(isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 for s in body[-2:]):
        return body
    assign, returned = body[-2].body[0], body[-1].body[0]
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name)
            and isinstance(returned, cst.Return) and isinstance(returned.value, cst.Name)
            and returned.value.value == assign.targets[0].target.value):
        return body
    if any(line.comment for s in body[-2:] for line in s.leading_lines) or any(
            s.trailing_whitespace.comment for s in body[-2:]):
        return body
    merged = body[-1].with_changes(body=[returned.with_changes(value=assign.value)],
                                   leading_lines=body[-2].leading_lines)
    return [*body[:-2], merged]


class _InferenceOnly(cst.CSTTransformer):
    """``call``'s code as predict_step runs it: ``training`` read as False."""

    def __init__(self):
        super().__init__()
        self.names: set[int] = set()

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.names.add(id(node.keyword))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.names.add(id(node.attr))

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if original.value == "training" and id(original) not in self.names:
            return cst.Name("False")
        return updated


def _without_self_assignments(body: list) -> tuple[list, list]:
    """The statements without ``net = net``; their comments go to the next statement, or (at
    the end of the block) to the lines after it."""
    kept, pending = [], []
    for stmt in body:
        if _self_assignment(stmt):
            pending.extend(stmt.leading_lines)
            continue
        if pending:
            stmt = stmt.with_changes(leading_lines=[*pending, *stmt.leading_lines])
            pending = []
        kept.append(stmt)
    if not kept:
        return body, []
    return kept, pending


def _needs_parentheses(node: cst.CSTNode) -> bool:
    return isinstance(node, (cst.BinaryOperation, cst.BooleanOperation, cst.Comparison, cst.UnaryOperation, cst.IfExp, cst.Lambda))


def _walk_in_order(node: cst.CSTNode):
    """Nodes in source order (depth first)."""
    yield node
    for child in node.children:
        yield from _walk_in_order(child)


def _assign_target(small) -> str | None:
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
        return small.targets[0].target.value
    return None


def _comments_on_arguments(call: cst.Call, comments: dict[str, list[cst.EmptyLine]]) -> cst.Call | None:
    """``model.compile(...)`` with ``comments[keyword]`` above each keyword argument, one
    argument per line; None when a keyword with comments is not an argument of it."""
    keywords = [arg.keyword.value if arg.keyword is not None else None for arg in call.args]
    if any(key not in keywords for key in comments):
        return None

    def before(key: str | None) -> cst.ParenthesizedWhitespace:
        lines = [line.with_changes(indent=True, whitespace=cst.SimpleWhitespace("    "))
                 for line in comments.get(key, [])] if key is not None else []
        return cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=lines, indent=True,
                                           last_line=cst.SimpleWhitespace("    "))

    args = []
    for i, arg in enumerate(call.args):
        last = i == len(call.args) - 1
        comma = cst.Comma(whitespace_after=before(keywords[i + 1])) if not last else cst.MaybeSentinel.DEFAULT
        args.append(arg.with_changes(comma=comma))
    return call.with_changes(args=args, whitespace_before_args=before(keywords[0]))


def _is_compile(small) -> bool:
    value = getattr(small, "value", None)
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "compile"


def _line(small: cst.BaseSmallStatement, line: cst.BaseStatement, original_small, comments: bool = True) -> cst.BaseStatement:
    if isinstance(small, cst.BaseCompoundStatement):
        # A step that is a whole block (`if NUM_WORKERS > 1: lr *= NUM_WORKERS`), kept as written.
        return small if comments else small.with_changes(leading_lines=[])
    first = isinstance(line, cst.SimpleStatementLine) and line.body and line.body[0] is original_small
    leading = list(line.leading_lines) if (first and comments) else []
    trailing = line.trailing_whitespace if isinstance(line, cst.SimpleStatementLine) else cst.TrailingWhitespace()
    small = small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
    return cst.SimpleStatementLine(body=[small], leading_lines=leading, trailing_whitespace=trailing)


def _function(name: str, params: str, body: list[cst.BaseStatement], blank_before: bool = False) -> cst.FunctionDef:
    fn = _emit.statement(f"def {name}({params}):\n    pass")
    fn = fn.with_changes(body=cst.IndentedBlock(body=body))
    return fn.with_changes(leading_lines=[_emit.blank_line()]) if blank_before else fn


def _with_docstring(klass: cst.ClassDef, fn: cst.FunctionDef) -> cst.ClassDef:
    """``klass`` with the docstring of the function it was made from, a blank line after it."""
    doc = _docstring(fn)
    if doc is None:
        return klass
    methods = list(klass.body.body)
    methods[0] = methods[0].with_changes(leading_lines=[_emit.blank_line(), *methods[0].leading_lines])
    return klass.with_changes(body=klass.body.with_changes(body=[doc, *methods]))


def _docstring(fn: cst.FunctionDef) -> cst.BaseStatement | None:
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else []
    if body and isinstance(body[0], cst.SimpleStatementLine) and len(body[0].body) == 1:
        small = body[0].body[0]
        if isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
            return body[0]
    return None


def _docstring_line(stmt) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _comma_separated(elements):
    elements = list(elements)
    return [
        e.with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if i < len(elements) - 1 else cst.MaybeSentinel.DEFAULT
        )
        for i, e in enumerate(elements)
    ]
