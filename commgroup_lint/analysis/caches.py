"""Objects cached without regard to the group they were made for (CGL007).

A function given a group that keeps what it builds from it in a slot every caller shares (a
module global, a class attribute, an entry of a dict held in one of these) and builds it only
when the slot is empty hands the first caller's object to every later one, whatever group
they ask for. A dict keyed by the group (or by anything derived from it: `group.group_name`,
`(id(group), size)`) is a cache per group and is fine.

Read from the function's IR: which names are derived from the group (assigned from an
expression that names it), which slots are shared (names assigned at the module's top level,
attributes of the class or of `cls`), and which tests guard the store.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.conditions import render
from commgroup_lint.analysis.walk import calls_in, names_in, statement_paths, walk


@dataclass(frozen=True)
class Cached:
    """A store of an object built from the group into a shared slot, done only while it is empty."""

    store: ir.Assign
    slot: str  # the slot as written (`_WORKSPACE`, `cls._comm`, `_CACHE[key]`)
    kind: str  # "module global", "class attribute" or "dict"
    group: str  # the group parameter it was built from
    key: str | None  # the dict's key as written, when a dict
    returned: bool  # the function returns what the slot holds (a getter, not a set-up run once)


def group_caches(fn: ir.FunctionDef, module: ir.Module, class_name: str | None,
                 groups: set[str]) -> Iterator[Cached]:
    """The stores of `fn` that cache an object built from one of `groups` (its group
    parameters) in a slot shared by all callers."""
    params = {p.name.lstrip("*") for p in fn.params}
    if not groups:
        return
    derived = derived_names(fn.body, groups)
    globals_ = _top_level_names(module.body)
    cls_names = {"cls", *([class_name] if class_name else [])}
    returns = [s.value for s, _ in statement_paths(fn.body) if isinstance(s, ir.Return) and s.value is not None]
    reported: set[str] = set()  # one finding per slot: the first store (a branch per backend stores again)
    stores = [(s, tuple(node.test for node, _ in path)) for s, path in statement_paths(fn.body) if isinstance(s, ir.Assign)]
    for store, tests in stores:
        value_names = set(names_in(store.value))
        group = next((g for g in sorted(groups) if derived.get(g, set()) & value_names), None)
        if group is None:
            continue
        for target in store.targets:
            shared = _shared_slot(target, globals_ - params, cls_names)
            if shared is None:
                continue
            slot, kind, key = shared
            if key is not None and derived[group] & set(names_in(key)):
                continue  # keyed by the group: one object per group
            base = target.value if isinstance(target, ir.Subscript) else target
            guards = [test for test in tests if any(_same(base, e) for e in walk(test) if isinstance(e, (ir.Name, ir.Attr)))]
            if not guards:
                continue  # built on every call, not only while the slot is empty
            if any((derived[group] - globals_) & set(names_in(test)) for test in guards):
                continue  # rebuilt when the group differs (`_buffer.group != group`): one object per group
            if slot in reported:
                continue
            reported.add(slot)
            returned = any(_same(base, e) for r in returns for e in walk(r) if isinstance(e, (ir.Name, ir.Attr)))
            yield Cached(store, slot, kind, group, render(key) if key is not None else None, returned)


def derived_names(body: tuple[ir.Stmt, ...], groups: set[str]) -> dict[str, set[str]]:
    """For each group parameter, the names holding it or something made from it (assignments
    in order, one pass: `comm = Comm(group)`, `key = comm.name`)."""
    out = {g: {g} for g in groups}
    for stmt, _ in statement_paths(body):
        if isinstance(stmt, ir.Assign):
            read = set(names_in(stmt.value))
            for names in out.values():
                if names & read:
                    names.update(n for t in stmt.targets if isinstance(t, (ir.Name, ir.TupleExpr)) for n in names_in(t))
    return out


def _top_level_names(body: tuple[ir.Stmt, ...]) -> set[str]:
    return {t.id for s in body if isinstance(s, ir.Assign) for t in s.targets if isinstance(t, ir.Name)}


def _shared_slot(target: ir.Expr, globals_: set[str], cls_names: set[str]) -> tuple[str, str, ir.Expr | None] | None:
    """(the slot as written, its kind, the dict key) when `target` is shared by every caller."""
    if isinstance(target, ir.Subscript):
        inner = _shared_slot(target.value, globals_, cls_names)
        if inner is None or target.index is None:
            return None
        return f"{inner[0]}[{render(target.index) or '...'}]", "dict", target.index
    if isinstance(target, ir.Name) and target.id in globals_:
        return target.id, "module global", None
    if isinstance(target, ir.Attr) and _is_class(target.value, cls_names):
        return render(target) or target.attr, "class attribute", None
    return None


def _is_class(expr: ir.Expr, cls_names: set[str]) -> bool:
    """`cls`, the class's own name, `type(self)` or `self.__class__`."""
    if isinstance(expr, ir.Name):
        return expr.id in cls_names
    if isinstance(expr, ir.Attr):
        return expr.attr == "__class__"
    return isinstance(expr, ir.Call) and isinstance(expr.func, ir.Name) and expr.func.id == "type"


def _same(a: ir.Expr, b: ir.Expr) -> bool:
    text = render(a)
    return text is not None and text == render(b)


def callers_groups(module: ir.Module, fn: ir.FunctionDef, group: str, method: bool) -> list[str | None]:
    """What each call of `fn` in the module passes for its parameter `group` (as written; None
    when it cannot be told): callers that ask for different groups make the cache wrong now."""
    names = [p.name for p in fn.params]
    index = names.index(group) - (1 if method else 0)
    found: list[str | None] = []
    for call in calls_in(module.body):
        callee = call.func
        if not (isinstance(callee, ir.Name) and not method and callee.id == fn.name
                or isinstance(callee, ir.Attr) and method and callee.attr == fn.name):
            continue
        at = call.find_argument(group, index)
        found.append(render(call.args[at].value) if at is not None else None)
    return found

