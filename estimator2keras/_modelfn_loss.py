"""Reading a model_fn's loss: the Keras loss it becomes, the model output it compares with the
labels, and the statements that make it up (``_LossReader``, a part of ``_modelfn._Converter``).

A loss that no loss rule maps (a hand-written one: reductions, arithmetic with constants,
Keras losses with reduction NONE, ops on the labels and the model output) becomes a small
``tf.keras.losses.Loss`` subclass that computes what the Estimator computed on each replica's
batch (rule E2K204, ``rewrites/hand_written_loss_to_keras.py``, documents why it looks as it
does).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import iter_calls
from estimator2keras._modelfn_read import BEYOND_CATALOGUE, REGULARIZATION_LOSS, LossConversion, _Def, _unpacked, _walk
from estimator2keras._rule import Unsupported

HAND_WRITTEN = "E2K204"
#: Calls through which the labels keep their values whatever rank Keras hands them in.
_CASTS = frozenset({"cast", "to_float", "to_int32", "to_int64", "dtypes.cast"})
#: tf.nn per-example cross-entropies -> the Keras loss function of the same per-example values
#: (which takes the labels in either rank Keras hands them, and casts them itself).
_NN_PER_EXAMPLE = {
    "nn.sparse_softmax_cross_entropy_with_logits": "sparse_categorical_crossentropy",
    "nn.softmax_cross_entropy_with_logits": "categorical_crossentropy",
    "nn.softmax_cross_entropy_with_logits_v2": "categorical_crossentropy",
}
#: Keras loss functions that give the same values for labels of [batch] and [batch, 1] (a
#: loss object matches the ranks itself; `mean_squared_error(labels, x)` does not).
_KERAS_RANKLESS = frozenset({"keras.losses.sparse_categorical_crossentropy", "keras.losses.categorical_crossentropy"})
#: TF1's collection of losses, read back.
_COLLECTED_LOSSES = frozenset({"losses.get_total_loss", "losses.get_losses", "losses.add_loss"})
#: Ops whose result needs integer labels (Keras 3 hands a loss float32 labels).
_INTEGER_OPS = frozenset({
    "one_hot", "gather", "gather_nd", "nn.embedding_lookup", "equal", "math.equal", "not_equal",
    "math.not_equal", "nn.in_top_k", "math.in_top_k", "math.bincount", "bincount", "math.unsorted_segment_sum",
})
#: Calls that read the model's variables or the graph rather than the labels and the output.
_INTERNALS = BEYOND_CATALOGUE | {"losses.get_regularization_losses", "get_collection", "trainable_variables"}


class _LossReader:
    def read_loss(self, loss: cst.BaseExpression, at: int):
        """The Keras loss, the model output expression, and the statements that make up the loss
        (a weight penalty over the model's variables among them: ``self.penalty``)."""
        self.penalty = None
        self.own_loss = None  # a loss only the model can compute (`_OwnLoss`)
        conversion, at, used, regularized = self._read_loss(loss, at)
        if self.penalty is not None:
            used = used + [d for d in self.penalty.defs if d not in used]
        return conversion, at, used, regularized

    def _read_loss(self, loss: cst.BaseExpression, at: int):
        used: list[_Def] = []
        regularized = False
        expr = loss
        while True:
            if isinstance(expr, cst.Call) and self.ctx.call_api_path(expr) == "losses.get_total_loss":
                # `tf.losses.sparse_softmax_cross_entropy(...)` then `loss = tf.losses.get_total_loss()`:
                # the collection's one loss, and the regularization losses unless told not.
                expr, at, added = self._total_loss(expr, at)
                regularized = regularized or added
                continue
            if isinstance(expr, cst.Name):
                d = self.latest_def(expr.value, at)
                if d is None:
                    self.refuse(expr, f"`{expr.value}` is not computed in the model_fn")
                used.append(d)
                if isinstance(d.small, cst.AugAssign):
                    if isinstance(d.small.operator, cst.AddAssign) and self.weight_penalty(d.value, d.index):
                        at = d.index  # `loss += l2_loss`
                        continue
                    if not (isinstance(d.small.operator, cst.AddAssign) and self._is_regularization(d.value)):
                        self.refuse(d.small, "this change to the loss is not converted")
                    regularized = True
                    at = d.index
                    continue
                position = _unpacked(d, d.name)
                if position is not None:
                    expr = self._unpacked_loss(d, position)
                    at = d.index
                    continue
                expr, at = d.value, d.index
                continue
            if isinstance(expr, cst.Call) and self.ctx.call_api_path(expr) == "identity" and expr.args \
                    and expr.args[0].keyword is None:
                expr = expr.args[0].value  # `loss = tf.identity(loss, name="xent")` names the same value
                continue
            if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
                if self._is_regularization(expr.right):
                    regularized, expr = True, expr.left
                    continue
                if self._is_regularization(expr.left):
                    regularized, expr = True, expr.right
                    continue
                if self.weight_penalty(expr.right, at):
                    expr = expr.left
                    continue
                if self.weight_penalty(expr.left, at):
                    expr = expr.right
                    continue
            if isinstance(expr, cst.Call) and self.ctx.call_api_path(expr) in ("add", "math.add") \
                    and len(expr.args) in (2, 3) and all(a.keyword is None for a in expr.args[:2]) \
                    and all(a.keyword is not None and a.keyword.value == "name" for a in expr.args[2:]):
                left, right = (a.value for a in expr.args[:2])  # `tf.add(cross_entropy, l2_loss)`
                if self.weight_penalty(right, at):
                    expr = left
                    continue
                if self.weight_penalty(left, at):
                    expr = right
                    continue
            break
        if not isinstance(expr, cst.Call) or self.role(expr) != "loss":
            if not self._hand_written_enabled():
                self.refuse(expr, "the loss is not a call e2k converts (tf.losses.* or a cross-entropy idiom)")
            conversion, defs = self.hand_written_loss(expr, at, used)
            return conversion, at, used + defs, regularized
        try:
            conversion: LossConversion = self.translate("loss", expr)
        except Unsupported as refused:
            if not self._hand_written_enabled():
                raise
            try:  # `tf.reduce_mean(x, axis=1)`: a reduction no loss rule maps, written by hand
                conversion, defs = self.hand_written_loss(expr, at, used)
            except Unsupported:
                raise refused from None
            return conversion, at, used + defs, regularized
        labels = self.resolve(conversion.labels, at)
        labels, conversion = self.sparse_labels(labels, conversion, at)
        looked_up = self.label_lookup(labels, at)
        if looked_up is not None:  # `table.lookup(labels)`: the model's preprocess numbers them
            labels, conversion = self.sparse_labels(self.resolve(looked_up, at), conversion, at)
        if not (isinstance(labels, cst.Name) and labels.value == "labels"):
            refused = Unsupported("the loss does not compare the model_fn's `labels` as they come", conversion.labels, "E2K901")
            if not self._hand_written_enabled():
                raise refused
            try:  # `labels=tf.squeeze(labels, axis=[1])`: the labels the loss computes with, by hand
                conversion, defs = self.hand_written_loss(expr, at, used)
            except Unsupported:
                raise refused from None
            return conversion, at, used + defs, regularized
        return conversion, at, used, regularized

    def _total_loss(self, call: cst.Call, at: int) -> tuple[cst.BaseExpression, int, bool]:
        """``tf.losses.get_total_loss()``: the one ``tf.losses.*`` loss the model_fn made before
        it (which the graph's LOSSES collection held), its index, and whether the regularization
        losses are added (``add_regularization_losses=True``, the default)."""
        from estimator2keras._units import bind_arguments

        args = bind_arguments(call, ("add_regularization_losses", "name", "scope"))
        add = args.get("add_regularization_losses")
        if "scope" in args or add is not None and _emit.code(add.value) not in ("True", "False"):
            self.refuse(call, "get_total_loss(scope=...) or a computed add_regularization_losses= is not converted")
        runs = self.mode_smalls.get(self.mode)
        made = []
        for small, index in self.order.items():
            if index >= at or runs is not None and small not in runs:
                continue
            value = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
            if isinstance(value, cst.Call) and self.role(value) == "loss":
                made.append((small, index, value))
        if len(made) != 1:
            self.refuse(call, f"get_total_loss() sums the graph's loss collection, which holds {len(made)} tf.losses "
                              "losses here; e2k converts it when it holds one: return the sum of the loss terms instead")
        small, index, value = made[0]
        self.consumed.add(small)
        return value, index + 1, add is None or _emit.code(add.value) == "True"

    def _unpacked_loss(self, d: _Def, position: int) -> cst.BaseExpression:
        """The loss bound by ``loss, other = ...``: the element of a tuple written there. A
        function's result unpacked (``loss, rmse = compute_errors(...)``) is refused: the
        function computes the loss with other values, which Keras computes elsewhere (metrics
        in compile, not in the loss)."""
        value = d.value
        if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(d.small.targets[0].target.elements) \
                and not any(isinstance(e, cst.StarredElement) for e in value.elements):
            return value.elements[position].value
        others = [e.value.value for e in d.small.targets[0].target.elements
                  if isinstance(e.value, cst.Name) and e.value.value != d.name]
        what = f"`{_emit.code(value.func)}(...)`" if isinstance(value, cst.Call) else f"`{_emit.code(value)}`"
        self.refuse(d.small, f"the loss `{d.name}` is one of the values {what} returns, with "
                             f"{', '.join(f'`{o}`' for o in others) or 'others'}: e2k converts a loss computed on its own "
                             "(a Keras loss computes only the loss)")

    def sparse_labels(self, labels: cst.BaseExpression, conversion: LossConversion, at: int):
        """Class ids the loss one-hot encodes itself (``tf.one_hot(labels, 10)`` compared by a
        categorical cross-entropy) are what ``SparseCategoricalCrossentropy`` compares: the
        same loss on the labels as they come. An integer cast of them is one the sparse loss
        makes itself."""
        loss = conversion.keras_loss
        name = _emit.code(loss.func).rsplit(".", 1)[-1] if isinstance(loss, cst.Call) else ""
        if isinstance(labels, cst.Call) and self.ctx.call_api_path(labels) == "one_hot" and name == "CategoricalCrossentropy":
            if any(a.keyword is not None and a.keyword.value == "label_smoothing" for a in loss.args):
                return labels, conversion  # no sparse loss smooths labels
            from estimator2keras._units import bind_arguments

            args = bind_arguments(labels, ("indices", "depth", "on_value", "off_value", "axis", "dtype", "name"))
            for key, default in (("on_value", 1), ("off_value", 0)):  # what one_hot writes anyway
                arg = args.pop(key, None)
                value = arg.value if arg is not None else None
                if value is not None and not (isinstance(value, (cst.Integer, cst.Float)) and float(value.value) == default):
                    return labels, conversion
            if set(args) - {"indices", "depth", "dtype", "name"} or "indices" not in args:
                return labels, conversion
            sparse = loss.with_changes(func=loss.func.with_changes(attr=cst.Name("SparseCategoricalCrossentropy")))
            conversion = LossConversion(sparse, args["indices"].value, conversion.predictions)
            labels, name = self.resolve(args["indices"].value, at), "SparseCategoricalCrossentropy"
        # What a Keras loss does to y_true itself: cast it to the prediction's dtype and, for a
        # loss of one value per example, give it the prediction's rank ([batch] <-> [batch, 1]).
        casts = ("cast", "to_int32", "to_int64", "to_float")
        reshapes = name in ("MeanSquaredError", "MeanAbsoluteError", "Huber", "BinaryCrossentropy",
                            "SparseCategoricalCrossentropy")
        while isinstance(labels, cst.Call) and labels.args and labels.args[0].keyword is None:
            path = self.ctx.call_api_path(labels)
            if not (path in casts and name != "CategoricalCrossentropy" or reshapes and self._to_rank(labels, path)):
                break
            labels = labels.args[0].value
            if isinstance(labels, cst.Name):  # `labels = tf.cast(labels, ...)`: the value before it
                d = self.latest_def(labels.value, at)
                if d is not None and isinstance(d.small, cst.Assign):
                    labels, at = d.value, d.index
        return labels, conversion

    def _to_rank(self, call: cst.Call, path: str | None) -> bool:
        """``tf.reshape(x, [-1, 1])``, ``tf.reshape(x, [-1])``, ``tf.expand_dims(x, -1)`` or
        ``tf.squeeze(x)``: one value per example, in either rank."""
        rest = [_emit.code(a.value).replace(" ", "") for a in call.args[1:]]
        if path == "reshape":
            return rest in (["[-1,1]"], ["[-1]"], ["(-1,1)"], ["(-1,)"])
        if path == "expand_dims":
            return rest in (["-1"], ["1"], ["axis=-1"])
        return path == "squeeze" and rest in ([], ["-1"], ["1"], ["axis=-1"], ["axis=1"], ["[1]"], ["[-1]"],
                                              ["axis=[1]"], ["axis=[-1]"])

    def _is_regularization(self, expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Call) and self.ctx.call_api_path(expr) in REGULARIZATION_LOSS

    # -- losses written by hand --------------------------------------------------------------
    def _hand_written_enabled(self) -> bool:
        return HAND_WRITTEN in self.ctx.rules.rules and self.ctx.rules.enabled(HAND_WRITTEN)

    def hand_written_loss(self, expr: cst.BaseExpression, at: int, named: list[_Def] = ()) -> tuple[LossConversion, list[_Def]]:
        """A loss computed by hand from the labels and the model output -> a Keras ``Loss``
        subclass whose ``call(labels, <output>)`` runs the same statements. Refuses (E2K901)
        what compile(loss=...) cannot hand such a loss: other values of the model, the model's
        variables, the features, the labels in a form whose rank Keras changes."""
        self._check_internals(expr)
        steps: dict[int, _Def] = {}
        outputs: dict[str, _Def] = {}
        reads_labels = reads_features = False
        weights_read: set[str] = set()
        arguments: set[str] = set()
        pending = [(n, at) for n in self.names_read(expr)]
        while pending:
            name, before = pending.pop()
            d = self.latest_def(name.value, before)
            if name.value == "labels" and d is None:
                reads_labels = True
                continue
            if name.value == "features" and d is None:
                reads_features = True  # a Keras loss sees only the labels and the output: the model's own
                continue
            if name.value in self.arguments and d is None:
                arguments.add(name.value)  # `params`: the Loss takes it as the model does
                continue
            if name.value == "mode" and d is None and "mode" in self.params and self._passed_to_function(name):
                # `loss = model_loss(logits, labels, mode)`: the function's tests of the mode give
                # TRAIN's and EVAL's loss alike (read with it), which the Loss computes with "train".
                self.loss_mode_reads = [*getattr(self, "loss_mode_reads", []), name]
                continue
            if d is None:
                if name.value in ("tf", self.tf) or self._is_module_name(name):
                    continue
                self.refuse(name, f"`{name.value}` is not computed in the model_fn")
            if d.index in steps or outputs.get(d.name) is d:
                continue
            if self._is_weight_def(d):  # `w1 = tf.get_variable(...)`: the model's `self.w1` (weight decay)
                weights_read.add(d.name)
                continue
            if not self._depends_on_labels(d, set()) and self._from_features_only(d, set()):
                # `w = features["w"]`: a value of the features, not of the model; the loss's own
                reads_features = True
                steps[d.index] = d
                continue
            if not self._depends_on_labels(d, set()):
                outputs[d.name] = d
                continue
            if not isinstance(d.small, cst.Assign) or len(d.small.targets) != 1 \
                    or not isinstance(d.small.targets[0].target, cst.Name):
                self.refuse(d.small, "this statement of the loss is not converted (e2k carries plain assignments)")
            self._check_internals(d.value)
            steps[d.index] = d
            pending.extend((n, d.index) for n in self.names_read(d.value))
        for d in outputs.values():
            self._check_internals(d.value, calls=False)
        if not reads_labels:
            what = ", ".join(f"`{n}`" for n in sorted(outputs)) or f"`{_emit.code(expr)}`"
            sources = self._internal_sources(list(outputs.values()))
            if sources:
                what += ", from " + ", ".join(f"`{_emit.code(c)}`" for c in sources)
            self.refuse(expr, f"the loss does not read the labels: it is computed from the model's internals ({what}), "
                              "which compile(loss=...) cannot see; move it into the model (add_loss) or a train_step")
        if len(outputs) > 1:  # `n = tf.shape(logits)[0]`: computed from the one output, part of the loss
            for name, d in outputs.items():
                chains = [self._derived_from(o, d, set()) for o in outputs.values() if o is not d]
                if all(chain is not None for chain in chains):
                    for chain in chains:
                        for derived in chain:
                            self._check_internals(derived.value)
                            steps[derived.index] = derived
                    outputs = {name: d}
                    break
        if len(outputs) != 1:
            if not outputs:
                self.refuse(expr, "the loss reads no model output that e2k can pass to a Keras loss")
            names = ", ".join(f"`{n}`" for n in sorted(outputs))
            self.refuse(expr, f"the loss reads several values of the model ({names}); a Keras loss is handed the labels "
                              "and one model output: move the others into the model (add_loss) or a train_step")
        (output_name, output_def), = outputs.items()
        if isinstance(output_def.value, (cst.Dict, cst.List, cst.Tuple)):
            self.refuse(output_def.small, f"the loss reads `{output_name}`, a collection of the model's values; "
                                          "e2k hands a Keras loss one output tensor")
        last = named[-1] if named else None
        if last is not None and last.value is expr and (isinstance(last.small, cst.Assign) and len(last.small.targets) == 1
                                                        and isinstance(last.small.targets[0].target, cst.Name)
                                                        or isinstance(last.small, cst.If)):
            # `loss = ...`, or an `if` choosing the loss (`if params["loss"] == "huber": loss = ...`).
            steps[last.index] = last  # `loss = ...` stays a statement; `call` returns `loss`
            expr = cst.Name(last.name)
        ordered = [steps[i] for i in sorted(steps)]
        raw_labels = False
        try:
            self._check_label_uses(ordered, expr, output_name)
        except Unsupported as refused:
            if "as they come" not in refused.reason:
                raise
            raw_labels = refused  # Keras would hand a Loss other labels: the model's own loss takes them as they come
        self._check_reductions()
        arguments = [a for a in self.arguments if a in arguments]
        if reads_features or raw_labels or weights_read:
            self.own_loss = _OwnLoss(ordered, expr, output_name, arguments, reads_features, weights_read)
            if self.plan is not None:
                why = "reads the features" if reads_features else "computes with the labels as they come"
                self.plan.fixed(expr, HAND_WRITTEN, f"the loss written by hand {why} -> the model's compute_loss")
            return LossConversion(None, cst.Name("labels"), cst.Name(output_name)), ordered
        name = self._loss_class_name()
        self.definitions.append(self._loss_class(name, ordered, expr, output_name, arguments))
        if self.plan is not None:
            self.plan.fixed(expr, HAND_WRITTEN, f"the loss written by hand -> `{name}`, a Keras loss")
        keras_loss = _emit.expr(f"{name}({', '.join(arguments)})")
        return LossConversion(keras_loss, cst.Name("labels"), cst.Name(output_name)), ordered

    def _is_weight_def(self, d: _Def) -> bool:
        """``w1 = tf.get_variable(...)``, or ``w1 = weight_variable([6, 24], "w")`` of a function
        of the program that returns one."""
        from estimator2keras._modelfn_blocks import _one_return

        if not (isinstance(d.small, cst.Assign) and len(d.small.targets) == 1 and isinstance(d.value, cst.Call)):
            return False
        if self.role(d.value) == "variable":
            return True
        fn = self._definition(d.value.func) if isinstance(d.value.func, cst.Name) else None
        returned = _one_return(fn) if isinstance(fn, cst.FunctionDef) else None
        return isinstance(returned, cst.Call) and self.role(returned) == "variable"

    def _from_features_only(self, d: _Def, seen: set[int]) -> bool:
        """Is ``d`` computed from the model_fn's ``features`` alone, or from its weights alone
        (no layer, no other value of the model): ``w = features["w"]``, ``l2 = tf.nn.l2_loss(w1)``?
        (From both, it is the model's forward pass.)"""
        return self._sources(d, set()) in ({"features"}, {"weights"})

    def _sources(self, d: _Def, seen: set[int]) -> set[str]:
        """What ``d`` is computed from: ``"features"``, ``"weights"``, or ``"model"`` (a layer,
        a value the model_fn computes otherwise)."""
        if d.index in seen:
            return set()
        seen.add(d.index)
        if not isinstance(d.small, cst.Assign) or not isinstance(d.value, (
                cst.Subscript, cst.Call, cst.Name, cst.BinaryOperation, cst.Attribute)):
            return {"model"}
        if any(call in self.layer_apps or self.role(call) is not None or self.ctx.call_api_path(call) is None
               for call in iter_calls(d.value)):
            return {"model"}  # a layer, or a function of the program (which may make some)
        sources: set[str] = set()
        for name in self.names_read(d.value):
            inner = self.latest_def(name.value, d.index)
            if inner is None:
                if name.value == "features":
                    sources.add("features")
                elif name.value not in ("tf", self.tf) and name.value not in self.arguments \
                        and not self._is_module_name(name):
                    sources.add("model")
            elif self._is_weight_def(inner):
                sources.add("weights")  # a weight of the model, read as `self.<weight>`
            else:
                sources |= self._sources(inner, seen)
        return sources

    def _internal_sources(self, defs: list[_Def], most: int = 2) -> list[cst.Call]:
        """The first calls (in the model_fn's order) of methods of the model's own objects that
        ``defs`` are computed from (``decoder_likelihood.log_prob(features)``): what a loss of
        the model's internals reads."""
        from estimator2keras._context import iter_calls

        found, seen, pending = [], set(), list(defs)
        while pending:
            d = pending.pop()
            if d.index in seen:
                continue
            seen.add(d.index)
            for call in iter_calls(d.value):
                if isinstance(call.func, cst.Attribute) and self.ctx.call_api_path(call) is None:
                    found.append(call)
            for n in self.names_read(d.value):
                inner = self.latest_def(n.value, d.index)
                if inner is not None:
                    pending.append(inner)
        found.sort(key=lambda c: self.ctx.position(c))
        return found[:most]

    def _derived_from(self, d: _Def, output: _Def, seen: set[int]) -> list[_Def] | None:
        """The assignments that compute ``d`` from ``output`` alone (and module constants), or None."""
        if d is output:
            return []
        if d.index in seen:
            return []
        seen.add(d.index)
        if not isinstance(d.small, cst.Assign) or len(d.small.targets) != 1 or not isinstance(d.small.targets[0].target, cst.Name):
            return None
        from estimator2keras._context import iter_calls

        for call in iter_calls(d.value):  # TensorFlow ops only: no layer, no object of the model
            if self.ctx.call_api_path(call) is None or self.role(call) in ("layer", "keras_layer", "layer_function"):
                return None
        chain = [d]
        reads_output = False
        for n in self.names_read(d.value):
            inner = self.latest_def(n.value, d.index)
            if inner is None:
                if n.value in ("features", "labels") or n.value in self.arguments or not self._is_module_name(n):
                    return None
                continue
            sub = self._derived_from(inner, output, seen)
            if sub is None:
                return None
            reads_output = True
            chain += sub
        return chain if reads_output else None

    def _depends_on_labels(self, d: _Def, seen: set[int]) -> bool:
        if d.index in seen:
            return False
        seen.add(d.index)
        for n in self.names_read(d.value):
            inner = self.latest_def(n.value, d.index)
            if inner is None:
                if n.value == "labels":
                    return True
                continue
            if self._depends_on_labels(inner, seen):
                return True
        return False

    def _check_internals(self, node: cst.CSTNode, calls: bool = True) -> None:
        """The model's variables and the graph's collections are no loss a Keras loss can compute."""
        from estimator2keras._context import iter_calls

        for call in iter_calls(node):
            path = self.ctx.call_api_path(call)
            if path in _COLLECTED_LOSSES:
                self.refuse(call, f"the loss reads the graph's loss collection (`{_emit.code(call.func)}(...)`), which Keras "
                                  "has no counterpart of: return the sum of the loss terms from the model_fn instead")
            if path in _INTERNALS or (path or "").endswith("trainable_variables"):
                self.refuse(call, f"the loss reads the model's variables or the graph (`{_emit.code(call.func)}(...)`), "
                                  "which a Keras loss cannot see: use the layers' kernel_regularizer= (or add_loss) for a weight penalty")
            if calls and path is None and isinstance(call.func, cst.Name) and not self._is_loss_object_call(call):
                self._loss_helper(call)
        for node_ in _walk(node) if calls else ():
            if isinstance(node_, cst.Attribute) and node_.attr.value in ("losses", "trainable_variables", "trainable_weights", "variables") \
                    and self.ctx.api_path(node_) is None:
                self.refuse(node_, f"the loss reads `{_emit.code(node_)}`, the model's own state, which a Keras loss cannot see: "
                                   "it belongs in the model (add_loss) or a train_step")

    def _loss_helper(self, call: cst.Call) -> tuple[cst.FunctionDef, dict[str, cst.Arg]]:
        """A function of the program the loss calls (``loss = my_loss(labels, logits)``): the
        Keras loss calls it as it is, so it must be TF2 code computing from its arguments
        alone (assignments ending in one ``return``), and is read with the rules of the loss."""
        from estimator2keras._units import resolve
        from estimator2keras._symbols import _is_compat_v1, tf2_respellings

        helper = resolve(self.ctx, call.func) if isinstance(call.func, cst.Name) else None
        what = f"`{_emit.code(call.func)}(...)`"
        if not isinstance(helper, cst.FunctionDef) or not isinstance(self.ctx.parent(helper), cst.Module):
            self.refuse(call, f"the loss calls {what}, which is not a function of the module e2k can read")
        params = helper.params
        if helper.decorators or isinstance(params.star_arg, (cst.Param, cst.ParamStar)) \
                or params.star_kwarg or params.kwonly_params or params.posonly_params:
            self.refuse(call, f"the loss calls {what}, whose signature e2k does not read (decorators, *args, **kwargs)")
        body = list(helper.body.body) if isinstance(helper.body, cst.IndentedBlock) else []
        names = [p.name.value for p in params.params]
        bound: dict[str, cst.Arg] = {}
        for index, arg in enumerate(call.args):
            if arg.star:
                self.refuse(arg, f"{what} is called with *args or **kwargs")
            key = arg.keyword.value if arg.keyword is not None else (names[index] if index < len(names) else None)
            if key not in names:
                self.refuse(arg, f"{what} does not take this argument")
            bound[key] = arg
        modes = {key for key, arg in bound.items() if self._is_mode_argument(arg.value)}
        branches: dict[int, list] = {}
        self._helper_block(body, helper, what, bound, modes, branches, top=True)
        if not self._ends_in_return(body, branches):
            self.refuse(call, f"{what} does not end in the one `return` of its loss")
        self.helper_branches = {**getattr(self, "helper_branches", {}), id(helper): branches}
        for key in modes:
            for node in _walk(helper.body):
                if isinstance(node, cst.Name) and node.value == key and self._is_read(node) \
                        and not any(node in _walk(test) for test in self._mode_tests(helper, key)):
                    self.refuse(node, f"{what} reads `{key}` (the mode) otherwise than in a test of the mode "
                                      "that gives TRAIN's and EVAL's loss alike")
        respelled = [(old, new) for old, new in tf2_respellings(self.ctx, helper, self.tf) if _emit.code(old) != _emit.code(new)]
        # `tf.losses.mean_squared_error`, TF1's as e2k reads a model_fn: TF2 has `tf.losses` too,
        # Keras's (a per-example loss where TF1's was a mean), so the function would compute
        # otherwise; `tf.compat.v1.losses` is the same function in TF1 and TF2.
        for inner in iter_calls(helper.body):
            path = self.ctx.call_api_path(inner) or ""
            if path.startswith(("losses.", "metrics.")) and not _is_compat_v1(self.ctx, inner.func):
                if self.plan is None:
                    continue
                self.plan.replace(inner.func, _emit.expr(f"{self.tf}.compat.v1.{path}"))
                self.plan.fixed(inner.func, HAND_WRITTEN, f"`{_emit.code(inner.func)}` in {what}, TF1's -> "
                                                          f"`tf.compat.v1.{path}` (TF2's `tf.{path}` is Keras's)")
        if respelled and self.plan is not None:
            # `tf.to_int64(labels)`: the Keras loss calls the function on TF2, which spells it
            # `tf.cast(..., tf.int64)` or `tf.compat.v1.to_int64`: the same op, respelled in place.
            for old, new in respelled:
                self.plan.replace(old, new)
            self.plan.fixed(respelled[0][0], HAND_WRITTEN, f"TF1 names in {what} -> their TF2 spelling")
        reading = getattr(self, "_helpers_read", set())
        if helper not in reading:  # a helper calling itself is read once
            self._helpers_read = reading | {helper}
            for block in self._live_blocks(body, branches):
                for line in block:
                    if isinstance(line, cst.SimpleStatementLine):
                        self._check_internals(line)
        return helper, bound

    # A loss function of the program may branch on what is known before the loss runs: the
    # mode (`if mode == TRAIN or mode == EVAL:`, a guard for PREDICT, which has no loss), read
    # for TRAIN and EVAL, which must take the same branch, and static shapes of the model output
    # (`if predictions.shape[1] == 1:`), which Keras's output has alike: the function is called
    # as it is, and Python takes the branch when the Loss is traced, as when TF1 built its graph.
    def _helper_block(self, block, helper, what, bound, modes, branches, top=False) -> None:
        for i, line in enumerate(block):
            if isinstance(line, cst.If):
                taken = self._helper_if(line, helper, what, bound, modes)
                branches[id(line)] = taken
                for inner in taken:
                    self._helper_block(inner, helper, what, bound, modes, branches)
                continue
            if not isinstance(line, cst.SimpleStatementLine):
                keyword = {"For": "a `for` loop", "While": "a `while` loop", "With": "a `with` block",
                           "Try": "a `try`"}.get(type(line).__name__, f"a `{type(line).__name__}` statement")
                self.refuse(line, f"{what} computes the loss with {keyword}; e2k reads loss functions "
                                  "of assignments, `if`s on the mode or on static shapes, ending in one return")
            for small in line.body:
                docstring = top and i == 0 and isinstance(small, cst.Expr) \
                    and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString))
                if not (docstring or isinstance(small, (cst.Assign, cst.Return))):
                    self.refuse(small, f"{what} has a statement e2k does not read in a loss function")
                if isinstance(small, cst.Return) and (small.value is None or i != len(block) - 1):
                    self.refuse(small, f"{what} does not end in the one `return` of its loss")

    def _helper_if(self, node: cst.If, helper, what, bound, modes) -> list[list]:
        """The branches of an ``if`` of a loss function that the Keras loss may run."""
        orelse = node.orelse
        other = [] if orelse is None else ([orelse] if isinstance(orelse, cst.If) else list(orelse.body.body))
        reads = {n.value for n in _walk(node.test) if isinstance(n, cst.Name) and self._is_read(n)}
        mode = reads & modes
        if mode:
            (param,) = mode if len(mode) == 1 else (None,)
            train, evaluation = (self._mode_test(node.test, param, m) for m in ("train", "eval"))
            if param is None or train is None or evaluation is None:
                self.refuse(node.test, f"{what} tests the mode in a way e2k does not read (`==`, `!=`, `in` "
                                       "tf.estimator.ModeKeys, with `and`, `or`, `not`)")
            if train != evaluation:
                self.refuse(node.test, f"{what} computes another loss in TRAIN than in EVAL (`{_emit.code(node.test)}`), "
                                       "which one Keras loss, for fit and evaluate, cannot")
            return [list(node.body.body)] if train else [other]
        self._check_static_test(node.test, helper, what, bound)
        return [list(node.body.body), other]

    def _mode_test(self, test: cst.BaseExpression, param: str, mode: str) -> bool | None:
        """The value of ``test`` (a test of the mode parameter ``param``) in ``mode``, or None."""
        if isinstance(test, cst.BooleanOperation):
            left, right = self._mode_test(test.left, param, mode), self._mode_test(test.right, param, mode)
            if left is None or right is None:
                return None
            return (left and right) if isinstance(test.operator, cst.And) else (left or right)
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self._mode_test(test.expression, param, mode)
            return None if inner is None else not inner
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            return None
        target = test.comparisons[0]
        left, right = test.left, target.comparator
        if isinstance(right, cst.Name) and right.value == param:
            left, right = right, left
        if not (isinstance(left, cst.Name) and left.value == param):
            return None
        values = [e.value for e in right.elements] if isinstance(right, (cst.Tuple, cst.List, cst.Set)) else [right]
        keys = [self._mode_key(v) for v in values]
        if None in keys:
            return None
        if isinstance(target.operator, (cst.Equal, cst.Is)) and len(keys) == 1 and not isinstance(right, (cst.Tuple, cst.List, cst.Set)):
            return mode == keys[0]
        if isinstance(target.operator, (cst.NotEqual, cst.IsNot)) and not isinstance(right, (cst.Tuple, cst.List, cst.Set)):
            return mode != keys[0]
        if isinstance(target.operator, cst.In) and isinstance(right, (cst.Tuple, cst.List, cst.Set)):
            return mode in keys
        if isinstance(target.operator, cst.NotIn) and isinstance(right, (cst.Tuple, cst.List, cst.Set)):
            return mode not in keys
        return None

    def _mode_key(self, node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.SimpleString):
            return node.evaluated_value if node.evaluated_value in ("train", "eval", "infer") else None
        path = self.ctx.api_path(node) or ""
        return {"TRAIN": "train", "EVAL": "eval", "PREDICT": "infer"}.get(path.rsplit(".", 1)[-1]) \
            if path.rsplit(".", 1)[0].endswith("ModeKeys") else None

    def _mode_tests(self, helper: cst.FunctionDef, param: str) -> list[cst.BaseExpression]:
        return [n.test for n in _walk(helper.body) if isinstance(n, cst.If)
                and any(isinstance(x, cst.Name) and x.value == param for x in _walk(n.test))]

    def _check_static_test(self, test: cst.BaseExpression, helper, what, bound) -> None:
        """A test of what the model output's static shape holds (its rank, a dimension but the
        batch's), of module constants and literals: the same in TF1's graph and in Keras."""
        params = {p.name.value for p in helper.params.params}
        assigned = {n.value for n in _walk(helper.body) if isinstance(n, cst.Name) and isinstance(self.ctx.parent(n), cst.AssignTarget)}
        for name in _walk(test):
            if not (isinstance(name, cst.Name) and self._is_read(name)):
                continue
            if name.value not in params and name.value not in assigned:
                continue  # a module constant, a builtin (`len`)
            arg = bound.get(name.value)
            if name.value in assigned or arg is None or self._reads_the_labels(arg.value) or not self._static_shape_read(name):
                self.refuse(test, f"{what} computes the loss with an `if` on `{_emit.code(test)}`, which e2k cannot tell "
                                  "known before the loss runs; e2k reads tests of the mode and of the model output's "
                                  "static shape (`predictions.shape[1] == 1`, `len(predictions.shape)`)")

    def _static_shape_read(self, name: cst.Name) -> bool:
        """``x.shape[k]`` (k a literal other than the batch's 0), ``x.shape.ndims``/``.rank``,
        ``len(x.shape)``, ``x.get_shape()`` alike, ``x.ndim``."""
        parent = self.ctx.parent(name)
        if not (isinstance(parent, cst.Attribute) and parent.value is name):
            return False
        if parent.attr.value == "ndim":
            return True
        shape: cst.CSTNode = parent
        if parent.attr.value == "get_shape":
            shape = self.ctx.parent(parent)
            if not (isinstance(shape, cst.Call) and not shape.args):
                return False
        elif parent.attr.value != "shape":
            return False
        outer = self.ctx.parent(shape)
        if isinstance(outer, cst.Attribute) and outer.value is shape:
            return outer.attr.value in ("ndims", "rank")
        if isinstance(outer, cst.Subscript) and len(outer.slice) == 1 and isinstance(outer.slice[0].slice, cst.Index):
            index = outer.slice[0].slice.value
            text = _emit.code(index).replace(" ", "")
            return text.lstrip("-").isdigit() and text != "0"
        if isinstance(outer, cst.Arg):
            call = self.ctx.parent(outer)
            return isinstance(call, cst.Call) and _emit.code(call.func) == "len" and len(call.args) == 1
        return False

    def _reads_the_labels(self, value: cst.BaseExpression) -> bool:
        for n in self.names_read(value):
            d = self.latest_def(n.value, len(self.order))
            if (d is None and n.value == "labels") or (d is not None and self._depends_on_labels(d, set())):
                return True
        return False

    def _is_mode_argument(self, value: cst.BaseExpression) -> bool:
        return isinstance(value, cst.Name) and value.value == "mode" and "mode" in self.params \
            and self.latest_def("mode", len(self.order)) is None

    def _passed_to_function(self, name: cst.Name) -> bool:
        arg = self.ctx.parent(name)
        call = self.ctx.parent(arg) if isinstance(arg, cst.Arg) else None
        return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and self.ctx.call_api_path(call) is None

    def _ends_in_return(self, block, branches) -> bool:
        """Every way through ``block`` (the branches the Keras loss may run) ends in a return."""
        if not block:
            return False
        last = block[-1]
        if isinstance(last, cst.SimpleStatementLine):
            return isinstance(last.body[-1], cst.Return) and last.body[-1].value is not None
        if isinstance(last, cst.If):
            taken = branches.get(id(last), [])
            if all(self._ends_in_return(inner, branches) for inner in taken) and taken:
                return True
            # `if ...: loss = a` / `else: loss = b` / `return loss`: no branch returns
            return False
        return False

    def _live_blocks(self, body, branches) -> list:
        """``body`` and the branches under it that the Keras loss may run."""
        blocks, pending = [], [body]
        while pending:
            block = pending.pop()
            blocks.append(block)
            for line in block:
                if isinstance(line, cst.If):
                    pending.extend(branches.get(id(line), []))
        return blocks

    def _is_loss_object_call(self, call: cst.Call) -> bool:
        return isinstance(call.func, cst.Call) and (self.ctx.call_api_path(call.func) or "").startswith("keras.losses.")

    # The labels Keras hands a loss are not always the labels the Estimator's model_fn got:
    # Keras 2 expands labels of rank 1 to [batch, 1] against an output of rank 2, Keras 3
    # converts them to float32. A loss written by hand is converted only where its labels reach
    # each op through what gives the same values either way: a Keras loss (or a TF1 loss or
    # tf.nn cross-entropy, which become Keras losses), tf.reshape for ops that read the rank,
    # and a cast as well for ops that need integers (one_hot, gather, equal).
    def _check_label_uses(self, steps: list[_Def], expr: cst.BaseExpression, output: str) -> None:
        known: dict[str, tuple[bool, bool]] = {"labels": (False, False)}  # name -> (rank fixed, dtype fixed)
        for node, where in [*((d.value, d) for d in steps), (expr, None)]:
            derived = None
            for name in self.names_read(node):
                if name.value in known:
                    flags = self._label_flow(name, known[name.value])
                    if flags is not None:
                        derived = flags if derived is None else (derived[0] and flags[0], derived[1] and flags[1])
            if where is not None:
                if derived is not None:
                    known[where.name] = derived  # `y = tf.reshape(labels, [-1])`: checked where read
                else:
                    known.pop(where.name, None)

    def _label_flow(self, name: cst.Name, flags: tuple[bool, bool], where: str = "") -> tuple[bool, bool] | None:
        """Follow one read of labels (with what is known of their rank and dtype) up to the op
        that uses them: None when that op gives the same values whatever Keras hands in, the
        flags when the value is assigned to a name (checked where that name is read); refuses
        the rest, naming the op."""
        rank, dtype = flags
        node: cst.CSTNode = name
        while True:
            parent = self.ctx.parent(node)
            if isinstance(parent, cst.Assign) and parent.value is node:
                return rank, dtype
            if isinstance(parent, cst.Arg):
                call = self.ctx.parent(parent)
                first = call.args[0] is parent and parent.keyword is None
                keyword = parent.keyword.value if parent.keyword is not None else None
                path = self.ctx.call_api_path(call) or ""
                if self._is_loss_object_call(call) or path in _KERAS_RANKLESS:
                    if first or keyword == "y_true":
                        return None  # a Keras loss object (or a cross-entropy) matches ranks and dtypes itself
                elif self._inner_tf1_loss(call) is not None and not where:  # (a helper is left as it is)
                    if first or keyword == self._inner_tf1_loss(call)[1]:
                        return None  # it becomes a Keras loss
                elif path in _NN_PER_EXAMPLE and not where:
                    if keyword == "labels":
                        return None  # it becomes a Keras loss function
                elif path in ("reshape", "manip.reshape", "squeeze") and (first or keyword in ("tensor", "input")):
                    rank, node = True, call
                    continue
                elif path in _CASTS and (first or keyword == "x"):
                    dtype, node = True, call
                    continue
                elif path in ("stop_gradient", "identity") and (first or keyword == "input"):
                    node = call  # the same values
                    continue
                elif not path and isinstance(call.func, cst.Name):  # a loss function of the program
                    helper, bound = self._loss_helper(call)
                    param = next(key for key, arg in bound.items() if arg is parent)
                    self._helper_labels(helper, param, (rank, dtype))
                    return None
                elif path in _INTEGER_OPS:
                    if rank and dtype:
                        return None
                    self._refuse_label_use(name, where, call, "an op that needs integer labels: reshape and cast them first")
                if not rank:
                    self._refuse_label_use(name, where, call, "reshape them (tf.reshape(labels, ...)) or use a Keras loss")
                return None
            if not rank:
                self._refuse_label_use(name, where, parent, "reshape them (tf.reshape(labels, ...)) or use a Keras loss")
            return None

    def _helper_labels(self, helper: cst.FunctionDef, param: str, flags: tuple[bool, bool]) -> None:
        """The labels passed as ``param`` of a loss function of the program, followed in it."""
        branches = getattr(self, "helper_branches", {}).get(id(helper), {})
        self._block_labels(list(helper.body.body), {param: flags}, helper, branches)

    def _block_labels(self, block, known: dict, helper: cst.FunctionDef, branches: dict) -> dict:
        """Follow the labels through ``block``: each branch an ``if`` may take from what is known
        before it; after it, a name is the labels' where any branch made it so (with what all of
        those branches fixed of their rank and dtype)."""
        for line in block:
            if isinstance(line, cst.If):
                after = [self._block_labels(inner, dict(known), helper, branches) for inner in branches.get(id(line), [])]
                merged: dict = {}
                for outcome in after:
                    for name, got in outcome.items():
                        merged[name] = got if name not in merged else (merged[name][0] and got[0], merged[name][1] and got[1])
                known = merged
                continue
            for small in getattr(line, "body", ()):
                value = getattr(small, "value", None)
                if value is None or not isinstance(small, (cst.Assign, cst.Return)):
                    continue
                derived = None
                for node in _walk(value):
                    if isinstance(node, cst.Name) and node.value in known and self._is_read(node):
                        got = self._label_flow(node, known[node.value], f" in `{helper.name.value}`")
                        if got is not None:
                            derived = got if derived is None else (derived[0] and got[0], derived[1] and got[1])
                if isinstance(small, cst.Assign):
                    for target in small.targets:
                        if isinstance(target.target, cst.Name):
                            if derived is not None:
                                known[target.target.value] = derived
                            else:
                                known.pop(target.target.value, None)
        return known

    def _refuse_label_use(self, name: cst.Name, where: str, op: cst.CSTNode, fix: str):
        self.refuse(name, f"the loss computes with `{name.value}` as they come (`{_emit.code(op)}`{where}); "
                          "Keras hands a loss labels of the output's rank in Keras 2 and as float32 in Keras 3, "
                          f"so the result could change: {fix}")

    def _inner_tf1_loss(self, call: cst.Call):
        """A TF1 ``tf.losses.*`` call inside a loss written by hand: (its CallSpec entry, the
        name of its labels argument), or None."""
        from estimator2keras.rewrites.tf1_loss_to_keras import LOSSES

        entry = LOSSES.get(self.ctx.call_api_path(call) or "")
        return (entry, entry[1]) if entry is not None else None

    def _keras_per_example(self, call: cst.Call, keras, own: bool = False) -> cst.BaseExpression | None:
        """The Keras code of the same value as a TF1 loss or a tf.nn cross-entropy inside a
        loss written by hand (``keras`` puts the arguments in TF2 spelling). In the model's own
        ``compute_loss`` (``own``), which is handed the labels as they come, a TF1 loss stays
        TF1's, as it computed (`tf.losses` is another module in TF2: TF1's is tf.compat.v1.losses)."""
        from estimator2keras._translate import bind

        if own:
            if self._inner_tf1_loss(call) is None:
                return None
            bare = (self.ctx.call_api_path(call) or "").removeprefix("compat.v1.")
            return call.with_changes(func=_emit.expr(f"{self.tf}.compat.v1.{bare}"),
                                     args=[arg.with_changes(value=keras(arg.value)) for arg in call.args])
        path = self.ctx.call_api_path(call)
        if path in _NN_PER_EXAMPLE:
            args = bind(call, ("_sentinel", "labels", "logits", "dim", "name", "axis"))
            if set(args) - {"labels", "logits", "name"} or not {"labels", "logits"} <= set(args):
                self.refuse(call, f"`{_emit.code(call.func)}` with other arguments than labels=, logits= is not converted")
            return _emit.expr("{tf}.keras.losses.{f}({labels}, {logits}, from_logits=True)", tf=self.tf,
                              f=_NN_PER_EXAMPLE[path], labels=keras(args["labels"].value), logits=keras(args["logits"].value))
        if self._inner_tf1_loss(call) is None:
            return None
        # TF1's mean over every element (default reduction, weights 1) is the mean of the
        # Keras loss's per-example values (the mean over the last axis), as compile sees it.
        conversion: LossConversion = self.translate("loss", call)
        loss = conversion.keras_loss
        args = [arg.with_changes(value=keras(arg.value)) for arg in loss.args]  # `label_smoothing=params[...]`
        loss = loss.with_changes(args=_emit.call_args([*args, _emit.keyword_arg("reduction", cst.SimpleString('"none"'))]))
        return _emit.expr("{tf}.reduce_mean({loss}({labels}, {output}))", tf=self.tf, loss=loss,
                          labels=keras(conversion.labels), output=keras(conversion.predictions))

    def _check_reductions(self) -> None:
        """The TF1 optimizer divided the loss by the replicas unless the last loss made in the
        graph was reduced with SUM; a Keras loss with another reduction inside a loss written by
        hand is refused too (Keras 2 rejects it under a strategy)."""
        from estimator2keras._context import iter_calls

        for call in iter_calls(self.fn.body):
            for arg in call.args:
                if arg.keyword is None or arg.keyword.value != "reduction":
                    continue
                value = arg.value
                path = self.ctx.api_path(value) or ""
                text = value.evaluated_value if isinstance(value, cst.SimpleString) else None
                if not (path.endswith("Reduction.NONE") or text == "none"):
                    self.refuse(arg, f"a loss written by hand around `reduction={_emit.code(value)}` is not converted: "
                                     "only per-example losses (reduction NONE) reduced by the model_fn's own code are")

    def _loss_class_name(self) -> str:
        from estimator2keras._modelfn import class_name_for

        return self.definition_name(f"{class_name_for(self.fn.name.value)}Loss")

    def definition_name(self, preferred: str) -> str:
        """A name for a module-level definition the conversion writes (a loss class, a loss
        function): one neither the module nor the definitions written before it use."""
        taken = {n.value for n in _walk(self.ctx.module) if isinstance(n, cst.Name)}
        taken |= {stmt.name.value for stmt in self.definitions if isinstance(stmt, (cst.ClassDef, cst.FunctionDef))}
        return _emit.unique_name(preferred, taken)

    def _loss_statements(self, steps: list[_Def], expr: cst.BaseExpression, arguments: list[str] = (),
                         own: bool = False) -> tuple[list[cst.BaseStatement], cst.BaseExpression]:
        """The loss's statements as a Keras loss (or, ``own``, the model's ``compute_loss``) runs
        them, TF2 names and Keras losses in, and the loss's value."""
        from estimator2keras._modelfn_emit import _line
        from estimator2keras._symbols import tf2_respellings

        weights = self.own_loss.weights if own else ()

        def keras(node):
            replacements = dict(tf2_respellings(self.ctx, node, self.tf))
            for inner in _walk(node):
                if isinstance(inner, cst.Call):
                    per_example = self._keras_per_example(inner, keras, own)
                    if per_example is not None:
                        replacements[inner] = per_example
                path = self.ctx.api_path(inner) if isinstance(inner, cst.Attribute) else None
                if path is not None and path.startswith("keras.losses.Reduction."):
                    # Keras 3 has no Reduction enum; both take the string.
                    replacements[inner] = cst.SimpleString(f'"{path.rsplit(".", 1)[-1].lower()}"')
                if isinstance(inner, cst.Name) and inner.value in arguments and self._is_read(inner):
                    replacements[inner] = _emit.expr(f"self.{inner.value}")
                if isinstance(inner, cst.Name) and inner.value in weights and self._is_read(inner):
                    replacements[inner] = _emit.expr(f"self.{self.weight_names[inner.value]}")
                if any(inner is read for read in getattr(self, "loss_mode_reads", ())):
                    replacements[inner] = cst.SimpleString('"train"')  # the mode's string, as input_fns get it
            return _emit.replace_in(node, replacements)

        indent = self.ctx.module.default_indent
        body = [_emit.fit_line(_line(keras(d.small), d.line, d.small), 2, indent) for d in steps]
        if body:  # no blank line right below the `def`
            leading = list(body[0].leading_lines)
            while leading and leading[0].comment is None:
                leading.pop(0)
            body[0] = body[0].with_changes(leading_lines=leading)
        return body, keras(expr)

    def _loss_class(self, name: str, steps: list[_Def], expr: cst.BaseExpression, output: str,
                    arguments: list[str] = ()) -> cst.ClassDef:
        body, value = self._loss_statements(steps, expr, arguments)
        if isinstance(value, (cst.BinaryOperation, cst.UnaryOperation, cst.IfExp, cst.BooleanOperation)):
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        body.append(_emit.statement(
            "return {v} / {tf}.distribute.get_strategy().num_replicas_in_sync", v=value, tf=self.tf))
        call = _emit.statement(f"def call(self, labels, {output}):\n    pass")
        call = call.with_changes(body=cst.IndentedBlock(body=body), leading_lines=[_emit.blank_line()])
        indent = self.ctx.module.default_indent
        doc = (
            f'"""The model_fn\'s loss, as the Estimator computed it on each replica\'s batch.\n\n'
            f'{indent}The Estimator\'s optimizer divided it by the number of replicas and added up their\n'
            f'{indent}gradients; reduction="sum" has Keras add them up as they come."""'
        )
        init = _emit.statement(
            f'def __init__(self, {"".join(a + ", " for a in arguments)}name="loss"):\n'
            '    super().__init__(reduction="sum", name=name)\n'
            + "".join(f"    self.{a} = {a}\n" for a in arguments))
        init = init.with_changes(leading_lines=[_emit.blank_line()])
        klass = _emit.statement(f"class {name}({self.tf}.keras.losses.Loss):\n    {doc}\n")
        return klass.with_changes(body=cst.IndentedBlock(body=[klass.body.body[0], init, call]))


