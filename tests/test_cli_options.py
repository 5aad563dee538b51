"""`check` options: --output-file, --statistics, --exit-zero, --quiet, the progress bar, empty runs."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from commgroup_lint import options
from commgroup_lint.cli import main

BAD = "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n\n\ndef forward():\n    return get_local_dp_buffer()\n"
MESSAGE = (
    "`get_local_dp_buffer` is called without its group argument `group` (no fix: no collective consumes the"
    " buffer in this file; no sibling call site shows the group; candidates: attn_cp, attn_tp, moe_dp,"
    " moe_ep, moe_tp, tp)"
)
TEXT_REPORT = (
    f"bad.py:5:12: CGL001 {MESSAGE}\n"
    "   5 |     return get_local_dp_buffer()\n"
    "                  ^^^^^^^^^^^^^^^^^^^^^\n"
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "good.py").write_text("x = 1  # commgroup-lint: ignore\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check(*args: str):
    return CliRunner().invoke(main, ["check", *args])


def test_text_report(project: Path) -> None:
    result = check("bad.py")
    assert (result.exit_code, result.stdout) == (1, TEXT_REPORT + "Found 1 finding (1 file checked).\n")


def test_quiet_drops_the_summary(project: Path) -> None:
    result = check("-q", "bad.py")
    assert (result.exit_code, result.stdout) == (1, TEXT_REPORT)
    assert check("--quiet", "good.py", "--select", "CGL001").stdout == ""


def test_exit_zero(project: Path) -> None:
    result = check("--exit-zero", "bad.py")
    assert (result.exit_code, result.stdout) == (0, TEXT_REPORT + "Found 1 finding (1 file checked).\n")
    assert check("--exit-zero", "--format", "json", "bad.py").exit_code == 0


def test_output_file_text_has_no_colour(project: Path) -> None:
    result = check("--output-file", "out/report.txt", "bad.py")
    assert (result.exit_code, result.stdout) == (1, "")
    assert (project / "out" / "report.txt").read_text() == TEXT_REPORT + "Found 1 finding (1 file checked).\n"
    assert [p.name for p in (project / "out").iterdir()] == ["report.txt"]  # no temporary file left


def test_output_file_machine_formats_replace_the_file(project: Path) -> None:
    target = project / "report.json"
    target.write_text("old contents that are longer than the new ones " * 100)
    result = check("--format", "json", "-o", "report.json", "bad.py")
    assert (result.exit_code, result.stdout) == (1, "")
    assert [f["code"] for f in json.loads(target.read_text())] == ["CGL001"]
    check("--format", "sarif", "--output-file", "report.sarif", ".")
    assert json.loads((project / "report.sarif").read_text())["version"] == "2.1.0"


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_output_file_honours_the_umask(project: Path, umask: int) -> None:
    previous = os.umask(umask)
    try:
        check("--format", "json", "-o", "report.json", "bad.py")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((project / "report.json").stat().st_mode) == 0o666 & ~umask


def test_output_file_keeps_an_existing_files_mode(project: Path) -> None:
    target = project / "report.json"
    target.write_text("[]")
    os.chmod(target, 0o640)
    check("--format", "json", "-o", "report.json", "bad.py")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [f["code"] for f in json.loads(target.read_text())] == ["CGL001"]


def test_output_file_that_cannot_be_written(project: Path) -> None:
    (project / "blocker").write_text("a file, not a directory")
    result = check("--output-file", "blocker/report.txt", "bad.py")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --output-file: cannot write 'blocker/report.txt': ")


def test_statistics_text(project: Path) -> None:
    (project / "more.py").write_text(BAD + "\n\ndef g():\n    return get_local_dp_buffer()\n")
    result = check("--statistics", ".")
    assert result.exit_code == 1
    assert result.stdout == "3\tCGL001\tmissing-group\n1\tCGL101\tblanket-suppression\n"
    assert check("--statistics", "--exit-zero", ".").exit_code == 0


def test_statistics_json_and_file(project: Path) -> None:
    result = check("--statistics", "--format", "json", "-o", "stats.json", ".")
    assert (result.exit_code, result.stdout) == (1, "")
    assert json.loads((project / "stats.json").read_text()) == [
        {"code": "CGL001", "name": "missing-group", "count": 1, "fixable": False, "fixable_count": 0},
        {"code": "CGL101", "name": "blanket-suppression", "count": 1, "fixable": False, "fixable_count": 0},
    ]
    assert check("--statistics", "--select", "CGL002", ".").stdout == ""


def test_statistics_with_other_formats_is_an_error(project: Path) -> None:
    result = check("--statistics", "--format", "sarif", ".")
    assert (result.exit_code, result.stderr) == (2, "error: --statistics works with --format text or json\n")


@pytest.mark.parametrize(("option", "value"), [("--select", "XYZ"), ("--extend-select", "CGL9"), ("--ignore", "E1")])
def test_unknown_codes_in_options(project: Path, option: str, value: str) -> None:
    result = check(option, value, ".")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {option}: unknown rule code '{value}' (known: CGL000, ")


def test_extend_select_and_ignore_options(project: Path) -> None:
    result = check("--select", "CGL001", "--extend-select", "CGL101", "--format", "json", ".")
    assert [f["code"] for f in json.loads(result.stdout)] == ["CGL001", "CGL101"]
    assert check("--ignore", "CGL001,CGL101", "-q", ".").stdout == ""


def test_no_files_is_a_clean_exit(project: Path) -> None:
    # pre-commit with --force-exclude can end up with every file it passed excluded.
    result = check("--force-exclude", "--exclude", "*.py", "bad.py", "good.py")
    assert (result.exit_code, result.stdout) == (0, "All clear: no findings (0 files checked).\n")
    assert result.stderr == "warning: no Python files to check (all excluded, or none under the given paths)\n"
    quiet = check("-q", "--force-exclude", "--exclude", "*.py", "bad.py")
    assert (quiet.exit_code, quiet.stdout, quiet.stderr) == (0, "", "")


def test_missing_path(project: Path) -> None:
    result = check("nope.py")
    assert (result.exit_code, result.stderr) == (2, "error: path 'nope.py' does not exist; check the spelling or the current directory\n")


# --- progress --------------------------------------------------------------------------------

def test_progress_only_on_a_terminal_for_big_runs_without_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(options, "stderr_is_terminal", lambda: True)
    assert options.wants_progress(options.PROGRESS_THRESHOLD + 1, quiet=False)
    assert not options.wants_progress(options.PROGRESS_THRESHOLD, quiet=False)
    assert not options.wants_progress(1000, quiet=True)
    monkeypatch.setattr(options, "stderr_is_terminal", lambda: False)
    assert not options.wants_progress(1000, quiet=False)

def test_the_spinner_says_what_runs_and_claims_no_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """A count of files done sat at 0 for a whole run (the index's fixpoint is most of it)."""
    monkeypatch.setattr(options, "stderr_is_terminal", lambda: True)
    buffer = io.StringIO()
    with options.progress_spinner(1958, quiet=False, console=Console(file=buffer, force_terminal=True, width=80)):
        pass
    drawn = buffer.getvalue()
    assert "checking 1958 files" in drawn and "0:00:00" in drawn
    assert "/1958" not in drawn
    buffer = io.StringIO()
    with options.progress_spinner(1958, quiet=True, console=Console(file=buffer, force_terminal=True, width=80)):
        pass
    assert buffer.getvalue() == ""


def test_no_progress_output_when_not_a_terminal(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(options, "PROGRESS_THRESHOLD", 0)
    result = check("-q", "--exit-zero", ".")
    assert result.stderr == ""


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "dp_attention"


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The bundled example (safe fixes, an unsafe one, findings without a fix) in a scratch directory."""
    import shutil

    shutil.copytree(EXAMPLE, tmp_path / "dp_attention")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "dp_attention"


def test_statistics_mark_what_fix_applies_as_ruff_does(example: Path) -> None:
    """As ruff 0.17.6 prints them: `[*]` `--fix` fixes every finding of the code, `[-]` some,
    `[ ]` none; an unsafe fix counts only with --unsafe-fixes."""
    assert check("--statistics", "dp_attention").stdout == (
        "2\tCGL001\t[*] missing-group\n2\tCGL002\t[-] group-mismatch\n"  # one CGL002 has no fix
        "1\tCGL003\t[ ] hidden-group\n1\tCGL004\t[ ] inconsistent-selection\n"  # CGL004's fix is unsafe
    )
    assert "1\tCGL004\t[*] inconsistent-selection\n" in check("--statistics", "--unsafe-fixes", "dp_attention").stdout
    fixable = {s["code"]: (s["fixable"], s["fixable_count"])
               for s in json.loads(check("--statistics", "--output-format", "json", "dp_attention").stdout)}
    assert fixable == {"CGL001": (True, 2), "CGL002": (False, 1), "CGL003": (False, 0), "CGL004": (False, 0)}


def test_output_format_is_an_alias_of_format(example: Path) -> None:
    assert check("--output-format", "json", "dp_attention").stdout == check("--format", "json", "dp_attention").stdout
    assert check("--output-format", "github", "dp_attention").stdout.startswith("::error file=dp_attention/")


def test_exit_non_zero_on_fix(example: Path) -> None:
    forward = example / "deepseek_v4_forward.py"
    original = forward.read_text()
    quiet = check("--fix", "--select", "CGL001", "--exit-non-zero-on-fix", "--exit-zero", "dp_attention")
    assert (quiet.exit_code, forward.read_text() != original) == (0, True)  # --exit-zero wins, as in ruff
    forward.write_text(original)
    fixed = check("--fix", "--exit-non-zero-on-fix", "--select", "CGL001", "dp_attention")
    assert (fixed.exit_code, fixed.stdout) == (1, "Fixed 2 findings, 0 remaining (4 files checked).\n")
    assert check("--fix", "--exit-non-zero-on-fix", "--select", "CGL001", "dp_attention").exit_code == 0  # none left
    forward.write_text(original)
    assert check("--fix", "--select", "CGL001", "dp_attention").exit_code == 0  # without the flag


def test_fix_hint_in_ruffs_words(example: Path) -> None:
    """ruff 0.17.6's summary lines, word for word."""
    assert check("dp_attention").stdout.endswith(
        "[*] 3 fixable with `--fix` (1 unsafe fix available with `--fix --unsafe-fixes`).\n")
    assert check("--select", "CGL004", "dp_attention").stdout.endswith(
        "Found 1 finding (4 files checked).\n1 unsafe fix available with `--fix --unsafe-fixes`.\n")
    assert check("--select", "CGL004", "--unsafe-fixes", "dp_attention").stdout.endswith(
        "[*] 1 fixable with `--fix`.\n")
