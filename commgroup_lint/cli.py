"""The `commgroup-lint` command.

Exit codes: 0 no findings, 1 findings, 2 usage error, unreadable input or internal error.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click
from rich.console import Console
from rich.table import Table

from commgroup_lint import __version__
from commgroup_lint.discovery import PathNotFound, discover
from commgroup_lint.engine import Linter, LintResult
from commgroup_lint.model import RuleSelection
from commgroup_lint.profile import ProfileError, load_shipped, shipped_profiles
from commgroup_lint.reporters import FORMATS, MACHINE_FORMATS
from commgroup_lint.reporters.text import print_findings, summary_line
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
    """Find and fix communication-group bugs in distributed PyTorch code."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="text", show_default=True,
              help="Output format; machine formats print only the document on stdout.")
@click.option("--select", help="Comma-separated codes or prefixes to report (default: all).")
@click.option("--ignore", help="Comma-separated codes or prefixes not to report.")
@click.option("--profile", "profile_name", default="sglang", show_default=True,
              help=f"Engine profile ({', '.join(shipped_profiles())}).")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary line.")
def check(paths: Sequence[str], output_format: str, select: str | None, ignore: str | None,
          profile_name: str, quiet: bool) -> None:
    """Check PATHS (files or directories; default: the current directory)."""
    selection = RuleSelection(parse_codes(select, "--select") or ("CGL",), parse_codes(ignore, "--ignore"))
    try:
        profile = load_shipped(profile_name)
    except ProfileError as err:
        raise UserError(f"--profile: {err}") from None
    try:
        files = discover(paths or (".",))
    except PathNotFound as err:
        raise UserError(f"path '{err}' does not exist; check the spelling or the current directory") from None
    result = Linter(profile, selection).lint(files)
    _report(result, output_format, quiet)
    sys.exit(_exit_code(result))


def _report(result: LintResult, output_format: str, quiet: bool) -> None:
    if output_format in MACHINE_FORMATS:
        sys.stdout.write(MACHINE_FORMATS[output_format](result))
    else:
        console = Console(highlight=False)
        print_findings(console, result)
        if not quiet:
            console.print(summary_line(result), highlight=False)
    for e in result.internal_errors:
        click.echo(f"internal error: rule {e.rule} failed on {e.path}: {e.error} (please report this)", err=True)


def _exit_code(result: LintResult) -> int:
    if result.internal_errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if result.findings else EXIT_CLEAN


@main.command("rules")
def list_rules() -> None:
    """List every rule with its code, name and summary."""
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
    click.echo(render_rule_doc(rule))


def render_rule_doc(rule) -> str:  # noqa: ANN001
    return f"# {rule.code}: {rule.name}\n\n{rule.summary}.\n\n{rule.documentation()}\n"
