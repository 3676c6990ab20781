"""What an Estimator checkpoint holds that `e2k checkpoint` cannot carry over, said precisely.

- Partitioned variables (a partitioner split a variable into `part_0`, `part_1`, ...): the
  Keras model holds each as one variable; the parts are not joined. Refused before the
  migrated program runs, each variable named with its parts.
- Ids hashed into weight rows (hash-bucket columns, crossed columns, more than one
  out-of-vocabulary bucket): the rows are copied as they are, so a migrated preprocessing
  that hashes another way looks up other rows for the same ids. Nothing in the checkpoint
  says so; the prediction proof finds it. When it does, the hashing ops of the Estimator's
  graph (read from the checkpoint's `.meta`) name the weights whose rows the ids select.
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

_PART = re.compile(r"^(.*)/part_(\d+)$")

# Ops of TF1 feature columns that turn ids or strings into bucket numbers, and how.
HASH_OPS = {
    "StringToHashBucketFast": "FarmHash64 (tf.strings.to_hash_bucket_fast)",
    "StringToHashBucketStrong": "keyed SipHash (tf.strings.to_hash_bucket_strong)",
    "StringToHashBucket": "Fingerprint64 (tf.strings.to_hash_bucket, deprecated)",
    "SparseCross": "FingerprintCat64 of the crossed values (crossed_column)",
    "SparseCrossHashed": "FingerprintCat64 of the crossed values (crossed_column)",
    "SparseCrossV2": "FingerprintCat64 of the crossed values (crossed_column)",
}


def partitioned(variables: list[dict], keys: list) -> tuple[dict[str, list[dict]], list[str]]:
    """The Estimator's partitioned variables ({base name: its parts in order}) and one refusal
    naming each with its full shape and its parts, or ({}, [])."""
    groups: dict[str, list[tuple[int, dict]]] = {}
    for variable in variables:
        match = _PART.match(variable["name"])
        if match:
            groups.setdefault(match.group(1), []).append((int(match.group(2)), variable))
    if not groups:
        return {}, []
    saved = {name: list(shape) for name, shape in keys}
    parts = {base: [v for _, v in sorted(found, key=lambda p: p[0])] for base, found in groups.items()}
    described = []
    for base, found in parts.items():
        full = saved.get(base) or _joined_shape([list(v.get("shape") or []) for v in found])
        pieces = ", ".join(f"{v['name'].rsplit('/', 1)[1]} {list(v.get('shape') or [])}" for v in found)
        described.append(f"{base} {full} in {len(found)} part{'s' if len(found) > 1 else ''} ({pieces})")
    refusal = (f"{len(parts)} partitioned variable(s) cannot be carried over: " + "; ".join(described)
               + ". A partitioner (the canned Estimators' partitioner= or input_layer_partitioner=, a "
               "variable_scope's) saved each variable as slices; the migrated Keras model holds it as one "
               "variable, and e2k checkpoint does not join the parts. Retrain without the partitioner, or "
               "read each whole value with tf.train.load_variable(OLD_DIR, NAME) and assign it yourself")
    return parts, [refusal]


def _joined_shape(shapes: list[list[int]]) -> list[int]:
    """The shape the parts make along the one axis where they differ (axis 0 when none does)."""
    if not shapes or any(len(s) != len(shapes[0]) for s in shapes) or not shapes[0]:
        return shapes[0] if shapes else []
    axes = [a for a in range(len(shapes[0])) if len({s[a] for s in shapes}) > 1] or [0]
    joined = list(shapes[0])
    joined[axes[0]] = sum(s[axes[0]] for s in shapes)
    return joined


def is_part_key(key: str, bases: set[str]) -> bool:
    """A checkpoint key of a partitioned variable: the whole variable (saved as slices) or a
    slot of one of its parts (`<base>/part_0/Ftrl`)."""
    return any(key == base or key.startswith(base + "/part_") for base in bases)


_READ_GRAPH = r"""
import json, sys
from tensorflow.core.protobuf import meta_graph_pb2
meta = meta_graph_pb2.MetaGraphDef()
with open(sys.argv[1], "rb") as f:
    meta.ParseFromString(f.read())
ops = set(sys.argv[2].split(","))
found = []
for node in meta.graph_def.node:
    if node.op in ops:
        buckets = node.attr["num_buckets"].i if "num_buckets" in node.attr else None
        found.append([node.op, node.name, buckets])
print(json.dumps(found))
"""


def hashing_ops(legacy_python: str, prefix: str, env: dict[str, str], timeout: float = 120) -> list[list] | None:
    """The hashing ops of the Estimator's graph saved with the checkpoint (``prefix``.meta):
    [op type, node name, num_buckets or None]; None when there is no graph to read."""
    meta = Path(prefix + ".meta")
    if not meta.is_file():
        return None
    try:
        done = subprocess.run([legacy_python, "-c", _READ_GRAPH, str(meta), ",".join(HASH_OPS)],
                              capture_output=True, text=True, env=env, timeout=timeout)
        return json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def hashed_weights(ops: list[list], variables: list[dict]) -> list[str]:
    """One line per feature column whose ids the Estimator hashed into weight rows: the column
    (its scope in the graph), how it hashed, into how many buckets, and the model variables
    whose rows those ids select. Out-of-vocabulary hashing into one bucket selects one row
    whatever the hash, and is left out."""
    columns: dict[str, dict] = {}
    for op, name, buckets in ops:
        if buckets is not None and buckets <= 1:
            continue
        scope = re.sub(r"^replica_\d+/", "", name).split("/")[:-1]
        # A variable's column is the scope its weights are created in (the component before
        # their own name); the op belongs to the column whose scope it lies deepest in (a
        # linear model's bias, in linear_model/, is a scope of every column's op too).
        depth = {}
        for variable in variables:
            parts = variable["name"].split("/")
            if len(parts) >= 2 and parts[-2] in scope:
                depth[variable["name"]] = max(i for i, s in enumerate(scope) if s == parts[-2])
        if not depth:
            continue
        deepest = max(depth.values())
        for variable in variables:
            if depth.get(variable["name"]) == deepest:
                column = variable["name"].split("/")[-2]
                entry = columns.setdefault(column, {"how": set(), "buckets": set(), "weights": {}})
                entry["how"].add(HASH_OPS[op])
                if buckets:
                    entry["buckets"].add(buckets)
                entry["weights"][variable["name"]] = list(variable.get("shape") or [])
    lines = []
    for column, entry in sorted(columns.items()):
        buckets = ", ".join(str(b) for b in sorted(entry["buckets"]))
        weights = ", ".join(f"{n} {s}" for n, s in entry["weights"].items())
        lines.append(f"{column}: {' and '.join(sorted(entry['how']))}"
                     + (f" into {buckets} buckets" if buckets else "") + f" -> rows of {weights}")
    return lines
