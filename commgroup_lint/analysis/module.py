"""Run the group dataflow over every function of a module."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.api import Api
from commgroup_lint.analysis.facts import CondFact, FunctionFacts, GroupFact, SizeFact
from commgroup_lint.analysis.flow import Env, FunctionFlow
from commgroup_lint.analysis.names import ImportTable


def analyze_module(module: ir.Module, imports: ImportTable, api: Api) -> list[FunctionFacts]:
    """The facts of the module's top level and of every function and method in it."""
    top = FunctionFacts(imports.module, None, None)
    FunctionFlow(api, imports, top).run(module.body)
    return [top, *_analyze_body(module.body, imports.module, None, {}, imports, api)]


def _analyze_body(
    body: Sequence[ir.Stmt], prefix: str, class_name: str | None, seed: Env, imports: ImportTable, api: Api,
    top_level: bool = True,
) -> Iterator[FunctionFacts]:
    for fn in _definitions(body, ir.FunctionDef):
        by_name = top_level and (class_name is None or _is_static_or_class_method(fn))
        facts = FunctionFacts(f"{prefix}.{fn.name}", fn, class_name, by_name)
        flow = FunctionFlow(api, imports, facts, fn.params, seed)
        flow.run(fn.body)
        yield facts
        # a nested function sees the groups, sizes and flags its enclosing function chose (closures)
        closure = {k: v for k, v in flow.env.items() if all(isinstance(f, _SHAREABLE) for f in v)}
        yield from _analyze_body(fn.body, facts.qualname, None, closure, imports, api, top_level=False)
    for cls in _definitions(body, ir.ClassDef):
        yield from _analyze_class(cls, f"{prefix}.{cls.name}", imports, api, top_level)


def _is_static_or_class_method(fn: ir.FunctionDef) -> bool:
    return any(isinstance(d, ir.Name) and d.id in ("staticmethod", "classmethod") for d in fn.decorators)


def _analyze_class(
    cls: ir.ClassDef, qualname: str, imports: ImportTable, api: Api, top_level: bool
) -> Iterator[FunctionFacts]:
    """Methods see the groups and conditions that any method stores on `self` (a group chosen
    in `__init__`, a flag computed in one method and read in another)."""
    seed: Env = {}
    for fn in _definitions(cls.body, ir.FunctionDef):
        flow = FunctionFlow(api, imports, FunctionFacts(f"{qualname}.{fn.name}", fn, cls.name), fn.params)
        flow.run(fn.body)
        for key, value in flow.env.items():
            if key.startswith("self.") and all(isinstance(f, _SHAREABLE) for f in value):
                seed[key] = seed[key] | value if key in seed else value
    yield from _analyze_body(cls.body, qualname, cls.name, seed, imports, api, top_level)


_SHAREABLE = (GroupFact, SizeFact, CondFact)


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
