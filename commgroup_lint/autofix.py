"""Choosing the group a fix passes, and the edits that pass it.

The group must be known from the code, in this order: the collective that consumes the
buffer later in the function; the paired operation (a scatter's local buffer mirrors the
gather that produced what it scatters); the sibling call sites' convention. Otherwise no
fix is offered and the finding says why. Fixes from the code's own dataflow are safe; one
copied from siblings is safe only when every sibling agrees.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.facts import Allocation, FunctionFacts
from commgroup_lint.analysis.siblings import Convention, Site, convention, group_argument, selection_in_scope, siblings
from commgroup_lint.edits import (
    add_import, append_keyword, insert_argument, insert_statement_before, replace_span, span_text, starts_line,
    statement_text,
)
from commgroup_lint.model import Applicability, Edit, Fix
from commgroup_lint.rule import FileContext, format_groups


@dataclass(frozen=True)
class Choice:
    """The group a fix passes and where it was learnt; `group` is None when there is none."""

    group: str | None
    origin: str  # for the description, or the reason no fix is offered
    safe: bool = True
    convention: Convention | None = None  # the siblings' convention, when copied from them

    @property
    def found(self) -> bool:
        return self.group is not None or self.convention is not None


class FixPlanner:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx

    @cached_property
    def _sites(self) -> dict[int, Site]:
        return {id(a.call): Site(a, fn) for fn in self.ctx.functions for a in fn.allocations}

    def site(self, allocation: Allocation) -> Site:
        return self._sites[id(allocation.call)]

    # where the group comes from -------------------------------------------------------
    def choose(self, allocation: Allocation, use_siblings: bool = True, consumer_only: bool = False) -> Choice:
        site = self.site(allocation)
        consumed = [c for c in site.function.consumptions if c.allocation.call is allocation.call and c.groups]
        reasons = []
        if consumed:
            common = frozenset.intersection(*(c.groups for c in consumed))
            first = consumed[0]
            if len(common) == 1:
                return Choice(next(iter(common)), f"the group of `{first.collective}` at line {first.call.span.line}")
            reasons.append(f"its consumers run on {format_groups(frozenset().union(*(c.groups for c in consumed)))}")
        if consumer_only:
            return Choice(None, "; ".join(reasons) or "no collective consumes the buffer in this function")
        paired = self._paired(site.function, allocation)
        if paired is not None:
            return paired
        if use_siblings:
            chosen = self._from_siblings(site)
            if chosen.found:
                return chosen
            reasons.append(chosen.origin)
        if not consumed:
            reasons.insert(0, "no collective consumes the buffer in this function")
        return Choice(None, "; ".join(reasons) + f"; candidates: {', '.join(sorted(self.candidates()))}")

    def candidates(self) -> frozenset[str]:
        """The groups this file works with (else every group the profile knows)."""
        used = frozenset(g for fn in self.ctx.functions for c in fn.consumptions for g in c.groups)
        used |= frozenset(g for fn in self.ctx.functions for a in fn.allocations for g in (a.groups or ()))
        return used or frozenset(self.ctx.api.profile.groups)

    def _paired(self, fn: FunctionFacts, allocation: Allocation) -> Choice | None:
        """A scattered-into buffer takes the group of the gather before it in the function: of the
        buffer it copies from when that is known, else of the buffers gathered earlier."""
        sources = [src for dst, src in fn.scatter_pairs if dst.call is allocation.call]
        if not sources:
            return None
        known = [src for src in sources if src is not None and src.call is not allocation.call]
        earlier = known or [a for a in fn.allocations if a.call.span.line < allocation.call.span.line]
        groups = {g for src in earlier if (g := self._gathered_group(src)) is not None}
        if len(groups) != 1:
            return None
        lines = ", ".join(str(src.call.span.line) for src in earlier)
        return Choice(groups.pop(), f"the group of the gathered buffer it scatters (line {lines})")

    def _gathered_group(self, allocation: Allocation) -> str | None:
        if allocation.groups and len(allocation.groups) == 1:
            return next(iter(allocation.groups))
        return self.choose(allocation, use_siblings=False, consumer_only=True).group

    def _from_siblings(self, site: Site) -> Choice:
        found = [c for s in siblings(site, self.ctx.functions) if (c := convention(s, self.ctx.api, self.ctx.imports))]
        if not found:
            return Choice(None, "no sibling call site shows the group")
        counts = Counter(c.key for c in found)
        (key, n), *rest = counts.most_common()
        if rest and rest[0][1] == n:
            return Choice(None, "its sibling call sites disagree on the group")
        chosen = next(c for c in found if c.key == key)
        group = key if chosen.kind == "fixed" else None
        where = f"the convention of {n} of {len(found)} sibling call site{'s' if len(found) > 1 else ''}"
        return Choice(group, where, safe=not rest, convention=chosen)

    # the edits --------------------------------------------------------------------------
    def fix(self, allocation: Allocation, replace: bool) -> tuple[Fix | None, Choice]:
        """A fix passing the chosen group: added (`replace=False`), or replacing the group passed
        now with the consumer's (`replace=True`, for a mismatch)."""
        choice = self.choose(allocation, consumer_only=replace)
        if not choice.found:
            return None, choice
        return self.fix_with(allocation, choice, replace)

    def fix_with(self, allocation: Allocation, choice: Choice, replace: bool) -> tuple[Fix | None, Choice]:
        source = self.ctx.source
        edits: list[Edit] = []
        conv = choice.convention
        if conv is not None and conv.kind == "selection" and conv.statement is not None and conv.variable:
            already = selection_in_scope(self.site(allocation), conv.variable, self.ctx.api, self.ctx.imports)
            if already != conv.key:  # the function does not choose the group yet: copy the siblings' choice
                if not starts_line(source, allocation.statement):
                    return None, Choice(None, "the siblings' selection of the group cannot be inserted before a statement that does not start its own line")
                sibling_source = statement_text(source, conv.statement)
                edits.append(insert_statement_before(source, allocation.statement.line, sibling_source))
            expression = conv.variable
        elif conv is not None:
            expression = span_text(source, conv.argument.span)
        else:
            assert choice.group is not None
            spelled = self.spell(choice.group)
            if spelled is None:
                return None, Choice(None, f"the profile names no getter for group {choice.group}")
            expression, import_edit = spelled
            edits += [import_edit] if import_edit else []
        edits.append(self._argument_edit(allocation, expression, replace, conv))
        applicability = Applicability.SAFE if choice.safe else Applicability.UNSAFE
        return Fix(tuple(sorted(edits, key=lambda e: e.start)), applicability, f"Pass `{expression}`: {choice.origin}"), choice

    def _argument_edit(self, allocation: Allocation, expression: str, replace: bool, conv: Convention | None) -> Edit:
        source = self.ctx.source
        current = group_argument(allocation, self.ctx.api)
        if replace and current is not None:
            return replace_span(source, current[0].span, expression)
        if conv is not None and conv.keyword:
            return append_keyword(source, allocation.call, conv.keyword, expression)
        return insert_argument(source, allocation.call, expression)

    def spell(self, group: str) -> tuple[str, Edit | None] | None:
        """How this file names `group`: an imported getter, else the profile's getter (imported)."""
        api = self.ctx.api
        # only module-scope imports: a name imported inside another function is not bound here
        bound = {n.asname: n for stmt in _module_scope_imports(self.ctx.module.body) for n in stmt.names}
        aliases = {local: q for local, q in self.ctx.imports.aliases().items() if local in bound}
        for local, qualified in aliases.items():
            if api.getters.get(qualified) == frozenset({group}):
                return f"{local}()", None
        info = api.profile.groups.get(group)
        if info is None or not info.getter:
            return None
        if not info.import_from:
            return f"{info.getter}()", None
        module_alias = next((local for local, q in aliases.items() if q == info.import_from and bound[local].name is None), None)
        if module_alias:
            return f"{module_alias}.{info.getter}()", None
        if any(n.name == "*" and n.level == 0 and n.module == info.import_from for n in bound.values()):
            return f"{info.getter}()", None  # star-imported already
        return f"{info.getter}()", add_import(self.ctx.source, self.ctx.module, info.import_from, info.getter)


def _module_scope_imports(body: list[ir.Stmt]) -> Iterator[ir.Import]:
    """The imports that bind names in the module's namespace (also under a module-level `if`, `try`
    or `with`), not those inside a function or class body."""
    for stmt in body:
        if isinstance(stmt, ir.Import):
            yield stmt
        elif isinstance(stmt, (ir.If, ir.Loop)):
            yield from _module_scope_imports(stmt.body + stmt.orelse)
        elif isinstance(stmt, ir.Try):
            yield from _module_scope_imports(stmt.body + stmt.orelse + stmt.finalbody + tuple(s for h in stmt.handlers for s in h))
        elif isinstance(stmt, ir.With):
            yield from _module_scope_imports(stmt.body)
