"""The group dataflow: an abstract interpreter over one function's IR.

It walks statements in order, following the control flow (branches are analysed apart and
joined; loops run to a fixpoint of two passes; `return`/`raise` end a path), and tracks for
every variable which groups, world sizes, bound buffers and symmetric-memory contexts it
may hold. Each `if` adds a literal to the path condition, so a buffer bound under `c` never
meets a consumer under `not c`. It records allocations and the collectives that consume them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.api import Allocator, Api
from commgroup_lint.analysis.conditions import Branches, contradicts, holding, relation_key, render
from commgroup_lint.analysis.facts import (
    UNKNOWN, UNKNOWN_VALUE, Allocation, BufferFact, CondFact, Consumption, ContextFact, Fact, FunctionFacts,
    GroupFact, ParamFact, PathCondition, PathFact, SizeFact, Value,
)
from commgroup_lint.analysis.names import ImportTable
from commgroup_lint.profile import Collective, GroupParam

# Tensor methods whose result shares the receiver's storage (a view keeps the binding).
VIEW_METHODS = frozenset({
    "view", "view_as", "contiguous", "narrow", "reshape", "flatten", "unflatten", "as_strided",
    "transpose", "t", "permute", "squeeze", "unsqueeze", "expand", "select", "split", "chunk",
    "tensor_split", "unbind", "detach", "movedim",
})
_SPLITTING_METHODS = frozenset({"split", "chunk", "tensor_split", "unbind"})

Env = dict[str, Value]


def join(a: Env, *others: Env) -> Env:
    out = dict(a)
    for b in others:
        for key, value in b.items():
            out[key] = out[key] | value if key in out else value
    return out


def known_groups(value: Value) -> frozenset[str] | None:
    """The groups a value may be, or None when any possibility is not a known group."""
    if not value or not all(isinstance(f, GroupFact) for f in value):
        return None
    return frozenset(f.group for f in value if isinstance(f, GroupFact))


class FunctionFlow:
    def __init__(
        self,
        api: Api,
        imports: ImportTable,
        facts: FunctionFacts,
        params: Sequence[ir.Param] = (),
        seed: Env | None = None,
    ) -> None:
        self.api, self.imports, self.facts = api, imports, facts
        self.env: Env = dict(seed or {})
        for i, p in enumerate(params):
            self.env[p.name.lstrip("*")] = frozenset({ParamFact(i, p.name)})
        self.cond: PathCondition = frozenset()
        self.contexts: list[Allocation] = []
        self.statement: ir.Span = ir.NO_SPAN
        self._allocations: dict[int, Allocation] = {}
        self._seen: set[tuple[int, int]] = set()
        self._jumps: list[dict[str, list[Env]]] = []  # per enclosing loop: the envs at each `break`/`continue`

    # statements ------------------------------------------------------------------
    def run(self, body: Iterable[ir.Stmt]) -> None:
        self.block(body)
        self.facts.allocations = sorted(self._allocations.values(), key=lambda a: (a.call.span.line, a.call.span.col))

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
            self.with_(s)
        elif isinstance(s, ir.Try):
            return self.try_(s)
        elif isinstance(s, ir.Return):
            if s.value is not None:
                self.facts.returns.update(self.eval(s.value))
            return False
        elif isinstance(s, ir.Jump):
            if s.kind in ("break", "continue") and self._jumps:
                self._jumps[-1][s.kind].append(dict(self.env))
            return False
        elif isinstance(s, (ir.FunctionDef, ir.ClassDef)):
            self.env[s.name] = UNKNOWN_VALUE  # analysed on its own
        elif isinstance(s, ir.OtherStmt):
            for e in s.exprs:
                self.eval(e)
        return True

    def branch(self, test: ir.Expr, body: Sequence[ir.Stmt], orelse: Sequence[ir.Stmt]) -> bool:
        self.eval(test)
        when_true, when_false = self.literals(test)
        start_env, start_cond = self.env, self.cond
        self.env, self.cond = dict(start_env), start_cond | when_true
        through_body, body_env = self.block(body), self.env
        self.env, self.cond = dict(start_env), start_cond | when_false
        through_else, else_env = self.block(orelse), self.env
        if through_body and through_else:
            self.env, self.cond = join(body_env, else_env), start_cond
        elif through_body:
            self.env, self.cond = body_env, start_cond | when_true
        elif through_else:
            self.env, self.cond = else_env, start_cond | when_false
        else:
            self.env, self.cond = join(body_env, else_env), start_cond
        return through_body or through_else

    def loop(self, s: ir.Loop) -> None:
        iterated = self.eval(s.iter)
        start_env, start_cond = self.env, self.cond
        # while: the test holds inside the body
        body_cond = start_cond | self.literals(s.iter)[0] if s.target is None else start_cond
        jumps: dict[str, list[Env]] = {"break": [], "continue": []}
        self._jumps.append(jumps)
        for _ in range(2):
            self.cond = body_cond
            if s.target is not None:
                element = frozenset(f for f in iterated if isinstance(f, BufferFact)) or UNKNOWN_VALUE
                self.bind(s.target, element, None)
            through = self.block(s.body)
            self.env = join(start_env, *([self.env] if through else []), *jumps["continue"])
        self._jumps.pop()
        self.cond = start_cond
        self.block(s.orelse)
        self.env = join(self.env, *jumps["break"])

    def with_(self, s: ir.With) -> None:
        entered: list[Allocation] = []
        for item in s.items:
            value = self.eval(item.context)
            entered += [f.allocation for f in value if isinstance(f, ContextFact)]
            if item.target is not None:
                self.bind(item.target, UNKNOWN_VALUE, None)
        self.contexts.extend(entered)
        try:
            self.block(s.body)
        finally:
            del self.contexts[len(self.contexts) - len(entered):]

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
        if isinstance(target, ir.Name):
            if isinstance(source, (ir.BoolOp, ir.Compare, ir.Not)):  # `use_x = a and not b`: remember a, not b
                value = frozenset({CondFact(*self.literals(source))})
            self.env[target.id] = value
        elif _on_self(target):
            self.env[f"self.{target.attr}"] = value
        elif isinstance(target, ir.TupleExpr):
            if isinstance(source, ir.TupleExpr) and len(source.elts) == len(target.elts):
                values = [self.eval(e) for e in source.elts]  # every right-hand side before any binding
                for t, v, e in zip(target.elts, values, source.elts):
                    self.bind(t, v, e)
                return
            split = _splits_buffer(source)
            for t in target.elts:
                self.bind(t, value if split else UNKNOWN_VALUE, None)

    # expressions -----------------------------------------------------------------
    def eval(self, e: ir.Expr) -> Value:
        if isinstance(e, ir.Name):
            if e.id in self.env:
                return self.env[e.id]
            qualified = self.imports.qualify(e)
            return frozenset({PathFact(qualified)}) if qualified else UNKNOWN_VALUE
        if isinstance(e, ir.Attr):
            return self.attribute(e)
        if isinstance(e, ir.Call):
            return self.call(e)
        if isinstance(e, ir.Subscript):
            base = self.eval(e.value)
            return frozenset(f for f in base if isinstance(f, (BufferFact, ParamFact))) or UNKNOWN_VALUE
        if isinstance(e, ir.NamedExpr):
            value = self.env[e.target] = self.eval(e.value)
            return value
        if isinstance(e, ir.IfExpr):
            self.eval(e.test)
            return self.eval(e.body) | self.eval(e.orelse)
        if isinstance(e, ir.TupleExpr):
            for elt in e.elts:
                self.eval(elt)
            return UNKNOWN_VALUE
        if isinstance(e, ir.Compare):
            for sub in (e.left, *e.comparators):
                self.eval(sub)
        elif isinstance(e, ir.BoolOp):
            for sub in e.values:
                self.eval(sub)
        elif isinstance(e, ir.Not):
            self.eval(e.operand)
        elif isinstance(e, ir.OtherExpr):
            for sub in e.children:
                self.eval(sub)
        return UNKNOWN_VALUE

    def attribute(self, e: ir.Attr) -> Value:
        if isinstance(e.value, ir.Name) and e.value.id == "self":
            return self.env.get(f"self.{e.attr}", UNKNOWN_VALUE)
        out: set[Fact] = set()
        for f in self.eval(e.value):
            if isinstance(f, PathFact):
                out |= self.path_value(f"{f.path}.{e.attr}")
            elif isinstance(f, GroupFact) and self.api.is_same_group_attribute(e.attr):
                out.add(f)
            else:
                out.add(UNKNOWN)
        return frozenset(out) or UNKNOWN_VALUE

    def path_value(self, path: str) -> set[Fact]:
        groups = self.api.getters.get(path)
        if groups:
            return {GroupFact(g) for g in groups}
        size = self.api.sizes.get(path)
        if size:
            return {SizeFact(size)}
        return {PathFact(path)}

    def call(self, c: ir.Call) -> Value:
        args = [self.eval(a.value) for a in c.args]
        self.facts.passed_on.update(id(f.allocation.call) for value in args for f in value if isinstance(f, BufferFact))
        result: set[Fact] = set()
        if isinstance(c.func, ir.Attr):
            receiver = self.eval(c.func.value)
            method = c.func.attr
            if self.api.is_collective_method(method):
                if any(isinstance(f, (GroupFact, ParamFact)) for f in receiver):
                    self.consume_all(c, args, receiver, method)
                    return UNKNOWN_VALUE
                self.want_groups(receiver)
            if method in VIEW_METHODS:
                result |= {f for f in receiver if isinstance(f, (BufferFact, ParamFact))}
            paths = [f"{f.path}.{method}" for f in receiver if isinstance(f, PathFact)]
        else:
            paths = [f.path for f in self.eval(c.func) if isinstance(f, PathFact)]
        for path in paths:
            result |= self.call_path(path, c, args)
        if not result:
            result.add(UNKNOWN)
        if self.contexts and not any(isinstance(f, (GroupFact, SizeFact, ContextFact)) for f in result):
            result |= {BufferFact(ctx) for ctx in self.contexts}
            if isinstance(c.func, (ir.Name, ir.Attr)) and self.api.is_tensor_factory(render(c.func) or ""):
                self.facts.factory_made.update(id(ctx.call) for ctx in self.contexts)
        return frozenset(result)

    def call_path(self, path: str, c: ir.Call, args: list[Value]) -> set[Fact]:
        api = self.api
        if (groups := api.getters.get(path)) is not None:
            return {GroupFact(g) for g in groups}
        if (size := api.sizes.get(path)) is not None:
            return {SizeFact(size)}
        if (allocator := api.allocators.get(path)) is not None:
            return {BufferFact(self.allocate("call", path, c, args, allocator))}
        if (context := api.contexts.get(path)) is not None:
            disabled = c.keyword(context.disabled) if context.disabled else None
            if isinstance(disabled, ir.Const) and disabled.value is True:
                return {UNKNOWN}
            return {ContextFact(self.allocate("context", path, c, args, Allocator(context.group)))}
        if (collective := api.collectives.get(path)) is not None:
            self.collective(path, c, args, collective)
            return {UNKNOWN}
        if api.local_copies.get(path):
            self.local_copy(c, args)
            return {UNKNOWN}
        facts = {type(f) for value in args for f in value}
        if BufferFact in facts:
            self.facts.wanted.add(path)  # may consume the buffer: its summary would tell
        if ParamFact in facts:
            self.facts.passes_params_to.add(path)
        return {PathFact(f"{path}()")}

    # allocations and consumptions ---------------------------------------------------
    def argument(self, c: ir.Call, args: list[Value], where: GroupParam) -> Value | None:
        found = c.find_argument(where.param, where.index)
        if found is not None:
            return args[found]
        if c.has_star_args:
            return UNKNOWN_VALUE
        return None

    def allocate(self, kind: str, name: str, c: ir.Call, args: list[Value], allocator: Allocator) -> Allocation:
        missing: str | None = None
        group_params: frozenset[int] = frozenset()
        origin = None
        if allocator.group is None:
            groups: frozenset[str] | None = allocator.hidden_groups or None
            origin = allocator.origin
        else:
            value = self.argument(c, args, allocator.group)
            if value is None and allocator.hidden_groups:
                groups, origin = allocator.hidden_groups, allocator.origin
            elif value is None:
                groups, missing = None, allocator.group.param
            else:
                groups = known_groups(value)
                self.want_groups(value)
                group_params = frozenset(f.index for f in value if isinstance(f, ParamFact))
        allocation = Allocation(
            kind, name, c, groups, group_params, missing, origin, self.facts.qualname,
            self.facts.class_name, self.cond, self.statement,
        )
        previous = self._allocations.get(id(c))
        if previous is not None:  # a loop's second pass: one allocation per call site
            if previous.groups != groups and previous.groups is not None and groups is not None:
                previous = replace(previous, groups=previous.groups | groups)
                self._allocations[id(c)] = previous
            return previous
        self._allocations[id(c)] = allocation
        return allocation

    def collective(self, name: str, c: ir.Call, args: list[Value], collective: Collective) -> None:
        if collective.buffers:
            for bp in collective.buffers:
                value = self.argument(c, args, GroupParam(bp.param, bp.index))
                if value is not None:
                    self.consume(c, value, frozenset(GroupFact(g) for g in bp.groups), name)
            return
        if collective.groups:
            group_value: Value = frozenset(GroupFact(g) for g in collective.groups)
        else:
            found = self.argument(c, args, collective.group)
            group_value = found if found is not None else UNKNOWN_VALUE  # the default group
        self.consume_all(c, args, group_value, name)

    def consume_all(self, c: ir.Call, args: list[Value], group_value: Value, name: str) -> None:
        for value in args:
            if value is not group_value:
                self.consume(c, value, group_value, name)

    def want_groups(self, value: Value) -> None:
        """A group expression that did not resolve: a helper's summary may say which group it is."""
        self.facts.wanted.update(f.path.removesuffix("()") for f in value if isinstance(f, PathFact))

    def consume(self, c: ir.Call, value: Value, group_value: Value, name: str) -> None:
        consumer = known_groups(group_value)
        self.want_groups(group_value)
        display = name.rpartition(".")[2]
        for f in value:
            if isinstance(f, ParamFact) and consumer:
                previous = self.facts.param_consumers.get(f.index, frozenset())
                self.facts.param_consumers[f.index] = previous | consumer
                self.facts.param_consumer_names.setdefault(f.index, display)
            if not isinstance(f, BufferFact):
                continue
            allocation = self._allocations.get(id(f.allocation.call), f.allocation)
            path = allocation.cond | self.cond
            if contradicts(path) or (id(allocation.call), id(c)) in self._seen:
                continue
            self._seen.add((id(allocation.call), id(c)))
            single = self.api.single_rank_groups(holding(path))
            binding = allocation.groups - single if allocation.groups is not None else frozenset()
            self.facts.consumptions.append(
                Consumption(allocation, display, c, (consumer or frozenset()) - single, binding)
            )

    def local_copy(self, c: ir.Call, args: list[Value]) -> None:
        """`dp_scatter(local, global)`: remember the pair; a local copy is not a collective."""
        if len(args) < 2:
            return
        sources = [f.allocation for f in args[1] if isinstance(f, BufferFact)] or [None]
        for dst in args[0]:
            if isinstance(dst, BufferFact):
                self.facts.scatter_pairs.extend((dst.allocation, src) for src in sources)

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
        key = self.operand(test)
        when_true = frozenset({(key, True)}) if key else frozenset()
        when_false = frozenset({(key, False)}) if key else frozenset()
        held = self.env.get(test.id) if isinstance(test, ir.Name) else self.attribute(test) if _on_self(test) else None
        if held:
            for f in held:
                if isinstance(f, CondFact):
                    when_true, when_false = when_true | f.when_true, when_false | f.when_false
        return when_true, when_false

    def operand(self, e: ir.Expr) -> str | None:
        sizes = {f.quantity for f in self.eval(e) if isinstance(f, SizeFact)}
        if len(sizes) == 1:
            return sizes.pop()
        return render(e)


def _on_self(e: ir.Expr) -> bool:
    return isinstance(e, ir.Attr) and isinstance(e.value, ir.Name) and e.value.id == "self"


def _splits_buffer(source: ir.Expr | None) -> bool:
    return (
        isinstance(source, ir.Call)
        and isinstance(source.func, ir.Attr)
        and source.func.attr in _SPLITTING_METHODS
    )
