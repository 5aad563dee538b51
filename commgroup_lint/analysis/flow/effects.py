"""Applying a callee's summary (`Behaviour`) at a call: its arguments for its parameters."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from commgroup_lint.analysis import behaviour as b
from commgroup_lint.analysis import ir
from commgroup_lint.analysis.conditions import (
    Branches,
    PathCondition,
    Substitution,
)
from commgroup_lint.analysis.facts import (
    UNKNOWN,
    UNKNOWN_VALUE,
    BufferFact,
    CallableFact,
    CondFact,
    ConstFact,
    ContextFact,
    Fact,
    GroupFact,
    Guarded,
    ObjectFact,
    SizeFact,
    TupleFact,
    Value,
    new_group,
)
from commgroup_lint.analysis.flow.arguments import Arguments
from commgroup_lint.analysis.flow.base import FlowBase
from commgroup_lint.analysis.flow.state import (
    NONE_VALUE,
    OWN_OBJECT,
    flatten,
    global_key,
    guarded_groups,
    shallow,
)

MAX_REPLAYS = 4  # a callable handed on deeper than this (or to itself) is not followed further


class Effects(FlowBase):
    """A callee's behaviour read in the caller's terms: what it consumes, binds and returns here."""

    def switched_on(self, item: b.Context, arguments: Arguments) -> PathCondition:
        """Where a context with a switch (`disabled=not cls._dp_max_padding`) binds memory: the
        literals under which the switch leaves it on."""
        out: PathCondition = frozenset()
        for expr, off in _switch(item, arguments):
            if isinstance(expr, ir.Const):
                continue  # a constant switch is on (or the context was not entered: `_switched_off`)
            when_true, when_false = self.literals(expr)
            out |= when_false if off else when_true
        return out

    def substitution(self, arguments: Arguments, receiver: str | None, record: object = None) -> Substitution:
        params: dict[int | str, str | None] = {}
        literals: dict[int | str, Branches] = {}
        constants: dict[int | str, object] = {}
        passed: list[tuple[int | str, ir.Expr | None, Value]] = [*arguments.positional(), *arguments.keywords()]
        for index, expr, value in passed:
            params[index] = self.operand(expr) if expr is not None else None
            cond = [f for f in value if isinstance(f, CondFact)]
            if cond:  # what the flag means, with the flag itself as the source writes it
                named = params[index]
                own = (frozenset({(named, True)}), frozenset({(named, False)})) if named else (frozenset(), frozenset())
                literals[index] = (cond[0].when_true | own[0], cond[0].when_false | own[1])
            elif isinstance(expr, (ir.Not, ir.BoolOp, ir.Compare)):  # a test passed as a flag: `f(x, not a)`
                literals[index] = self.literals(expr)
            if isinstance(expr, ir.Const):
                constants[index] = expr.value
        flags = {}  # a field one flag was stored in: what it means (of two, neither is sure)
        for name, value in record.fields if isinstance(record, ObjectFact) else ():
            conds = [f for f in value if isinstance(f, CondFact)]
            if len(conds) == 1:
                flags[name] = (conds[0].when_true, conds[0].when_false)
        return Substitution(params, literals, constants, receiver, flags)

    def argument(self, arguments: Arguments, ref: b.ArgRef) -> Value | None:
        """What the call passes for `ref`: the argument, or the attribute of it `ref.attr` names
        (`pgs.tp` of the record a caller passes), read as the code would read it."""
        value = arguments.value(ref)
        if value is None or not ref.attr:
            return value
        for attr in ref.attr.split("."):
            value = self.attribute_of(value, attr)
        return value

    def argument_expr(self, arguments: Arguments, ref: b.ArgRef) -> ir.Expr | None:
        """The expression `argument` reads (`pgs.tp`), which names a group known by no other means."""
        expr = arguments.expr(ref)
        for attr in (ref.attr.split(".") if ref.attr else ()):
            expr = ir.Attr(expr, attr, expr.span) if expr is not None else None
        return expr

    def apply_effects(self, behaviour: b.Behaviour, path: str, c: ir.Call, arguments: Arguments,
                      sub: Substitution) -> None:
        display = path.partition("(")[0].rpartition(".")[2]
        for consume in behaviour.consumes:
            cond, lost, impossible = sub.apply(consume.cond)
            if impossible:
                continue
            if consume.group is not None:
                group_value = self.argument(arguments, consume.group)
                omitted = group_value is None or group_value == NONE_VALUE
                if group_value is None or omitted:  # `group=None` is the default too
                    group_value = _groups_value(consume.default) if consume.default else UNKNOWN_VALUE
                else:
                    passed = group_value
                    group_value = self.as_group(passed, self.argument_expr(arguments, consume.group))
                    if guarded_groups(group_value) is None:  # not even known by its expression
                        self.note_lost(c, passed, self.argument_expr(arguments, consume.group))
                how = "given" if not omitted else "unknown" if c.has_star_args else "default"  # `f(*xs, group)`
                self.note_group_use(c, consume.name or display, group_value, how, cond,
                                    arguments.expr(consume.group), consume.group.param)
            elif consume.on_object is not None:  # `allreduce_fusion(x, workspace=ws)`: on the workspace's group
                group_value = self.object_groups(arguments.value(consume.on_object) or frozenset()) or UNKNOWN_VALUE
            else:
                group_value = _groups_value(consume.groups)
                self.note_group_use(c, consume.name or display, group_value, "fixed", cond)
            if consume.buffer is not None:
                buffer_values = [v for v in [arguments.value(consume.buffer)] if v is not None]
                for value in buffer_values:
                    self.note_lost(c, value, arguments.expr(consume.buffer))
            else:
                skip = arguments.index_of(consume.group) if consume.group is not None else None
                buffer_values = [v for i, v in enumerate(arguments.args) if i != skip]
                for given, value in zip(c.args, arguments.args):
                    if not given.keyword and not given.star:
                        self.note_lost(c, value, given.value)
                buffer_values += [v for _, v in arguments.bound]
            for value in buffer_values:
                self.consume(c, value, group_value, consume.name or display, cond, lost, consume.objects)
        for dst, src in behaviour.copies:
            self.local_copy(arguments.value(dst), arguments.value(src))
        for register in behaviour.registers:
            self.register(register, path, c, arguments)
        for bind in behaviour.binds_pools:
            groups = arguments.value(bind.groups) if bind.groups is not None else None
            self.bind_pool(arguments.expr(bind.pool), groups)
        for name, items in behaviour.globals:  # `set_group(g)` binding a global to the group given
            stored = self.instantiate_all(items, path, c, arguments, sub) - UNKNOWN_VALUE
            if stored:
                self.store_global(name, frozenset(stored))
        for kept in behaviour.keeps:
            cond, _, impossible = sub.apply(kept.cond)
            if not impossible:
                allocation = self.allocate(kept.how, path, c, arguments, kept.binding, kept.origin, cond,
                                           via=(kept.via, kept.chosen), defaulted=kept.defaulted)
                if allocation is not None and kept.span is not None:
                    self.builder_groups(allocation, (), kept.span, c, arguments)

    def replay_calls(self, behaviour: b.Behaviour, path: str, c: ir.Call, arguments: Arguments,
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

    def instantiate_all(self, items: Iterable[b.Returned], path: str, c: ir.Call | None, arguments: Arguments,
                        sub: Substitution | None = None) -> set[Fact]:
        out: set[Fact] = set()
        for item in items:
            out |= self.instantiate(item, path, c, arguments, sub)
        return out

    def instantiate(self, item: b.Returned, path: str, c: ir.Call | None, arguments: Arguments,
                    sub: Substitution | None) -> set[Fact]:
        if isinstance(item, b.SelfAttribute):
            return set()  # the receiver's field, which only `call_path` knows (see there)
        if isinstance(item, b.Global):  # what this function (or a callee) bound the global to, if it did
            return set(self.env.get(global_key(item.name), ()))
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
            value = self.argument(arguments, item.arg)
            return set(value) if value is not None else {UNKNOWN}
        if isinstance(item, b.Flag):
            when_true, when_false = self.translate(item.when_true, sub), self.translate(item.when_false, sub)
            if when_true is None or when_false is None:  # decided at this call: a constant
                return {ConstFact(when_true is not None)}
            return {CondFact(when_true, when_false)}
        if isinstance(item, b.Instance):
            fields = tuple((name, shallow(frozenset(self.instantiate_all(value, path, c, arguments, sub))))
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
            how = "object" if self.api.builds_object(path) else item.how  # a builder's body, read: still an object
            allocation = self.allocate(how, path, c, arguments, item.binding, item.origin, cond,
                                       via=(item.via, item.chosen), defaulted=item.defaulted)
            if allocation is not None and (item.peers or item.span):
                self.builder_groups(allocation, item.peers, item.span, c, arguments)
            return {BufferFact(allocation)} if allocation is not None else {UNKNOWN}
        if isinstance(item, b.Context):
            if _switched_off(item, arguments):
                return {UNKNOWN}
            allocation = self.allocate("context", path, c, arguments, item.binding, item.origin,
                                       switch=self.switched_on(item, arguments))
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


def _groups_value(groups: tuple[Guarded, ...]) -> Value:
    return frozenset(GroupFact(g, guard) for g, guard in groups) or UNKNOWN_VALUE


def _switch(item: b.Context, arguments: Arguments) -> Iterator[tuple[ir.Expr, bool]]:
    """The expressions that switch the context off, each with the value that does."""
    for keyword, off in ((item.disabled, True), (item.enabled, False)):
        expr = arguments.expr(b.ArgRef(keyword, None)) if keyword is not None else None
        if expr is not None:
            yield expr, off


def _switched_off(item: b.Context, arguments: Arguments) -> bool:
    return any(isinstance(expr, ir.Const) and expr.value is off for expr, off in _switch(item, arguments))
