"""Lower CPython `ast` trees into the IR (the cheap front end used to index summaries)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

from commgroup_lint.analysis import ir

MAX_NESTING = 200
"""Expression and statement levels (an `elif` is not one); a function nested deeper is reported
(CGL000) and left out of the analysis, a deeper statement outside any function loses the file."""

_COMPARE_OPS: dict[type, str] = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
}


class _AstLowerer:
    def __init__(self, text: str) -> None:
        self._depth = 0
        self.too_deep: list[ir.FunctionDef] = []  # functions left with no body: nested too deeply
        # only \n, \r\n and \r end a line for the tokenizer (not \f or \x1c as for str.splitlines)
        self._lines = text.split("\n") if "\r" not in text else re.split(r"(?<=\r\n)|(?<=\n)|(?<=\r)(?!\n)", text)
        # the lines where a byte column is not a character column (most files have none)
        self._wide = frozenset(i + 1 for i, line in enumerate(self._lines) if not line.isascii()) if not text.isascii() \
            else frozenset()

    # positions: ast columns count UTF-8 bytes, the IR counts characters
    def _col(self, line: int, byte_col: int) -> int:
        if line not in self._wide:
            return byte_col
        return len(self._lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def span(self, node: ast.expr | ast.stmt | ast.arg) -> ir.Span:
        line = node.lineno
        end_line = node.end_lineno or line
        col = node.col_offset
        end_col = node.end_col_offset or 0
        if self._wide:
            col, end_col = self._col(line, col), self._col(end_line, end_col)
        return _make_span((line, col, end_line, end_col))

    # Nesting is counted while lowering (expressions and statements together) and a file
    # deeper than MAX_NESTING is refused here: the dataflow recurses over the IR too, and a
    # RecursionError there would stop the whole run, not just this file.
    def _enter(self) -> None:
        self._depth += 1
        if self._depth > MAX_NESTING:
            raise RecursionError(f"nested more than {MAX_NESTING} levels deep")

    # expressions
    # (no `finally`: an error ends the whole lowering, so the count need not be restored then)
    def expr(self, node: ast.expr | None) -> ir.Expr:
        self._enter()
        lowered = self._expr(node)
        self._depth -= 1
        return lowered

    def _expr(self, node: ast.expr | None) -> ir.Expr:
        if node is None:
            return ir.Const(None)
        # (the span made inline: one per node of every file, and most files have no wide line)
        span = self.span(node) if self._wide else _make_span(
            (node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0))
        kind = type(node)
        if kind is ast.Name:
            return ir.Name(node.id, span)  # type: ignore[attr-defined]
        if kind is ast.Attribute:
            return ir.Attr(self.expr(node.value), node.attr, span)  # type: ignore[attr-defined]
        if kind is ast.Call:
            return self.call(node, span)  # type: ignore[arg-type]
        if kind is ast.Constant:
            return ir.Const(node.value, span)  # type: ignore[attr-defined]
        lower = _EXPRESSIONS.get(kind)
        if lower is not None:
            return lower(self, node, span)
        if kind is ast.UnaryOp and isinstance(node.op, ast.Not):  # type: ignore[attr-defined]
            return ir.Not(self.expr(node.operand), span)  # type: ignore[attr-defined]
        if kind is ast.NamedExpr and isinstance(node.target, ast.Name):  # type: ignore[attr-defined]
            return ir.NamedExpr(node.target.id, self.expr(node.value), span)  # type: ignore[attr-defined]
        if kind is ast.Await:
            return self.expr(node.value)  # type: ignore[attr-defined]
        children = tuple(self.expr(c) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr))
        op = "+" if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) else ""
        return ir.OtherExpr(children, span, kind is ast.BinOp or kind is ast.UnaryOp, op)

    def call(self, node: ast.Call, span: ir.Span) -> ir.Call:
        args = [
            ir.Arg(self.expr(a.value), star="*") if isinstance(a, ast.Starred) else ir.Arg(self.expr(a))
            for a in node.args
        ]
        args += [ir.Arg(self.expr(k.value), k.arg, "" if k.arg else "**") for k in node.keywords]
        return ir.Call(self.expr(node.func), tuple(args), span, node)

    def subscript(self, node: ast.Subscript, span: ir.Span) -> ir.Subscript:
        piece = node.slice
        if isinstance(piece, ast.Slice):
            bounds = (self.expr(piece.lower), self.expr(piece.upper)) if piece.step is None else None
            return ir.Subscript(self.expr(node.value), None, span, bounds)
        index = None if isinstance(piece, ast.Tuple) else self.expr(piece)
        return ir.Subscript(self.expr(node.value), index, span)

    def sequence(self, node: ast.Tuple | ast.List, span: ir.Span) -> ir.TupleExpr:
        return ir.TupleExpr(tuple(self.expr(e) for e in node.elts), span)

    def if_expr(self, node: ast.IfExp, span: ir.Span) -> ir.IfExpr:
        return ir.IfExpr(self.expr(node.test), self.expr(node.body), self.expr(node.orelse), span)

    def compare(self, node: ast.Compare, span: ir.Span) -> ir.Compare:
        ops = tuple(_COMPARE_OPS[type(op)] for op in node.ops)
        return ir.Compare(self.expr(node.left), ops, tuple(self.expr(c) for c in node.comparators), span)

    def bool_op(self, node: ast.BoolOp, span: ir.Span) -> ir.BoolOp:
        op = "and" if isinstance(node.op, ast.And) else "or"
        return ir.BoolOp(op, tuple(self.expr(v) for v in node.values), span)

    def starred(self, node: ast.Starred, span: ir.Span) -> ir.Starred:
        return ir.Starred(self.expr(node.value), span)

    def dict_display(self, node: ast.Dict, span: ir.Span) -> ir.DictExpr:
        keys = tuple(None if k is None else self.expr(k) for k in node.keys)
        return ir.DictExpr(keys, tuple(self.expr(v) for v in node.values), span)

    # statements
    def body(self, stmts: list[ast.stmt]) -> tuple[ir.Stmt, ...]:
        return tuple(self.stmt(s) for s in stmts)

    def stmt(self, node: ast.stmt) -> ir.Stmt:
        self._enter()
        lowered = self._stmt(node)
        self._depth -= 1
        return lowered

    def _stmt(self, node: ast.stmt) -> ir.Stmt:
        span = self.span(node)
        if isinstance(node, ast.Assign):
            return ir.Assign(tuple(self.expr(t) for t in node.targets), self.expr(node.value), span)
        if isinstance(node, ast.AnnAssign):
            if node.value is None:
                return ir.OtherStmt((), span)
            return ir.Assign((self.expr(node.target),), self.expr(node.value), span)
        if isinstance(node, ast.Expr):
            return ir.ExprStmt(self.expr(node.value), span)
        if isinstance(node, ast.If):
            return self.if_chain(node)
        if isinstance(node, (ast.For, ast.AsyncFor)):
            return ir.Loop(self.expr(node.target), self.expr(node.iter), self.body(node.body), self.body(node.orelse), span)
        if isinstance(node, ast.While):
            return ir.Loop(None, self.expr(node.test), self.body(node.body), self.body(node.orelse), span)
        if isinstance(node, (ast.With, ast.AsyncWith)):
            items = tuple(
                ir.WithItem(self.expr(i.context_expr), self.expr(i.optional_vars) if i.optional_vars else None)
                for i in node.items
            )
            return ir.With(items, self.body(node.body), span, isinstance(node, ast.AsyncWith))
        if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            handlers = tuple(self.body(h.body) for h in node.handlers)  # type: ignore[attr-defined]
            return ir.Try(self.body(node.body), handlers, self.body(node.orelse), self.body(node.finalbody), span)  # type: ignore[attr-defined]
        if isinstance(node, ast.Assert):
            return ir.Assert(self.expr(node.test), span)
        if isinstance(node, ast.Return):
            return ir.Return(self.expr(node.value) if node.value else None, span)
        if isinstance(node, (ast.Raise, ast.Break, ast.Continue)):
            return ir.Jump(type(node).__name__.lower(), span)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return self.function(node, span)
        if isinstance(node, ast.ClassDef):
            bases = tuple(self.expr(base) for base in node.bases)
            fields = tuple(s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name))
            return ir.ClassDef(node.name, self.body(node.body), span, bases, fields)
        if isinstance(node, ast.Import):
            # `import a.b` binds `a` (to module `a`); `import a.b as x` binds `x` to `a.b`
            names = tuple(ir.plain_import(a.name, a.asname) for a in node.names)
            return ir.Import(names, span, node)
        if isinstance(node, ast.ImportFrom):
            names = tuple(
                ir.ImportName(node.module or "", a.name, a.asname or a.name, node.level) for a in node.names
            )
            return ir.Import(names, span, node)
        if isinstance(node, ast.Match):
            return self.match(node)
        exprs = tuple(self.expr(c) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr))
        return ir.OtherStmt(exprs, span)

    def if_chain(self, node: ast.If) -> ir.If:
        """An `if` and its `elif`s (an `else` holding only an `if`), lowered in a loop and counted
        as one level: the `elif`s of a chain are not nested in one another, whatever the tree says."""
        chain = [node]
        while len(chain[-1].orelse) == 1 and isinstance(chain[-1].orelse[0], ast.If):
            chain.append(chain[-1].orelse[0])
        orelse = self.body(chain[-1].orelse)
        for link in reversed(chain):
            lowered = ir.If(self.expr(link.test), self.body(link.body), orelse, self.span(link))
            orelse = (lowered,)
        return lowered

    def parameters(self, a: ast.arguments) -> tuple[ir.Param, ...]:
        positional = [*a.posonlyargs, *a.args]
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        params = [ir.Param(p.arg, self.expr(d) if d else None, self.span(p)) for p, d in zip(positional, defaults)]
        if a.vararg:
            params.append(ir.Param("*" + a.vararg.arg, None, self.span(a.vararg)))
        params += [
            ir.Param(p.arg, self.expr(d) if d else None, self.span(p)) for p, d in zip(a.kwonlyargs, a.kw_defaults)
        ]
        if a.kwarg:
            params.append(ir.Param("**" + a.kwarg.arg, None, self.span(a.kwarg)))
        return tuple(params)

    def comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
                      span: ir.Span) -> ir.Comprehension:
        clauses = tuple(ir.ForClause(self.expr(g.target), self.expr(g.iter), tuple(self.expr(t) for t in g.ifs))
                        for g in node.generators)
        if isinstance(node, ast.DictComp):
            return ir.Comprehension(clauses, self.expr(node.value), self.expr(node.key), span)
        return ir.Comprehension(clauses, self.expr(node.elt), None, span)

    def yield_(self, node: ast.Yield | ast.YieldFrom, span: ir.Span) -> ir.Yield:
        value = self.expr(node.value) if node.value is not None else None
        return ir.Yield(value, isinstance(node, ast.YieldFrom), span)

    def lambda_(self, node: ast.Lambda, span: ir.Span) -> ir.Lambda:
        return ir.Lambda(self.parameters(node.args), self.expr(node.body), span)

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, span: ir.Span) -> ir.FunctionDef:
        params = self.parameters(node.args)
        # the `def` line up to the end of the name, as the libcst front end spans it
        header = self._lines[node.lineno - 1] if node.lineno <= len(self._lines) else ""
        name_end = _name_end(header, span.col, node.name)
        def_span = ir.Span(node.lineno, span.col, node.lineno, name_end)
        decorators = tuple(self.expr(d) for d in node.decorator_list)
        depth = self._depth
        try:
            body = self.body(node.body)
        except RecursionError:  # this function is lost, not the file
            self._depth = depth
            left_out = ir.FunctionDef(node.name, params, (), decorators, def_span)
            self.too_deep.append(left_out)
            return left_out
        nonlocals = tuple(n for s in node.body if isinstance(s, ast.Nonlocal) for n in s.names)
        globals_ = tuple(n for s in node.body if isinstance(s, ast.Global) for n in s.names)
        return ir.FunctionDef(node.name, params, body, decorators, def_span, nonlocals, globals_)

    def match(self, node: ast.Match) -> ir.Stmt:
        cases = [(tuple(_captures(case.pattern, ())), self.body(case.body)) for case in node.cases]
        return ir.match_as_ifs(self.expr(node.subject), cases, self.span(node))


_EXPRESSIONS: dict[type, Any] = {
    ast.Subscript: _AstLowerer.subscript, ast.Tuple: _AstLowerer.sequence, ast.List: _AstLowerer.sequence,
    ast.IfExp: _AstLowerer.if_expr, ast.Compare: _AstLowerer.compare, ast.BoolOp: _AstLowerer.bool_op,
    ast.Starred: _AstLowerer.starred, ast.Dict: _AstLowerer.dict_display, ast.Lambda: _AstLowerer.lambda_,
    ast.ListComp: _AstLowerer.comprehension, ast.SetComp: _AstLowerer.comprehension,
    ast.GeneratorExp: _AstLowerer.comprehension, ast.DictComp: _AstLowerer.comprehension,
    ast.Yield: _AstLowerer.yield_, ast.YieldFrom: _AstLowerer.yield_,
}
_make_span = ir.Span._make  # without the generated `__new__`'s extra call


def _name_end(header: str, col: int, name: str) -> int:
    """Where the function's name ends on its `def` line (`col`, where the `def` or `async`
    starts, if the name is not on that line)."""
    at = header.find("def", col)
    if at == -1:
        return col
    start = at + 3
    while start < len(header) and header[start] in " \t":
        start += 1
    end = start + len(name)
    if start == at + 3 or not header.startswith(name, start) or (end < len(header) and (header[end].isalnum() or header[end] == "_")):
        return col
    return end


def lower_ast(tree: ast.Module, text: str) -> ir.Module:
    lowerer = _AstLowerer(text)
    body = lowerer.body(tree.body)
    return ir.Module(body, tuple(lowerer.too_deep))


def _captures(pattern: ast.pattern, steps: tuple[tuple[str, object], ...]) -> Iterator[ir.Capture]:
    """What a `case` pattern binds (see `ir.Capture`); a star, `**rest` or a class pattern's
    positional part binds what is not followed."""
    if isinstance(pattern, ast.MatchAs):
        if pattern.pattern is not None:
            yield from _captures(pattern.pattern, steps)
        if pattern.name is not None:
            yield pattern.name, steps
    elif isinstance(pattern, ast.MatchOr) and pattern.patterns:  # each alternative binds the same names
        yield from _captures(pattern.patterns[0], steps)
    elif isinstance(pattern, ast.MatchSequence):
        star = next((i for i, p in enumerate(pattern.patterns) if isinstance(p, ast.MatchStar)), None)
        for i, p in enumerate(pattern.patterns):
            if i != star:
                yield from _captures(p, (*steps, ("item", i if star is None or i < star else i - len(pattern.patterns))))
    elif isinstance(pattern, ast.MatchMapping):
        for key, p in zip(pattern.keys, pattern.patterns):
            if isinstance(key, ast.Constant):
                yield from _captures(p, (*steps, ("key", key.value)))
    elif isinstance(pattern, ast.MatchClass):
        for attr, p in zip(pattern.kwd_attrs, pattern.kwd_patterns):
            yield from _captures(p, (*steps, ("attr", attr)))
