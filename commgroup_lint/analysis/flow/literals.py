"""Conditions: the literals a test adds to the path, and the scoped operands they are about."""

from __future__ import annotations

from commgroup_lint.analysis import behaviour as b
from commgroup_lint.analysis import ir
from commgroup_lint.analysis.conditions import (
    GLOBAL,
    LOCAL,
    PARAM,
    QUANTITY,
    SELF,
    Branches,
    argument_operand,
    constant_operand,
    disjunction,
    operand_scope,
    relation_key,
)
from commgroup_lint.analysis.facts import (
    CondFact,
    Fact,
    GroupFact,
    ObjectFact,
    ParamFact,
    PathFact,
    SizeFact,
    Value,
)
from commgroup_lint.analysis.flow.base import FlowBase
from commgroup_lint.analysis.flow.state import (
    attribute_key,
)


class Literals(FlowBase):
    """Reading tests as literals over operands (world sizes, module-level objects, parameters, locals)."""

    def literals(self, test: ir.Expr) -> Branches:
        """Literals that hold when `test` is true, and when it is false."""
        if isinstance(test, ir.Not):
            when_true, when_false = self.literals(test.operand)
            return when_false, when_true
        if isinstance(test, ir.BoolOp):
            parts = [self.literals(v) for v in test.values]
            if test.op == "and":  # false when one of its operands is: a disjunction
                return frozenset().union(*(p[0] for p in parts)), disjunction(p[1] for p in parts)
            return disjunction(p[0] for p in parts), frozenset().union(*(p[1] for p in parts))
        if isinstance(test, ir.Compare) and len(test.ops) == 1:
            left, right = self.operand(test.left), self.operand(test.comparators[0])
            if left and right:
                key, holds = relation_key(left, test.ops[0], right)
                return frozenset({(key, holds)}), frozenset({(key, not holds)})
            return frozenset(), frozenset()
        operand = self.operand(test)
        when_true = frozenset({(operand, True)}) if operand else frozenset()
        when_false = frozenset({(operand, False)}) if operand else frozenset()
        if isinstance(test, ir.Name):
            held = self.env.get(test.id)
            source = self._sources.get(test.id)
            if isinstance(source, ir.Call) and not source.args and test.id not in self.params:
                # `use_world = world_gather_enabled()`, then `if use_world:`: a test of the call
                called_true, called_false = self.literals(source)
                when_true, when_false = when_true | called_true, when_false | called_false
            elif isinstance(source, ir.Attr) and operand_scope(copied := self.operand(source) or LOCAL) != LOCAL:
                # `use_cp = self._use_cp`, then `if use_cp:`: a test of the attribute
                when_true, when_false = when_true | {(copied, True)}, when_false | {(copied, False)}
        elif isinstance(test, ir.Attr) and self.on_self(test):
            held = self.attribute(test)
        elif isinstance(test, ir.Attr):  # `if t._use_cp:`: what the instance keeps there
            held = frozenset(g for f in self.eval_quietly(test.value) if isinstance(f, ObjectFact)
                             for g in f.field(test.attr) or ())
        elif isinstance(test, ir.Call):
            held = self._call_values.get(id(test))
        else:
            held = None
        if held:
            for f in held:
                if isinstance(f, CondFact):
                    when_true, when_false = when_true | f.when_true, when_false | f.when_false
        return when_true, when_false

    def holds_parameter(self, name: str) -> bool:
        """Whether the variable still holds its parameter's value (not reassigned since)."""
        value = self.env.get(name)
        index = self.params[name]
        return value is None or all(isinstance(f, ParamFact) and f.index == index and f.attr is None for f in value)

    def operand(self, e: ir.Expr) -> str | None:
        """The scoped text of an operand (see `conditions`): a world size, a module-level object,
        an attribute of `self`, a parameter, a local variable, or a constant."""
        if isinstance(e, ir.Const):
            return constant_operand(e.value)
        if isinstance(e, (ir.Name, ir.Attr, ir.Call)):
            sizes = {f.quantity for f in self.eval_quietly(e) if isinstance(f, SizeFact)}
            if len(sizes) == 1:
                return QUANTITY + sizes.pop()
        if isinstance(e, ir.Name):
            if e.id == self.self_name:
                return SELF
            if e.id in self.params and self.holds_parameter(e.id):
                # by its place among a call's positional arguments (a method's `self` is not one)
                return f"{PARAM}{self.params[e.id] - (1 if self.self_name else 0)}:{e.id}"
            if e.id in self.env:
                return LOCAL + e.id
            qualified = self.imports.qualify(e)
            return GLOBAL + qualified if qualified else None
        if isinstance(e, ir.Attr):
            base = self.operand(e.value)
            return f"{base}.{e.attr}" if base else None
        if isinstance(e, ir.Subscript) and isinstance(e.index, ir.Const):  # `x.shape[0]`
            base = self.operand(e.value)
            return f"{base}[{e.index.value!r}]" if base else None
        if isinstance(e, ir.Call) and not any(a.star for a in e.args):
            base = self.operand(e.func)
            if base is None:
                return None
            args = []
            for a in e.args:
                text = self.argument_text(a.value)
                if text is None:
                    return None
                args.append((f"{a.keyword}=" if a.keyword else "") + text)
            return f"{base}({', '.join(args)})"
        return None

    def argument_text(self, e: ir.Expr) -> str | None:
        """A call's argument in its operand: a constant as written, else its own operand
        (`cp_active(batch)` tests the caller's `batch` once the call is translated)."""
        if isinstance(e, ir.Const):
            return repr(e.value)
        inner = self.operand(e)
        return None if inner is None else argument_operand(inner)

    def eval_quietly(self, e: ir.Expr) -> Value:
        """A value for reading conditions: a call is not evaluated again (it was when the test ran)."""
        if isinstance(e, ir.Call):
            if isinstance(e.func, (ir.Name, ir.Attr)) and not e.args:
                func = self.eval_quietly(e.func)
                out: set[Fact] = set()
                for f in func:
                    if isinstance(f, PathFact):
                        behaviour = self.api.call(f.path)
                        if behaviour is not None:
                            out |= {SizeFact(r.quantity) for r in behaviour.returns if isinstance(r, b.Size)}
                return frozenset(out)
            return frozenset()
        if isinstance(e, ir.Attr):
            if self.on_self(e):
                return self.env.get(attribute_key(e.attr), frozenset())
            base = self.eval_quietly(e.value) if isinstance(e.value, (ir.Name, ir.Attr, ir.Call)) else frozenset()
            out = set()
            for f in base:
                if isinstance(f, PathFact):
                    out |= self.path_value(f"{f.path}.{e.attr}")
                elif isinstance(f, GroupFact) and e.attr in self.api.profile.size_group_attributes:
                    out.add(self.group_size(f))
            if not base or all(not isinstance(f, PathFact) for f in base):
                quantity = self.api.profile.size_attributes.get(e.attr)
                if quantity and not any(isinstance(f, (SizeFact, GroupFact)) for f in out):
                    out.add(SizeFact(quantity))
            return frozenset(out)
        if isinstance(e, ir.Name):
            if e.id in self.env:
                return self.env[e.id]
            qualified = self.imports.qualify(e)
            return frozenset(self.path_value(qualified)) if qualified else frozenset()
        return frozenset()
