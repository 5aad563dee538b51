"""Builders that drop their group on one branch (CGL007).

A function given a group that returns an object a class builds, on several branches (one per
backend, say), hands the group itself to the class on some branches and not on another: the object
it returns there is built for the default group (often the whole world), whatever the caller
asked for. Returns under a test of the group itself (`if group is None:`) are left alone: the
branch is chosen because of the group.

Read from the function's IR; each `return` is its own path, and the path is the branches
(`if` tests, taken or not) that lead to it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.caches import derived_names
from commgroup_lint.analysis.walk import Branch, describe_path, names_in, statement_paths


@dataclass(frozen=True)
class DroppedBuild:
    """A returned call that receives nothing of the group other returned calls receive."""

    call: ir.Call
    group: str
    path: tuple[Branch, ...]
    kept: tuple[ir.Call, ...]  # the returned calls that do receive the group

    @property
    def condition(self) -> str | None:
        """The innermost test the path takes as true (else the last one it passes): what selects
        this builder (`actual_backend == 'mnnvl'`, not the `raise` it went past)."""
        return describe_path(self.path)


def dropped_builds(fn: ir.FunctionDef, groups: set[str]) -> Iterator[DroppedBuild]:
    """The returned calls of `fn` that do not receive any of `groups` (its group parameters)
    while another returned call does."""
    if not groups:
        return
    derived = derived_names(fn.body, groups)
    returns = [(stmt.value, path) for stmt, path in statement_paths(fn.body)
               if isinstance(stmt, ir.Return) and isinstance(stmt.value, ir.Call) and _constructs(stmt.value)]
    for group in sorted(groups):
        names = derived[group]
        kept = tuple(call for call, _ in returns if _passes_whole(call, _aliases(fn.body, group)))
        if not kept:
            continue
        for call, path in returns:
            if _receives(call, names) or any(names & set(names_in(node.test)) for node, _ in path):
                continue
            yield DroppedBuild(call, group, path, kept)


def _receives(call: ir.Call, names: set[str]) -> bool:
    """Whether the call is given the group, or something made from it (`Backend(group)`)."""
    return any(names & set(names_in(a.value)) for a in call.args)


def _passes_whole(call: ir.Call, names: set[str]) -> bool:
    """Whether the call is given the group itself (or a name holding it), not only something
    computed from it (its size, a handle a collective on it returned)."""
    return any(isinstance(a.value, ir.Name) and a.value.id in names for a in call.args)


def _aliases(body: tuple[ir.Stmt, ...], group: str) -> set[str]:
    """The names that hold the group itself: `g = group`, `g = group or WORLD`, `pg = group.device_group`."""
    out = {group}
    for stmt, _ in statement_paths(body):
        if isinstance(stmt, ir.Assign) and _is_group(stmt.value, out):
            out.update(t.id for t in stmt.targets if isinstance(t, ir.Name))
    return out


def _is_group(expr: ir.Expr, names: set[str]) -> bool:
    if isinstance(expr, ir.Name):
        return expr.id in names
    if isinstance(expr, ir.Attr):
        return _is_group(expr.value, names)
    if isinstance(expr, ir.BoolOp):
        return any(_is_group(v, names) for v in expr.values)
    if isinstance(expr, ir.IfExpr):
        return _is_group(expr.body, names) or _is_group(expr.orelse, names)
    return False


def _constructs(call: ir.Call) -> bool:
    """A class is called (`MnnvlWorkspace(...)`): an object is built, not a value computed."""
    func = call.func
    name = func.attr if isinstance(func, ir.Attr) else func.id if isinstance(func, ir.Name) else ""
    return name[:1].isupper()
