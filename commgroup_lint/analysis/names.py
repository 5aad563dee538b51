"""Qualified names: resolve what a name or attribute chain refers to through imports."""

from __future__ import annotations

from collections.abc import Callable, Iterable
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


StarNames = tuple[tuple[str, str], ...]  # what `from M import *` binds: (local name, qualified name)


class ImportTable:
    """Maps local names to the qualified names they were imported as.

    A `from M import *` binds M's public names (see `stars.StarExports`): `star_names(M)`
    answers them (None: M is not scanned). They are asked when a name is looked up, not
    when the table is built, so that the answer is recorded with the analysis that used it
    and a cached result is dropped when M changes. An explicit import, or a definition of the
    module's own (`own`), wins over a star-imported name."""

    def __init__(self, module: str, is_package: bool, imports: Iterable[ir.Import],
                 renames: Iterable[tuple[str, ir.Expr]] = (), own: Iterable[str] = (),
                 star_names: Callable[[str], StarNames | None] | None = None) -> None:
        self.module = module
        self._package = module if is_package else module.rpartition(".")[0]
        self._aliases: dict[str, str] = {}
        self._alternatives: dict[str, list[str]] = {}  # every module a name is imported from (try/except fallbacks)
        self._own = frozenset(own)
        self._star_names = star_names
        self.stars: list[str] = []  # the modules star-imported, in order (the last one's name wins)
        self._converted: dict[str, tuple[StarNames, dict[str, str]]] = {}
        for stmt in imports:
            for name in stmt.names:
                if name.name == "*":
                    star = self.qualify_import(ir.ImportName(name.module, None, "", name.level))
                    if star not in self.stars:
                        self.stars.append(star)
                    continue
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

    def imports(self, name: str) -> bool:
        """Whether an import of the module binds `name` (else it is the module's own, or a builtin)."""
        return name in self._aliases or self._starred(name) is not None

    def _starred(self, name: str) -> str | None:
        """What a star import binds `name` to, if one does and nothing of the module's own does."""
        if not self.stars or self._star_names is None or name in self._own or name in self._aliases:
            return None
        for module in reversed(self.stars):
            found = self._star_table(module).get(name)
            if found is not None:
                return found
        return None

    def _star_table(self, module: str) -> dict[str, str]:
        names = self._star_names(module) if self._star_names is not None else None  # asked every time: recorded
        if names is None:
            return {}
        known = self._converted.get(module)
        if known is None or known[0] is not names:
            known = self._converted[module] = (names, dict(names))
        return known[1]

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
            found = self._aliases.get(expr.id) or self._starred(expr.id)
            return found or (f"{self.module}.{expr.id}" if self.module else expr.id)
        if isinstance(expr, ir.Attr):
            base = self.qualify(expr.value)
            return f"{base}.{expr.attr}" if base else None
        return None

    def qualify_all(self, name: str) -> list[str]:
        """Every qualified name `name` may stand for: `import megatron.core.nccl_allocator as
        nccl_allocator` in a `try`, and `import apex.contrib.nccl_allocator as nccl_allocator` in
        its `except`, are both possible."""
        starred = None if name in self._alternatives else self._starred(name)
        return self._alternatives.get(name) or ([starred] if starred else [f"{self.module}.{name}" if self.module else name])

    def aliases(self) -> dict[str, str]:
        """Local name -> qualified name, for every explicit import of the module (not star imports)."""
        return dict(self._aliases)

    def local_name_for(self, qualified: str) -> str | None:
        """The local name bound to `qualified`, if the module imports it (under any alias, or
        through a star import)."""
        for local, target in self._aliases.items():
            if target == qualified:
                return local
        for module in reversed(self.stars):
            for local, target in self._star_table(module).items():
                if target == qualified and self._starred(local) == qualified:
                    return local
        return None


def top_level(body: Iterable[ir.Stmt]) -> tuple[list[ir.Import], list[str], tuple[str, ...] | None]:
    """What a module's top level binds: its imports, the names it defines or assigns (in
    conditional and `try` blocks too, not in functions or classes), and its `__all__` when
    every assignment of it is a literal list or tuple of strings (else None)."""
    imports: list[ir.Import] = []
    defined: list[str] = []
    exported: tuple[str, ...] | None = None
    literal = True
    stack = list(reversed(list(body)))
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ir.Import):
            imports.append(stmt)
        elif isinstance(stmt, (ir.FunctionDef, ir.ClassDef)):
            defined.append(stmt.name)
        elif isinstance(stmt, ir.Assign):
            names = [n for t in stmt.targets for n in _target_names(t)]
            defined += names
            if "__all__" in names:
                strings = _strings(stmt.value) if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ir.Name) else None
                literal = literal and strings is not None
                exported = strings
        elif _changes_all(stmt):  # `__all__ += [...]`, `__all__.extend(...)`: not a literal any more
            literal = False
        elif isinstance(stmt, (ir.If, ir.Loop)):
            stack += reversed(stmt.body + stmt.orelse)
        elif isinstance(stmt, ir.Try):
            stack += reversed(stmt.body + tuple(s for h in stmt.handlers for s in h) + stmt.orelse + stmt.finalbody)
        elif isinstance(stmt, ir.With):
            stack += reversed(stmt.body)
    return imports, defined, exported if literal else None


def _changes_all(stmt: ir.Stmt) -> bool:
    if isinstance(stmt, ir.OtherStmt):
        return bool(stmt.exprs) and isinstance(stmt.exprs[0], ir.Name) and stmt.exprs[0].id == "__all__"
    if isinstance(stmt, ir.ExprStmt) and isinstance(stmt.value, ir.Call) and isinstance(stmt.value.func, ir.Attr):
        owner = stmt.value.func.value
        return isinstance(owner, ir.Name) and owner.id == "__all__"
    return False


def _target_names(target: ir.Expr) -> list[str]:
    if isinstance(target, ir.Name):
        return [target.id]
    if isinstance(target, ir.TupleExpr):
        return [n for e in target.elts for n in _target_names(e.value if isinstance(e, ir.Starred) else e)]
    return []


def _strings(value: ir.Expr) -> tuple[str, ...] | None:
    if isinstance(value, ir.TupleExpr) and all(isinstance(e, ir.Const) and isinstance(e.value, str) for e in value.elts):
        return tuple(str(e.value) for e in value.elts if isinstance(e, ir.Const))
    return None


def collect_renames(body: Iterable[ir.Stmt]) -> list[tuple[str, ir.Expr]]:
    """The module's top-level `alias = name` (or `= module.name`) assignments of a name bound
    nowhere else at the top level: another name for the same object, as an import is."""
    bound: dict[str, int] = {}
    renames: list[tuple[str, ir.Expr]] = []
    for stmt in body:
        if isinstance(stmt, ir.Assign):
            for target in stmt.targets:
                if isinstance(target, ir.Name):
                    bound[target.id] = bound.get(target.id, 0) + 1
                    if len(stmt.targets) == 1 and isinstance(stmt.value, (ir.Name, ir.Attr)) and _dotted(stmt.value):
                        renames.append((target.id, stmt.value))
        elif isinstance(stmt, (ir.FunctionDef, ir.ClassDef)):
            bound[stmt.name] = bound.get(stmt.name, 0) + 1
    return [(name, value) for name, value in renames if bound[name] == 1]


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
