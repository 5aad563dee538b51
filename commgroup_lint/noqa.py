"""`--add-noqa`: a suppression comment for every current finding, as ruff's `--add-noqa` does, so
that a team can turn rules on at once and fix the backlog over time.

A finding gets `# commgroup-lint: ignore[CODE]` where `suppressions` reads it as covering the
finding: at the end of the finding's own line or, when that line ends inside a string or a
backslash continuation, at the end of the first line of its statement, else of its last line
(either covers the whole statement). Lines are counted as the parser counts them (a lone CR
ends one), so CR-only files and a CR inside a string place the comment where the finding is. A directive already on that line gets the new codes added; another comment is kept
and the directive follows it. A file that cannot be read (CGL000) and findings about
suppressions themselves (CGL100, CGL101) get none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from commgroup_lint.engine import LintResult
from commgroup_lint.fixer import FixedFile, FixReport
from commgroup_lint.model import Finding
from commgroup_lint.rules.cgl000_unreadable_file import UnreadableFile
from commgroup_lint.source import SourceError, line_starts, read_source
from commgroup_lint.suppressions import DIRECTIVE, SELF_CODES, layout, statement_ends

NOT_SUPPRESSED = frozenset({UnreadableFile.code, *SELF_CODES})
UNPLACED = "no line of its statement can take a comment: Python's tokenizer cannot read the file that far"
"""Why a finding got no comment: every statement the tokenizer reads ends on a line that can take one."""


@dataclass
class Suppressed:
    text: str  # the file with the comments
    comments: int  # lines that got a directive or more codes in one
    unplaced: list[Finding] = field(default_factory=list)  # no line can take a comment for these (see UNPLACED)


def add_suppressions(text: str, findings: Iterable[Finding]) -> Suppressed:
    """`text` with a directive covering each of `findings` (those of one file)."""
    lines = layout(text)
    ends = statement_ends(lines.statement_start)
    codes: dict[int, set[str]] = {}
    unplaced = []
    for f in findings:
        if f.code in NOT_SUPPRESSED:
            continue
        line = f.start.line
        start = lines.statement_start.get(line, line)
        line = next((c for c in (line, start, ends.get(start, start)) if c in lines.open_ends), line)
        if line in lines.open_ends:
            codes.setdefault(line, set()).add(f.code)
        else:
            unplaced.append(f)
    comments = {tok.start[0]: tok for tok in lines.comments}
    starts = line_starts(text)
    edited = text
    for line in sorted(codes, reverse=True):  # from the end: earlier offsets stay valid
        begin = starts[line - 1]
        end = starts[line] if line < len(starts) else len(text)
        content = text[begin:end].rstrip("\r\n")
        comment = comments.get(line)
        directive = _line_directive(comment.string) if comment is not None else None
        if comment is not None and directive is not None:
            at = begin + comment.start[1]
            listed = {c.strip().upper() for c in (directive.group("codes") or "").split(",") if c.strip()}
            edited = edited[:at + directive.start()] + _directive(listed | codes[line]) + edited[at + directive.end():]
        else:
            stripped = content.rstrip(" \t")
            edited = edited[:begin + len(stripped)] + "  " + _directive(codes[line]) + edited[begin + len(content):]
    return Suppressed(edited, len(codes), unplaced)


def _line_directive(comment: str) -> re.Match[str] | None:
    """The first `ignore` directive (not `ignore-file`) in a comment."""
    return next((m for m in DIRECTIVE.finditer(comment) if m.group("kind").lower() == "ignore"), None)


def _directive(codes: set[str]) -> str:
    return f"# commgroup-lint: ignore[{', '.join(sorted(codes))}]"


def suppress(result: LintResult) -> tuple[FixReport, list[Finding]]:
    """Each file of `result` with its suppressions added, in memory (`fixer.write` writes them,
    and leaves alone a file that changed since it was read), and the findings left uncovered."""
    report, unplaced = FixReport(), []
    by_path: dict[str, list[Finding]] = {}
    for f in result.findings:
        by_path.setdefault(f.path, []).append(f)
    for path, findings in by_path.items():
        try:
            source = read_source(Path(path), path)
        except SourceError as err:
            report.failures.append((path, str(err)))
            continue
        if source.text != result.sources.get(path):
            report.failures.append((path, "changed on disk since it was read; not written"))
            continue
        added = add_suppressions(source.text, findings)
        unplaced += added.unplaced
        if added.comments:
            report.files.append(FixedFile(source, added.text, added.comments))
    return report, unplaced
