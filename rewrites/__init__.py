"""The built-in rule catalogue. One rule per module; the loader collects every Rule subclass here."""
