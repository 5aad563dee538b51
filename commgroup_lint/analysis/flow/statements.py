"""Statements: the flow through blocks, branches, loops, `with` and `try`, and what assignments bind."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.conditions import (
    GLOBAL,
    LOCAL,
    SELF,
    Literal,
    mentions,
    operand_scope,
)
from commgroup_lint.analysis.facts import (
    FRESH,
    RECEIVER,
    UNKNOWN,
    UNKNOWN_VALUE,
    BufferFact,
    CallableFact,
    CondFact,
    ConstFact,
    ContextFact,
    Fact,
    GlobalFact,
    GroupFact,
    ObjectFact,
    ParamFact,
    PathFact,
    SelfFieldFact,
    TupleFact,
    Value,
    held_by,
)
from commgroup_lint.analysis.flow.base import FlowBase
from commgroup_lint.analysis.flow.state import (
    NAMESPACE,
    NONE_VALUE,
    NULL_CONTEXT,
    Env,
    Fork,
    flatten,
    global_key,
    guard,
    guard_memory,
    iterated_elements,
    join,
    key_attribute,
    starred,
)

MAX_LISTS = 16  # a list appended to in this many ways (`if c: reasons.append(...)`, n times: 2**n) is kept unordered


class Statements(FlowBase):
    """Walking statements in order: each path its own environment, joined where paths meet."""

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
                self.facts.returns.update(guard(self.flag_value(self.eval(s.value), s.value), self.cond))
                if (attr := key_attribute(self.reference_key(s.value))) is not None:
                    self.facts.returns.add(SelfFieldFact(attr))  # a getter
                elif isinstance(s.value, ir.Name) and s.value.id == self.self_name and self.self_name:
                    self.facts.returns.add(SelfFieldFact(RECEIVER))  # a fluent method: its receiver
                elif isinstance(s.value, ir.Name) and s.value.id in self.scope.bound_globals \
                        and s.value.id not in self.env:  # a getter of a global
                    self.facts.returns.add(GlobalFact(f"{self.imports.module}.{s.value.id}"))
            return False
        elif isinstance(s, ir.Jump):
            if s.kind in ("break", "continue") and self._jumps:
                self._jumps[-1][s.kind].append(dict(self.env))
            return False
        elif isinstance(s, ir.FunctionDef):
            self.env[s.name] = self.local_function(s)
        elif isinstance(s, ir.ClassDef):
            self.env[s.name] = self.class_body(s)
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

    def class_body(self, s: ir.ClassDef) -> Value:
        """A class defined here: what its body binds to names, read here (it sees this
        function's variables), are its attributes (`class Local: group = g`, then `Local.group`);
        its methods are analysed on their own."""
        fields: list[tuple[str, Value]] = []
        for stmt in s.body:
            if isinstance(stmt, ir.Assign) and any(isinstance(t, ir.Name) for t in stmt.targets):
                value = self.eval(stmt.value)
                fields += [(t.id, value) for t in stmt.targets if isinstance(t, ir.Name)]
        return frozenset({ObjectFact(NAMESPACE, tuple(fields))}) if fields else UNKNOWN_VALUE

    def branch(self, test: ir.Expr, body: Sequence[ir.Stmt], orelse: Sequence[ir.Stmt]) -> bool:
        """An `if` and its `elif`s, walked in a loop rather than by recursing once per `elif` (a
        chain of thousands is valid Python): each undecided test forks the path, and the forks
        join again from the last `elif` back to the `if`, as nested `if`s would."""
        forks: list[Fork] = []
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
                forks.append(Fork(start_cond, when_true, when_false, through_body, self.env))
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

    def join_fork(self, fork: Fork, through_else: bool) -> bool:
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
                out[key] = frozenset(guard_memory(guard(value, literals), literals))
        return out

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
                self.bind(item.target, self.entered(value, item.context, "__aenter__" if s.is_async else "__enter__"), None)
        try:
            return self.block(s.body)
        finally:
            del self.contexts[depth:]  # also what `stack.enter_context(...)` entered inside

    def entered(self, manager: Value, expr: ir.Expr, enter: str = "__enter__") -> Value:
        """What `with manager as x` binds: what the manager's `__enter__` (`__aenter__`) returns (a
        class of the scanned code's), what a generator-based manager yields, `nullcontext(x)`'s `x`."""
        call = expr if isinstance(expr, ir.Call) else ir.Call(expr, (), expr.span)  # a manager made before
        out: set[Fact] = set()
        for f in manager:
            if isinstance(f, ObjectFact) and f.cls == NULL_CONTEXT:
                out |= f.field("enter_result") or NONE_VALUE
            elif isinstance(f, ObjectFact) and (method := self.resolve_method(enter, f.cls)):
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
            self.forget_members(key)
            self.env[key] = value
            self._bindings[key] = self._bindings.get(key, 0) + 1
            if source is not None:
                self._sources[key] = source
            else:
                self._sources.pop(key, None)
            if key_attribute(key) is not None:
                previous = self.facts.stores.get(key, frozenset())
                self.facts.stores[key] = previous | value
            elif self.facts.node is not None and key in self.facts.node.globals:
                self.store_global(f"{self.imports.module}.{key}", value)
        elif isinstance(target, ir.TupleExpr):
            if isinstance(source, ir.TupleExpr) and len(source.elts) == len(target.elts) and not starred(source):
                values = [self.eval(e) for e in source.elts]  # every right-hand side before any binding
                for t, v, e in zip(target.elts, values, source.elts):
                    self.bind(t, v, e)
                return
            if starred(target):
                sequences = [f for f in value if isinstance(f, TupleFact)]
                if len(sequences) == 1 and self.unpack_starred(target.elts, sequences[0].items):
                    return
            tuples = [f for f in value if isinstance(f, TupleFact) and len(f.items) == len(target.elts)]
            if tuples and not starred(target):
                for i, t in enumerate(target.elts):
                    self.bind(t, frozenset().union(*(f.items[i] for f in tuples)), None)
                return
            # a call returning several tensors (`h, r = norm(h, r)`, `a, b = x.split(n)`): each keeps the bindings
            element = frozenset(f for f in flatten(value) if isinstance(f, (BufferFact, ParamFact))) or UNKNOWN_VALUE
            for t in target.elts:
                self.bind(t.value if isinstance(t, ir.Starred) else t, element, None)
        else:
            self.store(target, value)

    def store_global(self, name: str, value: Value) -> None:
        """A module global bound, here or by a callee given what it binds: read after here in
        this function, or returned by a getter of it, it holds that."""
        self.facts.global_stores[name] = self.facts.global_stores.get(name, frozenset()) | value
        self.env[global_key(name)] = value  # and, read after here in this function, what it holds

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
        if key_attribute(key) is not None:
            self.facts.stores[key] = self.facts.stores.get(key, frozenset()) | grown

    def flag_value(self, value: Value, source: ir.Expr | None) -> Value:
        """A boolean expression keeps its literals (`use_x = a and not b`, `x if x is not None else c`)."""
        if isinstance(source, (ir.BoolOp, ir.Compare, ir.Not)) and not _holds_memory_or_group(value):
            return frozenset({CondFact(*self.literals(source))}) | value
        if isinstance(source, ir.IfExpr) and not _holds_memory_or_group(value):
            default = _none_default(source)
            if default is not None:
                return frozenset({CondFact(*self.literals(default))}) | value
        if isinstance(source, ir.Call) and source.args and not _holds_memory_or_group(value) \
                and not any(isinstance(f, (ObjectFact, TupleFact, CallableFact)) for f in value) \
                and operand_scope(self.operand(source.func) or LOCAL) in (GLOBAL, SELF):
            # `use_cp = cp_active(batch)`: read now, while `batch` is the batch the call was given
            # (an instance, a tuple or a callable it returns is no flag)
            when_true, when_false = self.literals(source)
            if when_true:
                return frozenset({CondFact(when_true, when_false)}) | value
        return value


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


def _held(value: Value, holder: str) -> Value:
    """`value` bound to `holder`: a new group it holds is named by it from now on (see `facts`)."""
    if not any(isinstance(f, GroupFact) and f.group.startswith(FRESH) for f in value):
        return value
    return frozenset(GroupFact(held_by(f.group, holder), f.guard) if isinstance(f, GroupFact) else f for f in value)


_GUARDED = (GroupFact, ParamFact, BufferFact)  # what carries the condition of the branch that left it
