"""The rule contract. A rule module reads top to bottom: docstring (its documentation page),
the class with its code, name, one-line summary and VALID/INVALID examples (which are also
its tests), then the check. Rules do not walk trees: they read the facts the shared dataflow
recorded for the file, so every rule runs in the one batched pass.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, ClassVar

from commgroup_lint.analysis import ir
from commgroup_lint.config_facts import Fact
from commgroup_lint.model import Binding, Confidence, Finding, Fix, Position, Severity

if TYPE_CHECKING:
    from commgroup_lint.analysis.api import Api
    from commgroup_lint.analysis.facts import Allocation, Consumption, FunctionFacts
    from commgroup_lint.analysis.names import ImportTable
    from commgroup_lint.source import SourceFile


@dataclass(frozen=True)
class Valid:
    """Code the rule must accept."""

    code: str


@dataclass(frozen=True)
class Invalid:
    """Code the rule must flag: at `line` (1-based, within `code`) with `confidence`, and, when
    the rule can fix it, with `fixed` as the source after `--fix --unsafe-fixes`."""

    code: str
    line: int
    fixed: str | None = None
    confidence: Confidence = Confidence.HIGH


@dataclass
class FileContext:
    """Everything a rule may read about one file."""

    source: SourceFile
    module: ir.Module
    imports: ImportTable
    functions: list[FunctionFacts]
    api: Api
    root: str | None = None  # the project root (absolute): where paths in messages are relative to

    def where(self, location: str) -> str:
        """`path:line` (another file's, as the analysis names it: `./pkg/a.py`, absolute from a
        subdirectory) as a message shows it: relative to the project root, as SARIF and CI
        annotations show a finding's path, whatever directory the run started in."""
        return relative_location(location, self.root)

    def finding(self, rule: type[Rule], span: ir.Span, message: str, fix: Fix | None = None, *,
                condition: str | None = None, confidence: Confidence = Confidence.HIGH,
                allocation: Allocation | None = None, removed_by: Fact | None = None) -> Finding:
        """A finding; with `removed_by`, one that a configuration fact removes (see `removed`)."""
        if removed_by is not None:
            cited = f"; {removed_by.source}" if removed_by.source else ""
            message = f"removed by fact `{removed_by.name}` ({removed_by.describe()}{cited}): {message}"
        return Finding(
            code=rule.code,
            path=self.source.display,
            start=Position(span.line, span.col + 1),
            end=Position(span.end_line, span.end_col + 1),
            message=message,
            severity=rule.severity,
            fix=fix,
            condition=condition,
            confidence=confidence,
            binding=self.binding(allocation) if allocation is not None else None,
            removed_by=removed_by.name if removed_by is not None else None,
        )

    def removed(self, fact: Fact | None) -> bool:
        """Whether a finding is left out: one a fact removes in a normal run, and in a run that
        explains the facts (`--explain-facts`), every other one."""
        return (fact is not None) != self.api.profile.explain_facts

    def binding(self, allocation: Allocation) -> Binding:
        """Where the memory gets its group: the call in the scanned code that chose it for the
        helper binding it, else inside that helper, else at the call itself."""
        where = allocation.via if allocation.chosen else allocation.bound_at
        if where:
            path, _, line = where.rpartition(":")
            return Binding(path, int(line))
        return Binding(self.source.display, allocation.call.span.line)


def relative_location(location: str, root: str | None) -> str:
    """`location` (`path:line`) with its path relative to `root` when inside it, else as given
    (normalised: no `./`)."""
    path, sep, line = location.rpartition(":")
    if not sep or not line.isdigit():
        return location
    absolute = os.path.abspath(path)
    if root is not None and os.path.commonpath([absolute, root]) == root:
        path = os.path.relpath(absolute, root)
    else:
        path = os.path.normpath(path)
    return f"{path.replace(os.sep, '/')}:{line}"


def reached(consumption: Consumption, groups: str) -> str:
    """The consumer as a reader finds it on its line: "`attn_tp_all_gather_into_tensor` on group
    attn_tp at line 8", or, when the call there is a helper running the collective inside it,
    "`all_gather_attn_tp` at line 8, whose `all_gather_into_tensor` runs on group attn_tp"."""
    line, called = consumption.call.span.line, _call_name(consumption.call)
    if called is None or called == consumption.collective:
        return f"`{consumption.collective}` on group {groups} at line {line}"
    return f"`{called}` at line {line}, whose `{consumption.collective}` runs on group {groups}"


