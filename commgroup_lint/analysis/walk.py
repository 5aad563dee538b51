"""Every IR node below a node, and the blocks of a statement, for the rules that read a
function's shape rather than its dataflow (CGL007: which names a body reads, which calls a
module makes, which branches lead to a statement)."""

from __future__ import annotations

from collections.abc import Iterator

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.conditions import render

_SKIPPED = frozenset({"span", "source"})  # positions, and the front end's own node


def walk(node: object) -> Iterator[object]:
    """`node` (or each of a tuple of nodes) and everything below it, depth first; iterative, so
    that a chain of 1,200 `elif`s is walked like any other."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple) and not isinstance(item, ir.Span):
            stack.extend(reversed(item))
            continue
        if not hasattr(type(item), "__slots__") or isinstance(item, (str, ir.Span)) or item is None:
            continue
        yield item
        stack.extend(getattr(item, slot, None) for slot in reversed(getattr(type(item), "__slots__", ()))
                     if slot not in _SKIPPED)


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


Branch = tuple[ir.If, bool]  # an `if` and whether the path takes its body


def statement_paths(body: tuple[ir.Stmt, ...], path: tuple[Branch, ...] = ()) -> Iterator[tuple[object, tuple[Branch, ...]]]:
    """Every simple statement, and the header of every compound one (an `if`'s test, a loop's
    iterable, a `with`'s contexts), with the branches that lead to it, in order. A branch that
    always leaves (`if c: return ...`) puts what follows it on the path where `c` is false.
    Iterative (an `elif` chain is as deep as it is long)."""
    stack: list[tuple[tuple[ir.Stmt, ...], int, tuple[Branch, ...]]] = [(body, 0, path)]
    while stack:
        block, at, path = stack.pop()
        if at >= len(block):
            continue
        stmt = block[at]
        if isinstance(stmt, ir.If):
            yield stmt.test, path
            body_leaves, else_leaves = leaves(stmt.body), leaves(stmt.orelse)
            if not (body_leaves and else_leaves):
                after = (*path, (stmt, not body_leaves)) if body_leaves or else_leaves else path
                stack.append((block, at + 1, after))
            stack.append((stmt.orelse, 0, (*path, (stmt, False))))
            stack.append((stmt.body, 0, (*path, (stmt, True))))
        elif isinstance(stmt, (ir.Loop, ir.With, ir.Try)):
            if isinstance(stmt, ir.Loop):
                yield stmt.iter, path
            elif isinstance(stmt, ir.With):
                yield tuple(item.context for item in stmt.items), path
            stack.append((block, at + 1, path))
            stack.extend((inner, 0, path) for inner in reversed(blocks(stmt)))
        elif isinstance(stmt, (ir.FunctionDef, ir.ClassDef)):
            stack.append((block, at + 1, path))
        else:
            yield stmt, path
            if not isinstance(stmt, (ir.Return, ir.Jump)):
                stack.append((block, at + 1, path))


def exclusive(a: tuple[Branch, ...], b: tuple[Branch, ...]) -> bool:
    """Whether two paths take opposite branches of one `if`."""
    taken = {id(node): truth for node, truth in a}
    return any(taken.get(id(node), truth) != truth for node, truth in b)


def describe_path(path: tuple[Branch, ...]) -> str | None:
    """The innermost test a path takes as true (else the last one it passes), as the source
    says it: what selects the branch (`actual_backend == 'mnnvl'`, not the `raise` it went past)."""
    chosen = [branch for branch in path if branch[1]] or list(path)
    return describe(chosen[-1][0].test, chosen[-1][1]) if chosen else None


_OPS = {"==": "!=", "!=": "==", "is": "is not", "is not": "is", "in": "not in", "not in": "in",
        "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


def describe(test: ir.Expr, truth: bool) -> str:
    """A test as the source says it (`actual_backend == 'mnnvl'`), negated when not taken."""
    if isinstance(test, ir.Not):
        return describe(test.operand, not truth)
    if isinstance(test, ir.Compare) and len(test.ops) == 1:
        left, right = _loosely(test.left), _loosely(test.comparators[0])
        if left is not None and right is not None:
            op = test.ops[0] if truth else _OPS.get(test.ops[0], test.ops[0])
            return f"{left} {op} {right}"
    text = render(test) or _loosely(test) or f"the test at line {test.span.line}"
    return text if truth else f"not {text}"


def _loosely(expr: ir.Expr) -> str | None:
    """`render`, and a call whose arguments it cannot say as `f(x, ...)`."""
    if isinstance(expr, ir.Call):
        func = render(expr.func)
        args = ", ".join(render(a.value) or "..." for a in expr.args)
        return f"{func}({args})" if func else None
    if isinstance(expr, ir.Attr):
        base = _loosely(expr.value)
        return f"{base}.{expr.attr}" if base else None
    return render(expr)
