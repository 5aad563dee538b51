"""Lower libcst trees into the IR, keeping positions and the CST nodes that fixes edit."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import libcst as cst
from libcst.metadata import CodeRange

from commgroup_lint.analysis import ir

_COMPARE_OPS: dict[type, str] = {
    cst.Equal: "==", cst.NotEqual: "!=", cst.LessThan: "<", cst.LessThanEqual: "<=",
    cst.GreaterThan: ">", cst.GreaterThanEqual: ">=", cst.Is: "is", cst.IsNot: "is not",
    cst.In: "in", cst.NotIn: "not in",
}
_CONSTANT_NAMES = {"True": True, "False": False, "None": None}


def dotted_name(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted_name(node.value)}.{node.attr.value}"
    return ""


class _CstLowerer:
    def __init__(self, positions: Mapping[cst.CSTNode, CodeRange]) -> None:
        self._positions = positions

    def span(self, node: cst.CSTNode) -> ir.Span:
        r = self._positions.get(node)
        if r is None:
            return ir.NO_SPAN
        return ir.Span(r.start.line, r.start.column, r.end.line, r.end.column)

    # expressions
    def expr(self, node: cst.BaseExpression | None) -> ir.Expr:
        if node is None:
            return ir.Const(None)
        span = self.span(node)
        if isinstance(node, cst.Name):
            if node.value in _CONSTANT_NAMES:
                return ir.Const(_CONSTANT_NAMES[node.value], span)
            return ir.Name(node.value, span)
        if isinstance(node, cst.Attribute):
            return ir.Attr(self.expr(node.value), node.attr.value, span)
        if isinstance(node, cst.Call):
            args = tuple(
                ir.Arg(self.expr(a.value), a.keyword.value if a.keyword else None, a.star) for a in node.args
            )
            return ir.Call(self.expr(node.func), args, span, node)
        if isinstance(node, cst.Subscript):
            single = node.slice[0].slice if len(node.slice) == 1 else None
            if isinstance(single, cst.Slice):
                bounds = (self.expr(single.lower), self.expr(single.upper)) if single.step is None else None
                return ir.Subscript(self.expr(node.value), None, span, bounds)
            index = self.expr(single.value) if isinstance(single, cst.Index) else None
            return ir.Subscript(self.expr(node.value), index, span)
        if isinstance(node, (cst.Tuple, cst.List)):
            return ir.TupleExpr(tuple(self.element(e) for e in node.elements), span)
        if isinstance(node, cst.IfExp):
            return ir.IfExpr(self.expr(node.test), self.expr(node.body), self.expr(node.orelse), span)
        if isinstance(node, cst.Comparison):
            ops = tuple(_COMPARE_OPS[type(c.operator)] for c in node.comparisons)
            return ir.Compare(self.expr(node.left), ops, tuple(self.expr(c.comparator) for c in node.comparisons), span)
        if isinstance(node, cst.BooleanOperation):
            op = "and" if isinstance(node.operator, cst.And) else "or"
            return ir.BoolOp(op, (self.expr(node.left), self.expr(node.right)), span)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            return ir.Not(self.expr(node.expression), span)
        if isinstance(node, cst.NamedExpr) and isinstance(node.target, cst.Name):
            return ir.NamedExpr(node.target.value, self.expr(node.value), span)
        if isinstance(node, (cst.Integer, cst.Float)):
            return ir.Const(node.evaluated_value, span)
        if isinstance(node, cst.SimpleString):
            return ir.Const(node.evaluated_value, span)
        if isinstance(node, cst.Await):
            return self.expr(node.expression)
        if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            return self.comprehension(node, span)
        if isinstance(node, cst.Yield):
            value = node.value.item if isinstance(node.value, cst.From) else node.value
            return ir.Yield(self.expr(value) if value is not None else None, isinstance(node.value, cst.From), span)
        if isinstance(node, cst.Lambda):
            return ir.Lambda(self.parameters(node.params), self.expr(node.body), span)
        if isinstance(node, cst.Dict):
            keys = tuple(self.expr(e.key) if isinstance(e, cst.DictElement) else None for e in node.elements)
            return ir.DictExpr(keys, tuple(self.expr(e.value) for e in node.elements), span)
        arith = isinstance(node, (cst.BinaryOperation, cst.UnaryOperation))
        op = "+" if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add) else ""
        return ir.OtherExpr(tuple(self.expr(c) for c in _sub_expressions(node)), span, arith, op)

    def comprehension(self, node: cst.ListComp | cst.SetComp | cst.GeneratorExp | cst.DictComp,
                      span: ir.Span) -> ir.Comprehension:
        clauses: list[ir.ForClause] = []
        clause: cst.CompFor | None = node.for_in
        while clause is not None:
            tests = tuple(self.expr(test.test) for test in clause.ifs)
            clauses.append(ir.ForClause(self.expr(clause.target), self.expr(clause.iter), tests))
            clause = clause.inner_for_in
        if isinstance(node, cst.DictComp):
            return ir.Comprehension(tuple(clauses), self.expr(node.value), self.expr(node.key), span)
        return ir.Comprehension(tuple(clauses), self.expr(node.elt), None, span)

    def element(self, node: cst.BaseElement) -> ir.Expr:
        if isinstance(node, cst.StarredElement):
            return ir.Starred(self.expr(node.value), self.span(node))
        return self.expr(node.value)

    # statements
    def body(self, block: cst.BaseSuite | Sequence[cst.CSTNode]) -> tuple[ir.Stmt, ...]:
        nodes: Sequence[cst.CSTNode] = () if isinstance(block, cst.BaseSuite) else block
        if isinstance(block, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            nodes = block.body
        out: list[ir.Stmt] = []
        for node in nodes:
            if isinstance(node, cst.SimpleStatementLine):
                out.extend(self.small(s) for s in node.body)
            elif isinstance(node, cst.BaseSmallStatement):
                out.append(self.small(node))
            else:
                out.append(self.compound(node))
        return tuple(out)

    def small(self, node: cst.BaseSmallStatement) -> ir.Stmt:
        span = self.span(node)
        if isinstance(node, cst.Assign):
            return ir.Assign(tuple(self.expr(t.target) for t in node.targets), self.expr(node.value), span)
        if isinstance(node, cst.AnnAssign):
            if node.value is None:
                return ir.OtherStmt((), span)
            return ir.Assign((self.expr(node.target),), self.expr(node.value), span)
        if isinstance(node, cst.Expr):
            return ir.ExprStmt(self.expr(node.value), span)
        if isinstance(node, cst.Assert):
            return ir.Assert(self.expr(node.test), span)
        if isinstance(node, cst.Return):
            return ir.Return(self.expr(node.value) if node.value else None, span)
        if isinstance(node, (cst.Raise, cst.Break, cst.Continue)):
            return ir.Jump(type(node).__name__.lower(), span)
        if isinstance(node, cst.Import):
            names = tuple(
                ir.plain_import(dotted_name(a.name), dotted_name(a.asname.name) if a.asname else None)
                for a in node.names
            )
            return ir.Import(names, span, node)
        if isinstance(node, cst.ImportFrom):
            module = dotted_name(node.module) if node.module else ""
            if isinstance(node.names, cst.ImportStar):  # as the ast front end writes it
                return ir.Import((ir.ImportName(module, "*", "*", len(node.relative)),), span, node)
            names = tuple(
                ir.ImportName(module, dotted_name(a.name), dotted_name(a.asname.name) if a.asname else dotted_name(a.name), len(node.relative))
                for a in node.names
            )
            return ir.Import(names, span, node)
        return ir.OtherStmt(tuple(self.expr(c) for c in _sub_expressions(node)), span)

    def compound(self, node: cst.CSTNode) -> ir.Stmt:
        span = self.span(node)
        if isinstance(node, cst.If):
            return ir.If(self.expr(node.test), self.body(node.body), self.orelse(node.orelse), span)
        if isinstance(node, cst.For):
            return ir.Loop(self.expr(node.target), self.expr(node.iter), self.body(node.body), self.orelse(node.orelse), span)
        if isinstance(node, cst.While):
            return ir.Loop(None, self.expr(node.test), self.body(node.body), self.orelse(node.orelse), span)
        if isinstance(node, cst.With):
            items = tuple(
                ir.WithItem(self.expr(i.item), self.expr(i.asname.name) if i.asname else None) for i in node.items
            )
            return ir.With(items, self.body(node.body), span, node.asynchronous is not None)
        if isinstance(node, (cst.Try, cst.TryStar)):
            return ir.Try(
                self.body(node.body),
                tuple(self.body(h.body) for h in node.handlers),
                self.orelse(node.orelse),
                self.body(node.finalbody.body) if node.finalbody else (),
                span,
            )
        if isinstance(node, cst.FunctionDef):
            return self.function(node)
        if isinstance(node, cst.ClassDef):
            bases = tuple(self.expr(arg.value) for arg in node.bases)
            fields = tuple(small.target.value for line in node.body.body if isinstance(line, cst.SimpleStatementLine)
                           for small in line.body if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name))
            return ir.ClassDef(node.name.value, self.body(node.body), self.span(node.name), bases, fields)
        if isinstance(node, cst.Match):
            cases = [(tuple(self.captures(case.pattern, ())), self.body(case.body)) for case in node.cases]
            return ir.match_as_ifs(self.expr(node.subject), cases, span)
        return ir.OtherStmt((), span)

    def captures(self, pattern: cst.MatchPattern, steps: tuple[tuple[str, object], ...]) -> Iterator[ir.Capture]:
        """What a `case` pattern binds, as `lower_ast` reads it."""
        if isinstance(pattern, cst.MatchAs):
            if pattern.pattern is not None:
                yield from self.captures(pattern.pattern, steps)
            if pattern.name is not None:
                yield pattern.name.value, steps
        elif isinstance(pattern, cst.MatchOr) and pattern.patterns:
            yield from self.captures(pattern.patterns[0].pattern, steps)
        elif isinstance(pattern, (cst.MatchList, cst.MatchTuple)):
            items = pattern.patterns
            star = next((i for i, p in enumerate(items) if isinstance(p, cst.MatchStar)), None)
            for i, p in enumerate(items):
                if isinstance(p, cst.MatchSequenceElement):
                    yield from self.captures(p.value, (*steps, ("item", i if star is None or i < star else i - len(items))))
        elif isinstance(pattern, cst.MatchMapping):
            for element in pattern.elements:
                key = self.expr(element.key)
                if isinstance(key, ir.Const):
                    yield from self.captures(element.pattern, (*steps, ("key", key.value)))
        elif isinstance(pattern, cst.MatchClass):
            for keyword in pattern.kwds:
                yield from self.captures(keyword.pattern, (*steps, ("attr", keyword.key.value)))

    def orelse(self, node: cst.If | cst.Else | None) -> tuple[ir.Stmt, ...]:
        if node is None:
            return ()
        if isinstance(node, cst.If):
            return (self.compound(node),)
        return self.body(node.body)

    def parameters(self, p: cst.Parameters) -> tuple[ir.Param, ...]:
        params = [self.param(x) for x in (*p.posonly_params, *p.params)]
        if isinstance(p.star_arg, cst.Param):
            params.append(self.param(p.star_arg, "*"))
        params += [self.param(x) for x in p.kwonly_params]
        if p.star_kwarg is not None:
            params.append(self.param(p.star_kwarg, "**"))
        return tuple(params)

    def function(self, node: cst.FunctionDef) -> ir.FunctionDef:
        params = self.parameters(node.params)
        outer, name = self.span(node), self.span(node.name)
        # the `def` line: decorators excluded, the column of the statement's indentation
        def_span = ir.Span(name.line, outer.col, name.end_line, name.end_col)
        nonlocals = tuple(n.name.value for s in _small_statements(node.body) if isinstance(s, cst.Nonlocal) for n in s.names)
        globals_ = tuple(n.name.value for s in _small_statements(node.body) if isinstance(s, cst.Global) for n in s.names)
        return ir.FunctionDef(
            node.name.value, params, self.body(node.body),
            tuple(self.expr(d.decorator) for d in node.decorators), def_span, nonlocals, globals_,
        )

    def param(self, node: cst.Param, star: str = "") -> ir.Param:
        default = self.expr(node.default) if node.default is not None else None
        return ir.Param(star + node.name.value, default, self.span(node))


def _small_statements(block: cst.BaseSuite) -> Iterator[cst.BaseSmallStatement]:
    """The simple statements directly in a block (`nonlocal x` on a line of its own or after `:`)."""
    if isinstance(block, cst.SimpleStatementSuite):
        yield from block.body
    elif isinstance(block, cst.IndentedBlock):
        for line in block.body:
            if isinstance(line, cst.SimpleStatementLine):
                yield from line.body


def _sub_expressions(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """The expressions directly below `node`, looking through wrappers such as `Arg` or `Element`."""
    found: list[cst.BaseExpression] = []
    for child in node.children:
        if isinstance(child, cst.BaseExpression):
            found.append(child)
        elif not isinstance(child, (cst.BaseSuite, cst.BaseStatement)):
            found.extend(_sub_expressions(child))
    return found


def lower_cst(module: cst.Module, positions: Mapping[cst.CSTNode, CodeRange]) -> ir.Module:
    return ir.Module(_CstLowerer(positions).body(module.body))
