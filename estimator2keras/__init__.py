"""estimator2keras: migrate tf.estimator programs to Keras, and prove they train the same."""

__version__ = "0.1.0"
