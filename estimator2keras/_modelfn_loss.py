"""Reading a model_fn's loss: the Keras loss it becomes, the model output it compares with the
labels, and the statements that make it up (``_LossReader``, a part of ``_modelfn._Converter``).
"""
from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._modelfn_read import REGULARIZATION_LOSS, LossConversion, _Def


class _LossReader:
    def read_loss(self, loss: cst.BaseExpression, at: int):
        """The Keras loss, the model output expression, and the statements that make up the loss."""
        used: list[_Def] = []
        regularized = False
        expr = loss
        while True:
            if isinstance(expr, cst.Name):
                d = self.latest_def(expr.value, at)
                if d is None:
                    self.refuse(expr, f"`{expr.value}` is not computed in the model_fn")
                used.append(d)
                if isinstance(d.small, cst.AugAssign):
                    if not (isinstance(d.small.operator, cst.AddAssign) and self._is_regularization(d.value)):
                        self.refuse(d.small, "this change to the loss is not converted")
                    regularized = True
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
            break
        if not isinstance(expr, cst.Call) or self.role(expr) != "loss":
            self.refuse(expr, "the loss is not a call e2k converts (tf.losses.* or a cross-entropy idiom)")
        conversion: LossConversion = self.translate("loss", expr)
        labels = self.resolve(conversion.labels, at)
        labels, conversion = self.sparse_labels(labels, conversion, at)
        if not (isinstance(labels, cst.Name) and labels.value == "labels"):
            self.refuse(conversion.labels, "the loss does not compare the model_fn's `labels` as they come")
        return conversion, at, used, regularized

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
        return path == "squeeze" and rest in ([], ["-1"], ["1"], ["axis=-1"])

    def _is_regularization(self, expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Call) and self.ctx.call_api_path(expr) in REGULARIZATION_LOSS
