"""A function's summary: its facts (from the dataflow) read as the `Behaviour` its callers see.

What a caller needs is kept: the groups returned, the memory returned and the group it is bound
to (a hidden one, or the caller's through a parameter), the contexts built, the flags computed
and the groups each parameter is consumed on, each under the conditions of the path where it
happens, in terms a caller can read (world sizes, module-level objects, its own parameters).
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import Any

from commgroup_lint.analysis import behaviour as b
from commgroup_lint.analysis import ir
from commgroup_lint.analysis.api import Api
from commgroup_lint.analysis.conditions import PARAM, SIZE, kind, relation_key
from commgroup_lint.analysis.facts import (
    RECEIVER,
    Allocation,
    BufferFact,
    CallableFact,
    CondFact,
    ConstFact,
    ContextFact,
    Fact,
    FunctionFacts,
    GlobalFact,
    GroupFact,
    ObjectFact,
    ParamFact,
    PathFact,
    SelfFieldFact,
    SizeFact,
    TupleFact,
    is_symbolic,
)
from commgroup_lint.analysis.flow import PORTABLE, FunctionFlow, Scope, flatten, guarded_groups, key_attribute, scoped
from commgroup_lint.analysis.flow.state import DICT, NAMESPACE
from commgroup_lint.analysis.names import ImportTable

# How many containers deep (an instance's fields, a tuple's items, a partial's arguments), or
# attributes deep (`param.a.b.c`), a summary describes a value. A recursive helper (`resolve(v)` returning `{k: resolve(x)}`, a
# wrapper group holding a wrapper group) returns a value one level deeper in each round of the
# fixpoint; cut here, the rounds stop changing it. Engines hold groups and buffers two or three
# levels down (`self.comm.pynccl.group`).
MAX_DEPTH = 4
PLAIN_RECORDS = frozenset({DICT, NAMESPACE})  # objects that are only their fields (no methods to resolve)


def call_index(fn: ir.FunctionDef, is_method: bool, position: int) -> int | None:
    """Where the definition's parameter at `position` sits among a call's positional arguments."""
    index = position - (1 if is_method else 0)
    star = next((i for i, p in enumerate(fn.params) if p.name.startswith("*")), len(fn.params))
    return index if 0 <= index and position < star else None


def _is_method(facts: FunctionFacts) -> bool:
    fn = facts.node
    return facts.class_qualname is not None and fn is not None and not any(
        isinstance(d, ir.Name) and d.id == "staticmethod" for d in fn.decorators
    )


def summarise(facts: FunctionFacts, display: str, api: Api, imports: ImportTable) -> b.Behaviour:
    """The function's behaviour as its callers see it (empty when it does nothing with groups)."""
    fn = facts.node
    if fn is None:
        return b.Behaviour()
    method = _is_method(facts)

    def arg(position: int, attr: str | None = None) -> b.ArgRef | None:
        """The parameter at `position` (its attribute `attr`: `pgs.tp`), as a caller passes it;
        past the declared ones, a cell, which the closure is made with (by name)."""
        if position >= len(fn.params):
            cell = position - len(fn.params)
            return b.ArgRef(facts.cells[cell], None, attr=attr) if cell < len(facts.cells) else None
        if fn.params[position].name.startswith("*"):
            return None
        return b.ArgRef(fn.params[position].name, call_index(fn, method, position), attr=attr)

    def star_element(f: ParamFact) -> b.ArgRef | None:
        """`args[k]` of a `*args` parameter: the call's positional argument k places after it;
        `kwargs["name"]` of a `**kwargs` parameter: the call's keyword argument `name`."""
        if f.name.startswith("**"):
            key = f.name.partition("[")[2][:-1]
            return b.ArgRef(key, None) if key.isidentifier() else None
        offset = f.name.rpartition("[")[2].rstrip("]")
        start = f.index - (1 if method else 0)
        return b.ArgRef(f.name, start + int(offset)) if offset.isdigit() and start >= 0 else None

    def binding(groups: tuple | None, params: frozenset[int], attr: str | None = None) -> b.Binding | None:
        if len(params) == 1:
            position = next(iter(params))
            ref = arg(position, attr)
            if ref is None:
                return None
            # a default that is a group binds the memory to it when the caller omits the argument,
            # as does the group the body chooses when it is None (`if group is None: group = tp`);
            # any other default (`group=None`, kept) leaves the caller's call without its group (CGL001)
            default = () if attr else _default_groups(fn.params[position], api, imports) or _chosen_when_none(groups, ref)
            return b.Binding(param=ref, default=default, required=not default)
        if groups is not None and not params:
            return b.Binding(groups=tuple((g, scoped(guard, PORTABLE)) for g, guard in groups))
        return None

    # A value is a graph that shares its parts (an instance's fields hold instances that hold
    # others, the same ones again and again): each fact is read once, not once per path to it.
    read: dict[tuple[int, bool, int], b.Returned | None] = {}

    def returned(f: Fact, in_tuple: bool = False, depth: int = 0) -> b.Returned | None:
        try:
            return read[id(f), in_tuple, depth]
        except KeyError:
            found = read[id(f), in_tuple, depth] = returned_now(f, in_tuple, depth)
            return found

    def returned_now(f: Fact, in_tuple: bool, depth: int) -> b.Returned | None:
        """What a caller needs of a returned fact: what can carry a group or memory, a flag
        relating world sizes, and (in a tuple, beside such items) a constant that decides a branch.
        Below `MAX_DEPTH` containers a container keeps only what it is (see `MAX_DEPTH`)."""
        deeper = depth + 1
        if deeper > MAX_DEPTH and isinstance(f, (ObjectFact, TupleFact, CallableFact)):
            return b.Instance(f.cls) if isinstance(f, ObjectFact) and f.cls not in PLAIN_RECORDS else None
        if isinstance(f, GroupFact):
            return b.Groups(((f.group, scoped(f.guard, PORTABLE)),))
        if isinstance(f, ParamFact):
            if f.attr and f.attr.count(".") >= MAX_DEPTH:
                return None  # `unwrap(t.inner)` recursing: one attribute deeper in every round, two ways at each
            ref = arg(f.index) if not f.name.endswith("]") else star_element(f)
            return b.Argument(replace(ref, attr=f.attr)) if ref is not None else None
        if isinstance(f, SizeFact):
            return b.Size(f.quantity)
        if isinstance(f, (BufferFact, ContextFact)):
            a = f.allocation
            found = binding(a.groups, a.group_params, a.param_attr)
            if found is None:
                return None
            here = f"{display}:{a.call.span.line}"
            if isinstance(f, ContextFact):
                return b.Context(found, origin=a.bound_at or here)
            return b.Memory(found, a.how, a.bound_at or here, scoped(a.cond, PORTABLE), *_taken_at(a, here),
                            **spanned(a))
        if isinstance(f, CondFact):
            when_true, when_false = scoped(f.when_true, PORTABLE), scoped(f.when_false, PORTABLE)
            if any(kind(key) == SIZE for key, _ in when_true | when_false):
                return b.Flag(when_true, when_false)
            return None
        if isinstance(f, ObjectFact):
            fields = tuple((name, kept) for name, value in f.fields if (kept := alternatives(value, deeper)))
            if not fields and f.cls in PLAIN_RECORDS:
                return None  # nothing but what it holds, and it holds nothing a caller can use
            return b.Instance(f.cls, fields)
        if isinstance(f, ConstFact):
            return b.Constant(f.value) if in_tuple else None
        if isinstance(f, SelfFieldFact):
            return b.SelfAttribute(f.attr) if method else None
        if isinstance(f, GlobalFact):
            return b.Global(f.name)
        if isinstance(f, TupleFact):
            items = tuple(tuple(sorted({r for g in item if (r := returned(g, True, deeper)) is not None}, key=canonical))
                          for item in f.items)
            return b.Items(items) if any(r for item in items for r in item if not isinstance(r, b.Constant)) else None
        if isinstance(f, CallableFact):
            return b.Partial(f.path, tuple((keyword, alternatives(value, deeper)) for keyword, value in f.args))
        if isinstance(f, PathFact) and f.named and api.call(f.path) is not None:
            return b.Partial(f.path, ())  # a known API returned to be called later
        return None

    def spanned(a: Allocation) -> dict[str, Any]:
        """An object built on the default group whose rank count a parameter gives: each caller's
        size says which group it was meant for (`initialize(world_size=tp_size)`)."""
        index = facts.spans.get(id(a.call))
        ref = arg(index) if index is not None else None
        return {"span": ref, "defaulted": a.defaulted} if ref is not None else {}

    def alternatives(value: frozenset, depth: int = 0) -> tuple[b.Returned, ...]:
        """A value's possibilities in a fixed order (a set's order varies: equal summaries must
        compare equal, or the fixpoint never ends)."""
        return tuple(sorted({r for g in value if (r := returned(g, depth=depth)) is not None}, key=canonical))

    def kept(value: frozenset) -> tuple[b.Returned, ...]:
        """What an instance keeps in a field: a flag of any kind too (`self._use_cp = cp_active(batch)`),
        which a caller tests through the instance."""
        flags = {b.Flag(when_true, scoped(f.when_false, PORTABLE)) for f in value
                 if isinstance(f, CondFact) and (when_true := scoped(f.when_true, PORTABLE))}
        return tuple(sorted(set(alternatives(value)) | flags, key=canonical))

    returns = _merge_groups([r for f in facts.returns if (r := returned(f)) is not None])  # ordered there
    consumes: list[b.Consume] = []
    for position, uses in sorted(facts.param_uses.items()):
        ref = arg(position)
        if ref is None:
            continue
        for use in uses:
            if use.on_object is not None and (holder := arg(use.on_object)) is not None:
                consumes.append(b.Consume(ref, on_object=holder, cond=use.cond, name=use.name, objects=True))
            fixed = tuple(sorted({(g.group, scoped(g.guard, PORTABLE)) for g in use.groups if isinstance(g, GroupFact)},
                                 key=canonical))
            if fixed:
                consumes.append(b.Consume(ref, fixed, cond=use.cond, name=use.name, objects=use.objects))
            for g in use.groups:
                if isinstance(g, ParamFact) and (group_ref := arg(g.index, g.attr)) is not None:
                    consumes.append(b.Consume(ref, group=group_ref, cond=use.cond, name=use.name, objects=use.objects))
    returned_ids = {id(f.allocation) for r in facts.returns for f in flatten(frozenset({r}))
                    if isinstance(f, (BufferFact, ContextFact))}
    keeps = tuple(dict.fromkeys(
        b.Memory(found, a.how, a.bound_at or f"{display}:{a.call.span.line}", scoped(a.cond, PORTABLE),
                 *_taken_at(a, f"{display}:{a.call.span.line}"), **spanned(a))
        for a in facts.allocations
        if (a.group_params or id(a.call) in facts.spans) and id(a) not in returned_ids
        and (found := binding(a.groups, a.group_params, a.param_attr)) is not None
    ))
    calls_params: set[b.CallsParam] = set()
    for call in facts.param_calls:
        args = tuple(map(alternatives, call.args))
        if isinstance(call.callee, str):  # a record's field: the callable it holds may make memory itself
            calls_params.add(b.CallsParam(None, args, call.cond, field=call.callee))
        elif (ref := arg(call.callee)) is not None and any(isinstance(r, (b.Memory, b.Argument))
                                                           for item in args for r in item):
            calls_params.add(b.CallsParam(ref, args, call.cond))  # it hands the callable memory or its arguments
    # what the constructor, or a method returning its receiver, leaves in the instance; any
    # other method (a setter: `store.put(group)`), only the arguments it stores as they are,
    # which a caller holding the instance reads back as what it passed (all of every method's
    # stores would cost SGLang's cold check about 60% more time and memory)
    keeps_fields = fn.name == "__init__" or SelfFieldFact(RECEIVER) in facts.returns
    stores = tuple((attr, stored) for key, value in sorted(facts.stores.items())
                   if method and (attr := key_attribute(key)) is not None
                   and (stored := kept(value) if keeps_fields else _arguments(alternatives(value))))
    # the arguments it binds to module globals (a setter's): what only each caller knows
    globals_ = tuple((name, arguments) for name, value in sorted(facts.global_stores.items())
                     if (arguments := _arguments(alternatives(value))))
    behaviour = b.Behaviour(tuple(returns), tuple(sorted(set(consumes), key=canonical)), keeps=keeps,
                            calls_params=tuple(sorted(calls_params, key=canonical)), stores=stores, globals=globals_)
    if behaviour.empty:
        return behaviour
    return replace(behaviour, origin=f"{display}:{fn.span.line}")


