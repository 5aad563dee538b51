"""Applying fixes: all of a file's fixes in one pass, overlapping ones left for the next
pass, re-checked until stable; a result that does not parse is reverted and reported.
Files are written atomically, and never over a file that changed since it was read."""

from __future__ import annotations

import ast
import difflib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from commgroup_lint.engine import Linter, LintResult
from commgroup_lint.files import write_atomically
from commgroup_lint.model import Applicability, Edit, Finding, Fix
from commgroup_lint.source import SourceFile

MAX_PASSES = 8


@dataclass
class FixedFile:
    source: SourceFile
    text: str  # the fixed text
    fixes: int  # fixes applied


@dataclass
class FixReport:
    files: list[FixedFile] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)

    @property
    def fixed(self) -> int:
        return sum(f.fixes for f in self.files)


def applicable(fix: Fix | None, unsafe: bool) -> bool:
    return fix is not None and (unsafe or fix.applicability is Applicability.SAFE)


def apply_edits(text: str, fixes: Iterable[Fix]) -> tuple[str, int]:
    """Apply every fix whose edits overlap no fix taken before it (identical edits are shared)."""
    taken: list[Edit] = []
    count = 0
    for fix in sorted(fixes, key=lambda f: f.edits[0].start):
        new = [e for e in fix.edits if e not in taken]
        if any(_conflict(e, t) for e in new for t in taken):
            continue
        taken += new
        count += 1
    for edit in sorted(taken, key=lambda e: (e.start, e.end), reverse=True):
        text = text[: edit.start] + edit.replacement + text[edit.end:]
    return text, count


def _conflict(a: Edit, b: Edit) -> bool:
    """Two different edits touch the same text, or insert at the same point (their order is unknown)."""
    return (a.start < b.end and b.start < a.end) or a.start == a.end == b.start == b.end


def fix_result(linter: Linter, result: LintResult, sources: dict[str, SourceFile], unsafe: bool) -> FixReport:
    """Fix every file of `result` that has an applicable fix, in memory."""
    report = FixReport()
    paths = sorted({f.path for f in result.findings if applicable(f.fix, unsafe)})
    for path in paths:
        original = sources[path]
        current, total = original, 0
        findings = [f for f in result.findings if f.path == path]
        for _ in range(MAX_PASSES):
            fixes = [f.fix for f in findings if applicable(f.fix, unsafe)]
            if not fixes:
                break
            text, count = apply_edits(current.text, fixes)  # type: ignore[arg-type]
            if count == 0 or text == current.text:
                break
            total += count
            current = replace(original, text=text)
            findings = [o for o in linter.lint_source(current) if isinstance(o, Finding)]
        if current.text == original.text:
            continue
        try:
            ast.parse(current.text)
        except (SyntaxError, ValueError, RecursionError) as err:
            report.failures.append((path, f"the fixed file would not parse ({err}); left unchanged"))
            continue
        report.files.append(FixedFile(original, current.text, total))
    return report


def write(report: FixReport) -> None:
    """Write the fixed files; a file changed on disk since it was read is left alone."""
    written = []
    for fixed in report.files:
        path = fixed.source.path
        try:
            if path.read_bytes() != fixed.source.raw:
                report.failures.append((fixed.source.display, "changed on disk since it was read; not written"))
                continue
            write_atomically(path, fixed.source.encode(fixed.text))
            written.append(fixed)
        except OSError as err:
            report.failures.append((fixed.source.display, f"cannot be written: {err.strerror or err}"))
    report.files = written


def unified_diff(fixed: FixedFile) -> str:
    name = fixed.source.display
    before, after = (name, name) if os.path.isabs(name) else (f"a/{name}", f"b/{name}")
    return "".join(difflib.unified_diff(
        fixed.source.text.splitlines(keepends=True), fixed.text.splitlines(keepends=True), fromfile=before, tofile=after,
    ))