@dataclass
class _OwnLoss:
    """A loss written by hand that a Keras ``Loss`` cannot compute: it reads the features, or
    the labels as they come (Keras 2 hands a loss labels of the output's rank, Keras 3 as
    float32). It becomes the model's ``compute_loss``, which both are handed as the dataset
    gives them. Verified by running (2 replicas, TF 2.15 and the newest TF): the returned loss
    divided by the replicas trains as compile(loss=...) does, and a ``Mean`` metric named
    "loss" that the model holds is what both report."""

    steps: list
    expr: cst.BaseExpression
    output: str
    arguments: list
    reads_features: bool
    #: Names of the model_fn's weights (``tf.get_variable``) it reads: ``self.<weight>``.
    weights: set = field(default_factory=set)


class _OwnLossWriter:
    def own_loss_method(self) -> cst.FunctionDef:
        """``def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
        training=True)`` running the model_fn's statements of the loss."""
        own = self.own_loss
        for name in own.weights:
            if name not in self.weight_names:
                self.refuse(self.fn, f"the loss reads the weight `{name}`, which the model_fn assigns more than once")
        body, returned = self._loss_statements(own.steps, own.expr, own.arguments, own=True)
        if isinstance(returned, cst.Name):
            loss = returned.value
        else:
            loss = "loss" if not any(d.name == "loss" for d in own.steps) else "own_loss"
            body.append(_emit.statement(f"{loss} = {{v}}", v=returned))
        names = [("features", "x")] if own.reads_features else []
        names += [("labels", "y"), (own.output, "y_pred")]
        unpack = _emit.statement(f"{', '.join(n for n, _ in names)} = {', '.join(v for _, v in names)}")
        indent = self.ctx.module.default_indent * 2
        given = "the features and the labels" if own.reads_features else "the labels"
        doc = (f'"""The model_fn\'s loss, as the Estimator computed it on each replica\'s batch:\n'
               f'{indent}from {given} as the dataset gives them, which a Keras loss is not handed.\n'
               f'{indent}The Estimator\'s optimizer divided it by the replicas and added up their gradients."""')
        lines = [_emit.statement(doc), unpack, *body]
        if self._regularized_layers():
            lines.append(_emit.statement(f"{loss} += {self.tf}.add_n(self.losses)  # the layers' penalties"))
        lines.append(_emit.statement(
            f"self.loss_tracker.update_state({loss}, sample_weight={self.tf}.shape(y_pred)[0])"))
        lines.append(_emit.statement(f"return {loss} / {self.tf}.distribute.get_strategy().num_replicas_in_sync"))
        fn = _emit.statement("def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):\n"
                             "    pass")
        return fn.with_changes(body=cst.IndentedBlock(body=lines), leading_lines=[_emit.blank_line()])

    def _regularized_layers(self) -> bool:
        return self.penalty is not None or any(
            arg.keyword is not None and arg.keyword.value.endswith("regularizer") and not _emit.code(arg.value) == "None"
            for app in self.layer_apps.values() if isinstance(app.constructor, cst.Call) for arg in app.constructor.args)


