from __future__ import annotations

from estimator2keras._rule import Diagnostic


class RuleFailure(Diagnostic):
    """A rule raised an unexpected error on a file; that file is left byte-identical.

    ## What it does
    Reported as `path:1:1: E2K903 <rule code> raised <error>` when a rule (built-in or a
    user's) fails on a file. The file is not touched; the run goes on with the other files
    and exits with status 2 at the end.

    Also reported, as `E2K903 e2k's worker process died converting this file`, when the
    process converting a file dies (a crash in native code, or the system's out-of-memory
    killer): the files it had in flight are tried again one at a time, and only the one
    that kills a worker on its own is reported.

    ## Why
    One bad rule or one unusual file must not stop a migration of a large tree, nor leave
    any file half-written.

    ## Fix safety
    Nothing is changed. Please report built-in rule failures with the file that caused them.
    """

    code = "E2K903"
    summary = "a rule raised on a file: reported, that file left untouched, exit status 2"
    keywords = ()
