"""The events the rules read: memory allocated and bound, groups used, buffers consumed."""

from __future__ import annotations

from dataclasses import replace

from commgroup_lint.analysis import behaviour as b
from commgroup_lint.analysis import ir
from commgroup_lint.analysis.conditions import (
    GLOBAL,
    PathCondition,
    contradicts,
    key_operands,
)
from commgroup_lint.analysis.facts import (
    SYMBOLIC,
    UNKNOWN,
    Allocation,
    BufferFact,
    Consumption,
    Fact,
    GroupFact,
    GroupUse,
    Guarded,
    ParamFact,
    ParamUse,
    PathFact,
    SizeFact,
    Value,
    is_symbolic,
)
from commgroup_lint.analysis.flow.arguments import Arguments
from commgroup_lint.analysis.flow.base import FlowBase
from commgroup_lint.analysis.flow.state import (
    NONE_VALUE,
    PORTABLE,
    attribute_key,
    flatten,
    guarded_groups,
    scoped,
)


class Events(FlowBase):
    """Recording allocations, registrations, group uses and consumptions into the function's facts."""

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
            stored = self.env.get(attribute_key(attr))
            if stored is not None and guarded_groups(stored) is not None:
                held |= {f for f in stored if isinstance(f, GroupFact)}
        return frozenset(held) or None

    def group_text(self, expr: ir.Expr) -> str | None:
        """The expression naming a group, without the attributes that stand for the same group."""
        while isinstance(expr, ir.Attr) and self.api.is_same_group_attribute(expr.attr):
            expr = expr.value
        from commgroup_lint.analysis.conditions import render

        return render(expr)

    def allocate(self, how: str, name: str, c: ir.Call, arguments: Arguments, binding: b.Binding,
                 origin: str | None, cond: PathCondition = frozenset(), hidden: bool | None = None,
                 via: tuple[str | None, bool] = (None, False), params: frozenset[int] = frozenset(),
                 switch: PathCondition = frozenset(),
                 param_attr: str | None = None) -> Allocation | None:
        """The memory bound at this call; `hidden`: whether a helper fixes the group inside
        (by default, when the binding takes no group argument); `via`: where the helper took
        it from a deeper one, and whether that call chose the group; `params`: the enclosing
        function's parameters that are the fixed group (a method called on a group parameter);
        `param_attr` the attribute of it that is (`pgs.tp`); `switch`: the literals under which a
        context's switch leaves it on (part of its condition)."""
        missing: str | None = None
        group_params = params  # the enclosing function's parameters that are the group (a receiver's)
        groups: tuple[Guarded, ...] | None
        if binding.param is None:
            groups = binding.groups or None
        else:
            value = self.argument(arguments, binding.param)
            if value is not None and (_is_none(arguments.expr(binding.param)) or value == NONE_VALUE):
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
                value -= NONE_VALUE
                expr = self.argument_expr(arguments, binding.param)
                value = self.as_group(value, expr)
                groups = guarded_groups(self._by_receiver(value, expr))
                self.want_groups(value)
                group_params = frozenset(f.index for f in value if isinstance(f, ParamFact))
                param_attr = next((f.attr for f in value if isinstance(f, ParamFact)), None) \
                    if len(group_params) == 1 else None
        allocation = Allocation(
            how, name, c, groups, group_params, missing, origin,
            (binding.hidden if hidden is None else hidden) and groups is not None,
            self.facts.qualname, self.facts.class_name, self.cond | cond | switch, self.statement, via=via[0],
            chosen=via[1], at=self.cond, switch=switch, param_attr=param_attr,
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

    def _by_receiver(self, value: Value, expr: ir.Expr | None) -> Value:
        """A group read from the object's own attribute (`self.mapping.tp_group`) that holds a
        parameter here (`self.mapping = mapping` in `__init__`) is named by the attribute: the
        parameter's name means nothing in the object's other methods, where the memory is used.
        (The parameter still makes the summary's binding: see `group_params`.)"""
        root = expr
        while isinstance(root, (ir.Attr, ir.Subscript)):
            root = root.value
        if not (isinstance(root, ir.Name) and root.id == self.self_name and self.self_name and expr is not root):
            return value
        text = self.group_text(expr) if expr is not None else None
        if text is None or not any(isinstance(f, ParamFact) for f in value):
            return value
        return frozenset(GroupFact(SYMBOLIC + text, f.guard) if isinstance(f, ParamFact) else f for f in value)

    def register(self, register: b.Register, path: str, c: ir.Call, arguments: Arguments) -> None:
        """`rendezvous(t, group)`: the tensor's memory is bound from here on."""
        target = arguments.expr(register.buffer)
        if target is None:
            return
        allocation = self.allocate("registration", path, c, arguments, register.binding, None)
        if allocation is not None and self.reference_key(target) is not None:
            self.bind(target, frozenset({BufferFact(allocation)}), None)

    def group_method(self, group: GroupFact | ParamFact, method: str, c: ir.Call, args: list[Value]) -> set[Fact]:
        """A method called on a group (or on an object standing for one), known here or the
        function's parameter (each caller's group)."""
        methods = self.api.profile.methods
        if method in methods.collective:
            self.note_group_use(c, method, frozenset({group}), "given",
                                source=c.func.value if isinstance(c.func, ir.Attr) else None)
            for value, arg in zip(args, c.args):
                self.consume(c, value, frozenset({group}), method, frozenset(), False)
                if not arg.keyword and not arg.star:
                    self.note_lost(c, value, arg.value)
            return {UNKNOWN}
        if method in methods.same_group:
            return {group}
        if method in methods.size:
            return {self.group_size(group)} if isinstance(group, GroupFact) else {UNKNOWN}
        param = group if isinstance(group, ParamFact) else None
        named = GroupFact(SYMBOLIC + param.text, param.guard) if param is not None else group
        assert isinstance(named, GroupFact)
        if method in methods.register_pool and c.args and not c.args[0].star:
            self.bind_pool(c.args[0].value, frozenset({named}))
            return {UNKNOWN}
        if method in methods.allocator:
            # `tp_group.device_communicator.get_symmetric_memory_buffer(...)`: memory bound to
            # the group, a parameter's being whatever group each caller passes
            binding = b.Binding(groups=((named.group, named.guard),))
            allocation = self.allocate("allocator", method, c, Arguments(c, args, ()), binding, None,
                                       hidden=False if param is not None else None,
                                       params=frozenset({param.index}) if param is not None else frozenset(),
                                       param_attr=param.attr if param is not None else None)
            return {BufferFact(allocation)} if allocation is not None else {UNKNOWN}
        return set()

    def note_lost(self, c: ir.Call, value: Value, expr: ir.Expr | None) -> None:
        """A collective given a value the model could not follow, after this function bound
        memory: where bound memory may have gone unseen, with the construct that lost it
        (`coverage` reports these; nothing else reads them)."""
        if not self._allocations or expr is None or not all(f is UNKNOWN or self.scanned_path(f) for f in value):
            return
        entry = (c, self.construct_kind(expr))
        if entry not in self.facts.lost:
            self.facts.lost.append(entry)

    def scanned_path(self, f: Fact) -> bool:
        """Whether `f` is what a name of the scanned code gave without the model following it
        (`Entry(buf).value` of a `namedtuple` class, an attribute no method is known to set):
        unlike a library's result (`torch.empty(n)`), it may hold the memory."""
        if not isinstance(f, PathFact):
            return False
        root = f.path.partition("(")[0]
        if root.startswith(self.imports.module + "."):
            return True
        owner = root.rpartition(".")[0]
        return self.class_info(root) is not None or self.class_info(owner) is not None

    def construct_kind(self, expr: ir.Expr, depth: int = 0) -> str:
        """The kind of expression a value came from: through the names it was bound from, if any."""
        key = self.reference_key(expr)
        if key is not None and key in self._sources and depth < _SOURCE_DEPTH:
            return self.construct_kind(self._sources[key], depth + 1)
        if isinstance(expr, ir.Call):
            return "call"
        if isinstance(expr, (ir.Attr, ir.Subscript)):
            return "attribute" if isinstance(expr, ir.Attr) else "subscript"
        return "name" if isinstance(expr, ir.Name) else "expression"

    def is_object_method(self, method: str) -> bool:
        objects = self.api.profile.objects
        return method in objects.consumer_methods or method in objects.allocator_methods

    def object_method(self, obj: BufferFact, method: str, c: ir.Call, args: list[Value]) -> set[Fact]:
        """A method called on an object bound to a group (`buffer.combine(x, handle)`): the
        profile's `[objects.methods]` run on the object's group, or return its memory."""
        if method in self.api.profile.objects.consumer_methods:
            groups = self.object_groups(frozenset({obj}))  # (no group use: it is given no group)
            for value in (frozenset({obj}), *args):  # itself (listed), and another object given to it
                self.consume(c, value, groups, method, frozenset(), False, objects=True)
            return {UNKNOWN}
        return {obj}  # an allocator method: a view of the object's own memory

    def object_groups(self, value: Value) -> Value:
        """The groups the objects in `value` are bound to (a parameter's symbolic group stands
        for that parameter again, so a caller reads it in its own terms)."""
        out: set[Fact] = set()
        for f in flatten(value):
            if isinstance(f, BufferFact) and f.allocation.how == "object":
                for group, guard in f.allocation.groups or ():
                    name = group[len(SYMBOLIC):] if is_symbolic(group) else None
                    if name is not None and name in self.params and len(f.allocation.group_params) == 1:
                        out.add(ParamFact(self.params[name], name, guard))
                    else:
                        out.add(GroupFact(group, guard))
        return frozenset(out)

    def bind_pool(self, pool: ir.Expr | None, groups: Value | None) -> None:
        """`register_mem_pool(pool, group)`: memory later allocated from the pool (under
        `use_mem_pool(pool)`) is bound to the group too, so the pool's variable carries it."""
        if pool is None or not groups or self.reference_key(pool) is None:
            return
        known = frozenset(f for f in flatten(groups) if isinstance(f, GroupFact))
        if known:
            self.bind(pool, frozenset(f for f in self.eval(pool) if isinstance(f, GroupFact)) | known, None)

    def group_size(self, group: GroupFact) -> Fact:
        """The group's world size, as the quantity its profile names (`attn_tp.world_size`)."""
        info = self.api.profile.groups.get(group.group)
        return SizeFact(info.size) if info is not None and info.size and not group.guard else UNKNOWN

    def consume(self, c: ir.Call, value: Value, group_value: Value, name: str,
                extra: PathCondition, lost: bool, objects: bool = False) -> None:
        """The memory in `value` consumed on `group_value`; with `objects`, by an op that takes
        group-bound objects (a workspace, a buffer), which consumes only those: it copies any
        other tensor in, and a collective takes an object's memory like any tensor."""
        groups = guarded_groups(group_value)
        self.want_groups(group_value)
        for f in flatten(value):
            if isinstance(f, ParamFact) and f.attr is None and groups is not None and not objects:  # (`x.grad`: other memory)
                uses = self.facts.param_uses.setdefault(f.index, [])
                use = ParamUse(tuple(g for g in group_value if isinstance(g, (GroupFact, ParamFact))),
                               scoped(self.cond | extra | f.guard, PORTABLE), name)
                if use not in uses:
                    uses.append(use)
            if not isinstance(f, BufferFact) or groups is None or (f.allocation.how == "object") != objects:
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


def _merged(a: Allocation, b_: Allocation) -> Allocation:
    """One call binding memory in two ways (a helper's two paths): the groups of both, each
    guarded by what holds only on its own path, under the condition common to both."""
    common = a.cond & b_.cond
    groups = {(g, guard | (x.cond - common)) for x in (a, b_) for g, guard in x.groups or ()}
    return replace(a, groups=tuple(sorted(groups, key=lambda g: (g[0], sorted(g[1])))), cond=common)


def _is_none(expr: ir.Expr | None) -> bool:
    return isinstance(expr, ir.Const) and expr.value is None


_SOURCE_DEPTH = 4  # names bound from names followed back this far to the expression that made the value
