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

    ## Limitations
    Columns must be built where e2k can read them (calls bound to names once, list
    literals, `+` of lists, a comprehension over a literal list) and only feed the
    Estimator. Features must hold one value per example; sequence columns, shared
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

    cases = []

    def required(self, unit, plan, ctx):
        if unit.owner.code in CANNED_OWNERS:
            return "a canned Estimator's model is built from its feature columns"
        return None

    def plan(self, unit, plan, ctx) -> None:
        # The columns are read and converted with the model they feed (estimator2keras._canned),
        # which reports each column under this code.
        return None