# -- weight decay over the graph's variables ------------------------------------------------------
# `loss = cross_entropy + WEIGHT_DECAY * tf.add_n([tf.nn.l2_loss(v) for v in tf.trainable_variables()
# if "batch_normalization" not in v.name])`: a penalty a Keras loss cannot compute (it sees the
# labels and the output), so it becomes part of the model: `self.add_loss(...)` at the end of
# `call`, over `self.trainable_variables`. Verified by running (e2k parity, 2 replicas, TF 2.15 and
# the newest TF): the Estimator's optimizer divided the whole loss by the replicas and added up
# their gradients, so the penalty, computed on every replica, acted once; Keras 2.15 and Keras 3
# both divide a model's added losses by the replicas and add up the gradients alike.

#: Where a model_fn gets its trainable variables (compat.v1 spellings resolve to these paths).
_TRAINABLE = frozenset({"trainable_variables"})
#: Calls a penalty may make besides TensorFlow's ops.
_PENALTY_BUILTINS = frozenset({"sum", "len", "float", "int"})
#: Layer APIs whose variables TF1 named as the Keras layer they become names them (`dense/kernel`,
#: `batch_normalization/gamma`): what a test of the names must hold to mean the same in Keras.
_KERAS_NAMED_LAYERS = ("layers.", "keras.layers.", "compat.v1.layers.", "compat.v1.keras.layers.")
_NAME_TOKEN = re.compile(r"[A-Za-z_]*[A-Za-z][A-Za-z_]*")


