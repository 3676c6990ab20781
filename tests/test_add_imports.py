"""Imports queued by rules are added as libcst's AddImportsVisitor adds them.

RewriteContext.apply_imports runs the visitor without entering the statements it leaves
alone (estimator2keras/_context.py, for speed); the module that comes out must be the
visitor's, byte for byte.
"""
from __future__ import annotations

import itertools

import libcst as cst
import pytest
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from estimator2keras._context import _top_imports_adder

MODULES = [
    "",
    "x = 1\n",
    '"""Doc."""\n',
    '"""Doc."""\nimport os\n\ndef f():\n    import numpy as np\n    return np\n',
    "from __future__ import annotations\nimport os\nfrom tensorflow import keras\n\nclass A:\n    from os import path\n",
    "import os\nx = 1\nimport sys\nfrom tensorflow import estimator\n",
    "# comment\n\nimport os, sys\nfrom a import (b,\n    c)\nif x:\n    from tensorflow import keras\n",
    "__strict__ = True\nfrom tensorflow import *\n@dec(lambda: 1)\ndef g(): pass\n",
    "from . import sibling\nfrom .pkg import thing\n# lead\ny = [i for i in range(3)]\n",
    "def f():\n    pass\n# trailing comment\n",
]
REQUESTS = [
    [("tensorflow", None, "tf")],
    [("tensorflow", "keras", None)],
    [("os", None, None), ("tensorflow", "keras", "k")],
    [("__future__", "annotations", None), ("a", "d", None)],
    [("os.path", "join", None), ("sys", None, None), ("tensorflow", "estimator", None)],
]


def _with(visitor_of, code: str, requests) -> str:
    context = CodemodContext(filename="m.py")
    for module, obj, asname in requests:
        AddImportsVisitor.add_needed_import(context, module, obj, asname)
    return cst.parse_module(code).visit(visitor_of(context)).code


@pytest.mark.parametrize("code, requests", list(itertools.product(MODULES, REQUESTS)))
def test_as_libcst_adds_them(code, requests):
    assert _with(_top_imports_adder, code, requests) == _with(AddImportsVisitor, code, requests)
