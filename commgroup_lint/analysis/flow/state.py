"""The abstract state of the dataflow: environments of values, their join, and the keys they are kept by.

An environment maps each tracked reference (a variable, an attribute of the analysed object) to
its value, a set of facts. Where paths meet, environments are joined; a group reached on several
paths keeps only the literals common to them (`merge_guards`), so values stay small.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.conditions import (
    GLOBAL,
    PARAM,
    QUANTITY,
    SELF,
    Literal,
    PathCondition,
    key_operands,
    operand_scope,
)
from commgroup_lint.analysis.facts import (
    SYMBOLIC,
    UNKNOWN,
    UNKNOWN_VALUE,
    BufferFact,
    ConstFact,
    Fact,
    GroupFact,
    Guarded,
    ObjectFact,
    ParamFact,
    PathFact,
    TupleFact,
    Value,
)
from commgroup_lint.analysis.names import ImportTable

Env = dict[str, Value]


def join(a: Env, *others: Env) -> Env:
    out = dict(a)
    for other in others:
        for key, value in other.items():
            if key in out and out[key] is not value:
                out[key] = merge_objects(merge_guards(out[key] | value))
            elif key not in out:
                out[key] = value
    return out


def merge_guards(value: Value) -> Value:
    """One fact per group (and per parameter): one reached on several paths is possible where
    their guards agree (the literals common to all of them), which keeps values small at every join."""
    guarded = [f for f in value if isinstance(f, (GroupFact, ParamFact))]
    if len(guarded) < 2 or len({_guarded_key(f) for f in guarded}) == len(guarded):
        return value
    merged: dict[object, GroupFact | ParamFact] = {}
    for f in guarded:
        key = _guarded_key(f)
        merged[key] = replace(f, guard=merged[key].guard & f.guard) if key in merged else f
    return frozenset(f for f in value if not isinstance(f, (GroupFact, ParamFact))) | set(merged.values())


def merge_objects(value: Value) -> Value:
    """One object per class: the same object written on several paths (`if c: batch.x = a`
    after `batch = Batch(...)`) holds on each field what any path stored there, and, where a
    path stored nothing, what reading the field of an object without it gives (the class's
    attribute). Read a field at a time, that is what the paths' objects together held; kept
    apart, k such writes in a row would make 2**k objects (SGLang's `ForwardBatch.init_new`:
    thousands, each summarised and carried to every caller)."""
    objects = [f for f in value if type(f) is ObjectFact]
    if len(objects) < 2:
        return value
    # a dict reads a key it lacks as any of its entries: only dicts of the same keys are merged
    shapes: dict[tuple[str, frozenset[str]], list[ObjectFact]] = {}
    for f in objects:
        shapes.setdefault((f.cls, frozenset(n for n, _ in f.fields) if f.cls == DICT else frozenset()), []).append(f)
    if len(shapes) == len(objects):
        return value
    out = set(value).difference(objects)
    for (cls, _), same in shapes.items():
        if len(same) == 1:
            out.add(same[0])
            continue
        fields = []
        for name in sorted({name for f in same for name, _ in f.fields}):
            held = [f.field(name) for f in same]
            merged = frozenset().union(*(v for v in held if v is not None))
            if any(v is None for v in held):
                merged |= {PathFact(f"{cls}.{name}")}
            fields.append((name, merge_objects(merge_guards(merged))))
        out.add(ObjectFact(cls, tuple(fields)))
    return frozenset(out)


def _guarded_key(f: GroupFact | ParamFact) -> object:
    return f.group if isinstance(f, GroupFact) else (f.index, f.attr)


def flatten(value: Value) -> Iterator[Fact]:
    """The facts of a value and of every element of the tuples in it."""
    for f in value:
        if isinstance(f, TupleFact):
            for item in f.items:
                yield from flatten(item)
        else:
            yield f


def iterated_elements(value: Value) -> Value:
    """What iterating over the value yields: each item of a tuple or list whatever it holds
    (a group, a helper's result resolved later, a pair to unpack), a buffer's rows (views of its
    memory); of anything else, something unknown."""
    out: set[Fact] = set()
    for f in value:
        if isinstance(f, TupleFact):
            out.update(*f.items)
        elif isinstance(f, BufferFact):
            out.add(f)
        else:
            out.add(UNKNOWN)
    return frozenset(out) or UNKNOWN_VALUE


def guarded_groups(value: Value) -> tuple[Guarded, ...] | None:
    """The groups a value may be, each with its guard; None when a possibility is not a group.
    A parameter stands for the group it will be (`?name`)."""
    if not value:
        return None
    out: list[Guarded] = []
    for f in value:
        if isinstance(f, GroupFact):
            out.append((f.group, f.guard))
        elif isinstance(f, ParamFact):
            out.append((SYMBOLIC + f.text, f.guard))
        else:
            return None
    return tuple(sorted(set(out), key=lambda g: (g[0], sorted(g[1]))))


def known_groups(value: Value) -> frozenset[str] | None:
    found = guarded_groups(value)
    return None if found is None else frozenset(g for g, _ in found)


def scoped(literals: Iterable[Literal], keep: tuple[str, ...]) -> frozenset[Literal]:
    """The literals whose operands are all of the given scopes (constants always kept)."""
    return frozenset(
        lit for lit in literals
        if all(operand_scope(o) in keep or operand_scope(o) == "const" for o in key_operands(lit[0]))
    )


PORTABLE = (QUANTITY, GLOBAL, SELF, PARAM)  # literals a summary can carry (locals mean nothing elsewhere)


@dataclass(frozen=True)
class Fork:
    """An undecided `if` whose body was walked, waiting for its `else` (see `Statements.branch`)."""

    start_cond: PathCondition
    when_true: PathCondition
    when_false: PathCondition
    through_body: bool
    body_env: Env


@dataclass
class Scope:
    """Where a function sits: its module's imports, its class (for `self.m()` and `super()`)."""

    imports: ImportTable
    class_qualname: str | None = None
    display: str = ""  # the file, for "path:line" origins
    is_method: bool = False  # the first parameter is `self` (or `cls`)
    local_classes: dict[str, tuple] | None = None  # this module's classes
    names: dict[str, Value] = field(default_factory=dict)  # module-level names' values, within one analysis
    bound_globals: frozenset[str] = frozenset()  # the module's globals a setter binds (see `module.bound_globals`)


def global_key(name: str) -> str:
    """The environment's key of a module global (its qualified name) a callee bound here."""
    return GLOBAL_MARK + name


GLOBAL_MARK = "\x1c"  # what the keys of module globals bound through callees start with


_SELF_KEY = "self."  # what the keys of the analysed object's attributes start with, whatever its parameter's name


def attribute_key(attr: str) -> str:
    """The environment's key of an attribute of the analysed object (`self.x`): the one place
    such a key is spelled, so the flow, the stores a class shares and its summaries agree."""
    return _SELF_KEY + attr


def reference_key(e: ir.Expr | None, self_name: str | None) -> str | None:
    """The environment's key of a reference the flow tracks (`x`, `self.x`, `self` being the
    parameter `self_name`), else None."""
    if isinstance(e, ir.Name):
        return e.id
    if isinstance(e, ir.Attr) and isinstance(e.value, ir.Name) and e.value.id == self_name and self_name is not None:
        return attribute_key(e.attr)
    return None


MEMBER = "\x1d"  # between an object's key and its member's name: `x` + `attr` (never a `self.` key)


def member_key(base: str, attr: str) -> str:
    """The environment's key of a member stored into what `base` holds (`x.attr = v`, `Cls.attr = v`)."""
    return f"{base}{MEMBER}{attr}"


def key_attribute(key: str | None) -> str | None:
    """The attribute of the analysed object a key names (`self.x`: `x`), else None."""
    return key[len(_SELF_KEY):] if key is not None and key.startswith(_SELF_KEY) else None


def guard(value: Value, literals: Iterable[Literal]) -> set[Fact]:
    """The value with its groups (and parameters) chosen only where `literals` hold."""
    literals = frozenset(literals)
    if not literals or not any(isinstance(f, (GroupFact, ParamFact)) for f in value):
        return set(value)
    return {replace(f, guard=f.guard | literals) if isinstance(f, (GroupFact, ParamFact)) else f for f in value}


def guard_memory(value: Iterable[Fact], literals: frozenset[Literal]) -> set[Fact]:
    """The value with its memory bound only where `literals` hold (its allocation's condition)."""
    return {BufferFact(replace(f.allocation, cond=f.allocation.cond | literals))
            if isinstance(f, BufferFact) and not literals <= f.allocation.cond else f for f in value}


def shallow(value: Value) -> Value:
    """A record's field keeps records without their own fields: one level, so that a record
    built from itself (`Wrapped(group=resolve(inner))`, recursively) has a fixpoint."""
    out: set[Fact] = set()
    for f in value:
        if isinstance(f, ObjectFact) and f.fields:
            out.add(ObjectFact(f.cls))
        elif isinstance(f, TupleFact):
            out |= TupleFact.of(tuple(shallow(item) for item in f.items))
        else:
            out.add(f)
    return frozenset(out)


def cells(fn: ir.FunctionDef, env: Env) -> tuple[str, ...]:
    """The variables of `env` that `fn`, defined there, closes over and that hold a parameter
    of the function defining it: only its caller knows them, so a closure carries them (its
    cells), and its summary reads them as parameters of its own."""
    if not any(isinstance(f, ParamFact) for value in env.values() for f in value):
        return ()
    own = {p.name.lstrip("*") for p in fn.params}
    return tuple(sorted(name for name in ir.names_read(fn) - own
                        if any(isinstance(f, ParamFact) for f in env.get(name, ()))))


def starred(expr: ir.TupleExpr) -> bool:
    return any(isinstance(e, ir.Starred) for e in expr.elts)


NONE = ConstFact(None)
NONE_VALUE = frozenset({NONE})
NULL_CONTEXT = "contextlib.nullcontext"
DICT = "builtins.dict"
NAMESPACE = "types.SimpleNamespace"  # an object whose attributes are what it was given by keyword
ANY_KEY = "\x00*"  # the entry of a dict whose keys are not known (a comprehension's): every key may map to it


def dict_key(key: object) -> str:
    """A dict entry's field name: the key's repr, which no attribute name can equal."""
    return repr(key)
OWN_OBJECT = object()  # a receiver that is the calling method's own object (see `Effects.replay_calls`)
