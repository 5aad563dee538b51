"""Applying fixes: all of a file's fixes in one pass, overlapping ones left for the next
pass, re-checked until stable; a fix that does not remove its finding, and a result that
does not parse, are reverted and reported.
Files are written atomically, never over a file that changed since it was read, and never
through a link out of the project (see `write`)."""

from __future__ import annotations

import ast
import difflib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from commgroup_lint.engine import Linter, LintResult
from commgroup_lint.files import ChangedOnDisk, WriteRefused, replace_file, within
from commgroup_lint.model import Applicability, Edit, Finding, Fix
from commgroup_lint.source import SourceFile
from commgroup_lint.terminal import printable

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


def _apply(text: str, fixes: Iterable[Fix]) -> tuple[str, list[Fix], list[Edit]]:
    """The text with every fix applied whose edits overlap no fix taken before it (identical
    edits are shared), those fixes, and their edits."""
    taken: list[Edit] = []
    applied: list[Fix] = []
    for fix in sorted(fixes, key=lambda f: f.edits[0].start):
        new = [e for e in fix.edits if e not in taken]
        if any(_conflict(e, t) for e in new for t in taken):
            continue
        taken += new
        applied.append(fix)
    for edit in sorted(taken, key=lambda e: (e.start, e.end), reverse=True):
        text = text[: edit.start] + edit.replacement + text[edit.end:]
    return text, applied, taken


def _conflict(a: Edit, b: Edit) -> bool:
    """Two different edits touch the same text, or insert at the same point (their order is unknown)."""
    return (a.start < b.end and b.start < a.end) or a.start == a.end == b.start == b.end


def _shifted(offset: int, edits: Iterable[Edit]) -> int:
    """Where the text at `offset` lies once `edits` are applied (an insertion at it goes before it)."""
    return offset + sum(len(e.replacement) - (e.end - e.start) for e in edits if e.end <= offset)


Anchor = tuple[str, int]
"""A finding by its code and the offset where it starts: how a fix is told to have held."""


def _anchor(source: SourceFile, finding: Finding) -> Anchor:
    return finding.code, source.offset(finding.start.line, finding.start.column - 1)


def fix_result(linter: Linter, result: LintResult, sources: dict[str, SourceFile], unsafe: bool) -> FixReport:
    """Fix every file of `result` that has an applicable fix, in memory.

    Each pass applies the fixes that do not overlap and checks the file again. A fix held when
    its finding is gone from the same place; one that did not is reverted (the pass is redone
    without it) and reported, and never offered again, so no call gets the same fix twice.
    """
    report = FixReport()
    paths = sorted({f.path for f in result.findings if applicable(f.fix, unsafe)})
    for path in paths:
        original = sources[path]
        current, held = _fix_file(linter, original, [f for f in result.findings if f.path == path], unsafe, report)
        if current.text == original.text:
            continue
        try:
            ast.parse(current.text)
        except (SyntaxError, ValueError, RecursionError) as err:
            report.failures.append((path, f"the fixed file would not parse ({err}); left unchanged"))
            continue
        report.files.append(FixedFile(original, current.text, held))
    return report


def _fix_file(linter: Linter, original: SourceFile, findings: list[Finding], unsafe: bool,
              report: FixReport) -> tuple[SourceFile, int]:
    """The file with every fix that held applied, and how many held."""
    current, held = original, 0
    rejected: set[Anchor] = set()  # in `current`'s offsets
    passes = 0
    while passes < MAX_PASSES:
        offered = {id(f.fix): f for f in findings if applicable(f.fix, unsafe) and _anchor(current, f) not in rejected}
        if not offered:
            break
        text, applied, edits = _apply(current.text, [f.fix for f in offered.values()])  # type: ignore[misc]
        if not applied or text == current.text:
            break
        candidate = replace(original, text=text)
        after = [o for o in linter.lint_source(candidate) if isinstance(o, Finding)]
        remaining = {_anchor(candidate, f) for f in after}
        failed = [offered[id(fix)] for fix in applied
                  if (offered[id(fix)].code, _shifted(_anchor(current, offered[id(fix)])[1], edits)) in remaining]
        if failed:  # redo the pass without them
            for f in failed:
                rejected.add(_anchor(current, f))
                report.failures.append((original.display, f"the fix for {f.code} at line {f.start.line} "
                                        f"({f.fix.description}) did not remove the finding; reverted"))  # type: ignore[union-attr]
            continue
        rejected = {(code, _shifted(offset, edits)) for code, offset in rejected}
        current, findings, held, passes = candidate, after, held + len(applied), passes + 1
    return current, held


def write(report: FixReport, root: Path | None = None) -> None:
    """Write the fixed files. A file is left alone, and reported, when it changed on disk since
    it was read (even while being written), when writing it would lose its owner, hard links
    or extended attributes, when it is read-only, or when it is a symbolic link whose target
    lies outside the project (`root`; without one, outside the link's own directory)."""
    written = []
    for fixed in report.files:
        path = fixed.source.path
        outside = _outside_target(path, root)
        if outside is not None:
            report.failures.append((fixed.source.display, f"is a symbolic link to {outside}, outside the project; "
                                    "not written (fix the target where it lives)"))
            continue
        try:
            replace_file(Path(os.path.realpath(path)), fixed.source.encode(fixed.text), expected=fixed.source.raw)
            written.append(fixed)
        except (ChangedOnDisk, WriteRefused) as err:
            report.failures.append((fixed.source.display, f"{err.strerror}; not written"))
        except OSError as err:
            report.failures.append((fixed.source.display, f"cannot be written: {err.strerror or err}"))
    report.files = written


def _outside_target(path: Path, root: Path | None) -> str | None:
    """Where `path` leads, when a symbolic link takes it out of its tree; else None."""
    lexical, real = os.path.abspath(path), os.path.realpath(path)
    if real == lexical:
        return None
    tree = root if root is not None and within(lexical, os.path.abspath(root)) else os.path.dirname(lexical)
    return None if within(real, os.path.realpath(tree)) else real


def unified_diff(fixed: FixedFile) -> str:
    """The fix as a unified diff; the name in its headers shown with `terminal.printable` (a
    newline in it would end the header, an escape code reach the terminal)."""
    name = printable(fixed.source.display)
    before, after = (name, name) if os.path.isabs(name) else (f"a/{name}", f"b/{name}")
    return "".join(difflib.unified_diff(
        fixed.source.text.splitlines(keepends=True), fixed.text.splitlines(keepends=True), fromfile=before, tofile=after,
    ))
