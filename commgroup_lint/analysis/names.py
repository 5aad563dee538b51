"""Qualified names: resolve what a name or attribute chain refers to through imports."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path

from commgroup_lint.analysis import ir


def module_name_for(path: Path, namespaces: frozenset[str] = frozenset()) -> tuple[str, bool]:
    """The dotted module name of a file, and whether it is a package's `__init__`.

    The package root is the highest ancestor holding an `__init__.py` that is reached
    through directories named like identifiers, so namespace packages between a regular
    package and the file (SGLang's `sglang/srt/` has no `__init__.py`) still count. Above
    it, a directory named in `namespaces` (the profiles' top-level packages) is a namespace
    package too: Megatron-Core's `megatron/` has no `__init__.py`, yet its code is `megatron.core`.
    """
    path = path.resolve()
    is_package = path.name == "__init__.py"
    prefix = _package_prefix(path.parent, namespaces)
    parts = [*prefix] if is_package else [*prefix, path.stem]
    return ".".join(parts) or path.stem, is_package


@lru_cache(maxsize=8192)
def _package_prefix(directory: Path, namespaces: frozenset[str] = frozenset()) -> tuple[str, ...]:
    chain: list[str] = []
    best: tuple[str, ...] = ()
    while directory.name.isidentifier() and directory.parent != directory:
        chain.append(directory.name)
        if (directory / "__init__.py").is_file() or (best and directory.name in namespaces):
            best = tuple(reversed(chain))
        directory = directory.parent
    return best


class ImportTable:
    """Maps local names to the qualified names they were imported as."""

    def __init__(self, module: str, is_package: bool, imports: Iterable[ir.Import],
                 renames: Iterable[tuple[str, ir.Expr]] = (), instances: Iterable[tuple[str, ir.Expr]] = ()) -> None:
        self.module = module
        self._package = module if is_package else module.rpartition(".")[0]
        self._aliases: dict[str, str] = {}
        self._alternatives: dict[str, list[str]] = {}  # every module a name is imported from (try/except fallbacks)
        for stmt in imports:
            for name in stmt.names:
                qualified = self.qualify_import(name)
                self._aliases[name.asname] = qualified
                found = self._alternatives.setdefault(name.asname, [])
                if qualified not in found:
                    found.append(qualified)
        for local, target in renames:  # `get_tp = parallel_state.get_tp_group`: one more name for it
            renamed = self.qualify(target)
            if renamed is not None and local not in self._aliases:
                self._aliases[local] = renamed
                self._alternatives[local] = [renamed]
        # `_workspace_manager = FlashInferWorkspaceManager()`: the module's one instance, by its class
        self.instances = {local: cls for local, made in instances
                          if local not in self._aliases and (cls := self.qualify(made)) is not None}

    def imports(self, name: str) -> bool:
        """Whether an import of the module binds `name` (else it is the module's own, or a builtin)."""
        return name in self._aliases

    def qualify_import(self, name: ir.ImportName) -> str:
        """The qualified name an import binds (relative imports resolved against this module)."""
        base = name.module
        if name.level:
            parts = self._package.split(".") if self._package else []
            parts = parts[: len(parts) - (name.level - 1)] if name.level > 1 else parts
            base = ".".join([*parts, name.module] if name.module else parts)
        if name.name is None:
            return base
        return f"{base}.{name.name}" if base else name.name

    def qualify(self, expr: ir.Expr) -> str | None:
        """`dpa.get_local_dp_buffer` -> `sglang.srt.layers.dp_attention.get_local_dp_buffer`."""
        if isinstance(expr, ir.Name):
            return self._aliases.get(expr.id, f"{self.module}.{expr.id}" if self.module else expr.id)
        if isinstance(expr, ir.Attr):
            base = self.qualify(expr.value)
            return f"{base}.{expr.attr}" if base else None
        return None

    def qualify_all(self, name: str) -> list[str]:
        """Every qualified name `name` may stand for: `import megatron.core.nccl_allocator as
        nccl_allocator` in a `try`, and `import apex.contrib.nccl_allocator as nccl_allocator` in
        its `except`, are both possible."""
        return self._alternatives.get(name) or [f"{self.module}.{name}" if self.module else name]

    def aliases(self) -> dict[str, str]:
        """Local name -> qualified name, for every import of the module."""
        return dict(self._aliases)

    def local_name_for(self, qualified: str) -> str | None:
        """The local name bound to `qualified`, if the module imports it (under any alias)."""
        for local, target in self._aliases.items():
            if target == qualified:
                return local
        return None


def collect_renames(body: Iterable[ir.Stmt]) -> list[tuple[str, ir.Expr]]:
    """The module's top-level `alias = name` (or `= module.name`) assignments of a name bound
    nowhere else at the top level: another name for the same object, as an import is. An
    optional import's alias counts too: bound in an `if` or `try` of the module body, and
    otherwise only to `None` (`except ImportError: _f = None`), which nothing calls."""
    bound: dict[str, int] = {}
    renames: list[tuple[str, ir.Expr]] = []
    for stmt in _top_level(body):
        if isinstance(stmt, ir.Assign):
            for target in stmt.targets:
                if isinstance(target, ir.Name):
                    if isinstance(stmt.value, ir.Const) and stmt.value.value is None:
                        continue  # the fallback of an optional import
                    bound[target.id] = bound.get(target.id, 0) + 1
                    if len(stmt.targets) == 1 and isinstance(stmt.value, (ir.Name, ir.Attr)) and _dotted(stmt.value):
                        renames.append((target.id, stmt.value))
        elif isinstance(stmt, (ir.FunctionDef, ir.ClassDef)):
            bound[stmt.name] = bound.get(stmt.name, 0) + 1
    return [(name, value) for name, value in renames if bound[name] == 1]


def collect_instances(body: Iterable[ir.Stmt]) -> list[tuple[str, ir.Expr]]:
    """The module's top-level `name = Cls(...)` of a name bound nowhere else at the top level
    (but to `None`): a process-wide instance, which functions use by its name; with the class
    called (whether it is a class of the checked code is the reader's to say)."""
    bound: dict[str, int] = {}
    made: list[tuple[str, ir.Expr]] = []
    for stmt in _top_level(body):
        if isinstance(stmt, ir.Assign):
            for target in stmt.targets:
                if isinstance(target, ir.Name) and not (isinstance(stmt.value, ir.Const) and stmt.value.value is None):
                    bound[target.id] = bound.get(target.id, 0) + 1
                    if len(stmt.targets) == 1 and isinstance(stmt.value, ir.Call) and _dotted(stmt.value.func):
                        made.append((target.id, stmt.value.func))
        elif isinstance(stmt, (ir.FunctionDef, ir.ClassDef)):
            bound[stmt.name] = bound.get(stmt.name, 0) + 1
    return [(name, func) for name, func in made if bound[name] == 1]


def _top_level(body: Iterable[ir.Stmt]) -> Iterator[ir.Stmt]:
    """The module body's statements, with those of its `if` and `try` blocks (run once, at import)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ir.If):
            yield from _top_level(stmt.body + stmt.orelse)
        elif isinstance(stmt, ir.Try):
            yield from _top_level(stmt.body + stmt.orelse + stmt.finalbody)
            for handler in stmt.handlers:
                yield from _top_level(handler)


def _dotted(e: ir.Expr) -> bool:
    return isinstance(e, ir.Name) or isinstance(e, ir.Attr) and _dotted(e.value)


def collect_imports(body: Iterable[ir.Stmt]) -> list[ir.Import]:
    """Every import statement of a module, nested ones included (function-level imports)."""
    found: list[ir.Import] = []
    stack = list(body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ir.Import):
            found.append(stmt)
        elif isinstance(stmt, (ir.If, ir.Loop)):
            stack.extend(stmt.body + stmt.orelse)
        elif isinstance(stmt, ir.Try):
            stack.extend(stmt.body + stmt.orelse + stmt.finalbody)
            for handler in stmt.handlers:
                stack.extend(handler)
        elif isinstance(stmt, (ir.With, ir.FunctionDef, ir.ClassDef)):
            stack.extend(stmt.body)
    found.sort(key=lambda s: (s.span.line, s.span.col))
    return found
