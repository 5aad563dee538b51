"""
## What it finds
A suppression comment without codes: `# commgroup-lint: ignore` or
`# commgroup-lint: ignore-file` (or an empty list, `ignore[]`). It suppresses nothing.

## Why it matters
A blanket suppression hides every current and future finding on the line or in the file,
including the bugs nobody has seen yet. commgroup-lint only honours suppressions that name the
codes they silence, so a reader can tell what was judged safe and why.

## Example
```python
from sglang.srt.layers.dp_attention import get_local_dp_buffer

def forward():
    return get_local_dp_buffer()  # commgroup-lint: ignore
```

## Fix
Name the codes to suppress: `# commgroup-lint: ignore[CGL001]`, or better, fix the finding.
"""

from __future__ import annotations

from commgroup_lint.model import Finding, Position
from commgroup_lint.rule import Invalid, Rule, Valid


class BlanketSuppression(Rule):
    code = "CGL101"
    name = "blanket-suppression"
    summary = "A suppression comment names no codes, so it suppresses nothing"
    VALID = [
        Valid("from sglang.srt.layers.dp_attention import get_local_dp_buffer\n"
              "x = get_local_dp_buffer()  # commgroup-lint: ignore[CGL001]\n"),
        Valid("x = '# commgroup-lint: ignore'  # text in a string is not a comment\n"),
    ]
    INVALID = [
        Invalid("x = 1  # commgroup-lint: ignore\n", line=1),
        Invalid("# commgroup-lint: ignore-file\nx = 1\n", line=1),
        Invalid("x = 1  # commgroup-lint: ignore[]\n", line=1),
    ]

    @classmethod
    def report(cls, display: str, line: int, column: int, end_column: int, file_level: bool) -> Finding:
        kind = "ignore-file" if file_level else "ignore"
        message = (f"blanket suppression: `{kind}` without codes suppresses nothing; "
                   f"name the codes, e.g. `{kind}[CGL001]`")
        return Finding(cls.code, display, Position(line, column), Position(line, end_column), message, cls.severity)
