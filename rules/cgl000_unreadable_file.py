"""
## What it finds
A file that commgroup-lint cannot check: it does not parse as Python, is not valid in its
declared encoding (UTF-8 unless a PEP 263 coding line or a BOM says otherwise), is binary,
nests too deeply for the parser, cannot be read, is not a regular file (a FIFO or a device
named `*.py` is never read, so it cannot hang a run), or is too large to check (over 4 MiB:
parsing takes about 500 times a file's size in memory).

## Why it matters
A file that cannot be read is a file whose group bugs go unseen. The finding names the file
and the reason; every other file is still checked, and the run exits 1 like any finding.

Only files that can hold a finding (those naming an allocator) are parsed, so a syntax error
elsewhere is left to your other tools; an undecodable or binary file is always reported.

## Example
```python
from sglang.srt.layers.dp_attention import get_local_dp_buffer

def forward(x:
    return get_local_dp_buffer(x)
```

## Fix
Make the file valid Python (or give it a coding line), or exclude it from the run.
"""

from __future__ import annotations

from commgroup_lint.model import Finding, Position
from commgroup_lint.rule import Invalid, Rule, Valid


class UnreadableFile(Rule):
    code = "CGL000"
    name = "unreadable-file"
    summary = "A file could not be parsed, decoded or read, so it was not checked"
    VALID = [Valid("x = 1\n")]
    INVALID = [
        Invalid("from sglang.srt.layers.dp_attention import get_local_dp_buffer\n"
                "def forward(x:\n    return get_local_dp_buffer(x)\n", line=2),
    ]

    @classmethod
    def report(cls, display: str, reason: str, line: int = 1, column: int = 1) -> Finding:
        where = Position(line, column)
        return Finding(cls.code, display, where, where, reason, cls.severity)
