from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Case, ExpressionRule, Safety
from estimator2keras._translate import CallSpec, translate

_LOCKING = frozenset({"use_locking"})

OPTIMIZERS = {
    "train.GradientDescentOptimizer": CallSpec(
        "keras.optimizers.SGD", ("learning_rate", "use_locking", "name"), dropped=_LOCKING
    ),
    "train.MomentumOptimizer": CallSpec(
        "keras.optimizers.SGD",
        ("learning_rate", "momentum", "use_locking", "name", "use_nesterov"),
        rename={"use_nesterov": "nesterov"},
        dropped=_LOCKING,
    ),
    "train.AdamOptimizer": CallSpec(
        "keras.optimizers.Adam",
        ("learning_rate", "beta1", "beta2", "epsilon", "use_locking", "name"),
        rename={"beta1": "beta_1", "beta2": "beta_2"},
        explicit={"epsilon": "1e-08"},
        dropped=_LOCKING,
    ),
    "train.AdagradOptimizer": CallSpec(
        "keras.optimizers.Adagrad",
        ("learning_rate", "initial_accumulator_value", "use_locking", "name"),
        explicit={"epsilon": "0.0"},  # TF1 had none (and refused an accumulator value <= 0)
        dropped=_LOCKING,
    ),
    "train.AdadeltaOptimizer": CallSpec(
        "keras.optimizers.Adadelta",
        ("learning_rate", "rho", "epsilon", "use_locking", "name"),
        explicit={"epsilon": "1e-08"},
        dropped=_LOCKING,
    ),
    "train.RMSPropOptimizer": CallSpec(
        "keras.optimizers.RMSprop",
        ("learning_rate", "decay", "momentum", "epsilon", "use_locking", "centered", "name"),
        rename={"decay": "rho"},
        explicit={"epsilon": "1e-10"},
        dropped=_LOCKING,
    ),
    "train.FtrlOptimizer": CallSpec(
        "keras.optimizers.Ftrl",
        (
            "learning_rate", "learning_rate_power", "initial_accumulator_value",
            "l1_regularization_strength", "l2_regularization_strength", "use_locking", "name",
            "accum_name", "linear_name", "l2_shrinkage_regularization_strength", "beta",
        ),
        dropped=_LOCKING | {"accum_name", "linear_name"},
    ),
}


