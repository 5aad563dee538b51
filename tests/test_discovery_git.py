"""Which files a run checks in a git project (issue 15, item 1): git's ignore rules by default
(`.gitignore` at every level, `.git/info/exclude`, the global excludes file), default excludes
that the configuration can replace or extend, what is always skipped, and `--show-files`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint.cli import main
from lintkit import FIXABLE, FIXED

BAD = "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n\n\ndef forward():\n    return get_local_dp_buffer()\n"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git work tree (a `.git` directory is what git and commgroup-lint look for), with a
    home and a configuration home of its own, so the user's global excludes stay out."""
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    work = tmp_path / "work"
    (work / ".git" / "info").mkdir(parents=True)
    monkeypatch.chdir(work)
    return work


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def shown(*args: str) -> list[str]:
    result = CliRunner().invoke(main, ["check", "--show-files", *args])
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def test_show_files_lists_what_would_be_checked(repo: Path) -> None:
    write(repo, {"b.py": "", "a.py": "", "pkg/c.py": "", "notes.txt": ""})
    assert shown() == ["./a.py", "./b.py", "./pkg/c.py"]
    assert shown("pkg", "a.py") == ["a.py", "pkg/c.py"]


def test_gitignore_is_respected_by_default(repo: Path) -> None:
    write(repo, {
        ".gitignore": "generated/\n*_pb2.py\n/top_only.py\n",
        "generated/model.py": BAD, "api_pb2.py": BAD, "top_only.py": "", "pkg/top_only.py": "", "pkg/kept.py": "",
    })
    assert shown() == ["./pkg/kept.py", "./pkg/top_only.py"]
    assert shown("--no-respect-gitignore") == [
        "./api_pb2.py", "./generated/model.py", "./pkg/kept.py", "./pkg/top_only.py", "./top_only.py",
    ]
    write(repo, {"pyproject.toml": "[tool.commgroup-lint]\nrespect-gitignore = false\n"})
    assert "./generated/model.py" in shown()
    assert "./generated/model.py" not in shown("--respect-gitignore")


def test_deeper_gitignore_files_and_negation(repo: Path) -> None:
    write(repo, {
        ".gitignore": "*.py\n!keep.py\n",
        "keep.py": "", "drop.py": "",
        "sub/.gitignore": "!*.py\nlocal.py\n",
        "sub/a.py": "", "sub/local.py": "",
    })
    assert shown() == ["./keep.py", "./sub/a.py"]


def test_info_exclude_and_the_global_excludes_file(repo: Path, tmp_path: Path) -> None:
    write(repo, {"a.py": "", "b.py": "", "c.py": ""})
    (repo / ".git" / "info" / "exclude").write_text("a.py\n")
    write(tmp_path / "home" / ".config" / "git", {"ignore": "b.py\n"})
    assert shown() == ["./c.py"]


def test_outside_a_work_tree_gitignore_means_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {".gitignore": "*.py\n", "a.py": ""})
    monkeypatch.chdir(tmp_path)
    assert shown() == ["./a.py"]


def test_fix_leaves_ignored_files_alone(repo: Path) -> None:
    write(repo, {".gitignore": "vendored/\n", "vendored/lib.py": FIXABLE, "mine.py": FIXABLE})
    result = CliRunner().invoke(main, ["check", "--fix", "--no-cache"])
    assert result.exit_code == 0, result.output
    assert (repo / "vendored" / "lib.py").read_text(encoding="utf-8") == FIXABLE
    assert (repo / "mine.py").read_text(encoding="utf-8") == FIXED


def test_named_files_are_checked_unless_force_exclude(repo: Path) -> None:
    write(repo, {".gitignore": "generated/\n", "generated/model.py": BAD})
    assert shown("generated/model.py") == ["generated/model.py"]
    assert shown("--force-exclude", "generated/model.py") == []


def test_default_excludes_can_be_replaced_or_extended(repo: Path) -> None:
    write(repo, {"build/gen.py": "", "dist/x.py": "", "src/a.py": "", "src/b_pb2.py": ""})
    assert shown() == ["./src/a.py", "./src/b_pb2.py"]
    write(repo, {"pyproject.toml": "[tool.commgroup-lint]\nextend-exclude = ['*_pb2.py']\n"})
    assert shown() == ["./src/a.py"]  # extend-exclude adds to the defaults: build and dist stay out
    write(repo, {"pyproject.toml": "[tool.commgroup-lint]\nexclude = ['dist']\n"})
    assert shown() == ["./build/gen.py", "./src/a.py", "./src/b_pb2.py"]  # exclude replaces them
    assert shown("--exclude", "src") == ["./build/gen.py", "./dist/x.py"]


def test_version_control_caches_and_virtual_environments_are_always_skipped(repo: Path) -> None:
    write(repo, {
        "pyproject.toml": "[tool.commgroup-lint]\nexclude = []\n",
        ".git/hooks/x.py": "", "__pycache__/a.py": "", "env/pyvenv.cfg": "", "env/lib/site.py": "",
        ".hg/y.py": "", ".commgroup_lint_cache/z.py": "", "a.py": "",
    })
    assert shown() == ["./a.py"]
