"""What the parts of `FunctionFlow` share: the state of one function's walk, and the methods
each part calls of another (declared here, defined by the part whose job it is)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager

from commgroup_lint.analysis import behaviour as b
from commgroup_lint.analysis import ir
from commgroup_lint.analysis.api import Api
from commgroup_lint.analysis.conditions import Branches, Literal, PathCondition, Substitution
from commgroup_lint.analysis.facts import (
    Allocation,
    BufferFact,
    Fact,
    FunctionFacts,
    GroupFact,
    ObjectFact,
    ParamFact,
    Value,
)
from commgroup_lint.analysis.flow.arguments import Arguments
from commgroup_lint.analysis.flow.state import MEMBER, Env, Scope, reference_key


class FlowBase(ABC):
    """The walk's state: the environment, the path condition, the contexts open, and what the
    function's facts collect."""

    def __init__(
        self,
        api: Api,
        scope: Scope,
        facts: FunctionFacts,
        params: Sequence[ir.Param] = (),
        seed: Env | None = None,
    ) -> None:
        self.api, self.scope, self.imports, self.facts = api, scope, scope.imports, facts
        self.env: Env = dict(seed or {})
        self.params: dict[str, int] = {}
        self.self_name: str | None = None
        for i, p in enumerate(params):
            name = p.name.lstrip("*")
            if i == 0 and scope.is_method:
                self.self_name = name
                continue
            self.env[name] = frozenset({ParamFact(i, p.name)})
            self.params[name] = i
        self.cond: PathCondition = frozenset()
        self.contexts: list[Allocation] = []
        self._call_values: dict[int, Value] = {}  # a call's value, by node: `if helper():` reads its flag
        self.statement: ir.Span = ir.NO_SPAN
        self._allocations: dict[tuple[int, str], Allocation] = {}
        self._seen: set[tuple] = set()
        self._bindings: dict[str, int] = {}  # how often each name (or `self.x`) was bound: see `choice_site`
        self._replays = 0  # calls replayed inside one another (`f(f, x)` where `f` calls its step)
        self._jumps: list[dict[str, list[Env]]] = []  # per enclosing loop: the envs at each `break`/`continue`
        self._local_functions: dict[str, ir.FunctionDef] = {}  # defined in this body (`def`, `lambda`), by path
        self._inlined = 0  # how many calls of local functions enclose this flow (see `inline`)
        self._yielded: set[Fact] | None = None  # what a generator function yields, once it has yielded
        self._yield_contexts: set[Fact] = set()  # the contexts open at its yields
        self._sources: dict[str, ir.Expr] = {}  # the expression each name (or `self.x`) was last bound from
        self.members: set[str] = {k for k in self.env if MEMBER in k}  # keys of members stored here (see `stores`)

    def on_self(self, e: ir.Expr) -> bool:
        """Whether `e` is an attribute of the analysed object (`self.x`)."""
        return isinstance(e, ir.Attr) and reference_key(e, self.self_name) is not None

    def reference_key(self, e: ir.Expr | None) -> str | None:
        """The environment's key of a reference the flow tracks (`x`, `self.x`), else None."""
        return reference_key(e, self.self_name)

    # what each part defines for the others ------------------------------------------------
    # statements
    @abstractmethod
    def run(self, body: Iterable[ir.Stmt]) -> None: ...

    @abstractmethod
    def entered(self, manager: Value, expr: ir.Expr, enter: str = "__enter__") -> Value: ...

    @abstractmethod
    def bind(self, target: ir.Expr, value: Value, source: ir.Expr | None) -> None: ...

    @abstractmethod
    def grow(self, target: ir.Expr, value: Value) -> None: ...

    @abstractmethod
    def store_global(self, name: str, value: Value) -> None: ...

    # stores
    @abstractmethod
    def store(self, target: ir.Expr, value: Value) -> None: ...

    @abstractmethod
    def member_reference(self, e: ir.Expr) -> str | None: ...

    @abstractmethod
    def forget_members(self, key: str) -> None: ...

    @abstractmethod
    def unpack_starred(self, targets: tuple[ir.Expr, ...], items: tuple[Value, ...]) -> bool: ...

    # expressions
    @abstractmethod
    def eval(self, e: ir.Expr) -> Value: ...

    @abstractmethod
    def named(self, value: Value, e: ir.Expr) -> Value: ...

    @abstractmethod
    def attribute(self, e: ir.Attr) -> Value: ...

    @abstractmethod
    def attribute_of(self, base: Value, attr: str, e: ir.Attr | None = None) -> Value: ...

    @abstractmethod
    def path_value(self, path: str) -> set[Fact]: ...

    @abstractmethod
    def builtin(self, func: ir.Expr) -> str | None: ...

    # library
    @abstractmethod
    def library_call(self, c: ir.Call, args: list[Value]) -> Value | None: ...

    @abstractmethod
    def updated_dict(self, held: Value, method: str, c: ir.Call, args: list[Value]) -> Value: ...

    @abstractmethod
    def container_method(self, f: Fact, method: str, c: ir.Call, args: list[Value]) -> Value | None: ...

    # calls
    @abstractmethod
    def call(self, c: ir.Call) -> Value: ...

    @abstractmethod
    def made_in_contexts(self, result: set[Fact], c: ir.Call | None = None) -> Value: ...

    @abstractmethod
    def call_value(self, value: Value, c: ir.Call, args: list[Value], callee: ir.Expr | None,
                   replayed: bool = False) -> set[Fact]: ...

    @abstractmethod
    def assuming(self, literals: Iterable[Literal]) -> AbstractContextManager[None]: ...

    @abstractmethod
    def note_call(self, callee: int | str, args: list[Value], guard: PathCondition = frozenset()) -> None: ...

    @abstractmethod
    def record_fields(self) -> tuple[str, ...]: ...

    @abstractmethod
    def record_item(self, record: ObjectFact, position: int) -> Value: ...

    @abstractmethod
    def local_function(self, fn: ir.FunctionDef) -> Value: ...

    @abstractmethod
    def call_path(self, path: str, c: ir.Call, args: list[Value], receiver: str | None,
                  bound: tuple[tuple[str | None, Value], ...] = (), record: object = None) -> set[Fact]: ...

    @abstractmethod
    def resolve_method(self, method: str, cls: str | None = None, skip_own: bool = False) -> str | None: ...

    @abstractmethod
    def is_property(self, attr: str, cls: str) -> bool: ...

    # effects
    @abstractmethod
    def substitution(self, arguments: Arguments, receiver: str | None, record: object = None) -> Substitution: ...

    @abstractmethod
    def apply_effects(self, behaviour: b.Behaviour, path: str, c: ir.Call, arguments: Arguments,
                      sub: Substitution) -> None: ...

    @abstractmethod
    def replay_calls(self, behaviour: b.Behaviour, path: str, c: ir.Call, arguments: Arguments,
                     sub: Substitution, record: object) -> None: ...

    @abstractmethod
    def instantiate_all(self, items: Iterable[b.Returned], path: str, c: ir.Call | None, arguments: Arguments,
                        sub: Substitution | None = None) -> set[Fact]: ...

    # events
    @abstractmethod
    def argument(self, arguments: Arguments, ref: b.ArgRef) -> Value | None: ...

    @abstractmethod
    def argument_expr(self, arguments: Arguments, ref: b.ArgRef) -> ir.Expr | None: ...

    @abstractmethod
    def as_group(self, value: Value, expr: ir.Expr | None) -> Value: ...

    @abstractmethod
    def group_text(self, expr: ir.Expr) -> str | None: ...

    @abstractmethod
    def allocate(self, how: str, name: str, c: ir.Call, arguments: Arguments, binding: b.Binding,
                 origin: str | None, cond: PathCondition = frozenset(), hidden: bool | None = None,
                 via: tuple[str | None, bool] = (None, False), params: frozenset[int] = frozenset(),
                 switch: PathCondition = frozenset(),
                 param_attr: str | None = None, defaulted: str | None = None) -> Allocation | None: ...

    @abstractmethod
    def register(self, register: b.Register, path: str, c: ir.Call, arguments: Arguments) -> None: ...

    @abstractmethod
    def group_method(self, group: GroupFact | ParamFact, method: str, c: ir.Call, args: list[Value]) -> set[Fact]: ...

    @abstractmethod
    def bind_pool(self, pool: ir.Expr | None, groups: Value | None) -> None: ...

    @abstractmethod
    def builder_groups(self, allocation: Allocation, peers: tuple[b.ArgRef, ...], span: b.ArgRef | None, c: ir.Call,
                 arguments: Arguments) -> None: ...

    @abstractmethod
    def group_size(self, group: GroupFact) -> Fact: ...

    @abstractmethod
    def consume(self, c: ir.Call, value: Value, group_value: Value, name: str,
                extra: PathCondition, lost: bool, objects: bool = False) -> None: ...

    @abstractmethod
    def is_object_method(self, method: str) -> bool: ...

    @abstractmethod
    def object_param_method(self, obj: ParamFact, method: str, args: list[Value]) -> None: ...

    @abstractmethod
    def object_method(self, obj: BufferFact, method: str, c: ir.Call, args: list[Value]) -> set[Fact]: ...

    @abstractmethod
    def object_groups(self, value: Value) -> Value: ...

    @abstractmethod
    def note_group_use(self, c: ir.Call, name: str, groups: Value, how: str, extra: PathCondition = frozenset(),
                       source: ir.Expr | None = None, param: str | None = None) -> None: ...

    @abstractmethod
    def class_info(self, cls: str) -> tuple | None: ...

    @abstractmethod
    def note_lost(self, c: ir.Call, value: Value, expr: ir.Expr | None) -> None: ...

    @abstractmethod
    def deciding_helpers(self) -> set[str]: ...

    @abstractmethod
    def want_groups(self, value: Value) -> None: ...

    @abstractmethod
    def local_copy(self, dst: Value | None, src: Value | None) -> None: ...

    # literals
    @abstractmethod
    def literals(self, test: ir.Expr) -> Branches: ...

    @abstractmethod
    def operand(self, e: ir.Expr) -> str | None: ...
