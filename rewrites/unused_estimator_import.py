from __future__ import annotations

import libcst as cst

from estimator2keras._context import _names_in_use
from estimator2keras._leftovers import is_estimator_api
from estimator2keras._rule import Case, Safety, UnitRule


class UnusedEstimatorImport(UnitRule):
    """An import of an Estimator API that the program never uses goes.

    ## What it does
    In a file where an Estimator converts, an `import` of an Estimator module or name (`from
    tensorflow.contrib.learn.python.learn import learn_runner`, `import tensorflow_estimator
    as tfe`, `from tensorflow.estimator import RunConfig`...) whose name no code of the module
    reads is removed. A name counts as read when code uses it, or when a string that
    is not a docstring or a block of text on its own line spells it (`__all__`).

    ## Why
    Programs keep imports of what they stopped using: a runner left over from an older
    version of the script, code commented out inside a string. Such an import still fails
    on TensorFlow 2.16, where `tf.estimator` and `tf.contrib` are gone, so the migrated
    program would not start.

    ## Fix safety
    Safe: nothing reads the name. (The import's only other effect, loading the module, is
    what the migration removes.)

    ## References
    - https://www.tensorflow.org/guide/migrate/migrating_estimator
    """

    code = "E2K010"
    summary = "an import of an Estimator API that nothing uses is removed"
    safety = Safety.SAFE
    order = 900

    cases = [
        Case(
            id="left-over-runner",
            before='''\
import tensorflow as tf
from tensorflow.contrib.learn.python.learn import learn_runner


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features, 1)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn)

"""
learn_runner.run(experiment_fn, run_config=run_config)
"""
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


model = build_model()
model.fit(input_fn())

"""
learn_runner.run(experiment_fn, run_config=run_config)
"""
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        module = ctx.module
        used = _names_in_use(module.code)
        if used is None:
            return
        removals = []

        def remove(node, dotted, obj, asname):
            bound = asname or obj or dotted.partition(".")[0]
            if bound not in used:
                removals.append((dotted, obj, asname))
                plan.fixed(node, self.code, f"unused import of `{dotted if obj is None else dotted + '.' + obj}` removed")

        for statement in module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        dotted = _dotted(alias.name)
                        if is_estimator_api(dotted):
                            asname = alias.asname.name.value if alias.asname else None
                            if asname is not None or "." not in dotted:
                                remove(small, dotted, None, asname)
                elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative \
                        and not isinstance(small.names, cst.ImportStar):
                    base = _dotted(small.module)
                    for alias in small.names:
                        name = _dotted(alias.name)
                        if is_estimator_api(f"{base}.{name}"):
                            remove(small, base, name, alias.asname.name.value if alias.asname else None)
        if removals:
            plan.on_commit.append(lambda: [ctx.remove_import_if_unused(*r) for r in removals])


def _dotted(node: cst.BaseExpression) -> str:
    return cst.Module([]).code_for_node(node)
