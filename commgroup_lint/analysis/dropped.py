"""Collectives that drop the group their function was given (CGL007).

A function is *given* a group when a collective in it runs on one of its parameters (or on
what was derived from one: `g = group`, `group.device_group`) or, in a method, on an attribute
of its own object (`self.tp_group`: the group the object was built for). A collective of the
same function that runs on none of these, but on the default group (its group argument omitted
or None) or on a fixed one (a getter, a helper that hides its group), drops the group on the
path that reaches it. When a collective of the same name runs on the given group on a path that
excludes this one, the two are a fast path and its fallback on different groups.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.api import WORLD, Api
from commgroup_lint.analysis.conditions import contradicts, render
from commgroup_lint.analysis.facts import (
    FunctionFacts,
    GroupArguments,
    GroupFact,
    GroupUse,
    ParamFact,
    display_group,
    is_symbolic,
)
from commgroup_lint.analysis.walk import Branch, calls_in, exclusive, names_in, statement_paths, walk
from commgroup_lint.model import Confidence

GROUP_WORDS = frozenset({"group", "pg", "process_group"})
GROUP_PARAMETER = re.compile(r"(?:^|_)(?:" + "|".join(sorted(GROUP_WORDS)) + ")$")
"""Parameter names that say they hold a group (`group`, `tp_group`, `process_group`, `pg`)."""


@dataclass(frozen=True)
class Dropped:
    """A collective that runs on another group than the one its function was given."""

    use: GroupUse
    held: str  # the given group, as the function spells it (`group`, `self.tp_group`)
    instead: str  # what the collective runs on instead, in words
    partner: GroupUse | None  # a collective of the same name on the given group, on an exclusive path
    held_by: GroupUse | None  # the first collective that does run on the given group (None: it is never used)
    confidence: Confidence
    path: tuple[Branch, ...] = ()  # the branches of the body that lead to it

    @property
    def advice(self) -> str:
        if self.use.param is not None and self.use.how != "fixed":
            return f"pass `{self.use.param}={self.held}`"
        return f"run it on `{self.held}`"


def dropped_groups(fn: FunctionFacts) -> Iterator[Dropped]:
    """Every collective of `fn` that drops a group `fn` was given, at most one per call."""
    if fn.node is None:
        return
    params = _parameters(fn)
    self_name = fn.node.params[0].name if fn.class_name is not None and fn.node.params else None
    held = [(u, name) for u in fn.group_uses if (name := _held_name(u, params, self_name)) is not None]
    held_groups = {f.group for u, _ in held for f in u.groups if isinstance(f, GroupFact)}
    paths = _call_paths(fn.node)
    guards = _guards(fn.node)
    seen: set[int] = set()
    held_calls = {id(u.call) for u, _ in held}
    for use in fn.group_uses:
        if id(use.call) in seen | held_calls:  # a helper given the group runs its default only when not given it
            continue
        instead = _instead(use)
        if instead is None or _known(use) <= held_groups and _known(use):
            continue  # runs on what a given group is known to be (`self.all_reduce(x)` on the object's group)
        if held:
            partner = next(((u, n) for u, n in held if u.collective == use.collective and _apart(use, u, paths)), None)
            first, name = partner or held[0]
            if _tests_group(guards.get(id(use.call), ()), {n for _, n in held}):
                continue  # chosen by a test of the given group itself (`x if self.group is not None else ...`)
            exclusive = partner is not None
            base = _confidence(use, exclusive)
            if partner is not None and not contradicts(use.cond | partner[0].cond) and base is Confidence.HIGH:
                base = Confidence.MEDIUM  # apart by a test the conditions do not keep: it may be a flag
            seen.add(id(use.call))
            yield Dropped(use, name, instead, first if exclusive else None, first, base, paths.get(id(use.call), ()))
        else:
            unread = _unread_group_parameters(fn, params)
            if unread and use.how == "default":
                seen.add(id(use.call))
                yield Dropped(use, unread[0], instead, None, None, Confidence.MEDIUM, paths.get(id(use.call), ()))


def group_parameters(fn: FunctionFacts) -> set[str]:
    """The parameters of `fn` that hold a group: those some collective of it runs on, and those
    named for a group (a builder hands its group on without running a collective itself)."""
    if fn.node is None:
        return set()
    params = _parameters(fn)
    given = {params[f.index] for u in fn.group_uses for f in u.groups if isinstance(f, ParamFact) and f.index in params}
    constant = {p.name.lstrip("*") for p in fn.node.params if isinstance(p.default, ir.Const) and p.default.value is not None}
    return given | {name for name in params.values() if GROUP_PARAMETER.search(name) and name not in constant}


def _call_paths(fn: ir.FunctionDef) -> dict[int, tuple[Branch, ...]]:
    """The branches that lead to each call of the function's own body, by id."""
    return {id(call): path for stmt, path in statement_paths(fn.body) for call in calls_in(stmt)}


def _guards(fn: ir.FunctionDef) -> dict[int, list[ir.Expr]]:
    """The tests that decide whether each call runs: of the `if`s around it, and of the
    conditional expressions it sits in (`a if c else b`)."""
    out: dict[int, list[ir.Expr]] = {}
    for stmt, path in statement_paths(fn.body):
        tests = [node.test for node, _ in path]
        for call in calls_in(stmt):
            out[id(call)] = list(tests)
        for e in walk(stmt):
            if isinstance(e, ir.IfExpr):
                for call in calls_in((e.body, e.orelse)):
                    out[id(call)].append(e.test)
    return out


