from __future__ import annotations

from estimator2keras._rule import Case, Safety, UnitRule

#: The rules whose models hold the converted feature columns.
CANNED_OWNERS = ("E2K501", "E2K502", "E2K503")


class FeatureColumnsToPreprocessingLayers(UnitRule):
    """A canned Estimator's feature columns become Keras preprocessing layers, run in tf.data.

    ## What it does
    The feature columns of a converted canned Estimator (E2K501-E2K503) become the
    `preprocess` method of its Keras model, which every dataset is mapped through
    (`input_fn().map(model.preprocess)`), and the inputs of its `call`:

    | feature column | Keras |
    |---|---|
    | `numeric_column(key, shape, normalizer_fn)` | the feature as float32, the normalizer applied first (a one-parameter lambda is inlined) |
    | `bucketized_column(source, boundaries)` | `Discretization(bin_boundaries=...)`; one-hot where it is a dense input |
    | `categorical_column_with_vocabulary_list` / `_file` | `StringLookup` / `IntegerLookup(vocabulary=...)`, re-numbered as the Estimator numbers: vocabulary ids first, then `num_oov_buckets` buckets (`Hashing`, the same hash) |
    | `categorical_column_with_hash_bucket` | `Hashing(num_bins=...)` (the same FarmHash as feature columns) |
    | `categorical_column_with_identity` | the ids themselves |
    | `crossed_column` | `HashedCrossing(num_bins=...)`, with the keys in the order the Estimator crosses them |
    | `weighted_categorical_column` | the ids and their weight feature |
    | `indicator_column` | `tf.one_hot` of the ids (times the weights) |
    | `embedding_column(dimension, combiner)` | `Dense(dimension, use_bias=False)` of the one-hot ids: the same [buckets, dimension] table, initialized like TF1's (`TruncatedNormal(stddev=1/sqrt(dimension))`) |

    Values that feature columns ignore (`""` and `-1`) and out-of-vocabulary values without
    OOV buckets get no id (`-1`): they add nothing, as in the Estimator. The model's `call`
    also takes a dict of raw features (it preprocesses them first), so a served or exported
    model accepts the raw features the Estimator's serving function accepted.

    ## Why
    Feature columns are deprecated and Keras 3 has no `DenseFeatures`; TensorFlow's guide
    sends users to preprocessing layers. Preprocessing in `tf.data` is the guide's
    recommendation for speed, and under `MirroredStrategy` Keras 3 cannot distribute a
    dataset of strings at all.

    ## Fix safety
    Safe: each converted column computes the same ids and values as the feature column
    (`tests/test_feature_columns.py` compares them with TF 2.15's feature columns, ignored
    and out-of-vocabulary values included). An embedding is a `Dense` on one-hot ids rather
    than a `tf.keras.layers.Embedding`: Keras 3's optimizers apply a sparse gradient with
    repeated ids wrongly (Adagrad and Ftrl squared each repeat instead of the sum), and
    dense gradients train exactly like the Estimator. The cost is a dense matmul per step,
    noticeable for hash buckets or vocabularies of 10^5 and more.

    Values the source does not spell are carried over as the same code, evaluated when the
    model is built (where the Estimator was built): a vocabulary read from the data
    (`dftrain[name].unique()` in TensorFlow's linear-model tutorial: `StringLookup` or
    `IntegerLookup` as feature columns infer its dtype, the width counted by the layer),
    bucket boundaries such as `np.arange(15, 45, 1).tolist()` (counted by the
    `Discretization` layer), a numeric column's shape (`shape=images.shape[1:]`, counted by
    `tf.TensorShape(...).num_elements()`), and numeric columns appended in a loop over keys known only at
    run time (`for key in train.keys()`, TensorFlow's premade-Estimator tutorial: one input of
    the keys' columns, sorted by name as the Estimator orders them). Such code may read the
    loop's variable and temporaries, builtins and module-level names bound once; code reading
    names bound once in the function that builds the Estimator is evaluated there and given
    to the model's constructor (`DNNClassifierModel(pixels_shape=images.shape[1:])`). A raw
    numeric feature in a cross is crossed as integers, as the Estimator casts it. Columns
    that other code reads too (`feature_columns[7]`) stay as they were for that code.

    A call of a function of the program (of any module of a package converted together) is
    read as the expression its one `return` gives, its parameters bound to the call's
    arguments, or to their defaults, and so on through the functions it calls: a function
    returning one column called in the list (`one_hot_cat_column('sex', vocabulary)` in
    TensorFlow's boosted-trees tutorial, one column per call), a function returning the lists
    (`cols.get_columns()` of another module, `wide, deep = build_model_columns(embedding_size)`).
    Names unpacked from a list (`age, hours = [numeric_column(k) for k in ...]`,
    `(gender, race, ...) = INPUT_COLUMNS`) are its columns, and `VOCABULARIES[name]` of a dict
    literal is the entry the name selects. An argument known only when the program runs (the
    census trainer's `embedding_size`, a parameter of the function building the Estimator,
    given a command-line flag) is kept as code: the model's constructor takes it
    (`DNNLinearCombinedClassifierModel(occupation_embedding_dimension=embedding_size)`). A
    function goes with the Estimator when only the converted Estimators' columns call it.

    ## Limitations
    Columns must be built where e2k can read them (calls bound to names once, list
    literals, `+` of lists, a comprehension or a loop of `append`s, after temporaries,
    one loop filling several lists (`wide.append(cat); deep.append(embedding_column(cat,
    8))`), lists bound together empty (`wide, deep = [], []`) and filled after,
    over values the source spells or over keys known at run time, the appended column built
    of columns made in the same pass (`indicator_column(categorical_column_with_vocabulary_list(
    name, vocabulary))`, one of each per name), functions of the program that end in one
    `return` and only read their parameters: `add_more_features(INPUT_COLUMNS)`; not a
    decorated function, a method, one taking `*args`, `**kwargs` or keyword-only
    parameters, or one calling itself) and be read elsewhere only in ways that cannot change them (an index, `len`,
    a loop over them, another column, a `return`). Code kept to be evaluated when the model
    is built must read names of the module that builds the model: another module's constant
    is written as its value when the source spells it (a literal), else refused. Keys known only at run time are converted for a
    DNN whose only columns they are; a vocabulary read at run time with OOV buckets needs
    `dtype=`. Features must hold one value per example; sequence columns, shared
    embeddings, `crossed_column(hash_key=...)`, embedding initializers and checkpoints,
    `max_norm`, and a `default_value` other than -1 are not converted (E2K504, the unit is
    left as it was).

    ## References
    - https://www.tensorflow.org/guide/migrate/migrating_feature_columns
    - https://www.tensorflow.org/guide/keras/preprocessing_layers
    - docs/canned-estimators.md
    """

    code = "E2K504"
    summary = "feature columns -> Keras preprocessing layers in the model's preprocess(), mapped over the datasets"
    safety = Safety.SAFE
    order = 9

    cases = [
        Case(
            id='bucketized-embedded-crossed',
            before='''\
import tensorflow as tf

fc = tf.feature_column
age = fc.numeric_column("age")
age_buckets = fc.bucketized_column(age, boundaries=[18.0, 65.0])
city = fc.categorical_column_with_vocabulary_list("city", ["paris", "rome"], num_oov_buckets=1)
age_x_city = fc.crossed_column([age_buckets, "city"], hash_bucket_size=10)


def input_fn():
    features = {"age": [30.0, 70.0], "city": ["paris", "oslo"]}
    return tf.data.Dataset.from_tensor_slices((features, [0, 1])).batch(2)


classifier = tf.estimator.DNNClassifier(
    hidden_units=[2],
    feature_columns=[age_buckets, fc.embedding_column(city, 2), fc.indicator_column(age_x_city)])
classifier.train(input_fn)
''',
            after='''\
import tensorflow as tf

from e2k_helpers import CannedModel, head_metrics, KerasV2Adagrad


class DNNClassifierModel(CannedModel):
    """The canned DNNClassifier (tf.estimator): hidden units [2], loss averaged over the
    batch."""

    def __init__(self):
        super().__init__("binary")
        self.age_buckets = tf.keras.layers.Discretization(bin_boundaries=[18.0, 65.0])
        self.city_lookup = tf.keras.layers.StringLookup(vocabulary=["paris", "rome"])
        self.city_oov = tf.keras.layers.Hashing(num_bins=1)
        self.age_x_city = tf.keras.layers.HashedCrossing(num_bins=10)
        self.city_embedding = tf.keras.layers.Dense(
            2,
            use_bias=False,
            kernel_initializer=tf.keras.initializers.TruncatedNormal(stddev=2 ** -0.5))
        self.hiddenlayer_0 = tf.keras.layers.Dense(2, activation="relu")
        self.logits = tf.keras.layers.Dense(1)

    def features(self, features):
        age = tf.reshape(tf.cast(features["age"], tf.float32), [-1, 1])
        age_buckets = tf.reshape(self.age_buckets(age), [-1])
        city_values = tf.reshape(features["city"], [-1])
        # The Estimator's ids: the vocabulary's, then 1 out-of-vocabulary bucket; "" has no id
        # (-1).
        city = self.city_lookup(city_values) - 1
        city = tf.where(city < 0, 2 + self.city_oov(city_values), city)
        city = tf.where(city_values == "", tf.constant(-1, tf.int64), city)
        age_x_city = self.age_x_city((age_buckets, city_values))
        return (age_buckets, city, age_x_city)

    def network(self, inputs, training=False):
        age_buckets, city, age_x_city = inputs
        # Ids come as floats when Keras 3 first traces the model (on the replicas' mean batch).
        age_buckets = tf.cast(age_buckets, tf.int64)
        city = tf.cast(city, tf.int64)
        age_x_city = tf.cast(age_x_city, tf.int64)
        net = tf.concat([
            tf.one_hot(age_buckets, 3),
            tf.one_hot(age_x_city, 10),
            self.city_embedding(tf.one_hot(city, 3)),
        ], axis=1)
        net = self.hiddenlayer_0(net)
        return self.logits(net)


def input_fn():
    features = {"age": [30.0, 70.0], "city": ["paris", "oslo"]}
    return tf.data.Dataset.from_tensor_slices((features, [0, 1])).batch(2)


model = DNNClassifierModel()
model.compile(
    optimizer=KerasV2Adagrad(learning_rate=0.001),
    loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
    metrics=head_metrics("binary"))
model.fit(input_fn().map(model.preprocess))
''',
        ),
        Case(
            id='shared-embeddings-refused',
            before='''\
import tensorflow as tf

city = tf.feature_column.categorical_column_with_hash_bucket("city", 10)
zone = tf.feature_column.categorical_column_with_hash_bucket("zone", 10)
shared = tf.feature_column.shared_embeddings([city, zone], dimension=4)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"city": ["a"], "zone": ["b"]}, [0])).batch(1)


classifier = tf.estimator.DNNClassifier(hidden_units=[2], feature_columns=shared)
classifier.train(input_fn)
''',
            after='''\
import tensorflow as tf

city = tf.feature_column.categorical_column_with_hash_bucket("city", 10)
zone = tf.feature_column.categorical_column_with_hash_bucket("zone", 10)
# e2k: E2K504 `tf.feature_column.shared_embeddings` is not converted yet
shared = tf.feature_column.shared_embeddings([city, zone], dimension=4)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"city": ["a"], "zone": ["b"]}, [0])).batch(1)


classifier = tf.estimator.DNNClassifier(hidden_units=[2], feature_columns=shared)
classifier.train(input_fn)
''',
            findings=('E2K504',),
        ),
    ]

    def required(self, unit, plan, ctx):
        if unit.owner.code in CANNED_OWNERS:
            return "a canned Estimator's model is built from its feature columns"
        return None

    def plan(self, unit, plan, ctx) -> None:
        # The columns are read and converted with the model they feed (estimator2keras._canned),
        # which reports each column under this code.
        return None
