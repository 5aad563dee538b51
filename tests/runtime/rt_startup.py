"""Where the start-up hook is: tests that need it skip where the package was not installed."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
from pathlib import Path

PTH = "commgroup_lint_runtime.pth"
REPO = Path(__file__).resolve().parents[2]


def build_wheel(tmp_path: Path, hook: str = "build_wheel") -> Path:
    """A wheel of this checkout (``hook``: ``build_wheel`` or ``build_editable``), built from a
    copy of the files a source distribution holds."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", PTH, "README.md"):
        shutil.copy(REPO / name, source / name)
    for name in ("commgroup_lint", "rules", "runtime"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = subprocess.run(
        [sys.executable, "-c", f"import sys; from setuptools import build_meta; print(build_meta.{hook}(sys.argv[1]))",
         str(tmp_path / "dist")],
        cwd=source, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return tmp_path / "dist" / out.stdout.split()[-1]


def startup_hook_installed() -> bool:
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    return any((Path(d) / PTH).is_file() for d in dirs)
