"""`check --fix` / `--diff` at the file level (issue 3): modes, exit codes, summary, diff output,
reverting a fix that would not parse, refusing to overwrite a file changed on disk, JSON."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

import commgroup_lint.autofix as autofix
import commgroup_lint.cli as cli
from commgroup_lint.model import Edit
from lintkit import FIXABLE, FIXED

UNFIXABLE = "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n\n\ndef make():\n    return get_local_dp_buffer()\n"
CLEAN = "x = 1\n"
DISAGREE = (
    "from sglang.srt.distributed import get_tp_group\n"
    "from sglang.srt.layers.dp_attention import dp_scatter, get_attention_tp_group, get_local_dp_buffer\n"
    "\n"
    "\n"
    "class C:\n"
    "    def a(self, g, fb):\n"
    "        local = get_local_dp_buffer(get_tp_group())\n"
    "        dp_scatter(local, g, fb)\n"
    "\n"
    "    def b(self, g, fb):\n"
    "        local = get_local_dp_buffer(get_tp_group())\n"
    "        dp_scatter(local, g, fb)\n"
    "\n"
    "    def c(self, g, fb):\n"
    "        local = get_local_dp_buffer(get_attention_tp_group())\n"
    "        dp_scatter(local, g, fb)\n"
    "\n"
    "    def d(self, g, fb):\n"
    "        local = get_local_dp_buffer()\n"
    "        dp_scatter(local, g, fb)\n"
)


def check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str], *args: str):
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return CliRunner().invoke(cli.main, ["check", *args, *files], catch_exceptions=False)


def test_fix_writes_and_exits_0_when_nothing_remains(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = check(tmp_path, monkeypatch, {"a.py": FIXABLE}, "--fix")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == FIXED
    assert result.stdout.strip().splitlines()[-1] == "Fixed 1 finding, 0 remaining (1 file checked)."
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".a.py.")] == []  # no temporary file left behind


def test_fix_exits_1_when_findings_remain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = check(tmp_path, monkeypatch, {"a.py": FIXABLE, "b.py": UNFIXABLE}, "--fix")
    assert result.exit_code == 1
    assert "b.py:5:12: CGL001" in result.stdout
    assert "a.py" not in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "Fixed 1 finding, 1 remaining (2 files checked)."


def test_fix_twice_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check(tmp_path, monkeypatch, {"a.py": FIXABLE}, "--fix")
    result = CliRunner().invoke(cli.main, ["check", "--fix", "a.py"])
    assert result.exit_code == 0
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == FIXED
    assert result.stdout.strip().splitlines()[-1] == "Fixed 0 findings, 0 remaining (1 file checked)."


def test_fix_keeps_the_file_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a.py"
    path.write_text("#!/usr/bin/env python\n" + FIXABLE, encoding="utf-8")
    os.chmod(path, 0o755)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli.main, ["check", "--fix", "a.py"])
    assert result.exit_code == 0, result.output
    assert "get_global_dp_buffer(get_tp_group())" in path.read_text(encoding="utf-8")
    assert stat.S_IMODE(path.stat().st_mode) == 0o755


def test_fix_through_a_symlink_writes_the_target_and_keeps_the_link(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "a.py"
    target.write_text(FIXABLE, encoding="utf-8")
    os.chmod(target, 0o640)
    (tmp_path / "link.py").symlink_to(Path("real") / "a.py")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli.main, ["check", "--fix", "link.py"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "link.py").is_symlink()
    assert os.readlink(tmp_path / "link.py") == str(Path("real") / "a.py")
    assert target.read_text(encoding="utf-8") == FIXED
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["a.py"]  # no temporary file left


def test_diff_prints_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = check(tmp_path, monkeypatch, {"a.py": FIXABLE, "b.py": UNFIXABLE}, "--diff")
    assert result.exit_code == 1
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == FIXABLE
    assert result.stdout == (
        "--- a/a.py\n"
        "+++ b/a.py\n"
        "@@ -1,7 +1,8 @@\n"
        " from sglang.srt.layers.dp_attention import dp_gather_partial, get_global_dp_buffer\n"
        "+from sglang.srt.distributed import get_tp_group\n"
        " \n"
        " \n"
        " def gather(hidden_states, forward_batch):\n"
        "-    gathered = get_global_dp_buffer()\n"
        "+    gathered = get_global_dp_buffer(get_tp_group())\n"
        "     dp_gather_partial(gathered, hidden_states, forward_batch)\n"
        "     return gathered\n"
    )
    assert "Would fix 1 finding in 1 file." in result.stderr


@pytest.mark.parametrize("files", [{"a.py": CLEAN}, {"b.py": UNFIXABLE}, {"c.py": DISAGREE}])
def test_diff_exits_0_when_there_is_nothing_to_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files) -> None:
    result = check(tmp_path, monkeypatch, files, "--diff")
    assert (result.exit_code, result.stdout) == (0, "")
    assert all((tmp_path / n).read_text(encoding="utf-8") == t for n, t in files.items())


def test_unsafe_fixes_only_with_the_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = check(tmp_path, monkeypatch, {"c.py": DISAGREE}, "--diff", "--unsafe-fixes")
    assert result.exit_code == 1
    assert "+        local = get_local_dp_buffer(get_tp_group())\n" in result.stdout
    safe = CliRunner().invoke(cli.main, ["check", "--fix", "c.py"])
    assert safe.exit_code == 1
    assert (tmp_path / "c.py").read_text(encoding="utf-8") == DISAGREE
    assert safe.stdout.strip().splitlines()[-2:] == [  # how many unsafe fixes --fix left
        "Fixed 0 findings, 1 remaining (1 file checked).",
        "1 unsafe fix available with `--fix --unsafe-fixes`.",
    ]
    unsafe = CliRunner().invoke(cli.main, ["check", "--fix", "--unsafe-fixes", "c.py"])
    assert unsafe.exit_code == 0
    assert unsafe.stdout.strip().splitlines()[-1] == "Fixed 1 finding, 0 remaining (1 file checked)."


def test_fix_and_diff_together_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = check(tmp_path, monkeypatch, {"a.py": FIXABLE}, "--fix", "--diff")
    assert result.exit_code == 2
    assert "--fix and --diff cannot be combined" in result.stderr
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == FIXABLE


def test_a_fix_that_would_not_parse_is_reverted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = autofix.add_argument
    monkeypatch.setattr(autofix, "add_argument", lambda *a: (lambda e: Edit(e.start, e.end, e.replacement + "(("))(real(*a)))
    result = check(tmp_path, monkeypatch, {"a.py": FIXABLE, "b.py": UNFIXABLE}, "--fix")
    assert result.exit_code == 2  # a fix that could not be written (docs/usage.md, "Exit codes")
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == FIXABLE
    assert "error: could not fix a.py: the fixed file would not parse" in result.stderr
    assert "left unchanged" in result.stderr
    assert result.stdout.strip().splitlines()[-2:] == [
        "Fixed 0 findings, 2 remaining (2 files checked).", "[*] 1 fixable with `--fix`.",
    ]
    diff = CliRunner().invoke(cli.main, ["check", "--diff", "a.py"])
    assert (diff.exit_code, diff.stdout) == (2, "")
    assert "error: could not fix a.py: the fixed file would not parse" in diff.stderr


def test_a_file_changed_on_disk_is_not_overwritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    edited = FIXABLE.replace("return gathered", "return gathered  # edited meanwhile")
    real = cli.fix_result

    def fix_then_edit(*args, **kwargs):
        report = real(*args, **kwargs)
        (tmp_path / "a.py").write_text(edited, encoding="utf-8")  # someone saves the file
        return report

    monkeypatch.setattr(cli, "fix_result", fix_then_edit)
    result = check(tmp_path, monkeypatch, {"a.py": FIXABLE}, "--fix")
    assert result.exit_code == 2
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == edited
    assert "error: could not fix a.py: changed on disk since it was read; not written" in result.stderr
    assert result.stdout.strip().splitlines()[-2:] == [
        "Fixed 0 findings, 1 remaining (1 file checked).", "[*] 1 fixable with `--fix`.",
    ]


def test_json_carries_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = check(tmp_path, monkeypatch, {"a.py": FIXABLE, "c.py": DISAGREE}, "--format", "json")
    assert result.exit_code == 1
    a, c = json.loads(result.stdout)
    assert (a["path"], a["fix_available"], a["fix"]) == ("a.py", True, {
        "applicability": "safe",
        "message": "Pass `get_tp_group()`: the group of `dp_gather_partial` at line 6",
        "edits": [
            {"line": 2, "column": 1, "end_line": 2, "end_column": 1,
             "content": "from sglang.srt.distributed import get_tp_group\n"},
            {"line": 5, "column": 37, "end_line": 5, "end_column": 37, "content": "get_tp_group()"},
        ],
    })
    assert (c["path"], c["fix"]["applicability"]) == ("c.py", "unsafe")
    assert c["fix"]["edits"] == [{"line": 19, "column": 37, "end_line": 19, "end_column": 37, "content": "get_tp_group()"}]
