"""Finding the files to rewrite, and writing results without ever leaving a file half-written."""
from __future__ import annotations

import fnmatch
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

#: Directory names never descended into (besides hidden ones and virtual environments).
SKIPPED_DIRS = frozenset({"__pycache__", "build", "dist", "node_modules", "site-packages", "venv", "env"})
#: A file whose first lines carry this marker is generated code and is skipped.
GENERATED_MARKER = b"@generated"


class InputError(Exception):
    """A path given on the command line cannot be used (one clear line for the user)."""


@dataclass(frozen=True)
class SourceFile:
    path: Path
    #: Path relative to the root it was found under (for --out mirroring and reports).
    relative: Path


def _is_venv(directory: Path) -> bool:
    return (directory / "pyvenv.cfg").is_file()


def _excluded(relative: Path, excludes: Sequence[str]) -> bool:
    text = relative.as_posix()
    return any(
        fnmatch.fnmatch(text, pattern) or fnmatch.fnmatch(relative.name, pattern) or text.startswith(pattern.rstrip("/") + "/")
        for pattern in excludes
    )


def _is_generated(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            head = handle.read(1024)
    except OSError:
        return False
    return GENERATED_MARKER in head


def discover(paths: Iterable[str | Path], excludes: Sequence[str] = ()) -> list[SourceFile]:
    """Python files and notebooks (.ipynb) under ``paths``: explicit files as given;
    directories recursively.

    Skips hidden directories, virtual environments, build and cache directories, files
    matching ``excludes`` (globs on the path relative to the root, or on the name), and
    files marked ``@generated``. Symlinks are followed only when they point inside the root,
    and no file is listed twice.
    """
    candidates: list[SourceFile] = []
    links: list[SourceFile] = []

    def add(path: Path, relative: Path) -> None:
        (links if path.is_symlink() else candidates).append(SourceFile(path, relative))

    for raw in paths:
        root = Path(raw)
        if not root.exists():
            raise InputError(f"{raw}: no such file or directory")
        if root.is_file():
            add(root, Path(root.name))
            continue
        if not root.is_dir():
            raise InputError(f"{raw}: not a file or a directory")
        real_root = root.resolve()
        for directory, dirnames, filenames in os.walk(root, followlinks=False):
            current = Path(directory)
            kept = []
            for name in sorted(dirnames):
                child = current / name
                relative = child.relative_to(root)
                if name.startswith(".") or name in SKIPPED_DIRS or name.endswith(".egg-info"):
                    continue
                if _is_venv(child) or _excluded(relative, excludes):
                    continue
                if child.is_symlink():
                    # A linked directory inside the root is walked where it really is.
                    continue
                kept.append(name)
            dirnames[:] = kept
            for name in sorted(filenames):
                if not name.endswith((".py", ".ipynb")):
                    continue
                path = current / name
                relative = path.relative_to(root)
                if _excluded(relative, excludes):
                    continue
                if path.is_symlink():
                    # realpath, not resolve(): a symlink loop is skipped, not a RuntimeError.
                    target = Path(os.path.realpath(path))
                    if not target.is_file() or real_root not in target.parents:
                        continue
                if _is_generated(path):
                    continue
                add(path, relative)
    # Real files first: a link is only processed when its target is not reached otherwise.
    found: list[SourceFile] = []
    seen: set[str] = set()
    for source in [*candidates, *links]:
        real = os.path.realpath(source.path)
        if real not in seen:
            seen.add(real)
            found.append(source)
    return found


def atomic_write(path: Path, data: bytes, follow_symlinks: bool = True) -> None:
    """Replace ``path`` with ``data`` in one step, keeping its permission bits.

    The new content goes to a temporary file in the same directory, flushed to disk, then
    renamed over the original: a reader (or an interruption) sees the old file or the new
    one, never a truncated one. A symlink is written through to its target, unless
    ``follow_symlinks`` is false: then the link itself is replaced by a file. A new file gets
    the mode ``open()`` would give it.
    """
    path = Path(path)
    target = path.resolve() if follow_symlinks and path.is_symlink() else path
    mode = None
    try:
        mode = (target.stat() if follow_symlinks else target.lstat()).st_mode & 0o7777
    except FileNotFoundError:
        pass
    if mode is not None and not follow_symlinks and stat.S_ISLNK(target.lstat().st_mode):
        mode = None  # the link goes; what it pointed to is not ours
    if mode is not None and not os.access(target, os.W_OK):
        # The rename below would replace a file the process may not write (the directory's
        # permission is what rename checks): refuse as open(path, "w") would. Root may write
        # a read-only file, as with any editor or formatter; its mode is kept.
        raise PermissionError(f"{path} is read-only")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".e2k-tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode if mode is not None else 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _umask() -> int:
    # Read by setting it: there is no other portable way. Writes happen in the main thread.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
