"""What a call does with groups: one description for the profile's entries and for the
summaries of the scanned code's own helpers.

A `Behaviour` says what a call returns (a group, a size, memory bound to a group, a context
that binds what is allocated in its body, a tuple of these, a flag), which of its arguments
it consumes on which groups and under which conditions, and which arguments it binds or
copies. The dataflow applies it at each call site: parameters are replaced by the
arguments, and the callee's conditions are read in the caller's terms (see
`conditions.Substitution`).
"""

from __future__ import annotations

from dataclasses import dataclass

from commgroup_lint.analysis.conditions import PathCondition
from commgroup_lint.analysis.facts import Guarded


@dataclass(frozen=True)
class ArgRef:
    """A parameter: its keyword name and its position among the call's positional arguments
    (None for keyword-only). `shape` is the attribute of a group the argument is, when the
    API takes a part of the group (`nccl_symm_mem_context(group.pynccl_comm)`); `attr` the
    attribute of the argument meant, when that is what holds the group (`pgs.tp` of a record
    parameter `pgs`, `config.group` of a builder's `config`)."""

    param: str
    index: int | None
    shape: str | None = None
    attr: str | None = None


@dataclass(frozen=True)
class Binding:
    """Which group memory is bound to: fixed inside the callee, or taken from an argument."""

    groups: tuple[Guarded, ...] = ()  # fixed (hidden) groups
    param: ArgRef | None = None  # the group is this argument
    default: tuple[Guarded, ...] = ()  # when the argument is omitted (or None)
    required: bool = True  # omitting the argument is an error (CGL001) when there is no default

    @property
    def hidden(self) -> bool:
        return self.param is None


# What a call may return: each a possibility, all of them together the returned value.

@dataclass(frozen=True)
class Groups:
    groups: tuple[Guarded, ...]
    variants: tuple[tuple[str, tuple[Guarded, ...]], ...] = ()  # ("keyword=value", groups) for getters with arguments


@dataclass(frozen=True)
class NewGroup:
    """A new group at every call (`torch.distributed.new_group`)."""


@dataclass(frozen=True)
class Argument:
    """The argument itself (a helper that returns what it is given, a group wrapper)."""

    arg: ArgRef


@dataclass(frozen=True)
class Size:
    quantity: str


@dataclass(frozen=True)
class Memory:
    """Memory bound to a group: from an allocator, or made inside a helper that binds it."""

    binding: Binding
    how: str  # "allocator", "context" or "registration"
    origin: str | None = None  # "path:line" where a helper binds it
    cond: PathCondition = frozenset()  # in the callee's terms: when the memory is bound at all
    via: str | None = None  # "path:line" where the helper took it from a deeper helper
    chosen: bool = False  # that call chose the group (passed one of its own to the deeper helper)
    peers: tuple[ArgRef, ...] = ()  # a builder's other arguments carrying a group, which must be the object's
    span: ArgRef | None = None  # a builder's argument giving how many ranks the object spans (`world_size`)
    defaulted: str | None = None  # the builder's group parameter left out: the object is on its default


@dataclass(frozen=True)
class Context:
    """A context manager binding every tensor made in its body."""

    binding: Binding
    disabled: str | None = None  # keyword turning it off when True
    enabled: str | None = None  # keyword turning it off when False
    origin: str | None = None


@dataclass(frozen=True)
class PoolContext:
    """A context allocating from a memory pool (`torch.cuda.use_mem_pool(pool)`): what its body
    makes is bound to the groups the pool is bound to, wherever that happens."""

    pool: ArgRef


@dataclass(frozen=True)
class Flag:
    when_true: PathCondition
    when_false: PathCondition


@dataclass(frozen=True)
class Constant:
    value: object


@dataclass(frozen=True)
class Partial:
    """`functools.partial(path, ...)`: a callable with some arguments given (each its possibilities)."""

    path: str
    args: tuple[tuple[str | None, tuple[Returned, ...]], ...]


