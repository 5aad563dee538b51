"""Choosing the group a fix passes, and the edits that pass it.

The group must be known from the code, in this order: the collective that consumes the
buffer (when every consumer runs on one group); the paired operation (a scatter's local
buffer mirrors the gather that produced what it scatters); the sibling call sites'
convention. Otherwise no fix is offered and the finding says why. Fixes from the code's own
dataflow are safe; one copied from siblings is safe only when every sibling agrees, and a
fix for a mismatch that depends on the configuration (the consumer's group is chosen by a
condition) is always unsafe: it changes which group is used in some configuration.

The group is spelled the way the file already spells it: the consumer's own group argument,
a getter the file imports (or reaches through an imported module), else the getter of the
engine whose API the file uses, imported from that engine's module.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cached_property

from commgroup_lint.analysis import behaviour as b
from commgroup_lint.analysis import ir
from commgroup_lint.analysis.facts import Allocation, Consumption, FunctionFacts, display_group, is_symbolic
from commgroup_lint.analysis.siblings import (
    Convention,
    Siblings,
    Site,
    convention,
    group_argument,
    group_parameter,
    selection_in_scope,
)
from commgroup_lint.analysis.verdict import Mismatch
from commgroup_lint.edits import (
    add_argument,
    add_import,
    append_keyword,
    insert_statement_before,
    replace_span,
    span_text,
    starts_line,
    statement_text,
)
from commgroup_lint.model import Applicability, Edit, Fix
from commgroup_lint.profile import GroupInfo
from commgroup_lint.rule import FileContext, consumer_site, format_groups


@dataclass(frozen=True)
class Choice:
    """The group a fix passes and where it was learnt; `group` is None when there is none."""

    group: str | None
    origin: str  # for the description, or the reason no fix is offered
    safe: bool = True
    convention: Convention | None = None  # the siblings' convention, when copied from them
    spelled: str | None = None  # how the consumer spells the group, when it names it itself

    @property
    def found(self) -> bool:
        return self.group is not None or self.convention is not None


class FixPlanner:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._chosen_by_siblings: dict[tuple[str, str, str | None, int | None] | None, Choice] = {}

    @cached_property
    def _sites(self) -> dict[int, Site]:
        return {id(a.call): Site(a, fn) for fn in self.ctx.functions for a in fn.allocations}

    @cached_property
    def _consumptions(self) -> dict[int, list[Consumption]]:
        found: dict[int, list[Consumption]] = {}
        for fn in self.ctx.functions:
            for c in fn.consumptions:
                if c.groups:
                    found.setdefault(id(c.allocation.call), []).append(c)
        return found

    @cached_property
    def _siblings(self) -> Siblings:
        return Siblings(self.ctx.functions)

    def site(self, allocation: Allocation) -> Site:
        return self._sites[id(allocation.call)]

    # where the group comes from -------------------------------------------------------
    def choose(self, allocation: Allocation, use_siblings: bool = True, consumer_only: bool = False) -> Choice:
        consumed = self._consumptions.get(id(allocation.call), [])
        reasons = []
        if consumed:
            groups = frozenset(g for c in consumed for g in c.group_names)
            first = consumed[0]
            if len(groups) == 1:
                group = next(iter(groups))
                return Choice(group, f"the group of {consumer_site(first)}",
                              spelled=self._consumer_spelling(consumed, group))
            reasons.append(f"its consumers run on {format_groups(groups)}")
        if consumer_only:
            return Choice(None, "; ".join(reasons) or "no collective consumes the buffer in this file")
        site = self.site(allocation)
        paired = self._paired(site.function, allocation)
        if paired is not None:
            return paired
        if use_siblings:
            chosen = self._from_siblings(site)
            if chosen.found:
                return chosen
            reasons.append(chosen.origin)
        if not consumed:
            reasons.insert(0, "no collective consumes the buffer in this file")
        return Choice(None, "; ".join(reasons) + f"; candidates: {', '.join(sorted(self._candidates))}")

    @cached_property
    def _candidates(self) -> frozenset[str]:
        """The groups this file works with (else every group its engines know): once per file."""
        used = frozenset(g for fn in self.ctx.functions for c in fn.consumptions for g in c.group_names)
        used |= frozenset(g for fn in self.ctx.functions for a in fn.allocations for g in a.group_names)
        named = frozenset(display_group(g) for g in used)
        return named or frozenset(g for info in self._engine_groups() for g in info)

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
        names = allocation.group_names
        if len(names) == 1:
            return next(iter(names))
        return self.choose(allocation, use_siblings=False, consumer_only=True).group

    def _from_siblings(self, site: Site) -> Choice:
        """The siblings' convention; once per set of siblings (most findings of a file share theirs)."""
        key = self._siblings.key(site)
        if key not in self._chosen_by_siblings:
            self._chosen_by_siblings[key] = self._convention_of(self._siblings.of(site))
        return self._chosen_by_siblings[key]

    def _convention_of(self, siblings: list[Site]) -> Choice:
        found = [c for s in siblings if (c := convention(s, self.ctx.api, self.ctx.imports))]
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

    # the fixes ----------------------------------------------------------------------------
    def fix(self, allocation: Allocation, replace: bool) -> tuple[Fix | None, Choice]:
        """A fix passing the chosen group: added (`replace=False`), or replacing the group passed
        now with the consumer's (`replace=True`, for a mismatch)."""
        choice = self.choose(allocation, consumer_only=replace)
        if not choice.found:
            return None, choice
        return self.fix_with(allocation, choice, replace)

    def fix_mismatch(self, allocation: Allocation, mismatched: list[Mismatch]) -> tuple[Fix | None, str | None]:
        """The fix for a mismatch: the consumer's group when every consumer runs on one group
        (safe), else, when the consumer's group depends on the configuration, the siblings'
        selection of the group (unsafe); the reason when there is none."""
        if allocation.hidden and allocation.chosen:
            return None, f"the group is chosen by the call at {self.ctx.where(allocation.via or '')}: change it there"
        if allocation.hidden:
            return None, (f"the helper fixes the group inside, at {self.ctx.where(allocation.bound_at)}: give it a "
                          "group parameter"
                          if allocation.bound_at else "the helper fixes the group inside")
        behaviour = self.ctx.api.call(allocation.name)
        if behaviour is not None and any(isinstance(r, b.PoolContext) for r in behaviour.returns):
            return None, "the memory comes from a pool registered with that group: register the pool with the consumer's group too"
        if any(is_symbolic(g) for m in mismatched for g in m.bound | m.consumer):
            return None, None
        consumed = self._consumptions.get(id(allocation.call), [])
        groups = frozenset(g for c in consumed for g in c.group_names)
        by_call: dict[int, set[str]] = {}
        for c in consumed:
            by_call.setdefault(id(c.call), set()).update(c.group_names)
        if len(groups) > 1 and all(len(g) == 1 for g in by_call.values()):
            both = " and ".join(sorted(display_group(g) for g in groups))
            return None, (f"different collectives consume it on {both}: bind it to each of those"
                          " groups (a pool registered with every one), or give each collective memory of its own")
        if len(groups) == 1:
            fix, choice = self.fix(allocation, replace=True)
            if fix is not None and all(m.configuration_dependent for m in mismatched):
                fix = replace(fix, applicability=Applicability.UNSAFE)  # right where the mismatch's condition holds
            return fix, None if fix is not None else choice.origin
        chosen = self._from_siblings(self.site(allocation))
        if chosen.convention is not None and chosen.convention.kind == "selection":
            choice = Choice(None, f"{chosen.origin}; the consumers' group depends on the configuration",
                            safe=False, convention=chosen.convention)
            fix, outcome = self.fix_with(allocation, choice, replace=True)
            return fix, None if fix is not None else outcome.origin
        return None, (f"the consumers run on {format_groups(groups)} depending on the configuration;"
                      " choose the group by the same condition")

    def fix_with(self, allocation: Allocation, choice: Choice, replace: bool) -> tuple[Fix | None, Choice]:
        source = self.ctx.source
        edits: list[Edit] = []
        conv = choice.convention
        if conv is not None and conv.kind == "selection" and conv.statement is not None and conv.variable:
            already = selection_in_scope(self.site(allocation), conv.variable, self.ctx.api, self.ctx.imports)
            if already != conv.key:  # the function does not choose the group yet: copy the siblings' choice
                if not starts_line(source, allocation.statement):
                    return None, Choice(None, "the siblings' selection of the group cannot be inserted before a statement that does not start its own line")
                variable = self._free_name(self.site(allocation), conv.variable)
                sibling_source = _renamed(statement_text(source, conv.statement), conv.statement, conv.variable, variable)
                edits.append(insert_statement_before(source, allocation.statement.line, sibling_source))
                expression = variable
            else:
                expression = conv.variable
        elif conv is not None:
            expression = span_text(source, conv.argument.span)
        else:
            assert choice.group is not None
            spelled = (choice.spelled, None) if choice.spelled else self.spell(choice.group)
            if spelled is None:
                return None, Choice(None, f"no getter is known for group {display_group(choice.group)}")
            expression, import_edit = spelled
            edits += [import_edit] if import_edit else []
        where = group_parameter(allocation, self.ctx.api)
        if where is not None and where.attr:  # `grad_buffer(pgs, n)` binds to `pgs.tp`: not an argument of this call
            return None, Choice(None, f"the group is the `{where.attr}` of the `{where.param}` this call passes: "
                                      "change it where that is made")
        if where is not None and where.shape and conv is None:  # `nccl_symm_mem_context` takes `<group>.pynccl_comm`
            expression = f"{expression}.{where.shape}"
        edit = self._argument_edit(allocation, expression, replace, conv)
        if isinstance(edit, str):
            return None, Choice(None, edit)
        edits.append(edit)
        applicability = Applicability.SAFE if choice.safe else Applicability.UNSAFE
        return Fix(tuple(sorted(edits, key=lambda e: e.start)), applicability, f"Pass `{expression}`: {choice.origin}"), choice

    def _free_name(self, site: Site, name: str) -> str:
        """`name`, or `selected_name` (then `selected_name_2`, ...) when the function already
        names it (a parameter, a `global`, a later use): the copied selection must not rebind
        the caller's own."""
        taken = _names(self._function_text(site))
        candidates = (name, f"selected_{name}", *(f"selected_{name}_{n}" for n in range(2, len(taken) + 3)))
        return next(c for c in candidates if c not in taken)

    def _function_text(self, site: Site) -> str:
        """The source of the function holding the site (the whole file at module level)."""
        node, source = site.function.node, self.ctx.source
        if node is None or not node.body:
            return source.text
        end = max(stmt.span.end_line for stmt in node.body)
        stop = source.line_starts[end] if end < len(source.line_starts) else len(source.text)
        return source.text[source.line_starts[node.span.line - 1]:stop]

    def _argument_edit(self, allocation: Allocation, expression: str, replace: bool, conv: Convention | None) -> Edit | str:
        """The edit passing `expression` as the group, or why there is none. A group already
        passed is only ever replaced, and a keyword the callee's definition does not take is
        never added."""
        source = self.ctx.source
        current = group_argument(allocation, self.ctx.api)
        where = group_parameter(allocation, self.ctx.api)
        if current is not None and not replace:
            return "the call passes a group already"
        part = self._part_taken(current[0]) if current is not None and conv is None else ""
        if not expression.endswith(part):  # `Buffer(get_tp_group().device_group)`: the same part of the new group
            expression += part
        if current is not None and span_text(source, current[0].span) == expression:
            return f"the call passes `{expression}` already"
        if current is not None:
            return replace_span(source, current[0].span, expression)
        keyword = conv.keyword if conv is not None and conv.keyword else where.param if where is not None else None
        params = self.ctx.api.signatures.get(allocation.name.partition("(")[0])
        if keyword is not None and params is not None and keyword not in params and not any(p.startswith("**") for p in params):
            return f"`{allocation.short_name}` takes no parameter `{keyword}` in its definition"
        if conv is not None and conv.keyword:
            return append_keyword(source, allocation.call, conv.keyword, expression)
        edit = add_argument(source, allocation.call, where.param, where.index, expression) if where is not None else None
        return edit if edit is not None else "the call passes `*args` or `**kwargs`: where the group goes cannot be told"

    def _part_taken(self, expr: ir.Expr) -> str:
        """The attributes standing for the same group that the call reads of the group it passes
        (`.device_group` of `get_tp_group().device_group`): a fix passes that part of the new group."""
        parts: list[str] = []
        while isinstance(expr, ir.Attr) and self.ctx.api.is_same_group_attribute(expr.attr):
            parts.insert(0, f".{expr.attr}")
            expr = expr.value
        return "".join(parts)

    # spelling a group in the file's own terms ------------------------------------------
    def _consumer_spelling(self, consumed: list[Consumption], group: str) -> str | None:
        """The consumer's own group argument, when it is a plain expression (`self.tp_group`)."""
        for c in consumed:
            for arg in c.call.args:
                if arg.keyword in ("group", "group_name", "process_group") or (
                    isinstance(arg.value, ir.Attr) and not arg.keyword
                ):
                    text = _plain(arg.value)
                    if text and is_symbolic(group) and display_group(group) == text:
                        return text
        return None

    def _engine_groups(self) -> list[dict[str, GroupInfo]]:
        """The groups of the engines whose API this file uses (by its imports), base last."""
        imported = set(self.ctx.imports.aliases().values())
        parts = self.ctx.api.profile.components
        used = [p for p in parts if any(p.detects(q) for q in imported)]
        return [p.groups for p in (used or list(parts))][::-1]

    def spell(self, group: str) -> tuple[str, Edit | None] | None:
        """How this file names `group`: an imported getter (or one reached through an imported
        module), else the getter of the engine the file uses (imported from that engine)."""
        if is_symbolic(group):
            return display_group(group), None
        api = self.ctx.api
        # only module-scope imports: a name imported inside another function is not bound here
        bound = {n.asname: n for stmt in _module_scope_imports(self.ctx.module.body) for n in stmt.names}
        aliases = {local: q for local, q in self.ctx.imports.aliases().items() if local in bound}
        for local, qualified in aliases.items():
            if _returns_only(api.call(qualified), group):
                return f"{local}()", None
        getters = [name for name, groups in api.profile.getters.items() if groups == frozenset({group}) and "()." not in name]
        for local, qualified in aliases.items():
            for getter in getters:
                module, _, function = getter.rpartition(".")
                if qualified == module:  # the getter's module is imported (`parallel_state.get_tp_group()`)
                    return f"{local}.{function}()", None
        info = next((groups[group] for groups in self._engine_groups() if group in groups), None)
        if info is None or not info.getter:
            return None
        call = info.getter if "(" in info.getter else f"{info.getter}()"
        name = info.getter.partition("(")[0]
        if not info.import_from:
            return call, None
        module_alias = next((local for local, q in aliases.items() if q == info.import_from and bound[local].name is None), None)
        if module_alias:
            return f"{module_alias}.{call}", None
        if any(n.name == "*" and n.level == 0 and n.module == info.import_from for n in bound.values()):
            return call, None  # star-imported already
        return call, add_import(self.ctx.source, self.ctx.module, info.import_from, name)


