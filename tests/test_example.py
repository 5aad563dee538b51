"""The bundled example (`examples/dp_attention`), checked exactly as the README's first command does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXE = shutil.which("commgroup-lint", path=str(Path(sys.executable).parent)) or shutil.which("commgroup-lint")

# One instance of each bug the example holds (CGL001 twice: both DeepSeek-V4 buffers miss it;
# the hidden-group helper's caller is its CGL002).
EXPECTED = [
    ("examples/dp_attention/deepseek_v4_forward.py", 23, 50, "CGL001"),
    ("examples/dp_attention/deepseek_v4_forward.py", 27, 51, "CGL001"),
    ("examples/dp_attention/layer_communicator.py", 34, 25, "CGL004"),
    ("examples/dp_attention/layer_communicator.py", 39, 20, "CGL002"),
    ("examples/dp_attention/legacy_buffers.py", 10, 1, "CGL003"),
    ("examples/dp_attention/legacy_buffers.py", 17, 16, "CGL002"),
]


def test_bundled_example_reports_each_bug() -> None:
    proc = subprocess.run([EXE, "check", "--format", "json", "examples/dp_attention"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    found = [(f["path"], f["line"], f["column"], f["code"]) for f in json.loads(proc.stdout)]
    assert found == EXPECTED


def test_bundled_example_text_summary() -> None:
    proc = subprocess.run([EXE, "check", "examples/dp_attention"], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == 1
    assert proc.stdout.endswith(
        f"Found {len(EXPECTED)} findings (4 files checked).\n"
        "[*] 3 fixable with `--fix` (1 unsafe fix available with `--fix --unsafe-fixes`).\n"
    )
