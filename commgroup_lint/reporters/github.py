"""`--format github`: GitHub Actions workflow commands, one annotation per finding.

`::error file=PATH,line=L,col=C,endLine=L2,endColumn=C2,title=CODE::MESSAGE` (`::warning` for
warnings), escaped as the Actions toolkit escapes them: `%`, CR and LF in the message; those
and `:` and `,` in property values.
"""

from __future__ import annotations

from pathlib import Path

from commgroup_lint.engine import LintResult
from commgroup_lint.model import Finding, Severity


def escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def annotation(f: Finding) -> str:
    command = "warning" if f.severity is Severity.WARNING else "error"
    properties = {
        "file": Path(f.path).as_posix().removeprefix("./"),
        "line": f.start.line,
        "col": f.start.column,
        "endLine": f.end.line,
        "endColumn": f.end.column,
        "title": f.code,
    }
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    return f"::{command} {props}::{escape_data(f.message)}"


def render(result: LintResult) -> str:
    return "".join(annotation(f) + "\n" for f in result.findings)
