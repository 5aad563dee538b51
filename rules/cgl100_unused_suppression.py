"""
## What it finds
A suppression comment that names a code which suppressed nothing: `# commgroup-lint: ignore[CGL002]`
on a line (or on the first line of a multi-line statement) with no CGL002 finding, an
`ignore-file[CGL002]` in a file without one, or a code that is not a rule code at all.
A CGL code named in `# noqa: CGL002` (the alias of `ignore[CGL002]`) is reported alike; the
other codes of a `# noqa` are other linters' and never reported here.
Codes this run does not check (left out by `select`, or ignored for the file) are not
reported, since then nothing can tell whether the suppression is still needed.

## Why it matters
A suppression outlives the finding it was written for: the code was fixed or moved, and the
comment now silently hides the next real bug on that line. A misspelt code never suppressed
anything in the first place.

## Example
```python
from sglang.srt.distributed import get_tp_group
from sglang.srt.layers.dp_attention import get_local_dp_buffer

def forward():
    return get_local_dp_buffer(get_tp_group())  # commgroup-lint: ignore[CGL001]
```

## Fix
Delete the code from the comment, or the whole comment when no code is left.
"""

from __future__ import annotations

from commgroup_lint.model import Finding, Position, Severity
from commgroup_lint.rule import Invalid, Rule, Valid

_IMPORTS = "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n"


class UnusedSuppression(Rule):
    code = "CGL100"
    name = "unused-suppression"
    summary = "A suppression comment names a code that suppressed nothing"
    severity = Severity.WARNING
    VALID = [
        Valid(_IMPORTS + "def f():\n    return get_local_dp_buffer()  # commgroup-lint: ignore[CGL001]\n"),
        Valid(_IMPORTS + "def f():\n    return get_local_dp_buffer(  # commgroup-lint: ignore[CGL001]\n        hidden_size=16,\n    )\n"),
        Valid("# commgroup-lint: ignore-file[CGL001]\n" + _IMPORTS + "def f():\n    return get_local_dp_buffer()\n"),
    ]
    INVALID = [
        Invalid("x = 1  # commgroup-lint: ignore[CGL001]\n", line=1),
        Invalid("# commgroup-lint: ignore-file[CGL002]\nx = 1\n", line=1),
        Invalid("x = 1  # commgroup-lint: ignore[CGL999]\n", line=1),
        Invalid("x = 1  # noqa: CGL001, E501\n", line=1),
    ]

    @classmethod
    def report(cls, display: str, line: int, column: int, end_column: int, code: str,
               file_level: bool, unknown: bool = False, noqa: bool = False) -> Finding:
        """`noqa`: the comment is a `# noqa: CODES`, and is quoted as written."""
        kind = "ignore-file" if file_level else "ignore"
        if unknown:
            why = f"`{code}` is not a rule code (run `commgroup-lint rules`)"
        elif file_level:
            why = f"no {code} finding in this file"
        else:
            why = f"no {code} finding on this line or statement"
        quoted = f"noqa: {code}" if noqa else f"{kind}[{code}]"
        message = f"unused suppression: `{quoted}` suppresses nothing; {why}"
        return Finding(cls.code, display, Position(line, column), Position(line, end_column), message, cls.severity)