@dataclass
class _Penalty:
    """A weight penalty over the graph's variables, read from the model_fn."""

    #: The penalty as the model_fn writes it (``WEIGHT_DECAY * tf.add_n([...])``).
    value: cst.BaseExpression
    #: ``l2_loss = <value>``: the statement kept in ``call`` under the user's name (else None).
    named: _Def | None
    #: Everything it takes from the model_fn (``tvars = tf.trainable_variables()``, constants).
    defs: list[_Def]
    #: Of those, what ``call`` computes before it (``weight_decay = params["weight_decay"]``).
    prelude: list[_Def]
    #: The variables -> ``self.trainable_variables``; ``v.name`` -> the name in either Keras.
    replacements: dict = field(default_factory=dict)
    #: The texts its filter looks for in the variables' names, with their tests.
    tested: list = field(default_factory=list)

    @property
    def smalls(self) -> set:
        return {d.small for d in self.defs}


class _WeightPenaltyReader:
    """Reading and writing a weight penalty over ``tf.trainable_variables()`` (a part of
    ``_modelfn._Converter`` that comes first: it leaves the penalty's statements out of the checks
    of what the forward pass holds, and forces a model class whose ``call`` adds it)."""

    penalty: _Penalty | None = None

    # -- reading -------------------------------------------------------------------------------
    def weight_penalty(self, node: cst.BaseExpression, at: int) -> bool:
        """``node`` (a term the loss adds) is a weight penalty over the graph's variables: read it
        into ``self.penalty``. False when it reads no variables; refuses what e2k cannot carry."""
        if not self._reads_trainable(node, at, set()) or not self._hand_written_enabled():
            return False  # (with E2K204 off, the loss reader refuses it as before)
        if self.penalty is not None:
            self.refuse(node, "the loss adds a second weight penalty over the graph's variables; e2k converts one")
        named, value, value_at = None, node, at
        if isinstance(node, cst.Name):
            d = self.latest_def(node.value, at)
            if d is None or not _plain_assign(d):
                self.refuse(node, f"`{node.value}`, a weight penalty over the graph's variables, is not one assignment")
            named, value, value_at = d, d.value, d.index
        self._check_penalty_reduction(node)
        self.penalty = self._read_penalty(value, value_at, named)
        if self.plan is not None:
            self.plan.fixed(node, HAND_WRITTEN, "weight decay over tf.trainable_variables() -> self.add_loss(...) in "
                                                "the Keras model, over its trainable_variables")
        return True

    def _trainable_source(self, call: cst.CSTNode) -> bool:
        """``tf.trainable_variables()`` or ``tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES)``."""
        if not isinstance(call, cst.Call):
            return False
        path = self.ctx.call_api_path(call) or ""
        if path in _TRAINABLE:
            return True
        return path == "get_collection" and bool(call.args) \
            and self.ctx.api_path(call.args[0].value) == "GraphKeys.TRAINABLE_VARIABLES"

    def _reads_trainable(self, node: cst.CSTNode, at: int, seen: set[int]) -> bool:
        if any(self._trainable_source(call) for call in iter_calls(node)):
            return True
        for name in self.names_read(node):
            d = self.latest_def(name.value, at)
            if d is not None and d.index not in seen and d.value is not None:
                seen.add(d.index)
                if self._reads_trainable(d.value, d.index, seen):
                    return True
        return False

    def _check_penalty_reduction(self, node: cst.CSTNode) -> None:
        """With a TF1 loss reduced by SUM the Estimator did not divide the loss by the replicas:
        the penalty, on every replica, acted once per replica."""
        for call in iter_calls(self.fn.body):
            for arg in call.args:
                if arg.keyword is None or arg.keyword.value != "reduction":
                    continue
                path = self.ctx.api_path(arg.value) or ""
                text = arg.value.evaluated_value if isinstance(arg.value, cst.SimpleString) else None
                if path.endswith("Reduction.SUM") or text == "sum":
                    self.refuse(node, "the loss adds a weight penalty and a loss reduced with SUM: the Estimator then "
                                      "did not divide by the replicas and the penalty acted once per replica, "
                                      "which Keras's added losses do not")

    def _read_penalty(self, value: cst.BaseExpression, at: int, named: _Def | None) -> _Penalty:
        penalty = _Penalty(value, named, [], [])
        sources: dict[int, _Def] = {}  # `tvars = tf.trainable_variables()`
        prelude: dict[int, _Def] = {}
        parts = [value]  # what computes with the variables
        pending = [(n, at, True) for n in self.names_read(value)]
        while pending:
            name, before, direct = pending.pop()
            d = self.latest_def(name.value, before)
            if d is None:
                if name.value in self.arguments or name.value in ("tf", self.tf) or self._is_module_name(name):
                    continue
                self.refuse(name, f"the weight penalty reads `{name.value}`, which is not computed in the model_fn")
            if not _plain_assign(d):
                self.refuse(d.small, "the weight penalty reads this statement; e2k reads plain assignments")
            if self._trainable_source(d.value):
                if not direct:
                    self.refuse(name, f"`{name.value}` (the graph's variables) is read where e2k does not carry it")
                self._check_source(d.value)
                sources[d.index] = d
                continue
            if self._depends_on_labels(d, set()):
                self.refuse(d.small, "the weight penalty reads this value, which e2k does not carry into the model")
            if self._reads_trainable(d.value, d.index, set()):
                if not direct:
                    self.refuse(d.small, "the weight penalty reads this value of the graph's variables where e2k does "
                                         "not carry it")
                parts.append(d.value)  # `l2 = tf.add_n([...])` then `loss = xent + WEIGHT_DECAY * l2`: a part of it
                prelude[d.index] = d
                pending.extend((n, d.index, True) for n in self.names_read(d.value))
                continue
            for call in iter_calls(d.value):
                if self.role(call) is not None or (self.ctx.call_api_path(call) is None
                                                   and _emit.code(call.func) not in _PENALTY_BUILTINS):
                    self.refuse(call, f"the weight penalty reads `{d.name}`, computed by `{_emit.code(call.func)}(...)`, "
                                      "which e2k does not carry into the model")
            for inner in self.names_read(d.value):
                if inner.value in ("features", "labels", "mode") and self.latest_def(inner.value, d.index) is None:
                    self.refuse(inner, f"the weight penalty reads `{d.name}`, computed from `{inner.value}`")
            prelude[d.index] = d
            pending.extend((n, d.index, False) for n in self.names_read(d.value))
        source_names = {d.name for d in sources.values()}
        for part in parts:
            iterated = self._penalty_comprehensions(part, source_names, penalty)
            for node in _walk(part):  # the variables only as what a comprehension runs over
                is_source = self._trainable_source(node) or (
                    isinstance(node, cst.Name) and node.value in source_names and self._is_read(node))
                if is_source and id(node) not in iterated:
                    self.refuse(node, f"the weight penalty uses `{_emit.code(node)}` otherwise than as the variables a "
                                      "comprehension runs over (`[tf.nn.l2_loss(v) for v in tf.trainable_variables()]`)")
            filters = {id(call) for _, call in penalty.tested if isinstance(call, cst.Call)}
            for call in iter_calls(part):
                if self._trainable_source(call) or id(call) in filters:
                    continue
                path = self.ctx.call_api_path(call)
                if self.role(call) is not None or (path is None and _emit.code(call.func) not in _PENALTY_BUILTINS):
                    self.refuse(call, f"the weight penalty calls `{_emit.code(call.func)}(...)`, which e2k does not carry "
                                      "into the model")
        penalty.prelude = [prelude[i] for i in sorted(prelude)]
        penalty.defs = [*(sources[i] for i in sorted(sources)), *penalty.prelude, *([named] if named else [])]
        return penalty

    def _check_source(self, call: cst.Call) -> None:
        if self.ctx.call_api_path(call) in _TRAINABLE and call.args:
            self.refuse(call, f"`{_emit.code(call)}` selects variables by scope, which Keras names otherwise; "
                              "e2k carries the penalty over all of them, filtered by a test of their names")

    def _penalty_comprehensions(self, value: cst.BaseExpression, source_names: set[str], penalty: _Penalty) -> set[int]:
        """Each comprehension over the graph's variables: its element reads each variable as a
        tensor, its filter tests names e2k can carry; its iterable becomes the model's variables.
        The ids of those iterables."""
        iterated = set()
        for comp in _walk(value):
            if not isinstance(comp, (cst.ListComp, cst.GeneratorExp)):
                continue
            source = comp.for_in.iter
            if not (self._trainable_source(source) or isinstance(source, cst.Name) and source.value in source_names):
                continue
            if isinstance(source, cst.Call):
                self._check_source(source)
            loop = comp.for_in
            if loop.inner_for_in is not None or not isinstance(loop.target, cst.Name):
                self.refuse(comp, "this comprehension over the graph's variables is not one e2k reads "
                                  "(`[tf.nn.l2_loss(v) for v in tf.trainable_variables() if ...]`)")
            var = loop.target.value
            for name in _walk(comp.elt):
                if isinstance(name, cst.Name) and name.value == var and self._is_read(name):
                    arg = self.ctx.parent(name)
                    call = self.ctx.parent(arg) if isinstance(arg, cst.Arg) else None
                    if call is None or self.ctx.call_api_path(call) is None or self.role(call) is not None:
                        self.refuse(name, f"the weight penalty computes with `{var}` otherwise than as the argument of a "
                                          f"TensorFlow op (`tf.nn.l2_loss({var})`)")
            for condition in loop.ifs:
                self._carry_filter(condition.test, cst.Attribute(cst.Name(var), cst.Name("name")), var, penalty, False)
            penalty.replacements[source] = _emit.expr("self.trainable_variables")
            iterated.add(id(source))
        return iterated

    def _carry_filter(self, test: cst.BaseExpression, name_of: cst.BaseExpression, var: str,
                      penalty: _Penalty, in_helper: bool) -> None:
        """A filter on each variable that means on the Keras model's variables what it meant on
        TF1's: tests of a layer's or a variable's kind in the name (``"batch_normalization" not
        in v.name``), and of the variable's rank (``len(v.shape) > 1``); refuses the rest."""
        if isinstance(test, cst.BooleanOperation):
            self._carry_filter(test.left, name_of, var, penalty, in_helper)
            self._carry_filter(test.right, name_of, var, penalty, in_helper)
            return
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            self._carry_filter(test.expression, name_of, var, penalty, in_helper)
            return
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            if isinstance(target.operator, (cst.In, cst.NotIn)) and isinstance(test.left, cst.SimpleString) \
                    and target.comparator.deep_equals(name_of):
                text = test.left.evaluated_value
                if not isinstance(text, str) or not _NAME_TOKEN.fullmatch(text):
                    self.refuse(test, f"the weight penalty's filter looks for `{test.left.value}` in the variables' names: "
                                      "e2k carries a test of a layer's or a variable's kind (letters and `_`: "
                                      "'batch_normalization', 'bias'), which the Keras names hold alike; digits, `/` or "
                                      "`:` depend on TF1's scopes, counters and `:0`")
                penalty.tested.append((text, test))
                if not in_helper:
                    penalty.replacements[target.comparator] = _emit.expr('getattr({v}, "path", {v}.name)', v=var)
                return
            if not in_helper and _is_rank_of(test.left, var) and isinstance(target.comparator, cst.Integer):
                return
        if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and not in_helper and len(test.args) == 1 \
                and test.args[0].keyword is None and test.args[0].value.deep_equals(name_of):
            helper, param, returned = self._filter_helper(test)
            self._carry_filter(returned, cst.Name(param), param, penalty, True)
            penalty.tested.append((None, test))  # kept as a call: its tests are in `tested` too
            penalty.replacements[test.args[0].value] = _emit.expr('getattr({v}, "path", {v}.name)', v=var)
            return
        self.refuse(test, f"the weight penalty's filter `{_emit.code(test)}` is not one e2k carries to Keras, whose "
                          "variables are named otherwise (Keras 2 `model/dense/kernel:0`, Keras 3 `kernel` with "
                          "`dense/kernel` in `v.path`): e2k carries `'text' in v.name` and `not in` (through `and`, "
                          "`or`, `not`, a function of the module that returns such a test) and `len(v.shape)` comparisons")

    def _filter_helper(self, call: cst.Call):
        """``exclude_batch_norm(v.name)``: a function of the module that returns a test of the name
        it is given; called as it is from ``call``, with the Keras name."""
        from estimator2keras._units import resolve

        helper = resolve(self.ctx, call.func)
        what = f"`{_emit.code(call.func)}(...)`"
        if not isinstance(helper, cst.FunctionDef) or not isinstance(self.ctx.parent(helper), cst.Module):
            self.refuse(call, f"the weight penalty's filter calls {what}, which is not a function of the module "
                              "(a function defined in the model_fn goes with it)")
        params = helper.params
        if helper.decorators or len(params.params) != 1 or params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) \
                or params.star_kwarg or params.kwonly_params or params.posonly_params:
            self.refuse(call, f"the weight penalty's filter calls {what}, which does not take the one name")
        body = [small for line in getattr(helper.body, "body", ()) for small in getattr(line, "body", [None])]
        if body and isinstance(body[0], cst.Expr) and isinstance(body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
            body = body[1:]  # its docstring
        if len(body) != 1 or not isinstance(body[0], cst.Return) or body[0].value is None:
            self.refuse(call, f"the weight penalty's filter calls {what}, which is not one `return` of a test e2k reads")
        return helper, params.params[0].name.value, body[0].value

    # -- the checks of the forward pass leave the penalty to this part -------------------------------
    def check_beyond_catalogue(self, defs: list[_Def], *args, **kwargs) -> None:
        penalty = self.penalty
        if penalty is None:
            return super().check_beyond_catalogue(defs, *args, **kwargs)
        inside = {id(n) for n in _walk(penalty.value)}
        holders = [d for d in defs if d.value is not None and id(penalty.value) in {id(n) for n in _walk(d.value)}]
        super().check_beyond_catalogue([d for d in defs if d.small not in penalty.smalls and d not in holders], *args, **kwargs)
        for d in holders:  # `loss = cross_entropy + <penalty>`: the rest of it
            for call in iter_calls(d.value):
                path = self.ctx.call_api_path(call) if id(call) not in inside else None
                if path in BEYOND_CATALOGUE:
                    self.refuse(call, f"`{_emit.code(call.func)}` in the model_fn is beyond what e2k converts")

    # -- writing: a model class whose `call` adds it ---------------------------------------------
    def sequential(self, *args, **kwargs):
        own = self.penalty is not None or getattr(self, "own_loss", None) is not None
        return None if own else super().sequential(*args, **kwargs)

    def direct_model(self, *args, **kwargs):
        own = self.penalty is not None or getattr(self, "own_loss", None) is not None
        return None if own else super().direct_model(*args, **kwargs)

    def _call_arguments(self, defs, extra=(), *args, **kwargs):
        penalty = self.penalty
        if penalty is not None:  # `params["weight_decay"]`, read in `call` as `self.params`
            extra = [*extra, penalty.value, *(d.value for d in penalty.prelude)]
        arguments = super()._call_arguments(defs, extra, *args, **kwargs)
        own = getattr(self, "own_loss", None)
        if own is not None:  # `params` read by compute_loss: `self.params`
            arguments += [a for a in own.arguments if a not in arguments]
        return arguments

    def model_class(self, class_name, *args, **kwargs):
        klass, arguments = super().model_class(class_name, *args, **kwargs)
        if getattr(self, "own_loss", None) is not None and kwargs.get("base") is None:
            klass = self._with_own_loss(klass)
        if self.penalty is None:
            return klass, arguments
        self._check_penalty_names(class_name)
        lines = self._penalty_lines()
        body = list(klass.body.body)
        for i, stmt in enumerate(body):
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "call":
                inner = list(stmt.body.body)
                inner[-1:-1] = lines  # after the forward pass, before `return`
                body[i] = stmt.with_changes(body=stmt.body.with_changes(body=inner))
        return klass.with_changes(body=klass.body.with_changes(body=body)), arguments

    def _with_own_loss(self, klass: cst.ClassDef) -> cst.ClassDef:
        """The model's loss tracker in ``__init__`` and its ``compute_loss`` after ``call``."""
        body = list(klass.body.body)
        for i, stmt in enumerate(body):
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
                inner = list(stmt.body.body)
                inner.insert(1, _emit.statement(f'self.loss_tracker = {self.tf}.keras.metrics.Mean(name="loss")'))
                body[i] = stmt.with_changes(body=stmt.body.with_changes(body=inner))
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "call":
                at = i + 1
        body.insert(at, self.own_loss_method())
        return klass.with_changes(body=klass.body.with_changes(body=body))

    def _penalty_lines(self) -> list[cst.BaseStatement]:
        from estimator2keras._modelfn_emit import _ForwardRewriter, _line
        from estimator2keras._symbols import tf2_respellings

        penalty = self.penalty

        def rewritten(node):
            replacements = {**dict(tf2_respellings(self.ctx, node, self.tf)), **penalty.replacements}
            return node.visit(_ForwardRewriter(self, replacements))

        renamed = {id(node) for node in penalty.replacements if isinstance(node, cst.Attribute)}  # `v.name`
        note = _emit.comment_line("Keras 2 names a variable with its layers in v.name, Keras 3 in v.path")
        lines, noted = [], False
        for d, line in [*((d, _line(rewritten(d.small), d.line, d.small)) for d in penalty.prelude),
                        ((penalty.named, _line(rewritten(penalty.named.small), penalty.named.line, penalty.named.small))
                         if penalty.named is not None else
                         (None, _emit.statement("self.add_loss({p})", p=rewritten(penalty.value))))]:
            line = self._fit_penalty(line)
            if not noted and any(id(n) in renamed for n in _walk(d.value if d is not None else penalty.value)):
                line, noted = _with_leading(line, note), True
            lines.append(line)
        if penalty.named is not None:
            lines.append(_emit.statement(f"self.add_loss({penalty.named.name})"))
        return lines

    def _fit_penalty(self, line: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        """A penalty too long for one line of ``call`` puts its comprehensions' parts on lines of
        their own, as TensorFlow's official models write them::

            l2_loss = WEIGHT_DECAY * tf.add_n([
                tf.nn.l2_loss(v)
                for v in self.trainable_variables
                if "batch_normalization" not in getattr(v, "path", v.name)])
        """
        text = _emit.code(line).strip()
        depth, node = 2, self.ctx.parent(self.fn)
        while node is not None:  # the model_fn's own depth, as `fit` counts it
            depth += isinstance(node, (cst.FunctionDef, cst.ClassDef))
            node = self.ctx.parent(node)
        if "\n" in text or len(self.ctx.module.default_indent) * depth + len(text) <= _emit.max_line():
            return line  # it fits, or the model_fn wrote it on several lines already

        def hanging():
            return cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), indent=True,
                                               last_line=cst.SimpleWhitespace(self.ctx.module.default_indent))

        replacements = {}
        for comp in _walk(line):
            if isinstance(comp, cst.ListComp) and not any(comp in _walk(done) for done in replacements):
                ifs = [c.with_changes(whitespace_before=hanging()) for c in comp.for_in.ifs]
                replacements[comp] = comp.with_changes(
                    lbracket=cst.LeftSquareBracket(whitespace_after=hanging()),
                    for_in=comp.for_in.with_changes(whitespace_before=hanging(), ifs=ifs))
        return _emit.replace_in(line, replacements) if replacements else self.fit(line, 2)

    def _check_penalty_names(self, class_name: str) -> None:
        """A test of the variables' names means in Keras what it meant in TF1 where the names
        differ only in what the text cannot be part of: the Keras model's own name in front (Keras
        2 and 3), ``:0`` behind (Keras 2, TF1), TF1's variable scopes (not carried over), and the
        layers named alike (TF1's layers are Keras layers, named by ``name=`` or their kind)."""
        tested = [(text, node) for text, node in self.penalty.tested if text is not None]
        if not tested:
            return
        model = _keras_snake(class_name)
        scopes = self._scope_names()
        for text, node in tested:
            if text in model + "_":
                self.refuse(node, f"the weight penalty's filter looks for '{text}' in the variables' names, and the Keras "
                                  f"model `{class_name}` puts its own name, `{model}`, in front of every one")
            for scope in scopes:
                if scope is None or text in scope:
                    what = f"`{scope}`, which holds it" if scope is not None else "one e2k cannot read"
                    self.refuse(node, f"the weight penalty's filter looks for '{text}' in the variables' names, and TF1 "
                                      f"named them under a variable scope, {what}, that the Keras names do not have")
        if self.model_objects:
            self.refuse(tested[0][1], "the weight penalty's filter tests the variables' names, and the model_fn applies a "
                                      "whole Keras model, whose variables Keras 2 names otherwise than TF1")
        for app in self.layer_apps.values():
            paths = []
            for made in (app.call, app.call.func, app.constructor):  # `dense(x)`, `Dense(3)(x)`, `layer = Dense(3)`
                try:
                    paths.append(self.ctx.call_api_path(made) if isinstance(made, cst.Call) else None)
                except Exception:  # a constructor e2k wrote: not a node of the module
                    pass
            if not any((p or "").startswith(_KERAS_NAMED_LAYERS) for p in paths):
                self.refuse(tested[0][1], f"the weight penalty's filter tests the variables' names, and "
                                          f"`{_emit.code(app.call.func)}` named its variables otherwise than the Keras "
                                          "layer it becomes")

    def _scope_names(self) -> list[str | None]:
        """The names of the variable and name scopes the model_fn's layers were made in (None: a
        name e2k cannot read)."""
        functions = [self.fn, *(h.fn for h in getattr(self, "helpers", {}).values())]
        names = []
        for fn in functions:
            for node in _walk(fn):
                if not isinstance(node, cst.With):
                    continue
                for item in node.items:
                    call = item.item
                    path = self.ctx.call_api_path(call) if isinstance(call, cst.Call) else None
                    if not (path or "").endswith(("variable_scope", "name_scope")):
                        continue
                    first = call.args[0].value if call.args else None
                    names.append(first.evaluated_value if isinstance(first, cst.SimpleString) else None)
        return names


def _plain_assign(d: _Def) -> bool:
    return isinstance(d.small, cst.Assign) and len(d.small.targets) == 1 and isinstance(d.small.targets[0].target, cst.Name)


def _is_rank_of(node: cst.BaseExpression, var: str) -> bool:
    """``len(v.shape)``."""
    return isinstance(node, cst.Call) and _emit.code(node).replace(" ", "") == f"len({var}.shape)"


def _keras_snake(name: str) -> str:
    """The name Keras (2 and 3) gives a model of class ``name``."""
    name = re.sub(r"(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def _with_leading(line: cst.BaseStatement, comment: cst.EmptyLine) -> cst.BaseStatement:
    return line.with_changes(leading_lines=[*line.leading_lines, comment])
