"""Configuration facts read from the engine's own checks, so that a new release's invariants
need no one to type them (the profile names where to look: `[engine_checks]`).

In a validation function, `assert A` under the enclosing tests P says P implies A, and
`if T: raise ...` under P says P and T never hold together; an early `return` adds its test's
negation to what follows. In a group initialiser, one group global assigned to another
(`_ATTN_CP = _TP`) under one relation of world sizes says the two groups are one object under
it. Only tests of world sizes are read (a flag of the validated object has no name in the
checked code's conditions): a test that is not one leaves the facts under it unstated. The
engine's files are parsed, never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

from commgroup_lint.config_facts import EngineChecks, Fact
from commgroup_lint.segments import Segments

_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_NEGATED = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
Atoms = tuple[str, ...] | None  # None: a test that is not read


def engine_sources(checks: EngineChecks, paths: Iterable[Path]) -> list[tuple[str, Path]]:
    """The files among `paths` that hold a module the checks name, with that module's name."""
    wanted = {_module_path(name) for name in (*checks.validation, *checks.initialisers)}
    found = []
    for path in paths:
        posix = path.as_posix()
        for module in wanted:
            for candidate in module:
                if posix.endswith("/" + candidate) or posix == candidate:
                    found.append((candidate[:-3].replace("/", "."), path))
    return found


def _module_path(name: str) -> tuple[str, ...]:
    """The files that may hold `pkg.mod.fn` or `pkg.mod.Cls.method`: `pkg/mod.py`, `pkg/mod/Cls.py`..."""
    parts = name.split(".")
    return tuple("/".join(parts[:n]) + ".py" for n in range(len(parts) - 1, 0, -1))


def derive(checks: EngineChecks, sources: Iterable[tuple[str, Path]], quantities: frozenset[str]) -> tuple[Fact, ...]:
    names = dict(checks.names)
    sizes = quantities | {v for v in names.values() if v in quantities}
    out: list[Fact] = []
    for module, path in sources:
        try:
            text = path.read_text(encoding="utf-8")
            tree = ast.parse(text)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue  # the check of the file itself reports what cannot be read
        segments = Segments(text)
        for kind, qualname in [*(("validation", q) for q in checks.validation),
                               *(("initialiser", q) for q in checks.initialisers)]:
            if not qualname.startswith(module + "."):
                continue
            for symbol, node in _functions(tree, qualname[len(module) + 1:].split(".")):
                reader = _Reader(names, sizes, kind, f"{module.replace('.', '/')}.py:{symbol}", segments)
                out += reader.walk(node.body, ())
    return tuple({f.name: f for f in out}.values())


def _functions(tree: ast.AST, names: list[str], prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """The functions `names` designates: `fn`, `Cls.method`, or `*` for every function and
    every method of a class there (`Cls.*`: every method)."""
    head, rest = names[0], names[1:]
    for node in ast.iter_child_nodes(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if head not in ("*", node.name):
            continue
        symbol = f"{prefix}{node.name}"
        if isinstance(node, ast.ClassDef) and (rest or head == "*"):
            yield from _functions(node, rest or ["*"], symbol + ".")
        elif not isinstance(node, ast.ClassDef) and not rest:
            yield symbol, node


class _Reader:
    def __init__(self, names: dict[str, str], sizes: frozenset[str], kind: str, source: str, segments: Segments) -> None:
        self.names, self.sizes, self.kind, self.source, self.segments = names, sizes, kind, source, segments

    def walk(self, body: list[ast.stmt], path: tuple[Atoms, ...]) -> list[Fact]:
        out: list[Fact] = []
        for stmt in body:
            out += self.stmt(stmt, path)
            if isinstance(stmt, ast.If) and _leaves(stmt.body) == "return":
                path = (*path, self.negated(stmt.test))  # what follows runs where the test failed
        return out

    def stmt(self, stmt: ast.stmt, path: tuple[Atoms, ...]) -> list[Fact]:
        if isinstance(stmt, ast.If):
            test = self.atoms(stmt.test)
            out = self.walk(stmt.body, (*path, test)) + self.walk(stmt.orelse, (*path, self.negated(stmt.test)))
            if self.kind == "validation" and _leaves(stmt.body) == "raise":
                out += self.fact(stmt, "never", (*path, test), ())
            return out
        if isinstance(stmt, ast.Assert) and self.kind == "validation":
            return self.fact(stmt, "implies", path, self.atoms(stmt.test))
        if isinstance(stmt, (ast.With, ast.AsyncWith, ast.Try)):
            return self.walk(stmt.body, path)
        if isinstance(stmt, ast.Assign) and self.kind == "initialiser" and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
            if isinstance(target, ast.Name) and isinstance(value, ast.Name):
                a, b = self.names.get(target.id), self.names.get(value.id)
                if a and b and a not in self.sizes and b not in self.sizes:
                    return self.fact(stmt, "same_group", path, (), (a, b))
        return []

    def fact(self, node: ast.stmt, kind: str, path: tuple[Atoms, ...], then: Atoms,
             groups: tuple[str, ...] = ()) -> list[Fact]:
        if then is None or any(p is None for p in path):
            return []
        when = tuple(a for part in path for a in part or ())
        if kind == "same_group" and len(when) != 1:
            return []
        if kind == "implies" and not then:
            return []
        evidence = (self.segments.of(node) or "").splitlines()[0].strip()
        return [Fact(f"{self.source}:{node.lineno}", kind, when, then, groups, self.source, evidence, derived=True)]

    def atoms(self, test: ast.expr) -> Atoms:
        """The test as atoms that all hold when it does, or None when it is not a test of sizes."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            parts = [self.atoms(v) for v in test.values]
            return None if any(p is None for p in parts) else tuple(a for p in parts for a in p or ())
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _OPS:
            left, right = self.operand(test.left), self.operand(test.comparators[0])
            if left and right and not (left.isdigit() and right.isdigit()):
                return (f"{left} {_OPS[type(test.ops[0])]} {right}",)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.negated(test.operand)
        return None

    def negated(self, test: ast.expr) -> Atoms:
        found = self.atoms(test)
        if found is None or len(found) != 1:
            return None  # `not (a and b)` is no conjunction of atoms
        left, op, right = found[0].split(" ")
        return (f"{left} {_NEGATED[op]} {right}",)

    def operand(self, e: ast.expr) -> str | None:
        if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
            return str(e.value)
        name = e.id if isinstance(e, ast.Name) else e.attr if isinstance(e, ast.Attribute) else None
        if name is None:
            return None
        size = self.names.get(name, name)
        return size if size in self.sizes else None


def _leaves(body: list[ast.stmt]) -> str | None:
    """How a block ends: `raise`, `return`, or None when it goes on."""
    last = body[-1] if body else None
    return "raise" if isinstance(last, ast.Raise) else "return" if isinstance(last, ast.Return) else None


def derived(checks: EngineChecks, paths: Iterable[Path], quantities: frozenset[str]) -> Iterator[Fact]:
    """The facts the engine's checks state, in the files among `paths`."""
    yield from derive(checks, engine_sources(checks, paths), quantities)
