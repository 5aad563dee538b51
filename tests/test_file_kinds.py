"""Only regular files are read, and never more than a size cap (issue 35, items 4 and 5): a
FIFO never hangs a run and `/dev/zero` never exhausts memory, wherever the checked tree or
its configuration puts one (a `*.py` file, an ignore file, git's excludes file, the
configuration, a `profile-files` entry).

Each run is a subprocess with a timeout and an address-space limit, so a regression fails
(a hang times out, an endless read hits `MemoryError`) rather than stopping the suite.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"),
                                reason="needs FIFOs and /dev/zero")

SOURCE = ("from sglang.srt.layers.dp_attention import get_local_dp_buffer\n\n\n"
          "def forward():\n    return get_local_dp_buffer()\n")
MEMORY = 2 << 30


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def check(cwd: Path, *args: str) -> tuple[int, list[tuple], str]:
    done = subprocess.run([sys.executable, "-m", "commgroup_lint", "check", "--format", "json", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=60, preexec_fn=limited,
                          env={**os.environ, "NO_COLOR": "1"})
    assert "Traceback" not in done.stderr, done.stderr
    findings = json.loads(done.stdout) if done.stdout.strip() else []
    return done.returncode, [(f["path"].removeprefix("./"), f["code"], f["message"]) for f in findings], done.stderr


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "good.py").write_text(SOURCE)
    return root


GOOD = ("good.py", "CGL001", "`get_local_dp_buffer` is called without its group argument `group`")


def good_only(findings: list[tuple]) -> list[tuple]:
    return [(path, code, message.split(" (no fix:")[0].split(" (fix:")[0]) for path, code, message in findings]


@pytest.mark.parametrize("named", [False, True], ids=["walked", "named"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link"])
def test_a_python_file_that_is_not_regular(tree: Path, kind: str, named: bool) -> None:
    if kind == "fifo":
        os.mkfifo(tree / "pipe.py")
        name, reason = "pipe.py", "is a FIFO, not a regular file; not read"
    else:
        (tree / "zero.py").symlink_to("/dev/zero")
        name, reason = "zero.py", "is a character device, not a regular file; not read"
    rc, findings, stderr = check(tree, *([name, "good.py"] if named else ["."]))
    assert good_only(findings) == sorted([GOOD, (name, "CGL000", reason)])
    assert rc == 1 and stderr == ""


@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link"])
@pytest.mark.parametrize("where", [".gitignore", ".git/info/exclude", "core.excludesFile"])
def test_an_ignore_file_that_is_not_regular_is_no_patterns(tree: Path, tmp_path: Path, kind: str, where: str) -> None:
    (tree / ".git" / "info").mkdir(parents=True)
    if where == "core.excludesFile":
        path = tmp_path / "excludes"
        (tree / ".git" / "config").write_text(f"[core]\n\texcludesFile = {path}\n")
    else:
        path = tree / where
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    rc, findings, stderr = check(tree, ".")
    assert good_only(findings) == [GOOD]
    assert rc == 1 and stderr == ""


@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link"])
def test_a_profile_file_that_is_not_regular_is_an_error(tree: Path, kind: str) -> None:
    (tree / "pyproject.toml").write_text('[tool.commgroup-lint]\nprofile-files = ["engine.toml"]\n')
    if kind == "fifo":
        os.mkfifo(tree / "engine.toml")
        what = "a FIFO"
    else:
        (tree / "engine.toml").symlink_to("/dev/zero")
        what = "a character device"
    rc, findings, stderr = check(tree, ".")
    assert rc == 2 and findings == []
    assert f"cannot read '{tree / 'engine.toml'}': is {what}, not a regular file" in stderr
    assert len(stderr.splitlines()) == 1


def test_a_configuration_that_is_a_fifo(tree: Path) -> None:
    """Found upward, a FIFO is not a configuration; named with `--config`, it is an error."""
    os.mkfifo(tree / "pyproject.toml")
    rc, findings, stderr = check(tree, ".")
    assert good_only(findings) == [GOOD] and rc == 1 and stderr == ""
    os.mkfifo(tree / "commgroup-lint.toml")
    rc, findings, stderr = check(tree, "--config", "commgroup-lint.toml", ".")
    assert rc == 2 and findings == []
    assert len(stderr.splitlines()) == 1 and "commgroup-lint.toml" in stderr


def test_a_cache_file_that_is_a_fifo_or_dev_zero_is_ignored(tree: Path) -> None:
    (tree / "pyproject.toml").write_text("[tool.commgroup-lint]\n")
    check(tree, ".")
    folder = tree / ".commgroup_lint_cache"
    (cache,) = folder.glob("*.pickle")
    for make in (os.mkfifo, lambda p: p.symlink_to("/dev/zero")):
        cache.unlink()
        make(cache)
        rc, findings, stderr = check(tree, ".")
        assert good_only(findings) == [GOOD] and rc == 1
        assert len(stderr.splitlines()) == 1 and stderr.startswith("warning: ignoring the cache file")
        assert cache.is_file() and not cache.is_symlink()  # replaced by a real cache
