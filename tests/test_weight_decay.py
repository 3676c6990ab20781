"""Weight decay over the graph's variables (`tf.add_n([tf.nn.l2_loss(v) for v in
tf.trainable_variables() if ...])` added to the loss): it becomes `self.add_loss(...)` at the end
of the Keras model's `call`, over `self.trainable_variables`, its name filter testing the name
both Keras versions give (Keras 3 keeps the layers in `v.path`); filters that would not mean the
same on Keras's names are refused, naming them. `fixtures/weight_decay_over_trainable_variables`
proves the training the same with 2 replicas on TF 2.15 and the newest TF."""
from __future__ import annotations

import textwrap

from estimator2keras._engine import rewrite_source
from estimator2keras._registry import RuleSet

PROGRAM = '''\
import tensorflow as tf

WEIGHT_DECAY = 1e-4


def exclude_batch_norm(name):
    """Batch normalization's variables take no weight decay."""
    return "batch_normalization" not in name


def model_fn(features, labels, mode, params):
    net = tf.compat.v1.layers.dense(features, 8)
    net = tf.compat.v1.layers.batch_normalization(net, training=mode == tf.estimator.ModeKeys.TRAIN)
    logits = tf.compat.v1.layers.dense(tf.nn.relu(net), 3)
    cross_entropy = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
{body}
    update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(update_ops):
        train_op = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9).minimize(
            loss, tf.compat.v1.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]] * 8, [1] * 8)).batch(4)


strategy = tf.distribute.MirroredStrategy()
estimator = tf.estimator.Estimator(model_fn, params={{"weight_decay": 1e-4}},
                                   config=tf.estimator.RunConfig(train_distribute=strategy))
estimator.train(input_fn)
'''


def rewrite(body: str, rules: RuleSet | None = None, program: str = PROGRAM):
    source = program.format(body=textwrap.indent(textwrap.dedent(body).strip("\n"), "    "))
    return rewrite_source(source.encode(), "prog.py", rules or RuleSet.load())


def call_method(result) -> str:
    text = result.new.decode()
    start = text.index("    def call(")
    return text[start:text.index("\n\n\n", start)]


def refusal(result) -> str:
    assert result.status == "partial", result.new.decode()
    return " | ".join(f.message for f in result.findings if f.code == "E2K901")


def test_filtered_weight_decay_becomes_add_loss_in_call():
    result = rewrite("""
        # Weight decay, batch normalization left alone.
        l2_loss = WEIGHT_DECAY * tf.add_n([
            tf.nn.l2_loss(v)
            for v in tf.compat.v1.trainable_variables()
            if "batch_normalization" not in v.name])
        loss = cross_entropy + l2_loss
    """)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert call_method(result) == (
        "    def call(self, features, training=False):\n"
        "        net = self.dense(features)\n"
        "        net = self.batch_normalization(net, training=training)\n"
        "        logits = self.logits(tf.nn.relu(net))\n"
        "        # Weight decay, batch normalization left alone.\n"
        "        # Keras 2 names a variable with its layers in v.name, Keras 3 in v.path\n"
        "        l2_loss = WEIGHT_DECAY * tf.add_n([\n"
        "            tf.nn.l2_loss(v)\n"
        "            for v in self.trainable_variables\n"
        '            if "batch_normalization" not in getattr(v, "path", v.name)])\n'
        "        self.add_loss(l2_loss)\n"
        "        return logits")
    text = result.new.decode()
    assert "trainable_variables()" not in text and "loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)" in text
    assert any(f.code == "E2K204" and "weight decay" in f.message for f in result.findings)


def test_inline_penalty_reading_params_and_the_official_spellings():
    result = rewrite("""
        loss = cross_entropy + params["weight_decay"] * tf.add_n(
            [tf.nn.l2_loss(tf.cast(v, tf.float32)) for v in tf.compat.v1.trainable_variables()])
    """)
    assert result.status == "converted", [f.format() for f in result.findings]
    method = call_method(result)
    assert "        self.add_loss(self.params[\"weight_decay\"] * tf.add_n(\n" in method
    assert "for v in self.trainable_variables])" in method
    assert "self.params = params" in result.new.decode()


def test_variables_by_name_added_with_tf_add_or_augmented():
    for body in (
        """
        tvars = tf.compat.v1.trainable_variables()
        l2 = tf.add_n([tf.nn.l2_loss(v) for v in tvars if exclude_batch_norm(v.name)]) * WEIGHT_DECAY
        loss = tf.add(cross_entropy, l2)
        """,
        """
        loss = cross_entropy
        loss += WEIGHT_DECAY * tf.add_n([tf.nn.l2_loss(v) for v in tf.compat.v1.get_collection(
            tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES) if 'bias' not in v.name and len(v.shape) > 1])
        """,
    ):
        result = rewrite(body)
        assert result.status == "converted", (body, [f.format() for f in result.findings])
        method = call_method(result)
        assert "self.add_loss(" in method and "self.trainable_variables" in method, method
        assert "tvars" not in method and "get_collection" not in method
    result = rewrite("""
        tvars = tf.compat.v1.trainable_variables()
        l2 = tf.add_n([tf.nn.l2_loss(v) for v in tvars if exclude_batch_norm(v.name)]) * WEIGHT_DECAY
        loss = tf.add(cross_entropy, l2)
    """)
    assert (
        "        l2 = tf.add_n([\n"
        "            tf.nn.l2_loss(v)\n"
        "            for v in self.trainable_variables\n"
        '            if exclude_batch_norm(getattr(v, "path", v.name))]) * WEIGHT_DECAY\n'
        "        self.add_loss(l2)\n") in call_method(result)
    assert "def exclude_batch_norm(name):" in result.new.decode()  # called as it is


