"""An opt-in rule (`Rule.opt_in`: CGL007) runs only when its own code is selected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import run

FAST_PATH = (
    "import torch.distributed as dist\n"
    "\n"
    "\n"
    "def all_reduce(t, group):\n"
    "    if t.numel() < 4096:\n"
    "        dist.all_reduce(t)\n"
    "    else:\n"
    "        dist.all_reduce(t, group=group)\n"
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "m.py").write_text(FAST_PATH)
    return tmp_path


def codes(proc) -> list[tuple[str, int]]:  # noqa: ANN001
    return [(f["code"], f["line"]) for f in json.loads(proc.stdout)]


@pytest.mark.parametrize("args", [[], ["--select", "CGL"], ["--select", "CGL0"], ["--extend-select", "CGL00"]])
def test_a_prefix_does_not_run_it(tree: Path, args: list[str]) -> None:
    proc = run("check", "--no-cache", "--format", "json", *args, cwd=tree)
    assert (proc.returncode, codes(proc)) == (0, [])


@pytest.mark.parametrize("args", [["--select", "CGL007"], ["--extend-select", "CGL007"]])
def test_its_code_does(tree: Path, args: list[str]) -> None:
    proc = run("check", "--no-cache", "--format", "json", *args, cwd=tree)
    assert (proc.returncode, codes(proc)) == (1, [("CGL007", 6)])


def test_the_configuration_selects_it_by_code(tree: Path) -> None:
    (tree / "pyproject.toml").write_text('[tool.commgroup-lint]\nextend-select = ["CGL007"]\n')
    assert codes(run("check", "--no-cache", "--format", "json", cwd=tree)) == [("CGL007", 6)]
    (tree / "pyproject.toml").write_text('[tool.commgroup-lint]\nextend-select = ["CGL007"]\nignore = ["CGL007"]\n')
    assert codes(run("check", "--no-cache", "--format", "json", cwd=tree)) == []


def test_rules_says_so() -> None:
    listing = run("rules", cwd=Path.cwd()).stdout
    assert "opt-in: select CGL007" in " ".join(listing.split())
