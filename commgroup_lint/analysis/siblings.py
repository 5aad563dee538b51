"""Sibling call sites and the convention each one follows to choose its group.

Siblings are the other calls of the same allocator in the same class (or, failing that,
module) whose buffer goes to the same kind of consumer: every site filled by `dp_scatter`
is a sibling of every other, never of a site feeding an attention-TP all-gather. The
autofix copies their convention; CGL004 reports the site that breaks it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.api import Api
from commgroup_lint.analysis.conditions import display_literal
from commgroup_lint.analysis.facts import Allocation, FunctionFacts
from commgroup_lint.analysis.flow import FunctionFlow, Scope, known_groups
from commgroup_lint.analysis.names import ImportTable


@dataclass(frozen=True)
class Convention:
    """How one call site chooses its group."""

    kind: str  # "selection" (a variable chosen by a condition) or "fixed" (one group, spelled out)
    key: str  # sites with equal keys follow the same convention
    argument: ir.Expr  # the group argument as written at the site
    keyword: str | None  # the keyword it is passed by, if any
    statement: ir.Stmt | None = None  # for a selection: the `if`/`else` (or conditional assignment)
    variable: str | None = None

    def describe(self) -> str:
        return "a group chosen by a world-size condition" if self.kind == "selection" else f"the fixed group {self.key}"


@dataclass(frozen=True)
class Site:
    allocation: Allocation
    function: FunctionFacts


def consumer_kind(site: Site) -> str | None:
    """What the buffer is for: filled by a local copy (`scatter`), or the collectives it reaches."""
    if any(dst.call is site.allocation.call for dst, _ in site.function.scatter_pairs):
        return "scatter"
    names = sorted({c.collective for c in site.function.consumptions if c.allocation.call is site.allocation.call})
    return ",".join(names) or None


def sites(functions: Sequence[FunctionFacts]) -> Iterator[Site]:
    for fn in functions:
        for allocation in fn.allocations:
            yield Site(allocation, fn)


class Siblings:
    """A file's call sites that pass their group, by callee and consumer kind, grouped once:
    each finding's siblings are a lookup, not a scan of every site of the file."""

    def __init__(self, functions: Sequence[FunctionFacts]) -> None:
        self._by_key: dict[tuple[str, str], list[Site]] = {}
        self._members: set[int] = set()  # the calls of those sites, by id
        for s in sites(functions):
            kind = consumer_kind(s) if s.allocation.missing_param is None else None
            if kind is not None:
                self._by_key.setdefault((s.allocation.short_name, kind), []).append(s)
                self._members.add(id(s.allocation.call))

    def key(self, target: Site) -> tuple[str, str, str | None, int | None] | None:
        """What decides the target's siblings (None: it has none): its callee, its consumer
        kind, its class, and itself where it is one of the sites (it is not its own sibling)."""
        kind = consumer_kind(target)
        if kind is None:
            return None
        own = id(target.allocation.call) if id(target.allocation.call) in self._members else None
        return target.allocation.short_name, kind, target.allocation.class_name, own

    def of(self, target: Site) -> list[Site]:
        """The sites calling the same callee for the same kind of consumer, in the target's class
        when any of them is there."""
        kind = consumer_kind(target)
        if kind is None:
            return []
        same = [s for s in self._by_key.get((target.allocation.short_name, kind), ())
                if s.allocation.call is not target.allocation.call]
        in_class = [s for s in same if target.allocation.class_name and s.allocation.class_name == target.allocation.class_name]
        return in_class or same


def group_argument(allocation: Allocation, api: Api) -> tuple[ir.Expr, str | None] | None:
    """The expression passed as the group at an allocation site, and its keyword if any."""
    where = group_parameter(allocation, api)
    if where is None:
        return None
    found = allocation.call.find_argument(where.param, where.index)
    if found is None:
        return None
    arg = allocation.call.args[found]
    return arg.value, arg.keyword


def group_parameter(allocation: Allocation, api: Api):  # noqa: ANN201 - a behaviour.ArgRef
    """Where the API bound at the allocation takes its group (None when it takes none)."""
    behaviour = api.call(allocation.name)
    if behaviour is None:
        return None
    found = behaviour.allocator() or behaviour.context()
    if found is None and behaviour.registers:
        return behaviour.registers[0].binding.param
    return found.binding.param if found is not None else None


def convention(site: Site, api: Api, imports: ImportTable) -> Convention | None:
    found = group_argument(site.allocation, api)
    if found is None:
        return None
    argument, keyword = found
    flow = FunctionFlow(api, Scope(imports), FunctionFacts("<convention>", None, None))
    if isinstance(argument, ir.Name) and site.function.node is not None:
        chooser = _last_binding(site.function.node.body, argument.id, site.allocation.call.span.line)
        if chooser is not None:
            key = _selection_key(chooser, argument.id, flow)
            if key is not None:
                return Convention("selection", key, argument, keyword, chooser, argument.id)
    groups = known_groups(flow.eval(argument))
    if groups and len(groups) == 1:
        return Convention("fixed", next(iter(groups)), argument, keyword)
    return None


def selection_in_scope(site: Site, variable: str, api: Api, imports: ImportTable) -> str | None:
    """The key of the selection that binds `variable` before the site in its own function, if any."""
    if site.function.node is None:
        return None
    chooser = _last_binding(site.function.node.body, variable, site.allocation.call.span.line)
    flow = FunctionFlow(api, Scope(imports), FunctionFacts("<convention>", None, None))
    return _selection_key(chooser, variable, flow) if chooser is not None else None


def _selection_key(stmt: ir.Stmt, variable: str, flow: FunctionFlow) -> str | None:
    """`relation -> group | group` for an if/else (or conditional expression) choosing `variable`."""
    if isinstance(stmt, ir.If):
        test, branches = stmt.test, (_assigned(stmt.body, variable), _assigned(stmt.orelse, variable))
    elif isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.IfExpr):
        test, branches = stmt.value.test, (stmt.value.body, stmt.value.orelse)
    else:
        return None
    if None in branches:
        return None
    when_true, _ = flow.literals(test)
    groups = [known_groups(flow.eval(b)) for b in branches if b is not None]
    if not when_true or None in groups:
        return None
    relation = " and ".join(sorted(display_literal(lit) for lit in when_true))
    return f"{relation} -> {'/'.join(sorted(groups[0]))} | {'/'.join(sorted(groups[1]))}"  # type: ignore[arg-type]


def _assigned(body: Sequence[ir.Stmt], variable: str) -> ir.Expr | None:
    for stmt in body:
        if isinstance(stmt, ir.Assign) and any(isinstance(t, ir.Name) and t.id == variable for t in stmt.targets):
            return stmt.value
    return None


def _last_binding(body: Sequence[ir.Stmt], variable: str, before_line: int) -> ir.Stmt | None:
    """The last statement before `before_line` that binds `variable` (searching nested blocks)."""
    found: ir.Stmt | None = None
    for stmt in body:
        if stmt.span.line >= before_line:
            break
        if isinstance(stmt, ir.Assign) and any(isinstance(t, ir.Name) and t.id == variable for t in stmt.targets):
            found = stmt
        elif isinstance(stmt, ir.If):
            if _assigned(stmt.body, variable) is not None and _assigned(stmt.orelse, variable) is not None:
                found = stmt
            else:
                found = _last_binding(stmt.body + stmt.orelse, variable, before_line) or found
        elif isinstance(stmt, (ir.With, ir.Loop, ir.Try)):
            nested = stmt.body if not isinstance(stmt, ir.Try) else stmt.body + stmt.orelse
            found = _last_binding(nested, variable, before_line) or found
    return found
