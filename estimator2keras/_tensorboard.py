"""The TensorBoard callback every conversion emits, made in one place with the note it carries.

TensorFlow 2.20 and later do not install TensorBoard (tensorflow-cpu 2.21 does not): there a
`tf.keras.callbacks.TensorBoard` stops `fit` after its first batch with TensorFlow's own
`TBNotInstalledError: TensorBoard is not installed` (measured on TF 2.21 / Keras 3.15, with
`update_freq` a number or "epoch"). That error is clear and comes before any real training
time is lost, so the converted program keeps the plain callback, as a Keras author writes it,
and the conversion says what the program needs: every rule that emits the callback reports
`needs_tensorboard(...)` of what it did, as the note for summaries not carried over does.
"""
from __future__ import annotations

import libcst as cst

from estimator2keras import _emit

NEEDS_TENSORBOARD = "TensorFlow 2.20+ needs `pip install tensorboard`"
#: The note above the callbacks list that holds a TensorBoard callback (listed in the file's
#: header): the converted program's one new requirement.
NOTE = ("The TensorBoard callback needs the tensorboard package, which TensorFlow 2.20 and later no "
        "longer install: pip install tensorboard.")


def is_callback(node: cst.CSTNode) -> bool:
    """Whether ``node`` is a call that makes a TensorBoard callback (``tensorboard_callback``'s)."""
    return isinstance(node, cst.Call) and _emit.code(node.func).endswith("TensorBoard")


def needs_tensorboard(message: str) -> str:
    """``message`` of a conversion that emits, or advises, a TensorBoard callback, with the note."""
    return f"{message} ({NEEDS_TENSORBOARD})"


def tensorboard_callback(tf: str, log_dir: cst.BaseExpression, update_freq: cst.BaseExpression,
                         what: str) -> tuple[cst.BaseExpression, str]:
    """`tf.keras.callbacks.TensorBoard(log_dir, update_freq=...)`, and the finding's message for
    ``what`` became it (with the note)."""
    callback = _emit.expr("{tf}.keras.callbacks.TensorBoard({d}, update_freq={n})", tf=tf, d=log_dir, n=update_freq)
    return callback, needs_tensorboard(f"{what} -> tf.keras.callbacks.TensorBoard")
