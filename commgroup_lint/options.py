"""The command line's helpers that are not about parsing arguments: how options combine with
the configuration, statistics, writing the report, and the spinner."""

from __future__ import annotations

import contextlib
import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from commgroup_lint.config import Config, anchor
from commgroup_lint.engine import LintResult
from commgroup_lint.fixer import applicable
from commgroup_lint.model import RuleSelection
from commgroup_lint.rule import all_rules

PROGRESS_THRESHOLD = 300
"""A run over more files than this shows a spinner (on a terminal, without --quiet)."""


def resolve_selection(config: Config, select: tuple[str, ...], extend_select: tuple[str, ...],
                      ignore: tuple[str, ...]) -> RuleSelection:
    """As ruff: `--select` starts over (the configured select, extend-select and ignore no
    longer apply); otherwise the configured selection holds and `--ignore` adds to its ignores.
    `--extend-select` adds to either."""
    if select:
        return RuleSelection(select + extend_select, ignore)
    base = (config.select if config.select is not None else ("CGL",)) + config.extend_select
    return RuleSelection(base + extend_select, config.ignore + ignore)


def anchored_patterns(value: str | None, cwd: Path | None = None) -> tuple[str, ...]:
    """Comma-separated command-line patterns, relative to the working directory."""
    if not value:
        return ()
    root = cwd or Path.cwd()
    return tuple(anchor(p.strip(), root) for p in value.split(",") if p.strip())


def statistics(result: LintResult, output_format: str, unsafe_fixes: bool = False) -> str:
    """Findings per code, most frequent first (`--statistics`). Marked as ruff 0.17 marks them:
    `[*]` when `--fix` (with `--unsafe-fixes` if given) fixes every finding of the code (JSON
    `"fixable": true`), `[-]` some, `[ ]` none (JSON `fixable_count`: how many); no marker at
    all when `--fix` fixes nothing."""
    counts = Counter(f.code for f in result.findings)
    fixed = Counter(f.code for f in result.findings if applicable(f.fix, unsafe_fixes))
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    registry = all_rules()
    if output_format == "json":
        return json.dumps([
            {"code": code, "name": _name(registry, code), "count": n, "fixable": fixed[code] == n,
             "fixable_count": fixed[code]}
            for code, n in rows
        ], indent=2) + "\n"
    width = max((len(str(n)) for _, n in rows), default=1)
    markers = {code: ("[*] " if fixed[code] == n else "[-] " if fixed[code] else "[ ] ") if fixed else ""
               for code, n in counts.items()}
    return "".join(f"{n:>{width}}\t{code}\t{markers[code]}{_name(registry, code)}\n" for code, n in rows)


def _name(registry, code: str) -> str:  # noqa: ANN001
    rule = registry.by_code(code)
    return rule.name if rule else ""


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


def wants_progress(total: int, quiet: bool) -> bool:
    return total > PROGRESS_THRESHOLD and not quiet and stderr_is_terminal()


@contextlib.contextmanager
def progress_spinner(total: int, quiet: bool, console=None, color: str = "auto") -> Iterator[None]:  # noqa: ANN001
    """A spinner and the time elapsed on stderr while `total` files are checked, or nothing
    (few files, --quiet, stderr not a terminal), styled as `color` asks (see `terminal`)
    unless a `console` is given. Not a bar of files done: most of a run is the index's
    fixpoint over the whole project, whose length is not known ahead, so such a count sat
    at zero and jumped to the end."""
    if not wants_progress(total, quiet):
        yield
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from commgroup_lint import terminal

    progress = Progress(
        SpinnerColumn(), TextColumn(f"checking {total} files"), TimeElapsedColumn(),
        console=console or terminal.console(color, stderr=True), transient=True,
    )
    with progress:
        progress.add_task("check", total=None)
        yield
