"""The abstract values of the group dataflow and the events it records."""

from __future__ import annotations

from dataclasses import dataclass, field

from commgroup_lint.analysis import ir

# A path condition literal: (normalised condition text, whether it holds).
Literal = tuple[str, bool]
PathCondition = frozenset[Literal]


@dataclass(frozen=True, eq=False)
class Allocation:
    """One place memory is bound to a group: an allocator call or a symmetric-memory context."""

    kind: str  # "call" or "context"
    name: str  # the allocator's or context manager's qualified name
    call: ir.Call
    groups: frozenset[str] | None  # None when the group is not known from the code
    group_params: frozenset[int] = frozenset()  # the enclosing function's parameters that supply the group
    missing_param: str | None = None  # the group parameter the call leaves out
    hidden_origin: str | None = None  # where a helper that hides the group fixes it
    function: str = ""  # qualified name of the enclosing function
    class_name: str | None = None
    cond: PathCondition = frozenset()
    statement: ir.Span = ir.NO_SPAN  # the statement holding the call (a fix may insert before it)

    @property
    def short_name(self) -> str:
        return self.name.rpartition(".")[2]


@dataclass(frozen=True)
class GroupFact:
    group: str


@dataclass(frozen=True)
class SizeFact:
    quantity: str


@dataclass(frozen=True)
class PathFact:
    """A module-level object reached by name: `pkg.mod.func`, or `pkg.mod.func()` for its result."""

    path: str


@dataclass(frozen=True)
class BufferFact:
    allocation: Allocation


@dataclass(frozen=True)
class ContextFact:
    allocation: Allocation


@dataclass(frozen=True)
class ParamFact:
    """The value of the enclosing function's parameter (symbolic, for summaries)."""

    index: int
    name: str


@dataclass(frozen=True)
class CondFact:
    """A boolean held in a variable: the literals that hold when it is true, and when false."""

    when_true: frozenset[Literal]
    when_false: frozenset[Literal]


@dataclass(frozen=True)
class UnknownFact:
    pass


UNKNOWN = UnknownFact()
Fact = GroupFact | SizeFact | PathFact | BufferFact | ContextFact | ParamFact | CondFact | UnknownFact
Value = frozenset[Fact]
UNKNOWN_VALUE: Value = frozenset({UNKNOWN})


@dataclass(frozen=True)
class Consumption:
    """A bound buffer reaching a collective on some path."""

    allocation: Allocation
    collective: str  # display name of the collective
    call: ir.Call
    groups: frozenset[str]  # the groups the collective can run on
    binding: frozenset[str]  # the groups the buffer can be bound to on this path


@dataclass
class FunctionFacts:
    """What one function does with groups, for the rules and for summaries."""

    qualname: str
    node: ir.FunctionDef | None
    class_name: str | None
    callable_by_name: bool = False  # a module-level function, or a class's static or class method
    allocations: list[Allocation] = field(default_factory=list)
    consumptions: list[Consumption] = field(default_factory=list)
    returns: set[Fact] = field(default_factory=set)
    param_consumers: dict[int, frozenset[str]] = field(default_factory=dict)
    param_consumer_names: dict[int, str] = field(default_factory=dict)
    scatter_pairs: list[tuple[Allocation, Allocation | None]] = field(default_factory=list)  # (filled, source)
    wanted: set[str] = field(default_factory=set)  # unresolved calls given a buffer, or used as a group
    passes_params_to: set[str] = field(default_factory=set)  # unresolved calls given this function's parameters
    passed_on: set[int] = field(default_factory=set)  # allocations (by id of their call) handed to another call
    factory_made: set[int] = field(default_factory=set)  # contexts (by id of their call) a tensor factory allocated in