def test_filters_that_would_not_mean_the_same_are_refused_by_name():
    cases = {
        'if not v.name.startswith("dense")': "is not one e2k carries to Keras",
        'if "dense_1" not in v.name': "digits, `/` or `:`",
        'if "model" not in v.name': "puts its own name, `model`, in front of every one",
        'if v.name not in ("dense/kernel:0",)': "is not one e2k carries to Keras",
    }
    for condition, reason in cases.items():
        result = rewrite(f"""
            l2_loss = WEIGHT_DECAY * tf.add_n([
                tf.nn.l2_loss(v) for v in tf.compat.v1.trainable_variables() {condition}])
            loss = cross_entropy + l2_loss
        """)
        assert reason in refusal(result), (condition, refusal(result))
    result = rewrite("""
        loss = cross_entropy + WEIGHT_DECAY * tf.add_n([
            tf.nn.l2_loss(v) for v in tf.compat.v1.trainable_variables(scope="dense")])
    """)
    assert "selects variables by scope" in refusal(result)
    result = rewrite("""
        tvars = tf.compat.v1.trainable_variables()
        loss = cross_entropy + WEIGHT_DECAY * tf.add_n([tf.nn.l2_loss(v) for v in tvars]) / len(tvars)
    """)
    assert "otherwise than as the variables a comprehension runs over" in refusal(result)


def test_scopes_and_sum_reductions_are_refused():
    scoped = PROGRAM.replace(
        "    net = tf.compat.v1.layers.dense(features, 8)\n",
        '    with tf.compat.v1.variable_scope("batch_normalization_free"):\n'
        "        net = tf.compat.v1.layers.dense(features, 8)\n")
    result = rewrite("""
        loss = cross_entropy + WEIGHT_DECAY * tf.add_n([
            tf.nn.l2_loss(v) for v in tf.compat.v1.trainable_variables() if "batch_normalization" not in v.name])
    """, program=scoped)
    assert "under a variable scope, `batch_normalization_free`, which holds it" in refusal(result)
    inline = PROGRAM.replace("tf.compat.v1.layers.dense(tf.nn.relu(net), 3)", "tf.compat.v1.layers.Dense(3)(tf.nn.relu(net))")
    result = rewrite("""
        loss = cross_entropy + WEIGHT_DECAY * tf.add_n([
            tf.nn.l2_loss(v) for v in tf.compat.v1.trainable_variables() if "batch_normalization" not in v.name])
    """, program=inline)
    assert result.status == "converted", [f.format() for f in result.findings]
    summed = PROGRAM.replace(
        "labels=labels, logits=logits)",
        "labels=labels, logits=logits, reduction=tf.compat.v1.losses.Reduction.SUM)")
    result = rewrite("""
        loss = cross_entropy + WEIGHT_DECAY * tf.add_n([tf.nn.l2_loss(v) for v in tf.compat.v1.trainable_variables()])
    """, program=summed)
    assert "reduced with SUM" in refusal(result) or "reduction" in refusal(result)


def test_without_e2k204_the_penalty_is_refused_as_before():
    rules = RuleSet.load(ignore=("E2K204",))
    result = rewrite("""
        loss = cross_entropy + WEIGHT_DECAY * tf.add_n([tf.nn.l2_loss(v) for v in tf.compat.v1.trainable_variables()])
    """, rules=rules)
    assert refusal(result) and "add_loss" not in result.new.decode()


def test_name_filters_over_layers_named_otherwise_are_refused():
    # tf-slim named its variables `fc1/weights`, `BatchNorm/gamma`: a filter on those names
    # means something else on the Keras layers they become (`dense/kernel`).
    slim = PROGRAM.replace("import tensorflow as tf\n", "import tensorflow as tf\nimport tf_slim as slim\n").replace(
        "tf.compat.v1.layers.dense(tf.nn.relu(net), 3)", 'slim.fully_connected(tf.nn.relu(net), 3, activation_fn=None, scope="fc")')
    penalty = """
        loss = cross_entropy + WEIGHT_DECAY * tf.add_n([
            tf.nn.l2_loss(v) for v in tf.compat.v1.trainable_variables(){condition}])
    """
    result = rewrite(penalty.format(condition=' if "batch_normalization" not in v.name'), program=slim)
    assert "`slim.fully_connected` named its variables otherwise than the Keras layer it becomes" in refusal(result)
    result = rewrite(penalty.format(condition=""), program=slim)  # no names tested: all of them, in either
    assert result.status == "converted", [f.format() for f in result.findings]


def test_a_named_sum_of_penalties_scaled_in_the_loss():
    result = rewrite("""
        l2 = tf.add_n([tf.nn.l2_loss(v) for v in tf.compat.v1.trainable_variables() if "bias" not in v.name])
        loss = cross_entropy + params["weight_decay"] * l2
    """)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert call_method(result).endswith(
        "        # Keras 2 names a variable with its layers in v.name, Keras 3 in v.path\n"
        "        l2 = tf.add_n([\n"
        "            tf.nn.l2_loss(v)\n"
        "            for v in self.trainable_variables\n"
        '            if "bias" not in getattr(v, "path", v.name)])\n'
        '        self.add_loss(self.params["weight_decay"] * l2)\n'
        "        return logits")
