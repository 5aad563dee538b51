"""Builders that drop their group on one branch (CGL007).

A function given a group that returns what a call builds, on several branches (one per
backend, say), hands the group to the builder on some branches and not on another: the object
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
from commgroup_lint.analysis.conditions import render
from commgroup_lint.analysis.walk import blocks, leaves, names_in

Branch = tuple[ir.Expr, bool]  # an `if` test and whether the path takes its body


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
        chosen = [b for b in self.path if b[1]] or list(self.path)
        return describe(*chosen[-1]) if chosen else None


def dropped_builds(fn: ir.FunctionDef, groups: set[str]) -> Iterator[DroppedBuild]:
    """The returned calls of `fn` that do not receive any of `groups` (its group parameters)
    while another returned call does."""
    if not groups:
        return
    derived = derived_names(fn.body, groups)
    returns = [(r.value, path) for r, path in _returns(fn.body, ()) if isinstance(r.value, ir.Call)]
    for group in sorted(groups):
        names = derived[group]
        kept = tuple(call for call, _ in returns if _receives(call, names))
        if not kept:
            continue
        for call, path in returns:
            if _receives(call, names) or any(names & set(names_in(test)) for test, _ in path):
                continue
            yield DroppedBuild(call, group, path, kept)


def _receives(call: ir.Call, names: set[str]) -> bool:
    return any(names & set(names_in(a.value)) for a in call.args)


def _returns(body: tuple[ir.Stmt, ...], path: tuple[Branch, ...]) -> Iterator[tuple[ir.Return, tuple[Branch, ...]]]:
    """Every `return` with the branches that lead to it; a branch that always leaves (`if c:
    return ...`) makes the statements after it the path where `c` is false."""
    for stmt in body:
        if isinstance(stmt, ir.Return):
            yield stmt, path
            return
        if isinstance(stmt, ir.If):
            yield from _returns(stmt.body, (*path, (stmt.test, True)))
            yield from _returns(stmt.orelse, (*path, (stmt.test, False)))
            body_leaves, else_leaves = leaves(stmt.body), leaves(stmt.orelse)
            if body_leaves and else_leaves:
                return
            if body_leaves:
                path = (*path, (stmt.test, False))
            elif else_leaves:
                path = (*path, (stmt.test, True))
        else:
            for block in blocks(stmt):
                yield from _returns(block, path)


_OPS = {"==": "!=", "!=": "==", "is": "is not", "is not": "is", "in": "not in", "not in": "in",
        "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


def describe(test: ir.Expr, truth: bool) -> str:
    """A test as the source says it (`actual_backend == 'mnnvl'`), negated when not taken."""
    if isinstance(test, ir.Not):
        return describe(test.operand, not truth)
    if isinstance(test, ir.Compare) and len(test.ops) == 1:
        left, right = render(test.left), render(test.comparators[0])
        if left is not None and right is not None:
            op = test.ops[0] if truth else _OPS.get(test.ops[0], test.ops[0])
            return f"{left} {op} {right}"
    text = render(test) or f"the test at line {test.span.line}"
    return text if truth else f"not {text}"
