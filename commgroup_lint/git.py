"""What git knows about paths, read without running git for every file: where a work tree
starts, and which paths it ignores (`.gitignore` files, `.git/info/exclude`, the global
excludes file), matched by `pathspec`, a maintained implementation of git's wildmatch rules.

Precedence is git's: a deeper `.gitignore` before a shallower one, then `.git/info/exclude`,
then the global file (`core.excludesFile`, else `$XDG_CONFIG_HOME/git/ignore`); within one
file the last matching pattern wins, and a `!pattern` re-includes. Outside a work tree nothing
is ignored. A directory that is ignored is not walked, so nothing below it can come back (as
in git).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from commgroup_lint.files import TEXT_LIMIT, read_regular

if TYPE_CHECKING:
    import pathspec

IgnoreFile = tuple[str, "pathspec.GitIgnoreSpec"]  # (the directory its patterns are relative to, the patterns)


def repository_root(directory: str) -> str | None:
    """The work tree holding `directory` (absolute): the nearest ancestor with a `.git` entry
    (a directory, or the file of a worktree or submodule), or None. Not cached: a language
    server lives through `git init`."""
    while not os.path.lexists(os.path.join(directory, ".git")):
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent
    return directory


class IgnoreRules:
    """Answers whether git ignores a path; each directory's ignore files are read once (a run
    makes one of these, so a long-lived process sees edits to them at its next run)."""

    def __init__(self) -> None:
        self._applying: dict[str, tuple[IgnoreFile, ...]] = {}
        self._roots: dict[str, str | None] = {}

    def ignored(self, path: str, is_dir: bool, directory: str | None = None) -> bool:
        """Whether `path` (absolute, normalised; in `directory` when the caller knows it) is
        ignored, judging by its own name only: the caller does not walk into ignored
        directories (see `ignored_anywhere` for a named file)."""
        directory = os.path.dirname(path) if directory is None else directory.rstrip(os.sep) or os.sep
        for base, spec in self._files(directory):
            relative = path[len(base) + 1:] if base != "/" else path[1:]
            verdict = spec.check_file(relative + "/" if is_dir else relative).include
            if verdict is not None:
                return verdict
        return False

    def ignored_anywhere(self, path: str) -> bool:
        """Whether `path` or a directory above it (up to its work tree) is ignored: for a file
        named on the command line, which no walk reached."""
        root = repository_root(os.path.dirname(path))
        if root is None:
            return False
        below = path[len(root):].strip(os.sep).split(os.sep)
        current = root
        for part in below[:-1]:
            current = os.path.join(current, part)
            if self.ignored(current, is_dir=True):
                return True
        return self.ignored(path, is_dir=False)

    def _files(self, directory: str) -> tuple[IgnoreFile, ...]:
        """The ignore files that apply in `directory`, in the order git consults them."""
        found = self._applying.get(directory)
        if found is not None:
            return found
        root = self._root(directory)
        if root is None:
            found = ()
        elif directory == root:
            repository = [_read(os.path.join(root, ".git", "info", "exclude"))]
            found = tuple((root, spec) for spec in (_read(os.path.join(root, ".gitignore")), *repository,
                                                     _global_excludes(root)) if spec is not None)
        else:
            own = _read(os.path.join(directory, ".gitignore"))
            inherited = self._files(os.path.dirname(directory))
            found = ((directory, own), *inherited) if own is not None else inherited
        self._applying[directory] = found
        return found

    def _root(self, directory: str) -> str | None:
        """`repository_root`, one `lstat` per directory of a walk (the parent's answer is reused)."""
        if directory not in self._roots:
            parent = os.path.dirname(directory)
            if os.path.lexists(os.path.join(directory, ".git")):
                self._roots[directory] = directory
            else:
                self._roots[directory] = None if parent == directory else self._root(parent)
        return self._roots[directory]


def _read(path: str) -> pathspec.GitIgnoreSpec | None:
    try:
        lines = read_regular(path, TEXT_LIMIT).decode("utf-8", errors="surrogateescape").splitlines()
    except OSError:  # absent (the usual case), a directory, a FIFO, too large, unreadable: no patterns
        return None
    import pathspec  # only in a git work tree that has ignore files

    spec = pathspec.GitIgnoreSpec.from_lines(lines)
    return spec if spec.patterns else None


def _global_excludes(root: str) -> pathspec.GitIgnoreSpec | None:
    """The user's global excludes: `core.excludesFile` as git resolves it for this work tree
    (one `git config` call per run), else git's default, `$XDG_CONFIG_HOME/git/ignore`."""
    import subprocess  # here: subprocess costs a fiftieth of a one-file run to import

    configured = None
    git = _git_executable()
    if git is not None:
        try:
            done = subprocess.run([git, *SAFE_OPTIONS, "config", "--path", "--get", "core.excludesFile"], cwd=root,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10,
                                  env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
            configured = done.stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            configured = None
    if configured is None:
        config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
        configured = os.path.join(config_home, "git", "ignore")
    return _read(str(Path(configured).expanduser()))


SAFE_OPTIONS = ("--no-pager", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")
"""Before every git command run in a checked work tree: its `.git/config` is the repository's,
so nothing it names may run (`git config --get` runs none of these; they guard a later command)."""


def _git_executable() -> str | None:
    """git's absolute path, searched only in the absolute entries of `PATH`: a relative entry
    (`.`, or an empty one) would find a `git` that the checked repository ships."""
    import shutil

    search = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(p))
    return shutil.which("git", path=search) if search else None
