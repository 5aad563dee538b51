"""Verdicts of the runtime shim: codes, the violation record, the error and the warning.

Plain data, no torch: the pytest plugin imports this module in processes without torch.
The codes are the static rules' codes (``commgroup_lint.codes``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

from commgroup_lint.codes import GROUP_MISMATCH, POOL_REUSE, RANK_DIVERGENCE
from commgroup_lint.codes import RUNTIME_CODES as CODES

__all__ = ["CODES", "GROUP_MISMATCH", "POOL_REUSE", "RANK_DIVERGENCE", "Site", "Violation", "GroupMismatchError",
           "CommGroupRuntimeWarning", "format_summary"]

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
        """The fields of the runtime log's records (all but ``details``), in their order."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "details"}

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


def format_summary(violations: list[Violation]) -> str:
    """The end-of-run summary printed by the pytest plugin and the atexit hook."""
    if not violations:
        return "commgroup-lint runtime: no violations"
    lines = [f"commgroup-lint runtime: {len(violations)} violation(s)"]
    for v in violations:
        rank = f" [rank {v.rank}]" if v.rank is not None else ""
        lines.append(f"  {v.path}:{v.line}: {v.message}{rank}")
    return "\n".join(lines)
