"""A call's arguments, found by the parameter a callee's summary names (`b.ArgRef`)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from commgroup_lint.analysis import behaviour as b
from commgroup_lint.analysis import ir
from commgroup_lint.analysis.facts import Guarded, ObjectFact, ParamFact, TupleFact, Value
from commgroup_lint.analysis.flow.state import DICT


class Arguments:
    """A call's arguments (and those a `functools.partial` gave earlier), by parameter."""

    def __init__(self, c: ir.Call, args: list[Value], bound: tuple[tuple[str | None, Value], ...]) -> None:
        self.c, self.args, self.bound = c, args, bound
        self._entries = self._spread()
        # a replayed call reads none of `c`'s; a spread whose elements are known is no star
        self.has_star_args = any(star for *_, star in self._entries) and bool(args)

    def _spread(self) -> list[tuple[str | None, ir.Expr | None, Value, str]]:
        """(keyword, expression, value, star) for the bound arguments first, then the call's,
        with `*args` of a known tuple and `**kwargs` of a known dict spread into their items."""
        out: list[tuple[str | None, ir.Expr | None, Value, str]] = [(k, None, v, "") for k, v in self.bound]
        for a, v in zip(self.c.args, self.args):
            only = next(iter(v)) if len(v) == 1 else None
            if a.star == "*" and isinstance(only, TupleFact):
                out += [(None, None, item, "") for item in only.items]
            elif a.star == "**" and isinstance(only, ObjectFact) and only.cls == DICT and all(
                    key.startswith(("'", '"')) for key, _ in only.fields):
                out += [(ast.literal_eval(key), None, item, "") for key, item in only.fields]
            else:
                out.append((a.keyword, a.value, v, a.star))
        return out

    def _all(self) -> list[tuple[str | None, ir.Expr | None, Value, str]]:
        return self._entries

    def _find(self, ref: b.ArgRef) -> tuple[ir.Expr | None, Value] | None:
        entries = self._all()
        for keyword, expr, value, _ in entries:
            if keyword == ref.param:
                return expr, value
        position = 0
        for keyword, expr, value, star in entries:
            if star == "*":  # `f(*args)` forwarding the caller's own `*args`: its element, if known
                element = _element(value, ref.index - position) if ref.index is not None else None
                return (None, element) if element is not None else None
            if keyword is None and not star:
                if position == ref.index:
                    return expr, value
                position += 1
        return None

    def value(self, ref: b.ArgRef) -> Value | None:
        found = self._find(ref)
        return found[1] if found else None

    def expr(self, ref: b.ArgRef) -> ir.Expr | None:
        found = self._find(ref)
        return found[0] if found else None

    def index_of(self, ref: b.ArgRef) -> int | None:
        found = self._find(ref)
        if found is None or found[0] is None:
            return None
        return next((i for i, a in enumerate(self.c.args) if a.value is found[0]), None)

    def keywords(self) -> Iterator[tuple[str, ir.Expr | None, Value]]:
        """(parameter name, expression, value) of the keyword arguments."""
        for keyword, expr, value, star in self._all():
            if keyword is not None and not star:
                yield keyword, expr, value

    def positional(self) -> Iterator[tuple[int, ir.Expr | None, Value]]:
        """(parameter position, expression, value) of the positional arguments."""
        position = 0
        for keyword, expr, value, star in self._all():
            if star:
                return
            if keyword is None:
                yield position, expr, value
                position += 1

    def variant(self, variants: tuple[tuple[str, tuple[Guarded, ...]], ...]) -> tuple[Guarded, ...] | None:
        """The groups of the most specific variant whose every `keyword=value` the call passes."""
        given = {a.keyword: repr(a.value.value) for a in self.c.args if a.keyword and isinstance(a.value, ir.Const)}
        best: tuple[int, tuple[Guarded, ...]] | None = None
        for spelled, groups in variants:
            wanted = [part.partition("=") for part in spelled.split(",")]
            if all(given.get(k.strip()) == v.strip() for k, _, v in wanted) and (best is None or len(wanted) > best[0]):
                best = (len(wanted), groups)
        return best[1] if best else None


def _element(value: Value, offset: int) -> Value | None:
    """Element `offset` of the `*args` parameter a call spreads (`inner(*args)`), else None."""
    params = [f for f in value if isinstance(f, ParamFact) and f.name.startswith("*")
              and not f.name.startswith("**") and not f.name.endswith("]")]
    if offset < 0 or not params or len(params) != len(value):
        return None
    return frozenset(ParamFact(f.index, f"{f.name}[{offset}]", f.guard) for f in params)


class NoArguments(Arguments):
    """An attribute read: no arguments at all."""

    def __init__(self) -> None:  # noqa: D107
        self.c, self.args, self.bound, self.has_star_args = ir.Call(ir.Const(None), ()), [], (), False
        self._entries = []
