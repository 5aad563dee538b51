"""`--format github`: GitHub Actions workflow commands, one annotation per finding.

`::error file=PATH,line=L,col=C,endLine=L2,endColumn=C2,title=NAME (CODE)::MESSAGE` (`::warning`
for warnings), escaped as the Actions toolkit escapes them: `%`, CR and LF in the message; those
and `:` and `,` in property values. Other control characters (an escape code in a file name)
and bytes that are not UTF-8 are written as `\\xNN` (`terminal.printable`). GitHub places an annotation by its path from the top of the
repository, so `PATH` is that, whatever directory the run started in.
"""

from __future__ import annotations

import os
from pathlib import Path

from commgroup_lint.engine import LintResult
from commgroup_lint.git import repository_root
from commgroup_lint.model import Finding, Severity
from commgroup_lint.rule import all_rules
from commgroup_lint.terminal import printable

LINE_BREAKS = "\r\n"  # a message may span lines: escaped as the toolkit escapes them, not as `\\xNN`


def escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def repository_path(path: str) -> str:
    """`path` from the top of its git work tree (as given, outside one)."""
    absolute = os.path.abspath(path)
    root = repository_root(os.path.dirname(absolute))
    if root is None:
        return Path(path).as_posix().removeprefix("./")
    return Path(os.path.relpath(absolute, root)).as_posix()


def annotation(f: Finding) -> str:
    command = "warning" if f.severity is Severity.WARNING else "error"
    rule = all_rules().by_code(f.code)
    properties = {
        "file": printable(repository_path(f.path)),
        "line": f.start.line,
        "col": f.start.column,
        "endLine": f.end.line,
        "endColumn": f.end.column,
        "title": f"{rule.name} ({f.code})" if rule is not None else f.code,
    }
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    return f"::{command} {props}::{escape_data(printable(f.message, keep=LINE_BREAKS))}"


def render(result: LintResult) -> str:
    return "".join(annotation(f) + "\n" for f in result.findings)
