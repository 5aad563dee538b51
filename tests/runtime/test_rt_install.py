"""``pip install .`` where no C compiler is, then ``COMMGROUP_LINT_RUNTIME=assert`` on a two-rank
gloo program: the shim comes up from the start-up hook alone, reports the wrong-group collective
on both ranks, and says nothing about building anything (it is plain Python)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("setuptools")

from rt_project import line_of, make_project, run_ranks  # noqa: E402
from rt_startup import PTH, build_wheel  # noqa: E402

pytestmark = pytest.mark.slow


def _environment_without_compilers(root: Path, wheel: Path) -> tuple[str, Path]:
    """A virtual environment with the wheel installed and torch reachable (a path line to this
    environment's site-packages), whose PATH holds its interpreter and nothing else."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-compile", "-q", "--target",
         str(site), str(wheel)], capture_output=True, text=True, timeout=300, env={**os.environ, "PATH": str(venv / "bin")})
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert (site / PTH).is_file()
    torch_site = Path(torch.__file__).parent.parent
    (site / "torch-from-tests.pth").write_text(f"{torch_site}\n")  # torch without this package's copy
    return str(python), venv / "bin"


def test_pip_install_without_a_compiler_then_assert_on_two_gloo_ranks(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    python, bin_dir = _environment_without_compilers(tmp_path, wheel)
    assert not any(shutil.which(cc, path=str(bin_dir)) for cc in ("cc", "gcc", "g++", "c++", "clang", "nvcc"))
    where = subprocess.run([python, "-c", "import commgroup_lint.runtime as r; print(r.__file__)"],
                           capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    assert where.startswith(str(tmp_path / "venv")), where  # the installed wheel, not this checkout
    project = make_project(tmp_path / "userproject")
    log = project / "runtime.jsonl"
    out = run_ranks(project, log, "cpu", mode="assert", python=python, PATH=str(bin_dir))
    # assert mode raises in both ranks after the collective ran: each rank exits non-zero
    assert out.returncode != 0
    assert "GroupMismatchError: CGL002 buffer bound to group 'tp'" in out.stderr
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted((r["code"], r["line"], r["collective_line"], r["rank"], r["mode"]) for r in records) == [
        ("CGL002", line_of("ALLOCATION"), line_of("WRONG GROUP"), rank, "assert") for rank in (0, 1)]
    assert all(r["path"].startswith(str(project)) for r in records)
    assert not [line for line in out.stderr.lower().splitlines() if "build" in line or "compil" in line], out.stderr
