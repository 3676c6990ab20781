"""Every kind of feature column e2k converts, each bound to a name, feeding a DNNClassifier.

The Estimator is never trained: tests/test_feature_columns.py compares what each column
computes (TF 2.15's feature columns) with what the converted model's `preprocess` computes,
on raw values feature columns treat specially ("" and -1 are ignored, out-of-vocabulary
values without OOV buckets have no id).
"""
import tensorflow.compat.v1 as tf1

fc = tf1.feature_column

age = fc.numeric_column("age", normalizer_fn=lambda x: (x - 40.0) / 10.0)
size = fc.numeric_column("size", shape=(2,))
age_buckets = fc.bucketized_column(age, boundaries=[-1.0, 0.0, 1.5])
city = fc.categorical_column_with_vocabulary_list("city", ["paris", "rome", "oslo"])
city_oov = fc.categorical_column_with_vocabulary_list("city", ["paris", "rome"], num_oov_buckets=3)
code = fc.categorical_column_with_vocabulary_list("code", [10, 20, 30], num_oov_buckets=2)
code_no_oov = fc.categorical_column_with_vocabulary_list("code", [10, 20, 30])
color = fc.categorical_column_with_vocabulary_file("color", "colors.txt", num_oov_buckets=1)
first_colors = fc.categorical_column_with_vocabulary_file("color", "colors.txt", vocabulary_size=2)
job = fc.categorical_column_with_hash_bucket("job", 7)
zip_code = fc.categorical_column_with_hash_bucket("zip_code", 11, dtype=tf1.int64)
floor = fc.categorical_column_with_identity("floor", num_buckets=6)
weighted_floor = fc.weighted_categorical_column(floor, "floor_weight")
buckets_x_city = fc.crossed_column([age_buckets, "city"], 13)
floor_x_city = fc.crossed_column([floor, city], 17)
city_x_code = fc.crossed_column(["city", "code"], 19)

classifier = tf1.estimator.DNNClassifier(
    hidden_units=[4],
    feature_columns=[
        age,
        size,
        age_buckets,
        fc.indicator_column(city),
        fc.indicator_column(city_oov),
        fc.indicator_column(code),
        fc.indicator_column(code_no_oov),
        fc.indicator_column(color),
        fc.indicator_column(first_colors),
        fc.embedding_column(job, 2),
        fc.indicator_column(zip_code),
        fc.indicator_column(weighted_floor),
        fc.embedding_column(buckets_x_city, 3),
        fc.indicator_column(floor_x_city),
        fc.indicator_column(city_x_code),
    ])
