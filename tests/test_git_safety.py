"""The one git command a run makes (`git config --get core.excludesFile`, issue 26) runs
nothing the checked repository ships or configures: git is found only in the absolute
entries of PATH, and the repository's `.git/config` cannot make it run a program."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from commgroup_lint import git

pytestmark = pytest.mark.skipif(shutil.which("git") is None or os.name != "posix", reason="needs git, POSIX")

SOURCE = "x = 1\n"


def check(tree: Path, path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "commgroup_lint", "check", "--no-cache", "."], cwd=tree,
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PATH": path})


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "a.py").write_text(SOURCE)
    return root


def test_a_git_the_repository_ships_is_not_run(tree: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    fake = tree / "git"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\n")
    fake.chmod(0o755)
    for relative in (".", ""):  # `.` and an empty entry both mean the current directory
        done = check(tree, relative + os.pathsep + os.environ["PATH"])
        assert done.returncode == 0, done.stderr
        assert not marker.exists()
    assert git._git_executable() == shutil.which("git")


def test_the_repositorys_git_config_runs_nothing(tree: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with open(tree / ".git" / "config", "a") as config:
        config.write(f"[core]\n\tfsmonitor = touch {marker}\n\tpager = touch {marker}\n"
                     f"\thooksPath = {tmp_path}\n[alias]\n\tconfig = !touch {marker}\n")
    done = check(tree, os.environ["PATH"])
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
