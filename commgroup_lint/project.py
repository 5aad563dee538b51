"""The project a run belongs to, and the files that give the checked files their context.

A buffer's group is often decided in another file (a helper that allocates it, or the one
that consumes it), so a run over a few files (pre-commit, an editor) must read the rest of the
project to find what a run over the whole project finds in them. The project root is the
directory of the configuration file in use, else the nearest git work tree; without either
there is no project, and a run sees only the files it is given. The files under the import
roots (`src`, by default the root and `src/`) are the context: the index reads them (with the
cache, an unchanged file is not even opened), honouring excludes and git's ignore rules, and
the check reports only on the files given.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from commgroup_lint.config import Config
from commgroup_lint.discovery import Discovered, discover
from commgroup_lint.git import repository_root


def project_root(config: Config, paths: Sequence[str]) -> Path | None:
    """The directory of the configuration file, else the work tree holding `paths`."""
    if config.path is not None:
        return Path(os.path.abspath(config.path)).parent
    absolute = [os.path.abspath(p) for p in paths or (".",)]
    common = os.path.commonpath([p if os.path.isdir(p) else os.path.dirname(p) for p in absolute])
    root = repository_root(common)
    return Path(root) if root is not None else None


def import_roots(root: Path, src: Iterable[str]) -> list[str]:
    """The existing import roots, absolute, without those inside another one (walked already)."""
    roots = sorted({os.path.normpath(root / s) for s in src if (root / s).is_dir()})
    return [r for r in roots if not any(_within(r, other) for other in roots if other != r)]


def context_files(roots: Sequence[str], given: Sequence[str], exclude: Sequence[str],
                  respect_gitignore: bool) -> list[Discovered]:
    """The Python files under `roots` except those `given` (files, or directories to check),
    which the walk does not enter."""
    skip = frozenset(os.path.abspath(p) for p in given)
    found: list[Discovered] = []
    for root in roots:
        if any(_within(root, s) for s in skip):
            continue
        found += discover([display_name(root)], exclude, False, respect_gitignore, skip)
    return found


def display_name(path: str) -> str:
    """How `check` run in the working directory names `path` (absolute): relative to it, or
    absolute when outside it."""
    relative = os.path.relpath(path)
    return path if relative == os.pardir or relative.startswith(os.pardir + os.sep) else relative


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)
