"""Reaching definitions (estimator2keras.analysis.flow): which assignments a read may see."""
from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider, ScopeProvider

from estimator2keras._names import api_path_of_qualified
from estimator2keras.analysis.flow import ReachingDefinitions


def reaching(source: str) -> dict[int, set[int] | None]:
    """For each read of `x` marked `# read`, the lines of the assignments that may reach it
    (None: the analysis does not answer)."""
    wrapper = MetadataWrapper(cst.parse_module(textwrap.dedent(source)))
    scopes = wrapper.resolve(ScopeProvider)
    positions = wrapper.resolve(PositionProvider)
    flow = ReachingDefinitions(scopes.get, wrapper.module)
    lines = textwrap.dedent(source).splitlines()
    found = {}

    class Reads(cst.CSTVisitor):
        def visit_Name(self, node):
            line = positions[node].start.line
            scope = scopes.get(node)
            if node.value != "x" or "# read" not in lines[line - 1] or scope is None:
                return
            if not any(access.node is node for access in scope.accesses["x"]):
                return
            result = flow.reaching(node)
            found[line] = None if result is None else {positions[_target(a.node)].start.line for a in result}

    wrapper.visit(Reads())
    return found


def _target(node):
    return node.name if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Param)) else node


def test_rebinding_in_sequence_and_at_module_level():
    assert reaching("""
        x = 1
        print(x)  # read
        x = 2
        print(x)  # read
    """) == {3: {2}, 5: {4}}


def test_if_else_join_and_a_branch_that_returns():
    assert reaching("""
        def f(flag):
            if flag:
                x = 1
            else:
                x = 2
            print(x)  # read
            if flag:
                x = 3
                return x  # read
            return x  # read
    """) == {7: {4, 6}, 10: {9}, 11: {4, 6}}


def test_loops_see_the_previous_iteration_and_break():
    assert reaching("""
        def f(items):
            x = 0
            for item in items:
                print(x)  # read
                if item:
                    x = 1
                    break
                x = 2
            return x  # read
    """) == {5: {3, 9}, 10: {3, 7, 9}}


def test_try_handlers_see_every_state_of_the_body():
    assert reaching("""
        def f():
            x = 1
            try:
                x = 2
                x = 3
            except ValueError:
                print(x)  # read
            return x  # read
    """) == {8: {3, 5, 6}, 9: {3, 5, 6}}


def test_parameters_comprehensions_and_augmented_assignment():
    assert reaching("""
        def f(x):
            y = [x for _ in range(2)]  # read
            x += 1
            return x  # read
    """) == {3: {2}, 5: {4}}


@pytest.mark.parametrize("source", [
    # a closure may run at any time
    """
    def f():
        x = 1
        g = lambda: x  # read
        x = 2
    """,
    # a name also assigned through `global` elsewhere
    """
    x = 1
    def g():
        global x
        x = 2
    print(x)  # read
    """,
])
def test_what_the_walk_cannot_see_is_not_answered(source):
    assert set(reaching(source).values()) == {None}


def test_compat_v1_inside_compat_v1_is_the_same_api():
    # `import tensorflow.compat.v1 as tf` then `tf.compat.v1.losses...` (TensorFlow's official models)
    assert api_path_of_qualified("tensorflow.compat.v1.compat.v1.losses.sparse_softmax_cross_entropy") == \
        "losses.sparse_softmax_cross_entropy"
    assert api_path_of_qualified("tensorflow.compat.v1.estimator.Estimator") == "estimator.Estimator"
