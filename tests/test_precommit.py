"""The pre-commit hooks, end to end: real `pre-commit` installs this checkout as a hook repository
(language: python, so it pip-installs the project and its dependencies) and runs it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
BAD = "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n\n\ndef forward():\n    return get_local_dp_buffer()\n"
GOOD = (
    "from sglang.srt.distributed import get_tp_group\n"
    "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n\n\n"
    "def forward():\n    out = get_local_dp_buffer(get_tp_group())\n    get_tp_group().all_reduce(out)\n    return out\n"
)
GIT = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false",
       "-c", "init.defaultBranch=main"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_hook_definitions() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["commgroup-lint", "commgroup-lint-fix"]
    assert hooks[0]["entry"] == "commgroup-lint check --force-exclude"
    assert hooks[1]["entry"] == "commgroup-lint check --fix --force-exclude"
    for hook in hooks:
        assert (hook["language"], hook["types"], hook["require_serial"]) == ("python", ["python"], True)


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A git repository holding this checkout's working tree (committed or not), and its rev."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout of commgroup-lint")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, check=True, capture_output=True).stdout.decode().split("\0")
    repo = tmp_path_factory.mktemp("hook-repo")
    for name in filter(None, listed):
        source = ROOT / name
        if name.startswith(("tests/", "benchmarks/", "examples/")) or not source.is_file():
            continue
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, repo / name)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "hook repository under test")
    return repo, git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


def project(tmp_path: Path, hook_repo: tuple[Path, str], hook_id: str, files: dict[str, str]) -> Path:
    repo, rev = hook_repo
    (tmp_path / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {repo}\n    rev: {rev}\n    hooks:\n      - id: {hook_id}\n"
    )
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    return tmp_path


def pre_commit(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never",
           "GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.com",
           "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.com"}
    return subprocess.run([sys.executable, "-m", "pre_commit", "run", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_check_hook_fails_on_a_finding_and_passes_after_the_fix(
        tmp_path: Path, hook_repo: tuple[Path, str], pre_commit_home: Path) -> None:
    cwd = project(tmp_path, hook_repo, "commgroup-lint", {"model.py": BAD, "notes.txt": "not python\n"})
    failed = pre_commit(cwd, pre_commit_home, "--all-files")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "commgroup-lint..........." in failed.stdout
    assert "- exit code: 1" in failed.stdout
    assert "model.py:5:12: CGL001 `get_local_dp_buffer` is called without its group argument `group`" in failed.stdout
    assert "Found 1 finding (1 file checked)." in failed.stdout

    (cwd / "model.py").write_text(GOOD)
    git(cwd, "add", "-A")
    passed = pre_commit(cwd, pre_commit_home, "--all-files")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout


def test_check_hook_honours_excludes_for_files_passed_by_name(
        tmp_path: Path, hook_repo: tuple[Path, str], pre_commit_home: Path) -> None:
    cwd = project(tmp_path, hook_repo, "commgroup-lint", {
        "model.py": BAD,
        "pyproject.toml": "[tool.commgroup-lint]\nexclude = ['model.py']\n",
    })
    result = pre_commit(cwd, pre_commit_home, "--all-files")
    assert result.returncode == 0, result.stdout + result.stderr


def test_try_repo_on_a_one_file_commit_catches_a_cross_file_bug(
        tmp_path: Path, hook_repo: tuple[Path, str], pre_commit_home: Path) -> None:
    """Only `user.py` is staged; the group its buffer reaches is decided in the committed `comm.py`:
    the hook sees the project as CI does (issue 15, item 2)."""
    repo, _ = hook_repo
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "comm.py").write_text(
        "from sglang.srt.layers.dp_attention import get_attention_tp_group\n\n\n"
        "def all_gather_attn_tp(output, input_):\n    get_attention_tp_group().all_gather_into_tensor(output, input_)\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "helpers")
    (tmp_path / "pkg" / "user.py").write_text(
        "from sglang.srt.distributed import get_tp_group\n"
        "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n"
        "from pkg.comm import all_gather_attn_tp\n\n\n"
        "def gather(x):\n    out = get_local_dp_buffer(get_tp_group())\n    all_gather_attn_tp(out, x)\n")
    git(tmp_path, "add", "pkg/user.py")
    env = {**os.environ, "PRE_COMMIT_HOME": str(pre_commit_home), "PRE_COMMIT_COLOR": "never"}
    result = subprocess.run([sys.executable, "-m", "pre_commit", "try-repo", str(repo), "commgroup-lint"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "pkg/user.py:7:11: CGL002 [*] memory from `get_local_dp_buffer` is bound to group tp but reaches" \
        in result.stdout
    assert "Found 1 finding (1 file checked)." in result.stdout


def _has_fix_option() -> bool:
    help_text = subprocess.run([sys.executable, "-m", "commgroup_lint", "check", "--help"],
                               capture_output=True, text=True).stdout
    return "--fix" in help_text


def test_fix_hook_runs(tmp_path: Path, hook_repo: tuple[Path, str], pre_commit_home: Path) -> None:
    if not _has_fix_option():
        pytest.skip("`commgroup-lint check --fix` does not exist yet (the fixer is being added)")
    cwd = project(tmp_path, hook_repo, "commgroup-lint-fix", {"model.py": BAD})
    result = pre_commit(cwd, pre_commit_home, "--all-files")
    assert "commgroup-lint (fix)......" in result.stdout
    assert result.returncode in (0, 1), result.stdout + result.stderr
    assert "exit code: 2" not in result.stdout, result.stdout
    rerun = pre_commit(cwd, pre_commit_home, "--all-files")
    assert "exit code: 2" not in rerun.stdout, rerun.stdout


def test_the_readmes_snippet_runs_against_a_local_clone(
        tmp_path: Path, hook_repo: tuple[Path, str], pre_commit_home: Path) -> None:
    """The README's `.pre-commit-config.yaml` as written, but for its repository (a `file://` clone
    of this checkout: no network in the tests) and `rev:` (that clone's commit, as the README asks)."""
    repo, rev = hook_repo
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    snippet = re.search(r"```yaml\n(repos:\n.*?)```", readme, re.DOTALL)
    assert snippet is not None
    config = snippet.group(1)
    assert "    rev: COMMIT\n" in config and "  - repo: https://github.com/commgroup-lint/commgroup-lint\n" in config
    config = config.replace("https://github.com/commgroup-lint/commgroup-lint", repo.as_uri()).replace(
        "rev: COMMIT", f"rev: {rev}")
    (tmp_path / ".pre-commit-config.yaml").write_text(config)
    (tmp_path / "model.py").write_text(BAD)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    failed = pre_commit(tmp_path, pre_commit_home, "--all-files")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "model.py:5:12: CGL001 `get_local_dp_buffer` is called without its group argument `group`" in failed.stdout
