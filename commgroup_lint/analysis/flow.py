"""The group dataflow: an abstract interpreter over one function's IR.

It walks statements in order, following the control flow (branches are analysed apart and
joined; loops run to a fixpoint of two passes; `return`/`raise` end a path), and tracks for
every variable and every attribute of `self` which groups, world sizes, bound buffers,
contexts, callables and flags it may hold. Each `if` adds a literal to the path condition,
and a group chosen inside a branch keeps that branch's literals as its guard, so a buffer
bound under `c` is never compared with a consumer under `not c`.

Every call is looked up in the `Api` (the profile's entries and the scanned code's
summaries) and its `Behaviour` applied: arguments replace parameters, the callee's
conditions are read in the caller's terms, and what it consumes is recorded.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache

from commgroup_lint.analysis import behaviour as b
from commgroup_lint.analysis import ir
from commgroup_lint.analysis.api import Api
from commgroup_lint.analysis.conditions import (
    GLOBAL,
    LOCAL,
    PARAM,
    QUANTITY,
    SELF,
    Branches,
    Literal,
    PathCondition,
    Substitution,
    choice_key,
    constant_operand,
    contradicts,
    key_operands,
    mentions,
    operand_scope,
    relation_key,
)
from commgroup_lint.analysis.facts import (
    FRESH,
    SYMBOLIC,
    UNKNOWN,
    UNKNOWN_VALUE,
    Allocation,
    BufferFact,
    CallableFact,
    CondFact,
    ConstFact,
    Consumption,
    ContextFact,
    Fact,
    FunctionFacts,
    GroupArguments,
    GroupFact,
    GroupUse,
    Guarded,
    ObjectFact,
    ParamCall,
    ParamFact,
    ParamUse,
    PathFact,
    SelfFieldFact,
    SizeFact,
    TupleFact,
    Value,
    held_by,
    new_group,
)
from commgroup_lint.analysis.names import ImportTable

# Tensor methods whose result shares the receiver's storage (a view keeps the binding).
VIEW_METHODS = frozenset({
    "view", "view_as", "contiguous", "narrow", "reshape", "flatten", "unflatten", "as_strided",
    "transpose", "t", "permute", "squeeze", "unsqueeze", "expand", "select", "split", "chunk",
    "tensor_split", "unbind", "detach", "movedim",
})
# Tensor methods that work in place and return the receiver.
IN_PLACE_METHODS = frozenset({"copy_", "fill_", "zero_", "add_", "mul_", "masked_fill_", "div_", "sub_", "clamp_"})
_PARTIAL = frozenset({"functools.partial"})
_LIST_GROWING = frozenset({"append", "extend", "insert"})
# Collective method names a tensor has too (`logits.gather(dim, index)`): on a parameter not known
# to be a group, not taken for a collective.
TENSOR_COLLECTIVE_NAMES = frozenset({"gather", "scatter"})
_SUPER = "super"

Env = dict[str, Value]


def join(a: Env, *others: Env) -> Env:
    out = dict(a)
    for other in others:
        for key, value in other.items():
            if key in out and out[key] is not value:
                out[key] = merge_guards(out[key] | value)
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


def _guarded_key(f: GroupFact | ParamFact) -> object:
    return f.group if isinstance(f, GroupFact) else f.index


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
            out.append((SYMBOLIC + f.name.lstrip("*"), f.guard))
        else:
            return None
    return tuple(sorted(set(out), key=lambda g: (g[0], sorted(g[1]))))


def known_groups(value: Value) -> frozenset[str] | None:
    found = guarded_groups(value)
    return None if found is None else frozenset(g for g, _ in found)


def scoped(literals: Iterable[Literal], keep: tuple[str, ...]) -> frozenset[Literal]:
    """The literals whose operands are all of the given scopes (constants always kept)."""
    from commgroup_lint.analysis.conditions import key_operands

    return frozenset(
        lit for lit in literals
        if all(operand_scope(o) in keep or operand_scope(o) == "const" for o in key_operands(lit[0]))
    )


PORTABLE = (QUANTITY, GLOBAL, SELF, PARAM)  # literals a summary can carry (locals mean nothing elsewhere)


@dataclass(frozen=True)
class _Fork:
    """An undecided `if` whose body was walked, waiting for its `else` (see `FunctionFlow.branch`)."""

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


class FunctionFlow:
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

    # statements ------------------------------------------------------------------
    def run(self, body: Iterable[ir.Stmt]) -> None:
        self.block(body)
        if self._yielded is not None:  # a generator function returns the sequence of what it yields,
            # and, used as a `with` manager (`@contextmanager`), the contexts open where it yields
            self.facts.returns = set(TupleFact.of((frozenset(self._yielded),))) | self._yield_contexts
        self.facts.allocations = sorted(self._allocations.values(), key=lambda a: (a.call.span.line, a.call.span.col))
        self.facts.wanted |= self.deciding_helpers()

    def block(self, body: Iterable[ir.Stmt]) -> bool:
        """Execute statements; False when every path through them leaves the block."""
        for stmt in body:
            if not self.stmt(stmt):
                return False
        return True

    def stmt(self, s: ir.Stmt) -> bool:
        if not isinstance(s, (ir.Try, ir.FunctionDef, ir.ClassDef)):  # these evaluate nothing before their blocks
            self.statement = s.span  # an `if`/`for`/`with` header runs first: a fix may insert before it
        if isinstance(s, ir.Assign):
            value = self.eval(s.value)
            for target in s.targets:
                self.bind(target, value, s.value)
        elif isinstance(s, ir.ExprStmt):
            self.eval(s.value)
        elif isinstance(s, ir.If):
            return self.branch(s.test, s.body, s.orelse)
        elif isinstance(s, ir.Loop):
            self.loop(s)
        elif isinstance(s, ir.With):
            return self.with_(s)
        elif isinstance(s, ir.Try):
            return self.try_(s)
        elif isinstance(s, ir.Assert):
            self.eval(s.test)
            self.cond = self.cond | self.literals(s.test)[0]
        elif isinstance(s, ir.Return):
            if s.value is not None:  # `return tp_size == attn_dp_size and ...`: a flag keeps its relation
                self.facts.returns.update(self.guard(self.flag_value(self.eval(s.value), s.value), self.cond))
                if (key := self.reference_key(s.value)) is not None and key.startswith("self."):
                    self.facts.returns.add(SelfFieldFact(key.removeprefix("self.")))  # a getter
            return False
        elif isinstance(s, ir.Jump):
            if s.kind in ("break", "continue") and self._jumps:
                self._jumps[-1][s.kind].append(dict(self.env))
            return False
        elif isinstance(s, ir.FunctionDef):
            self.env[s.name] = self.local_function(s)
        elif isinstance(s, ir.ClassDef):
            self.env[s.name] = UNKNOWN_VALUE  # analysed on its own
        elif isinstance(s, ir.Import) and self.facts.node is not None:
            # an import inside a function binds its name on this path only (two branches may
            # import two modules' `mhc_pre` under one name)
            for name in s.names:
                if name.name != "*":
                    self.env[name.asname] = frozenset(self.path_value(self.imports.qualify_import(name)))
        elif isinstance(s, ir.OtherStmt):
            for e in s.exprs:
                self.eval(e)
        return True

    def branch(self, test: ir.Expr, body: Sequence[ir.Stmt], orelse: Sequence[ir.Stmt]) -> bool:
        """An `if` and its `elif`s, walked in a loop rather than by recursing once per `elif` (a
        chain of thousands is valid Python): each undecided test forks the path, and the forks
        join again from the last `elif` back to the `if`, as nested `if`s would."""
        forks: list[_Fork] = []
        while True:
            self.eval(test)
            if self.facts.allocations:
                self.want_flags(test)
            decided = self.decided(test)
            if decided:  # `if not norm_fused:` where norm_fused is False: one branch runs
                through = self.block(body)
                break
            if decided is None:
                when_true, when_false = self.literals(test)
                start_env, start_cond = self.env, self.cond
                empty = _emptiness_test(test)  # (variable, whether the test is true when it is empty)
                self.env, self.cond = _emptied(start_env, empty, True), start_cond | when_true
                through_body = self.block(body)
                forks.append(_Fork(start_cond, when_true, when_false, through_body, self.env))
                self.env, self.cond = _emptied(start_env, empty, False), start_cond | when_false
            chained = orelse[0] if len(orelse) == 1 and isinstance(orelse[0], ir.If) else None
            if chained is None:
                through = self.block(orelse)
                break
            self.statement = chained.span
            test, body, orelse = chained.test, chained.body, chained.orelse
        for fork in reversed(forks):
            through = self.join_fork(fork, through)
        return through

    def join_fork(self, fork: _Fork, through_else: bool) -> bool:
        """The paths through an `if` joined, its `else` just walked (`self.env`)."""
        body_env, else_env = fork.body_env, self.env
        if fork.through_body and through_else:
            body_env, else_env = self.guarded(body_env, else_env, fork.when_true), self.guarded(else_env, body_env, fork.when_false)
            self.env, self.cond = join(body_env, else_env), fork.start_cond
        elif fork.through_body:
            self.env, self.cond = body_env, fork.start_cond | fork.when_true
        elif through_else:
            self.env, self.cond = else_env, fork.start_cond | fork.when_false
        else:
            self.env, self.cond = join(body_env, else_env), fork.start_cond
        return fork.through_body or through_else

    def want_flags(self, test: ir.Expr) -> None:
        """A helper tested where this function binds memory may decide which group consumes it
        (`if should_use_dp_reduce_scatterv():` holds only when `tp_size == attn_dp_size`): its
        summary is wanted, so that the index reads its module."""
        if isinstance(test, ir.BoolOp):
            for value in test.values:
                self.want_flags(value)
        elif isinstance(test, ir.Not):
            self.want_flags(test.operand)
        elif isinstance(test, ir.Call):
            for f in self._call_values.get(id(test), ()):
                if isinstance(f, PathFact) and f.path.endswith("()"):
                    self.facts.wanted.add(f.path[:-2])

    def decided(self, test: ir.Expr) -> bool | None:
        """The test's truth when it is a constant, or a variable that holds only one."""
        if isinstance(test, ir.Const):
            return bool(test.value)
        if isinstance(test, ir.Not):
            inner = self.decided(test.operand)
            return None if inner is None else not inner
        if isinstance(test, ir.Name) and test.id in self.env:
            value = self.env[test.id]
            if len(value) == 1 and isinstance(next(iter(value)), ConstFact):
                return bool(next(iter(value)).value)  # type: ignore[union-attr]
        return None

    def guarded(self, env: Env, other: Env, literals: frozenset[Literal]) -> Env:
        """A group (or memory) one branch leaves in a variable the other branch sets differently
        carries the branch's literals (`group = tp if cond else attn_tp`; `if n: h = attn(h)`
        leaves the buffer in `h` only where `n` is false)."""
        if not literals:
            return env
        out = dict(env)
        for key, value in env.items():
            if other.get(key) is not value and any(isinstance(f, _GUARDED) for f in value):
                out[key] = frozenset(self.guard_memory(self.guard(value, literals), literals))
        return out

    @staticmethod
    def guard(value: Value, literals: Iterable[Literal]) -> set[Fact]:
        literals = frozenset(literals)
        if not literals or not any(isinstance(f, (GroupFact, ParamFact)) for f in value):
            return set(value)
        return {replace(f, guard=f.guard | literals) if isinstance(f, (GroupFact, ParamFact)) else f for f in value}

    @staticmethod
    def guard_memory(value: Iterable[Fact], literals: frozenset[Literal]) -> set[Fact]:
        """The value with its memory bound only where `literals` hold (its allocation's condition)."""
        return {BufferFact(replace(f.allocation, cond=f.allocation.cond | literals))
                if isinstance(f, BufferFact) and not literals <= f.allocation.cond else f for f in value}

    def loop(self, s: ir.Loop) -> None:
        iterated = self.eval(s.iter)
        start_env, start_cond = self.env, self.cond
        # while: the test holds inside the body
        body_cond = start_cond | self.literals(s.iter)[0] if s.target is None else start_cond
        jumps: dict[str, list[Env]] = {"break": [], "continue": []}
        self._jumps.append(jumps)
        element = iterated_elements(iterated)
        varying = _assigned_names(s)
        for _ in range(2):  # a second pass only when the first changed what the loop starts with
            before = self.env
            self.cond = body_cond
            if s.target is not None:
                self.bind(s.target, element, None)
            through = self.block(s.body)
            self.env = join(start_env, *([self.env] if through else []), *jumps["continue"])
            # around the back edge, what the last iteration tested of its own variables no longer holds
            self.env = {k: _forget(v, varying) for k, v in self.env.items()}
            if self.env == before:
                break
        self._jumps.pop()
        self.cond = start_cond
        self.block(s.orelse)
        self.env = join(self.env, *jumps["break"])

    def with_(self, s: ir.With) -> bool:
        depth = len(self.contexts)
        for item in s.items:
            value = self.eval(item.context)
            self.contexts.extend(f.allocation for f in value if isinstance(f, ContextFact))
            if item.target is not None:
                self.bind(item.target, self.entered(value, item.context), None)
        try:
            return self.block(s.body)
        finally:
            del self.contexts[depth:]  # also what `stack.enter_context(...)` entered inside

    def entered(self, manager: Value, expr: ir.Expr) -> Value:
        """What `with manager as x` binds: what the manager's `__enter__` returns (a class of the
        scanned code's), what a generator-based manager yields, `nullcontext(x)`'s `x`."""
        call = expr if isinstance(expr, ir.Call) else None
        out: set[Fact] = set()
        for f in manager:
            if isinstance(f, ObjectFact) and f.cls == _NULL_CONTEXT:
                out |= f.field("enter_result") or _NONE_VALUE
            elif isinstance(f, ObjectFact) and call is not None and (method := self.resolve_method("__enter__", f.cls)):
                out |= self.call_path(method, call, [], None, record=f)
            elif isinstance(f, TupleFact):  # a generator: `@contextmanager` enters what it yields
                out |= iterated_elements(frozenset({f}))
            else:
                out.add(UNKNOWN)
        return frozenset(out) or UNKNOWN_VALUE

    def try_(self, s: ir.Try) -> bool:
        start_env = self.env
        through = self.block(s.body) and self.block(s.orelse)
        raised = join(start_env, self.env)  # each handler may start anywhere in the body, none after another
        ends: list[Env] = [self.env] if through else []
        for handler in s.handlers:
            self.env = dict(raised)
            if self.block(handler):
                ends.append(self.env)
                through = True
        if ends:
            self.env = join(*ends)
        return self.block(s.finalbody) and through

    def bind(self, target: ir.Expr, value: Value, source: ir.Expr | None) -> None:
        key = self.reference_key(target)
        if key is not None:
            value = self.flag_value(value, source)
            value = _held(value, key)
            self.env[key] = value
            self._bindings[key] = self._bindings.get(key, 0) + 1
            if key.startswith("self."):
                previous = self.facts.stores.get(key, frozenset())
                self.facts.stores[key] = previous | value
        elif isinstance(target, ir.TupleExpr):
            if isinstance(source, ir.TupleExpr) and len(source.elts) == len(target.elts) and not _starred(source):
                values = [self.eval(e) for e in source.elts]  # every right-hand side before any binding
                for t, v, e in zip(target.elts, values, source.elts):
                    self.bind(t, v, e)
                return
            tuples = [f for f in value if isinstance(f, TupleFact) and len(f.items) == len(target.elts)]
            if tuples and not _starred(target):
                for i, t in enumerate(target.elts):
                    self.bind(t, frozenset().union(*(f.items[i] for f in tuples)), None)
                return
            # a call returning several tensors (`h, r = norm(h, r)`, `a, b = x.split(n)`): each keeps the bindings
            element = frozenset(f for f in flatten(value) if isinstance(f, (BufferFact, ParamFact))) or UNKNOWN_VALUE
            for t in target.elts:
                self.bind(t.value if isinstance(t, ir.Starred) else t, element, None)

    def grow(self, target: ir.Expr, value: Value) -> None:
        """`groups.append(g)`: the list holds one more element."""
        key = self.reference_key(target)
        held = self.env.get(key) if key is not None else None
        if key is None or held is None:
            return
        grown = frozenset(g for f in held for g in (TupleFact.of(f.items + (value,)) if isinstance(f, TupleFact) else {f}))
        if len(grown) > MAX_LISTS:  # one list per subset of the branches that appended: kept as their elements
            grown = frozenset(g for f in grown for g in (set().union(*f.items) if isinstance(f, TupleFact) else {f}))
        self.env[key] = grown
        if key.startswith("self."):
            self.facts.stores[key] = self.facts.stores.get(key, frozenset()) | grown

    def flag_value(self, value: Value, source: ir.Expr | None) -> Value:
        """A boolean expression keeps its literals (`use_x = a and not b`, `x if x is not None else c`)."""
        if isinstance(source, (ir.BoolOp, ir.Compare, ir.Not)) and not _holds_memory_or_group(value):
            return frozenset({CondFact(*self.literals(source))}) | value
        if isinstance(source, ir.IfExpr) and not _holds_memory_or_group(value):
            default = _none_default(source)
            if default is not None:
                return frozenset({CondFact(*self.literals(default))}) | value
        return value

    # expressions -----------------------------------------------------------------
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
            return merge_guards(frozenset(self.guard(self.eval(e.body), when_true) | self.guard(self.eval(e.orelse), when_false)))
        if isinstance(e, ir.TupleExpr):
            items = tuple(self.element(elt) for elt in e.elts)
            if _starred(e):
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
            value = self.eval(e.value) if e.value is not None else _NONE_VALUE
            self._yielded = (self._yielded or set()) | (iterated_elements(value) if e.every else value)
            self._yield_contexts |= {ContextFact(a) for a in self.contexts}
            return UNKNOWN_VALUE  # what the generator's caller sends in
        elif isinstance(e, ir.OtherExpr):
            for sub in e.children:
                self.eval(sub)
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

    def on_self(self, e: ir.Expr) -> bool:
        return isinstance(e, ir.Attr) and isinstance(e.value, ir.Name) and e.value.id == self.self_name \
            and self.self_name is not None

    def reference_key(self, e: ir.Expr | None) -> str | None:
        """The environment's key of a reference the flow tracks (`x`, `self.x`), else None."""
        if isinstance(e, ir.Name):
            return e.id
        if isinstance(e, ir.Attr) and self.on_self(e):
            return f"self.{e.attr}"
        return None

    def attribute(self, e: ir.Attr) -> Value:
        if self.on_self(e):
            key = f"self.{e.attr}"
            if key in self.env:
                return self.env[key]
            method = self.resolve_method(e.attr)
            return frozenset({PathFact(method)}) if method else UNKNOWN_VALUE
        out: set[Fact] = set()
        base = self.eval(e.value)
        for f in base:
            if isinstance(f, PathFact):
                out |= self.path_value(f"{f.path}.{e.attr}")
            elif isinstance(f, (GroupFact, ParamFact)) and self.api.is_same_group_attribute(e.attr):
                out.add(f)  # `group.device_group`, `group.pynccl_comm`: the same group (a parameter's too)
            elif isinstance(f, GroupFact) and e.attr in self.api.profile.size_group_attributes:
                out.add(self.group_size(f))
            elif isinstance(f, ObjectFact) and f.field(e.attr) is None and self.is_property(e.attr, f.cls):
                out |= self.call_path(self.resolve_method(e.attr, f.cls) or "", ir.Call(e, (), e.span), [], None, record=f)
            elif isinstance(f, ObjectFact):
                field = f.field(e.attr)
                out |= field if field is not None else {PathFact(f"{f.cls}.{e.attr}")}
            else:
                out.add(UNKNOWN)
        if UNKNOWN in out and (quantity := self.api.profile.size_attributes.get(e.attr)):
            out = (out - {UNKNOWN}) | {SizeFact(quantity)}  # `context.attn_tp_size`
        return frozenset(out) or UNKNOWN_VALUE

    def path_value(self, path: str) -> set[Fact]:
        entry = self.api.entry(path)
        if entry is not None and entry.value:
            return set(self.instantiate_all(entry.value, path, None, _NoArgs()))
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
        return frozenset({ObjectFact(_DICT, ())}) if e.key is not None else TupleFact.of((element,))

    def builtin(self, func: ir.Expr) -> str | None:
        """The builtin a call's function names (`next`), unless this module binds the name."""
        if isinstance(func, ir.Name) and func.id in _ITERATION_BUILTINS and func.id not in self.env \
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
                entries.append((_dict_key(key.value), value))
            else:
                known = False
        return frozenset({ObjectFact(_DICT, tuple(entries))}) if known else UNKNOWN_VALUE

    def subscript(self, e: ir.Subscript) -> Value:
        base = self.eval(e.value)
        if e.index is not None:
            self.eval(e.index)
        out: set[Fact] = set()
        for f in base:
            if isinstance(f, ObjectFact) and f.cls == _DICT:
                key = e.index.value if isinstance(e.index, ir.Const) else None
                entry = f.field(_dict_key(key)) if isinstance(key, _KEY_CONSTANTS) else None
                out |= entry if entry is not None else {g for _, value in f.fields for g in value}
            elif isinstance(f, TupleFact):
                index = e.index.value if isinstance(e.index, ir.Const) else None
                if isinstance(index, int) and not isinstance(index, bool) and -len(f.items) <= index < len(f.items):
                    out |= f.items[index]
                else:
                    out |= {g for item in f.items for g in item}
            elif isinstance(f, ParamFact) and _is_star_param(f.name) and isinstance(index := _const(e.index), int) \
                    and index >= 0:
                out.add(ParamFact(f.index, f"{f.name}[{index}]", f.guard))  # `args[0]` of `*args`: an argument
            elif isinstance(f, (BufferFact, ParamFact)):
                out.add(f)  # a view of the same memory
        return frozenset(out) or UNKNOWN_VALUE

    # calls -------------------------------------------------------------------------
    def call(self, c: ir.Call) -> Value:
        args = [self.eval(a.value) for a in c.args]
        grouped = tuple((a.keyword, v) for a, v in zip(c.args, args) if a.keyword and guarded_groups(v) is not None)
        if len(grouped) > 1:
            self.facts.group_arguments.append(GroupArguments(c, grouped, self.cond))
        if (builtin := self.builtin(c.func)) is not None and len(args) == 1 and not c.args[0].keyword:
            if builtin in ("list", "tuple", "iter") and all(isinstance(f, TupleFact) for f in args[0]):
                return args[0]  # the same items, by position
            elements = iterated_elements(args[0])  # `next(it)`, `sorted(xs)`, a sequence of unknown order
            return elements if builtin == "next" else TupleFact.of((elements,))
        if c.args and not c.args[0].keyword and not c.args[0].star \
                and self.imports.qualify(c.func) == _NULL_CONTEXT:  # the manager keeps what `with` binds
            return frozenset({ObjectFact(_NULL_CONTEXT, (("enter_result", args[0]),))})
        self.facts.passed_on.update(
            id(f.allocation.call) for value in args for f in flatten(value) if isinstance(f, BufferFact)
        )
        result: set[Fact] = set()
        made_new = True  # whether the result is a new object (inside a context, new memory)
        # (path, receiver operand, args, the receiver when it is a record, or OWN_OBJECT)
        targets: list[tuple[str, str | None, list[Value], object]] = []
        if isinstance(c.func, ir.Attr):
            method = c.func.attr
            receiver_expr = c.func.value
            if _is_super(receiver_expr):
                resolved = self.resolve_method(method, skip_own=True)
                if resolved:
                    targets.append((resolved, SELF, args, OWN_OBJECT))
                receiver: Value = UNKNOWN_VALUE
            elif isinstance(receiver_expr, ir.Name) and receiver_expr.id == self.self_name and self.self_name:
                stored = self.env.get(f"self.{method}")
                resolved = self.resolve_method(method) if stored is None else None
                if resolved:
                    targets.append((resolved, SELF, args, OWN_OBJECT))
                receiver = UNKNOWN_VALUE
                if stored is not None:
                    result |= self.call_value(stored, c, args, c.func)
                if not resolved and method in self.record_fields():
                    self.note_call(method, args)  # a callable the record is given: its maker's caller replays it
            else:
                receiver = self.eval(receiver_expr)
                methods = self.api.profile.methods
                if method in methods.same_group | methods.register_pool and guarded_groups(receiver) is None:
                    receiver = self.as_group(receiver, receiver_expr)  # only a group has these methods
            if method == "enter_context" and args:  # `stack.enter_context(ctx)`: entered until the stack's block ends
                self.contexts.extend(f.allocation for f in args[0] if isinstance(f, ContextFact))
                result |= self.entered(args[0], c.args[0].value) - UNKNOWN_VALUE  # and returns what it entered
            elif method in _LIST_GROWING and args and self.reference_key(receiver_expr) is not None:
                self.grow(receiver_expr, self.named(args[-1], c.args[-1].value) if method != "extend" else args[-1])
            for f in receiver:
                if isinstance(f, ParamFact) and method in self.api.profile.methods.same_group:
                    result.add(f)  # `group._get_backend(device)` of a group parameter: that group
                elif isinstance(f, ParamFact) and method in self.api.profile.methods.allocator:
                    # `tp_group.device_communicator.get_symmetric_memory_buffer(...)` of a group
                    # parameter: memory bound to whatever group the caller passes
                    binding = b.Binding(groups=((SYMBOLIC + f.name.lstrip("*"), f.guard),))
                    allocation = self.allocate("allocator", method, c, _Arguments(c, args, ()), binding, None,
                                               hidden=False, params=frozenset({f.index}))
                    result.add(BufferFact(allocation) if allocation is not None else UNKNOWN)
                elif (isinstance(f, ParamFact) and method in self.api.profile.methods.collective
                      and method not in TENSOR_COLLECTIVE_NAMES):
                    self.note_group_use(c, method, frozenset({f}), "given", source=receiver_expr)  # `group.all_reduce(t)`
                elif isinstance(f, ParamFact) and method in self.api.profile.methods.register_pool:
                    result |= self.group_method(GroupFact(SYMBOLIC + f.name.lstrip("*"), f.guard), method, c, args)
                elif isinstance(f, GroupFact):
                    result |= self.group_method(f, method, c, args)
                elif isinstance(f, (BufferFact, ParamFact)) and method in VIEW_METHODS | IN_PLACE_METHODS:
                    result.add(f)
                    made_new = False
                elif isinstance(f, PathFact):
                    targets.append((f"{f.path}.{method}", None, args, None))
                elif isinstance(f, ObjectFact) and (field := f.field(method)) is not None:
                    result |= self.call_value(field, c, args, c.func)  # a callable a record holds
                elif isinstance(f, ObjectFact):
                    resolved = self.resolve_method(method, cls=f.cls)
                    targets.append((resolved or f"{f.cls}.{method}", self.operand(receiver_expr), args, f))
            if not result and any(isinstance(f, GroupFact) for f in receiver) and method not in self.api.profile.methods.collective:
                self.want_groups(receiver)
        else:
            result |= self.call_value(self.eval(c.func), c, args, c.func)
        for path, receiver_operand, call_args, record in targets:
            result |= self.call_path(path, c, call_args, receiver_operand, record=record)
        if not result:
            result.add(UNKNOWN)
        value: Value = frozenset(result)
        if self.contexts and made_new and not any(isinstance(f, _NOT_MEMORY) for f in result):
            value = self.made_in_contexts(result, c)
        self._call_values[id(c)] = value
        return value

    def made_in_contexts(self, result: set[Fact], c: ir.Call | None = None) -> Value:
        """What is made inside a context is bound by it, however it is made."""
        result |= {BufferFact(ctx) for ctx in self.contexts}
        if c is not None and isinstance(c.func, (ir.Name, ir.Attr)):
            name = c.func.attr if isinstance(c.func, ir.Attr) else c.func.id
            qualified = self.imports.qualify(c.func) if isinstance(c.func, ir.Name) else None
            if self.api.is_tensor_factory(qualified or name):
                self.facts.factory_made.update(id(ctx.call) for ctx in self.contexts)
        return frozenset(result)

    def call_value(self, value: Value, c: ir.Call, args: list[Value], callee: ir.Expr | None,
                   replayed: bool = False) -> set[Fact]:
        """Calling a value (`callee` holds it): a known callable (a `functools.partial` of one) or a
        path. A value that may be one of several callables (chosen elsewhere: `self.fn =
        pick(mode)`) calls each under the literal that it is that one, so what one of them does
        is not compared with what another does, and a finding that needs one says so.
        `replayed`: a call a callee makes (`step(local, ...)` in a helper given `step`), its
        arguments not those written at `c`."""
        callables: list[CallableFact | PathFact] = []
        out: set[Fact] = set()
        for f in value:
            if isinstance(f, (CallableFact, PathFact)):
                callables.append(f)
            elif isinstance(f, ParamFact):  # a callable parameter: the caller that passes one replays this
                self.note_call(f.index, args, f.guard)
            elif isinstance(f, ObjectFact) and not replayed and (method := self.resolve_method("__call__", cls=f.cls)):
                out |= self.call_path(method, c, args, None, record=f)  # an instance that defines `__call__`
        operand, site = None, ""
        if len(callables) > 1:  # taken in a fixed order, not a set's (it differs between runs)
            callables.sort(key=lambda f: (f.path, isinstance(f, CallableFact)))
            paths = {f.path for f in callables}
            if callee is not None and len(paths) > 1 and not self.same_effect(paths):
                operand, site = self.operand(callee), self.choice_site(callee, c)
        for f in callables:
            bound = f.args if isinstance(f, CallableFact) else ()
            with self.assuming({(choice_key(operand, f.path, site), True)} if operand is not None else ()):
                if replayed:  # given positionally, after what a partial holds
                    out |= self.call_path(f.path, c, [], None, bound=bound + tuple((None, v) for v in args))
                else:
                    out |= self.call_path(f.path, c, args, None, bound=bound)
        return out

    @contextmanager
    def assuming(self, literals: Iterable[Literal]) -> Iterator[None]:
        """The path condition with `literals` added, for the body of the `with`."""
        start_cond = self.cond
        self.cond = start_cond | frozenset(literals)
        try:
            yield
        finally:
            self.cond = start_cond

    def choice_site(self, callee: ir.Expr | None, c: ir.Call) -> str:
        """What tells one choice of a callable from another: a name (or `self.x`) and how often it
        was bound before the call (two calls of one binding are one choice; a name bound again
        holds a new one), else the call itself."""
        key = self.reference_key(callee)
        if key is None:
            return f"{self.scope.display}:{c.span.line}:{c.span.col}"
        return f"{key}#{self._bindings.get(key, 0)}"

    def same_effect(self, paths: set[str]) -> bool:
        """Whether calling any of these does the same, wherever each is written (`to_ep` and
        `to_ep_big` both binding to MoE EP): then which one is held does not matter."""
        behaviours = {_anywhere(self.api.call(path)) for path in paths}
        return len(behaviours) == 1 and None not in behaviours

    def note_call(self, callee: int | str, args: list[Value], guard: PathCondition = frozenset()) -> None:
        """A call of this function's parameter (its index) or of its record's field (its name),
        for the summary."""
        call = ParamCall(callee, tuple(args), scoped(self.cond | guard, PORTABLE))
        if call not in self.facts.param_calls:
            self.facts.param_calls.append(call)

    def record_fields(self) -> tuple[str, ...]:
        """The fields of this method's class when it is a record class (no `__init__` of its own:
        a dataclass, a `NamedTuple`): what its callers give it by keyword."""
        cls = self.facts.class_qualname
        info = self.class_info(cls) if cls and self.self_name else None
        return info[3] if info is not None and "__init__" not in info[1] else ()

    def local_function(self, fn: ir.FunctionDef) -> Value:
        """A function defined in this body: its path (its summary, if any) and, for calls made
        here, its definition."""
        path = f"{self.facts.qualname}.{fn.name}"
        self._local_functions[path] = fn
        return frozenset({PathFact(path)})

    def inline(self, fn: ir.FunctionDef, c: ir.Call, args: list[Value]) -> set[Fact]:
        """What a function defined in this one returns when called here: its body run with the
        variables it closes over as they are now (a closure reads them when called) and the
        call's arguments, so that a captured buffer comes back as the same buffer. What the body
        consumes is its own analysis's; only its returns are taken."""
        if self._inlined >= _MAX_INLINED:
            return set()
        seed = dict(self.env)
        positional = [v for a, v in zip(c.args, args) if a.keyword is None and not a.star]
        keywords = {a.keyword: v for a, v in zip(c.args, args) if a.keyword}
        for i, p in enumerate(fn.params):
            if p.name.startswith("*"):
                seed[p.name.lstrip("*")] = UNKNOWN_VALUE
            else:
                seed[p.name] = positional[i] if i < len(positional) else keywords.get(p.name, UNKNOWN_VALUE)
        facts = FunctionFacts(f"{self.facts.qualname}.{fn.name}", fn, self.facts.class_name, False,
                              self.facts.class_qualname)
        flow = FunctionFlow(self.api, self.scope, facts, (), seed)
        flow.self_name, flow._inlined, flow.cond = self.self_name, self._inlined + 1, self.cond
        flow._local_functions = dict(self._local_functions)
        flow.run(fn.body)
        self.facts.wanted |= facts.wanted  # the summaries its calls need are this run's to ask for
        return {f for f in facts.returns if not isinstance(f, SelfFieldFact)}

    def call_path(self, path: str, c: ir.Call, args: list[Value], receiver: str | None,
                  bound: tuple[tuple[str | None, Value], ...] = (), record: object = None) -> set[Fact]:
        if path in _PARTIAL:
            return self.partial(c, args)
        local = self._local_functions.get(path)
        if local is not None and not bound:
            inlined = self.inline(local, c, args)
            effects = self.api.call(path)
            if effects is not None:  # what it consumes or binds, from its own summary
                arguments = _Arguments(c, args, bound)
                self.apply_effects(effects, path, c, arguments, self.substitution(arguments, receiver))
            return inlined or {UNKNOWN}
        behaviour = self.api.call(path)
        if behaviour is None:
            kinds = {type(f) for value in args for f in flatten(value)}
            if BufferFact in kinds:
                self.facts.wanted.add(path)  # may consume the buffer: its summary would tell
            if ParamFact in kinds:
                self.facts.passes_params_to.add(path)
            if self.facts.class_qualname and path.startswith(self.facts.class_qualname + "."):
                return {UNKNOWN}
            info = self.class_info(path)
            if info is not None:  # constructing a class of the scanned code
                fields = self.construct(path, c, args)
                return {ObjectFact(path, _record_fields(c, args, info[3]) if "__init__" not in info[1] else fields)}
            return {PathFact(f"{path}()")}
        arguments = _Arguments(c, args, bound)
        sub = self.substitution(arguments, receiver)
        self.apply_effects(behaviour, path, c, arguments, sub)
        returned: set[Fact] = (self.instantiate_all(behaviour.returns, path, c, arguments, sub) if behaviour.returns
                               else {UNKNOWN})
        held = {g for r in behaviour.returns if isinstance(r, b.SelfAttribute) and isinstance(record, ObjectFact)
                for g in record.field(r.attr) or ()}
        if held:  # a getter of an instance known here: its field, not the stand-in named by a parameter
            returned = {f for f in returned if not (isinstance(f, GroupFact) and f.group.startswith(SYMBOLIC))} | held
        self.replay_calls(behaviour, path, c, arguments, sub, record)  # after the returns: they are named first
        return returned

    def construct(self, cls: str, c: ir.Call, args: list[Value]) -> tuple[tuple[str, Value], ...]:
        """`Cls(...)`: what its `__init__` does with the arguments (binds memory to a group given),
        and the new instance's attributes it sets from them."""
        init = self.resolve_method("__init__", cls)
        behaviour = self.api.call(init) if init else None
        if not init or behaviour is None:
            return ()
        arguments = _Arguments(c, args, ())
        sub = self.substitution(arguments, None)
        self.apply_effects(behaviour, init, c, arguments, sub)
        self.replay_calls(behaviour, init, c, arguments, sub, None)
        fields = ((name, frozenset(self.instantiate_all(items, init, c, arguments, sub))) for name, items in behaviour.stores)
        return tuple((name, value) for name, value in fields if value)

    def partial(self, c: ir.Call, args: list[Value]) -> set[Fact]:
        """`functools.partial(f, *args, **kwargs)`: a callable that calls `f` with those arguments too."""
        if not c.args or c.args[0].star:
            return {UNKNOWN}
        targets = [f.path for f in args[0] if isinstance(f, PathFact)]
        bound = tuple((a.keyword, v) for a, v in zip(c.args[1:], args[1:]) if not a.star)
        return {CallableFact(t, bound) for t in targets} or {UNKNOWN}

    def resolve_method(self, method: str, cls: str | None = None, skip_own: bool = False) -> str | None:
        """The qualified name of `method` as the class (or its bases, in order) defines it."""
        start = cls or self.facts.class_qualname
        if start is None:
            return None
        order = self.mro(start)
        if skip_own:
            order = order[1:]
        for klass in order:
            info = self.class_info(klass)
            if info is not None and method in info[1]:
                return f"{klass}.{method}"
        return None

    def class_info(self, cls: str) -> tuple | None:
        """(bases, methods, attributes, fields) of a class of the scanned code (see `module.ClassInfo`)."""
        local = self.scope.local_classes or {}
        if cls in local:
            return local[cls]
        return self.api.classes.get(cls)

    def is_property(self, attr: str, cls: str) -> bool:
        """Whether reading `attr` of an instance of `cls` calls a property of its class or bases."""
        for klass in self.mro(cls):
            info = self.class_info(klass)
            if info is not None and attr in info[1]:
                return len(info) > 4 and attr in info[4]
        return False

    def mro(self, cls: str) -> list[str]:
        order: list[str] = []
        pending = [cls]
        while pending and len(order) < 32:
            klass = pending.pop(0)
            if klass in order:
                continue
            order.append(klass)
            info = self.class_info(klass)
            if info is not None:
                pending.extend(info[0])
        return order

    # behaviours -------------------------------------------------------------------------
    def substitution(self, arguments: _Arguments, receiver: str | None) -> Substitution:
        params: dict[int | str, str | None] = {}
        literals: dict[int | str, Branches] = {}
        constants: dict[int | str, object] = {}
        passed: list[tuple[int | str, ir.Expr | None, Value]] = [*arguments.positional(), *arguments.keywords()]
        for index, expr, value in passed:
            params[index] = self.operand(expr) if expr is not None else None
            cond = [f for f in value if isinstance(f, CondFact)]
            if cond:
                literals[index] = (cond[0].when_true, cond[0].when_false)
            if isinstance(expr, ir.Const):
                constants[index] = expr.value
        return Substitution(params, literals, constants, receiver)

    def apply_effects(self, behaviour: b.Behaviour, path: str, c: ir.Call, arguments: _Arguments,
                      sub: Substitution) -> None:
        display = path.partition("(")[0].rpartition(".")[2]
        for consume in behaviour.consumes:
            cond, lost, impossible = sub.apply(consume.cond)
            if impossible:
                continue
            if consume.group is not None:
                group_value = arguments.value(consume.group)
                omitted = group_value is None or group_value == _NONE_VALUE
                if group_value is None or omitted:  # `group=None` is the default too
                    group_value = _groups_value(consume.default) if consume.default else UNKNOWN_VALUE
                else:
                    group_value = self.as_group(group_value, arguments.expr(consume.group))
                how = "given" if not omitted else "unknown" if c.has_star_args else "default"  # `f(*xs, group)`
                self.note_group_use(c, consume.name or display, group_value, how, cond,
                                    arguments.expr(consume.group), consume.group.param)
            else:
                group_value = _groups_value(consume.groups)
                self.note_group_use(c, consume.name or display, group_value, "fixed", cond)
            if consume.buffer is not None:
                buffer_values = [v for v in [arguments.value(consume.buffer)] if v is not None]
            else:
                skip = arguments.index_of(consume.group) if consume.group is not None else None
                buffer_values = [v for i, v in enumerate(arguments.args) if i != skip]
                buffer_values += [v for _, v in arguments.bound]
            for value in buffer_values:
                self.consume(c, value, group_value, consume.name or display, cond, lost)
        for dst, src in behaviour.copies:
            self.local_copy(arguments.value(dst), arguments.value(src))
        for register in behaviour.registers:
            self.register(register, path, c, arguments)
        for bind in behaviour.binds_pools:
            groups = arguments.value(bind.groups) if bind.groups is not None else None
            self.bind_pool(arguments.expr(bind.pool), groups)
        for kept in behaviour.keeps:
            cond, _, impossible = sub.apply(kept.cond)
            if not impossible:
                self.allocate(kept.how, path, c, arguments, kept.binding, kept.origin, cond,
                              via=(kept.via, kept.chosen))

    def replay_calls(self, behaviour: b.Behaviour, path: str, c: ir.Call, arguments: _Arguments,
                     sub: Substitution, record: object) -> None:
        """The calls the callee makes of a callable this call passes it (`to_dp_local(dp_reduce_scatter,
        ...)`), or of one its receiver holds (`self.reduce(...)` in a method of a record; `record`:
        the receiver, or OWN_OBJECT when it is this method's own object): they happen here, with
        the callee's arguments read at this call."""
        for call in behaviour.calls_params:
            cond, _, impossible = sub.apply(call.cond)
            if impossible or self._replays >= MAX_REPLAYS:
                continue
            args = [frozenset(self.instantiate_all(alternatives, path, c, arguments, sub)) or UNKNOWN_VALUE
                    for alternatives in call.args]
            if call.param is not None:
                callee = arguments.value(call.param)
            elif record is OWN_OBJECT and call.field in self.record_fields():
                self.note_call(call.field, args, cond)  # a method of the same record: its callers replay it
                continue
            else:
                callee = record.field(call.field) if isinstance(record, ObjectFact) else None  # type: ignore[arg-type]
            if callee is None:
                continue
            expr = arguments.expr(call.param) if call.param is not None else None  # none: a partial's, a field
            self._replays += 1
            try:
                with self.assuming(cond):
                    self.call_value(callee, c, args, expr, replayed=True)
            finally:
                self._replays -= 1

    def instantiate_all(self, items: Iterable[b.Returned], path: str, c: ir.Call | None, arguments: _Arguments,
                        sub: Substitution | None = None) -> set[Fact]:
        out: set[Fact] = set()
        for item in items:
            out |= self.instantiate(item, path, c, arguments, sub)
        return out

    def instantiate(self, item: b.Returned, path: str, c: ir.Call | None, arguments: _Arguments,
                    sub: Substitution | None) -> set[Fact]:
        if isinstance(item, b.SelfAttribute):
            return set()  # the receiver's field, which only `call_path` knows (see there)
        if isinstance(item, b.Groups):
            variant = arguments.variant(item.variants) if c is not None else None
            if variant is not None:
                return {GroupFact(g, guard) for g, guard in variant}
            return {GroupFact(g, guard) for g, raw in item.groups if (guard := self.translate(raw, sub)) is not None}
        if isinstance(item, b.NewGroup):
            line = c.span.line if c is not None else 0
            return {GroupFact(new_group(path.rpartition('.')[2], f"{self.scope.display}:{line}"))}
        if isinstance(item, b.Size):
            return {SizeFact(item.quantity)}
        if isinstance(item, b.Argument):
            value = arguments.value(item.arg)
            return set(value) if value is not None else {UNKNOWN}
        if isinstance(item, b.Flag):
            when_true, when_false = self.translate(item.when_true, sub), self.translate(item.when_false, sub)
            if when_true is None or when_false is None:  # decided at this call: a constant
                return {ConstFact(when_true is not None)}
            return {CondFact(when_true, when_false)}
        if isinstance(item, b.Instance):
            fields = tuple((name, _shallow(frozenset(self.instantiate_all(value, path, c, arguments, sub))))
                           for name, value in item.fields)
            return {ObjectFact(item.cls, tuple((name, value) for name, value in fields if value))}
        if isinstance(item, b.Constant):
            return {ConstFact(item.value)}
        if isinstance(item, b.Partial):
            bound = tuple(
                (keyword, frozenset(self.instantiate_all(alternatives, path, c, arguments, sub)) or UNKNOWN_VALUE)
                for keyword, alternatives in item.args
            )
            return {CallableFact(item.path, bound)}
        if isinstance(item, b.Items):
            return set(TupleFact.of(tuple(
                frozenset(self.instantiate_all(alternatives, path, c, arguments, sub)) or UNKNOWN_VALUE
                for alternatives in item.items
            )))
        if c is None:
            return {UNKNOWN}
        if isinstance(item, b.Memory):
            cond = self.translate(item.cond, sub)
            if cond is None:  # the helper binds memory only on a path this call does not take
                return {UNKNOWN}
            allocation = self.allocate(item.how, path, c, arguments, item.binding, item.origin, cond,
                                       via=(item.via, item.chosen))
            return {BufferFact(allocation)} if allocation is not None else {UNKNOWN}
        if isinstance(item, b.Context):
            if _switched_off(item, arguments):
                return {UNKNOWN}
            allocation = self.allocate("context", path, c, arguments, item.binding, item.origin)
            return {ContextFact(allocation)} if allocation is not None else {UNKNOWN}
        if isinstance(item, b.PoolContext):  # `use_mem_pool(pool)`: the groups the pool was registered with
            pool = arguments.value(item.pool) or frozenset()
            groups = guarded_groups(frozenset(f for f in flatten(pool) if isinstance(f, GroupFact)))
            if not groups:
                return {UNKNOWN}  # a pool no group registered here: not communication memory as far as known
            allocation = self.allocate("context", path, c, arguments, b.Binding(groups=groups), None, hidden=False)
            return {ContextFact(allocation)} if allocation is not None else {UNKNOWN}
        return {UNKNOWN}

    def translate(self, literals: PathCondition, sub: Substitution | None) -> PathCondition | None:
        """A callee's literals in this function's terms (those that cannot be read are dropped);
        None when they cannot hold at this call (`depth == 0` where the argument is 2)."""
        if not literals or sub is None:
            return literals
        translated, _, impossible = sub.apply(literals)
        return None if impossible else translated

    def as_group(self, value: Value, expr: ir.Expr | None) -> Value:
        """A value in a group position: an opaque one stands for the group its expression names
        (`self.tp_group` is one group wherever it is read)."""
        self.want_groups(value)
        if guarded_groups(value) is not None or expr is None:
            return value
        held = self.held_group(expr)
        if held is not None:
            return held
        text = self.group_text(expr)
        if text is None:
            return value
        return frozenset(f for f in value if isinstance(f, (GroupFact, ParamFact))) | {GroupFact(SYMBOLIC + text)}

    def held_group(self, expr: ir.Expr) -> Value | None:
        """`self` used as a group inside its own class (a group coordinator's method passing
        itself): the groups its same-group attributes hold (`self.device_group`, `self.cpu_group`:
        each stands for it), when known."""
        if not (isinstance(expr, ir.Name) and expr.id == self.self_name and self.self_name):
            return None
        held: set[Fact] = set()
        for attr in self.api.profile.same_group_attributes:
            stored = self.env.get(f"self.{attr}")
            if stored is not None and guarded_groups(stored) is not None:
                held |= {f for f in stored if isinstance(f, GroupFact)}
        return frozenset(held) or None

    def group_text(self, expr: ir.Expr) -> str | None:
        """The expression naming a group, without the attributes that stand for the same group."""
        while isinstance(expr, ir.Attr) and self.api.is_same_group_attribute(expr.attr):
            expr = expr.value
        from commgroup_lint.analysis.conditions import render

        return render(expr)

    def allocate(self, how: str, name: str, c: ir.Call, arguments: _Arguments, binding: b.Binding,
                 origin: str | None, cond: PathCondition = frozenset(), hidden: bool | None = None,
                 via: tuple[str | None, bool] = (None, False), params: frozenset[int] = frozenset()) -> Allocation | None:
        """The memory bound at this call; `hidden`: whether a helper fixes the group inside
        (by default, when the binding takes no group argument); `via`: where the helper took
        it from a deeper one, and whether that call chose the group; `params`: the enclosing
        function's parameters that are the fixed group (a method called on a group parameter)."""
        missing: str | None = None
        group_params = params  # the enclosing function's parameters that are the group (a receiver's)
        groups: tuple[Guarded, ...] | None
        if binding.param is None:
            groups = binding.groups or None
        else:
            value = arguments.value(binding.param)
            if value is not None and (_is_none(arguments.expr(binding.param)) or value == _NONE_VALUE):
                value = None  # `group=None`: the default
            if value is None and binding.default:
                groups = binding.default
            elif value is None and arguments.has_star_args:
                groups = None
            elif value is None:
                groups = binding.groups or None
                if not binding.groups and binding.required:
                    missing = binding.param.param
            else:
                value = frozenset(flatten(value))  # a list of groups: bound to each of them
                # `groups=self.groups`, None on some paths: a None the callee replaced before using it
                value -= _NONE_VALUE
                value = self.as_group(value, arguments.expr(binding.param))
                groups = guarded_groups(value)
                self.want_groups(value)
                group_params = frozenset(f.index for f in value if isinstance(f, ParamFact))
        allocation = Allocation(
            how, name, c, groups, group_params, missing, origin,
            (binding.hidden if hidden is None else hidden) and groups is not None,
            self.facts.qualname, self.facts.class_name, self.cond | cond, self.statement, via=via[0], chosen=via[1],
        )
        key = (id(c), name)  # one allocation per call site and API (a loop's second pass finds it again)
        previous = self._allocations.get(key)
        if previous is not None:
            if previous.groups != groups and previous.groups is not None and groups is not None:
                previous = _merged(previous, allocation)
                self._allocations[key] = previous
            return previous
        self._allocations[key] = allocation
        return allocation

    def register(self, register: b.Register, path: str, c: ir.Call, arguments: _Arguments) -> None:
        """`rendezvous(t, group)`: the tensor's memory is bound from here on."""
        target = arguments.expr(register.buffer)
        if target is None:
            return
        allocation = self.allocate("registration", path, c, arguments, register.binding, None)
        if allocation is not None and (isinstance(target, ir.Name) or self.on_self(target)):
            self.bind(target, frozenset({BufferFact(allocation)}), None)

    def group_method(self, group: GroupFact, method: str, c: ir.Call, args: list[Value]) -> set[Fact]:
        """A method called on a group (or on an object standing for one)."""
        methods = self.api.profile.methods
        if method in methods.collective:
            self.note_group_use(c, method, frozenset({group}), "given",
                                source=c.func.value if isinstance(c.func, ir.Attr) else None)
            for value in args:
                self.consume(c, value, frozenset({group}), method, frozenset(), False)
            return {UNKNOWN}
        if method in methods.same_group:
            return {group}
        if method in methods.size:
            return {self.group_size(group)}
        if method in methods.register_pool and c.args and not c.args[0].star:
            self.bind_pool(c.args[0].value, frozenset({group}))
            return {UNKNOWN}
        if method in methods.allocator:
            binding = b.Binding(groups=((group.group, group.guard),))
            allocation = self.allocate("allocator", method, c, _Arguments(c, args, ()), binding, None)
            return {BufferFact(allocation)} if allocation is not None else {UNKNOWN}
        return set()

    def bind_pool(self, pool: ir.Expr | None, groups: Value | None) -> None:
        """`register_mem_pool(pool, group)`: memory later allocated from the pool (under
        `use_mem_pool(pool)`) is bound to the group too, so the pool's variable carries it."""
        if pool is None or not groups or not (isinstance(pool, ir.Name) or self.on_self(pool)):
            return
        known = frozenset(f for f in flatten(groups) if isinstance(f, GroupFact))
        if known:
            self.bind(pool, frozenset(f for f in self.eval(pool) if isinstance(f, GroupFact)) | known, None)

    def group_size(self, group: GroupFact) -> Fact:
        """The group's world size, as the quantity its profile names (`attn_tp.world_size`)."""
        info = self.api.profile.groups.get(group.group)
        return SizeFact(info.size) if info is not None and info.size and not group.guard else UNKNOWN

    def consume(self, c: ir.Call, value: Value, group_value: Value, name: str,
                extra: PathCondition, lost: bool) -> None:
        groups = guarded_groups(group_value)
        self.want_groups(group_value)
        for f in flatten(value):
            if isinstance(f, ParamFact) and groups is not None:
                uses = self.facts.param_uses.setdefault(f.index, [])
                use = ParamUse(tuple(g for g in group_value if isinstance(g, (GroupFact, ParamFact))),
                               scoped(self.cond | extra | f.guard, PORTABLE), name)
                if use not in uses:
                    uses.append(use)
            if not isinstance(f, BufferFact) or groups is None:
                continue
            allocation = f.allocation
            canonical = self._allocations.get((id(allocation.call), allocation.name))
            if canonical is not None and canonical.groups != allocation.groups:
                allocation = replace(allocation, groups=canonical.groups)  # a loop's passes, merged
            path = allocation.cond | self.cond | extra
            if contradicts(path):
                continue
            key = (id(allocation.call), allocation.name, id(c), groups, path)  # one call may bind in two helpers
            if key in self._seen:
                continue
            self._seen.add(key)
            self.facts.consumptions.append(Consumption(allocation, name, c, groups, path, lost))

    def note_group_use(self, c: ir.Call, name: str, groups: Value, how: str, extra: PathCondition = frozenset(),
                       source: ir.Expr | None = None, param: str | None = None) -> None:
        use = GroupUse(c, name, groups, how, self.cond | extra, source, param)
        if use not in self.facts.group_uses:  # a loop's second pass finds it again
            self.facts.group_uses.append(use)

    def deciding_helpers(self) -> set[str]:
        """The module-level helpers whose result decides the path to an allocation or a
        consumption (`if should_use_dp_reduce_scatterv():`): their summaries may say what the
        result means (a relation of world sizes), once their modules are indexed."""
        conds = [a.cond for a in self.facts.allocations] + [c.cond for c in self.facts.consumptions]
        conds += [use.cond for uses in self.facts.param_uses.values() for use in uses]
        found = set()
        for cond in conds:
            for key, _ in cond:
                for operand in key_operands(key):
                    if operand.startswith(GLOBAL) and "(" in operand:
                        found.add(operand[1:].partition("(")[0])
        return found

    def want_groups(self, value: Value) -> None:
        """A group expression that did not resolve: a helper's summary may say which group it is."""
        self.facts.wanted.update(f.path.removesuffix("()") for f in value if isinstance(f, PathFact))

    def local_copy(self, dst: Value | None, src: Value | None) -> None:
        """`dp_scatter(local, global)`: remember the pair; a local copy is not a collective."""
        if dst is None or src is None:
            return
        sources: list[Allocation | None] = [f.allocation for f in src if isinstance(f, BufferFact)] or [None]
        for f in dst:
            if isinstance(f, BufferFact):
                self.facts.scatter_pairs.extend((f.allocation, s) for s in sources)

    # conditions --------------------------------------------------------------------
    def literals(self, test: ir.Expr) -> Branches:
        """Literals that hold when `test` is true, and when it is false."""
        if isinstance(test, ir.Not):
            when_true, when_false = self.literals(test.operand)
            return when_false, when_true
        if isinstance(test, ir.BoolOp):
            parts = [self.literals(v) for v in test.values]
            if test.op == "and":
                return frozenset().union(*(p[0] for p in parts)), frozenset()
            return frozenset(), frozenset().union(*(p[1] for p in parts))
        if isinstance(test, ir.Compare) and len(test.ops) == 1:
            left, right = self.operand(test.left), self.operand(test.comparators[0])
            if left and right:
                key, holds = relation_key(left, test.ops[0], right)
                return frozenset({(key, holds)}), frozenset({(key, not holds)})
            return frozenset(), frozenset()
        operand = self.operand(test)
        when_true = frozenset({(operand, True)}) if operand else frozenset()
        when_false = frozenset({(operand, False)}) if operand else frozenset()
        if isinstance(test, ir.Name):
            held = self.env.get(test.id)
        elif isinstance(test, ir.Attr) and self.on_self(test):
            held = self.attribute(test)
        elif isinstance(test, ir.Call):
            held = self._call_values.get(id(test))
        else:
            held = None
        if held:
            for f in held:
                if isinstance(f, CondFact):
                    when_true, when_false = when_true | f.when_true, when_false | f.when_false
        return when_true, when_false

    def holds_parameter(self, name: str) -> bool:
        """Whether the variable still holds its parameter's value (not reassigned since)."""
        value = self.env.get(name)
        index = self.params[name]
        return value is None or all(isinstance(f, ParamFact) and f.index == index for f in value)

    def operand(self, e: ir.Expr) -> str | None:
        """The scoped text of an operand (see `conditions`): a world size, a module-level object,
        an attribute of `self`, a parameter, a local variable, or a constant."""
        if isinstance(e, ir.Const):
            return constant_operand(e.value)
        if isinstance(e, (ir.Name, ir.Attr, ir.Call)):
            sizes = {f.quantity for f in self.eval_quietly(e) if isinstance(f, SizeFact)}
            if len(sizes) == 1:
                return QUANTITY + sizes.pop()
        if isinstance(e, ir.Name):
            if e.id == self.self_name:
                return SELF
            if e.id in self.params and self.holds_parameter(e.id):
                # by its place among a call's positional arguments (a method's `self` is not one)
                return f"{PARAM}{self.params[e.id] - (1 if self.self_name else 0)}:{e.id}"
            if e.id in self.env:
                return LOCAL + e.id
            qualified = self.imports.qualify(e)
            return GLOBAL + qualified if qualified else None
        if isinstance(e, ir.Attr):
            base = self.operand(e.value)
            return f"{base}.{e.attr}" if base else None
        if isinstance(e, ir.Subscript) and isinstance(e.index, ir.Const):  # `x.shape[0]`
            base = self.operand(e.value)
            return f"{base}[{e.index.value!r}]" if base else None
        if isinstance(e, ir.Call) and all(isinstance(a.value, ir.Const) and not a.star for a in e.args):
            base = self.operand(e.func)
            if base is None:
                return None
            args = ", ".join(
                (f"{a.keyword}=" if a.keyword else "") + repr(a.value.value)  # type: ignore[union-attr]
                for a in e.args
            )
            return f"{base}({args})"
        return None

    def eval_quietly(self, e: ir.Expr) -> Value:
        """A value for reading conditions: a call is not evaluated again (it was when the test ran)."""
        if isinstance(e, ir.Call):
            if isinstance(e.func, (ir.Name, ir.Attr)) and not e.args:
                func = self.eval_quietly(e.func)
                out: set[Fact] = set()
                for f in func:
                    if isinstance(f, PathFact):
                        behaviour = self.api.call(f.path)
                        if behaviour is not None:
                            out |= {SizeFact(r.quantity) for r in behaviour.returns if isinstance(r, b.Size)}
                return frozenset(out)
            return frozenset()
        if isinstance(e, ir.Attr):
            if self.on_self(e):
                return self.env.get(f"self.{e.attr}", frozenset())
            base = self.eval_quietly(e.value) if isinstance(e.value, (ir.Name, ir.Attr, ir.Call)) else frozenset()
            out = set()
            for f in base:
                if isinstance(f, PathFact):
                    out |= self.path_value(f"{f.path}.{e.attr}")
                elif isinstance(f, GroupFact) and e.attr in self.api.profile.size_group_attributes:
                    out.add(self.group_size(f))
            if not base or all(not isinstance(f, PathFact) for f in base):
                quantity = self.api.profile.size_attributes.get(e.attr)
                if quantity and not any(isinstance(f, (SizeFact, GroupFact)) for f in out):
                    out.add(SizeFact(quantity))
            return frozenset(out)
        if isinstance(e, ir.Name):
            if e.id in self.env:
                return self.env[e.id]
            qualified = self.imports.qualify(e)
            return frozenset(self.path_value(qualified)) if qualified else frozenset()
        return frozenset()