def _arguments(items: tuple[b.Returned, ...]) -> tuple[b.Returned, ...]:
    """Of what a method stores, what only its caller knows: its arguments."""
    return tuple(r for r in items if isinstance(r, b.Argument))




def canonical(x: object) -> tuple:
    """A sort key that is the same in every process: sets sorted by their members' keys, not
    iterated (their order follows string hashes, which vary between runs; a summary's
    alternatives in another order would not equal the cached one, and a warm run would redo
    the work)."""
    if isinstance(x, (frozenset, set)):
        return ("{", tuple(sorted(map(canonical, x))))
    if isinstance(x, (tuple, list)):
        return ("(", tuple(map(canonical, x)))
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__, tuple(canonical(getattr(x, f.name)) for f in dataclasses.fields(x)))
    return ("=", type(x).__name__, repr(x))


def _merge_groups(items: list[b.Returned]) -> list[b.Returned]:
    """All the groups a function may return as one `Groups` (first), then the rest in order."""
    groups = [g for item in items if isinstance(item, b.Groups) for g in item.groups]
    rest = [item for item in items if not isinstance(item, b.Groups)]
    merged: list[b.Returned] = [b.Groups(tuple(sorted(set(groups), key=lambda g: (g[0], sorted(g[1])))))] if groups else []
    return merged + sorted(set(rest), key=_returned_order)  # alternatives, in an order every process agrees on


