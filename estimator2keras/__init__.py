"""estimator2keras: migrate tf.estimator programs to Keras, and prove they train the same.

The public API is what users' rule packs need (see docs/custom-rules.md); everything in
modules whose names start with ``_`` is private.
"""

__version__ = "0.1.0"

from estimator2keras._context import Finding, RewriteContext  # noqa: E402
from estimator2keras._rule import (  # noqa: E402
    Case,
    Diagnostic,
    ExpressionRule,
    ModuleRule,
    Rule,
    Safety,
    UnitRule,
    Unsupported,
)

__all__ = [
    "Case",
    "Diagnostic",
    "ExpressionRule",
    "Finding",
    "ModuleRule",
    "RewriteContext",
    "Rule",
    "Safety",
    "UnitRule",
    "Unsupported",
    "__version__",
]
