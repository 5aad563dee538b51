"""Plain data shared by the engine, the rules, the fixer and the reporters.

Frozen dataclasses with no behaviour beyond trivial derived properties: every front end
(text, JSON, SARIF, ...) renders the same `Finding`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"


class Confidence(str, enum.Enum):
    """How sure a finding is (see the rule pages): `high` holds always or under a relation of
    world sizes, `medium` under a flag or mode the code sets, `low` rests on something the
    analysis could not read. `--min-confidence` selects (default: medium)."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def rank(self) -> int:
        return {"high": 2, "medium": 1, "low": 0}[self.value]

    def at_least(self, other: Confidence) -> bool:
        return self.rank >= other.rank


class Applicability(str, enum.Enum):
    """Whether `--fix` applies a fix on its own (safe) or only with `--unsafe-fixes`."""

    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True, order=True)
class Position:
    """A 1-based line and a 1-based column (in characters)."""

    line: int
    column: int


@dataclass(frozen=True)
class Edit:
    """Replace the source text between two character offsets (end exclusive)."""

    start: int
    end: int
    replacement: str


@dataclass(frozen=True)
class Fix:
    edits: tuple[Edit, ...]
    applicability: Applicability
    description: str


@dataclass(frozen=True)
class Binding:
    """Where the memory a finding is about is bound (the line a fix would change)."""

    path: str
    line: int


@dataclass(frozen=True)
class Finding:
    code: str
    path: str
    start: Position
    end: Position
    message: str
    severity: Severity = Severity.ERROR
    fix: Fix | None = None
    condition: str | None = None  # the configuration under which it holds; None: always
    confidence: Confidence = Confidence.HIGH
    binding: Binding | None = None
    removed_by: str | None = None  # the configuration fact that removes it (shown by `--explain-facts` only)

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.start.line, self.start.column, self.code)


@dataclass(frozen=True)
class RuleSelection:
    """Which codes to report: `select` narrowed by `ignore` (prefixes allowed, as in ruff)."""

    select: tuple[str, ...] = ("CGL",)
    ignore: tuple[str, ...] = ()

    def enabled(self, code: str) -> bool:
        return any(code.startswith(s) for s in self.select) and not any(
            code.startswith(i) for i in self.ignore
        )

    def names(self, code: str) -> bool:
        """Whether the code itself is selected (not only a prefix of it), and not ignored."""
        return code in self.select and self.enabled(code)


@dataclass(frozen=True)
class FileScope:
    """What decides which of a file's findings are reported (its nearest configuration's
    selection with the command line's on top; see `scopes`)."""

    selection: RuleSelection
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...]  # (anchored glob, codes), see config.Config
    min_confidence: Confidence
