"""The shim reads and writes regular files only, within a size cap: a FIFO named in
``profile-files`` or as the runtime log, or a link to ``/dev/zero``, never hangs the program or
fills its memory. Each case runs in a subprocess under a timeout and a memory limit."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from rt_startup import startup_hook_installed  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs"),
    pytest.mark.skipif(not startup_hook_installed(), reason="the package is not installed with its start-up hook"),
]

PROGRAM = """\
import torch
import torch.distributed as dist
from commgroup_lint import runtime

dist.init_process_group("gloo", init_method="file://" + {store!r}, rank=0, world_size=1)
a, b = dist.new_group([0]), dist.new_group([0])
with runtime.simulated_symmetric_memory(a):
    buf = torch.ones(4)
    other = torch.ones(4)
dist.all_reduce(buf, group=b)
dist.all_reduce(other, group=b)  # a second violation: the log is not refused twice
print("done", len(runtime.violations()))
"""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def _run(project: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (project / "main.py").write_text(PROGRAM.format(store=str(project / "store")))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("COMMGROUP_LINT")}
    return subprocess.run([sys.executable, "main.py"], cwd=project, capture_output=True, text=True, timeout=120,
                          env={**clean, "COMMGROUP_LINT_RUNTIME": "report", **env}, preexec_fn=_limit_memory)


def _say(line: str) -> str:
    return f"commgroup-lint runtime: {line}"


def _special(path: Path, kind: str) -> Path:
    """``path`` made a FIFO, or a link to ``/dev/zero``."""
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    return path


def _ran(out: subprocess.CompletedProcess[str]) -> None:
    """The program finished, its two violations found."""
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == "done 2\n"


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_a_profile_file_that_is_no_regular_file_is_dropped(tmp_path: Path, kind: str) -> None:
    special = _special(tmp_path / "engine.toml", kind)
    (tmp_path / "pyproject.toml").write_text('[tool.commgroup-lint]\nprofile-files = ["engine.toml"]\n')
    out = _run(tmp_path)
    _ran(out)
    assert _say(f"{tmp_path / 'pyproject.toml'}: key 'profile-files': {special} is not a regular file; "
                "name regular TOML files; dropped profile file 'engine.toml'") in out.stderr


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_a_log_that_is_no_regular_file_is_refused_once(tmp_path: Path, kind: str) -> None:
    log = _special(tmp_path / "runtime.jsonl", kind)
    out = _run(tmp_path, COMMGROUP_LINT_RUNTIME_LOG=str(log))
    _ran(out)
    refused = _say(f"cannot write the runtime log {log}: {log} is not a regular file; "
                   "name a regular file in COMMGROUP_LINT_RUNTIME_LOG")
    assert out.stderr.count(refused) == 1, out.stderr


def test_reading_a_special_log_gives_nothing(tmp_path: Path) -> None:
    from commgroup_lint.runtime import _log

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert _log.read(str(fifo)) == ([], 0)
    assert _log.read("/dev/zero") == ([], 0)
