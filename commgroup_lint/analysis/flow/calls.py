"""Calls: what calling a value does, through the scanned code's summaries, inlined closures and classes."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from commgroup_lint.analysis import behaviour as b
from commgroup_lint.analysis import ir
from commgroup_lint.analysis.conditions import (
    GLOBAL,
    SELF,
    Literal,
    PathCondition,
    Substitution,
    choice_key,
)
from commgroup_lint.analysis.facts import (
    RECEIVER,
    SYMBOLIC,
    UNKNOWN,
    UNKNOWN_VALUE,
    BufferFact,
    CallableFact,
    CondFact,
    ConstFact,
    ContextFact,
    Fact,
    FunctionFacts,
    GlobalFact,
    GroupArguments,
    GroupFact,
    ObjectFact,
    ParamCall,
    ParamFact,
    PathFact,
    SelfFieldFact,
    SizeFact,
    TupleFact,
    Value,
)
from commgroup_lint.analysis.flow.arguments import Arguments
from commgroup_lint.analysis.flow.base import FlowBase
from commgroup_lint.analysis.flow.state import (
    DICT,
    OWN_OBJECT,
    PORTABLE,
    attribute_key,
    cells,
    dict_key,
    flatten,
    guarded_groups,
    scoped,
    shallow,
)


class Calls(FlowBase):
    """A call looked up (a method through its class's bases, a closure, a `functools.partial`) and applied."""

    def call(self, c: ir.Call) -> Value:
        args = [self.eval(a.value) for a in c.args]
        grouped = tuple((a.keyword, v) for a, v in zip(c.args, args) if a.keyword and guarded_groups(v) is not None)
        if len(grouped) > 1:
            self.facts.group_arguments.append(GroupArguments(c, grouped, self.cond))
        if (known := self.library_call(c, args)) is not None:
            return known
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
                stored = self.env.get(attribute_key(method))
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
                if method in methods.collective and guarded_groups(receiver) is None:
                    self.note_lost(c, receiver, receiver_expr)  # `lost.all_reduce(buf)`: its group unseen
                    # `relay(group).all_reduce(buf)`: the helper's summary would say which group it returns
                    self.facts.wanted |= {f.path.partition("(")[0] for f in receiver if isinstance(f, PathFact) and not f.named}
                if method in methods.same_group | methods.register_pool and guarded_groups(receiver) is None:
                    receiver = self.as_group(receiver, receiver_expr)  # only a group has these methods
            if method == "enter_context" and args:  # `stack.enter_context(ctx)`: entered until the stack's block ends
                self.contexts.extend(f.allocation for f in args[0] if isinstance(f, ContextFact))
                result |= self.entered(args[0], c.args[0].value) - UNKNOWN_VALUE  # and returns what it entered
            elif method in _LIST_GROWING and args and self.reference_key(receiver_expr) is not None:
                self.grow(receiver_expr, self.named(args[-1], c.args[-1].value) if method != "extend" else args[-1])
            elif method in ("update", "setdefault") and (key := self.reference_key(receiver_expr)) in self.env:
                self.env[key] = self.updated_dict(self.env[key], method, c, args)  # `options.update(group=g)`
            for f in receiver:
                if isinstance(f, GroupFact) or isinstance(f, ParamFact) and self.is_group_method(method):
                    # a group parameter (or a record's group) is the group its caller passes:
                    # what the profile says of a group's methods holds of it, in the caller's terms
                    result |= self.group_method(f, method, c, args)
                elif isinstance(f, BufferFact) and f.allocation.how == "object" and self.is_object_method(method):
                    result |= self.object_method(f, method, c, args)
                elif isinstance(f, ParamFact) and f.attr is None and method in self.api.profile.objects.consumer_methods:
                    self.object_param_method(f, method, args)  # `buffer.combine(view, handle)`, `buffer` a parameter
                elif isinstance(f, (BufferFact, ParamFact)) and method in VIEW_METHODS | IN_PLACE_METHODS:
                    result.add(f)
                    made_new = False
                elif isinstance(f, PathFact) and (instance := self.module_instance(f.path, method)) is not None:
                    targets.append((instance[0], GLOBAL + f.path, args, instance[1]))  # `_manager.initialize(...)`
                elif isinstance(f, PathFact):  # `Cls.method()`: a classmethod's `cls` is that class
                    targets.append((f"{f.path}.{method}", GLOBAL + f.path if f.named else None, args, None))
                elif (contained := self.container_method(f, method, c, args)) is not None:
                    result |= contained
                    made_new = False
                elif isinstance(f, ObjectFact) and (field := f.field(method)) is not None:
                    result |= self.call_value(field, c, args, c.func)  # a callable a record holds
                elif isinstance(f, ObjectFact):
                    resolved = self.resolve_method(method, cls=f.cls)
                    targets.append((resolved or f"{f.cls}.{method}", self.operand(receiver_expr), args, f))
            if not result and any(isinstance(f, GroupFact) for f in receiver) and method not in self.api.profile.methods.collective:
                self.want_groups(receiver)
        elif isinstance(c.func, ir.Name) and c.func.id == self.self_name and self.facts.class_qualname \
                and _is_classmethod(self.facts.node):
            result |= self.call_path(self.facts.class_qualname, c, args, None)  # `cls(...)`: a new instance
        else:
            result |= self.call_value(self.eval(c.func), c, args, c.func)
        for path, receiver_operand, call_args, record in targets:
            result |= self.call_path(path, c, call_args, receiver_operand, record=record)
            if isinstance(record, ObjectFact) and isinstance(c.func, ir.Attr):
                self.update_receiver(c.func.value, record, path, c, call_args, receiver_operand)
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

    def is_group_method(self, method: str) -> bool:
        """Whether the profile says what `method` does when called on a group (a tensor's
        `gather` is not taken for one on a parameter not known to be a group)."""
        methods = self.api.profile.methods
        return method not in TENSOR_COLLECTIVE_NAMES and any(
            method in names for names in (methods.collective, methods.allocator, methods.same_group,
                                          methods.register_pool, methods.size))

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
            elif isinstance(f, ParamFact) and f.attr is None:  # a callable parameter: the caller that passes one replays this
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

    def module_instance(self, path: str, method: str) -> tuple[str, ObjectFact] | None:
        """A method of this module's one instance of a class of the checked code
        (`_workspace_manager = FlashInferWorkspaceManager()` at the top level): that class's
        method, with the instance as its receiver (what its constructor left is not known here)."""
        module, _, name = path.rpartition(".")
        cls = self.imports.instances.get(name) if module == self.imports.module else None
        resolved = self.resolve_method(method, cls=cls) if cls is not None and self.class_info(cls) else None
        return (resolved, ObjectFact(cls)) if resolved and cls is not None else None

    def record_fields(self) -> tuple[str, ...]:
        """The fields of this method's class when it is a record class (no `__init__` of its own:
        a dataclass, a `NamedTuple`): what its callers give it by keyword."""
        cls = self.facts.class_qualname
        info = self.class_info(cls) if cls and self.self_name else None
        return info[3] if info is not None and "__init__" not in info[1] else ()

    def record_item(self, record: ObjectFact, position: int) -> Value:
        """`entry[1]` of a record (a `NamedTuple`): the field at that position, if it was given."""
        info = self.class_info(record.cls)
        names = info[3] if info is not None else ()
        if -len(names) <= position < len(names):
            return record.field(names[position]) or UNKNOWN_VALUE
        return UNKNOWN_VALUE

    def local_function(self, fn: ir.FunctionDef) -> Value:
        """A function defined in this body: its path (its summary, if any) and, for calls made
        here, its definition. One that closes over this function's parameters is a closure
        made with them (its cells, given by name), which a caller it is returned to calls."""
        path = f"{self.facts.qualname}.{fn.name}"
        self._local_functions[path] = fn
        closed = cells(fn, self.env) if self.params else ()
        if closed:
            return frozenset({CallableFact(path, tuple((name, self.env[name]) for name in closed))})
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
        spread = any(a.star for a in c.args)
        named = {p.name for p in fn.params}
        for i, p in enumerate(fn.params):
            if p.name.startswith("**"):  # the keywords no parameter takes
                extra = tuple((dict_key(k), v) for k, v in keywords.items() if k not in named)  # keyed as a literal
                seed[p.name[2:]] = UNKNOWN_VALUE if spread else frozenset({ObjectFact(DICT, extra)})
            elif p.name.startswith("*"):  # the positions after the parameters'
                seed[p.name[1:]] = UNKNOWN_VALUE if spread else TupleFact.of(tuple(positional[i:]))
            elif i < len(positional):
                seed[p.name] = positional[i]
            elif p.name in keywords:
                seed[p.name] = keywords[p.name]
            else:  # its default (a lambda's is read where it is written, which is here)
                seed[p.name] = self.eval(p.default) if p.default is not None and not spread else UNKNOWN_VALUE
        facts = FunctionFacts(f"{self.facts.qualname}.{fn.name}", fn, self.facts.class_name, False,
                              self.facts.class_qualname)
        flow = type(self)(self.api, self.scope, facts, (), seed)
        flow.self_name, flow._inlined, flow.cond = self.self_name, self._inlined + 1, self.cond
        flow._local_functions = dict(self._local_functions)
        flow.run(fn.body)
        for name in fn.nonlocals:  # what it rebinds of this function's variables
            if name in flow.env:
                self.env[name] = flow.env[name]
        self.facts.wanted |= facts.wanted  # the summaries its calls need are this run's to ask for
        return {f for f in facts.returns if not isinstance(f, (SelfFieldFact, GlobalFact))}

    def call_path(self, path: str, c: ir.Call, args: list[Value], receiver: str | None,
                  bound: tuple[tuple[str | None, Value], ...] = (), record: object = None) -> set[Fact]:
        if path in _PARTIAL:
            return self.partial(c, args)
        local = self._local_functions.get(path)
        if local is not None and _only_cells(bound, local):  # called where it is defined: its cells are here
            inlined = self.inline(local, c, args)
            effects = self.api.call(path)
            if effects is not None:  # what it consumes or binds, from its own summary
                arguments = Arguments(c, args, bound)
                self.apply_effects(effects, path, c, arguments, self.substitution(arguments, receiver))
            return inlined or {UNKNOWN}
        behaviour = self.api.call(path)
        if behaviour is None:
            kinds = {type(f) for value in args for f in flatten(value)}
            if BufferFact in kinds:
                self.facts.wanted.add(path)  # may consume the buffer, or return the group: its summary would tell
            if ParamFact in kinds:
                self.facts.passes_params_to.add(path)
            if self.facts.class_qualname and path.startswith(self.facts.class_qualname + "."):
                return {UNKNOWN}
            info = self.class_info(path)
            if info is not None:  # constructing a class of the scanned code
                fields = self.construct(path, c, args)
                # a record (a dataclass, a `NamedTuple`) takes its fields; an inherited `__init__` sets them
                record = "__init__" not in info[1] and (bool(info[3]) or self.resolve_method("__init__", path) is None)
                return {ObjectFact(path, _record_fields(c, args, info[3]) if record else fields)}
            return {PathFact(f"{path}()")}
        arguments = Arguments(c, args, bound)
        sub = self.substitution(arguments, receiver, record)
        self.apply_effects(behaviour, path, c, arguments, sub)
        returned: set[Fact] = (self.instantiate_all(behaviour.returns, path, c, arguments, sub) if behaviour.returns
                               else {UNKNOWN})
        held: set[Fact] = set()
        for r in behaviour.returns:
            if isinstance(r, b.SelfAttribute) and isinstance(record, ObjectFact):
                if r.attr == RECEIVER:  # `return self`: the receiver, with what the method stored in it
                    held.add(self.with_stores(record, behaviour, path, c, arguments, sub))
                else:
                    held |= record.field(r.attr) or frozenset()
        if held:  # a getter of an instance known here: its field, not the stand-in named by a parameter
            returned = {f for f in returned if not (isinstance(f, GroupFact) and f.group.startswith(SYMBOLIC))} | held
        self.replay_calls(behaviour, path, c, arguments, sub, record)  # after the returns: they are named first
        return returned

    def update_receiver(self, receiver: ir.Expr, record: ObjectFact, path: str, c: ir.Call, args: list[Value],
                        operand: str | None) -> None:
        """`builder.set(group)`: the instance the name holds is the one the method left (its stores)."""
        key = self.reference_key(receiver)
        behaviour = self.api.call(path)
        if key is None or key not in self.env or behaviour is None or not behaviour.stores:
            return
        arguments = Arguments(c, args, ())
        updated = self.with_stores(record, behaviour, path, c, arguments, self.substitution(arguments, operand))
        self.env[key] = frozenset(updated if f == record else f for f in self.env[key])

    def with_stores(self, record: ObjectFact, behaviour: b.Behaviour, path: str, c: ir.Call, arguments: Arguments,
                    sub: Substitution) -> ObjectFact:
        """The instance after a method that stores into it: its fields, those the method sets replaced."""
        stored = {name: frozenset(self.instantiate_all(items, path, c, arguments, sub)) for name, items in behaviour.stores}
        kept = tuple((name, value) for name, value in record.fields if name not in stored)
        return ObjectFact(record.cls, kept + tuple((name, value) for name, value in stored.items() if value))

    def construct(self, cls: str, c: ir.Call, args: list[Value]) -> tuple[tuple[str, Value], ...]:
        """`Cls(...)`: what its `__init__` does with the arguments (binds memory to a group given),
        and the new instance's attributes it sets from them."""
        init = self.resolve_method("__init__", cls)
        behaviour = self.api.call(init) if init else None
        if not init or behaviour is None:
            return ()
        arguments = Arguments(c, args, ())
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


def _record_fields(c: ir.Call, args: list[Value], names: tuple[str, ...]) -> tuple[tuple[str, Value], ...]:
    """What a record is given, by field (positional arguments in the order its fields are
    declared), where it holds something the analysis follows (not unknowns)."""
    given: list[tuple[str, Value]] = []
    for position, (a, value) in enumerate(zip(c.args, args)):
        if a.star:
            break
        name = a.keyword or (names[position] if position < len(names) else None)
        if name is not None and value - UNKNOWN_VALUE:
            given.append((name, shallow(value)))
    return tuple(given)


def _only_cells(bound: tuple[tuple[str | None, Value], ...], fn: ir.FunctionDef) -> bool:
    """Whether what a callable holds are only the cells of `fn` (no argument of a partial)."""
    own = {p.name.lstrip("*") for p in fn.params}
    return all(keyword is not None and keyword not in own for keyword, _ in bound)


def _anywhere(x: object) -> object:
    """`x` with the places it names (where a helper binds memory, where it took it) left out."""
    if isinstance(x, tuple):
        return tuple(_anywhere(item) for item in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        located = {f.name: None for f in dataclasses.fields(x) if f.name in ("origin", "via")}
        return replace(x, **located, **{f.name: _anywhere(getattr(x, f.name)) for f in dataclasses.fields(x)
                                       if f.name not in located})
    return x


def _is_classmethod(fn: ir.FunctionDef | None) -> bool:
    return fn is not None and any(isinstance(d, ir.Name) and d.id == "classmethod" for d in fn.decorators)


def _is_super(expr: ir.Expr) -> bool:
    return isinstance(expr, ir.Call) and isinstance(expr.func, ir.Name) and expr.func.id == _SUPER


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
_MAX_INLINED = 3  # calls of local functions inside one another, followed into
_NOT_MEMORY = (GroupFact, SizeFact, ContextFact, CondFact, CallableFact, ObjectFact, ConstFact)
