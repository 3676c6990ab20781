"""Generate estimator2keras/tf2_symbols.txt: TF1 (compat.v1) API paths -> their TF2 spelling.

Run with TensorFlow 2.15 (the last release with the full TF1 surface beside TF2):

    python tools/gen_tf2_symbols.py [NEWEST_PYTHON] > estimator2keras/tf2_symbols.txt

With NEWEST_PYTHON (an interpreter with the newest TensorFlow), rows whose TF2 spelling does
not exist there are dropped: such names are left as the user wrote them.

Two kinds of rows, tab-separated:

- ``v1path  v2path``: both name the *same object* in TF 2.15 (functions, classes, dtypes);
  always safe to respell.
- ``v1path  compat.v1.v1path  !|~``: a TF1 name with no TF2 namesake of the same behaviour;
  in converted code ``tf.to_float`` must at least become ``tf.compat.v1.to_float`` to run.
  ``!``: TF2 has no such name (a program using it through ``tf.`` is TF1 code); ``~``: TF2
  has the name with another behaviour (``tf.where``): only respelled in TF1 code.
- ``v1path  v2path  N  renames  v1only``: a TF1 function whose TF2 namesake has the same
  behaviour but a different signature. A call is respelled only when it passes at most N
  positional arguments and none of the ``v1only`` keywords; ``renames`` (``old=new,...``)
  are keyword renames. Behaviour changes come from TensorFlow's own upgrade tables
  (tensorflow/tools/compatibility): functions that ``tf_upgrade_v2`` sends to
  ``tf.compat.v1`` (like ``tf.where``) or rewrites with a transformer (like
  ``tf.nn.dropout``) are never respelled.

tests/test_symbols.py checks every TF2 path against the newest TensorFlow.
"""
from __future__ import annotations

import inspect
import subprocess
import sys
import types

import tensorflow as tf
from tensorflow.python.util import tf_inspect
from tensorflow.tools.compatibility import all_renames_v2, tf_upgrade_v2

# Same meaning, different object: dataset classes are V1 adapters in compat.v1.
MANUAL = {
    "data.Dataset": "data.Dataset",
    "data.TFRecordDataset": "data.TFRecordDataset",
    "data.TextLineDataset": "data.TextLineDataset",
    "data.FixedLengthRecordDataset": "data.FixedLengthRecordDataset",
    "data.experimental.AUTOTUNE": "data.AUTOTUNE",
    # tf.contrib.data's dataset classes (TF 1.2-1.3), the same classes since TF 1.4's tf.data.
    "contrib.data.Dataset": "data.Dataset",
    "contrib.data.TFRecordDataset": "data.TFRecordDataset",
    "contrib.data.TextLineDataset": "data.TextLineDataset",
    "contrib.data.FixedLengthRecordDataset": "data.FixedLengthRecordDataset",
    "contrib.data.AUTOTUNE": "data.AUTOTUNE",
}
# Namespaces that are TF1 concepts even where an object is shared (converted by rules, not renamed).
SKIP_PREFIXES = ("estimator.", "keras.", "layers.", "losses.", "metrics.", "train.", "summary.", "compat.",
                 "feature_column.", "saved_model.", "initializers.", "logging.", "app.", "flags.", "lite.")


def walk(module, prefix, seen, out):
    for name in sorted(dir(module)):
        if name.startswith("_"):
            continue
        try:
            obj = getattr(module, name)
        except Exception:
            continue
        path = f"{prefix}{name}"
        if isinstance(obj, types.ModuleType):
            if name in ("compat", "keras", "estimator"):
                continue  # reached elsewhere under their real names, or not renamed at all
            # Only TF's generated public API modules; not implementation modules.
            if id(obj) in seen or not obj.__name__.startswith("tensorflow._api."):
                continue
            seen.add(id(obj))
            walk(obj, f"{path}.", seen, out)
        else:
            out.setdefault(path, obj)


