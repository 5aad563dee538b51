"""`--format text`: `path:line:col: CODE message`, a code frame, and a summary line."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from commgroup_lint.engine import LintResult
from commgroup_lint.model import Finding


def code_frame(text: str, f: Finding) -> str:
    lines = text.splitlines()
    if not 0 < f.start.line <= len(lines):
        return ""
    line = lines[f.start.line - 1].expandtabs(1)
    width = (f.end.column - f.start.column) if f.end.line == f.start.line else len(line) - f.start.column + 1
    gutter = f"{f.start.line:>4} | "
    return f"{gutter}{line}\n{' ' * len(gutter)}{' ' * (f.start.column - 1)}{'^' * max(1, width)}"


def print_findings(console: Console, result: LintResult) -> None:
    for f in result.findings:
        console.print(
            f"[bold]{escape(f.path)}[/]:{f.start.line}:{f.start.column}: [bold red]{f.code}[/] {escape(f.message)}",
            highlight=False, soft_wrap=True,
        )
        frame = code_frame(result.sources.get(f.path, ""), f)
        if frame:
            console.print(escape(frame), style="dim", highlight=False, soft_wrap=True)


def summary_line(result: LintResult, fixed: int | None = None) -> str:
    """`Found 3 findings (12 files checked).`; after `--fix`: `Fixed 2 findings, 1 remaining ...`."""
    n = len(result.findings)
    files = result.files_checked
    checked = f"{files} file{'s' if files != 1 else ''} checked"
    if fixed is not None:
        return f"Fixed {fixed} finding{'s' if fixed != 1 else ''}, {n} remaining ({checked})."
    if n == 0 and result.files_checked and not result.files_using_api:
        profiles = ", ".join(result.profiles)
        return f"No file uses a known group-bound allocation API; profiles: {profiles} ({checked})."
    if n == 0:
        return f"All clear: no findings ({checked})."
    return f"Found {n} finding{'s' if n != 1 else ''} ({checked})."
