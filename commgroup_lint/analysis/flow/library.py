"""Python's builtins and standard library, as the model knows them: what each call or method
does to the values it is given.

A builtin is only itself when the module does not bind its name (`next`, `getattr`); a
standard-library function is known by its qualified name (`typing.cast`). A call this part
does not know is left to `Calls`, which looks it up in the profile and the scanned code.
"""

from __future__ import annotations

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.facts import (
    UNKNOWN_VALUE,
    Fact,
    ObjectFact,
    TupleFact,
    Value,
)
from commgroup_lint.analysis.flow.base import FlowBase
from commgroup_lint.analysis.flow.state import (
    ANY_KEY,
    DICT,
    NAMESPACE,
    NONE_VALUE,
    NULL_CONTEXT,
    dict_key,
    iterated_elements,
)

BUILTINS = frozenset({"next", "iter", "list", "tuple", "reversed", "sorted", "enumerate", "zip", "filter",
                      "getattr", "setattr", "dict"})
_SAME_VALUE = {"typing.cast": 1, "typing_extensions.cast": 1, "copy.copy": 0, "weakref.proxy": 0}  # which argument comes back
_NAMESPACES = frozenset({"types.SimpleNamespace", "argparse.Namespace"})
_DICT_READS = frozenset({"get", "pop", "setdefault"})


