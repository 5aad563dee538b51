"""``benchmarks/shim_samples.py``: the shim's own share of a sampled step, from collapsed stacks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

RAW = """\
<module> (run.py:3);DecoderLayer.forward (model.py:10);all_reduce (distributed_c10d.py:3068) 50
<module> (run.py:3);DecoderLayer.forward (model.py:10);checked.<locals>.collective (runtime/_check.py:64);(anonymous namespace)::check (commgroup_lint_allocator_hook.so) 3
<module> (run.py:3);DecoderLayer.forward (model.py:10);checked.<locals>.collective (runtime/_check.py:64);(anonymous namespace)::check (commgroup_lint_allocator_hook.so);all_reduce (distributed_c10d.py:3068) 20
<module> (run.py:3);DecoderLayer.forward (model.py:12);(anonymous namespace)::bound_exit (commgroup_lint_allocator_hook.so);(anonymous namespace)::close_frame (commgroup_lint_allocator_hook.so);0x7f00 (libpython3.12.so) 2
<module> (run.py:3);get_local_dp_buffer (commgroup_lint/runtime/_targets.py:250) 1
<module> (run.py:3);setup (run.py:1) 40
"""


def _split(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    raw = tmp_path / "raw.txt"
    raw.write_text(RAW)
    return subprocess.run([sys.executable, str(BENCHMARKS / "shim_samples.py"), str(raw), *args],
                          capture_output=True, text=True, timeout=60)


def test_own_samples_are_the_shims_frames_with_no_engine_frame_above(tmp_path: Path) -> None:
    out = _split(tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "samples in the step: 75; the shim's own: 5 (6.7%)",
        "by entry point:",
        "      3  checked.<locals>.collective",
        "      2  bound_exit",
        "by stack:",
        "      3  checked.<locals>.collective > check",
        "      2  bound_exit > close_frame > 0x7f00",
    ]


def test_a_step_never_sampled_is_an_error_that_names_the_option(tmp_path: Path) -> None:
    out = _split(tmp_path, "--step", "Model.forward")
    assert out.returncode == 1
    raw = tmp_path / "raw.txt"
    assert out.stderr == f"shim_samples: no sample of {raw} has Model.forward on its stack (see --step)\n"