def consumer_site(consumption: Consumption) -> str:
    """"`dp_gather_partial` at line 24", or "`helper` at line 8 (its `all_reduce`)"."""
    line, called = consumption.call.span.line, _call_name(consumption.call)
    if called is None or called == consumption.collective:
        return f"`{consumption.collective}` at line {line}"
    return f"`{called}` at line {line} (its `{consumption.collective}`)"


def _call_name(call: ir.Call) -> str | None:
    """The name a reader sees called (`dp_gather_partial`, `group.all_reduce` -> `all_reduce`)."""
    func = call.func
    if isinstance(func, ir.Name):
        return func.id
    return func.attr if isinstance(func, ir.Attr) else None


class Rule:
    code: ClassVar[str]
    """`CGL` and three digits; the hundreds digit is the category (0: group bugs, 1: the linter's own)."""
    name: ClassVar[str]
    """A kebab-case name (`missing-group`), used in SARIF and the docs."""
    summary: ClassVar[str]
    """One line: what the rule finds."""
    severity: ClassVar[Severity] = Severity.ERROR
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []
    fixable: ClassVar[bool] = False
    """Whether the rule can offer fixes (derived from INVALID examples that carry `fixed`)."""
    runtime_only: ClassVar[bool] = False
    """A verdict of the runtime shim (`commgroup_lint.runtime`) that no static analysis can make; its
    examples are programs whose run the shim's tests check (tests/runtime/)."""
    opt_in: ClassVar[bool] = False
    """Run only when its code is selected by name (`--select CGL007`, `extend-select`), not by a
    prefix such as the default `CGL`: a rule that makes the analysis read much more of a tree."""

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls.fixable = any(example.fixed is not None for example in cls.INVALID)

    @classmethod
    def documentation(cls) -> str:
        import sys

        return (sys.modules[cls.__module__].__doc__ or "").strip()

    @classmethod
    def gate_words(cls, api: Api) -> set[str]:
        """Words besides the allocation APIs' of which a file must name one to be analysed for
        this rule (the engine's gate): a rule about collectives alone names the collectives."""
        return set()

    @classmethod
    def index_words(cls, api: Api) -> set[str]:
        """Of those, the words that make the index summarise a file's helpers (and follow what
        they call): a rule whose findings go through helpers names them here."""
        return set()

    def check(self, ctx: FileContext) -> Iterator[Finding]:
        """The rule's findings in one file. The default finds nothing: the rules whose findings
        the engine (unreadable files, suppressions) or the runtime shim produce keep it; the
        examples test catches a source rule that forgot to override it."""
        return iter(())


@dataclass(frozen=True)
class Registry:
    rules: tuple[type[Rule], ...] = field(default_factory=tuple)

    def by_code(self, code: str) -> type[Rule] | None:
        return next((r for r in self.rules if r.code == code), None)


@cache
def all_rules() -> Registry:
    """Every rule in `commgroup_lint.rules`, by code."""
    import commgroup_lint.rules as package

    found: list[type[Rule]] = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        found += [
            obj for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule and obj.__module__ == module.__name__
        ]
    return Registry(tuple(sorted(found, key=lambda r: r.code)))


def format_groups(groups: frozenset[str]) -> str:
    """`tp`, or `attn_tp or tp` for a group chosen by configuration; a group known only by the
    expression holding it is shown as that expression."""
    from commgroup_lint.analysis.facts import display_group

    return " or ".join(sorted(display_group(g) for g in groups))


def path_configuration(cond: frozenset) -> tuple[str | None, Confidence]:
    """The whole condition of a path (its sizes and flags, and the data it tests), and the
    confidence a finding that holds on that path has (from its sizes and flags alone)."""
    from commgroup_lint.analysis.conditions import configuration, display_condition
    from commgroup_lint.analysis.verdict import literal_confidence

    return display_condition(cond) or None, literal_confidence(configuration(cond))
