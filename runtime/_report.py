"""Verdicts of the runtime shim: codes, the violation record, the error and the warning.

Plain data, no torch: the pytest plugin imports this module in processes without torch.
The codes are the static rules' codes (see ``docs/runtime.md``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

#: A group-bound buffer is consumed by a collective on another group.
GROUP_MISMATCH = "CGL002"
#: A buffer allocated under one group sits in a pool block registered with another.
POOL_REUSE = "CGL005"
#: Ranks of one collective disagree on whether a buffer is group-bound.
RANK_DIVERGENCE = "CGL006"

CODES = {
    GROUP_MISMATCH: "group mismatch",
    POOL_REUSE: "pool reuse",
    RANK_DIVERGENCE: "rank divergence",
}

MODES = ("assert", "warn", "report")
#: Values of ``COMMGROUP_LINT_RUNTIME`` (and of the pytest options) that leave the shim off.
OFF = ("", "0", "off", "false", "no")


@dataclass(frozen=True)
class Site:
    """A source location in user code: the call of an allocator or of a collective."""

    path: str
    line: int
    function: str = ""

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"

    def short(self) -> str:
        """``path:line`` with the path relative to the working directory when it is below it."""
        path = self.path
        try:
            rel = os.path.relpath(path)
            if not rel.startswith(".."):
                path = rel
        except ValueError:  # pragma: no cover - another drive on Windows
            pass
        return f"{path}:{self.line}"


@dataclass(frozen=True)
class Violation:
    """One verdict. ``path``/``line`` are where the static linter reports the same bug:
    the allocation site (the allocator call in the model's function)."""

    code: str
    message: str
    path: str
    line: int
    collective: str = ""
    collective_path: str = ""
    collective_line: int = 0
    buffer_group: str = ""
    collective_group: str = ""
    rank: int | None = None
    details: dict = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def at(cls, code: str, message: str, allocation: Site, collective: str, site: Site, *,
           buffer_group: str = "", collective_group: str = "", rank: int | None = None,
           details: dict | None = None) -> Violation:
        """A verdict on the buffer allocated at ``allocation``, used by ``collective`` at ``site``."""
        return cls(code, message, allocation.path, allocation.line, collective, site.path, site.line,
                   buffer_group, collective_group, rank, details or {})

    def key(self) -> tuple:
        """Identity for de-duplication: the same bug seen again on the next step."""
        return (self.code, self.path, self.line, self.collective_path, self.collective_line)

    def as_dict(self) -> dict:
        return {
            "code": self.code,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "collective": self.collective,
            "collective_path": self.collective_path,
            "collective_line": self.collective_line,
            "buffer_group": self.buffer_group,
            "collective_group": self.collective_group,
            "rank": self.rank,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Violation:
        """The inverse of :meth:`as_dict` (extra keys, such as a log line's, are ignored)."""
        names = {f.name for f in fields(cls)} - {"details"}
        return cls(**{k: v for k, v in data.items() if k in names})


class GroupMismatchError(RuntimeError):
    """Raised in ``assert`` mode. The message starts with the rule code."""

    def __init__(self, violation: Violation):
        super().__init__(violation.message)
        self.violation = violation
        self.code = violation.code


class CommGroupRuntimeWarning(RuntimeWarning):
    """Issued in ``warn`` mode, once per distinct violation."""


def check_mode(mode: str) -> str:
    """``mode`` normalised; a ``ValueError`` naming the modes when it is none of them."""
    normal = (mode or "").strip().lower()
    if normal not in MODES:
        raise ValueError(f"commgroup-lint runtime mode must be one of {', '.join(MODES)}, got {mode!r}")
    return normal


def parse_switch(value: str | None) -> str | None:
    """A mode, or None for the values that mean off (unset, ``0``, ``off``, ...); a
    ``ValueError`` for anything else."""
    if value is None or value.strip().lower() in OFF:
        return None
    return check_mode(value)


def format_summary(violations: list[Violation]) -> str:
    """The end-of-run summary printed by the pytest plugin and the atexit hook."""
    if not violations:
        return "commgroup-lint runtime: no violations"
    lines = [f"commgroup-lint runtime: {len(violations)} violation(s)"]
    for v in violations:
        rank = f" [rank {v.rank}]" if v.rank is not None else ""
        lines.append(f"  {v.path}:{v.line}: {v.message}{rank}")
    return "\n".join(lines)