@dataclass(frozen=True)
class Instance:
    """An instance of a class of the scanned code (with what a record class holds by field)."""

    cls: str
    fields: tuple[tuple[str, tuple[Returned, ...]], ...] = ()


@dataclass(frozen=True)
class SelfAttribute:
    """The receiver's attribute (a getter, a property): what the caller's instance holds there."""

    attr: str


@dataclass(frozen=True)
class Global:
    """A module global (its qualified name): what the caller bound there, if it did."""

    name: str


@dataclass(frozen=True)
class Items:
    items: tuple[tuple[Returned, ...], ...]


Returned = (Groups | NewGroup | Argument | Size | Memory | Context | PoolContext | Flag | Constant | Partial | Instance
            | SelfAttribute | Global | Items)


@dataclass(frozen=True)
class Consume:
    """An argument consumed by a collective: on fixed groups, or on the group another argument
    gives (its default when omitted), under a condition in the callee's terms."""

    buffer: ArgRef | None  # None: every argument except the group's
    groups: tuple[Guarded, ...] = ()
    group: ArgRef | None = None
    default: tuple[Guarded, ...] = ()
    cond: PathCondition = frozenset()
    name: str | None = None  # the collective's display name, when not the callee's
    on_object: ArgRef | None = None  # without `group`: it runs on the group of the object this argument holds
    objects: bool = False  # it consumes only objects bound to a group (a workspace), not memory (see `profile_objects`)


@dataclass(frozen=True)
class CallsParam:
    """A callable argument (`param`), or a callable field of the receiver, a record (`field`),
    called with these arguments (each its possibilities), under a condition in the callee's
    terms: a caller passing a known function (or a record holding one) makes that call."""

    param: ArgRef | None
    args: tuple[tuple[Returned, ...], ...]
    cond: PathCondition = frozenset()
    field: str | None = None


@dataclass(frozen=True)
class Register:
    """The argument's memory becomes bound (`rendezvous(tensor, group)`)."""

    buffer: ArgRef
    binding: Binding


@dataclass(frozen=True)
class BindPool:
    """The pool argument becomes bound to the group (or each of the groups) another argument gives."""

    pool: ArgRef
    groups: ArgRef | None  # None: the receiver's group (`backend.register_mem_pool(pool)`)


@dataclass(frozen=True)
class Behaviour:
    returns: tuple[Returned, ...] = ()  # empty: unknown
    consumes: tuple[Consume, ...] = ()
    copies: tuple[tuple[ArgRef, ArgRef], ...] = ()  # (destination, source): a local copy, not a collective
    registers: tuple[Register, ...] = ()
    binds_pools: tuple[BindPool, ...] = ()
    keeps: tuple[Memory, ...] = ()
    """Memory it binds to a group its caller gives and keeps (on `self`, in a global) rather than
    returns: each call binds memory to the caller's group (`Buffer(process_group=tp)`)."""
    calls_params: tuple[CallsParam, ...] = ()
    stores: tuple[tuple[str, tuple[Returned, ...]], ...] = ()
    """What a constructor leaves in the new instance's attributes (`self.group = group`), by
    attribute, in the callee's terms: the instance's fields at each call."""
    globals: tuple[tuple[str, tuple[Returned, ...]], ...] = ()
    """The arguments it binds to module globals (`global x; x = group`), by qualified name:
    each call binds there what it passes, which a getter of the global returns to that caller."""
    origin: str | None = None  # where the scanned code defines it

    @property
    def empty(self) -> bool:
        return not (self.returns or self.consumes or self.copies or self.registers or self.binds_pools or self.keeps
                    or self.calls_params or self.stores or self.globals)

    def allocator(self) -> Memory | None:
        """The memory this call returns, when it is an allocation API."""
        return next((r for r in self.returns if isinstance(r, Memory)), None)

    def context(self) -> Context | None:
        return next((r for r in self.returns if isinstance(r, Context)), None)


@dataclass(frozen=True)
class Entry:
    """What a qualified name means: calling it (`call`), or reading it (`value`)."""

    call: Behaviour | None = None
    value: tuple[Returned, ...] = ()
