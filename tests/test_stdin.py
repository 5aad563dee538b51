"""`check --stdin-filename PATH -` (issue 15, item 6): an editor or a script pipes the buffer in;
findings name PATH; with `--fix` the fixed source goes to stdout and the findings to stderr, as
ruff does. The configuration and the project around PATH apply as if the file were on disk."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint.cli import main
from lintkit import FIXABLE, FIXED

UNFIXABLE = "\n\ndef make():\n    return get_global_dp_buffer()\n"  # no consumer: no group to choose


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check(source: str | bytes, *args: str):
    return CliRunner().invoke(main, ["check", "--no-cache", *args], input=source, catch_exceptions=False)


def test_findings_are_reported_under_the_given_name() -> None:
    for args in (["--stdin-filename", "pkg/model.py", "-"], ["--stdin-filename", "pkg/model.py"]):
        result = check(FIXABLE, "--format", "json", *args)
        assert result.exit_code == 1
        assert [(f["path"], f["line"], f["column"], f["code"]) for f in json.loads(result.stdout)] == [
            ("pkg/model.py", 5, 16, "CGL001"),
        ]
    text = check(FIXABLE, "-")
    assert text.stdout.startswith("-:5:16: CGL001 [*] ")


def test_the_text_on_stdin_wins_over_the_file_on_disk(in_tmp: Path) -> None:
    (in_tmp / "model.py").write_text("x = 1\n")
    assert check(FIXABLE, "-q", "--stdin-filename", "model.py", "-").stdout.startswith("model.py:5:16: CGL001")
    assert check("x = 1\n", "--stdin-filename", "model.py").exit_code == 0


def test_fix_prints_the_fixed_source_on_stdout_and_the_findings_on_stderr(in_tmp: Path) -> None:
    (in_tmp / "model.py").write_text(FIXABLE)
    result = check(FIXABLE, "--fix", "--stdin-filename", "model.py", "-")
    assert result.exit_code == 0
    assert result.stdout == FIXED
    assert result.stderr == "Fixed 1 finding, 0 remaining (1 file checked).\n"
    assert (in_tmp / "model.py").read_text() == FIXABLE  # stdin in, stdout out: nothing written

    remaining = check(FIXABLE + UNFIXABLE, "--fix", "--stdin-filename", "model.py")
    assert remaining.exit_code == 1
    assert remaining.stdout == FIXED + UNFIXABLE
    assert remaining.stderr.startswith("model.py:12:12: CGL001 `get_global_dp_buffer` is called without")
    assert remaining.stderr.endswith("Fixed 1 finding, 1 remaining (1 file checked).\n")


def test_fix_keeps_the_bytes_of_what_it_cannot_fix() -> None:
    crlf = b"x = 1\r\ny = 2\r\n"
    assert check(crlf, "--fix", "--stdin-filename", "a.py").stdout_bytes == crlf
    undecodable = b"x = '\xff'\n"
    result = check(undecodable, "--fix", "--stdin-filename", "a.py")
    assert (result.exit_code, result.stdout_bytes) == (1, undecodable)
    assert result.stderr.startswith("a.py:1:1: CGL000 not valid utf-8")


def test_diff_from_stdin() -> None:
    result = check(FIXABLE, "--diff", "--stdin-filename", "model.py")
    assert result.exit_code == 1
    assert result.stdout.startswith("--- a/model.py\n+++ b/model.py\n")
    assert "+    gathered = get_global_dp_buffer(get_tp_group())\n" in result.stdout


def test_force_exclude_applies_to_the_name(in_tmp: Path) -> None:
    (in_tmp / "pyproject.toml").write_text("[tool.commgroup-lint]\nexclude = ['generated']\n")
    result = check(FIXABLE, "--force-exclude", "--fix", "--stdin-filename", "generated/model.py")
    assert (result.exit_code, result.stdout) == (0, FIXABLE)  # echoed unchanged: an editor keeps its buffer
    assert check(FIXABLE, "--stdin-filename", "generated/model.py").exit_code == 1  # without --force-exclude


def test_the_project_around_the_name_is_the_context(in_tmp: Path) -> None:
    (in_tmp / ".git").mkdir()
    (in_tmp / "pkg").mkdir()
    (in_tmp / "pkg" / "__init__.py").write_text("")
    (in_tmp / "pkg" / "comm.py").write_text(
        "from sglang.srt.layers.dp_attention import get_attention_tp_group\n\n\n"
        "def all_gather_attn_tp(output, input_):\n    get_attention_tp_group().all_gather_into_tensor(output, input_)\n")
    user = ("from sglang.srt.distributed import get_tp_group\n"
            "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n"
            "from pkg.comm import all_gather_attn_tp\n\n\n"
            "def gather(x):\n    out = get_local_dp_buffer(get_tp_group())\n    all_gather_attn_tp(out, x)\n")
    result = check(user, "--format", "json", "--stdin-filename", "pkg/user.py")
    assert [(f["path"], f["line"], f["code"]) for f in json.loads(result.stdout)] == [("pkg/user.py", 7, "CGL002")]


@pytest.mark.parametrize(("args", "message"), [
    (["-", "other.py"], "error: `-` (read stdin) cannot be combined with other paths\n"),
    (["--stdin-filename", "a.py", "other.py"],
     "error: --stdin-filename names the source read from stdin: give `-` as the only path, or no path\n"),
    (["--add-noqa", "-"], "error: --add-noqa writes files: it cannot read the source from stdin\n"),
])
def test_usage_errors(args: list[str], message: str) -> None:
    result = check(FIXABLE, *args)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", message)


def test_as_a_subprocess_with_a_real_pipe(in_tmp: Path) -> None:
    exe = shutil.which("commgroup-lint", path=str(Path(sys.executable).parent)) or shutil.which("commgroup-lint")
    assert exe
    proc = subprocess.run([exe, "check", "--fix", "--stdin-filename", "m.py", "-"], input=FIXABLE.encode(),
                          capture_output=True, timeout=120)
    assert (proc.returncode, proc.stdout.decode()) == (0, FIXED)
    assert proc.stderr.decode() == "Fixed 1 finding, 0 remaining (1 file checked).\n"


def test_a_buffer_leaves_the_files_cache_record_as_it_was(in_tmp: Path) -> None:
    """An editor sends a new text at every keystroke: none of them is the file on disk."""
    (in_tmp / ".git").mkdir()
    (in_tmp / "model.py").write_text(FIXABLE)
    (in_tmp / "helper.py").write_text("x = 1\n")
    assert CliRunner().invoke(main, ["check", "."]).exit_code == 1
    cache = sorted((in_tmp / ".commgroup_lint_cache").iterdir())
    before = [p.read_bytes() for p in cache]
    for edit in range(2):
        result = CliRunner().invoke(main, ["check", "--stdin-filename", "model.py"], input=FIXABLE + f"# {edit}\n")
        assert result.exit_code == 1
    assert sorted((in_tmp / ".commgroup_lint_cache").iterdir()) == cache
    assert [p.read_bytes() for p in cache] == before
