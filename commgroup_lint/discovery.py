"""Finding the Python files to check under the paths a user gives."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
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
    posix = Path(display).as_posix().removeprefix("./")
    parts = posix.split("/")
    absolute = Path(os.path.abspath(display)).as_posix()
    for pattern in patterns:
        pattern = pattern.rstrip("/").removeprefix("./")
        subject = absolute if pattern.startswith("/") else posix
        if fnmatch.fnmatch(subject, pattern) or any(fnmatch.fnmatch(p, pattern) for p in parts):
            return True
        if "/" in pattern and (subject.startswith(pattern + "/") or fnmatch.fnmatch(subject, pattern + "/*")):
            return True
    return False


def discover(paths: Iterable[str], exclude: Iterable[str] = (), force_exclude: bool = False) -> list[Discovered]:
    """Python files under `paths`, sorted and without duplicates.

    Directories are walked without following symbolic links to directories (no loops);
    excludes apply to what is found by walking, and to named files only with `force_exclude`.
    """
    exclude = tuple(exclude)
    found: dict[Path, Discovered] = {}
    for given in paths:
        root = Path(given)
        if not os.path.lexists(root):
            raise PathNotFound(given)
        if root.is_dir():
            real_dirs: dict[str, Path] = {}
            for item in _walk(root, given, exclude):
                # resolving each directory once, not every file's whole path (the cost of a walk)
                directory = str(item.path.parent)
                if directory not in real_dirs:
                    real_dirs[directory] = _identity(item.path.parent)
                identity = _identity(item.path) if item.path.is_symlink() else real_dirs[directory] / item.path.name
                found.setdefault(identity, item)
        elif not (force_exclude and is_excluded(given, exclude)):
            found.setdefault(_identity(root), Discovered(root, given, True))
    return sorted(found.values(), key=lambda d: d.display)


def _identity(path: Path) -> Path:
    """The file a path names, to drop duplicates; a symlink loop or a broken link keeps its own
    name (reading it then reports the problem as CGL000)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: "Symlink loop" before Python 3.13
        return Path(os.path.abspath(path))


def _walk(root: Path, given: str, exclude: tuple[str, ...]) -> Iterator[Discovered]:
    for directory, subdirs, files in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(directory, root)
        display_dir = given if rel_dir == "." else os.path.join(given, rel_dir)
        subdirs[:] = sorted(
            d for d in subdirs
            if d not in SKIPPED_DIRECTORIES
            and not d.endswith(".egg-info")
            and not os.path.exists(os.path.join(directory, d, "pyvenv.cfg"))
            and not is_excluded(os.path.join(display_dir, d), exclude)
        )
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            display = os.path.join(display_dir, name)
            if not is_excluded(display, exclude):
                yield Discovered(Path(directory) / name, display, False)
