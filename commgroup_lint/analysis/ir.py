"""A small intermediate representation of the Python the analysis cares about.

Two front ends lower into it: libcst for the files the rules check and fix (the nodes keep a
reference to their CST node), and CPython's `ast` for the cheap index of summaries. The
dataflow is written once, against this IR, so both give the same answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple


class Span(NamedTuple):
    """Source range: 1-based lines, 0-based character columns, end exclusive. (A named tuple:
    one is made for every node of every file lowered, and a tuple is the cheapest to make.)"""

    line: int
    col: int
    end_line: int
    end_col: int


NO_SPAN = Span(0, 0, 0, 0)


# Expressions ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, slots=True)
class Name:
    id: str
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class Attr:
    value: Expr
    attr: str
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class Arg:
    value: Expr
    keyword: str | None = None
    star: str = ""  # "", "*" or "**"


@dataclass(frozen=True, eq=False, slots=True)
class Call:
    func: Expr
    args: tuple[Arg, ...]
    span: Span = NO_SPAN
    source: Any = field(default=None, compare=False, repr=False)

    def __reduce__(self) -> tuple:
        """Pickled without its front end's node (a cache holds only the IR; see `cache.py`)."""
        return Call, (self.func, self.args, self.span)

    def find_argument(self, keyword: str, index: int | None) -> int | None:
        """Which of `args` passes the parameter called `keyword` at position `index`; None when
        no argument does or none can be told (positions after a `*args` are unknown)."""
        for i, a in enumerate(self.args):
            if a.keyword == keyword:
                return i
        position = 0
        for i, a in enumerate(self.args):
            if a.star == "*":
                return None
            if a.keyword is None and not a.star:
                if position == index:
                    return i
                position += 1
        return None

    def keyword(self, name: str) -> Expr | None:
        for a in self.args:
            if a.keyword == name:
                return a.value
        return None

    @property
    def has_star_args(self) -> bool:
        return any(a.star for a in self.args)


@dataclass(frozen=True, eq=False, slots=True)
class Subscript:
    value: Expr
    index: Expr | None = None  # a single index (`t[0]`, `mesh["tp"]`); None for slices and several
    span: Span = NO_SPAN
    bounds: tuple[Expr, Expr] | None = None  # a slice without a step (`t[1:]`): its bounds, `Const(None)` if left out


@dataclass(frozen=True, eq=False, slots=True)
class TupleExpr:
    elts: tuple[Expr, ...]
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class IfExpr:
    test: Expr
    body: Expr
    orelse: Expr
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class Compare:
    left: Expr
    ops: tuple[str, ...]
    comparators: tuple[Expr, ...]
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class BoolOp:
    op: str  # "and" | "or"
    values: tuple[Expr, ...]
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class Not:
    operand: Expr
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class Const:
    value: object
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class NamedExpr:
    """`(target := value)`: binds the name and evaluates to the value."""

    target: str
    value: Expr
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class Starred:
    """`*value` inside a tuple or list display: its elements are not known by position."""

    value: Expr
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class DictExpr:
    """A dict display: `keys[i]` maps to `values[i]`; a None key is a `**mapping` spread in."""

    keys: tuple[Expr | None, ...]
    values: tuple[Expr, ...]
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class ForClause:
    """One `for target in iter if test ...` of a comprehension."""

    target: Expr
    iter: Expr
    tests: tuple[Expr, ...] = ()


@dataclass(frozen=True, eq=False, slots=True)
class Comprehension:
    """`[element for ...]`, a set's, a generator's, or a dict's (`element` its value, `key` its key)."""

    clauses: tuple[ForClause, ...]
    element: Expr
    key: Expr | None = None
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class Yield:
    """`yield value` (`every`: `yield from value`, each of its elements)."""

    value: Expr | None
    every: bool = False
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class Lambda:
    """`lambda params: body`: a function defined where it is written (see `FunctionDef`)."""

    params: tuple[Param, ...]
    body: Expr
    span: Span = NO_SPAN

    def as_function(self) -> FunctionDef:
        """The same function as a `def` that returns its body, named by where it is written."""
        return FunctionDef(f"<lambda:{self.span.line}:{self.span.col}>", self.params, (Return(self.body, self.span),),
                           (), self.span)


@dataclass(frozen=True, eq=False, slots=True)
class OtherExpr:
    """Anything the analysis does not look into; its sub-calls are still visited. `arith` marks
    arithmetic (`a + b`, `-a`), which makes a new tensor; `op` is `+` for an addition (which
    concatenates two sequences)."""

    children: tuple[Expr, ...] = ()
    span: Span = NO_SPAN
    arith: bool = False
    op: str = ""


Expr = (Name | Attr | Call | Subscript | TupleExpr | IfExpr | Compare | BoolOp | Not | Const | NamedExpr | Starred
        | DictExpr | Comprehension | Yield | Lambda | OtherExpr)


# Statements -------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, slots=True)
class Assign:
    targets: tuple[Expr, ...]  # Name, TupleExpr of targets, or anything else (not tracked)
    value: Expr
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class ExprStmt:
    value: Expr
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class If:
    test: Expr
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class Loop:
    """`for` and `while`: the target (if any) is rebound on each iteration."""

    target: Expr | None
    iter: Expr
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class WithItem:
    context: Expr
    target: Expr | None