_TRUE_OBJECTS = (GroupFact, ContextFact, CallableFact)
_NULL_CONTEXT = "contextlib.nullcontext"
_ITERATION_BUILTINS = frozenset({"next", "iter", "list", "tuple", "reversed", "sorted"})
_MAX_INLINED = 3  # calls of local functions inside one another, followed into
_DICT = "builtins.dict"
_KEY_CONSTANTS = (str, int, bool, type(None))
_GUARDED = (GroupFact, ParamFact, BufferFact)  # what carries the condition of the branch that left it
_NOT_MEMORY = (GroupFact, SizeFact, ContextFact, CondFact, CallableFact, ObjectFact, ConstFact)


class _Arguments:
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
            elif a.star == "**" and isinstance(only, ObjectFact) and only.cls == _DICT and all(
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
            if star == "*":
                return None
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


class _NoArgs(_Arguments):
    """An attribute read: no arguments at all."""

    def __init__(self) -> None:  # noqa: D107
        self.c, self.args, self.bound, self.has_star_args = ir.Call(ir.Const(None), ()), [], (), False
        self._entries = []


def _assigned_names(loop: ir.Loop) -> set[str]:
    """The variables a loop (re)binds: its target and every name assigned in its body."""
    names: set[str] = set()

    def targets(e: ir.Expr | None) -> None:
        if isinstance(e, ir.Name):
            names.add(e.id)
        elif isinstance(e, ir.TupleExpr):
            for elt in e.elts:
                targets(elt.value if isinstance(elt, ir.Starred) else elt)

    targets(loop.target)
    stack: list[ir.Stmt] = list(loop.body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ir.Assign):
            for t in stmt.targets:
                targets(t)
        elif isinstance(stmt, ir.Loop):
            targets(stmt.target)
            stack.extend(stmt.body + stmt.orelse)
        elif isinstance(stmt, ir.If):
            stack.extend(stmt.body + stmt.orelse)
        elif isinstance(stmt, ir.With):
            for item in stmt.items:
                targets(item.target)
            stack.extend(stmt.body)
        elif isinstance(stmt, ir.Try):
            stack.extend(stmt.body + stmt.orelse + stmt.finalbody + tuple(x for h in stmt.handlers for x in h))
    return names


def _forget(value: Value, names: set[str]) -> Value:
    """The value with its buffers' path literals about `names` dropped."""
    if not names or not any(isinstance(f, BufferFact) and f.allocation.cond for f in value):
        return value
    out: set[Fact] = set()
    for f in value:
        if isinstance(f, BufferFact) and any(mentions(key, names) for key, _ in f.allocation.cond):
            kept = frozenset(lit for lit in f.allocation.cond if not mentions(lit[0], names))
            f = BufferFact(replace(f.allocation, cond=kept))
        out.add(f)
    return frozenset(out)


@lru_cache(maxsize=4096)
def _constant(value: object) -> Value:
    return frozenset({ConstFact(value)})


def _emptiness_test(test: ir.Expr) -> tuple[str, bool] | None:
    """`x.shape[0] != 0`, `x.shape[0] == 0`, `x.shape[0] > 0`, `x.numel() == 0` (and `not` of
    these): the variable tested, and whether the test holds when `x` is empty."""
    if isinstance(test, ir.Not):
        inner = _emptiness_test(test.operand)
        return None if inner is None else (inner[0], not inner[1])
    if not (isinstance(test, ir.Compare) and len(test.ops) == 1 and isinstance(test.comparators[0], ir.Const)
            and test.comparators[0].value == 0 and test.ops[0] in ("==", "!=", ">")):
        return None
    size = test.left
    if isinstance(size, ir.Subscript) and isinstance(size.value, ir.Attr) and size.value.attr == "shape":
        tensor = size.value.value
    elif isinstance(size, ir.Call) and isinstance(size.func, ir.Attr) and size.func.attr == "numel" and not size.args:
        tensor = size.func.value
    else:
        return None
    return (tensor.id, test.ops[0] == "==") if isinstance(tensor, ir.Name) else None


def _emptied(env: Env, empty: tuple[str, bool] | None, truth: bool) -> Env:
    """The branch's environment: on the branch where the tested tensor is empty, it holds no
    bound memory (a collective on an empty tensor moves nothing, and nothing was registered)."""
    env = dict(env)
    if empty is not None and empty[1] == truth and empty[0] in env:
        kept = frozenset(f for f in env[empty[0]] if not isinstance(f, BufferFact))
        env[empty[0]] = kept or UNKNOWN_VALUE
    return env


def _record_fields(c: ir.Call, args: list[Value], names: tuple[str, ...]) -> tuple[tuple[str, Value], ...]:
    """What a record is given, by field (positional arguments in the order its fields are
    declared), where it holds something the analysis follows (not unknowns)."""
    given: list[tuple[str, Value]] = []
    for position, (a, value) in enumerate(zip(c.args, args)):
        if a.star:
            break
        name = a.keyword or (names[position] if position < len(names) else None)
        if name is not None and value - UNKNOWN_VALUE:
            given.append((name, _shallow(value)))
    return tuple(given)


def _shallow(value: Value) -> Value:
    """A record's field keeps records without their own fields: one level, so that a record
    built from itself (`Wrapped(group=resolve(inner))`, recursively) has a fixpoint."""
    out: set[Fact] = set()
    for f in value:
        if isinstance(f, ObjectFact) and f.fields:
            out.add(ObjectFact(f.cls))
        elif isinstance(f, TupleFact):
            out |= TupleFact.of(tuple(_shallow(item) for item in f.items))
        else:
            out.add(f)
    return frozenset(out)


def _merged(a: Allocation, b_: Allocation) -> Allocation:
    """One call binding memory in two ways (a helper's two paths): the groups of both, each
    guarded by what holds only on its own path, under the condition common to both."""
    common = a.cond & b_.cond
    groups = {(g, guard | (x.cond - common)) for x in (a, b_) for g, guard in x.groups or ()}
    return replace(a, groups=tuple(sorted(groups, key=lambda g: (g[0], sorted(g[1])))), cond=common)


def _anywhere(x: object) -> object:
    """`x` with the places it names (where a helper binds memory, where it took it) left out."""
    if isinstance(x, tuple):
        return tuple(_anywhere(item) for item in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        located = {f.name: None for f in dataclasses.fields(x) if f.name in ("origin", "via")}
        return replace(x, **located, **{f.name: _anywhere(getattr(x, f.name)) for f in dataclasses.fields(x)
                                       if f.name not in located})
    return x


MAX_REPLAYS = 4  # a callable handed on deeper than this (or to itself) is not followed further
MAX_LISTS = 16  # a list appended to in this many ways (`if c: reasons.append(...)`, n times: 2**n) is kept unordered
OWN_OBJECT = object()  # a receiver that is the calling method's own object (see `replay_calls`)
_NONE = ConstFact(None)
_NONE_VALUE = frozenset({_NONE})


def _groups_value(groups: tuple[Guarded, ...]) -> Value:
    return frozenset(GroupFact(g, guard) for g, guard in groups) or UNKNOWN_VALUE


def _switched_off(item: b.Context, arguments: _Arguments) -> bool:
    for keyword, off in ((item.disabled, True), (item.enabled, False)):
        if keyword is None:
            continue
        expr = arguments.expr(b.ArgRef(keyword, None))
        if isinstance(expr, ir.Const) and expr.value is off:
            return True
    return False


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


def _dict_key(key: object) -> str:
    """A dict entry's field name: the key's repr, which no attribute name can equal."""
    return repr(key)


def _always_true(value: Value) -> bool:
    """Whether every possibility of the value is an object Python reads as true (a group, a
    context manager, a function: none defines `__bool__` or `__len__`). A group known only by
    the expression holding it may be None."""
    return bool(value) and all(isinstance(f, _TRUE_OBJECTS) and not (isinstance(f, GroupFact)
                                                                     and f.group.startswith(SYMBOLIC)) for f in value)


def _is_none(expr: ir.Expr | None) -> bool:
    return isinstance(expr, ir.Const) and expr.value is None


def _is_super(expr: ir.Expr) -> bool:
    return isinstance(expr, ir.Call) and isinstance(expr.func, ir.Name) and expr.func.id == _SUPER


def _starred(expr: ir.TupleExpr) -> bool:
    return any(isinstance(e, ir.Starred) for e in expr.elts)


def _holds_memory_or_group(value: Value) -> bool:
    return any(isinstance(f, (BufferFact, GroupFact, ContextFact)) for f in value)


def _none_default(e: ir.IfExpr) -> ir.Expr | None:
    """`x if x is not None else default` (or reversed): the default computation."""
    test = e.test
    if not (isinstance(test, ir.Compare) and len(test.ops) == 1 and test.ops[0] in ("is", "is not")
            and isinstance(test.comparators[0], ir.Const) and test.comparators[0].value is None
            and isinstance(test.left, ir.Name)):
        return None
    name = test.left.id
    given, default = (e.body, e.orelse) if test.ops[0] == "is not" else (e.orelse, e.body)
    if isinstance(given, ir.Name) and given.id == name:
        return default
    return None


def _held(value: Value, holder: str) -> Value:
    """`value` bound to `holder`: a new group it holds is named by it from now on (see `facts`)."""
    if not any(isinstance(f, GroupFact) and f.group.startswith(FRESH) for f in value):
        return value
    return frozenset(GroupFact(held_by(f.group, holder), f.guard) if isinstance(f, GroupFact) else f for f in value)
