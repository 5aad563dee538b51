"""Run the group dataflow over every function of a module.

Methods of a class see what any method of the class (or of a base class in the module)
stores on `self`: a group chosen in `__init__`, a flag computed in one method and read in
another, a buffer bound in one method and consumed in another. What is carried between
methods keeps only the literals that mean the same there (attributes of `self`, sizes,
module-level values), and a constructor's parameter stands for the group it will be.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.api import Api
from commgroup_lint.analysis.conditions import GLOBAL, QUANTITY, SELF
from commgroup_lint.analysis.facts import (
    SYMBOLIC,
    BufferFact,
    CallableFact,
    CondFact,
    ContextFact,
    Fact,
    FunctionFacts,
    GroupFact,
    ObjectFact,
    ParamFact,
    PathFact,
    SizeFact,
    TupleFact,
    Value,
)
from commgroup_lint.analysis.flow import Env, FunctionFlow, Scope, attribute_key, cells, scoped
from commgroup_lint.analysis.names import ImportTable
from commgroup_lint.analysis.recording import Lookups, Recorder

ClassInfo = tuple[tuple[str, ...], frozenset[str], tuple[tuple[str, Value], ...], tuple[str, ...], frozenset[str]]
"""(bases, methods, what its methods store on `self`, record fields, properties)."""
"""(qualified bases, names of the methods it defines, what its methods store on `self` that a
subclass in another module reads: see `class_attributes`, the names annotated in its body in
order: a record's fields)."""
_SHARED_SCOPES = (QUANTITY, GLOBAL, SELF)


def analyze_module(module: ir.Module, imports: ImportTable, api: Api, display: str = "",
                   memo: StepMemo | None = None) -> list[FunctionFacts]:
    """The facts of the module's top level and of every function and method in it. With a
    `memo`, each step is recorded there and a step of its last analysis is reused where it holds."""
    memo = memo or StepMemo(None)
    analysis = _ModuleAnalysis(api, imports, display, memo.classes(module, imports), memo)
    analysis.bound_globals = memo.shape(module, "globals", partial(bound_globals, module))
    top = FunctionFacts(imports.module, None, None)
    top = analysis.memo.run(imports.module, None, partial(analysis.flow, top, module.body, (), None, False, None)).facts
    return [top, *analysis.body(module.body, imports.module, None, {})]


@dataclass
class Step:
    """One function's dataflow within a module's analysis: what it started from (`inputs`: the
    attributes of `self` its class's other methods leave, or its enclosing function's
    closure), the `Api` answers it asked for, and what it found."""

    qualname: str
    inputs: Env | None  # of a method, only the attributes its body names (`self.x`) can change it
    lookups: Lookups
    facts: FunctionFacts
    env: Env  # its variables at the end: the closure of the functions nested in it
    extra: Any = None  # what the caller derived from the facts (the index's summaries), reused with them
    _closure: Env | None = None

    @property
    def closure(self) -> Env:
        """What the functions nested in it see of its variables."""
        if self._closure is None:
            self._closure = {k: v for k, v in self.env.items() if all(isinstance(f, _CLOSURE) for f in v)}
        return self._closure


class StepMemo:
    """The steps of one analysis of a module, in order, and those of its last analysis: a
    step whose inputs are the same and whose lookups all get the same answer is reused, so a
    re-analysis (a callee's summary changed) redoes only the functions that asked about it.
    Without a recorder nothing is logged or reused."""

    def __init__(self, recorder: Recorder | None, previous: StepMemo | None = None) -> None:
        self.recorder = recorder
        self.previous: Sequence[Step] = previous.steps if previous is not None else ()
        # what the IR alone decides (a body's definitions, which methods store on `self`), by node
        self.shapes: dict[tuple[int, str], Any] = previous.shapes if previous is not None else {}
        self.steps: list[Step] = []

    def shape(self, node: object, what: str, compute: Callable[[], Any]) -> Any:
        """`compute()`, worked out once per IR node (the nodes live as long as the memo's IR)."""
        key = (id(node), what)
        try:
            return self.shapes[key]
        except KeyError:
            found = self.shapes[key] = compute()
            return found

    def classes(self, module: ir.Module, imports: ImportTable) -> dict[str, ClassInfo]:
        """The module's classes (`module_classes`), worked out once for all its analyses."""
        found: dict[str, ClassInfo] = self.shape(module, "classes", partial(module_classes, module, imports))
        return found

    def run(self, qualname: str, inputs: Env | None, compute: Callable[[], tuple[FunctionFacts, Env]],
            method: ir.FunctionDef | None = None) -> Step:
        """The step's result: the last analysis's where it holds, else `compute()`'s. A `method`'s
        inputs (its class's attributes) count only where its body names them."""
        recorder = self.recorder
        if recorder is None:
            facts, env = compute()
            return Step(qualname, inputs, {}, facts, env)
        at = len(self.steps)
        old = self.previous[at] if at < len(self.previous) else None
        if old is not None and old.qualname == qualname and self._same_inputs(old.inputs, inputs, method) \
                and recorder.valid(old.lookups):
            step = old
        else:
            with recorder.recording() as log:
                facts, env = compute()
            step = Step(qualname, inputs, log, facts, env)
        self.steps.append(step)
        return step

    def _same_inputs(self, old: Env | None, new: Env | None, method: ir.FunctionDef | None) -> bool:
        if old == new:
            return True
        if method is None or old is None or new is None:
            return False
        names = self.shape(method, "self attributes", partial(attributes_named, method))
        return all(old.get(key) == new.get(key) for key in names)


def bound_globals(module: ir.Module) -> frozenset[str]:
    """The module's globals that one of its functions (methods, nested ones) binds to a
    parameter (`def set_buffer(buf): global _BUF; _BUF = buf`): what they hold only the
    setter's callers know, so a getter returns them as the global itself (see `GlobalFact`)."""
    found: set[str] = set()
    for fn in _statements(module.body, ir.FunctionDef):
        if fn.globals:
            params = {p.name.lstrip("*") for p in fn.params}
            found.update(t.id for stmt in _statements(fn.body, ir.Assign, nested=False) for t in stmt.targets
                         if isinstance(t, ir.Name) and t.id in fn.globals
                         and isinstance(stmt.value, ir.Name) and stmt.value.id in params)
    return frozenset(found)


def _statements(body: Sequence[ir.Stmt], kind: type | tuple[type, ...], nested: bool = True) -> Iterator[Any]:
    """The statements of `kind` anywhere in the blocks (in functions and classes defined
    there too, unless not `nested`)."""
    stack: list[ir.Stmt] = list(body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, kind):
            yield stmt
        if isinstance(stmt, (ir.FunctionDef, ir.ClassDef)):
            stack.extend(stmt.body if nested else ())
        elif isinstance(stmt, (ir.If, ir.Loop)):
            stack.extend(stmt.body + stmt.orelse)
        elif isinstance(stmt, ir.With):
            stack.extend(stmt.body)
        elif isinstance(stmt, ir.Try):
            stack.extend(stmt.body + stmt.orelse + stmt.finalbody + tuple(s for h in stmt.handlers for s in h))


def attributes_named(fn: ir.FunctionDef) -> frozenset[str]:
    """The `self.x` keys a method's body (nested functions included) names through its first
    parameter: the only attributes of `self` its dataflow can read."""
    if not fn.params:
        return frozenset()
    me = fn.params[0].name.lstrip("*")  # as the dataflow names `self` (`def m(*args)`: `args`)
    found: set[str] = set()
    stack: list[Any] = [fn.body, fn.params]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is tuple or kind is list:
            stack.extend(item)
        elif kind is ir.Attr and type(item.value) is ir.Name and item.value.id == me:
            found.add(attribute_key(item.attr))
        else:
            fields = ir.FIELDS.get(kind)
            if fields:
                stack.extend([getattr(item, name) for name in fields])
    return frozenset(found)


def module_classes(module: ir.Module, imports: ImportTable) -> dict[str, ClassInfo]:
    """Every class of the module (nested ones too) with its bases and methods."""
    found: dict[str, ClassInfo] = {}

    def visit(body: Sequence[ir.Stmt], prefix: str) -> None:
        for cls in _definitions(body, ir.ClassDef):
            qualname = f"{prefix}.{cls.name}"
            bases = tuple(q for base in cls.bases if (q := imports.qualify(base)))
            functions = tuple(_definitions(cls.body, ir.FunctionDef))
            methods = frozenset(fn.name for fn in functions)
            properties = frozenset(fn.name for fn in functions if _is_property(fn))
            found[qualname] = (bases, methods, (), cls.fields, properties)
            visit(cls.body, qualname)
        for name, fields in _record_factories(body, imports):
            found.setdefault(f"{prefix}.{name}", ((), frozenset(), (), fields, frozenset()))

    visit(module.body, imports.module)
    return found


class _ModuleAnalysis:
    def __init__(self, api: Api, imports: ImportTable, display: str, classes: dict[str, ClassInfo],
                 memo: StepMemo) -> None:
        self.api, self.imports, self.display, self.classes, self.memo = api, imports, display, classes, memo
        self.stores: dict[str, Env] = {}  # class -> what its methods store on `self`
        self.names: dict = {}  # see `flow.Scope.names`
        self.bound_globals: frozenset[str] = frozenset()  # see `flow.Scope.bound_globals`

    def body(self, body: Sequence[ir.Stmt], prefix: str, cls: str | None, seed: Env,
             top_level: bool = True, enclosing: Env | None = None) -> Iterator[FunctionFacts]:
        functions, classes = self.memo.shape(body, "definitions", lambda: (
            tuple(_definitions(body, ir.FunctionDef)), tuple(_definitions(body, ir.ClassDef))))
        for fn in functions:
            is_method = cls is not None and not _is_static(fn)
            by_name = top_level and (cls is None or _is_static_or_class_method(fn))
            qualname = f"{prefix}.{fn.name}"
            shared = seed if is_method or not top_level else {}  # `self` attributes, or a closure
            facts = FunctionFacts(qualname, fn, _short(cls), by_name, cls)
            if enclosing:  # what it closes over of its enclosing function's parameters: cells, given when it is made
                facts.cells = cells(fn, enclosing)
                shared = {**shared, **{name: frozenset({ParamFact(len(fn.params) + k, name)})
                                       for k, name in enumerate(facts.cells)}}
            step = self.memo.run(qualname, shared, partial(self.flow, facts, fn.body, fn.params, cls, is_method, shared),
                                 fn if is_method else None)
            yield step.facts
            # a nested function sees what its enclosing function chose (closures)
            yield from self.body(fn.body, qualname, None, step.closure, top_level=False, enclosing=step.env)
        for klass in classes:
            yield from self.klass(klass, f"{prefix}.{klass.name}", top_level)

    def flow(self, facts: FunctionFacts, body: Sequence[ir.Stmt], params: Sequence[ir.Param], cls: str | None,
             is_method: bool, seed: Env | None) -> tuple[FunctionFacts, Env]:
        """Run the dataflow of one function (or of the module's top level) into `facts`."""
        self.names = {}  # module-level names' values, remembered within one step (its lookups are its own)
        flow = FunctionFlow(self.api, self.scope(cls, is_method), facts, params, seed)
        flow.run(body)
        return facts, flow.env

    def imported_attributes(self, cls: str) -> list[tuple[str, Value]]:
        """What a class of another module (and its own bases) stores on `self`, as indexed."""
        found: list[tuple[str, Value]] = []
        pending, seen = [cls], set[str]()
        while pending and len(seen) < 32:
            klass = pending.pop(0)
            info = self.api.classes.get(klass)
            if klass in seen or info is None:
                continue
            seen.add(klass)
            found += info[2]
            pending += info[0]
        return found

    def scope(self, cls: str | None, is_method: bool) -> Scope:
        return Scope(self.imports, cls, self.display, is_method, self.classes, self.names, self.bound_globals)

    def klass(self, klass: ir.ClassDef, qualname: str, top_level: bool) -> Iterator[FunctionFacts]:
        seed: Env = {}
        for base in self.classes.get(qualname, ((), frozenset(), ()))[0]:
            inherited = self.stores[base].items() if base in self.stores else self.imported_attributes(base)
            for key, value in inherited:
                seed[key] = seed.get(key, frozenset()) | value
        storing = self.memo.shape(klass, "storing", lambda: tuple(
            fn for fn in _definitions(klass.body, ir.FunctionDef) if not _is_static(fn) and _stores_on_self(fn)))
        for fn in storing:
            # what the method leaves on `self`, for the class's other methods (its facts are found below)
            method = f"{qualname}.{fn.name}"
            before = dict(seed)
            facts = FunctionFacts(method, fn, klass.name, False, qualname)
            stores = self.memo.run(method, before, partial(self.flow, facts, fn.body, fn.params, qualname, True, before),
                                   fn).facts.stores
            for key, value in stores.items():
                shared = shareable(value, fn)
                if shared:
                    seed[key] = seed.get(key, frozenset()) | shared
        self.stores[qualname] = seed
        yield from self.body(klass.body, qualname, qualname, seed, top_level)


def _stores_on_self(fn: ir.FunctionDef) -> bool:
    """Whether the method assigns (or grows) an attribute of its first parameter anywhere."""
    if not fn.params:
        return False
    me = fn.params[0].name.lstrip("*")
    for stmt in _statements(fn.body, (ir.Assign, ir.ExprStmt), nested=False):
        if isinstance(stmt, ir.Assign):
            if any(_is_attr_of(t, me) for t in _targets(stmt.targets)):
                return True
        elif isinstance(stmt.value, ir.Call) and isinstance(stmt.value.func, ir.Attr):
            if _is_attr_of(stmt.value.func.value, me):  # `self.groups.append(g)`
                return True
    return False


def _targets(targets: Sequence[ir.Expr]) -> Iterator[ir.Expr]:
    for t in targets:
        if isinstance(t, ir.TupleExpr):
            yield from _targets(t.elts)
        else:
            yield t


def _is_attr_of(e: ir.Expr, name: str) -> bool:
    return isinstance(e, ir.Attr) and isinstance(e.value, ir.Name) and e.value.id == name


def shareable(value: Value, fn: ir.FunctionDef) -> Value:
    """What a value stored on `self` means to the class's other methods."""
    out: set[Fact] = set()
    for f in value:
        carried = _carried(f, fn)
        if carried is not None:
            out.add(carried)
    return frozenset(out)


def _carried(f: Fact, fn: ir.FunctionDef) -> Fact | None:
    if isinstance(f, GroupFact):
        return GroupFact(f.group, scoped(f.guard, _SHARED_SCOPES))
    if isinstance(f, ParamFact):  # `self.group = group` in `__init__`: the group the constructor is given
        return GroupFact(SYMBOLIC + f.text)
    if isinstance(f, CondFact):
        return CondFact(scoped(f.when_true, _SHARED_SCOPES), scoped(f.when_false, _SHARED_SCOPES))
    if isinstance(f, (BufferFact, ContextFact)):
        # the storing method's parameters are not the reader's: the group stays by its name
        return type(f)(replace(f.allocation, cond=scoped(f.allocation.cond, _SHARED_SCOPES), group_params=frozenset()))
    if isinstance(f, (SizeFact, CallableFact, ObjectFact)):
        return f
    if isinstance(f, PathFact) and f.named:  # a module-level function or object
        return f
    if isinstance(f, TupleFact):
        items = tuple(frozenset(c for g in item if (c := _carried(g, fn)) is not None) for item in f.items)
        return TupleFact(items, f.depth)
    return None


_CLOSURE = (GroupFact, SizeFact, CondFact, BufferFact, ContextFact, CallableFact, PathFact)
_PORTABLE = (GroupFact, SizeFact, CondFact, ObjectFact)  # what means the same in another module


def class_attributes(functions: Sequence[FunctionFacts]) -> dict[str, tuple[tuple[str, Value], ...]]:
    """Per class, the groups, sizes, flags and objects its methods store on `self`: what a
    subclass defined in another module inherits (`self.cpu_group` set by a base's `__init__`).
    Memory stays behind: an allocation belongs to its own module's findings."""
    merged: dict[str, dict[str, set[Fact]]] = {}
    for f in functions:
        if f.class_qualname is None or f.node is None:
            continue
        for key, value in f.stores.items():
            portable = {g for g in shareable(value, f.node) if isinstance(g, _PORTABLE)}
            if portable:
                merged.setdefault(f.class_qualname, {}).setdefault(key, set()).update(portable)
    return {cls: tuple((k, frozenset(v)) for k, v in sorted(attrs.items())) for cls, attrs in merged.items()}


def _record_factories(body: Sequence[ir.Stmt], imports: ImportTable) -> Iterator[tuple[str, tuple[str, ...]]]:
    """`Entry = collections.namedtuple("Entry", ["group", "size"])` (and `typing.NamedTuple`'s
    functional form): a class made by a call, a record whose fields are its arguments' names."""
    for stmt in body:
        if not (isinstance(stmt, ir.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ir.Name)
                and isinstance(stmt.value, ir.Call) and len(stmt.value.args) >= 2
                and isinstance(stmt.value.func, (ir.Name, ir.Attr))
                and imports.qualify(stmt.value.func) in _RECORD_FACTORIES):
            continue
        spec = stmt.value.args[1].value
        if isinstance(spec, ir.Const) and isinstance(spec.value, str):
            names = tuple(spec.value.replace(",", " ").split())
        elif isinstance(spec, ir.TupleExpr):
            items = [e.elts[0] if isinstance(e, ir.TupleExpr) and e.elts else e for e in spec.elts]
            names = tuple(e.value for e in items if isinstance(e, ir.Const) and isinstance(e.value, str))
            if len(names) != len(items):
                continue
        else:
            continue
        yield stmt.targets[0].id, names


_RECORD_FACTORIES = frozenset({"collections.namedtuple", "typing.NamedTuple", "typing_extensions.NamedTuple"})


def _short(cls: str | None) -> str | None:
    return cls.rpartition(".")[2] if cls else None


def _is_property(fn: ir.FunctionDef) -> bool:
    """`@property`, `@functools.cached_property` (any spelling of the name)."""
    return any(isinstance(d, ir.Name) and d.id in _PROPERTIES or isinstance(d, ir.Attr) and d.attr in _PROPERTIES
               for d in fn.decorators)


_PROPERTIES = ("property", "cached_property")


def _decorated(fn: ir.FunctionDef, names: tuple[str, ...]) -> bool:
    return any(isinstance(d, ir.Name) and d.id in names for d in fn.decorators)


def _is_static(fn: ir.FunctionDef) -> bool:
    return _decorated(fn, ("staticmethod",))


def _is_static_or_class_method(fn: ir.FunctionDef) -> bool:
    return _decorated(fn, ("staticmethod", "classmethod"))


def _definitions(body: Sequence[ir.Stmt], kind: type) -> Iterator:
    """Definitions at this level, including those under `if`/`try`/`except` (conditional definitions,
    such as the fallback defined when an import fails), in order; a stack of blocks, not recursion,
    so that an `elif` chain of any length is walked."""
    blocks = [iter(body)]
    while blocks:
        stmt = next(blocks[-1], None)
        if stmt is None:
            blocks.pop()
        elif isinstance(stmt, kind):
            yield stmt
        elif isinstance(stmt, ir.If):
            blocks.append(iter(stmt.body + stmt.orelse))
        elif isinstance(stmt, ir.Try):
            blocks.append(iter(stmt.body + sum(stmt.handlers, ()) + stmt.orelse + stmt.finalbody))
