"""Reading a model_fn, second part: what it gives compile() and predict_step.

``_CompileReader`` holds the methods of ``_modelfn._Converter`` that read the train_op
(the optimizer, its schedule, gradient clipping), the eval_metric_ops, the PREDICT
predictions, and the final check that every statement the Estimator ran is accounted for.
"""
from __future__ import annotations

import libcst as cst

from estimator2keras import _emit, _hand_schedule
from estimator2keras._context import iter_calls
from estimator2keras._hook_values import GLOBAL_STEP_CALLS as GLOBAL_STEP
from estimator2keras._modelfn_blocks import MAKERS
from estimator2keras._modelfn_read import Derived, MetricConversion, _Def, _unpacked, _walk
from estimator2keras._rule import Unsupported

#: Casts that keep the step's count (it never reaches 2**31 in training).
STEP_CASTS = frozenset({"cast", "to_int32", "to_int64", "to_float", "dtypes.cast", "math.cast"})
#: TF1 optimizers whose sparse updates touch the looked-up rows only, where Keras's decay all rows.
SPARSE_DIFFERS = frozenset({"train.RMSPropOptimizer", "train.MomentumOptimizer"})
#: Calls that give a variable a sparse (IndexedSlices) gradient.
SPARSE_SOURCES = frozenset({
    "nn.embedding_lookup", "nn.embedding_lookup_sparse", "nn.safe_embedding_lookup_sparse",
    "compat.v1.nn.embedding_lookup", "compat.v1.nn.embedding_lookup_sparse", "keras.layers.Embedding",
    "feature_column.embedding_column", "feature_column.shared_embedding_columns",
    "feature_column.shared_embeddings", "contrib.layers.embed_sequence",
})
SUMMARIES = ("summary.",)


#: What ``_logged_by_keras`` says of a summary of the optimizer's learning rate.
LEARNING_RATE_LOGGED = "the learning rate"


