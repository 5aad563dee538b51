"""What `from M import *` binds: the public names of a scanned module M.

Python binds M's `__all__` (when it is a literal list or tuple of strings) or else every name
M's top level binds that does not start with `_`: its definitions, its assignments, what it
imports, and what its own star imports bring (chains are followed; a cycle ends where it
closes). Each name stands for what it is in M: what M imported it as, or `M.name`. Nothing is
executed: M's text is parsed, as every scanned file is.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from commgroup_lint.analysis.indexing import ModuleFinder
from commgroup_lint.analysis.names import ImportTable, StarNames, top_level
from commgroup_lint.parsing import ParseFailure, lower


class _Source(Protocol):
    @property
    def path(self) -> Path: ...
    @property
    def display(self) -> str: ...
    @property
    def text(self) -> str: ...


class StarExports:
    """The public names of the scanned modules, by qualified module name (None: not scanned,
    or it does not parse). Each module is parsed once, when a star import first asks for it."""

    def __init__(self, sources: Iterable[_Source], frontend: str, namespaces: frozenset[str]) -> None:
        self._sources = {s.display: s for s in sources}
        self._finder = ModuleFinder({d: s.path for d, s in self._sources.items()}, namespaces)
        self._frontend = frontend
        self._namespaces = namespaces
        self._known: dict[str, StarNames | None] = {}
        self._open: set[str] = set()  # the modules being read: a cycle of star imports ends here

    def __call__(self, module: str) -> StarNames | None:
        if module in self._known:
            return self._known[module]
        if module in self._open:
            return ()
        display = self._finder.get(module)
        if display is None:
            return None
        self._open.add(module)
        try:
            found = self._known[module] = self._read(module, self._sources[display])
        finally:
            self._open.discard(module)
        return found

    def _read(self, name: str, source: _Source) -> StarNames | None:
        try:
            body = lower(source.text, source.display, self._frontend).body
        except ParseFailure:
            return None
        imports, defined, exported = top_level(body)
        table = ImportTable(name, source.path.name == "__init__.py", imports)
        bound: dict[str, str] = {}
        for star in table.stars:  # what the module's own star imports bring, overridden by the rest
            bound.update(self(star) or ())
        bound.update((local, target) for local, target in table.aliases().items())
        bound.update((local, f"{name}.{local}") for local in defined)
        if exported is not None:
            return tuple((n, bound.get(n, f"{name}.{n}")) for n in exported)
        return tuple(sorted((n, target) for n, target in bound.items() if not n.startswith("_")))
