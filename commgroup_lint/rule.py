"""The rule contract. A rule module reads top to bottom: docstring (its documentation page),
the class with its code, name, one-line summary and VALID/INVALID examples (which are also
its tests), then the check. Rules do not walk trees: they read the facts the shared dataflow
recorded for the file, so every rule runs in the one batched pass.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, ClassVar

from commgroup_lint.analysis import ir
from commgroup_lint.model import Finding, Fix, Position, Severity

if TYPE_CHECKING:
    from commgroup_lint.analysis.api import Api
    from commgroup_lint.analysis.facts import FunctionFacts
    from commgroup_lint.analysis.names import ImportTable
    from commgroup_lint.source import SourceFile


@dataclass(frozen=True)
class Valid:
    """Code the rule must accept."""

    code: str


@dataclass(frozen=True)
class Invalid:
    """Code the rule must flag: at `line` (1-based, within `code`), and, when the rule can fix
    it, with `fixed` as the source after `--fix --unsafe-fixes`."""

    code: str
    line: int
    fixed: str | None = None


@dataclass
class FileContext:
    """Everything a rule may read about one file."""

    source: "SourceFile"
    module: ir.Module
    imports: "ImportTable"
    functions: list["FunctionFacts"]
    api: "Api"

    def finding(self, rule: type["Rule"], span: ir.Span, message: str, fix: Fix | None = None) -> Finding:
        return Finding(
            code=rule.code,
            path=self.source.display,
            start=Position(span.line, span.col + 1),
            end=Position(span.end_line, span.end_col + 1),
            message=message,
            severity=rule.severity,
            fix=fix,
        )


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
    runtime_only: ClassVar[bool] = False
    """A verdict of the runtime shim (`commgroup_lint.runtime`) that no static analysis can make; its
    examples are programs whose run the shim's tests check (tests/runtime/)."""
    """Whether the rule can offer fixes (derived from INVALID examples that carry `fixed`)."""

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls.fixable = any(example.fixed is not None for example in cls.INVALID)

    @classmethod
    def documentation(cls) -> str:
        import sys

        return (sys.modules[cls.__module__].__doc__ or "").strip()

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
    """`tp`, or `attn_tp or tp` for a group chosen by configuration."""
    return " or ".join(sorted(groups))
