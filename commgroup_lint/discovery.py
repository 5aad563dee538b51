"""Finding the Python files to check under the paths a user gives."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from commgroup_lint.git import IgnoreRules

ALWAYS_SKIPPED = frozenset({".git", ".hg", ".svn", ".bzr", "__pycache__", ".commgroup_lint_cache"})
"""Never walked into, whatever the excludes say: version control and caches (and every virtual
environment, found by its `pyvenv.cfg`)."""

DEFAULT_EXCLUDE = (
    ".venv", "venv", ".tox", ".nox", ".eggs", "*.egg-info", "build", "dist", "_build", "buck-out",
    "node_modules", "site-packages", "__pypackages__", ".direnv", ".ipynb_checkpoints", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".pytype", ".hypothesis",
)
"""The `exclude` setting when the configuration does not set one (ruff's list, and a few more):
`exclude` replaces it, `extend-exclude` adds to it."""


class PathNotFound(Exception):
    """A path given on the command line does not exist."""


class PathUnreadable(Exception):
    """A path given on the command line cannot be looked at (a folder on the way is not
    searchable): (the path, why)."""


@dataclass(frozen=True)
class Discovered:
    path: Path
    display: str  # how findings name the file: under the path the user typed
    explicit: bool  # named directly on the command line
    content: bytes | None = None  # the file's bytes when they are not on disk (stdin, an editor's buffer)


def is_excluded(display: str, patterns: Iterable[str]) -> bool:
    """A pattern without a `/` matches a file or directory name anywhere along the path; one
    with a `/` matches the path and everything under it (as ruff).

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
def _excluder(patterns: tuple[str, ...]) -> Callable[..., bool]:
    """`patterns` compiled once: a test of a path (POSIX, relative as given) and its absolute
    form. Names are a set lookup and name globs one regular expression, since every file of a
    walk is tested; `whole=False` tests only the last name (a walk tested the directories above
    on its way in)."""
    stripped = [p.rstrip("/").removeprefix("./") for p in patterns]
    names = frozenset(p for p in stripped if "/" not in p and not _GLOB.search(p))
    globs = [p for p in stripped if "/" not in p and _GLOB.search(p)]
    name_glob = re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs)).match if globs else None
    paths = [(p.startswith("/"), re.compile(fnmatch.translate(p)).match, p + "/",
              re.compile(fnmatch.translate(p + "/*")).match) for p in stripped if "/" in p]

    def excluded(posix: str, absolute: str, whole: bool = True) -> bool:
        parts = posix.split("/") if whole else [posix.rpartition("/")[2]]
        if not names.isdisjoint(parts) or (name_glob is not None and any(name_glob(p) for p in parts)):
            return True
        for is_absolute, match, prefix, match_below in paths:
            subject = absolute if is_absolute else posix
            if match(subject) or subject.startswith(prefix) or match_below(subject):
                return True
        return False

    return excluded


_GLOB = re.compile(r"[*?\[]")


def discover(paths: Iterable[str], exclude: Iterable[str] = DEFAULT_EXCLUDE, force_exclude: bool = False,
             respect_gitignore: bool = True, skip: frozenset[str] = frozenset()) -> list[Discovered]:
    """Python files under `paths`, sorted and without duplicates.

    Directories are walked without following symbolic links to directories (no loops);
    excludes and git's ignore rules apply to what is found by walking, and to named files
    only with `force_exclude` (pre-commit names every file it checks). A walk does not enter
    or list what `skip` names (absolute, normalised paths).
    """
    exclude = tuple(exclude)
    ignore = IgnoreRules() if respect_gitignore else None
    found: dict[str, Discovered] = {}
    for given in paths:
        root = Path(given)
        if not os.path.lexists(root):
            raise PathNotFound(given)
        try:
            is_dir = root.is_dir()
        except OSError as err:
            raise PathUnreadable(given, err.strerror or str(err)) from None
        if is_dir:
            for identity, item in _walk(root, given, exclude, ignore, skip):
                found.setdefault(identity, item)
        elif not (force_exclude and is_skipped(given, exclude, ignore)):
            found.setdefault(_identity(root), Discovered(root, given, True))
    return sorted(found.values(), key=lambda d: d.display)


def is_skipped(display: str, exclude: Iterable[str], ignore: IgnoreRules | None) -> bool:
    """Whether a file named on the command line is excluded, or ignored by git."""
    return is_excluded(display, exclude) or (ignore is not None and ignore.ignored_anywhere(os.path.abspath(display)))


def _identity(path: Path) -> str:
    """The file a path names, to drop duplicates; a symlink loop or a broken link keeps its own
    name (reading it then reports the problem as CGL000)."""
    try:
        return str(path.resolve())
    except (OSError, RuntimeError):  # RuntimeError: "Symlink loop" before Python 3.13
        return os.path.abspath(path)


def _walk(root: Path, given: str, exclude: tuple[str, ...], ignore: IgnoreRules | None,
          skip: frozenset[str]) -> Iterator[tuple[str, Discovered]]:
    """(identity, file) for each Python file under `root`, in the order `os.walk` gives them
    (a directory's files, sorted, then its subdirectories, sorted). One `os.scandir` per
    directory tells files, directories and links apart without a `stat` per entry; each
    directory is resolved once (not every file's whole path), and excludes are tested only
    when there are some, compiled once, against each entry's own name (the directories above
    it were tested on the way in)."""
    excluded = _excluder(exclude) if exclude else None
    root_posix = _posix(given)
    root_absolute = Path(os.path.abspath(given)).as_posix()
    if excluded is not None and excluded(root_posix, root_absolute):
        return

    def tested(posix_dir: str, absolute_dir: str, name: str, is_dir: bool = False) -> bool:
        posix = name if posix_dir in ("", ".") else f"{posix_dir}/{name}"
        absolute = absolute_dir + name
        return (absolute in skip or (excluded is not None and excluded(posix, absolute, whole=False))
                or (ignore is not None and ignore.ignored(absolute, is_dir, absolute_dir)))

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
        # Paths below are joined by hand: os.path.join for every entry costs a tenth of a walk.
        display_dir, absolute_dir = _with_separator(display_dir), _with_separator(absolute_dir)
        real_dir: str | None = None
        for name, is_link in sorted(files):
            if tested(posix_dir, absolute_dir, name):
                continue
            path = directory / name
            if is_link:
                identity = _identity(path)
            else:
                if real_dir is None:
                    real_dir = _with_separator(_identity(directory))
                identity = real_dir + name
            yield identity, Discovered(path, display_dir + name, False)
        below = []
        for name in sorted(subdirs):
            if (name in ALWAYS_SKIPPED or os.path.exists(f"{absolute_dir}{name}{os.sep}pyvenv.cfg")
                    or tested(posix_dir, absolute_dir, name, is_dir=True)):
                continue
            below.append((directory / name, display_dir + name,
                          name if posix_dir in ("", ".") else f"{posix_dir}/{name}", absolute_dir + name))
        stack.extend(reversed(below))  # depth first, in sorted order


def _with_separator(directory: str) -> str:
    return directory if directory.endswith(os.sep) else directory + os.sep


def _is_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return False
