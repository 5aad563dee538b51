"""`--format sarif`: a SARIF 2.1.0 log (for GitHub code scanning and other SARIF viewers).

Columns count Unicode code points (`columnKind`), as the findings do. Paths are URIs
relative to `%SRCROOT%`, the working directory of the run, whose own location is left out (a
viewer such as code scanning knows the checkout; the log names no absolute path of this
machine); only a file outside that directory gets an absolute `file:` URI. A URI holds the
name's bytes, percent-encoded, so a name that is not UTF-8 is kept exactly; messages show it
through `terminal.printable`. A finding's fix becomes a
SARIF `fix`: each edit a `replacement` whose `deletedRegion` gives both line/column and
`charOffset`/`charLength` (the spec allows either or both when they agree, §3.30.2), so
consumers that only read one form still apply it correctly.
"""

from __future__ import annotations

import bisect
import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from commgroup_lint import HOMEPAGE, __version__, rule_url
from commgroup_lint.docs import render_rule_doc
from commgroup_lint.engine import LintResult
from commgroup_lint.model import Edit, Finding, Fix, Severity
from commgroup_lint.rule import all_rules
from commgroup_lint.terminal import printable

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"
_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning"}
# SARIF's default newline sequences (run.newlineSequences): CRLF and LF.
_NEWLINE = re.compile(r"\r\n|\n")


def render(result: LintResult) -> str:
    rules = all_rules().rules
    index = {rule.code: i for i, rule in enumerate(rules)}
    run: dict[str, Any] = {
        "tool": {"driver": {
            "name": "commgroup-lint",
            "version": __version__,
            "semanticVersion": __version__,
            "informationUri": HOMEPAGE,
            "rules": [_rule(rule) for rule in rules],
        }},
        "originalUriBaseIds": {SRCROOT: {"description": {"text": "The directory the check ran in."}}},
        "columnKind": "unicodeCodePoints",
        "results": [_result(f, index, result.sources.get(f.path)) for f in result.findings],
    }
    log = {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _rule(rule: Any) -> dict[str, Any]:
    page = render_rule_doc(rule)
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": f"{rule.summary}."},
        "fullDescription": {"text": rule.documentation(), "markdown": rule.documentation()},
        "help": {"text": page, "markdown": page},
        "helpUri": rule_url(rule.code),
        "defaultConfiguration": {"level": _LEVELS[rule.severity]},
        "properties": {"fixable": rule.fixable},
    }


def artifact_location(path: str) -> dict[str, str]:
    """A URI relative to %SRCROOT% (an absolute path under the working directory too); an
    absolute `file:` URI only for a file outside it."""
    relative = _under_root(path)
    if relative is None:
        return {"uri": "file://" + quote(os.fsencode(Path(os.path.abspath(path)).as_posix()))}
    return {"uri": quote(os.fsencode(relative)), "uriBaseId": SRCROOT}


def _under_root(path: str) -> str | None:
    """`path` relative to the working directory (%SRCROOT%), or None when outside it."""
    relative = os.path.relpath(os.path.abspath(path))
    return None if relative == ".." or relative.startswith(("../", "..\\")) else Path(relative).as_posix()


def _result(f: Finding, index: dict[str, int], text: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ruleId": f.code,
        "level": _LEVELS[f.severity],
        "message": {"text": printable(f.message)},
        "locations": [{"physicalLocation": {
            "artifactLocation": artifact_location(f.path),
            "region": {
                "startLine": f.start.line,
                "startColumn": f.start.column,
                "endLine": f.end.line,
                "endColumn": f.end.column,
            },
        }}],
    }
    if f.code in index:
        out["ruleIndex"] = index[f.code]
    out["properties"] = {"confidence": f.confidence.value, "condition": f.condition}
    if f.binding is not None:
        out["properties"]["binding"] = {"path": printable(_under_root(f.binding.path) or f.binding.path),
                                         "line": f.binding.line}
    if f.fix is not None and text is not None:
        out["fixes"] = [sarif_fix(f.fix, f.path, text)]
    return out


def sarif_fix(fix: Fix, path: str, text: str) -> dict[str, Any]:
    lines = _LineIndex(text)
    return {
        "description": {"text": f"{fix.description} ({fix.applicability.value} fix)"},
        "artifactChanges": [{
            "artifactLocation": artifact_location(path),
            "replacements": [_replacement(edit, lines) for edit in sorted(fix.edits, key=lambda e: e.start)],
        }],
        "properties": {"applicability": fix.applicability.value},
    }


def _replacement(edit: Edit, lines: _LineIndex) -> dict[str, Any]:
    start_line, start_column = lines.position(edit.start)
    end_line, end_column = lines.position(edit.end)
    replacement: dict[str, Any] = {"deletedRegion": {
        "startLine": start_line,
        "startColumn": start_column,
        "endLine": end_line,
        "endColumn": end_column,
        "charOffset": edit.start,
        "charLength": edit.end - edit.start,
    }}
    if edit.replacement:
        replacement["insertedContent"] = {"text": edit.replacement}
    return replacement


class _LineIndex:
    """Character offset -> SARIF (line, column), both 1-based, lines split at CRLF and LF."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset) - 1
        return line + 1, offset - self.starts[line] + 1