class _CompileReader:
    """Reading the optimizer, the metrics, the predictions, and what is left over."""

    # -- the optimizer -----------------------------------------------------------------------
    def read_train_op(self, train_op: cst.BaseExpression, loss_expr: cst.BaseExpression):
        """The optimizer expression for compile, and the assignments the builder keeps."""
        at = len(self.order)
        minimize = train_op
        if isinstance(train_op, cst.Name):
            d = self.latest_def(train_op.value, at)
            if d is None:
                self.refuse(train_op, "the train_op is not computed in the model_fn")
            self.consumed.add(d.small)
            minimize, at = d.value, d.index
        minimize = self.as_minimize(minimize)
        if isinstance(minimize, cst.Call) and isinstance(minimize.func, cst.Attribute) and minimize.func.attr.value == "apply_gradients":
            return self.read_apply_gradients(minimize, loss_expr, at)
        if isinstance(minimize, cst.Call) and self.role(minimize) == "optimize_loss":
            return self.read_optimize_loss(minimize, loss_expr, at)
        if isinstance(minimize, cst.Call) and isinstance(minimize.func, cst.Name):
            helper = self._train_op_helper(minimize)
            if helper is not None:
                return self.read_train_op_helper(minimize, helper, loss_expr, at)
        if not (isinstance(minimize, cst.Call) and isinstance(minimize.func, cst.Attribute) and minimize.func.attr.value == "minimize"):
            self.refuse(minimize, "the train_op is not `optimizer.minimize(loss)` nor a clipped `apply_gradients`")
        from estimator2keras._units import bind_arguments

        args = {k: a.value for k, a in bind_arguments(minimize, ("loss", "global_step", "var_list")).items()}
        loss = args.pop("loss", None)
        if loss is None or not (isinstance(loss, cst.Name) and isinstance(loss_expr, cst.Name) and loss.value == loss_expr.value):
            self.refuse(minimize, "`minimize` is not called on the loss the EstimatorSpec returns")
        step = args.pop("global_step", None)
        if step is not None and not self.is_global_step(step, at):
            self.refuse(step, "`minimize(global_step=...)` is not the global step")
        if args:
            self.refuse(minimize, f"`minimize({', '.join(args)}=...)` is not converted")
        receiver = minimize.func.value
        if isinstance(receiver, cst.Name):
            d = self.through_wrappers(self.latest_def(receiver.value, at))
            if d is None or self.role(d.value) != "optimizer":
                self.refuse(receiver, _not_an_optimizer(d.value if d is not None else None))
            return cst.Name(receiver.value), self.builder_slice([d], at)
        if self.role(receiver) != "optimizer":
            self.refuse(receiver, _not_an_optimizer(receiver))
        self.check_momentum_schedule(receiver, at)
        optimizer = _hand_schedule.translated_optimizer(self, receiver, at)
        # (what a schedule computes is its own: the builder needs the other arguments' values)
        extra = [a.value for a in receiver.args if not _hand_schedule.reads_global_step(self, a.value, at)]
        return optimizer, self.builder_slice([], at, extra=extra)

    def as_minimize(self, value):
        """``tf.contrib.training.create_train_op(loss, optimizer)`` as what it computed:
        ``optimizer.minimize(loss, global_step)`` after the UPDATE_OPS (batch norm's moving
        averages, which Keras updates in fit), its loss checked for NaN (Keras's fit stops on
        a NaN loss only with TerminateOnNaN). Other arguments of it are refused by name."""
        if not (isinstance(value, cst.Call) and self.ctx.call_api_path(value) == "contrib.training.create_train_op"):
            return value
        from estimator2keras._units import bind_arguments

        signature = ("total_loss", "optimizer", "global_step", "update_ops", "variables_to_train",
                     "transform_grads_fn", "summarize_gradients", "gate_gradients", "aggregation_method",
                     "colocate_gradients_with_ops", "check_numerics")
        args = {k: a.value for k, a in bind_arguments(value, signature).items()}
        for name in args.keys() - {"total_loss", "optimizer", "global_step", "summarize_gradients", "check_numerics"}:
            self.refuse(args[name], f"`create_train_op({name}=...)` is not converted")
        if "total_loss" not in args or "optimizer" not in args:
            self.refuse(value, "`create_train_op` is not given its loss and optimizer")
        given = [cst.Arg(args["total_loss"])]
        if "global_step" in args:
            given.append(cst.Arg(args["global_step"], keyword=cst.Name("global_step")))
        optimizer = args["optimizer"]
        return cst.Call(cst.Attribute(optimizer, cst.Name("minimize")), given)

    def _train_op_helper(self, call: cst.Call) -> cst.FunctionDef | None:
        from estimator2keras._units import resolve

        helper = resolve(self.ctx, call.func)
        if not isinstance(helper, cst.FunctionDef) or not isinstance(self.ctx.parent(helper), cst.Module):
            return None
        return helper

    def read_train_op_helper(self, call: cst.Call, helper: cst.FunctionDef, loss_expr: cst.BaseExpression, at: int):
        """``train_op = get_train_op(loss, params)``, a function of the program making the
        train_op: its statements read as TRAIN runs them (`if mode == TRAIN:` taken, `with
        tf.control_dependencies(update_ops):` unwrapped), ending in
        ``return optimizer.minimize(loss, global_step)``. The Keras optimizer is its optimizer,
        written with the function's names replaced by the values the call gives them."""
        from estimator2keras._units import bind_arguments

        what, bound, modes = self._helper_call(call, helper, "the train_op")
        env: dict[str, cst.BaseExpression] = {}
        returned = self.as_minimize(self._train_op_statements(list(helper.body.body), helper, what, modes, env))
        if not (isinstance(returned, cst.Call) and isinstance(returned.func, cst.Attribute)
                and returned.func.attr.value == "minimize"):
            self.refuse(call, f"{what} does not return `optimizer.minimize(loss, global_step)`")
        args = {k: a.value for k, a in bind_arguments(returned, ("loss", "global_step", "var_list")).items()}
        loss = args.pop("loss", None)
        if not (isinstance(loss, cst.Name) and loss.value in bound and isinstance(bound[loss.value], cst.Name)
                and isinstance(loss_expr, cst.Name) and bound[loss.value].value == loss_expr.value):
            self.refuse(returned, f"{what} does not minimize the loss the EstimatorSpec returns")
        step = args.pop("global_step", None)
        if step is not None:
            step = env.get(step.value, bound.get(step.value, step)) if isinstance(step, cst.Name) else step
            if not self.is_global_step(step, at):
                self.refuse(returned, f"{what} minimizes with another step than the global step")
        if args:
            self.refuse(returned, f"`minimize({', '.join(args)}=...)` in {what} is not converted")
        receiver = returned.func.value
        while isinstance(receiver, cst.Name) and receiver.value in env:
            receiver = env[receiver.value]
        if not (isinstance(receiver, cst.Call) and self.role(receiver) == "optimizer"):
            self.refuse(returned, f"the optimizer {what} minimizes with is not a tf.train optimizer e2k converts")
        self.check_momentum_schedule(receiver, at)
        helper_names = _hand_schedule.Helper(bound, env)
        optimizer = _hand_schedule.translated_optimizer(self, receiver, at, helper_names)
        # The function's names, as the call gives them (its locals, as they were computed).
        replacements: dict = {}
        # Names that are not reads: attributes' and keywords' (new code: no metadata to ask).
        skipped = {id(n.attr) for n in _walk(optimizer) if isinstance(n, cst.Attribute)}
        skipped |= {id(n.keyword) for n in _walk(optimizer) if isinstance(n, cst.Arg) and n.keyword is not None}
        for node in _walk(optimizer):
            if not isinstance(node, cst.Name) or id(node) in skipped:
                continue
            value = node
            for _ in range(20):
                if not isinstance(value, cst.Name):
                    break
                if value.value in env:
                    value = env[value.value]
                elif value.value in bound:
                    value = bound[value.value]
                    break
                else:
                    break
            if value is not node:
                if _hand_schedule.reads_global_step(self, value, at, helper_names):
                    # computed from the global step in the function: a schedule class of it
                    replacements[node] = _hand_schedule.schedule(self, value, at, helper_names)
                    continue
                if any(isinstance(n, cst.Name) and n.value in env for n in _walk(value)):
                    self.refuse(call, f"{what} computes its optimizer's settings in several steps, which e2k does not "
                                      "write out")
                replacements[node] = value
        optimizer = _emit.replace_in(optimizer, replacements)
        if self.plan is not None:
            from estimator2keras._units import accesses_of

            reads = accesses_of(self.ctx, helper.name)
            if reads and all(self.ctx.within(r, (self.fn,)) for r in reads):
                self.plan.remove_statement(helper)  # only the converted model_fn used it
            self.plan.fixed(call, "E2K101", f"the train_op {what} makes -> the Keras optimizer it minimizes with")
        # What the optimizer reads of the model_fn (`lr`, given as an argument) is the builder's too.
        return optimizer, self.builder_slice([], at, extra=list(replacements.values()))

    def _helper_call(self, call: cst.Call, helper: cst.FunctionDef, made: str):
        """The call of a function of the program making ``made``: (how reports name it, its
        parameters -> the values the call gives them, defaults too, the parameters given the
        mode)."""
        from estimator2keras._units import bind_arguments

        what = f"`{helper.name.value}(...)`"
        params = helper.params
        if helper.decorators or isinstance(params.star_arg, (cst.Param, cst.ParamStar)) or params.star_kwarg \
                or params.kwonly_params or params.posonly_params:
            self.refuse(call, f"{made} comes from {what}, whose signature e2k does not read")
        names = [p.name.value for p in params.params]
        try:
            bound = {k: a.value for k, a in bind_arguments(call, tuple(names)).items()}
        except Exception:  # noqa: BLE001 - arguments that do not fit: the program's own error
            self.refuse(call, f"the arguments of {what} cannot be matched to its parameters")
        for p in params.params:
            if p.name.value not in bound and p.default is not None:
                bound[p.name.value] = p.default
        modes = {k for k, v in bound.items() if isinstance(v, cst.Name) and v.value == "mode"}
        return what, bound, modes

    def _train_op_statements(self, body: list, helper: cst.FunctionDef, what: str, modes: set[str],
                             env: dict, mode: str = "train", made: str = "the train_op") -> cst.BaseExpression | None:
        """The value the statements return as TRAIN runs them; their assignments into ``env``."""
        for index, statement in enumerate(body):
            if isinstance(statement, cst.If):
                param = next(iter(modes), None)
                train = self._mode_test(statement.test, param, mode) if param is not None else None
                if train is None:
                    self.refuse(statement, f"{what} makes {made} under an `if` that does not test the mode")
                if train:
                    taken = list(statement.body.body)
                elif isinstance(statement.orelse, cst.If):
                    taken = [statement.orelse]
                elif isinstance(statement.orelse, cst.Else):
                    taken = list(statement.orelse.body.body)
                else:
                    taken = []
                returned = self._train_op_statements(taken, helper, what, modes, env, mode, made)
                if returned is not None:
                    return returned
                continue
            if isinstance(statement, cst.With) and len(statement.items) == 1 and isinstance(statement.items[0].item, cst.Call) \
                    and (self.ctx.call_api_path(statement.items[0].item) or "").endswith("control_dependencies"):
                returned = self._train_op_statements(list(statement.body.body), helper, what, modes, env, mode, made)
                if returned is not None:
                    return returned
                continue
            if not isinstance(statement, cst.SimpleStatementLine):
                self.refuse(statement, f"{what} makes {made} with a `{type(statement).__name__.lower()}`, which "
                                       "e2k does not read")
            for small in statement.body:
                if isinstance(small, cst.Return):
                    value = small.value
                    while isinstance(value, cst.Name) and value.value in env:
                        value = env[value.value]
                    return value
                if isinstance(small, cst.Expr) and index == 0 and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
                    continue  # a docstring
                if isinstance(small, cst.Expr) and (self.ctx.call_api_path(small.value) or "").startswith(
                        ("summary.", "compat.v1.summary.")):
                    continue  # a summary: TensorBoard's, which the Keras callback writes its own way
                if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                        and isinstance(small.targets[0].target, cst.Name)):
                    self.refuse(small, f"{what} has a statement e2k does not read in a function making {made}")
                name = small.targets[0].target.value
                if name in env:
                    self.refuse(small, f"`{name}` is assigned twice in {what}")
                value = small.value
                if isinstance(value, cst.Call) and (self.ctx.call_api_path(value) or "").endswith("get_collection"):
                    continue  # `update_ops = tf.get_collection(UPDATE_OPS)`: Keras runs the updates itself
                env[name] = value
        return None

    def read_optimize_loss(self, call: cst.Call, loss_expr: cst.BaseExpression, at: int):
        """``tf.contrib.layers.optimize_loss(loss, global_step, lr, "Adam")`` (E2K104)."""
        from estimator2keras._units import bind_arguments
        from estimator2keras.rewrites.tf1_optimize_loss_to_keras import SIGNATURE, clip_norm

        args = {k: a.value for k, a in bind_arguments(call, SIGNATURE).items()}
        loss = args.get("loss")
        if not (isinstance(loss, cst.Name) and isinstance(loss_expr, cst.Name) and loss.value == loss_expr.value):
            self.refuse(call, "optimize_loss is not called on the loss the EstimatorSpec returns")
        step = args.get("global_step")
        if step is not None and not self.is_global_step(step, at):
            self.refuse(step, "optimize_loss(global_step=...) is not the global step")
        optimizer = self.translate("optimize_loss", call)
        extra = [args["learning_rate"]] if "learning_rate" in args else []
        clip = args.get("clip_gradients")
        if clip is not None and clip_norm(clip) is not None:
            # `optimize_loss(..., clip_gradients=5.0)`: clip_by_global_norm of the gradients.
            optimizer = optimizer.with_changes(args=_emit.call_args(
                [*optimizer.args, _emit.keyword_arg("global_clipnorm", clip)]))
            extra.append(clip)
            self.clipping_found(clip)
        return optimizer, self.builder_slice([], at, extra=extra)

    def through_wrappers(self, d: "_Def | None") -> "_Def | None":
        """``if params["use_tpu"]: optimizer = CrossShardOptimizer(optimizer)``: an ``if``
        that only wraps the optimizer in what Keras does itself (the rule turns the wrapper
        into the optimizer it wraps) leaves the optimizer assigned before it."""
        while d is not None and isinstance(d.small, cst.If):
            names = {name for name, _ in self._assigned(d.small)}
            if names != {d.name}:
                return d
            for node in _walk(d.small):
                if not isinstance(node, cst.Assign):
                    continue
                value = node.value
                if not (isinstance(value, cst.Call) and self.role(value) == "optimizer"):
                    return d
                converted = self.translate("optimizer", value)
                if not (isinstance(converted, cst.Name) and converted.value == d.name):
                    return d
            self.consumed.add(d.small)
            if self.plan is not None:
                self.plan.fixed(d.small, "E2K605", "the optimizer wrapper is left out: Keras strategies average gradients themselves")
            d = self.latest_def(d.name, d.index)
        return d

    def check_momentum_schedule(self, optimizer: cst.Call, at: int) -> None:
        """TF1 Momentum multiplies the whole accumulator by the current rate, Keras SGD only
        each new gradient: with a rate that changes, the steps after a change differ. (And
        the updates of rows an embedding lookup did not read: ``check_sparse_updates``.)"""
        self.check_sparse_updates(optimizer)
        if self.ctx.call_api_path(optimizer) != "train.MomentumOptimizer" or not optimizer.args:
            return
        rate = optimizer.args[0].value
        for arg in optimizer.args:
            if arg.keyword is not None and arg.keyword.value == "learning_rate":
                rate = arg.value
        resolved = self.resolve(rate, at)
        if isinstance(resolved, cst.Call) and self.role(resolved) == "schedule" \
                or _hand_schedule.reads_global_step(self, rate, at):
            if any(a.keyword is not None and a.keyword.value == "use_nesterov" for a in optimizer.args) \
                    or self.plan is None:
                self.leftover(
                    optimizer,
                    "with a decaying learning rate, TF1 Momentum scales the whole accumulated step by the current "
                    "rate while Keras SGD scales each new gradient: the steps after each change differ; check with "
                    "e2k parity", "E2K101")
                return
            # TF1 Momentum scaled the whole accumulated step by the current rate, Keras SGD each
            # new gradient: after a change of rate they differ (parity broke at the first decay).
            # A small SGD that updates as TF1 did, once per file.
            name = self.plan.add_helper("TF1Momentum", lambda given: _emit.statements(TF1_MOMENTUM, name=given, tf=self.tf))
            self.tf1_momentum = {**getattr(self, "tf1_momentum", {}), id(optimizer): name}
            self.plan.fixed(optimizer, "E2K101", "MomentumOptimizer with a decaying rate -> `TF1Momentum`, Keras SGD "
                                                 "updating as TF1 did (the accumulated step times the current rate)")

    def check_sparse_updates(self, optimizer: cst.Call) -> None:
        """An embedding lookup gives its table a sparse gradient: TF1's RMSProp and Momentum
        updated the accumulators of the rows a batch looked up only, Keras's RMSprop and SGD
        decay every row's at every step. The Keras optimizer is written, and reported: the
        rows that a batch does not read move differently after their next lookup."""
        path = self.ctx.call_api_path(optimizer)
        if path not in SPARSE_DIFFERS or getattr(self, "_sparse_reported", False):
            return
        lookup = self._sparse_source()
        if lookup is None:
            return
        self._sparse_reported = True
        name = path.rsplit(".", 1)[-1]
        self.leftover(
            optimizer,
            f"`{_emit.code(lookup.func)}` gives its table a sparse gradient: TF1's {name} updated the accumulators of "
            "the rows each batch looked up only, while Keras decays every row's at every step, so rows move "
            "differently after their next lookup (more with a larger vocabulary); keep Adam, Adagrad or plain SGD "
            "for those variables, or check with e2k parity on realistic data",
            "E2K101",
        )

    def _sparse_source(self) -> cst.Call | None:
        """A call of the model_fn (or of a function of the program it calls) giving a variable a
        sparse gradient: an embedding lookup, a Keras Embedding layer, an embedding column."""
        return next((call for call in self.model_fn_calls() if (self.ctx.call_api_path(call) or "") in SPARSE_SOURCES),
                    None)

    # -- gradient clipping ---------------------------------------------------------------------
    def read_apply_gradients(self, apply: cst.Call, loss_expr: cst.BaseExpression, at: int):
        """``optimizer.apply_gradients(<clipped compute_gradients(loss)>, global_step)``: the
        Keras optimizer with ``global_clipnorm`` / ``clipnorm`` / ``clipvalue``."""
        from estimator2keras._units import bind_arguments

        if not self.ctx.enabled("E2K103"):
            self.refuse(apply, "gradient clipping is converted by E2K103, which is disabled")
        args = {k: a.value for k, a in bind_arguments(apply, ("grads_and_vars", "global_step", "name")).items()}
        step = args.get("global_step")
        if step is not None and not self.is_global_step(step, at):
            self.refuse(step, "`apply_gradients(global_step=...)` is not the global step")
        receiver = apply.func.value
        if not isinstance(receiver, cst.Name):
            self.refuse(apply, "apply_gradients is not called on an optimizer variable")
        clip_keyword, clip_value, computed = self.read_clipping(args.get("grads_and_vars"), at)
        compute = computed.value
        if not (isinstance(compute, cst.Call) and isinstance(compute.func, cst.Attribute)
                and compute.func.attr.value == "compute_gradients"
                and isinstance(compute.func.value, cst.Name) and compute.func.value.value == receiver.value):
            self.refuse(compute, "the gradients do not come from this optimizer's compute_gradients")
        loss_args = bind_arguments(compute, ("loss", "var_list"))
        loss = loss_args.get("loss")
        if set(loss_args) != {"loss"} or not (isinstance(loss.value, cst.Name) and isinstance(loss_expr, cst.Name) and loss.value.value == loss_expr.value):
            self.refuse(compute, "compute_gradients is not called on the loss alone")
        d = self.latest_def(receiver.value, computed.index)
        if d is None or self.role(d.value) != "optimizer":
            self.refuse(receiver, _not_an_optimizer(d.value if d is not None else None))
        self.clipping = (clip_keyword, clip_value)
        self.clipping_found(apply, clip_keyword)
        # The threshold is the optimizer's too (`clip_norm = params.get("clip_norm", 5.0)`).
        return cst.Name(receiver.value), self.builder_slice([d], at, extra=[clip_value])

    def clipping_found(self, node: cst.CSTNode, clip_keyword: str = "global_clipnorm") -> None:
        """The finding of gradient clipping the Keras optimizer does (E2K103)."""
        if not self.ctx.enabled("E2K103"):
            self.refuse(node, "gradient clipping is converted by E2K103, which is disabled")
        if self.plan is not None and self.plan.unit.config_value("train_distribute") is not None:
            self.leftover(
                node,
                "TF1 clipped each replica's gradients before summing them, as Keras 3 does; Keras 2 (TensorFlow "
                "2.15) clips the summed gradient, so there the steps differ on several replicas whenever clipping "
                "triggers; check with e2k parity",
                "E2K103",
            )
        elif self.plan is not None:
            self.plan.fixed(node, "E2K103", f"gradient clipping -> {clip_keyword}=")

    def read_clipping(self, grads_and_vars, at: int):
        """(Keras keyword, threshold, the compute_gradients assignment) of a clipping idiom."""
        if grads_and_vars is None:
            self.refuse(self.fn, "apply_gradients has no gradients")
        # A: gradients, variables = zip(*opt.compute_gradients(loss))
        #    gradients, _ = tf.clip_by_global_norm(gradients, c)
        #    opt.apply_gradients(zip(gradients, variables))
        if isinstance(grads_and_vars, cst.Call) and _emit.code(grads_and_vars.func) == "zip" and len(grads_and_vars.args) == 2:
            grads, variables = (a.value for a in grads_and_vars.args)
            clipped = self.latest_def(grads.value, at) if isinstance(grads, cst.Name) else None
            if clipped is None or self.ctx.call_api_path(clipped.value) != "clip_by_global_norm" or _unpacked(clipped, grads.value) != 0:
                self.refuse(grads_and_vars, "these gradients are not clipped with tf.clip_by_global_norm")
            raw = clipped.value.args[0].value
            computed = self.latest_def(raw.value, clipped.index) if isinstance(raw, cst.Name) else None
            if computed is None or not _is_zip_star(computed.value) or _unpacked(computed, raw.value) != 0:
                self.refuse(raw, "the clipped gradients do not come from zip(*optimizer.compute_gradients(loss))")
            if not (isinstance(variables, cst.Name) and _unpacked(self.latest_def(variables.value, at), variables.value) == 1):
                self.refuse(variables, "the variables are not those compute_gradients returned")
            self.consumed.update({clipped.small, computed.small})
            inner = computed.value.args[0].value
            if isinstance(inner, cst.Name):
                # `grads_and_vars = opt.compute_gradients(loss)` then `zip(*grads_and_vars)`.
                named = self.latest_def(inner.value, computed.index)
                if named is None:
                    self.refuse(inner, "the gradients are not computed in the model_fn")
                self.consumed.add(named.small)
                return "global_clipnorm", clipped.value.args[1].value, named
            return "global_clipnorm", clipped.value.args[1].value, _Def(computed.index, "", computed.small, inner, computed.line)
        # B: capped = [(tf.clip_by_norm(g, c), v) for g, v in opt.compute_gradients(loss)]
        if isinstance(grads_and_vars, cst.Name):
            d = self.latest_def(grads_and_vars.value, at)
            if d is not None and isinstance(d.value, cst.ListComp):
                keyword, value, source = self._clipped_comprehension(d.value)
                self.consumed.add(d.small)
                if isinstance(source, cst.Name):
                    computed = self.latest_def(source.value, d.index)
                    if computed is None:
                        self.refuse(source, "the gradients are not computed in the model_fn")
                    self.consumed.add(computed.small)
                    return keyword, value, computed
                return keyword, value, _Def(d.index, "", d.small, source, d.line)
        self.refuse(grads_and_vars, "these gradients are not a clipping idiom e2k converts")

    def _clipped_comprehension(self, comp: cst.ListComp):
        element, loop = comp.elt, comp.for_in
        if loop.inner_for_in is not None or not isinstance(element, cst.Tuple) or len(element.elements) != 2:
            self.refuse(comp, "this gradient comprehension is not a clipping idiom e2k converts")
        for condition in loop.ifs:
            if not _emit.code(condition.test).endswith("is not None"):
                self.refuse(condition, "this gradient filter is not converted")
        names = [e.value.value for e in loop.target.elements] if isinstance(loop.target, cst.Tuple) else []
        clip, var = (e.value for e in element.elements)
        path = self.ctx.call_api_path(clip) if isinstance(clip, cst.Call) else None
        if len(names) != 2 or not (isinstance(var, cst.Name) and var.value == names[1]) or path is None:
            self.refuse(comp, "this gradient comprehension is not a clipping idiom e2k converts")
        args = [a.value for a in clip.args]
        if not (args and isinstance(args[0], cst.Name) and args[0].value == names[0]):
            self.refuse(clip, "the clip is not applied to the gradient")
        if path == "clip_by_norm" and len(args) == 2:
            return "clipnorm", args[1], loop.iter
        if path == "clip_by_value" and len(args) == 3 and _emit.code(args[1]) == "-" + _emit.code(args[2]).lstrip("+"):
            return "clipvalue", args[2], loop.iter
        self.refuse(clip, "only clip_by_norm(g, c) and clip_by_value(g, -c, c) are converted")

    def is_global_step(self, node: cst.BaseExpression, at: int) -> bool:
        if isinstance(node, cst.Call) and node.args and node.args[0].keyword is None \
                and (self.ctx.call_api_path(node) or "").removeprefix("compat.v1.") in STEP_CASTS:
            # `tf.cast(global_step, tf.int32)` (official models' piecewise_constant): the same
            # count, which a Keras schedule is given as the optimizer's iterations.
            return self.is_global_step(node.args[0].value, at)
        if isinstance(node, cst.Call):
            return self.ctx.call_api_path(node) in GLOBAL_STEP
        if isinstance(node, cst.Name):
            d = self.latest_def(node.value, at)
            if d is not None and isinstance(d.value, cst.Call) and self.ctx.call_api_path(d.value) in GLOBAL_STEP:
                self.consumed.add(d.small)
                return True
        return False

    def builder_slice(self, roots: list[_Def], at: int, extra: list[cst.CSTNode] = ()) -> list[_Def]:
        """The assignments the builder needs (the optimizer, its schedule, their inputs)."""
        needed: dict[int, _Def] = {}
        pending = list(roots)
        for node in extra:
            pending.extend(self._defs_read(node, at))
        while pending:
            d = pending.pop()
            if d.index in needed:
                continue
            needed[d.index] = d
            for name in self.names_read(d.value):
                if name.value in ("features", "labels"):
                    self.refuse(name, "the optimizer depends on the features or labels")
            if isinstance(d.value, cst.Call) and self.role(d.value) == "optimizer":
                # what its learning rate computes from the global step is the schedule's (translate_builder_def)
                for arg in d.value.args:
                    if not _hand_schedule.reads_global_step(self, arg.value, d.index):
                        pending.extend(self._defs_read(arg.value, d.index))
                continue
            if not (isinstance(d.value, cst.Call) and self.role(d.value) == "schedule") \
                    and _hand_schedule.reads_global_step(self, d.value, d.index):
                # `lr = learn_rate(params, tf.train.get_global_step())`: the builder would compute
                # it once, where the Estimator computed it at every step: a schedule class
                # computes it at the optimizer's step (translate_builder_def).
                self.hand_schedule_defs.add(d.index)
                continue
            pending.extend(self._defs_read(d.value, d.index))
        return [needed[i] for i in sorted(needed)]

    def _defs_read(self, node: cst.CSTNode, before: int) -> list[_Def]:
        found = []
        for name in self.names_read(node):
            d = self.latest_def(name.value, before)
            if d is not None:
                if isinstance(d.value, cst.Call) and self.ctx.call_api_path(d.value) in GLOBAL_STEP:
                    self.consumed.add(d.small)
                    continue
                found.append(d)
        return found

    # -- what comes after the model: metrics and predictions ----------------------------------
    def post_slice(self, roots: list[cst.BaseExpression], at: int) -> list[_Def]:
        """Assignments computing ``roots`` from the model output (and features), without layers."""
        needed: dict[int, _Def] = {}
        pending = [(name, at) for root in roots for name in self.names_read(root)]
        while pending:
            name, before = pending.pop()
            if name.value in ("features", "tf", self.tf) or name.value in self.arguments or self.is_model_output(name.value):
                continue
            if name.value == "labels":
                self.refuse(name, "the predictions depend on the labels")
            d = self.latest_def(name.value, before)
            if d is None:
                if self._is_module_name(name):
                    continue
                self.refuse(name, f"`{name.value}` is not computed in the model_fn")
            if d.small in self.forward_smalls:
                # A tensor of the forward pass (`"hidden": hidden`): predict_step runs the
                # model's forward code itself to have it (from_outputs).
                continue
            if d.index in needed:
                continue
            for call in iter_calls(d.value):
                if self.layer_app(call) is not None:
                    self.refuse(call, "a layer used only for predictions or metrics is not converted")
            needed[d.index] = d
            pending.extend((n, d.index) for n in self.names_read(d.value))
        return [needed[i] for i in sorted(needed)]

    def derive(self, expr: cst.BaseExpression, at: int) -> Derived | None:
        """How ``expr`` (a metric's predictions) is computed from the model output."""
        env = getattr(self, "metric_env", None) or {}
        for _ in range(20):
            if isinstance(expr, cst.Name) and expr.value in env and self._in_metric_fn(expr):
                expr, at = env[expr.value], len(self.order)  # metric_fn's: what it stands for
                continue
            if isinstance(expr, cst.Name):
                if self.is_model_output(expr.value):
                    return Derived("output")
                d = self.latest_def(expr.value, at)
                if d is None or not isinstance(d.small, cst.Assign):
                    return None
                expr, at = d.value, d.index
                continue
            if isinstance(expr, cst.Call):
                path = self.ctx.call_api_path(expr) or ""
                first = expr.args[0].value if expr.args else None
                if path in ("cast", "dtypes.cast", "to_int32", "to_int64", "to_float") and first is not None:
                    expr = first
                    continue
                inner = self.derive(first, at) if first is not None else None
                # softmax keeps the order of the logits: the argmax of either is the class.
                if path in ("argmax", "math.argmax") and inner in (Derived("output"), Derived("softmax")) and self._axis_is_last(expr):
                    return Derived("argmax")
                if path in ("sigmoid", "nn.sigmoid", "math.sigmoid") and inner == Derived("output"):
                    return Derived("sigmoid")
                if path in ("nn.softmax", "math.softmax") and inner == Derived("output"):
                    return Derived("softmax")
                if path in ("round", "math.round") and inner == Derived("sigmoid"):
                    return Derived("positive")
                if path in ("round", "math.round") and inner == Derived("output"):
                    return Derived("rounded")
                if path in ("greater", "math.greater") and len(expr.args) == 2:
                    return self._threshold(inner, expr.args[1].value)
                return None
            if isinstance(expr, cst.Subscript) and len(expr.slice) == 2 and isinstance(expr.slice[0].slice, cst.Slice) \
                    and _emit.code(expr.slice[0].slice).strip() == ":" and isinstance(expr.slice[1].slice, cst.Index) \
                    and _emit.code(expr.slice[1].slice.value) == "1":
                # `probabilities[:, 1]` of two classes' softmax: the positive class's probability.
                return Derived("softmax_positive") if self.derive(expr.value, at) == Derived("softmax") else None
            if isinstance(expr, cst.Subscript):
                element = self._dict_element(expr, at)
                if element is None:
                    return None
                expr, at = element
                continue
            if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1 and isinstance(expr.comparisons[0].operator, cst.GreaterThan):
                return self._threshold(self.derive(expr.left, at), expr.comparisons[0].comparator)
            return None
        return None

    def _dict_element(self, subscript: cst.Subscript, at: int):
        """``predictions["classes"]`` where ``predictions = {"classes": ...}``: that value."""
        if not (isinstance(subscript.value, cst.Name) and len(subscript.slice) == 1):
            return None
        index = subscript.slice[0].slice
        key = index.value if isinstance(index, cst.Index) else None
        if not isinstance(key, cst.SimpleString):
            return None
        d = self.latest_def(subscript.value.value, at)
        if d is None or not isinstance(d.value, cst.Dict):
            return None
        for element in d.value.elements:
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString):
                if element.key.evaluated_value == key.evaluated_value:
                    return element.value, d.index
        return None

    def _threshold(self, inner: Derived | None, value: cst.BaseExpression) -> Derived | None:
        number = float(value.value) if isinstance(value, (cst.Integer, cst.Float)) else None
        if inner == Derived("output") and number == 0.0 or inner == Derived("sigmoid") and number == 0.5:
            return Derived("positive")
        if inner == Derived("output") and number == 0.5:
            return Derived("rounded")  # the model outputs probabilities
        return None

    def _axis_is_last(self, call: cst.Call) -> bool:
        axis = None
        for i, arg in enumerate(call.args):
            if (arg.keyword is None and i == 1) or (arg.keyword is not None and arg.keyword.value in ("axis", "dimension")):
                axis = arg.value
        if axis is None:
            return False
        text = _emit.code(axis)
        return text in ("1", "-1")

    def _in_metric_fn(self, node: cst.CSTNode) -> bool:
        """Is ``node`` code of the model_fn's metric_fn (outside the model_fn itself)?"""
        return not self.ctx.within(node, (self.fn,)) or self._inside_nested_def(node)

    def _inside_nested_def(self, node: cst.CSTNode) -> bool:
        current = self.ctx.parent(node)
        while current is not None and current is not self.fn:
            if isinstance(current, cst.FunctionDef):
                return True
            current = self.ctx.parent(current)
        return False

    def read_metrics(self, ops: cst.BaseExpression | None) -> list[cst.BaseExpression]:
        metrics, keys = self._read_metrics(ops)
        if self.plan is not None:
            # The Estimator's evaluate() gave the loss, the global step and every key of
            # eval_metric_ops; the Keras model's gives the loss and the converted metrics. Their
            # reads are checked where evaluate()'s result is read (_eval_result).
            self.plan.eval_keys = ({"loss", "global_step", *keys}, {"loss", *(k for k, _ in metrics)})
        return [metric for _, metric in metrics]

    def _read_metrics(self, ops: cst.BaseExpression | None):
        if ops is None:
            return [], []
        at = len(self.order)
        origin: dict[int, cst.CSTNode] = {}  # an item set on its own (`ops["auc"] = ...`) -> its statement
        if isinstance(ops, cst.Name):
            d = self.latest_def(ops.value, at)
            if d is None:
                self.refuse(ops, "eval_metric_ops is not a dict built in the model_fn")
            self.consumed.add(d.small)
            name, ops, at = ops.value, d.value, d.index
            if isinstance(ops, cst.Dict):
                # `metrics = {}` then `metrics["auc"] = ...`: the items set after it, in order.
                runs = self.mode_smalls.get(self.mode)
                items = [(i, key, value, small) for i, key, value, small in self.item_sets.get(name, ())
                         if i > at and (runs is None or small in runs)]
                if items:
                    added = [(cst.DictElement(cst.SimpleString(repr(key).replace("'", '"')), value), small)
                             for _, key, value, small in items]
                    origin.update((id(element), small) for element, small in added)
                    ops = ops.with_changes(elements=[*ops.elements, *(element for element, _ in added)])
                    at = items[-1][0] + 1
                    self.consumed.update(small for *_, small in items)
        if isinstance(ops, cst.Call) and isinstance(ops.func, cst.Name) and self._train_op_helper(ops) is not None:
            ops = self._metrics_of_helper(ops, self._train_op_helper(ops))
        if not isinstance(ops, cst.Dict):
            self.refuse(ops, "eval_metric_ops is not a dict e2k can read")
        metrics, keys = [], []
        for element in ops.elements:
            if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
                self.refuse(element, "eval_metric_ops keys must be strings")
            key = element.key.evaluated_value
            keys.append(key)
            value, value_at = element.value, at
            if isinstance(value, cst.Tuple) and len(value.elements) == 2 and all(
                    isinstance(e.value, cst.Name) for e in value.elements):
                # `acc, acc_op = tf.metrics.accuracy(...)` then `{"accuracy": (acc, acc_op)}`:
                # the pair the metric call returned, as it returned it.
                value_op, update_op = (self.latest_def(e.value.value, at) for e in value.elements)
                if value_op is not None and value_op is not update_op and value_op.small is getattr(update_op, "small", None) \
                        and _unpacked(value_op, value_op.name) == 0 and _unpacked(update_op, update_op.name) == 1:
                    value = cst.Name(value_op.name)
            env = getattr(self, "metric_env", None) or {}
            if isinstance(value, cst.Name) and value.value in env and self._in_metric_fn(value):
                value = env[value.value]  # a metric_fn's local (TPUEstimatorSpec's eval_metrics)
            elif isinstance(value, cst.Name):
                d = self.latest_def(value.value, at)
                if d is not None:
                    self.consumed.add(d.small)
                    value, value_at = d.value, d.index
            where = origin.get(id(element), element)
            if not (isinstance(value, cst.Call) and self.role(value) == "metric"):
                self.leftover(where, f"eval metric {key!r} is not a tf.metrics call e2k converts; add it to compile(metrics=...) by hand", "E2K202")
                continue
            value = self._without_label_lookup(value, value_at)
            value = self._accuracy_in_order(value, value_at)
            try:
                metric = self.translate("metric", value, key, lambda e, _at=value_at: self.derive(e, _at))
                if isinstance(metric, MetricConversion):
                    for definition in metric.definitions:
                        if not any(definition.deep_equals(known) for known in self.definitions):
                            self.definitions.append(definition)
                    metric = metric.metric
                metrics.append((key, metric))
            except Unsupported as exc:
                self.leftover(where, f"eval metric {key!r} is not converted: {exc.reason}", exc.code or "E2K202")
        return metrics, keys

    def _without_label_lookup(self, call: cst.Call, at: int) -> cst.Call:
        """A metric of the ids the model_fn's label table gave (``tf.metrics.accuracy(
        label_indices, predicted_indices)``): the same metric of the labels as they come, which
        the model's preprocess numbered so (``_label_table``)."""
        args = []
        for arg in call.args:
            looked_up = self.label_lookup(arg.value, at) if self.label_table is not None else None
            args.append(arg if looked_up is None else arg.with_changes(value=looked_up))
        return call.with_changes(args=args)

    def _accuracy_in_order(self, call: cst.Call, at: int) -> cst.Call:
        """``tf.metrics.accuracy(classes, labels)``, the predictions given as the labels: the
        same metric (it counts where the two are equal), its arguments in their places."""
        from estimator2keras._units import bind_arguments

        if (self.ctx.call_api_path(call) or "").removeprefix("compat.v1.") != "metrics.accuracy":
            return call
        try:
            args = bind_arguments(call, ("labels", "predictions", "weights", "metrics_collections",
                                         "updates_collections", "name"))
        except Unsupported:
            return call
        labels, predictions = args.get("labels"), args.get("predictions")
        if labels is None or predictions is None or not self._is_labels(predictions.value, at) \
                or self._is_labels(labels.value, at) or self.derive(labels.value, at) is None:
            return call
        swapped = {id(labels): predictions, id(predictions): labels}
        new_args = []
        for arg in call.args:
            other = swapped.get(id(arg))
            if other is None:
                new_args.append(arg)
            else:
                new_args.append(cst.Arg(other.value, keyword=cst.Name("labels" if arg is labels else "predictions"),
                                        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
        return call.with_changes(args=new_args)

    def _is_labels(self, expr: cst.BaseExpression, at: int) -> bool:
        """``expr`` holds the model_fn's labels as they come (through names bound to them)."""
        env = getattr(self, "metric_env", None) or {}
        for _ in range(20):
            if not isinstance(expr, cst.Name):
                return False
            if expr.value in env and self._in_metric_fn(expr):
                expr, at = env[expr.value], len(self.order)
                continue
            d = self.latest_def(expr.value, at)
            if d is None:
                return expr.value == "labels"
            if not isinstance(d.small, cst.Assign):
                return False
            expr, at = d.value, d.index
        return False

    def _metrics_of_helper(self, call: cst.Call, helper: cst.FunctionDef) -> cst.BaseExpression:
        """``eval_metric_ops = eval_metrics(classes, labels, mode)``, a function of the program
        returning the dict (under ``if mode == EVAL:`` or not): the dict EVAL gets, its names
        replaced by what they stand for there, the function's parameters by the call's values."""
        what, bound, modes = self._helper_call(call, helper, "the eval metrics")
        env: dict[str, cst.BaseExpression] = {}
        returned = self._train_op_statements(list(helper.body.body), helper, what, modes, env, "eval",
                                             "the eval metrics")
        if not isinstance(returned, cst.Dict):
            self.refuse(call, f"{what} does not return a dict of metrics e2k can read")
        for key in modes:
            if any(isinstance(n, cst.Name) and n.value == key for n in _walk(returned)) \
                    or any(isinstance(n, cst.Name) and n.value == key for v in env.values() for n in _walk(v)):
                self.refuse(call, f"{what} computes its metrics with the mode")
        for name, value in bound.items():
            if name in modes:
                continue
            if not isinstance(value, cst.Name) or name in env:
                self.refuse(call, f"{what} is given `{_emit.code(value)}`: e2k reads a metrics function given the "
                                  "model_fn's names")
            env[name] = value
        # Read as a TPU metric_fn's dict is: its names stand for what the call and its
        # assignments give them (derive, _read_metrics).
        self.metric_env = env
        if self.plan is not None:
            from estimator2keras._units import accesses_of

            reads = accesses_of(self.ctx, helper.name)
            if reads and all(self.ctx.within(r, (self.fn,)) for r in reads):
                self.plan.remove_statement(helper)  # only the converted model_fn used it
            self.plan.fixed(call, "E2K202", f"the eval metrics {what} returns -> compile(metrics=...)")
        return returned

    def read_predictions(self, predictions: cst.BaseExpression | None):
        """(post-model assignments, predictions expression) for predict_step, or None."""
        if predictions is None:
            return None
        at = len(self.order)
        if isinstance(predictions, cst.Name) and not self.is_model_output(predictions.value):
            d = self.latest_def(predictions.value, at)
            if d is not None and isinstance(d.value, cst.Dict):
                self.consumed.add(d.small)
                predictions, at = d.value, d.index
        if isinstance(predictions, cst.Name) and self.is_model_output(predictions.value):
            return None  # Keras predict returns the model output, as the Estimator yielded it
        return self.post_slice([predictions], at), predictions

    def read_export_output(self, prediction):
        """The dict of the export's PredictOutput when it is not the PREDICT predictions
        (kubeflow's ``PredictOutput({"predictions": probabilities, "classes": classes})``
        beside ``predictions={"class": ..., "prob": ...}``): (post-model assignments, the
        dict) for a method of its own, which the export's serving function calls; None when
        every export output gives the predictions (or there is no export)."""
        from estimator2keras._export import PREDICT_OUTPUT, _same_predictions

        if self.plan is None or self.plan.spec_export_outputs is None:
            return None
        outputs, follow = self.plan.spec_export_outputs
        outputs = follow(outputs)
        if not isinstance(outputs, cst.Dict):
            return None  # refused where the export is converted
        predictions = follow(self.plan.spec_predictions) if self.plan.spec_predictions is not None else None
        same, other = [], []
        for element in outputs.elements:
            value = follow(element.value) if isinstance(element, cst.DictElement) else None
            if not (isinstance(value, cst.Call) and self.ctx.call_api_path(value) in PREDICT_OUTPUT
                    and len(value.args) == 1):
                continue  # regression / classification outputs: the export's rules say
            given = follow(value.args[0].value)
            if _same_predictions(self.ctx, given, predictions):
                same.append(given)
            else:  # as written: a name of the model output is not followed into the model
                other.append(value.args[0].value)
        if not other:
            return None
        if same or any(not o.deep_equals(other[0]) for o in other[1:]):
            self.refuse(other[0], "the export outputs give different dicts (one a PredictOutput of the predictions, "
                                  "another of something else): e2k writes one serving method per model")
        at = len(self.order)
        value = other[0]
        if isinstance(value, cst.Name) and not self.is_model_output(value.value):
            d = self.latest_def(value.value, at)
            if d is not None and isinstance(d.value, cst.Dict):
                self.consumed.add(d.small)
                value, at = d.value, d.index
        post = self.post_slice([value], at)
        if not isinstance(value, cst.Dict):
            # PredictOutput(tensor): TF1 named its one output "output".
            value = cst.Dict([cst.DictElement(cst.SimpleString('"output"'), value)])
        return post, value

    # -- everything accounted for ------------------------------------------------------------
    def check_rest(self, paths) -> None:
        """Every statement the Estimator ran must be in the Keras program, or reported."""
        for path in paths:
            for small in path.statements:
                if small in self.consumed or small in self.forward_smalls or small in self.kept:
                    continue
                if isinstance(small, cst.Expr):
                    call = small.value
                    what = self.ctx.call_api_path(call) if isinstance(call, cst.Call) else None
                    if what and what.startswith(SUMMARIES):
                        self.summary_dropped(small)
                    elif what == "identity" and self.plan is not None:
                        # `tf.identity(loss, "cross_entropy")` only named a graph tensor (for a
                        # LoggingTensorHook, reported with the hook): it computes nothing.
                        self.plan.fixed(small, "E2K001", "tf.identity(...) that only named a graph tensor is left out")
                    elif isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                            and isinstance(call.func.value, cst.Name) and any(d.name == call.func.value.value for d in self.defs):
                        # `layers.remove(...)`: a change to a value of the model_fn, which the
                        # Keras model would then lack (fail closed: the unit is left as it was).
                        self.refuse(small, f"`{_emit.code(call.func)}(...)` changes `{call.func.value.value}` in place, "
                                           "which e2k does not carry over")
                    else:
                        self.leftover(small, "this statement ran when the Estimator built its graph; it is not carried over")
                    self.consumed.add(small)
                    continue
                d = self.def_of_small.get(small)
                if any(small is item[3] for items in self.item_sets.values() for item in items):
                    target = small.targets[0].target
                    self.refuse(small, f"an assignment to `{_emit.code(target)}` (an item of an object) in the model_fn "
                                       "is not converted (e2k reads the items of eval_metric_ops set one by one)")
                if d is None and isinstance(small, cst.If):
                    self.leftover(small, "this `if` assigns nothing the Keras model reads; it is not carried over")
                    self.consumed.add(small)
                    continue
                if d is not None and self.is_update_ops(d.value):
                    self.consumed.add(small)
                    continue
                if d is not None and d.name in self.modes.flags:
                    self.consumed.add(small)
                    continue
                if d is not None:
                    for call in iter_calls(d.value):
                        if self.role(call) in MAKERS:
                            self.refuse(small, "a layer that does not lead to the loss is not converted")
                    self.consumed.add(small)  # a value nothing converted reads: no longer computed

    def summary_dropped(self, small: cst.BaseSmallStatement) -> None:
        """A summary only reaches a human through the Estimator's model_dir: without one it
        went to a temporary directory, and leaving it out loses nothing one could see."""
        unit = self.plan.unit if self.plan is not None else None
        has_dir = unit is not None and (unit.arg_value("model_dir") is not None or unit.config_value("model_dir") is not None)
        if has_dir:
            logged = self._logged_by_keras(small)
            if logged == LEARNING_RATE_LOGGED:
                # `tf.summary.scalar("learning_rate", lr)` of the optimizer's (decayed) rate.
                self.plan.fixed(small, "E2K404", "summary of the learning rate left out: the TensorBoard callback "
                                                 "writes the optimizer's learning rate (on Keras 2, that of a "
                                                 "schedule) at the end of each epoch")
                return
            if logged is not None:
                # `tf.summary.scalar("train_accuracy", accuracy[1])`: what Keras logs itself.
                self.plan.fixed(small, "E2K404", f"summary of {logged} left out: Keras logs it at every step, and "
                                                 "the TensorBoard callback writes it to model_dir/train")
                return
            self.leftover(small, "summaries in the model_fn are not carried over; Keras logs metrics with the TensorBoard callback", "E2K404")
        elif self.plan is not None:
            self.plan.fixed(small, "E2K404", "summary left out: without a model_dir it went to a temporary directory")

    def _logged_by_keras(self, small: cst.BaseSmallStatement) -> str | None:
        """What a ``tf.summary.scalar`` writes, when it is the training loss or a metric the
        Keras model compiles (the values Keras logs and TensorBoard writes); else None."""
        from estimator2keras._hook_values import GLOBAL_STEP, LEARNING_RATE, _classify

        call = small.value if isinstance(small, cst.Expr) else None
        if self.plan is None or not isinstance(call, cst.Call) or self.ctx.call_api_path(call) not in (
                "summary.scalar", "contrib.summary.scalar"):
            return None
        args = [a for a in call.args if a.keyword is None]
        value = next((a.value for a in call.args if a.keyword is not None and a.keyword.value in ("tensor", "data")),
                     args[1].value if len(args) > 1 else None)
        if value is None:
            return None
        try:
            found = _classify(self.ctx, self.plan, self.fn, small, value)
        except Unsupported:
            return None
        if found is not None and found.read == LEARNING_RATE:
            return LEARNING_RATE_LOGGED
        if found is None or found.read == GLOBAL_STEP:
            return None
        return found.what

    def check_regularizers(self, regularized: bool) -> None:
        if regularized:
            return
        for app in self.layer_apps.values():
            if isinstance(app.constructor, cst.Call):
                for arg in app.constructor.args:
                    if arg.keyword and arg.keyword.value.endswith("_regularizer") and _emit.code(arg.value) != "None":
                        # At the layer as the model_fn wrote it (the constructor is e2k's own code).
                        self.refuse(app.call, f"this layer's `{arg.keyword.value}` was not part of the Estimator's loss "
                                              "(the model_fn does not add tf.losses.get_regularization_loss()); Keras "
                                              "would add it")


def _is_zip_star(node: cst.BaseExpression) -> bool:
    """``zip(*x)``."""
    return (
        isinstance(node, cst.Call) and _emit.code(node.func) == "zip" and len(node.args) == 1 and node.args[0].star == "*"
    )


def _not_an_optimizer(value: cst.BaseExpression | None) -> str:
    """Why the optimizer is refused, naming what makes it (``hvd.DistributedOptimizer(...)``,
    a wrapper no rule converts) where e2k can tell."""
    if isinstance(value, cst.Call) and isinstance(value.func, (cst.Name, cst.Attribute)):
        from estimator2keras import _emit

        return (f"the optimizer is made by `{_emit.code(value.func)}(...)`, which is not a tf.train optimizer "
                "e2k converts")
    return "the optimizer is not a tf.train optimizer e2k converts"


#: TF1's MomentumOptimizer: ``accum = momentum * accum + gradient; var -= lr * accum``. Keras
#: SGD keeps ``m = momentum * m - lr * gradient; var += m``: the same while the rate is
#: constant, not after it changes (a decay). Keras 2 and Keras 3 keep ``m`` in ``momentums``.
TF1_MOMENTUM = '''
class {name}({tf}.keras.optimizers.SGD):
    """SGD with momentum as TF1's MomentumOptimizer updated: the accumulated gradients times the
    current learning rate (Keras SGD accumulates each gradient times the rate of its step)."""

    def update_step(self, gradient, variable, *learning_rate):
        if self.momentum == 0 or self.nesterov or isinstance(gradient, {tf}.IndexedSlices):
            return super().update_step(gradient, variable, *learning_rate)
        lr = {tf}.cast(learning_rate[0] if learning_rate else self.learning_rate, variable.dtype)
        if hasattr(self, "_get_variable_index"):  # Keras 3
            accumulation = self.momentums[self._get_variable_index(variable)]
        else:  # Keras 2 (TF 2.15)
            accumulation = self.momentums[self._index_dict[self._var_key(variable)]]
        accumulation.assign(accumulation * self.momentum + gradient)
        variable.assign_sub(lr * accumulation)
'''