class Tf1OptimizerToKeras(ExpressionRule):
    """A TF1 `tf.train.*Optimizer` becomes the Keras optimizer that does the same updates.

    ## What it does
    Inside a converted model_fn, translates the optimizer:

    | TF1 | Keras |
    |---|---|
    | `GradientDescentOptimizer(lr)` | `SGD(lr)` |
    | `MomentumOptimizer(lr, m, use_nesterov=n)` | `SGD(lr, momentum=m, nesterov=n)`; with a decaying `lr`, `TF1Momentum(lr, momentum=m)` (below) |
    | `AdamOptimizer(lr, beta1, beta2, epsilon)` | `TF1Adam(lr, beta_1=..., beta_2=...)`: Keras `Adam` with TF1's float32 betas and epsilon 1e-08 (a small class in the helpers module); outside a converted unit `Adam(lr, ..., epsilon=1e-08)` |
    | `AdagradOptimizer(lr, initial_accumulator_value)` | `Adagrad(lr, initial_accumulator_value=..., epsilon=0.0)` |
    | `AdadeltaOptimizer(lr, rho, epsilon)` | `TF1Adadelta(lr, rho=...)`: Keras `Adadelta` updating as TF1's kernel, epsilon 1e-08 (a small class in the helpers module); outside a converted unit `Adadelta(lr, rho=..., epsilon=1e-08)` |
    | `RMSPropOptimizer(lr, decay, momentum, epsilon, centered)` | `TF1RMSprop(lr, rho=decay, ..., epsilon=1e-10)`: Keras `RMSprop`, its accumulators starting at 1.0 and updated as TF1's kernel (a small class in the helpers module) |
    | `FtrlOptimizer(...)` | `Ftrl(...)` (same parameter names) |

    The train_op may come from a function of the program (`train_op = get_train_op(loss,
    mode, params)`, as courses split a model_fn into loss, train_op and metrics functions): its
    statements are read as TRAIN runs them (its `if mode == ModeKeys.TRAIN:` taken, `with
    tf.control_dependencies(update_ops):` unwrapped), it must end in
    `return optimizer.minimize(loss, global_step)`, and the Keras optimizer is that optimizer
    with the function's names replaced by the values its call gives them (a value it computes
    in several steps is refused). The function goes with the model_fn when nothing else calls
    it; batch normalizations whose updates it ran keep their moving averages (fixture
    `model_fn_parts_from_helpers`).

    Where Keras and TF1 defaults differ, the TF1 value is written out: Adam and Adadelta
    `epsilon=1e-08` (Keras: 1e-07), RMSprop `epsilon=1e-10` (Keras: 1e-07), Adagrad
    `epsilon=0.0` (Keras: 1e-07; TF1's had none). `use_locking` has
    no meaning in TF2 and is dropped; positional arguments after the learning rate become
    keywords, since Keras orders them differently.

    ## Why
    TF1 optimizers are gone from TF2's public API; Keras optimizers are what `compile` takes,
    and what works under a distribution strategy and on Keras 3.

    ## Fix safety
    Safe where the update rules are the same: SGD, momentum with a constant learning rate
    (Keras's velocity is then the TF1 accumulator times `-lr`), Adam (both use the
    "epsilon hat" form; Keras takes `1 - beta` from the Python float where TF1 took it in
    float32, which moved every update by about 6.5e-6 of itself: `TF1Adam` gives Keras the
    betas as float32 values, and its updates are TF1's within an ulp; a canned Estimator's
    `"Adam"` and Keras's legacy `Adam` become `TF1Adam` too, the legacy one with its epsilon,
    1e-07), Adagrad (Keras adds its epsilon under the square root of the accumulator, TF1
    added none: with `epsilon=0.0` the updates are TF1's to the bit in a `tf.function`,
    where they were a few 1e-7 of themselves smaller, 5e-5 with a small
    `initial_accumulator_value`; TF1 refused an `initial_accumulator_value` <= 0, so the
    root is never 0 in a program that ran), Adadelta (Keras takes `1 - rho` from the Python
    float where TF1 took it in float32, and divides by a root where TF1's kernel multiplied by
    its reciprocal: a bias of about 1e-7 of each step; `TF1Adadelta` computes TF1's kernel,
    to the bit on Keras 2 and Keras 3; outside a converted unit `Adadelta` is written).
    RMSprop computes TF1's update (epsilon inside the square root, momentum on the scaled
    gradient), but Keras starts its mean-square accumulators at 0.0 where TF1 started them at
    1.0, so Keras's first steps would be larger (and rounds `1 - rho` from the Python float, a
    bias of a few 1e-8 after it): the emitted `TF1RMSprop` subclass updates as TF1's kernel
    (`ms += (g^2 - ms) * (1 - rho)` in float32, to the bit), and creates its accumulators
    with the initial value 1.0, so they hold it on every replica and wherever Keras builds the
    optimizer (Keras 3 without a strategy builds it while tracing the train function, where
    setting them after `build` would become an op of every step), and the steps are the same
    from the first (the fixture `rmsprop_momentum_mirrored`, and a model trained without a
    strategy, pass `e2k parity` with 2 replicas on TF 2.15 and the newest TF). A canned
    `tf.compat.v1` Estimator's `"RMSProp"` becomes `TF1RMSprop` too; a canned TF2 one's
    `"RMSProp"` and `"Adagrad"` (Keras's OptimizerV2 ones, epsilon added to the root, where
    today's Keras adds it under the root) become `KerasV2RMSprop` (as in E2K008) and
    `KerasV2Adagrad` (OptimizerV2's dense update, to the bit). Outside a converted unit,
    where no class can be added, the plain `RMSprop` is written and reported. Momentum with a
    decaying learning rate differs: TF1 scales the whole accumulated step by the current rate,
    Keras SGD each new gradient, so the steps after each change of rate differ (measured: identical
    until the first decay, then a 6% loss difference on the next step): a converted model_fn
    gets `TF1Momentum`, a small SGD subclass added to the file whose update is TF1's
    (`accumulation = momentum * accumulation + gradient; variable -= rate * accumulation`;
    fixture `momentum_decay_tf1_update`, and a tester's MNIST model that broke at its first
    decay, pass `e2k parity` on TF 2.15 and the newest TF). With `use_nesterov=True`, or outside
    a converted unit, SGD is written and reported for a human. So are RMSProp and
    Momentum on a model whose variables get sparse gradients (an embedding lookup, a Keras
    `Embedding`, an embedding column, canned Estimators' too): TF1's sparse updates (and the
    Keras legacy optimizers' the canned Estimators used) changed the accumulators of the rows
    a batch looked up only, where Keras's RMSprop and SGD decay every row's at every step; the
    rows then move differently after their next lookup, more with a larger vocabulary (a
    tester's 2000-row table diverged at step 10; 50 rows stayed within the noise). Adam decays
    every row in both, Adagrad none in either.

    ## Limitations
    `ProximalGradientDescentOptimizer`, `ProximalAdagradOptimizer`, `SyncReplicasOptimizer`
    and optimizer wrappers are not converted (the model_fn is left as it was, E2K901).

    ## References
    - https://www.tensorflow.org/guide/migrate/metrics_optimizers
    - https://www.tensorflow.org/api_docs/python/tf/keras/optimizers
    """

    code = "E2K101"
    summary = "tf.train.*Optimizer -> tf.keras.optimizers.* with the TF1 defaults written out"
    safety = Safety.SAFE
    role = "optimizer"
    targets = tuple(OPTIMIZERS)

    cases = [
        Case("tf1.train.AdagradOptimizer(0.05)", "tf.keras.optimizers.Adagrad(0.05, epsilon=0.0)", id="adagrad"),
        Case(
            "tf1.train.AdamOptimizer(learning_rate=1e-3, beta1=0.8)",
            "tf.keras.optimizers.Adam(learning_rate=1e-3, beta_1=0.8, epsilon=1e-08)",
            id="adam-epsilon-written-out",
        ),
        Case(
            "tf.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True, use_locking=True)",
            "tf.keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True)",
            id="momentum-positional-to-keywords",
        ),
        Case(
            "tf.compat.v1.train.RMSPropOptimizer(0.01, decay=0.95)",
            "tf.keras.optimizers.RMSprop(0.01, rho=0.95, epsilon=1e-10)",
            id="rmsprop",
        ),
    ]

    def convert(self, call, ctx, tf):
        path = ctx.call_api_path(call)
        new, _ = translate(call, OPTIMIZERS[path], tf)
        return exact_update(self, path, call, new, ctx, tf)


