"""`commgroup-lint runtime-log`: the runtime shim's log, read strictly, as findings.

The pytest plugin reads the log while it grows and leaves a line still being written for
later (`runtime._log.read`). This command reads a finished log, so every line must be a
whole violation record: a line that is not JSON, not an object, or lacks a field a finding
needs is an error naming that line, never skipped, so that a damaged or truncated log
cannot pass as "All clear".
"""

from __future__ import annotations

import json
import os
from typing import Any

from commgroup_lint.model import Finding, Position
from commgroup_lint.runtime._log import merged

_FIELDS = {"code": str, "path": str, "line": int, "message": str}  # what a finding is made of


class LogError(Exception):
    """The log cannot be read, or one of its lines is not a violation record."""


def findings(path: str) -> list[Finding]:
    """The log's violations, one finding per distinct violation at its allocation line (paths
    below the working directory made relative); raises `LogError`."""
    try:
        with open(path, "rb") as log:
            data = log.read()
    except OSError as err:
        raise LogError(f"cannot read '{path}': {err.strerror or err}") from None
    lines = data.split(b"\n")
    if lines[-1]:
        raise LogError(f"{path}: line {len(lines)} is truncated (it has no end of line): the process "
                       "writing it may have been killed; the log is incomplete")
    records = [_record(line, number, path) for number, line in enumerate(lines[:-1], 1)]
    return sorted((_finding(r) for r in merged(records)), key=lambda f: f.sort_key)


def _record(line: bytes, number: int, path: str) -> dict[str, Any]:
    def fail(problem: str) -> LogError:
        return LogError(f"{path}: line {number} {problem}; is this a log written by COMMGROUP_LINT_RUNTIME_LOG?")

    try:
        record = json.loads(line)
    except ValueError:
        raise fail("is not JSON") from None
    if not isinstance(record, dict):
        raise fail(f"is JSON but not a violation record (an object): {line[:40].decode('utf-8', 'replace')}")
    for name, kind in _FIELDS.items():
        if not _holds(record.get(name), kind):
            expected = "a positive integer" if kind is int else "a string"
            raise fail(f"has no field '{name}' holding {expected}")
    rank = record.get("rank")
    if rank is not None and (not isinstance(rank, int) or isinstance(rank, bool)):
        raise fail("has a field 'rank' that is not an integer")
    return record


def _holds(value: object, kind: type) -> bool:
    """Whether `value` is of `kind` (an integer: a positive one, not a boolean)."""
    if isinstance(value, bool) or not isinstance(value, kind):
        return False
    return not isinstance(value, int) or value >= 1


def _finding(record: dict[str, Any]) -> Finding:
    relative = os.path.relpath(record["path"])
    where = record["path"] if relative.startswith("..") else relative
    ranks = f" (ranks {', '.join(map(str, sorted(record['ranks'])))})" if record["ranks"] else ""
    message = record["message"].removeprefix(f"{record['code']} ")  # the reporters print the code
    start = Position(record["line"], 1)
    return Finding(record["code"], where, start, start, message + ranks)
