"""Reading the scanned files into the index: a file's IR and imports, and which files define
(or mention) the names the index wants next."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.names import (
    ImportTable,
    StarNames,
    _package_prefix,
    collect_imports,
    collect_renames,
    module_name_for,
    top_level,
)
from commgroup_lint.parsing import lower


@dataclass(frozen=True)
class IndexedModule:
    """A scanned file as the index holds it: its IR and its imports."""

    display: str
    imports: ImportTable
    module: ir.Module
    text: str  # the text the IR was made from


def mentioning(pending: dict[str, tuple[Path | None, str]], words: set[str]) -> set[str]:
    """The files whose text names one of `words` as a whole word."""
    pattern = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, words), key=len, reverse=True)) + r")\b")
    return {display for display, (_, text) in pending.items() if any(w in text for w in words) and pattern.search(text)}


class ModuleFinder:
    """Which scanned file is a module: files are grouped by their last name part (a package's
    `__init__.py` by its directory), so only the few candidates get their full module name
    worked out, not every scanned file."""

    def __init__(self, paths: dict[str, Path], namespaces: frozenset[str]) -> None:
        self._paths = paths
        self._namespaces = namespaces
        self._by_last: dict[str, list[str]] | None = None
        self._prefixes: dict[str, tuple[str, ...]] = {}

    def get(self, module: str) -> str | None:
        if self._by_last is None:
            self._by_last = {}
            for display, path in self._paths.items():
                stem = path.stem if path.name != "__init__.py" else path.parent.name
                self._by_last.setdefault(stem, []).append(display)
        found = None
        for display in self._by_last.get(module.rpartition(".")[2], ()):
            if _module_name(self._paths[display], self._prefixes, self._namespaces) == module:
                found = display  # the last one, as a dict built over all files would keep
        return found


def defining(names: set[str], modules: ModuleFinder) -> set[str]:
    """The files of the modules that define `names` (`pkg.mod.func`, `pkg.mod.Class.method`)."""
    found = set()
    for name in names:
        parts = name.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            display = modules.get(".".join(parts[:cut]))
            if display is not None:
                found.add(display)
                break
    return found


def _module_name(path: Path, prefixes: dict[str, tuple[str, ...]], namespaces: frozenset[str]) -> str:
    """`module_name_for(path)[0]`, resolving each directory (and finding its package) once
    rather than for every file; plain strings, as this runs for every scanned file."""
    text = os.fspath(path)
    if os.path.islink(text):
        return module_name_for(path, namespaces)[0]
    head, slash, name = text.rpartition("/")
    parent = head or ("/" if slash else ".")
    prefix = prefixes.get(parent)
    if prefix is None:
        prefix = prefixes[parent] = _package_prefix(Path(parent).resolve(), namespaces)
    dot = name.rfind(".")
    stem = name[:dot] if 0 < dot < len(name) - 1 else name  # as `Path.stem`
    parts = [*prefix] if name == "__init__.py" else [*prefix, stem]
    return ".".join(parts) or stem


def index_module(path: Path, display: str, text: str, frontend: str = "ast",
                 namespaces: frozenset[str] = frozenset(),
                 star_names: Callable[[str], StarNames | None] | None = None) -> IndexedModule:
    """Parse and lower to the IR (see `parsing.lower`); raises `ParseFailure`. `star_names`
    answers what a star import binds (see `ImportTable`)."""
    module = lower(text, display, frontend)
    name, is_package = module_name_for(path, namespaces)
    own = top_level(module.body)[1]
    imports = ImportTable(name, is_package, collect_imports(module.body), collect_renames(module.body), own, star_names)
    return IndexedModule(display, imports, module, text)