def exact_update(rule, path: str, call: cst.Call, new: cst.Call, ctx, tf: str) -> cst.Call:
    """``new``, the Keras optimizer of the TF1 optimizer at ``path``, made to update as TF1's
    did where Keras's differs (TF1Adam, TF1RMSprop, TF1Adadelta), in a converted unit."""
    plan = ctx.active_plan
    if path == "train.RMSPropOptimizer":
        if plan is None:
            ctx.leftover(
                call,
                "TF1 RMSProp starts its mean-square accumulator at 1.0, Keras RMSprop at 0.0: "
                "the first steps differ; check with e2k parity",
                code=rule.code,
            )
            return new
        # Keras's RMSprop with TF1's accumulator start and update: the same steps from the first.
        return new.with_changes(func=cst.Name(tf1_rmsprop(plan, tf)))
    if path == "train.AdamOptimizer" and plan is not None:
        # Keras's Adam with TF1's float32 betas: the same updates to the bit.
        plan.imports.append(("numpy", None, "np"))  # the class reads it, where it is in the file
        name = plan.add_helper("TF1Adam", lambda given: _emit.statements(TF1_ADAM, name=given, tf=tf))
        new = tf1_adam_call(new, name)
    if path == "train.AdadeltaOptimizer" and plan is not None:
        # Keras's Adadelta with TF1's kernel: the same updates to the bit.
        name = plan.add_helper("TF1Adadelta", lambda given: _emit.statements(TF1_ADADELTA, name=given, tf=tf))
        new = tf1_adam_call(new, name)
    return new


