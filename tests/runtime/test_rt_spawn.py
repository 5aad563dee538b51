"""Every process, without importing anything: a user's script that never imports commgroup_lint
starts two gloo ranks with multiprocessing's spawn method; with only COMMGROUP_LINT_RUNTIME set,
the start-up hook installs the shim in each rank, with the context the project declares in
its pyproject.toml (the linter's keys), and both ranks log the wrong-group all-reduce."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from rt_linter import cli_run, sarif_validator  # noqa: E402
from rt_project import clean_env, line_of, make_project, run_ranks  # noqa: E402
from rt_startup import startup_hook_installed  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not startup_hook_installed(), reason="the package is not installed with its start-up hook"),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("userproject"))


@pytest.fixture(scope="module")
def logged(project: Path) -> list[dict]:
    log = project / "runtime.jsonl"
    out = run_ranks(project, log, "cpu")
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_both_ranks_log_the_wrong_group_at_the_allocation(project: Path, logged: list[dict]) -> None:
    main = str(project / "main.py")
    assert sorted((r["code"], r["path"], r["line"], r["collective_line"], r["rank"]) for r in logged) == [
        ("CGL002", main, line_of("ALLOCATION"), line_of("WRONG GROUP"), rank) for rank in (0, 1)
    ]
    assert all(r["collective"] == "all_reduce" and r["mode"] == "report" for r in logged)


def test_groups_are_named_by_the_variables_holding_them(logged: list[dict]) -> None:
    assert [(r["buffer_group"], r["collective_group"]) for r in logged] == [("tp", "ep")] * 2
    assert all(r["message"].startswith("CGL002 buffer bound to group 'tp' ") and " on group 'ep' at " in r["message"]
               for r in logged)


def test_the_log_renders_as_sarif(project: Path, logged: list[dict]) -> None:
    sarif = sarif_validator()(cli_run()("runtime-log", "runtime.jsonl", "--format", "sarif", cwd=project).stdout)
    [result] = sarif["runs"][0]["results"]
    assert result["ruleId"] == "CGL002" and result["message"]["text"].endswith("(ranks 0, 1)")
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == line_of("ALLOCATION")


def test_torchrun_ranks_are_covered_and_the_summary_is_printed_once(project: Path) -> None:
    log = project / "torchrun.jsonl"
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "torchrun_main.py"], cwd=project, capture_output=True, text=True, timeout=300,
        env=clean_env(COMMGROUP_LINT_RUNTIME="warn", COMMGROUP_LINT_RUNTIME_LOG=str(log)),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted((r["line"], r["rank"]) for r in records) == [(line_of("ALLOCATION"), 0), (line_of("ALLOCATION"), 1)]
    assert out.stderr.count("commgroup-lint runtime: 1 violation(s)") == 1  # rank 0's, not one per rank


def test_a_bad_value_leaves_an_unrelated_pytest_run_passing(project: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_unrelated.py"],
        cwd=project, capture_output=True, text=True, timeout=120, env=clean_env(COMMGROUP_LINT_RUNTIME="1"),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout
