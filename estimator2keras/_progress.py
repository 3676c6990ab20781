"""A progress bar on stderr for long runs, on a terminal only.

rich draws it when it is installed (``pip install "estimator2keras[parity]"``); without rich
a one-line counter does. Nothing is drawn when stderr is not a terminal (piped, CI,
pre-commit's captured output), under ``--quiet``, or for runs of fewer than
``MIN_FILES`` files. The bar disappears when the run ends.
"""
from __future__ import annotations

import os
import time
from typing import TextIO

MIN_FILES = 20


class _Nothing:
    def start(self, total: int) -> None:
        pass

    def advance(self, result=None) -> None:
        pass

    def close(self) -> None:
        pass


class _Counter:
    """``e2k: 120/4000 files`` rewritten in place, at most ten times a second."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.total = 0
        self.done = 0
        self._last = 0.0

    def start(self, total: int) -> None:
        self.total = total

    def advance(self, result=None) -> None:
        self.done += 1
        now = time.monotonic()
        if now - self._last >= 0.1 or self.done == self.total:
            self._last = now
            self.stream.write(f"\re2k: {self.done}/{self.total} files")
            self.stream.flush()

    def close(self) -> None:
        if self.done:
            self.stream.write("\r\033[K")
            self.stream.flush()


class _Rich:
    def __init__(self, stream: TextIO):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("e2k"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("files"),
            TimeElapsedColumn(),
            console=Console(file=stream),
            transient=True,
        )
        self._task = None

    def start(self, total: int) -> None:
        self._progress.start()
        self._task = self._progress.add_task("rewrite", total=total)

    def advance(self, result=None) -> None:
        if self._task is not None:
            self._progress.advance(self._task)

    def close(self) -> None:
        self._progress.stop()


class Progress:
    """Call ``start(total)``, ``advance()`` per file, ``close()`` at the end; draws only when
    it should (see the module docstring)."""

    def __init__(self, stream: TextIO, enabled: bool = True, min_files: int = MIN_FILES):
        isatty = getattr(stream, "isatty", None)
        self.enabled = enabled and bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"
        self.stream = stream
        self.min_files = min_files
        self._impl: _Nothing | _Counter | _Rich = _Nothing()

    def start(self, total: int) -> None:
        if not self.enabled or total < self.min_files:
            return
        try:
            self._impl = _Rich(self.stream)
        except ImportError:
            self._impl = _Counter(self.stream)
        self._impl.start(total)

    def advance(self, result=None) -> None:
        self._impl.advance(result)

    def close(self) -> None:
        self._impl.close()
        self._impl = _Nothing()
