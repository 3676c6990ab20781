"""Removing the imports a conversion left unused: the same result as libcst's
RemoveImportsVisitor on the whole module, without its scope analysis of the whole module."""
from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import RemoveImportsVisitor

from estimator2keras._context import _remove_unused_imports

TF1 = ("tensorflow.compat.v1", None, "tf1")
ESTIMATOR = ("tensorflow", "estimator", None)
FUNCTOOLS = ("functools", None, None)

CASES = [
    pytest.param("import tensorflow.compat.v1 as tf1\nimport numpy as np\n\nx = np.zeros(1)\n", [TF1], id="unused-alias"),
    pytest.param("import tensorflow.compat.v1 as tf1\n\nx = tf1.layers\n", [TF1], id="still-used"),
    pytest.param('"""Uses functools.partial, once."""\nimport functools\n\nx = 1\n', [FUNCTOOLS], id="named-in-a-docstring"),
    pytest.param("import functools\n\n__all__ = ['functools']\n", [FUNCTOOLS], id="exported"),
    pytest.param("import functools\n\ndef f(x: 'functools.partial'):\n    pass\n", [FUNCTOOLS], id="string-annotation"),
    pytest.param("from tensorflow import estimator, keras\n\nm = keras.Model\n", [ESTIMATOR], id="one-of-two-names"),
    pytest.param("from tensorflow import keras, estimator\n\nm = keras.Model\n", [ESTIMATOR], id="last-of-two-names"),
    pytest.param(
        "from tensorflow import (  # the TF1 parts\n    estimator,  # goes\n    keras,  # stays\n)\n\nm = keras.Model\n",
        [ESTIMATOR], id="parenthesised-with-comments",
    ),
    pytest.param("import os, functools\n\nos.getcwd()\n", [FUNCTOOLS], id="two-modules-one-line"),
    pytest.param("import functools; import os\n\nos.getcwd()\n", [FUNCTOOLS], id="two-statements-one-line"),
    pytest.param("# header\n\nimport functools\n\n# about x\nx = 1\n", [FUNCTOOLS], id="comments-around"),
    pytest.param("def f():\n    import functools\n    return 1\n", [FUNCTOOLS], id="in-a-function"),
    pytest.param("import tensorflow.compat.v1\n\nx = 1\n", [("tensorflow.compat.v1", None, None)], id="dotted-unused"),
    pytest.param("import tensorflow.compat.v1\n\nx = tensorflow.compat.v1.layers\n", [("tensorflow.compat.v1", None, None)],
                 id="dotted-used"),
    pytest.param("import tensorflow.compat.v1 as tf1\nimport functools\n\nx = 1\n", [TF1, FUNCTOOLS], id="two-removals"),
    pytest.param("from tensorflow import (\n    keras,\n    estimator,\n)\n\nm = keras\n", [ESTIMATOR], id="trailing-comma"),
    pytest.param("from tensorflow import keras, estimator, io\n\nm = keras, io\n", [ESTIMATOR], id="in-the-middle"),
    pytest.param(
        "from tensorflow import (\n    # leading\n    estimator,\n    # about keras\n    keras,\n)\n\nm = keras\n",
        [ESTIMATOR], id="comment-lines-inside",
    ),
    pytest.param("from tensorflow import estimator as tfe, keras\n\nm = keras\n", [("tensorflow", "estimator", "tfe")],
                 id="from-import-alias"),
    pytest.param("from tensorflow import estimator as tfe\n\nm = 1\n", [ESTIMATOR], id="alias-does-not-match"),
    pytest.param("import functools as ft, os\n\nos.sep\n", [("functools", None, "ft")], id="import-alias-first"),
]


def libcst_alone(code: str, removals) -> str:
    return RemoveImportsVisitor(CodemodContext(), removals).transform_module(cst.parse_module(code)).code


@pytest.mark.parametrize("code,removals", CASES)
def test_same_result_as_libcst_on_the_whole_module(code, removals):
    assert _remove_unused_imports(cst.parse_module(code), removals).code == libcst_alone(code, removals)


def test_the_cases_remove_something_and_keep_something():
    # The comparison above is worth something only if both outcomes occur in it.
    outcomes = {libcst_alone(p.values[0], p.values[1]) == p.values[0] for p in CASES}
    assert outcomes == {True, False}


def test_nothing_to_remove_returns_the_same_tree():
    module = cst.parse_module("import functools\n\nfunctools.partial(print)\n")
    assert _remove_unused_imports(module, [FUNCTOOLS]) is module


def test_a_name_shadowed_locally_keeps_its_import():
    # The one difference, on the safe side: CPython's tree has no scopes, so a local variable of
    # the same name counts as a use. An import kept is harmless; one removed in use is a crash.
    code = textwrap.dedent(
        """\
        import functools

        def f():
            functools = 1
            return functools
        """
    )
    assert "import functools" not in libcst_alone(code, [FUNCTOOLS])
    assert _remove_unused_imports(cst.parse_module(code), [FUNCTOOLS]).code == code
