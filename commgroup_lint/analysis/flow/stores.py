"""Stores: what writing into an object does (`x.attr = v`, `table[k] = v`, `setattr`).

An object the environment holds by value (a record of the scanned code, a namespace, a dict,
a list) is updated in place in the environment: the name holds the object with the new field,
so a helper it is passed to reads it. Whatever the object is (a class, a module, an object
the model does not know), the member is also kept under its own key (`x.attr`), read back by
the attribute; rebinding `x` forgets those keys.
"""

from __future__ import annotations

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.facts import (
    Fact,
    ObjectFact,
    TupleFact,
    Value,
)
from commgroup_lint.analysis.flow.base import FlowBase
from commgroup_lint.analysis.flow.state import ANY_KEY, DICT, dict_key, member_key


class Stores(FlowBase):
    """Writes into objects, and the unpacking of a starred target."""

    def store(self, target: ir.Expr, value: Value) -> None:
        """`target = value` for an attribute or an item of something held (not a plain name, not `self.x`)."""
        if isinstance(target, ir.Attr):
            base = self.reference_key(target.value) or self.member_reference(target.value)
            if base is None:
                return
            self.forget_members(member_key(base, target.attr))
            self.env[member_key(base, target.attr)] = value
            self.members.add(member_key(base, target.attr))
            held = self.env.get(base)
            if held is not None:
                self.env[base] = frozenset(_set_field(f, target.attr, value) for f in held)
        elif isinstance(target, ir.Subscript):
            base = self.reference_key(target.value)
            held = self.env.get(base) if base is not None else None
            if base is None or held is None:
                return
            index = target.index.value if isinstance(target.index, ir.Const) else None
            self.env[base] = frozenset(g for f in held for g in _set_item(f, index, target.index is not None, value))

    def member_reference(self, e: ir.Expr) -> str | None:
        """The key of `x.a` (`x.a.b`, ...) when the member was stored here."""
        if isinstance(e, ir.Attr) and self.members:
            base = self.reference_key(e.value) or self.member_reference(e.value)
            if base is not None and (key := member_key(base, e.attr)) in self.members and key in self.env:
                return key
        return None

    def forget_members(self, key: str) -> None:
        """`key` is bound anew: what was stored into its old value's members is not its new value's."""
        if not self.members:
            return
        prefix = member_key(key, "")
        stale = {m for m in self.members if m.startswith(prefix)}
        for m in stale:
            self.env.pop(m, None)
        self.members -= stale

    def unpack_starred(self, targets: tuple[ir.Expr, ...], items: tuple[Value, ...]) -> bool:
        """`a, *rest, b = items`: the names before and after the star by position, the star the
        list of the items between; False when the items are too few."""
        star = next(i for i, t in enumerate(targets) if isinstance(t, ir.Starred))
        after = len(targets) - star - 1
        if len(items) < star + after:
            return False
        for t, v in zip(targets[:star], items):
            self.bind(t, v, None)
        middle = items[star:len(items) - after]
        starred = targets[star]
        assert isinstance(starred, ir.Starred)
        self.bind(starred.value, TupleFact.of(middle), None)
        for t, v in zip(targets[star + 1:], items[len(items) - after:]):
            self.bind(t, v, None)
        return True


def _set_field(f: Fact, attr: str, value: Value) -> Fact:
    if not isinstance(f, ObjectFact) or f.cls == DICT:
        return f
    return ObjectFact(f.cls, tuple((n, v) for n, v in f.fields if n != attr) + ((attr, value),))


def _set_item(f: Fact, index: object, single: bool, value: Value) -> Value:
    """A dict or list with `[index] = value` (`index` None when it is not a constant)."""
    if isinstance(f, ObjectFact) and f.cls == DICT:
        key = dict_key(index) if single and isinstance(index, (str, int, bool, type(None))) else ANY_KEY
        if key == ANY_KEY:
            value = value | (f.field(ANY_KEY) or frozenset())
        return frozenset({ObjectFact(DICT, tuple((n, v) for n, v in f.fields if n != key) + ((key, value),))})
    if isinstance(f, TupleFact) and f.items:
        items = list(f.items)
        if isinstance(index, int) and not isinstance(index, bool) and -len(items) <= index < len(items):
            items[index] = value
        else:  # an item we cannot tell: any of them may now be it
            items = [item | value for item in items]
        return TupleFact.of(tuple(items))
    return frozenset({f})
