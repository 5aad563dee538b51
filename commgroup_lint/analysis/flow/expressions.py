"""Expressions: the value of each (names, attributes, subscripts, displays, comprehensions)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from functools import lru_cache

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.facts import (
    SYMBOLIC,
    UNKNOWN,
    UNKNOWN_VALUE,
    BufferFact,
    CallableFact,
    ConstFact,
    ContextFact,
    Fact,
    GroupFact,
    ObjectFact,
    ParamFact,
    PathFact,
    SizeFact,
    TupleFact,
    Value,
)
from commgroup_lint.analysis.flow.arguments import NoArguments
from commgroup_lint.analysis.flow.base import FlowBase
from commgroup_lint.analysis.flow.library import BUILTINS, dict_of_any
from commgroup_lint.analysis.flow.state import (
    DICT,
    NONE_VALUE,
    dict_key,
    flatten,
    global_key,
    guard,
    guard_memory,
    iterated_elements,
    merge_guards,
    starred,
)


class Expressions(FlowBase):
    """The value of an expression in the current environment (calls are `Calls`)."""

    def eval(self, e: ir.Expr) -> Value:
        kind = type(e)
        if kind is ir.Name:
            if e.id in self.env:  # type: ignore[union-attr]
                return self.env[e.id]  # type: ignore[union-attr]
            if e.id == self.self_name:  # type: ignore[union-attr]
                return UNKNOWN_VALUE
            return self.global_name(e.id)  # type: ignore[union-attr]
        if kind is ir.Attr:
            return self.attribute(e)  # type: ignore[arg-type]
        if kind is ir.Call:
            return self.call(e)  # type: ignore[arg-type]
        if kind is ir.Const:
            value = e.value  # type: ignore[union-attr]
            return _constant(value) if isinstance(value, (bool, int, str, type(None))) else UNKNOWN_VALUE
        return self.eval_other(e)

    def global_name(self, name: str) -> Value:
        """A module-level name: what each import that binds it (or the module's own global) is.
        Asked again and again with the same answer within one analysis, so it is remembered."""
        if self.facts.global_stores and (key := global_key(f"{self.imports.module}.{name}")) in self.env:
            return self.env[key]  # bound here, by this function or a callee
        memo = self.scope.names
        found = memo.get(name)
        if found is None:
            found = memo[name] = frozenset(f for q in self.imports.qualify_all(name) for f in self.path_value(q))
        return found

    def eval_other(self, e: ir.Expr) -> Value:
        if isinstance(e, ir.Subscript):
            return self.subscript(e)
        if isinstance(e, ir.NamedExpr):
            value = self.env[e.target] = self.eval(e.value)
            return value
        if isinstance(e, ir.IfExpr):
            self.eval(e.test)
            when_true, when_false = self.literals(e.test)
            # a group, or memory, that one branch gives holds only where its test does
            body = guard_memory(guard(self.eval(e.body), when_true), when_true)
            orelse = guard_memory(guard(self.eval(e.orelse), when_false), when_false)
            return merge_guards(frozenset(body | orelse))
        if isinstance(e, ir.TupleExpr):
            items = tuple(self.element(elt) for elt in e.elts)
            if starred(e):
                return frozenset(f for item in items for f in flatten(item) if isinstance(f, (BufferFact, ParamFact))) \
                    or UNKNOWN_VALUE
            return TupleFact.of(items)
        if isinstance(e, ir.Starred):
            return self.eval(e.value)
        if isinstance(e, ir.Compare):
            for sub in (e.left, *e.comparators):
                self.eval(sub)
        elif isinstance(e, ir.BoolOp):
            values = [self.eval(sub) for sub in e.values]
            if e.op == "or":  # `a or b` is `a` whenever `a` is an object that is always true
                values = values[:next((i + 1 for i, v in enumerate(values) if _always_true(v)), len(values))]
                if len(values) == 1:
                    return values[0]
                if all(isinstance(f, (PathFact, ConstFact)) for v in values for f in v):
                    return frozenset().union(*values)  # a call resolved later (a helper elsewhere), or a constant
            carried: Value = frozenset(f for v in values for f in v if isinstance(f, (BufferFact, GroupFact, ContextFact)))
            functions = frozenset(f for v in values for f in v if isinstance(f, CallableFact)
                                  or isinstance(f, PathFact) and f.named)
            if functions:  # `step or default_step`: a callable either way, a parameter's included
                carried |= functions | {f for v in values for f in v if isinstance(f, ParamFact)}
            if carried:  # `x or default`: either operand
                return carried | UNKNOWN_VALUE
        elif isinstance(e, ir.Not):
            self.eval(e.operand)
        elif isinstance(e, ir.DictExpr):
            return self.dict_display(e)
        elif isinstance(e, ir.Lambda):
            return self.local_function(e.as_function())
        elif isinstance(e, ir.Comprehension):
            return self.comprehension(e)
        elif isinstance(e, ir.Yield):
            value = self.eval(e.value) if e.value is not None else NONE_VALUE
            self._yielded = (self._yielded or set()) | (iterated_elements(value) if e.every else value)
            self._yield_contexts |= {ContextFact(a) for a in self.contexts}
            return UNKNOWN_VALUE  # what the generator's caller sends in
        elif isinstance(e, ir.OtherExpr):
            values = [self.eval(sub) for sub in e.children]
            if e.op == "+" and len(values) == 2 and (joined := _concatenated(values[0], values[1])):
                return joined  # two lists (tuples) added: one of both's items
            if e.arith and self.contexts:  # `a + b` makes a new tensor
                return self.made_in_contexts(set())
        return UNKNOWN_VALUE

    def element(self, e: ir.Expr) -> Value:
        return self.named(self.eval(e), e)

    def named(self, value: Value, e: ir.Expr) -> Value:
        """A list element known only by its expression keeps that expression, in case the list is
        a list of groups (`[self.dp_group, get_outer_group()]`)."""
        if value == UNKNOWN_VALUE and not isinstance(e, (ir.Starred, ir.Const)):
            text = self.group_text(e)
            if text is not None:
                return frozenset({GroupFact(SYMBOLIC + text)})
        return value

    def attribute(self, e: ir.Attr) -> Value:
        key = self.reference_key(e)
        if key is not None:  # an attribute of `self`
            if key in self.env:
                return self.env[key]
            method = self.resolve_method(e.attr)
            return frozenset({PathFact(method)}) if method else UNKNOWN_VALUE
        member = self.member_reference(e)
        if member is not None:  # stored into here (`ns.group = g`)
            return self.env[member]
        return self.attribute_of(self.eval(e.value), e.attr, e)

    def attribute_of(self, base: Value, attr: str, e: ir.Attr | None = None) -> Value:
        """The attribute `attr` of what `base` may be (`e`: the expression read, for a property)."""
        out: set[Fact] = set()
        for f in base:
            if isinstance(f, PathFact):
                out |= self.path_value(f"{f.path}.{attr}")
            elif isinstance(f, (GroupFact, ParamFact)) and self.api.is_same_group_attribute(attr):
                out.add(f)  # `group.device_group`, `group.pynccl_comm`: the same group (a parameter's too)
            elif isinstance(f, ParamFact) and not _is_star_param(f.name):
                out.add(replace(f, attr=f"{f.attr}.{attr}" if f.attr else attr))  # `pgs.tp`: the caller's `pgs`'s
            elif isinstance(f, GroupFact) and attr in self.api.profile.size_group_attributes:
                out.add(self.group_size(f))
            elif isinstance(f, ObjectFact) and f.field(attr) is None and e is not None and self.is_property(attr, f.cls):
                out |= self.call_path(self.resolve_method(attr, f.cls) or "", ir.Call(e, (), e.span), [], None, record=f)
            elif isinstance(f, ObjectFact):
                field = f.field(attr)
                out |= field if field is not None else {PathFact(f"{f.cls}.{attr}")}
            else:
                out.add(UNKNOWN)
        if UNKNOWN in out and (quantity := self.api.profile.size_attributes.get(attr)):
            out = (out - {UNKNOWN}) | {SizeFact(quantity)}  # `context.attn_tp_size`
        return frozenset(out) or UNKNOWN_VALUE

    def path_value(self, path: str) -> set[Fact]:
        entry = self.api.entry(path)
        if entry is not None and entry.value:
            return set(self.instantiate_all(entry.value, path, None, NoArguments()))
        return {PathFact(path)}

    def comprehension(self, e: ir.Comprehension) -> Value:
        """`[element for target in iter if test]`: the targets take the iterated elements (in
        a scope of their own: the names around are left as they were); a sequence of the
        element's values (a dict comprehension: a dict whose entries are not known)."""
        names = {n for clause in e.clauses for n in _target_names(clause.target)}
        around = {n: self.env[n] for n in names if n in self.env}
        for clause in e.clauses:
            self.bind(clause.target, iterated_elements(self.eval(clause.iter)), None)
            for test in clause.tests:
                self.eval(test)
        if e.key is not None:
            self.eval(e.key)
        element = self.element(e.element)
        for n in names:
            self.env.pop(n, None)
        self.env.update(around)
        return dict_of_any(element) if e.key is not None else TupleFact.of((element,))

    def builtin(self, func: ir.Expr) -> str | None:
        """The builtin a call's function names (`next`), unless this module binds the name."""
        if isinstance(func, ir.Name) and func.id in BUILTINS and func.id not in self.env \
                and not self.imports.imports(func.id) and self.api.entry(self.imports.qualify(func) or "") is None:
            return func.id
        return None

    def dict_display(self, e: ir.DictExpr) -> Value:
        """`{"tp": group, ...}`: a record of its constant keys (a `dict` whose entries are
        known); a key that is not a constant, or a `**` spread, leaves what it maps unknown."""
        entries: list[tuple[str, Value]] = []
        known = True
        for key, item in zip(e.keys, e.values):
            value = self.element(item)
            if key is not None:
                self.eval(key)
            if isinstance(key, ir.Const) and isinstance(key.value, _KEY_CONSTANTS):
                entries.append((dict_key(key.value), value))
            else:
                known = False
        return frozenset({ObjectFact(DICT, tuple(entries))}) if known else UNKNOWN_VALUE

    def subscript(self, e: ir.Subscript) -> Value:
        base = self.eval(e.value)
        index_value = self.eval(e.index) if e.index is not None else UNKNOWN_VALUE
        if e.bounds is not None:
            for bound in e.bounds:
                self.eval(bound)
        out: set[Fact] = set()
        for f in base:
            if isinstance(f, TupleFact) and e.bounds is not None:
                out |= _sliced(f, e.bounds)
            elif isinstance(f, ObjectFact) and f.cls != DICT and (method := self.resolve_method("__getitem__", f.cls)):
                given = e.index if e.index is not None else ir.Const(None, e.span)
                out |= self.call_path(method, ir.Call(e, (ir.Arg(given),), e.span), [index_value], None, record=f)
            elif isinstance(f, ObjectFact) and f.cls != DICT and isinstance(position := _const(e.index), int):
                out |= self.record_item(f, position)
            elif isinstance(f, ObjectFact) and f.cls == DICT:
                key = e.index.value if isinstance(e.index, ir.Const) else None
                entry = f.field(dict_key(key)) if isinstance(key, _KEY_CONSTANTS) else None
                out |= entry if entry is not None else {g for _, value in f.fields for g in value}
            elif isinstance(f, TupleFact):
                index = e.index.value if isinstance(e.index, ir.Const) else None
                if isinstance(index, int) and not isinstance(index, bool) and -len(f.items) <= index < len(f.items):
                    out |= f.items[index]
                else:
                    out |= {g for item in f.items for g in item}
            elif isinstance(f, ParamFact) and _is_star_param(f.name) and f.attr is None \
                    and isinstance(index := _const(e.index), int) \
                    and index >= 0:
                out.add(ParamFact(f.index, f"{f.name}[{index}]", f.guard))  # `args[0]` of `*args`: an argument
            elif isinstance(f, ParamFact) and f.name.startswith("**") and not f.name.endswith("]") \
                    and isinstance(key := _const(e.index), str) and key.isidentifier():
                out.add(ParamFact(f.index, f"{f.name}[{key}]", f.guard))  # `kwargs["group"]`: a keyword argument
            elif isinstance(f, (BufferFact, ParamFact)) and not self.per_rank(e.index):
                out.add(f)  # a view of the same memory (a rank's own slice is at another offset on
                # each rank: no collective can use it as symmetric memory, whatever it is bound to)
        return frozenset(out) or UNKNOWN_VALUE

    def per_rank(self, index: ir.Expr | None) -> bool:
        """Whether a subscript's index reads this rank's place in a group (`[attn_tp_rank]`)."""
        func = index.func if isinstance(index, ir.Call) else index
        name = func.attr if isinstance(func, ir.Attr) else func.id if isinstance(func, ir.Name) else None
        return name is not None and name in self.api.profile.rank_names


def _concatenated(left: Value, right: Value) -> Value:
    """`a + b` when both are sequences the model holds by position, else empty."""
    lefts = [f for f in left if isinstance(f, TupleFact)]
    rights = [f for f in right if isinstance(f, TupleFact)]
    if not lefts or not rights or len(lefts) != len(left) or len(rights) != len(right):
        return frozenset()
    return frozenset(g for a in lefts for b in rights for g in TupleFact.of(a.items + b.items))


def _sliced(f: TupleFact, bounds: tuple[ir.Expr, ir.Expr]) -> frozenset:
    """`items[lo:hi]`: the items by position when both bounds are constants (or left out),
    else a sequence of any of them."""
    (lo_known, lo), (hi_known, hi) = (_slice_bound(b) for b in bounds)
    if lo_known and hi_known:
        return TupleFact.of(f.items[lo:hi])
    return TupleFact.of((frozenset(g for item in f.items for g in item),))


def _slice_bound(e: ir.Expr) -> tuple[bool, int | None]:
    """Whether a slice's bound is known, and its value (None: left out)."""
    if isinstance(e, ir.Const) and (e.value is None or isinstance(e.value, int) and not isinstance(e.value, bool)):
        return True, e.value
    return False, None


def _is_star_param(name: str) -> bool:
    """`*args` itself (not `**kwargs`, nor an element already taken from it)."""
    return name.startswith("*") and not name.startswith("**") and not name.endswith("]")


def _const(e: ir.Expr | None) -> object:
    return e.value if isinstance(e, ir.Const) and not isinstance(e.value, bool) else None


def _target_names(target: ir.Expr) -> Iterator[str]:
    if isinstance(target, ir.Name):
        yield target.id
    elif isinstance(target, ir.TupleExpr):
        for elt in target.elts:
            yield from _target_names(elt.value if isinstance(elt, ir.Starred) else elt)


def _always_true(value: Value) -> bool:
    """Whether every possibility of the value is an object Python reads as true (a group, a
    context manager, a function: none defines `__bool__` or `__len__`). A group known only by
    the expression holding it may be None."""
    return bool(value) and all(isinstance(f, _TRUE_OBJECTS) and not (isinstance(f, GroupFact)
                                                                     and f.group.startswith(SYMBOLIC)) for f in value)


@lru_cache(maxsize=4096)
def _constant(value: object) -> Value:
    return frozenset({ConstFact(value)})


_TRUE_OBJECTS = (GroupFact, ContextFact, CallableFact)
_KEY_CONSTANTS = (str, int, bool, type(None))
