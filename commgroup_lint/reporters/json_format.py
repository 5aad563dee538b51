"""`--format json`: an array of findings, one object each (see README for the schema)."""

from __future__ import annotations

import json
from typing import Any

from commgroup_lint.engine import LintResult
from commgroup_lint.model import Finding, Fix
from commgroup_lint.source import line_starts, position


def fix_to_dict(fix: Fix, text: str) -> dict[str, Any]:
    """The fix's edits as 1-based ranges of the file (end exclusive) and the text to put there."""
    starts = line_starts(text)
    edits = []
    for edit in fix.edits:
        (line, column), (end_line, end_column) = position(starts, edit.start), position(starts, edit.end)
        edits.append({"line": line, "column": column + 1, "end_line": end_line, "end_column": end_column + 1,
                      "content": edit.replacement})
    return {"applicability": fix.applicability.value, "message": fix.description, "edits": edits}


def finding_to_dict(f: Finding, text: str | None = None) -> dict[str, Any]:
    return {
        "code": f.code,
        "path": f.path,
        "line": f.start.line,
        "column": f.start.column,
        "end_line": f.end.line,
        "end_column": f.end.column,
        "message": f.message,
        "severity": f.severity.value,
        "fix_available": f.fix is not None,
        "fix": fix_to_dict(f.fix, text) if f.fix is not None and text is not None else None,
        "condition": f.condition,
        "confidence": f.confidence.value,
        "binding": {"path": f.binding.path, "line": f.binding.line} if f.binding is not None else None,
    }


def render(result: LintResult) -> str:
    return json.dumps([finding_to_dict(f, result.sources.get(f.path)) for f in result.findings], indent=2) + "\n"
