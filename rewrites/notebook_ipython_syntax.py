from __future__ import annotations

from estimator2keras._rule import Diagnostic


class NotebookIpythonSyntax(Diagnostic):
    """Notebook code e2k leaves as it was, for a human: IPython syntax, a cell that does not parse.

    ## What it does
    e2k reads a notebook's code cells as Jupyter's IPython kernel does: `!shell` lines
    (continued by a trailing backslash), `x = !cmd`, `%magic` and `x = %magic` lines,
    `obj?`, the autocall escapes (`,f a b`), a cell of one line such as `pip install -q
    pandas` (automagic), a cell indented as a whole. It keeps that syntax verbatim and
    converts the Python around it. It reports this code when:

    - a conversion would change a name such a line uses (`%time estimator.train(...)` after
      `estimator` became a Keras model), or would drop, move or change such a line: the
      notebook is left byte-identical;
    - a cell does not parse even so (Python 2's `print 'x'`, a typo, prompts pasted with
      the code): the cell is left as it was, and the other cells are converted without it.
      If the cell may bind a name that converted code reads, the conversion, made without
      it, could be wrong: the notebook is then left byte-identical. If it uses a name the
      conversion changes, the finding names it;
    - a `%%writefile` cell writes a file with Estimator code;
    - in a converted notebook, a line installs or selects TensorFlow 1 (`!pip install -q
      tensorflow==1.15`, Colab's `%tensorflow_version 1.x`): the converted code needs
      TensorFlow 2.

    ## Why
    A notebook converted around a line that still calls the Estimator would fail when run.
    e2k cannot read what a magic does with its arguments, or what a cell that does not
    parse would define, so it does not guess.

    ## Fix safety
    Nothing is changed on the lines reported. Write the line as Python
    (`estimator.train(...)` instead of `%time estimator.train(...)`) or make the cell parse,
    then run e2k again; or convert that part by hand. Convert the file that a `%%writefile`
    cell writes with `e2k rewrite`, and paste it back. Change the TensorFlow version the
    notebook installs.
    """

    code = "E2K904"
    summary = "notebook code left for a human: IPython syntax a conversion would break, a cell that does not parse, a TF 1 pin"
    keywords = ()
