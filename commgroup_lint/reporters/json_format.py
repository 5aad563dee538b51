"""`--format json`: an array of findings, one object each (see README for the schema)."""

from __future__ import annotations

import json
from typing import Any

from commgroup_lint.engine import LintResult
from commgroup_lint.model import Finding


def finding_to_dict(f: Finding) -> dict[str, Any]:
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
    }


def render(result: LintResult) -> str:
    return json.dumps([finding_to_dict(f) for f in result.findings], indent=2) + "\n"