def main() -> int:
    v1, v2 = {}, {}
    walk(tf.compat.v1, "", set(), v1)
    walk(tf, "", {id(tf.compat)}, v2)
    by_object: dict[int, list[str]] = {}
    for path, obj in v2.items():
        if path.startswith(("compat.", "keras.", "estimator.")):
            continue
        if isinstance(obj, (int, float, str, bool)) and not isinstance(obj, bool):
            continue
        by_object.setdefault(id(obj), []).append(path)
    rows = dict(MANUAL)
    # tf.contrib names TensorFlow itself moved into TF2 under another name (tf_upgrade_v2's
    # manual renames): the same objects. Those it sends to compat.v1 (RNN cells, TPU) or to
    # the Estimator are converted by rules, not renamed.
    for old, new in all_renames_v2.manual_symbol_renames.items():
        if old.startswith("tf.contrib.") and not new.startswith("tf.compat.") and "estimator" not in new:
            rows.setdefault(old[len("tf."):], new[len("tf."):])
    for path, obj in v1.items():
        if path.startswith(SKIP_PREFIXES) or path in rows:
            continue
        if not (inspect.isfunction(obj) or inspect.isclass(obj) or callable(obj) or isinstance(obj, tf.dtypes.DType)):
            if path not in ("newaxis",):
                continue
        candidates = by_object.get(id(obj))
        if not candidates:
            continue
        rows[path] = min(candidates, key=lambda p: (p != path, p.count("."), len(p), p))
    spec = tf_upgrade_v2.TFAPIChangeSpec()
    compatible = {}
    for path, obj in v1.items():
        if path in rows or path.startswith(SKIP_PREFIXES) or path not in v2 or not callable(obj):
            continue
        key = f"tf.{path}"
        if all_renames_v2.symbol_renames.get(key, "").startswith("tf.compat.v1."):
            continue  # TensorFlow marks a change of behaviour
        if key in spec.function_transformers or key in spec.function_warnings:
            continue  # needs more than a rename
        try:
            old = tf_inspect.getfullargspec(obj)
            new = tf_inspect.getfullargspec(v2[path])
        except Exception:
            continue
        renames = spec.function_keyword_renames.get(key, {})
        dropped = [a for a, b in renames.items() if not b]  # keywords TF2 removed
        renames = {a: b for a, b in renames.items() if b}
        old_names = [renames.get(a, a) for a in old.args]
        new_names = list(new.args) + list(new.kwonlyargs)
        positional = 0
        for a, b in zip(old_names, new.args):
            if a != b:
                break
            positional += 1
        v1_only = sorted({a for a in old_names if a not in new_names} | set(dropped))
        compatible[path] = (path, positional, renames, v1_only)

    for path, obj in v1.items():
        if path in rows or path in compatible or path.startswith(SKIP_PREFIXES):
            continue
        if callable(obj) or isinstance(obj, tf.dtypes.DType):
            rows[path] = f"compat.v1.{path}\t{'~' if path in v2 else '!'}"

    if len(sys.argv) > 1:
        missing = missing_in(sys.argv[1], {_target(v) for v in rows.values()} | {c[0] for c in compatible.values()})
        rows = {k: v for k, v in rows.items() if _target(v) not in missing}
        compatible = {k: v for k, v in compatible.items() if v[0] not in missing}

    print("# TF1 (compat.v1) API path -> its TF2 spelling. Generated by tools/gen_tf2_symbols.py")
    print("# from TF 2.15 and TensorFlow's own upgrade tables; see that script for the format.")
    for path in sorted({*rows, *compatible}):
        if path in rows:
            print(f"{path}\t{rows[path]}")
        else:
            target, positional, renames, v1_only = compatible[path]
            renamed = ",".join(f"{a}={b}" for a, b in sorted(renames.items())) or "-"
            print(f"{path}\t{target}\t{positional}\t{renamed}\t{','.join(v1_only) or '-'}")
    return 0


def _target(row: str) -> str:
    return row.split("\t")[0]


def missing_in(python: str, targets: set[str]) -> set[str]:
    """The targets that the TensorFlow of ``python`` does not have."""
    check = (
        "import sys, tensorflow as tf\n"
        "for path in sys.stdin.read().split():\n"
        "    obj = tf\n"
        "    try:\n"
        "        for part in path.split('.'):\n"
        "            obj = getattr(obj, part)\n"
        "    except AttributeError:\n"
        "        print(path)\n"
    )
    out = subprocess.run([python, "-c", check], input="\n".join(sorted(targets)), capture_output=True, text=True, check=True)
    return set(out.stdout.split())


if __name__ == "__main__":
    sys.exit(main())
