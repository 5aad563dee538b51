"""`--format text`: for people. Each finding as `path:line:col: CODE [*] message` (`[*]`: `--fix`
applies its fix), a code frame and the fix's description; then a summary that says what the
options can do about the findings (as ruff's does)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from commgroup_lint.engine import LintResult
from commgroup_lint.fixer import applicable
from commgroup_lint.model import Applicability, Finding
from commgroup_lint.terminal import printable

if TYPE_CHECKING:
    from rich.console import Console  # rich is imported only to print findings (see `print_findings`)

GUTTER = 7  # the width of a code frame's `  12 | `
SHOWN_CONJUNCTS = 4  # a longer condition is shortened to these and "and N more" (all with `-v`)


def conjuncts(condition: str) -> list[str]:
    """The top-level parts of a printed condition joined by ` and ` (a parenthesised
    disjunction is one part)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(condition):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and condition.startswith(" and ", i):
            parts.append(condition[start:i])
            start = i + len(" and ")
    parts.append(condition[start:])
    return parts


def shown_message(f: Finding, verbose: bool) -> str:
    """The message, its condition shortened to its first conjuncts unless `verbose`: the
    machine formats and `-v` carry the whole condition."""
    if verbose or not f.condition:
        return f.message
    parts = conjuncts(f.condition)
    if len(parts) <= SHOWN_CONJUNCTS:
        return f.message
    short = " and ".join(parts[:SHOWN_CONJUNCTS]) + f" and {len(parts) - SHOWN_CONJUNCTS} more"
    return f.message.replace(f"when {f.condition}", f"when {short}", 1)


def code_frame(lines: list[str], f: Finding) -> str:
    """The finding's line (of the file's `lines`) with a caret under its span."""
    if not 0 < f.start.line <= len(lines):
        return ""
    line = printable(lines[f.start.line - 1].expandtabs(1))
    width = (f.end.column - f.start.column) if f.end.line == f.start.line else len(line) - f.start.column + 1
    gutter = f"{f.start.line:>4} | "
    return f"{gutter}{line}\n{' ' * len(gutter)}{' ' * (f.start.column - 1)}{'^' * max(1, width)}"


def help_line(f: Finding) -> str | None:
    """`     = help: <the fix's description>`, saying when the fix is unsafe."""
    if f.fix is None:
        return None
    unsafe = " (unsafe fix: applied with `--fix --unsafe-fixes`)" if f.fix.applicability is Applicability.UNSAFE else ""
    return f"{' ' * (GUTTER - 2)}= help: {f.fix.description}{unsafe}"


def print_findings(console: Console, result: LintResult, unsafe_fixes: bool = False, verbose: bool = False) -> None:
    from rich.markup import escape

    lines: dict[str, list[str]] = {}  # by path, split once: a file may hold thousands of findings
    for f in result.findings:
        mark = "[*] " if applicable(f.fix, unsafe_fixes) else ""
        console.print(
            f"[bold]{escape(printable(f.path))}[/]:{f.start.line}:{f.start.column}: [bold red]{f.code}[/] "
            f"{escape(mark)}{escape(printable(shown_message(f, verbose)))}",
            soft_wrap=True,
        )
        if f.path not in lines:
            lines[f.path] = result.sources.get(f.path, "").splitlines()
        frame = code_frame(lines[f.path], f)
        if frame:
            console.print(escape(frame), style="dim", soft_wrap=True)
        help_text = help_line(f)
        if help_text is not None:
            console.print(escape(help_text), style="cyan", soft_wrap=True)


def summary(result: LintResult, fixed: int | None = None, unsafe_fixes: bool = False) -> list[str]:
    """`Found 3 findings (12 files checked).` (after `--fix`: `Fixed 2 findings, 1 remaining
    (...)`), then how many of the findings `--fix` would fix, and how many fixes only
    `--unsafe-fixes` enables, and how many group references the analysis left unknown."""
    n = len(result.findings)
    files = result.files_checked
    checked = f"{files} file{'s' if files != 1 else ''} checked"
    if fixed is not None:
        lines = [f"Fixed {fixed} finding{'s' if fixed != 1 else ''}, {n} remaining ({checked})."]
    elif n == 0 and result.files_checked and not result.files_using_api:
        profiles = ", ".join(result.profiles)
        lines = [f"No file uses a known group-bound allocation API; profiles: {profiles} ({checked})."]
    elif n == 0:
        lines = [f"All clear: no findings ({checked})."]
    else:
        lines = [f"Found {n} finding{'s' if n != 1 else ''} ({checked})."]
    fixable = sum(applicable(f.fix, unsafe_fixes) for f in result.findings)
    hidden = sum(f.fix is not None and not applicable(f.fix, unsafe_fixes) for f in result.findings)
    lines += fix_hint(fixable, hidden)
    if result.groups_unknown or result.memory_lost:  # an "All clear" is only as good as what the analysis followed
        unknown, lost = result.groups_unknown, result.memory_lost
        parts = [f"{unknown} group reference{'s' if unknown != 1 else ''} left unknown"] if unknown else []
        parts += [f"{lost} collective{'s' if lost != 1 else ''} given a buffer or group the analysis lost"] if lost else []
        lines.append(f"{' and '.join(parts)}: `commgroup-lint coverage` names the constructs.")
    return lines


def fix_hint(fixable: int, hidden: int) -> list[str]:
    """How many findings `--fix` fixes and how many fixes only `--unsafe-fixes` enables, in
    ruff's words (0.17)."""
    unsafe = f"{hidden} unsafe fix{'es' if hidden != 1 else ''} available with `--fix --unsafe-fixes`"
    if fixable and hidden:
        return [f"[*] {fixable} fixable with `--fix` ({unsafe})."]
    if hidden:
        return [f"{unsafe}."]
    return [f"[*] {fixable} fixable with `--fix`."] if fixable else []
