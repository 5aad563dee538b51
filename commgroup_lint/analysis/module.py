"""Run the group dataflow over every function of a module.

Methods of a class see what any method of the class (or of a base class in the module)
stores on `self`: a group chosen in `__init__`, a flag computed in one method and read in
another, a buffer bound in one method and consumed in another. What is carried between
methods keeps only the literals that mean the same there (attributes of `self`, sizes,
module-level values), and a constructor's parameter stands for the group it will be.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.api import Api
from commgroup_lint.analysis.conditions import GLOBAL, QUANTITY, SELF
from commgroup_lint.analysis.facts import (
    SYMBOLIC, BufferFact, CallableFact, CondFact, ContextFact, Fact, FunctionFacts, GroupFact, ObjectFact,
    ParamFact, PathFact, SizeFact, TupleFact, Value,
)
from commgroup_lint.analysis.flow import Env, FunctionFlow, Scope, scoped
from commgroup_lint.analysis.names import ImportTable

ClassInfo = tuple[tuple[str, ...], frozenset[str], tuple[tuple[str, Value], ...], tuple[str, ...]]
"""(qualified bases, names of the methods it defines, what its methods store on `self` that a
subclass in another module reads: see `class_attributes`, the names annotated in its body in
order: a record's fields)."""
_SHARED_SCOPES = (QUANTITY, GLOBAL, SELF)


def analyze_module(module: ir.Module, imports: ImportTable, api: Api, display: str = "") -> list[FunctionFacts]:
    """The facts of the module's top level and of every function and method in it."""
    classes = module_classes(module, imports)
    top = FunctionFacts(imports.module, None, None)
    names: dict = {}  # module-level names' values, shared by every function of this analysis
    FunctionFlow(api, Scope(imports, None, display, False, classes, names), top).run(module.body)
    analysis = _ModuleAnalysis(api, imports, display, classes, names)
    return [top, *analysis.body(module.body, imports.module, None, {})]


def module_classes(module: ir.Module, imports: ImportTable) -> dict[str, ClassInfo]:
    """Every class of the module (nested ones too) with its bases and methods."""
    found: dict[str, ClassInfo] = {}

    def visit(body: Sequence[ir.Stmt], prefix: str) -> None:
        for cls in _definitions(body, ir.ClassDef):
            qualname = f"{prefix}.{cls.name}"
            bases = tuple(q for base in cls.bases if (q := imports.qualify(base)))
            methods = frozenset(fn.name for fn in _definitions(cls.body, ir.FunctionDef))
            found[qualname] = (bases, methods, (), cls.fields)
            visit(cls.body, qualname)

    visit(module.body, imports.module)
    return found


class _ModuleAnalysis:
    def __init__(self, api: Api, imports: ImportTable, display: str, classes: dict[str, ClassInfo],
                 names: dict) -> None:
        self.api, self.imports, self.display, self.classes, self.names = api, imports, display, classes, names
        self.stores: dict[str, Env] = {}  # class -> what its methods store on `self`

    def body(self, body: Sequence[ir.Stmt], prefix: str, cls: str | None, seed: Env,
             top_level: bool = True) -> Iterator[FunctionFacts]:
        for fn in _definitions(body, ir.FunctionDef):
            is_method = cls is not None and not _is_static(fn)
            by_name = top_level and (cls is None or _is_static_or_class_method(fn))
            facts = FunctionFacts(f"{prefix}.{fn.name}", fn, _short(cls), by_name, cls)
            shared = seed if is_method or not top_level else {}  # `self` attributes, or a closure
            flow = FunctionFlow(self.api, self.scope(cls, is_method), facts, fn.params, shared)
            flow.run(fn.body)
            yield facts
            # a nested function sees what its enclosing function chose (closures)
            closure = {k: v for k, v in flow.env.items() if all(isinstance(f, _CLOSURE) for f in v)}
            yield from self.body(fn.body, facts.qualname, None, closure, top_level=False)
        for klass in _definitions(body, ir.ClassDef):
            yield from self.klass(klass, f"{prefix}.{klass.name}", top_level)

    def imported_attributes(self, cls: str) -> list[tuple[str, Value]]:
        """What a class of another module (and its own bases) stores on `self`, as indexed."""
        found: list[tuple[str, Value]] = []
        pending, seen = [cls], set()
        while pending and len(seen) < 32:
            klass = pending.pop(0)
            info = self.api.classes.get(klass)
            if klass in seen or info is None:
                continue
            seen.add(klass)
            found += info[2]
            pending += info[0]
        return found

    def scope(self, cls: str | None, is_method: bool) -> Scope:
        return Scope(self.imports, cls, self.display, is_method, self.classes, self.names)

    def klass(self, klass: ir.ClassDef, qualname: str, top_level: bool) -> Iterator[FunctionFacts]:
        seed: Env = {}
        for base in self.classes.get(qualname, ((), frozenset(), ()))[0]:
            inherited = self.stores[base].items() if base in self.stores else self.imported_attributes(base)
            for key, value in inherited:
                seed[key] = seed.get(key, frozenset()) | value
        for fn in _definitions(klass.body, ir.FunctionDef):
            if _is_static(fn) or not _stores_on_self(fn):
                continue
            facts = FunctionFacts(f"{qualname}.{fn.name}", fn, klass.name, False, qualname)
            FunctionFlow(self.api, self.scope(qualname, True), facts, fn.params, dict(seed)).run(fn.body)
            for key, value in facts.stores.items():
                shared = shareable(value, fn)
                if shared:
                    seed[key] = seed.get(key, frozenset()) | shared
        self.stores[qualname] = seed
        yield from self.body(klass.body, qualname, qualname, seed, top_level)


def _stores_on_self(fn: ir.FunctionDef) -> bool:
    """Whether the method assigns (or grows) an attribute of its first parameter anywhere."""
    if not fn.params:
        return False
    me = fn.params[0].name
    stack: list[ir.Stmt] = list(fn.body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ir.Assign):
            if any(_is_attr_of(t, me) for t in _targets(stmt.targets)):
                return True
        elif isinstance(stmt, ir.ExprStmt) and isinstance(stmt.value, ir.Call) and isinstance(stmt.value.func, ir.Attr):
            if _is_attr_of(stmt.value.func.value, me):  # `self.groups.append(g)`
                return True
        elif isinstance(stmt, (ir.If, ir.Loop)):
            stack.extend(stmt.body + stmt.orelse)
        elif isinstance(stmt, ir.With):
            stack.extend(stmt.body)
        elif isinstance(stmt, ir.Try):
            stack.extend(stmt.body + stmt.orelse + stmt.finalbody + tuple(s for h in stmt.handlers for s in h))
    return False


def _targets(targets: Sequence[ir.Expr]) -> Iterator[ir.Expr]:
    for t in targets:
        if isinstance(t, ir.TupleExpr):
            yield from _targets(t.elts)
        else:
            yield t


def _is_attr_of(e: ir.Expr, name: str) -> bool:
    return isinstance(e, ir.Attr) and isinstance(e.value, ir.Name) and e.value.id == name


def shareable(value: Value, fn: ir.FunctionDef) -> Value:
    """What a value stored on `self` means to the class's other methods."""
    out: set[Fact] = set()
    for f in value:
        carried = _carried(f, fn)
        if carried is not None:
            out.add(carried)
    return frozenset(out)


def _carried(f: Fact, fn: ir.FunctionDef) -> Fact | None:
    if isinstance(f, GroupFact):
        return GroupFact(f.group, scoped(f.guard, _SHARED_SCOPES))
    if isinstance(f, ParamFact):  # `self.group = group` in `__init__`: the group the constructor is given
        return GroupFact(SYMBOLIC + f.name.lstrip("*"))
    if isinstance(f, CondFact):
        return CondFact(scoped(f.when_true, _SHARED_SCOPES), scoped(f.when_false, _SHARED_SCOPES))
    if isinstance(f, (BufferFact, ContextFact)):
        # the storing method's parameters are not the reader's: the group stays by its name
        return type(f)(replace(f.allocation, cond=scoped(f.allocation.cond, _SHARED_SCOPES), group_params=frozenset()))
    if isinstance(f, (SizeFact, CallableFact, ObjectFact)):
        return f
    if isinstance(f, TupleFact):
        items = tuple(frozenset(c for g in item if (c := _carried(g, fn)) is not None) for item in f.items)
        return TupleFact(items, f.depth)
    return None


_CLOSURE = (GroupFact, SizeFact, CondFact, BufferFact, ContextFact, CallableFact, PathFact)
_PORTABLE = (GroupFact, SizeFact, CondFact, ObjectFact)  # what means the same in another module


def class_attributes(functions: Sequence[FunctionFacts]) -> dict[str, tuple[tuple[str, Value], ...]]:
    """Per class, the groups, sizes, flags and objects its methods store on `self`: what a
    subclass defined in another module inherits (`self.cpu_group` set by a base's `__init__`).
    Memory stays behind: an allocation belongs to its own module's findings."""
    merged: dict[str, dict[str, set[Fact]]] = {}
    for f in functions:
        if f.class_qualname is None or f.node is None:
            continue
        for key, value in f.stores.items():
            portable = {g for g in shareable(value, f.node) if isinstance(g, _PORTABLE)}
            if portable:
                merged.setdefault(f.class_qualname, {}).setdefault(key, set()).update(portable)
    return {cls: tuple((k, frozenset(v)) for k, v in sorted(attrs.items())) for cls, attrs in merged.items()}


def _short(cls: str | None) -> str | None:
    return cls.rpartition(".")[2] if cls else None


def _decorated(fn: ir.FunctionDef, names: tuple[str, ...]) -> bool:
    return any(isinstance(d, ir.Name) and d.id in names for d in fn.decorators)


def _is_static(fn: ir.FunctionDef) -> bool:
    return _decorated(fn, ("staticmethod",))


def _is_static_or_class_method(fn: ir.FunctionDef) -> bool:
    return _decorated(fn, ("staticmethod", "classmethod"))


def _definitions(body: Sequence[ir.Stmt], kind: type) -> Iterator:
    """Definitions at this level, including those under `if`/`try`/`except` (conditional definitions,
    such as the fallback defined when an import fails)."""
    for stmt in body:
        if isinstance(stmt, kind):
            yield stmt
        elif isinstance(stmt, ir.If):
            yield from _definitions(stmt.body + stmt.orelse, kind)
        elif isinstance(stmt, ir.Try):
            yield from _definitions(stmt.body + sum(stmt.handlers, ()) + stmt.orelse + stmt.finalbody, kind)
