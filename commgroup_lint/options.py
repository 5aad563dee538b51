"""The command line's helpers that are not about parsing arguments: how options combine with
the configuration, statistics, writing the report, and the progress bar."""

from __future__ import annotations

import contextlib
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from commgroup_lint.config import Config, anchor
from commgroup_lint.engine import LintResult
from commgroup_lint.fixer import applicable
from commgroup_lint.model import RuleSelection
from commgroup_lint.rule import all_rules

PROGRESS_THRESHOLD = 300
"""A run over more files than this shows a progress bar (on a terminal, without --quiet)."""


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
    """Findings per code, most frequent first (`--statistics`). As ruff marks them, a code is
    fixable (`[*]`, JSON `"fixable": true`) when `--fix` (with `--unsafe-fixes` if given) fixes
    every finding of it, `[ ]` otherwise; no marker at all when no code is fixable."""
    counts = Counter(f.code for f in result.findings)
    unfixed = {f.code for f in result.findings if not applicable(f.fix, unsafe_fixes)}
    fixable = counts.keys() - unfixed
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    registry = all_rules()
    if output_format == "json":
        return json.dumps([
            {"code": code, "name": _name(registry, code), "count": n, "fixable": code in fixable}
            for code, n in rows
        ], indent=2) + "\n"
    width = max((len(str(n)) for _, n in rows), default=1)
    markers = {code: ("[*] " if code in fixable else "[ ] ") if fixable else "" for code in counts}
    return "".join(f"{n:>{width}}\t{code}\t{markers[code]}{_name(registry, code)}\n" for code, n in rows)


def _name(registry, code: str) -> str:  # noqa: ANN001
    rule = registry.by_code(code)
    return rule.name if rule else ""


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


def wants_progress(total: int, quiet: bool) -> bool:
    return total > PROGRESS_THRESHOLD and not quiet and stderr_is_terminal()


@contextlib.contextmanager
def progress_reporter(total: int, quiet: bool, console=None, color: str = "auto") -> Iterator[Callable[[], None] | None]:  # noqa: ANN001
    """A callback that advances a progress bar on stderr by one file, or None when no bar is
    wanted (few files, --quiet, or stderr is not a terminal). The bar is styled as `color`
    asks (see `terminal`), unless a `console` is given."""
    if not wants_progress(total, quiet):
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from commgroup_lint import terminal

    progress = Progress(
        TextColumn("checking"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console or terminal.console(color, stderr=True), transient=True,
    )
    with progress:
        task = progress.add_task("check", total=total)
        yield lambda: progress.advance(task)
