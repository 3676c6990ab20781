"""Resolving what a name in user code refers to, through imports and aliases.

Rules never match the text ``tf.``: ``import tensorflow as tf`` + ``tf.compat.v1.estimator``,
``import tensorflow.compat.v1 as tf1``, ``from tensorflow import estimator`` and
``tf.estimator`` all resolve (with libcst's ``QualifiedNameProvider``) to the same *API path*,
``estimator.Estimator``: the qualified name with the TensorFlow root prefix removed.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import libcst as cst
from libcst.metadata import QualifiedNameProvider, QualifiedNameSource

# Longest first: a qualified name is stripped of the first prefix that matches.
_API_PREFIXES = (
    "tensorflow.compat.v1.",
    "tensorflow.compat.v2.",
    "tensorflow_estimator.compat.v1.",
    "tensorflow_estimator.compat.v2.",
    "tensorflow_estimator.",
    "tensorflow.",
)
# `import keras` is the same API as `tf.keras`.
_KERAS_PREFIX = "keras."
#: `import tf_slim as slim` (`slim.fully_connected`, `slim.layers.conv2d`): tf.contrib.layers.
_SLIM_PREFIXES = ("tf_slim.",)
#: Estimator's implementation modules (`tensorflow.python.estimator.model_fn.ModeKeys`,
#: `tensorflow_estimator.python.estimator.canned.dnn.DNNClassifier`) -> the public API path.
_PRIVATE_TABLE = Path(__file__).with_name("estimator_private_paths.txt")
_PRIVATE_PREFIX = "python.estimator."


@lru_cache(maxsize=1)
def _private_paths() -> dict[str, tuple[str, bool]]:
    """The table written by ``tools/gen_estimator_private_paths.py``: private path ->
    (public path, whether it is an Estimator class)."""
    table = {}
    for line in _PRIVATE_TABLE.read_text().splitlines():
        if line and not line.startswith("#"):
            cells = line.split("\t")
            table[cells[0]] = (cells[1], cells[2:] == ["estimator"])
    return table


def _public_path(path: str, library: bool) -> str:
    """The public spelling of a path into Estimator's implementation modules, else ``path``.

    A symbol the table knows maps to its public path, and so does anything under it
    (``python.estimator.model_fn.ModeKeys.TRAIN`` -> ``estimator.ModeKeys.TRAIN``), through
    TF 1.x's ``tensorflow.python.estimator`` and tensorflow_estimator's own root alike
    (``from tensorflow_estimator.python.estimator import estimator as estimator_lib``, code
    copied from TensorFlow's sources). With ``library``, an Estimator class is left
    unresolved. The library's own files (which build its canned Estimators that way) are
    left alone by the engine (``_engine.is_library_file``)."""
    if not path.startswith(_PRIVATE_PREFIX):
        return path
    table = _private_paths()
    head, rest = path, ""
    while head.startswith(_PRIVATE_PREFIX):
        if head in table:
            public, estimator = table[head]
            return path if library and estimator else public + rest
        head, _, last = head.rpartition(".")
        rest = f".{last}{rest}"
    return path


def api_path_of_qualified(qualified: str) -> str | None:
    """``"tensorflow.compat.v1.layers.Dense"`` -> ``"layers.Dense"``; None when not TensorFlow."""
    if qualified in ("tensorflow", "tensorflow.compat.v1", "tensorflow.compat.v2"):
        return ""  # the root (`tf1 = tf.compat.v1` aliases it)
    for prefix in _API_PREFIXES:
        if qualified.startswith(prefix):
            path = qualified[len(prefix):]
            # `tf.compat.v1.losses` after `import tensorflow.compat.v1 as tf` (TensorFlow's
            # official models): compat.v1 has a compat module of its own.
            while path.startswith(("compat.v1.", "compat.v2.")):
                path = path[len("compat.v1."):]
            return _public_path(path, library=False)
    if qualified.startswith(_KERAS_PREFIX):
        return qualified
    if qualified.startswith(_SLIM_PREFIXES):
        # tf-slim is tf.contrib.layers (and slim) kept outside TensorFlow: the same functions.
        rest = qualified.split(".", 1)[1] if "." in qualified else ""
        rest = rest[len("layers."):] if rest.startswith("layers.") else rest
        return f"contrib.layers.{rest}" if rest else "contrib.layers"
    return None


def api_paths(node: cst.CSTNode, get_metadata) -> set[str]:
    """All TensorFlow API paths ``node`` may refer to (usually zero or one)."""
    try:
        names = get_metadata(QualifiedNameProvider, node, set())
    except KeyError:
        return set()
    paths = set()
    for name in names:
        if name.source is QualifiedNameSource.LOCAL:
            continue
        path = api_path_of_qualified(name.name)
        if path is not None:
            paths.add(path)
    return paths


def api_path(node: cst.CSTNode, get_metadata) -> str | None:
    """The TensorFlow API path ``node`` refers to, or None when it is not (unambiguously) TF."""
    paths = api_paths(node, get_metadata)
    return next(iter(paths)) if len(paths) == 1 else None


def call_api_path(node: cst.CSTNode, get_metadata) -> str | None:
    """The API path of the function a call calls, or None when ``node`` is not such a call."""
    # Only `name(...)` / `a.b(...)`: `Layer(1)(x)` calls a layer object, not the API.
    if isinstance(node, cst.Call) and isinstance(node.func, (cst.Name, cst.Attribute)):
        return api_path(node.func, get_metadata)
    return None


def dotted(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base is not None else None
    return None
