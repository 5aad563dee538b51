"""The abstract values of the group dataflow and the events it records.

A value is a set of facts: every possibility the expression may hold on some path. A group
is a fact like any other value, so it flows through variables, attributes, tuples, calls and
returns; a group chosen under a condition carries that condition (its guard), so a binding
made in one branch is not compared with a consumer in the exclusive one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.conditions import Literal, PathCondition

SYMBOLIC = "?"  # the prefix of a group the analysis knows only by the expression holding it


def is_symbolic(group: str) -> bool:
    return group.startswith(SYMBOLIC)


# A group a `new_groups` call makes (`dist.new_group(ranks)`) is known by where it was made, so
# that two calls are two groups; once a variable or attribute holds it, it is shown by that
# holder (`first`, `self.pg`), as a reader names it, and stays distinct by where it was made.
FRESH = "\x1e"  # the prefix of a new group no variable holds yet
HELD = "\x1f"  # between the holder of a new group and where it was made


def new_group(call: str, where: str) -> str:
    return f"{FRESH}{call}() at {where}"


def held_by(group: str, holder: str) -> str:
    """A fresh new group, once `holder` holds it; any other group as it is."""
    return f"{holder}{HELD}{group[len(FRESH):]}" if group.startswith(FRESH) else group


def display_group(group: str) -> str:
    if is_symbolic(group):
        return group[len(SYMBOLIC):]
    holder, held, _ = group.partition(HELD)
    return f"`{holder}`" if held else group.removeprefix(FRESH)


def place_key(location: str) -> str:
    """`path:line` as a key: `./pkg/a.py:7` (from `check .`) and `pkg/a.py:7` (from `check pkg/a.py`)
    are one place, as the cache takes them for one file, which keeps the analysis of a run that
    named it the other way."""
    path, _, line = location.rpartition(":")
    return f"{os.path.normpath(path)}:{line}"


# A group the memory is bound to (or a collective runs on), with the literals under which.
Guarded = tuple[str, PathCondition]


@dataclass(frozen=True, eq=False)
class Allocation:
    """One place memory is bound to a group: an allocator call, a context, a registration, or
    a call of a helper or method whose returned memory is bound inside it."""

    how: str  # "context", "allocator" or "registration"
    name: str  # the API's (or helper's) qualified name
    call: ir.Call
    groups: tuple[Guarded, ...] | None  # None when the group is not known from the code
    group_params: frozenset[int] = frozenset()  # the enclosing function's parameters that supply the group
    missing_param: str | None = None  # the group parameter the call leaves out
    bound_at: str | None = None  # "path:line" inside a helper or method where the memory is bound
    hidden: bool = False  # the helper fixes the group inside (it takes none from the caller)
    function: str = ""  # qualified name of the enclosing function
    class_name: str | None = None
    cond: PathCondition = frozenset()  # where the memory is bound: the path here and a helper's inside
    statement: ir.Span = ir.NO_SPAN  # the statement holding the call (a fix may insert before it)
    factory: bool = False  # a context whose body made a fresh tensor (`torch.empty`, ...)
    via: str | None = None  # "path:line" of the call, in the scanned code, that took it from that helper
    chosen: bool = False  # that call chose the group: the call a fix changes
    at: PathCondition = frozenset()  # the path to the call itself (where a missing argument fails)
    switch: PathCondition = frozenset()  # of `cond`, what its context's switch needs (`disabled=not symm`)
    param_attr: str | None = None  # the attribute of the parameter supplying the group that is the group (`pgs.tp`)
    defaulted: str | None = None  # the group parameter the call leaves out, bound to its default (WORLD)

    @property
    def short_name(self) -> str:
        return self.name.partition("(")[0].rpartition(".")[2]

    @property
    def group_names(self) -> frozenset[str]:
        return frozenset(g for g, _ in self.groups or ())

    @property
    def kind(self) -> str:
        """`context` for a `with` block, `call` for memory returned by a call."""
        return "context" if self.how == "context" and not self.bound_at else "call"


@dataclass(frozen=True)
class GroupFact:
    group: str
    guard: PathCondition = frozenset()


@dataclass(frozen=True)
class SizeFact:
    quantity: str


@dataclass(frozen=True)
class PathFact:
    """A module-level object reached by name: `pkg.mod.func`, or `pkg.mod.func()` for its result."""

    path: str

    @property
    def named(self) -> bool:
        """Whether it is the object itself (a function, a class), not what a call returned."""
        return not self.path.endswith(")")


@dataclass(frozen=True)
class BufferFact:
    allocation: Allocation


@dataclass(frozen=True)
class ContextFact:
    allocation: Allocation


@dataclass(frozen=True)
class ParamFact:
    """The value of the enclosing function's parameter (symbolic, for summaries); `guard` holds
    where the value is the parameter only on some paths (`x = param if c else other`); `attr`,
    that it is this attribute of the parameter (`pgs.tp` of a record of groups), which each
    caller reads from what it passes."""

    index: int
    name: str
    guard: PathCondition = frozenset()
    attr: str | None = None

    @property
    def text(self) -> str:
        """How the code names it: `group`, `pgs.tp`."""
        name = self.name.lstrip("*")
        return f"{name}.{self.attr}" if self.attr else name


@dataclass(frozen=True)
class CondFact:
    """A boolean held in a variable: the literals that hold when it is true, and when false."""

    when_true: frozenset[Literal]
    when_false: frozenset[Literal]


MAX_NESTING = 3  # tuples of tuples deeper than this are not kept by position
MAX_ITEMS = 64  # nor are longer ones (a list grown in a loop)


@dataclass(frozen=True)
class TupleFact:
    """A tuple (or list) whose elements are known by position."""

    items: tuple[frozenset, ...]
    depth: int = field(default=1, compare=False)

    @staticmethod
    def of(items: tuple[frozenset, ...]) -> frozenset:
        """The value of a tuple of `items`: by position, or, nested too deep or too long (a tuple
        rebuilt from itself in a loop), as the union of the buffers and groups in it."""
        inner = [f.depth for item in items for f in item if isinstance(f, TupleFact)]
        depth = 1 + max(inner, default=0)
        if depth <= MAX_NESTING and len(items) <= MAX_ITEMS:
            return frozenset({TupleFact(items, depth)})
        kept: set = set()
        for item in items:
            for f in item:
                kept |= set().union(*f.items) if isinstance(f, TupleFact) else {f}
        return frozenset(f for f in kept if not isinstance(f, TupleFact)) or frozenset({UNKNOWN})


@dataclass(frozen=True)
class CallableFact:
    """A known callable with some arguments already given (`functools.partial(nccl_mem, pool,
    group=g)`): calling or entering it behaves as calling `path` with all the arguments."""

    path: str
    args: tuple[tuple[str | None, frozenset], ...]  # (keyword or None for positional, value)


@dataclass(frozen=True)
class ObjectFact:
    """An instance of a class of the scanned code: its methods resolve to their summaries;
    `fields` holds what a record class (no `__init__` of its own: a `NamedTuple`, a
    dataclass) was given by keyword, read back as its attributes (`ops.fused(...)`)."""

    cls: str
    fields: tuple[tuple[str, frozenset], ...] = ()

    def field(self, name: str) -> frozenset | None:
        return next((value for key, value in self.fields if key == name), None)


@dataclass(frozen=True)
class ConstFact:
    """A constant (`True`, `None`, `4`, `"x"`): a test on it decides its branch."""

    value: object


@dataclass(frozen=True)
class SelfFieldFact:
    """A method returns its receiver's attribute (`return self._group`): to a caller that knows
    the receiver (an instance built here), that instance's field; `RECEIVER` (`return self`,
    a fluent setter) the receiver itself, with what the method stored in it. Only ever in `returns`."""

    attr: str


RECEIVER = ""  # the `SelfFieldFact` of `return self`


@dataclass(frozen=True)
class GlobalFact:
    """A function returns a module global that functions bind (`return _BUFFER`, its qualified
    name): to a caller that bound it before (`set_buffer(buf)`), what it bound. Only ever in `returns`."""

    name: str


@dataclass(frozen=True)
class UnknownFact:
    pass


UNKNOWN = UnknownFact()
Fact = (GroupFact | SizeFact | PathFact | BufferFact | ContextFact | ParamFact | CondFact | TupleFact
        | CallableFact | ObjectFact | ConstFact | SelfFieldFact | GlobalFact | UnknownFact)
Value = frozenset[Fact]
UNKNOWN_VALUE: Value = frozenset({UNKNOWN})


@dataclass(frozen=True)
class Consumption:
    """A bound buffer reaching a collective on some path."""

    allocation: Allocation
    collective: str  # display name of the collective (or of the helper that runs it)
    call: ir.Call
    groups: tuple[Guarded, ...]  # the groups the collective may run on, each with its guard
    cond: PathCondition  # the path to the collective (its guard in the helper included)
    lost: bool = False  # part of a helper's condition could not be read at this call

    @property
    def group_names(self) -> frozenset[str]:
        return frozenset(g for g, _ in self.groups)


@dataclass(frozen=True)
class GroupUse:
    """A collective run on some path, whatever it consumes: the group it runs on and how the
    call chose it (CGL007 compares these with the groups the function was given)."""

    call: ir.Call
    collective: str  # display name of the collective (or of the helper that runs it)
    groups: Value  # what the group argument holds (GroupFacts, ParamFacts, or anything else)
    how: str  # "given" (an argument), "default" (omitted or None: the callee's default), "fixed" (inside a
    # helper), or "unknown" (a call with `*args` whose group argument cannot be told)
    cond: PathCondition
    source: ir.Expr | None = None  # the expression giving the group (the receiver of `group.all_reduce(t)`)
    param: str | None = None  # the keyword that takes the group, when the call takes it as an argument


@dataclass(frozen=True)
class GroupArguments:
    """A call given groups by several keywords (`Comm(cpu_group=a.cpu_group, device_group=b.device_group)`):
    what each keyword holds, for CGL007 to compare those that name the same role."""

    call: ir.Call
    arguments: tuple[tuple[str, Value], ...]  # (keyword, its value: groups only)
    cond: PathCondition


@dataclass(frozen=True)
class ParamCall:
    """A parameter called (`step(local, hidden)`; `callee` its index), or a field of the method's
    record (`self.reduce(x)`; `callee` its name): what it is given, for the summary; the caller
    that passes a callable replays the call with it."""

    callee: int | str
    args: tuple[frozenset, ...]
    cond: PathCondition


@dataclass(frozen=True)
class ParamUse:
    """A parameter's value reaching a collective (for the function's summary)."""

    groups: tuple[Fact, ...]  # GroupFacts (with guards) or ParamFacts (the group comes from a parameter)
    cond: PathCondition
    name: str  # the collective's display name
    objects: bool = False  # by an op taking group-bound objects: it consumes the caller's object, not memory
    on_object: int | None = None  # on the group of the object this parameter holds (`buffer.combine(view)`)


@dataclass
class FunctionFacts:
    """What one function does with groups, for the rules and for summaries."""

    qualname: str
    node: ir.FunctionDef | None
    class_name: str | None
    callable_by_name: bool = False  # a module-level function, or a class's static or class method
    class_qualname: str | None = None
    allocations: list[Allocation] = field(default_factory=list)
    consumptions: list[Consumption] = field(default_factory=list)
    returns: set[Fact] = field(default_factory=set)
    param_uses: dict[int, list[ParamUse]] = field(default_factory=dict)
    param_calls: list[ParamCall] = field(default_factory=list)  # parameters called, with what
    scatter_pairs: list[tuple[Allocation, Allocation | None]] = field(default_factory=list)  # (filled, source)
    spans: dict[int, int] = field(default_factory=dict)  # objects built on the default (by id of their call) -> the parameter giving their rank count
    wanted: set[str] = field(default_factory=set)  # unresolved calls given a buffer, or used as a group
    passes_params_to: set[str] = field(default_factory=set)  # unresolved calls given this function's parameters
    passed_on: set[int] = field(default_factory=set)  # allocations (by id of their call) handed to another call
    stores: dict[str, frozenset] = field(default_factory=dict)  # `self.x` values this method leaves
    global_stores: dict[str, frozenset] = field(default_factory=dict)  # module globals it binds (`global x`), by
    # qualified name, and what the callees it gives arguments bind there
    factory_made: set[int] = field(default_factory=set)  # contexts (by id of their call) a tensor factory allocated in
    group_uses: list[GroupUse] = field(default_factory=list)  # every collective run, with its group
    group_arguments: list[GroupArguments] = field(default_factory=list)  # calls given groups by several keywords
    cells: tuple[str, ...] = ()  # of a nested function, the enclosing function's parameters it closes over,
    # parameters of its own after its declared ones (a returned closure is called with them: see `Calls.local_function`)
    lost: list[tuple[ir.Call, str]] = field(default_factory=list)  # collectives given a value the model lost, and
    # the construct that lost it, in a function that bound memory before (see `Events.note_lost`)