def _names(text: str) -> set[str]:
    """Every name token of `text` (attributes too: `x.group` counts, which only errs on the safe
    side); every word, comments and strings included, if it cannot be tokenized."""
    try:
        return {t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.NAME}
    except (tokenize.TokenError, SyntaxError):
        return set(re.findall(r"\w+", text))


def _renamed(text: str, statement: ir.Stmt, old: str, new: str) -> str:
    """The selection `statement` (its dedented `text`) binding `new` where it binds `old`: only
    the assignment targets are renamed, found by their spans."""
    if new == old:
        return text
    blocks = (statement.body, statement.orelse) if isinstance(statement, ir.If) else ((statement,),)
    targets = [t.span for block in blocks for stmt in block if isinstance(stmt, ir.Assign)
               for t in stmt.targets if isinstance(t, ir.Name) and t.id == old]
    lines = text.split("\n")
    for span in sorted(targets, key=lambda sp: (sp.line, sp.col), reverse=True):
        row, col = span.line - statement.span.line, span.col - statement.span.col
        lines[row] = lines[row][:col] + new + lines[row][col + len(old):]
    return "\n".join(lines)


def _returns_only(behaviour: b.Behaviour | None, group: str) -> bool:
    """Whether calling it returns `group` and nothing else (a getter of that group)."""
    if behaviour is None:
        return False
    groups = [r for r in behaviour.returns if isinstance(r, b.Groups)]
    return len(groups) == 1 and not groups[0].variants and tuple(g for g, _ in groups[0].groups) == (group,)


def _plain(expr: ir.Expr) -> str | None:
    """The text of a side-effect-free expression: a name or a chain of attributes."""
    if isinstance(expr, ir.Name):
        return expr.id
    if isinstance(expr, ir.Attr):
        base = _plain(expr.value)
        return f"{base}.{expr.attr}" if base else None
    return None


def _module_scope_imports(body: tuple[ir.Stmt, ...]) -> Iterator[ir.Import]:
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
