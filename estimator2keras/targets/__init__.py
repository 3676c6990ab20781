"""What a conversion writes: the TensorFlow target is the converters' own output; the others
are passes over it (``jax``)."""
