from __future__ import annotations

import libcst as cst

from estimator2keras._nodes import nodes_below
from estimator2keras._rule import Case, ModuleRule, Safety

#: What each ModeKeys constant is: the string itself (tensorflow_estimator's model_fn.py).
MODE_STRINGS = {"TRAIN": "train", "EVAL": "eval", "PREDICT": "infer", "INFER": "infer"}


class ModeKeysToStrings(ModuleRule):
    """`tf.estimator.ModeKeys.TRAIN` (`EVAL`, `PREDICT`) becomes the string it is: `"train"`.

    ## What it does
    Every reference to a mode key of `tf.estimator.ModeKeys` (any import of it:
    `tf.compat.v1.estimator.ModeKeys`, `from tensorflow.python.estimator.model_fn import
    ModeKeys as Modes`, `tf.contrib.learn.ModeKeys`) becomes its value, `"train"`, `"eval"`
    or `"infer"`, in every file, also where no Estimator is built: input functions that
    take a `mode`, helpers that read datasets by mode. An import of `ModeKeys` left unused
    goes. A model_fn's own mode tests are left to its conversion (E2K001): a model_fn that
    does not convert stays exactly as it was.

    ## Why
    `tf.estimator` is gone in TensorFlow 2.16, and with it `ModeKeys`; the keys were always
    plain strings (`ModeKeys.TRAIN == "train"`), so code that compares or passes them works
    the same with the strings, under the Estimator as after the conversion.

    ## Fix safety
    Safe: each constant is replaced by its own value.

    ## References
    - https://www.tensorflow.org/api_docs/python/tf/estimator/ModeKeys
    """

    code = "E2K009"
    summary = "tf.estimator.ModeKeys.TRAIN/EVAL/PREDICT -> the strings they are ('train', 'eval', 'infer')"
    safety = Safety.SAFE
    order = 50
    with_units = True
    keywords = ("ModeKeys", "Modes")

    cases = [
        Case(
            id="input-fn-module",
            before='''\
import tensorflow as tf


def read_dataset(filename, mode=tf.estimator.ModeKeys.TRAIN):
    dataset = tf.data.TextLineDataset(filename)
    if mode == tf.estimator.ModeKeys.TRAIN:
        dataset = dataset.shuffle(100).repeat()
    return dataset.batch(32)


def eval_input_fn():
    return read_dataset("eval.csv", tf.estimator.ModeKeys.EVAL)
''',
            after='''\
import tensorflow as tf


def read_dataset(filename, mode="train"):
    dataset = tf.data.TextLineDataset(filename)
    if mode == "train":
        dataset = dataset.shuffle(100).repeat()
    return dataset.batch(32)


def eval_input_fn():
    return read_dataset("eval.csv", "eval")
''',
        ),
        Case(
            id="imported-as-modes",
            before='''\
from tensorflow.python.estimator.model_fn import ModeKeys as Modes


def shuffle_for(mode):
    return mode == Modes.TRAIN
''',
            after='''\
def shuffle_for(mode):
    return mode == "train"
''',
        ),
    ]

    def transform(self, module: cst.Module, ctx) -> cst.Module:
        imports = set()
        found = []

        def prune(node) -> bool:
            # An import; a model_fn, whose mode tests go with its conversion or stay as they were.
            return isinstance(node, (cst.Import, cst.ImportFrom)) or isinstance(node, cst.FunctionDef) and {
                "features", "labels"} <= {p.name.value for p in node.params.params}

        for node in nodes_below(module, prune):
            if isinstance(node, cst.Attribute) and node.attr.value in MODE_STRINGS and _mode_key(node, ctx):
                found.append(node)
        for node in sorted(found, key=ctx.position):  # reported in the file's order
            ctx.edits.replace(node, cst.SimpleString(f'"{MODE_STRINGS[node.attr.value]}"'))
            ctx.report(node, f"ModeKeys.{node.attr.value} -> \"{MODE_STRINGS[node.attr.value]}\"", kind="fixed")
            if isinstance(node.value, cst.Name):
                imports.add(node.value.value)
        for statement in module.body:
            small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
            if isinstance(small, cst.ImportFrom) and small.module is not None and not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    bound = alias.asname.name.value if alias.asname else cst.Module([]).code_for_node(alias.name)
                    if bound in imports and cst.Module([]).code_for_node(alias.name) == "ModeKeys":
                        ctx.remove_import_if_unused(
                            cst.Module([]).code_for_node(small.module), "ModeKeys", bound if alias.asname else None)
        return module


def _mode_key(node: cst.Attribute, ctx) -> bool:
    path = ctx.api_path(node) or ""
    return path.rpartition(".")[0].endswith("ModeKeys") and "estimator" in path or path.startswith(
        ("contrib.learn.ModeKeys.", "estimator.ModeKeys."))