class Library(FlowBase):
    """The calls and methods of builtins and the standard library that move values around."""

    def library_call(self, c: ir.Call, args: list[Value]) -> Value | None:
        """The value of `c` when it is a builtin or standard-library call the model knows, else None."""
        if any(a.star for a in c.args):
            return None
        positional = [v for a, v in zip(c.args, args) if a.keyword is None]
        keywords = tuple((a.keyword, v) for a, v in zip(c.args, args) if a.keyword is not None)
        builtin = self.builtin(c.func)
        if builtin is not None:
            return self.builtin_call(builtin, c, positional, keywords)
        qualified = self.imports.qualify(c.func) if isinstance(c.func, (ir.Name, ir.Attr)) else None
        if qualified is None:
            return None
        if qualified in _SAME_VALUE and len(positional) > _SAME_VALUE[qualified]:
            return positional[_SAME_VALUE[qualified]]
        if qualified == NULL_CONTEXT and positional:  # the manager keeps what `with` binds
            return frozenset({ObjectFact(NULL_CONTEXT, (("enter_result", positional[0]),))})
        if qualified in _NAMESPACES and not positional:
            return frozenset({ObjectFact(NAMESPACE, keywords)})
        if qualified == "dataclasses.replace" and len(positional) == 1:
            return frozenset(_with_fields(f, keywords) for f in positional[0])
        if qualified == "itertools.chain":
            return TupleFact.of((frozenset().union(*(iterated_elements(v) for v in positional)),))
        return None

    def builtin_call(self, name: str, c: ir.Call, positional: list[Value],
                     keywords: tuple[tuple[str, Value], ...]) -> Value | None:
        if name == "getattr" and len(positional) in (2, 3) and (attr := _string(c.args[1].value)) is not None:
            value = self.attribute(ir.Attr(c.args[0].value, attr, c.span))
            return value | positional[2] if len(positional) == 3 else value
        if name == "setattr" and len(positional) == 3 and (attr := _string(c.args[1].value)) is not None:
            self.bind(ir.Attr(c.args[0].value, attr, c.span), positional[2], c.args[2].value)
            return NONE_VALUE
        if name == "dict":  # `dict(group=g)` is `{"group": g}`: keyed as a literal's entries are
            entries = tuple((dict_key(k), v) for k, v in keywords)
            if not positional:
                return frozenset({ObjectFact(DICT, entries)})
            return frozenset(_with_fields(f, entries) for f in positional[0]) if len(positional) == 1 else None
        if keywords:
            return None
        if name == "enumerate" and len(positional) == 1:
            return TupleFact.of((TupleFact.of((UNKNOWN_VALUE, iterated_elements(positional[0]))),))
        if name == "zip" and positional:
            return TupleFact.of((TupleFact.of(tuple(iterated_elements(v) for v in positional)),))
        if name == "filter" and len(positional) == 2:
            return TupleFact.of((iterated_elements(positional[1]),))
        if len(positional) != 1 or name not in ("next", "iter", "list", "tuple", "reversed", "sorted"):
            return None
        if name in ("list", "tuple", "iter") and all(isinstance(f, TupleFact) for f in positional[0]):
            return positional[0]  # the same items, by position
        elements = iterated_elements(positional[0])  # `next(it)`, `sorted(xs)`: a sequence of unknown order
        return elements if name == "next" else TupleFact.of((elements,))

    def container_method(self, f: Fact, method: str, c: ir.Call, args: list[Value]) -> Value | None:
        """A method of a dict or a list the model holds (`table.get("tp")`, `items.copy()`), else None."""
        if isinstance(f, ObjectFact) and f.cls == DICT:
            if method in _DICT_READS and args:
                key = _key_of(c.args[0].value)
                entry = f.field(key) if key is not None else None
                found = entry if entry is not None else frozenset(g for _, value in f.fields for g in value)
                return found | args[1] if len(args) > 1 else found or NONE_VALUE
            if method == "values":
                return TupleFact.of((frozenset(g for _, value in f.fields for g in value),))
            if method == "items":
                return TupleFact.of(tuple(TupleFact.of((UNKNOWN_VALUE, value)) for _, value in f.fields))
            if method == "copy":
                return frozenset({f})
        if isinstance(f, TupleFact):
            if method == "copy":
                return frozenset({f})
            if method == "pop":
                index = _int(c.args[0].value) if args else -1
                if index is not None and -len(f.items) <= index < len(f.items):
                    return f.items[index]
                return frozenset(g for item in f.items for g in item)
        return None


    def updated_dict(self, held: Value, method: str, c: ir.Call, args: list[Value]) -> Value:
        """The dicts `held` after `update(...)` (keywords, a dict) or `setdefault(key, value)`."""
        if method == "setdefault":
            key = _key_of(c.args[0].value) if len(c.args) == 2 and not c.args[0].keyword else None
            fields: tuple[tuple[str, Value], ...] = ((key, args[1]),) if key is not None else ()
            return frozenset(f if isinstance(f, ObjectFact) and f.field(key or "") is not None else _with_fields(f, fields)
                             for f in held)
        if any(a.star for a in c.args):
            return held
        keywords = tuple((a.keyword, v) for a, v in zip(c.args, args) if a.keyword is not None)
        keyed = tuple((dict_key(k), v) for k, v in keywords)  # a dict's entries, as a literal's are keyed
        given = [v for a, v in zip(c.args, args) if a.keyword is None]
        merged = [f for v in given for f in v if isinstance(f, ObjectFact) and f.cls == DICT]
        extra = tuple(item for f in merged for item in f.fields) if len(given) == len(merged) else ()
        return frozenset(_with_fields(f, extra + (keyed if isinstance(f, ObjectFact) and f.cls == DICT else keywords))
                         for f in held)


def dict_of_any(value: Value) -> Value:
    """A dict whose keys are not known (a comprehension's): every key maps to `value`."""
    return frozenset({ObjectFact(DICT, ((ANY_KEY, value),))})


def _with_fields(f: Fact, fields: tuple[tuple[str, Value], ...]) -> Fact:
    """An object (a record, a dict) with `fields` set, the others as they were."""
    if not isinstance(f, ObjectFact):
        return f
    names = {name for name, _ in fields}
    return ObjectFact(f.cls, tuple((n, v) for n, v in f.fields if n not in names) + fields)


def _string(e: ir.Expr) -> str | None:
    return e.value if isinstance(e, ir.Const) and isinstance(e.value, str) else None


def _int(e: ir.Expr) -> int | None:
    return e.value if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool) else None


def _key_of(e: ir.Expr) -> str | None:
    return dict_key(e.value) if isinstance(e, ir.Const) and isinstance(e.value, (str, int, bool, type(None))) else None

