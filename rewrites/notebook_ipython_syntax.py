from __future__ import annotations

from estimator2keras._rule import Diagnostic


class NotebookIpythonSyntax(Diagnostic):
    """IPython syntax in a notebook stands in the way of a conversion; the notebook is left as it was.

    ## What it does
    In a notebook, `%magic` and `!shell` lines (and `x = !cmd`, `obj?`) are not Python: e2k
    keeps them verbatim and converts the code around them. It reports this code when that
    is not possible: a conversion would change a name such a line uses (`%time
    estimator.train(...)` after `estimator` became a Keras model), would drop or move such a
    line, or a `%%writefile` cell writes a file with Estimator code. The notebook is then
    left byte-identical.

    ## Why
    A notebook converted around a line that still calls the Estimator would fail when run.
    e2k cannot read what a magic does with its arguments, so it does not guess.

    ## Fix safety
    Nothing is changed. Write the line as Python (`estimator.train(...)` instead of `%time
    estimator.train(...)`), or convert that part by hand, then run e2k again. Convert the
    file that a `%%writefile` cell writes with `e2k rewrite`, and paste it back.
    """

    code = "E2K904"
    summary = "IPython syntax in a notebook that a conversion would break: the notebook is left as it was"
    keywords = ()
