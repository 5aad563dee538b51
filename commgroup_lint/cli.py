"""The `commgroup-lint` command.

Exit codes: 0 no findings, 1 findings, 2 usage error, unreadable input or internal error.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from commgroup_lint import __version__
from commgroup_lint.cache import Cache, cache_directory, cache_key
from commgroup_lint.config import Config, ConfigError, find_config, load_config
from commgroup_lint.discovery import PathNotFound, discover
from commgroup_lint.docs import render_rule_doc
from commgroup_lint.files import write_atomically
from commgroup_lint.fixer import FixReport, fix_result, unified_diff, write
from commgroup_lint.engine import Linter, LintResult
from commgroup_lint.parsing import FRONTENDS
from commgroup_lint.options import (
    anchored_patterns, progress_reporter, resolve_selection, statistics,
)
from commgroup_lint.profile import Profile, ProfileError, load_shipped, shipped_profiles
from commgroup_lint.reporters import FORMATS, MACHINE_FORMATS
from commgroup_lint.rule import all_rules

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class UserError(click.ClickException):
    """A problem with the user's input: printed as `error: ...`, exit 2."""

    exit_code = EXIT_ERROR

    def show(self, file=None) -> None:  # noqa: ANN001
        click.echo(f"error: {self.format_message()}", err=True)


def parse_codes(value: str | None, option: str) -> tuple[str, ...]:
    if not value:
        return ()
    codes = tuple(c.strip().upper() for c in value.split(",") if c.strip())
    known = [r.code for r in all_rules().rules]
    for code in codes:
        if not code.startswith("CGL") or not any(k.startswith(code) for k in known):
            raise UserError(f"{option}: unknown rule code '{code}' (known: {', '.join(known)}; run `commgroup-lint rules`)")
    return codes


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="commgroup-lint")
def main() -> None:
    """Find and fix communication-group bugs in distributed PyTorch code.

    \b
    Exit codes: 0 no findings, 1 findings, 2 usage error, unreadable input
    (a path that does not exist, a bad configuration) or internal error.
    Rule pages: `commgroup-lint explain CODE`; the runtime shim: docs/runtime.md.
    """


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="text", show_default=True,
              help="Output format; machine formats print only the document on stdout.")
@click.option("--select", help="Comma-separated codes or prefixes to report, replacing the configured selection "
                               "(default: all).")
