"""The runtime log (no torch needed): appended line by line, read incrementally, rendered with the
linter's reporters by `commgroup-lint runtime-log`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commgroup_lint import runtime_log
from commgroup_lint.runtime import _log
from commgroup_lint.runtime._report import Violation
from rt_linter import cli_run, sarif_validator


def _violation(rank: int, line: int = 3) -> Violation:
    return Violation(
        code="CGL002",
        message=f"CGL002 buffer bound to group 'tp' (allocated at model.py:{line}) is used by all_reduce on group 'ep' at model.py:9",
        path=str(Path("model.py").resolve()), line=line, collective="all_reduce",
        collective_path=str(Path("model.py").resolve()), collective_line=9, buffer_group="tp",
        collective_group="ep", rank=rank,
    )


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "runtime.jsonl"
    monkeypatch.setenv(_log.LOG_ENV_VAR, str(path))
    return path


def test_appended_as_they_happen_and_read_incrementally(log: Path) -> None:
    _log.append(_violation(0), "assert")
    records, offset = _log.read(str(log))
    assert [(r["code"], r["rank"], r["mode"], r["line"]) for r in records] == [("CGL002", 0, "assert", 3)]
    assert Violation.from_dict(records[0]) == _violation(0)
    with open(log, "ab") as fh:
        fh.write(b'{"code": "CGL0')  # a line another process is still writing
    assert _log.read(str(log), offset) == ([], offset)
    with open(log, "ab") as fh:
        fh.write(json.dumps({**_violation(1).as_dict(), "mode": "warn"})[len('{"code": "CGL0'):].encode() + b"\n")
    records, _ = _log.read(str(log), offset)
    assert [(r["rank"], r["mode"]) for r in records] == [(1, "warn")]


def test_nothing_is_written_without_a_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(_log.LOG_ENV_VAR, raising=False)
    _log.append(_violation(0), "report")
    assert list(tmp_path.iterdir()) == []


def test_the_same_violation_on_several_ranks_is_one_finding(log: Path) -> None:
    for rank in (1, 0):
        _log.append(_violation(rank), "report")
    _log.append(_violation(0, line=5), "report")
    [first, second] = runtime_log.findings(str(log))
    assert (first.code, first.path, first.start.line) == ("CGL002", "model.py", 3)
    assert first.message.endswith("at model.py:9 (ranks 0, 1)") and not first.message.startswith("CGL002")
    assert second.start.line == 5 and second.message.endswith("(ranks 0)")


def _runtime_log(*args: str, cwd: Path):  # -> CompletedProcess
    return cli_run()("runtime-log", *args, cwd=cwd)


def test_runtime_log_command_renders_the_linters_formats(log: Path) -> None:
    for rank in (0, 1):
        _log.append(_violation(rank), "assert")
    text = _runtime_log(str(log), cwd=log.parent)
    assert text.returncode == 1
    assert text.stdout.splitlines()[0] == (
        "model.py:3:1: CGL002 buffer bound to group 'tp' (allocated at model.py:3) is used by all_reduce "
        "on group 'ep' at model.py:9 (ranks 0, 1)"
    )
    github = _runtime_log(str(log), "--format", "github", cwd=log.parent)
    assert github.stdout.startswith("::error file=model.py,line=3,col=1,endLine=3,endColumn=1,title=group-mismatch (CGL002)::buffer bound")
    sarif = sarif_validator()(_runtime_log(str(log), "--format", "sarif", cwd=log.parent).stdout)
    [result] = sarif["runs"][0]["results"]
    assert result["ruleId"] == "CGL002" and result["locations"][0]["physicalLocation"]["region"]["startLine"] == 3
    assert _runtime_log(str(log), "--exit-zero", "--format", "json", cwd=log.parent).returncode == 0


def test_an_empty_log_is_clean(log: Path) -> None:
    log.write_text("")
    assert _runtime_log(str(log), cwd=log.parent).returncode == 0
