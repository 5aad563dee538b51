"""Path conditions: turn `if` tests into literals so exclusive branches can be told apart."""

from __future__ import annotations

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.facts import Literal, PathCondition

# Each relation as (canonical operator, operands swapped, negated): everything is written with
# `==`, `is`, `in` or `<`, so a condition and its negation share one key.
_CANONICAL = {
    "==": ("==", False, False), "!=": ("==", False, True),
    "is": ("is", False, False), "is not": ("is", False, True),
    "in": ("in", False, False), "not in": ("in", False, True),
    "<": ("<", False, False), ">=": ("<", False, True),
    ">": ("<", True, False), "<=": ("<", True, True),
}


def relation_key(left: str, op: str, right: str) -> tuple[str, bool]:
    """A canonical text for `left op right` and whether the relation holds as written.

    `a != b` is the negation of `a == b`, `a >= b` of `a < b`, `a <= b` of `b < a`; symmetric
    relations sort their operands, so `attn_dp_size == tp_size` and `tp_size == attn_dp_size`
    are the same condition.
    """
    op, swapped, negated = _CANONICAL[op]
    if swapped:
        left, right = right, left
    if op in ("==", "is") and right < left:
        left, right = right, left
    return f"{left} {op} {right}", not negated


def parse_relation(text: str) -> str | None:
    """The canonical key of a relation written in a profile, e.g. `tp_size == attn_dp_size`."""
    for op in ("!=", "==", "<=", ">=", "<", ">"):  # two-character operators first
        left, found, right = text.partition(f" {op} ")
        if found:
            key, holds = relation_key(left.strip(), op, right.strip())
            return key if holds else None
    return None


def render(expr: ir.Expr) -> str | None:
    """A stable text for simple expressions (names, attributes, calls without arguments)."""
    if isinstance(expr, ir.Name):
        return expr.id
    if isinstance(expr, ir.Attr):
        base = render(expr.value)
        return f"{base}.{expr.attr}" if base else None
    if isinstance(expr, ir.Call) and not expr.args:
        base = render(expr.func)
        return f"{base}()" if base else None
    if isinstance(expr, ir.Const):
        return repr(expr.value)
    return None


def contradicts(cond: PathCondition) -> bool:
    return any((key, not holds) in cond for key, holds in cond)


def holding(cond: PathCondition) -> frozenset[str]:
    return frozenset(key for key, holds in cond if holds)


Branches = tuple[frozenset[Literal], frozenset[Literal]]