def _tests_group(tests: Iterable[ir.Expr], held: set[str]) -> bool:
    return any(render(e) in held for e in walk(tuple(tests)) if isinstance(e, (ir.Name, ir.Attr)))


def _apart(a: GroupUse, b: GroupUse, paths: dict[int, tuple[Branch, ...]]) -> bool:
    """Whether two collectives run on paths that exclude each other: by their conditions, or,
    where a test is one the conditions do not keep (`if x.numel() * 2 < self.limit:`), by the branches
    of the body that lead to them."""
    if contradicts(a.cond | b.cond):
        return True
    first, second = paths.get(id(a.call)), paths.get(id(b.call))
    return first is not None and second is not None and exclusive(first, second)


def _confidence(use: GroupUse, exclusive: bool) -> Confidence:
    """The default group on the other path of the same collective is the surest sign. Beside
    collectives on the given group, an engine group's default (a TP helper called without the
    object's own TP group) is likely a slip, a world-wide collective may be deliberate (every
    rank's count gathered, then indexed by the group's ranks), and so may a fixed group."""
    if use.how == "default":
        if exclusive:
            return Confidence.HIGH
        return Confidence.LOW if _known(use) <= {WORLD} else Confidence.MEDIUM
    return Confidence.MEDIUM if exclusive else Confidence.LOW


def _parameters(fn: FunctionFacts) -> dict[int, str]:
    assert fn.node is not None
    return {i: p.name.lstrip("*") for i, p in enumerate(fn.node.params)}


def _held_name(use: GroupUse, params: dict[int, str], self_name: str | None) -> str | None:
    """The given group this collective runs on, as the function spells it; None when it runs on
    no group the function was given."""
    for f in sorted((f for f in use.groups if isinstance(f, ParamFact)), key=lambda f: f.index):
        return params.get(f.index, f.name.lstrip("*"))
    if use.how != "given" or use.source is None:
        return None
    root = _root(use.source)
    if root is not None and (root == self_name or root in params.values()):
        return render(use.source) or root
    return None


def _root(expr: ir.Expr) -> str | None:
    while isinstance(expr, (ir.Attr, ir.Subscript)):
        expr = expr.value
    return expr.id if isinstance(expr, ir.Name) else None


def _known(use: GroupUse) -> set[str]:
    return {f.group for f in use.groups if isinstance(f, GroupFact)}


def _instead(use: GroupUse) -> str | None:
    """What a collective that receives none of the given groups runs on, in words: the default
    group, or fixed groups; None for a group the analysis knows only by an expression (another
    object's group, which may be the given one), and for an omitted group whose callee declares
    no default: such a call runs no collective (TE's `general_gemm` without `ub` is a plain GEMM)."""
    groups = sorted(display_group(f.group) for f in use.groups if isinstance(f, GroupFact) and not is_symbolic(f.group))
    if use.how == "default":
        return f"the default group ({' or '.join(groups)})" if groups else None
    if groups and all(isinstance(f, GroupFact) and not is_symbolic(f.group) for f in use.groups):
        return f"the fixed group {' or '.join(groups)}"
    return None


def _unread_group_parameters(fn: FunctionFacts, params: dict[int, str]) -> list[str]:
    """Parameters named for a group (`group`, `tp_group`) that the body never reads: a wrapper
    that takes a group and ignores it."""
    assert fn.node is not None
    named = [name for name in params.values() if GROUP_PARAMETER.search(name)]
    if not named:
        return []
    read = set(names_in(fn.node.body))
    return [name for name in named if name not in read]


_GROUP_KEYWORD_WORDS = frozenset({"group", "pg", "comm", "communicator"})
"""A keyword takes a group (or a part of one) only when one of its words says so."""
_PART_WORDS = _GROUP_KEYWORD_WORDS | {"process", "cpu", "device", "name", "handle", "backend", "pynccl", "nccl", "gloo"}
"""Words of a keyword that say which part of a group it takes (`cpu_group`, `device_group`,
`group_name`), not which group: keywords left with the same role must get one group."""


@dataclass(frozen=True)
class Disagreement:
    """Two keywords of one call that take parts of one group, given different groups."""

    arguments: GroupArguments
    first: tuple[str, frozenset[str]]  # (keyword, the groups it is given)
    second: tuple[str, frozenset[str]]
    confidence: Confidence


def disagreeing_arguments(fn: FunctionFacts, api: Api) -> Iterator[Disagreement]:
    """The calls of `fn` whose keywords for one role (`cpu_group=`, `device_group=`) are given
    different groups; at most one per call."""
    for found in fn.group_arguments:
        by_role: dict[str, list[tuple[str, frozenset[str]]]] = {}
        for keyword, value in found.arguments:
            if _GROUP_KEYWORD_WORDS.isdisjoint(keyword.split("_")):
                continue  # `device=`, `topk=`: not a group's keyword, whatever it holds
            groups = frozenset(f.group for f in value if isinstance(f, GroupFact))
            if groups and len(groups) == len(value):
                by_role.setdefault(_role(keyword), []).append((keyword, groups))
        pair = next(((a, b) for given in by_role.values() for i, a in enumerate(given) for b in given[i + 1:]
                     if not a[1] & b[1] and not any(api.alias(x, y) for x in a[1] for y in b[1])), None)
        if pair is not None:
            symbolic = any(is_symbolic(g) for g in pair[0][1] | pair[1][1])
            yield Disagreement(found, pair[0], pair[1], Confidence.LOW if symbolic else Confidence.HIGH)


def _role(keyword: str) -> str:
    return "_".join(word for word in keyword.split("_") if word and word not in _PART_WORDS)
