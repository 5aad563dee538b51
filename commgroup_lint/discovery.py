"""Finding the Python files to check under the paths a user gives."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# Never descended into: version control, caches, virtual environments and build output.
SKIPPED_DIRECTORIES = frozenset({
    ".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".tox", ".nox", ".eggs", "build", "dist",
    "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".commgroup_lint_cache",
    "site-packages", ".hypothesis",
})


class PathNotFound(Exception):
    """A path given on the command line does not exist."""


@dataclass(frozen=True)
class Discovered:
    path: Path
    display: str  # how findings name the file: under the path the user typed
    explicit: bool  # named directly on the command line


def is_excluded(display: str, patterns: Iterable[str]) -> bool:
    """A pattern matches the whole path, its file name, or any directory along it (as ruff).

    An absolute pattern (as `config.anchor` makes of `dir/sub`) is matched against the
    absolute path, so it means the same from any working directory.
    """
    patterns = tuple(patterns)
    if not patterns:
        return False
    return _excluder(patterns)(_posix(display), Path(os.path.abspath(display)).as_posix())


def _posix(display: str) -> str:
    return Path(display).as_posix().removeprefix("./")


@lru_cache(maxsize=256)
def _excluder(patterns: tuple[str, ...]) -> Callable[[str, str], bool]:
    """`patterns` compiled once: a test of a path (POSIX, relative as given) and its absolute form."""
    compiled = []
    for pattern in patterns:
        pattern = pattern.rstrip("/").removeprefix("./")
        compiled.append((
            pattern.startswith("/"),
            re.compile(fnmatch.translate(pattern)).match,
            pattern + "/" if "/" in pattern else None,
            re.compile(fnmatch.translate(pattern + "/*")).match if "/" in pattern else None,
        ))

    def excluded(posix: str, absolute: str) -> bool:
        parts = posix.split("/")
        for is_absolute, match, prefix, match_below in compiled:
            subject = absolute if is_absolute else posix
            if match(subject) or any(match(p) for p in parts):
                return True
            if prefix is not None and (subject.startswith(prefix) or match_below(subject)):
                return True
        return False

    return excluded


def discover(paths: Iterable[str], exclude: Iterable[str] = (), force_exclude: bool = False) -> list[Discovered]:
    """Python files under `paths`, sorted and without duplicates.

    Directories are walked without following symbolic links to directories (no loops);
    excludes apply to what is found by walking, and to named files only with `force_exclude`.
    """
    exclude = tuple(exclude)
    found: dict[str, Discovered] = {}
    for given in paths:
        root = Path(given)
        if not os.path.lexists(root):
            raise PathNotFound(given)
        if root.is_dir():
            for identity, item in _walk(root, given, exclude):
                found.setdefault(identity, item)
        elif not (force_exclude and is_excluded(given, exclude)):
            found.setdefault(_identity(root), Discovered(root, given, True))
    return sorted(found.values(), key=lambda d: d.display)


def _identity(path: Path) -> str:
    """The file a path names, to drop duplicates; a symlink loop or a broken link keeps its own
    name (reading it then reports the problem as CGL000)."""
    try:
        return str(path.resolve())
    except (OSError, RuntimeError):  # RuntimeError: "Symlink loop" before Python 3.13
        return os.path.abspath(path)


def _walk(root: Path, given: str, exclude: tuple[str, ...]) -> Iterator[tuple[str, Discovered]]:
    """(identity, file) for each Python file under `root`, in the order `os.walk` gives them
    (a directory's files, sorted, then its subdirectories, sorted). One `os.scandir` per
    directory tells files, directories and links apart without a `stat` per entry; each
    directory is resolved once (not every file's whole path), and excludes are tested only
    when there are some, compiled once."""
    excluded = _excluder(exclude) if exclude else None
    root_posix = _posix(given) if excluded else ""
    root_absolute = Path(os.path.abspath(given)).as_posix() if excluded else ""

    def tested(posix_dir: str, absolute_dir: str, name: str) -> bool:
        posix = name if posix_dir in ("", ".") else f"{posix_dir}/{name}"
        return excluded is not None and excluded(posix, os.path.join(absolute_dir, name))

    stack = [(root, given, root_posix, root_absolute)]
    while stack:
        directory, display_dir, posix_dir, absolute_dir = stack.pop()
        try:
            with os.scandir(directory) as listing:
                entries = list(listing)
        except OSError:  # unreadable directory: skipped, as os.walk does
            continue
        files: list[tuple[str, bool]] = []
        subdirs: list[str] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                if not _is_link(entry):  # a link to a directory is never descended into
                    subdirs.append(entry.name)
            elif entry.name.endswith(".py"):
                files.append((entry.name, _is_link(entry)))
        real_dir: str | None = None
        for name, is_link in sorted(files):
            if tested(posix_dir, absolute_dir, name):
                continue
            path = directory / name
            if is_link:
                identity = _identity(path)
            else:
                if real_dir is None:
                    real_dir = _identity(directory)
                identity = os.path.join(real_dir, name)
            yield identity, Discovered(path, os.path.join(display_dir, name), False)
        below = []
        for name in sorted(subdirs):
            if (name in SKIPPED_DIRECTORIES or name.endswith(".egg-info")
                    or os.path.exists(os.path.join(directory, name, "pyvenv.cfg"))
                    or tested(posix_dir, absolute_dir, name)):
                continue
            below.append((directory / name, os.path.join(display_dir, name),
                          name if posix_dir in ("", ".") else f"{posix_dir}/{name}", os.path.join(absolute_dir, name)))
        stack.extend(reversed(below))  # depth first, in sorted order


def _is_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return False