@dataclass(frozen=True, eq=False, slots=True)
class With:
    items: tuple[WithItem, ...]
    body: tuple[Stmt, ...]
    span: Span = NO_SPAN
    is_async: bool = False  # `async with`: the managers' `__aenter__`


@dataclass(frozen=True, eq=False, slots=True)
class Try:
    body: tuple[Stmt, ...]
    handlers: tuple[tuple[Stmt, ...], ...]
    orelse: tuple[Stmt, ...]
    finalbody: tuple[Stmt, ...]
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class Assert:
    """`assert test`: the test holds after it."""

    test: Expr
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class Return:
    value: Expr | None
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class Jump:
    """`raise`, `break` or `continue`: control leaves the block."""

    kind: str
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class Param:
    name: str
    default: Expr | None
    span: Span = NO_SPAN


@dataclass(frozen=True, eq=False, slots=True)
class FunctionDef:
    name: str
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    decorators: tuple[Expr, ...]
    span: Span = NO_SPAN  # the `def` line (decorators excluded)
    nonlocals: tuple[str, ...] = ()  # the names its body declares `nonlocal`: a call writes them back
    globals: tuple[str, ...] = ()  # the names its body declares `global`: what it binds there is the module's


@dataclass(frozen=True, eq=False, slots=True)
class ClassDef:
    name: str
    body: tuple[Stmt, ...]
    span: Span = NO_SPAN
    bases: tuple[Expr, ...] = ()
    fields: tuple[str, ...] = ()  # names annotated in the class body, in order (a record's fields)


@dataclass(frozen=True, eq=False, slots=True)
class ImportName:
    """`name` imported from `module` (None for `import module`), bound locally as `asname`."""

    module: str
    name: str | None
    asname: str
    level: int = 0


def plain_import(dotted: str, asname: str | None) -> ImportName:
    """`import a.b` binds `a` to module `a`; `import a.b as x` binds `x` to module `a.b`."""
    if asname:
        return ImportName(dotted, None, asname)
    head = dotted.split(".")[0]
    return ImportName(head, None, head)


@dataclass(frozen=True, eq=False, slots=True)
class Import:
    names: tuple[ImportName, ...]
    span: Span = NO_SPAN
    source: Any = field(default=None, compare=False, repr=False)

    def __reduce__(self) -> tuple:
        return Import, (self.names, self.span)


@dataclass(frozen=True, eq=False, slots=True)
class OtherStmt:
    exprs: tuple[Expr, ...] = ()
    span: Span = NO_SPAN


Stmt = (Assign | ExprStmt | If | Loop | With | Try | Assert | Return | Jump | FunctionDef | ClassDef | Import
        | OtherStmt)


Capture = tuple[str, tuple[tuple[str, object], ...]]
"""A name a `case` pattern binds, and the way from the subject to what it binds: steps
`("item", i)` (a sequence pattern's element), `("key", k)` (a mapping's), `("attr", a)` (a
class pattern's keyword)."""


def reach(held: Expr, steps: tuple[tuple[str, object], ...], span: Span) -> Expr:
    """The expression a capture binds: the subject, then each step's item or attribute."""
    for kind, key in steps:
        held = Attr(held, str(key), span) if kind == "attr" else Subscript(held, Const(key, span), span)
    return held


def match_as_ifs(subject: Expr, cases: Sequence[tuple[tuple[Capture, ...], tuple[Stmt, ...]]], span: Span) -> Stmt:
    """`match` as a chain of `if`s with unknown tests: each case is a branch, one of them runs.
    The subject is evaluated once, into a name of its own; a case starts by binding what its
    pattern captures (`case x:`, `case [first, _]:`, `case {"tp": group}:`, `case Cfg(group=g):`),
    each as the subject's item or attribute it is. `cases` holds (captures, body)."""
    held = Name(f"$match:{span.line}:{span.col}", span)
    chain: tuple[Stmt, ...] = ()
    for i, (captures, body) in enumerate(reversed(cases)):
        body = (*(Assign((Name(name, span),), reach(held, steps, span), span) for name, steps in captures), *body)
        test = NamedExpr(held.id, subject, span) if i == len(cases) - 1 else held
        chain = (If(OtherExpr((test,)), body, chain, span),)
    return chain[0] if chain else OtherStmt((subject,), span)


@dataclass(frozen=True, eq=False, slots=True)
class Module:
    body: tuple[Stmt, ...]
    too_deep: tuple[FunctionDef, ...] = ()  # functions nested too deeply to analyse, kept with no body


# each node type's fields that hold other nodes (not its span, nor its front end's node)
FIELDS: dict[type, tuple[str, ...]] = {
    kind: tuple(name for name in vars(kind)["__slots__"] if name not in ("span", "source"))
    for kind in list(globals().values())
    if isinstance(kind, type) and kind.__module__ == __name__ and "__slots__" in vars(kind) and kind is not Span
}


@lru_cache(maxsize=1024)
def names_read(fn: FunctionDef) -> frozenset[str]:
    """Every name a function's body (nested functions included) mentions: its free variables
    are among them."""
    found: set[str] = set()
    stack: list[Any] = [fn.body, tuple(p.default for p in fn.params)]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is tuple or kind is list:
            stack.extend(item)
        elif kind is Name:
            found.add(item.id)
        else:
            fields = FIELDS.get(kind)
            if fields:
                stack.extend([getattr(item, name) for name in fields])
    return frozenset(found)