def tf1_rmsprop(plan, tf: str) -> str:
    """The name of the helper class that is Keras's RMSprop updating as TF1's (E2K101)."""
    return plan.add_helper("TF1RMSprop", lambda given: _emit.statements(TF1_RMSPROP, name=given, tf=tf))


def keras_v2_adagrad(plan, tf: str) -> str:
    """The name of the helper class that is Keras's OptimizerV2 Adagrad (canned TF2 Estimators)."""
    return plan.add_helper("KerasV2Adagrad", lambda given: _emit.statements(KERAS_V2_ADAGRAD, name=given, tf=tf))


def tf1_adam_call(call: cst.Call, name: str) -> cst.Call:
    """``tf.keras.optimizers.Adam(...)`` as ``TF1Adam(...)`` (or Adadelta as ``TF1Adadelta``),
    whose epsilon is TF1's already."""
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == "epsilon"
                                         and _emit.code(a.value) == "1e-08")]
    return _emit.one_line_call(call.with_changes(func=cst.Name(name)), args)


#: Keras's Adam updates m and v with `1 - beta` taken from the Python float (0.001 exactly for
#: 0.999), TF1's AdamOptimizer (and Keras's legacy Adam) in float32 (1 - 0.999f = 0.00099998713),
#: while both take the bias correction from float32 powers: every Keras update differed from
#: TF1's by about 6.5e-6 of itself, at every step (a new user's canned regressor on Adam 0.05 left
#: the program's noise at step 3). With the betas given as their float32 values the updates are
#: those of TF1's fused kernel (Keras's legacy Adam) to the bit, on Keras 2 and Keras 3, and TF1's
#: within an ulp (TF1 multiplies its beta powers step by step; tests/test_tf1_adam.py).
TF1_ADAM = '''
class {name}({tf}.keras.optimizers.Adam):
    """Keras Adam updating as TF1's AdamOptimizer did: TF1 took `1 - beta` in float32, Keras
    from the Python float, which moved each update by about 6.5e-6 of itself. The betas are
    given as their float32 values; epsilon is TF1's default, 1e-08. An embedding's sparse
    gradient is made dense: TF1 summed the rows a batch looked up twice before squaring them,
    Keras 3 squares each apart (and TF1's sparse Adam moved every row, as a dense one does)."""

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-08, **kwargs):
        super().__init__(learning_rate, beta_1=float(np.float32(beta_1)),
                         beta_2=float(np.float32(beta_2)), epsilon=epsilon, **kwargs)

    def update_step(self, gradient, variable, *learning_rate):
        if isinstance(gradient, {tf}.IndexedSlices):
            gradient = {tf}.convert_to_tensor(gradient)
        return super().update_step(gradient, variable, *learning_rate)
'''

#: Keras 3 squares a sparse gradient's rows as they come, a row a batch looked up twice apart;
#: TF1 summed them first (so does Keras 2). Made dense, Adagrad's update is TF1's sparse one:
#: a row no batch looked up has a zero gradient, which leaves it and its accumulator as they were.
TF1_ADAGRAD = '''
class {name}({tf}.keras.optimizers.Adagrad):
    """Keras Adagrad updating an embedding's sparse gradient as TF1 did: TF1 summed the rows
    a batch looked up twice before squaring them, Keras 3 squares each apart. The gradient is
    made dense (a row not looked up: zero, which leaves it as TF1 did)."""

    def update_step(self, gradient, variable, *learning_rate):
        if isinstance(gradient, {tf}.IndexedSlices):
            gradient = {tf}.convert_to_tensor(gradient)
        return super().update_step(gradient, variable, *learning_rate)
'''