def _returned_order(r: b.Returned) -> tuple:
    """Memory in the order of the calls that took it (the first is the one a finding names),
    then the rest; ties by their canonical key."""
    where = r.via or r.origin if isinstance(r, b.Memory) else None
    if where:
        path, _, line = where.rpartition(":")
        return (0, path, int(line) if line.isdigit() else 0, canonical(r))
    return (1, (), 0, canonical(r))


def _taken_at(a: Allocation, here: str) -> tuple[str | None, bool]:
    """Where memory a deeper helper binds was taken from it, and whether that call chose the
    group (passed the helper a group of its own: not its caller's, none fixed inside). The
    call that chose the group wins, however deep; else this call, the one a reader reaches
    first from a finding in a caller."""
    if not a.bound_at:
        return None, False
    if a.via and a.chosen:
        return a.via, True
    return here, not (a.hidden or a.group_params)


def _chosen_when_none(groups: tuple | None, ref: b.ArgRef) -> tuple:
    """The groups the body binds where the parameter is None (its literal `$i:name is None`)."""
    if groups is None or ref.index is None:
        return ()
    none = (relation_key(f"{PARAM}{ref.index}:{ref.param.lstrip('*')}", "is", "None")[0], True)
    return tuple((g, frozenset()) for g, guard in groups if none in guard and not is_symbolic(g))


def _default_groups(param: ir.Param, api: Api, imports: ImportTable) -> tuple:
    if param.default is None:
        return ()
    flow = FunctionFlow(api, Scope(imports), FunctionFacts("<default>", None, None))
    return guarded_groups(flow.eval(param.default)) or ()
