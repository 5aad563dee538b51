"""``benchmarks/shim_instructions.py``: the instructions the shim adds per event, from callgrind's
counts (a stand-in ``valgrind`` here, which reports a count for each run it is given)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "shim_instructions.py"
# Collects 3,000 instructions from a run under the shim, 2,000 from a plain one, as callgrind
# reports them (on stderr); checks that it was asked to collect only the loop.
FAKE_VALGRIND = """#!/bin/sh
case "$*" in *--toggle-collect=starmap_next*) ;; *) echo "not the loop" >&2; exit 9;; esac
case "$*" in *" shim "*) n=3000;; *) n=2000;; esac
echo "==1== Collected : $n" >&2
"""


def _run(tmp_path: Path, *args: str, valgrind: str | None = FAKE_VALGRIND) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if valgrind is not None:
        fake = bin_dir / "valgrind"
        fake.write_text(valgrind)
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    path = os.pathsep.join([str(bin_dir), *(p for p in os.environ.get("PATH", "").split(os.pathsep)
                                             if valgrind is not None or not (Path(p) / "valgrind").exists())])
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PATH": path})


def test_an_unknown_event_is_a_usage_error(tmp_path: Path) -> None:
    out = _run(tmp_path, "--events", "context,nope")
    assert out.returncode == 2
    assert "unknown events: nope (known: context, group, torch)" in out.stderr


def test_without_valgrind_it_says_so(tmp_path: Path) -> None:
    out = _run(tmp_path, valgrind=None)
    assert out.returncode == 2
    assert out.stderr.strip() == ("shim_instructions: valgrind is not installed (it counts the instructions); "
                                  "install it and run again")


def test_the_table_is_the_counts_per_call(tmp_path: Path, cpu_extension) -> None:
    out = _run(tmp_path, "--calls", "10", "--events", "group,context", "--extension", cpu_extension.__file__)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "instructions per event, warm, 10 calls counted (callgrind; CPU build of the extension)",
        f"{'event':58} {'plain':>9} {'shim':>9} {'added':>8}",
        f"{'group class' + chr(39) + 's all_reduce, bound buffer':58} {200:9} {300:9} {'+100':>8}",
        f"{'profile context over a pool context, one block handed out':58} {200:9} {300:9} {'+100':>8}",
    ]


def test_a_failed_run_is_reported_with_its_output(tmp_path: Path, cpu_extension) -> None:
    out = _run(tmp_path, "--events", "torch", "--extension", cpu_extension.__file__,
               valgrind="#!/bin/sh\necho 'no such tool' >&2\nexit 1\n")
    assert out.returncode == 1
    assert out.stderr.strip().endswith("the plain run of 'torch' failed (exit 1):\nno such tool")


def test_a_missing_extension_is_a_usage_error(tmp_path: Path) -> None:
    out = _run(tmp_path, "--extension", str(tmp_path / "none.so"))
    assert out.returncode == 2
    assert f"--extension: no such file: {tmp_path / 'none.so'}" in out.stderr
