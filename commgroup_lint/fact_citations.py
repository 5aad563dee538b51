"""Whether a configuration fact still matches the engine code it cites.

A shipped fact names (`source`) the file, relative to the engine's package, and the function,
method (`Class.method`) or class that enforces it, and (`evidence`) a text that code holds (the
assert's message, the assignment). A new release that moved or dropped the check makes the
fact stale; `scripts/check_releases.py` reports it. The cited file is parsed, never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from commgroup_lint.config_facts import Fact
from commgroup_lint.segments import Segments


class CitedFiles:
    """The cited files as parsed, each read once (many facts cite one validation file)."""

    def __init__(self) -> None:
        self._read: dict[Path, tuple[ast.Module, Segments] | str] = {}

    def read(self, file: Path) -> tuple[ast.Module, Segments] | str:
        """The file's tree and lines, or why it cannot be read."""
        if file not in self._read:
            try:
                text = file.read_text(encoding="utf-8")
                self._read[file] = (ast.parse(text), Segments(text))
            except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as err:
                self._read[file] = str(err)
        return self._read[file]


def citation_problem(fact: Fact, package_root: Path, files: CitedFiles | None = None) -> str | None:
    """Why the fact no longer matches the code under `package_root` (at none of the places it
    cites), or None when it does."""
    if not fact.source:
        return "cites no source (`source = \"path/in/package.py:Symbol\"`)"
    files = files or CitedFiles()
    problems = [_problem(fact, source, package_root, files) for source in (fact.source, *fact.also)]
    return None if None in problems else problems[0]


def _problem(fact: Fact, source: str, package_root: Path, files: CitedFiles) -> str | None:
    path, _, symbol = source.partition(":")
    read = files.read(package_root / path)
    if isinstance(read, str):
        return f"cannot read the cited file {path}: {read}"
    tree, segments = read
    node = _find(tree, symbol.split(".")) if symbol else tree
    if node is None:
        return f"{path} defines no `{symbol}` any more"
    segment = segments.of(node) if symbol else "".join(segments.lines)
    if fact.evidence and fact.evidence not in (segment or ""):
        return f"`{symbol or path}` no longer contains {fact.evidence!r}"
    return None


def _find(tree: ast.AST, names: list[str]) -> ast.AST | None:
    scope: ast.AST = tree
    for name in names:
        found = next((n for n in ast.iter_child_nodes(scope)
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name), None)
        if found is None:
            return None
        scope = found
    return scope


def stale(fact: Fact, paths: Iterable[Path], files: CitedFiles | None = None) -> bool:
    """Whether a file the fact cites is among `paths` and none of its citations matches: the
    checked code is another release than the ones the fact was stated for, so it is not
    applied there."""
    if not fact.source or fact.derived:
        return False
    cited = {source.partition(":")[0] for source in (fact.source, *fact.also)}
    for path in paths:
        posix = path.as_posix()
        for name in cited:
            if posix == name or posix.endswith("/" + name):
                return citation_problem(fact, Path(posix[: -len(name)] or "."), files) is not None
    return False
