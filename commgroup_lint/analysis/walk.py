"""Every IR node below a node, and the blocks of a statement, for the rules that read a
function's shape rather than its dataflow (CGL007: which names a body reads, which calls a
module makes, which branches lead to a statement)."""

from __future__ import annotations

from collections.abc import Iterator

from commgroup_lint.analysis import ir

_SKIPPED = frozenset({"span", "source"})  # positions, and the front end's own node


def walk(node: object) -> Iterator[object]:
    """`node` (or each of a tuple of nodes) and everything below it, depth first."""
    if isinstance(node, tuple) and not isinstance(node, ir.Span):
        for item in node:
            yield from walk(item)
        return
    if not hasattr(type(node), "__slots__") or isinstance(node, (str, ir.Span)) or node is None:
        return
    yield node
    for slot in getattr(type(node), "__slots__", ()):
        if slot not in _SKIPPED:
            yield from walk(getattr(node, slot, None))


def names_in(node: object) -> Iterator[str]:
    """Every name the IR below `node` reads or binds."""
    for found in walk(node):
        if isinstance(found, ir.Name):
            yield found.id
        elif isinstance(found, ir.NamedExpr):
            yield found.target


def calls_in(node: object) -> Iterator[ir.Call]:
    return (found for found in walk(node) if isinstance(found, ir.Call))


def blocks(stmt: ir.Stmt) -> tuple[tuple[ir.Stmt, ...], ...]:
    """The blocks of statements a compound statement holds (none for a simple one)."""
    if isinstance(stmt, (ir.If, ir.Loop)):
        return stmt.body, stmt.orelse
    if isinstance(stmt, ir.With):
        return (stmt.body,)
    if isinstance(stmt, ir.Try):
        return stmt.body, *stmt.handlers, stmt.orelse, stmt.finalbody
    return ()


def leaves(body: tuple[ir.Stmt, ...]) -> bool:
    """Whether the block ends by leaving (`return`, `raise`, `break`, `continue`)."""
    return bool(body) and isinstance(body[-1], (ir.Return, ir.Jump))