@click.option("--extend-select", help="Comma-separated codes or prefixes to report in addition to the selection.")
@click.option("--ignore", help="Comma-separated codes or prefixes not to report (added to the configured ones).")
@click.option("--exclude", help="Comma-separated path patterns to skip, replacing the configured `exclude`.")
@click.option("--extend-exclude", help="Comma-separated path patterns to skip in addition to the configured ones.")
@click.option("--force-exclude/--no-force-exclude", default=None,
              help="Apply excludes to files named on the command line too (as pre-commit passes them).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="Read this pyproject.toml or commgroup-lint.toml instead of searching for one.")
@click.option("--profile", "profile_name", default=None,
              help=f"Engine profile ({', '.join(shipped_profiles())}; default: the configured one, else sglang).")
@click.option("--output-file", "-o", type=click.Path(dir_okay=False),
              help="Write the report to this file (replaced atomically) instead of stdout.")
@click.option("--statistics", is_flag=True, help="Print the number of findings per code instead of the findings.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings (still 2 on errors).")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only: no summary line, no progress bar.")
@click.option("--fix", is_flag=True, help="Apply safe fixes in place, then report what remains.")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix or --diff, apply unsafe fixes too.")
@click.option("--diff", is_flag=True, help="Print a unified diff of what --fix would change; write nothing.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the cache (.commgroup_lint_cache/).")
@click.option("--frontend", type=click.Choice(FRONTENDS), default="ast", show_default=True,
              help="The parser the analysis reads: CPython's (fast) or libcst (the reference; same findings).")
def check(paths: Sequence[str], output_format: str, select: str | None, extend_select: str | None,
          ignore: str | None, exclude: str | None, extend_exclude: str | None, force_exclude: bool | None,
          config_path: str | None, profile_name: str | None, output_file: str | None, statistics: bool,
          exit_zero: bool, quiet: bool, fix: bool, unsafe_fixes: bool, diff: bool, no_cache: bool = False,
          frontend: str = "ast") -> None:
    """Check PATHS (files or directories; default: the current directory)."""
    if statistics and output_format not in ("text", "json"):
        raise UserError("--statistics works with --format text or json")
    config = _load_config(paths, config_path)
    selection = resolve_selection(
        config, parse_codes(select, "--select"), parse_codes(extend_select, "--extend-select"),
        parse_codes(ignore, "--ignore"),
    )
    profile = _load_profile(config, profile_name)
    excludes = (anchored_patterns(exclude) if exclude is not None else config.exclude) + config.extend_exclude
    excludes += anchored_patterns(extend_exclude)
    force = config.force_exclude if force_exclude is None else force_exclude
    try:
        files = discover(paths or (".",), excludes, force)
    except PathNotFound as err:
        raise UserError(f"path '{err}' does not exist; check the spelling or the current directory") from None
    if not files and not quiet:
        click.echo("warning: no Python files to check (all excluded, or none under the given paths)", err=True)
    if fix and diff:
        raise UserError("--fix and --diff cannot be combined: --diff shows what --fix would write")
    def lint() -> tuple[Linter, LintResult]:
        linter = Linter(profile, selection, per_file_ignores=config.per_file_ignores, frontend=frontend)
        if not no_cache:
            linter.cache = Cache(cache_directory(config.path), cache_key(*linter.cache_settings()))
        with progress_reporter(len(files), quiet) as advance:
            return linter, linter.lint(files, progress=advance)

    linter, result = lint()
    fixed = None
    if fix or diff:
        report = fix_result(linter, result, result.fixable, unsafe_fixes)
        if diff:
            _print_diff(report, quiet)
            sys.exit(EXIT_ERROR if result.internal_errors else EXIT_FINDINGS if report.files else EXIT_CLEAN)
        write(report)
        for path, reason in report.failures:
            click.echo(f"error: could not fix {path}: {reason}", err=True)
        fixed = report.fixed
        if report.files:
            linter, result = lint()
    _report(result, output_format, quiet, output_file, statistics, fixed)
    sys.exit(EXIT_CLEAN if exit_zero and not result.internal_errors else _exit_code(result))


def _print_diff(report: FixReport, quiet: bool) -> None:
    for fixed in report.files:
        sys.stdout.write(unified_diff(fixed))
    for path, reason in report.failures:
        click.echo(f"error: could not fix {path}: {reason}", err=True)
    if not quiet:
        files = len(report.files)
        click.echo(f"Would fix {report.fixed} finding{'s' if report.fixed != 1 else ''} in {files} file{'s' if files != 1 else ''}.", err=True)


def _load_config(paths: Sequence[str], config_path: str | None) -> Config:
    try:
        if config_path is not None:
            path = Path(config_path)
            if not path.is_file():
                raise UserError(f"--config: file '{config_path}' does not exist")
            return load_config(path)
        found = find_config(paths)
        return load_config(found) if found else Config()
    except ConfigError as err:
        raise UserError(str(err)) from None


def _load_profile(config: Config, profile_name: str | None) -> Profile:
    try:
        profile = load_shipped(profile_name or config.profile or "sglang")
    except ProfileError as err:
        raise UserError(f"--profile: {err}") from None
    return profile.merged(config.extend_profile) if config.extend_profile else profile


def _report(result: LintResult, output_format: str, quiet: bool, output_file: str | None = None,
            show_statistics: bool = False, fixed: int | None = None) -> None:
    if show_statistics:
        document = statistics(result, output_format)
    elif output_format in MACHINE_FORMATS:
        document = MACHINE_FORMATS[output_format](result)
    else:
        document = None
    if document is None:  # rich only when text is printed: importing it costs a tenth of a warm run
        from rich.console import Console

        from commgroup_lint.reporters.text import print_findings, summary_line
    if document is None and output_file is None:
        console = Console(highlight=False)
        print_findings(console, result)
        if not quiet:
            console.print(summary_line(result, fixed), highlight=False)
    else:
        if document is None:
            buffer = io.StringIO()
            console = Console(file=buffer, highlight=False, color_system=None, width=10_000)
            print_findings(console, result)
            if not quiet:
                console.print(summary_line(result, fixed), highlight=False)
            document = buffer.getvalue()
        if output_file is None:
            sys.stdout.write(document)
        else:
            try:
                write_atomically(Path(output_file), document.encode("utf-8"))
            except OSError as err:
                raise UserError(f"--output-file: cannot write '{output_file}': {err.strerror or err}") from None
    for e in result.internal_errors:
        click.echo(f"internal error: rule {e.rule} failed on {e.path}: {e.error} (please report this)", err=True)


def _exit_code(result: LintResult) -> int:
    if result.internal_errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if result.findings else EXIT_CLEAN


@main.command("runtime-log")
@click.argument("log", type=click.Path(exists=True, dir_okay=False))
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="text", show_default=True,
              help="Output format; machine formats print only the document on stdout.")
@click.option("--output-file", "-o", type=click.Path(dir_okay=False),
              help="Write the report to this file instead of stdout.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when the log holds violations.")
def runtime_log(log: str, output_format: str, output_file: str | None, exit_zero: bool) -> None:
    """Report the runtime shim's log (COMMGROUP_LINT_RUNTIME_LOG) as findings.

    One finding per distinct violation, at its allocation line, in any output format
    (SARIF for code scanning, GitHub annotations, ...). Exits 1 when there are any.
    """
    from commgroup_lint.runtime._log import findings

    result = LintResult(findings=findings(log))
    _report(result, output_format, quiet=False, output_file=output_file)
    sys.exit(EXIT_CLEAN if exit_zero else _exit_code(result))


@main.command("rules")
def list_rules() -> None:
    """List every rule with its code, name and summary."""
    from rich.console import Console
    from rich.table import Table

    table = Table("Code", "Name", "Fix", "Summary", box=None)
    for rule in all_rules().rules:
        table.add_row(rule.code, rule.name, "yes" if rule.fixable else "", rule.summary)
    Console().print(table)


@main.command()
@click.argument("code")
def explain(code: str) -> None:
    """Print the documentation of rule CODE (e.g. CGL002)."""
    rule = all_rules().by_code(code.upper())
    if rule is None:
        known = ", ".join(r.code for r in all_rules().rules)
        raise UserError(f"unknown rule code '{code}' (known: {known})")
    click.echo(render_rule_doc(rule), nl=False)