#: Keras RMSprop computes TF1's update (epsilon inside the square root, momentum on the
#: scaled gradient) from an accumulator that starts at 0; TF1's starts at 1. The accumulators
#: are made at 1.0 rather than set to it after `build`: Keras 3 without a strategy builds the
#: optimizer while tracing the train function, where an assign becomes a graph op that runs on
#: every step, unordered with the update that reads the accumulator (parity broke at step 2).
#: An initial value holds wherever, whenever and on however many replicas Keras builds it.
#: Keras 2 (TF 2.15) names the second argument `variable_name` and takes `initial_value`;
#: Keras 3 names it `name` and takes `initializer` (and may wrap the method: hence the test
#: for Keras 2's parameter, whose signature no longer changes).
#: From there Keras's update still rounds apart from TF1's kernel (`1 - rho` from the Python
#: float, `rho * ms + (1 - rho) * g^2` where TF1 computed `ms + (g^2 - ms) * (1 - rho)`: a
#: bias of a few 1e-8 of the weights after 20 steps); `update_step` computes TF1's kernel, to
#: the bit on Keras 2 and Keras 3, eager and in a tf.function (tests/test_tf1_optimizer_kernels.py).
#: The step is divided as divide_no_nan, which Grappler leaves a division (it rewrites
#: `g * lr / sqrt(x)` as a multiplication by rsqrt), and the centered denominator is summed
#: by add_n, which its constant folding does not reorder.
TF1_RMSPROP = '''
class {name}({tf}.keras.optimizers.RMSprop):
    """Keras RMSprop updating as TF1's RMSPropOptimizer did: its mean squares start at 1.0
    (Keras's at 0: larger first steps) and move as TF1's kernel moved them, `ms += (g^2 -
    ms) * (1 - rho)` in float32 (Keras rounds `rho * ms + (1 - rho) * g^2` otherwise)."""

    def add_variable_from_reference(self, variable, *args, **kwargs):
        # RMSprop.build makes each mean-square accumulator here, as "velocity".
        name = kwargs.get("name", kwargs.get("variable_name", args[0] if args else None))
        make = super().add_variable_from_reference
        if name != "velocity":
            return make(variable, *args, **kwargs)
        if "initial_value" in make.__code__.co_varnames:  # Keras 2 (TF 2.15, tf_keras)
            return make(variable, name, initial_value={tf}.ones(variable.shape, variable.dtype))
        return make(variable, name, initializer="ones")  # Keras 3

    def update_step(self, gradient, variable, *learning_rate):
        if isinstance(gradient, {tf}.IndexedSlices):  # an embedding's rows: Keras's update
            return super().update_step(gradient, variable, *learning_rate)
        dtype = variable.dtype  # (Keras 3 passes the learning rate, Keras 2 does not)
        lr = {tf}.cast((*learning_rate, self.learning_rate)[0], dtype)
        if hasattr(self, "_get_variable_index"):  # Keras 3
            index = self._get_variable_index(variable)
        else:  # Keras 2 (TF 2.15)
            index = self._index_dict[self._var_key(variable)]
        gradient = {tf}.cast(gradient, dtype)
        one_minus_rho = 1 - {tf}.cast(self.rho, dtype)
        ms = self._velocities[index]
        ms.assign_add(({tf}.square(gradient) - ms) * one_minus_rho)
        if self.centered:
            mg = self._average_gradients[index]
            mg.assign_add((gradient - mg) * one_minus_rho)
            variance = ms - {tf}.square(mg)
            epsilon = {tf}.cast(self.epsilon, dtype)
            denominator = {tf}.add_n(
                [variance, {tf}.fill({tf}.shape(variance), epsilon)])
        else:
            denominator = ms + self.epsilon
        step = {tf}.math.divide_no_nan(gradient * lr, {tf}.sqrt(denominator))
        if self.momentum > 0:
            momentum = self._momentums[index]
            momentum.assign(momentum * self.momentum + step)
            step = momentum
        variable.assign_sub(step)
'''


