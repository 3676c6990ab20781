from __future__ import annotations

from estimator2keras._rule import Diagnostic


class UnreadableFile(Diagnostic):
    """A file e2k could not read or parse; it is left byte-identical.

    ## What it does
    Reported as `path:line:col: E2K900 <reason>` when a file is not valid Python 3 (a syntax
    error, Python 2 code), cannot be decoded (not UTF-8 and no PEP 263 coding line), or
    cannot be read. The file is not touched; the other files are processed; `e2k rewrite`
    exits with status 2 at the end.

    Two more reasons, both limits of the parsers rather than errors in the code: a file
    nested more deeply than Python's own parser accepts (hundreds of nested brackets,
    thousands of chained operators: generated code), on which libcst's parser would crash or
    run for minutes; and a file over 1 MB that may build an Estimator, which is not parsed
    (libcst needs over half a gigabyte and minutes per megabyte). A file over 1 MB in which
    no Estimator can start is left alone without being parsed, and not reported.

    ## Why
    A file that does not parse cannot be rewritten safely, and a run over a large tree
    should not stop at the first bad file.

    ## Fix safety
    Nothing is changed.

    ## References
    - https://peps.python.org/pep-0263/
    """

    code = "E2K900"
    summary = "a file that cannot be read or parsed: reported, left untouched, exit status 2"
    keywords = ()
