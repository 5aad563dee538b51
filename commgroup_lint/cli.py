"""The `commgroup-lint` command.

Exit codes: as docs/usage.md lists them ("Exit codes"); `entry` turns what escapes a command
into one line and exit 2 (130 for Ctrl-C).
"""

from __future__ import annotations

import gc
import io
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from commgroup_lint import __version__, terminal
from commgroup_lint.config import Config, ConfigError, resolve_config
from commgroup_lint.discovery import Discovered, PathNotFound, PathUnreadable
from commgroup_lint.docs import fix_safety, render_rule_doc
from commgroup_lint.engine import Linter, LintResult
from commgroup_lint.files import write_atomically
from commgroup_lint.fixer import FixReport, fix_result, unified_diff, write
from commgroup_lint.model import Confidence, RuleSelection
from commgroup_lint.noqa import UNPLACED, suppress
from commgroup_lint.options import anchored_patterns, progress_spinner, statistics
from commgroup_lint.parsing import FRONTENDS
from commgroup_lint.profile import ProfileError, shipped_profiles
from commgroup_lint.reporters import FORMATS, MACHINE_FORMATS
from commgroup_lint.reporters.text import print_findings, summary
from commgroup_lint.rule import all_rules
from commgroup_lint.settings import Settings, profile_names
from commgroup_lint.terminal import COLOR_CHOICES

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
    (a path that does not exist, a bad configuration), a file that could not
    be written (--fix, --add-noqa) or internal error, 130 interrupted.
    Rule pages: `commgroup-lint explain CODE`. Documentation (usage, the
    runtime shim): https://github.com/commgroup-lint/commgroup-lint/tree/main/docs
    """


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--output-format", "--format", "output_format", type=click.Choice(FORMATS), default="text",
              show_default=True, help="Output format; machine formats print only the document on stdout.")
@click.option("--select", help="Comma-separated codes or prefixes to report, replacing the configured selection "
                               "(default: all).")
@click.option("--extend-select", help="Comma-separated codes or prefixes to report in addition to the selection.")
@click.option("--ignore", help="Comma-separated codes or prefixes not to report (added to the configured ones).")
@click.option("--exclude", help="Comma-separated path patterns to skip, replacing the configured `exclude` "
                                "(and the default one: build, dist, .venv, ...).")
@click.option("--extend-exclude", help="Comma-separated path patterns to skip in addition to the configured ones.")
@click.option("--force-exclude/--no-force-exclude", default=None,
              help="Apply excludes and git's ignore rules to files named on the command line too "
                   "(as pre-commit passes them).")
@click.option("--respect-gitignore/--no-respect-gitignore", default=None,
              help="Skip what git ignores (.gitignore, .git/info/exclude, the global excludes file); "
                   "default: on, or the configured `respect-gitignore`.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="Read this pyproject.toml or commgroup-lint.toml instead of searching for one.")
@click.option("--profile", "profile_name", default=None,
              help=f"Engine profiles, comma-separated ({', '.join(shipped_profiles())}; each with the torch profile; "
                   "default: the configured ones, else all).")
@click.option("--output-file", "-o", type=click.Path(dir_okay=False),
              help="Write the report to this file (replaced atomically) instead of stdout.")
@click.option("--statistics", is_flag=True, help="Print the number of findings per code instead of the findings.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings (still 2 on errors).")
@click.option("--exit-non-zero-on-fix", is_flag=True,
              help="With --fix, exit 1 when a file was fixed, even if no finding remains.")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only: no summary line, no spinner.")
@click.option("--fix", is_flag=True, help="Apply safe fixes in place, then report what remains.")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix or --diff, apply unsafe fixes too.")
@click.option("--diff", is_flag=True, help="Print a unified diff of what --fix would change; write nothing.")
@click.option("--add-noqa", is_flag=True,
              help="Add a suppression comment (`# commgroup-lint: ignore[CODE]`) for every finding, then exit.")
@click.option("--stdin-filename", metavar="PATH",
              help="Read the source from stdin (path `-`, or no path) and report it as PATH; with --fix, print "
                   "the fixed source on stdout and the findings on stderr.")
@click.option("--show-files", is_flag=True, help="List the files that would be checked, then exit.")
@click.option("--color", type=click.Choice(COLOR_CHOICES), default="auto", show_default=True,
              help="Style text output: on a terminal unless NO_COLOR is set (auto), always, or never.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the cache (.commgroup_lint_cache/).")
@click.option("--frontend", type=click.Choice(FRONTENDS), default="ast", show_default=True,
              help="The parser the analysis reads: CPython's (fast) or libcst (the reference; same findings).")
@click.option("--min-confidence", type=click.Choice([c.value for c in Confidence]), default=None,
              help="Report findings at least this sure (default: the configured one, else medium; see the rule pages).")
@click.option("-v", "--verbose", is_flag=True,
              help="Print each finding's whole condition (text output shortens a long one to \"... and N more\").")
@click.option("--explain-facts", is_flag=True,
              help="Report, instead of the findings, those the configuration facts remove, each with its fact.")
@click.option("--no-shipped-facts", is_flag=True,
              help="Leave out the facts the shipped profiles state (facts read from the code and your own stay).")
def check(paths: Sequence[str], output_format: str, select: str | None, extend_select: str | None,
          ignore: str | None, exclude: str | None, extend_exclude: str | None, force_exclude: bool | None,
          respect_gitignore: bool | None, config_path: str | None, profile_name: str | None,
          output_file: str | None, statistics: bool, exit_zero: bool, quiet: bool, fix: bool, unsafe_fixes: bool,
          diff: bool, exit_non_zero_on_fix: bool = False, add_noqa: bool = False, stdin_filename: str | None = None, show_files: bool = False,
          color: str = "auto", no_cache: bool = False, frontend: str = "ast", min_confidence: str | None = None,
          verbose: bool = False, explain_facts: bool = False, no_shipped_facts: bool = False) -> None:
    """Check PATHS (files or directories; default: the current directory; `-`: stdin).

    The rest of the project is read for the helpers the checked files use, so
    checking one file finds what checking the whole project finds in it. Options,
    configuration and output formats:

    \b
    https://github.com/commgroup-lint/commgroup-lint/blob/main/docs/usage.md
    """
    if statistics and output_format not in ("text", "json"):
        raise UserError("--statistics works with --format text or json")
    if fix and diff:
        raise UserError("--fix and --diff cannot be combined: --diff shows what --fix would write")
    if add_noqa and (fix or diff):
        raise UserError("--add-noqa cannot be combined with --fix or --diff: suppress the findings, or fix them")
    stdin = _reads_stdin(paths, stdin_filename)
    if stdin and add_noqa:
        raise UserError("--add-noqa writes files: it cannot read the source from stdin")
    where = (stdin_filename or "-",) if stdin else tuple(paths) or (".",)  # finds the configuration, the project
    settings = _settings(
        _load_config(where, config_path), where, select=parse_codes(select, "--select"),
        extend_select=parse_codes(extend_select, "--extend-select"), ignore=parse_codes(ignore, "--ignore"),
        exclude=anchored_patterns(exclude) if exclude is not None else None,
        extend_exclude=anchored_patterns(extend_exclude), force_exclude=force_exclude,
        respect_gitignore=respect_gitignore, profile=profile_name, frontend=frontend, cache=not no_cache,
        min_confidence=Confidence(min_confidence) if min_confidence else None, per_file=config_path is None,
    )
    if explain_facts and (fix or diff or add_noqa):
        raise UserError("--explain-facts lists what the facts remove: it cannot be combined with --fix, --diff "
                        "or --add-noqa")
    settings = replace(settings, profile=replace(
        settings.profile, explain_facts=explain_facts,
        facts=tuple(f for f in settings.profile.facts if not (no_shipped_facts and f.shipped))))
    piped = _read_stdin(stdin_filename) if stdin else None
    files = _unless_excluded(settings, piped) if piped is not None else _discover(settings, where)
    if show_files:
        click.echo("".join(f"{f.display}\n" for f in files), nl=False)
        sys.exit(EXIT_CLEAN)
    if not files and not quiet and not stdin:
        click.echo("warning: no Python files to check (all excluded, or none under the given paths)", err=True)

    def lint(checked: Sequence[Discovered] = files) -> tuple[Linter, LintResult]:
        # The collector stays off until what the run built is frozen (kept until the command
        # exits): enabled first, its next pass would walk all of it, about a second on SGLang.
        gc.disable()
        try:
            with progress_spinner(len(checked), quiet, color=color):
                try:
                    return settings.lint(where, checked)
                except ConfigError as err:  # a checked file's own configuration
                    raise UserError(str(err)) from None
        finally:
            gc.freeze()
            gc.enable()

    linter, result = lint()
    if explain_facts:  # the other rules' findings, which no fact removes, are not what was asked
        result.findings = [f for f in result.findings if f.removed_by]
    fixed, unwritten = None, False  # unwritten: a fix that could not be written (exit 2)
    if add_noqa:
        sys.exit(_add_noqa(result, quiet, settings.root))
    if piped is not None and fix:  # the fixed source on stdout, the report on stderr (as ruff)
        report = fix_result(linter, result, result.fixable, unsafe_fixes)
        source = report.files[0].source.encode(report.files[0].text) if report.files else piped.content
        sys.stdout.buffer.write(source or b"")
        sys.stdout.flush()
        if report.files:
            linter, result = lint([replace(piped, content=source)])
        _report(result, output_format, quiet, output_file, statistics, report.fixed, unsafe_fixes, color,
                stderr=True, verbose=verbose)
        sys.exit(_exit_code(result, exit_zero, exit_non_zero_on_fix and report.fixed > 0))
    if fix or diff:
        report = fix_result(linter, result, result.fixable, unsafe_fixes)
        if diff:
            _print_diff(report, quiet)
            sys.exit(EXIT_ERROR if result.internal_errors or report.failures else EXIT_FINDINGS if report.files else EXIT_CLEAN)
        write(report, settings.root)
        for path, reason in report.failures:
            click.echo(f"error: could not fix {terminal.printable(path)}: {reason}", err=True)
        fixed, unwritten = report.fixed, bool(report.failures)
        if report.files:
            linter, result = lint()
    _report(result, output_format, quiet, output_file, statistics, fixed, unsafe_fixes, color, verbose=verbose)
    sys.exit(EXIT_ERROR if unwritten else _exit_code(result, exit_zero, exit_non_zero_on_fix and bool(fixed)))


def _reads_stdin(paths: Sequence[str], stdin_filename: str | None) -> bool:
    """`-` as the only path, or `--stdin-filename` with no path, reads the source from stdin."""
    if "-" in paths and len(paths) > 1:
        raise UserError("`-` (read stdin) cannot be combined with other paths")
    if stdin_filename is not None and paths and tuple(paths) != ("-",):
        raise UserError("--stdin-filename names the source read from stdin: give `-` as the only path, or no path")
    return tuple(paths) == ("-",) or stdin_filename is not None


def _read_stdin(stdin_filename: str | None) -> Discovered:
    """The source on stdin, as the file it is said to be (`-` when unnamed)."""
    display = stdin_filename or "-"
    return Discovered(Path(display), display, True, sys.stdin.buffer.read())


def _unless_excluded(settings: Settings, piped: Discovered) -> list[Discovered]:
    """`[piped]`, or none when `--force-exclude` excludes the name it was given."""
    named = piped.display != "-"
    return [] if named and settings.force_exclude and settings.skips(piped.display) else [piped]


def _settings(config: Config, where: Sequence[str], **overrides: Any) -> Settings:
    """The run's settings. An unknown name in `--profile` is labelled with the option; every
    other profile error (a configuration's, a profile file's) names its own file and key."""
    for name in profile_names(overrides.get("profile")) or ():
        if name not in shipped_profiles():
            raise UserError(f"--profile: unknown profile '{name}' (shipped profiles: {', '.join(shipped_profiles())}; "
                            "your own engine goes in `profile-files`)")
    try:
        return Settings.resolve(config, where, **overrides)
    except ProfileError as err:
        raise UserError(str(err)) from None


def _discover(settings: Settings, paths: Sequence[str]) -> list[Discovered]:
    try:
        return settings.discover(paths)
    except PathNotFound as err:
        raise UserError(f"path '{err}' does not exist; check the spelling or the current directory") from None
    except PathUnreadable as err:
        given, why = err.args
        raise UserError(f"cannot look at path '{given}': {why}; check the folders' permissions") from None


def _add_noqa(result: LintResult, quiet: bool, root: Path | None) -> int:
    """Write the suppressions for `result`; exit 0, or 2 when a file could not be written."""
    report, unplaced = suppress(result)
    write(report, root)
    for path, reason in report.failures:
        click.echo(f"error: could not add suppressions to {terminal.printable(path)}: {reason}", err=True)
    for f in unplaced:
        click.echo(f"warning: {terminal.printable(f.path)}:{f.start.line}: {f.code} not suppressed: {UNPLACED}; "
                   "suppress it by hand", err=True)
    if not quiet:
        files = len(report.files)
        click.echo(f"Added {report.fixed} suppression comment{'s' if report.fixed != 1 else ''} "
                   f"to {files} file{'s' if files != 1 else ''}.", err=True)
    return EXIT_ERROR if report.failures or result.internal_errors else EXIT_CLEAN


def _print_diff(report: FixReport, quiet: bool) -> None:
    for fixed in report.files:
        sys.stdout.write(unified_diff(fixed))
    for path, reason in report.failures:
        click.echo(f"error: could not fix {terminal.printable(path)}: {reason}", err=True)
    if not quiet:
        files = len(report.files)
        click.echo(f"Would fix {report.fixed} finding{'s' if report.fixed != 1 else ''} in {files} file{'s' if files != 1 else ''}.", err=True)


def _load_config(paths: Sequence[str], config_path: str | None) -> Config:
    try:
        return resolve_config(paths, config_path)
    except ConfigError as err:
        raise UserError(str(err)) from None


def _report(result: LintResult, output_format: str, quiet: bool, output_file: str | None = None,
            show_statistics: bool = False, fixed: int | None = None, unsafe_fixes: bool = False,
            color: str = "auto", stderr: bool = False, verbose: bool = False) -> None:
    """Print the report (on stderr when stdout carries the fixed source), or write it to `output_file`."""
    document: str | None
    if show_statistics:
        document = statistics(result, output_format, unsafe_fixes)
    elif output_format in MACHINE_FORMATS:
        document = MACHINE_FORMATS[output_format](result)
    elif not result.findings:  # nothing to style: the summary alone, without importing rich
        document = "" if quiet else "".join(f"{line}\n" for line in summary(result, fixed, unsafe_fixes))
    else:  # rich only when findings are printed: importing it costs a twentieth of a warm run
        from rich.markup import escape

        buffer = io.StringIO() if output_file is not None else None
        console = terminal.console("never" if buffer is not None else color, buffer, stderr)
        print_findings(console, result, unsafe_fixes, verbose)
        if not quiet:
            for line in summary(result, fixed, unsafe_fixes):
                console.print(escape(line), soft_wrap=True)
        document = buffer.getvalue() if buffer is not None else None
    if document is not None and output_file is None:
        (sys.stderr if stderr else sys.stdout).write(document)
    elif document is not None and output_file is not None:
        try:
            write_atomically(Path(output_file), document.encode("utf-8"))
        except OSError as err:
            raise UserError(f"--output-file: cannot write '{output_file}': {err.strerror or err}") from None
    for e in result.internal_errors:
        click.echo(f"internal error: rule {e.rule} failed on {e.path}: {e.error} (please report this)", err=True)


def _exit_code(result: LintResult, exit_zero: bool = False, fixed: bool = False) -> int:
    """2 on an internal error; else, unless `exit_zero` (which wins, as in ruff), 1 for findings
    or, with `--exit-non-zero-on-fix`, for a fix applied (`fixed`)."""
    if result.internal_errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if (result.findings or fixed) and not exit_zero else EXIT_CLEAN


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
    from commgroup_lint.runtime_log import LogError, findings

    try:
        result = LintResult(findings=findings(log))
    except LogError as err:
        raise UserError(str(err)) from None
    _report(result, output_format, quiet=False, output_file=output_file)
    sys.exit(EXIT_CLEAN if exit_zero else _exit_code(result))


@main.command("rules")
@click.option("--color", type=click.Choice(COLOR_CHOICES), default="auto", show_default=True,
              help="Style the table: on a terminal unless NO_COLOR is set (auto), always, or never.")
def list_rules(color: str = "auto") -> None:
    """List every rule with its code, name, fix safety and summary."""
    from rich.table import Table

    table = Table("Code", "Name", "Fix", "Summary", box=None)
    for rule in all_rules().rules:
        table.add_row(rule.code, rule.name, fix_safety(rule) or "",
                      rule.summary + (f" (opt-in: select {rule.code})" if rule.opt_in else ""))
    terminal.console(color).print(table)


@main.command()
def server() -> None:
    """Run the language server (LSP) on stdin and stdout, for editors.

    Setting it up in VS Code, Neovim and Helix: "Editors" in

    \b
    https://github.com/commgroup-lint/commgroup-lint/blob/main/docs/usage.md
    """
    from commgroup_lint.server import serve  # pygls only for the server

    serve()


@main.command()
@click.argument("code")
def explain(code: str) -> None:
    """Print the documentation of rule CODE (e.g. CGL002)."""
    rule = all_rules().by_code(code.upper())
    if rule is None:
        known = ", ".join(r.code for r in all_rules().rules)
        raise UserError(f"unknown rule code '{code}' (known: {known})")
    click.echo(render_rule_doc(rule), nl=False)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Output format.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="Read this pyproject.toml or commgroup-lint.toml instead of searching for one.")
@click.option("--profile", "profile_name", default=None,
              help="Engine profiles, comma-separated (default: the configured ones, else all).")
@click.option("-v", "--verbose", is_flag=True,
              help="Also say which profile entries the checked code's own definitions replace.")
def sites(paths: Sequence[str], output_format: str, config_path: str | None, profile_name: str | None,
          verbose: bool) -> None:
    """List every place PATHS bind memory to a group, with the groups and the collectives that consume it.

    \b
    Exit codes: 0 when the inventory was made (whatever it holds), 2 on a usage error.
    """
    from commgroup_lint.inventory import Inventory, render_json, render_text

    where = tuple(paths) or (".",)
    settings = _settings(_load_config(where, config_path), where, profile=profile_name, cache=False)
    files = _discover(settings, where)
    inventory = Inventory()
    linter = Linter(settings.profile, RuleSelection(("CGL000",)), per_file_ignores=settings.config.per_file_ignores,
                    observer=inventory.observe)
    result = linter.lint(files, context=settings.context(where))
    found = inventory.sites()
    sys.stdout.write(render_json(found) if output_format == "json" else render_text(found))
    if not result.files_using_api:
        click.echo("note: no file uses a known group-bound allocation API; "
                   f"profiles: {', '.join(settings.profile.names)}", err=True)
    for entry, definition, origin in linter.api.overridden() if verbose else ():
        by = "its definition" if definition == entry else f"the definition of `{definition}`"
        by = f"{by} at {origin}" if origin else f"{by}, which takes no such parameter"
        click.echo(f"note: profile entry `{entry}` is replaced by {by}; to keep the entry, pin it "
                   "(`pinned` in the profile's `[profile]`, or the entry under `extend-profile`)", err=True)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Output format.")
@click.option("-v", "--verbose", is_flag=True, help="Per file, too.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="Read this pyproject.toml or commgroup-lint.toml instead of searching for one.")
@click.option("--profile", "profile_name", default=None,
              help="Engine profiles, comma-separated (default: the configured ones, else all).")
def coverage(paths: Sequence[str], output_format: str, verbose: bool, config_path: str | None,
             profile_name: str | None) -> None:
    """Say what the analysis understood of PATHS: binding sites, consumers and groups resolved,
    and the constructs that left a group unknown.

    \b
    Exit codes: 0 when the report was made (whatever it holds), 2 on a usage error.
    """
    from commgroup_lint import coverage as report

    where = tuple(paths) or (".",)
    settings = _settings(_load_config(where, config_path), where, profile=profile_name, cache=False)
    files = _discover(settings, where)
    collected = report.Coverage()
    linter = Linter(settings.profile, RuleSelection(("CGL000",)), per_file_ignores=settings.config.per_file_ignores,
                    observer=collected.observe)
    result = linter.lint(files, context=settings.context(where))
    for checked in files:  # a file with nothing to follow is still counted
        collected.files.setdefault(checked.display, report.FileCoverage())
    collected.finish()
    reason = report.understood_nothing(collected.total(), result.files_using_api, settings.profile.names)
    render = report.render_json if output_format == "json" else report.render_text
    sys.stdout.write(render(collected, reason, verbose))