#: Keras's Adadelta takes `1 - rho` from the Python float where TF1's AdadeltaOptimizer took
#: it in float32, and computes the step as `sqrt(u + eps) / sqrt(a + eps) * g` where TF1's
#: kernel computed `sqrt(u + eps) * rsqrt(a + eps) * g`: a bias of about 1e-7 of each step,
#: always the same way. `update_step` is TF1's kernel, to the bit on Keras 2 and Keras 3
#: (tests/test_tf1_optimizer_kernels.py). Epsilon is TF1's default, 1e-08 (Keras's: 1e-07).
#: For Keras 3 on JAX it is marked E2K701, as TF1RMSprop is: e2k writes no keras.ops form of
#: tf.math.rsqrt (1 / sqrt rounds otherwise, in a third of the cases).
TF1_ADADELTA = '''
class {name}({tf}.keras.optimizers.Adadelta):
    """Keras Adadelta updating as TF1's AdadeltaOptimizer did: Keras takes `1 - rho` from
    the Python float (TF1: in float32) and divides by a root (TF1 multiplied by rsqrt),
    which biased each step by about 1e-7 of itself. Epsilon is TF1's default, 1e-08."""

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-08, **kwargs):
        super().__init__(learning_rate, rho=rho, epsilon=epsilon, **kwargs)

    def update_step(self, gradient, variable, *learning_rate):
        if isinstance(gradient, {tf}.IndexedSlices):  # an embedding's rows: Keras's update
            return super().update_step(gradient, variable, *learning_rate)
        dtype = variable.dtype  # (Keras 3 passes the learning rate, Keras 2 does not)
        lr = {tf}.cast((*learning_rate, self.learning_rate)[0], dtype)
        if hasattr(self, "_get_variable_index"):  # Keras 3
            index = self._get_variable_index(variable)
        else:  # Keras 2 (TF 2.15)
            index = self._index_dict[self._var_key(variable)]
        gradient = {tf}.cast(gradient, dtype)
        rho = {tf}.cast(self.rho, dtype)
        accum = self._accumulated_grads[index]
        accum_update = self._accumulated_delta_vars[index]
        accum.assign(accum * rho + {tf}.square(gradient) * (1 - rho))
        update = {tf}.sqrt(accum_update + self.epsilon) * {tf}.math.rsqrt(
            accum + self.epsilon) * gradient
        variable.assign_sub(update * lr)
        accum_update.assign(accum_update * rho + {tf}.square(update) * (1 - rho))
'''


#: The canned TF2 Estimators' "Adagrad" was Keras's OptimizerV2 Adagrad
#: (`tf.keras.optimizers.legacy.Adagrad` in TF 2.11-2.15), which divides by `sqrt(accumulator)
#: + epsilon`; today's Keras Adagrad divides by `sqrt(accumulator + epsilon)`: a bias of a few
#: 1e-7 of each step where the accumulator is small. Its update is OptimizerV2's dense one, to
#: the bit on Keras 2 and Keras 3, and its JAX form on JAX (tests/test_keras_v2_adagrad.py);
#: an embedding's sparse gradient gets Keras's update, which moves the rows looked up only, as
#: OptimizerV2's did.
KERAS_V2_ADAGRAD = '''
class {name}({tf}.keras.optimizers.Adagrad):
    """Keras Adagrad updating as Keras's OptimizerV2 Adagrad, which TF2's canned Estimators
    trained with: epsilon added to the root of the accumulator, where this Adagrad adds it
    under the root (a bias of a few 1e-7 of each step)."""

    def update_step(self, gradient, variable, *learning_rate):
        if isinstance(gradient, {tf}.IndexedSlices):  # an embedding's rows: Keras's update
            return super().update_step(gradient, variable, *learning_rate)
        dtype = variable.dtype  # (Keras 3 passes the learning rate, Keras 2 does not)
        lr = {tf}.cast((*learning_rate, self.learning_rate)[0], dtype)
        if hasattr(self, "_get_variable_index"):  # Keras 3
            index = self._get_variable_index(variable)
        else:  # Keras 2 (TF 2.15)
            index = self._index_dict[self._var_key(variable)]
        gradient = {tf}.cast(gradient, dtype)
        accumulator = self._accumulators[index]
        accumulator.assign_add({tf}.square(gradient))
        root = {tf}.sqrt(accumulator) + self.epsilon
        variable.assign_sub(gradient * lr / root)
'''
