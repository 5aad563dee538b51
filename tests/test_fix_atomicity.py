"""`--fix` killed with SIGKILL at random moments (issue 8): every file is afterwards
byte-identical to its original or to its fully fixed form, never a mix or a truncation, and
a second `--fix` completes the job and removes the temporary files the killed one left."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL"),
              pytest.mark.slow]  # kills a `--fix` process at random moments: most of a minute

FILES = 150
KILLS = 5

TEMPLATE = '''"""Module {i}: {pad}"""
from sglang.srt.distributed import get_tp_group
from sglang.srt.layers.dp_attention import get_attention_tp_group, get_local_dp_buffer


def forward_{i}(x):
    # the buffer below misses its group
    buf = get_local_dp_buffer()  # keep me {i}
    {group}().all_reduce(buf)
    return buf


def other_{i}(y):
    tmp = get_local_dp_buffer(
        # a comment inside the call
    )
    get_tp_group().all_reduce(tmp)
    return tmp
'''


def fix_command(tree: Path) -> list[str]:
    return [sys.executable, "-m", "commgroup_lint", "check", "--fix", "--quiet", str(tree)]


def make_tree(root: Path) -> dict[str, bytes]:
    root.mkdir()
    originals = {}
    for i in range(FILES):
        group = "get_tp_group" if i % 2 else "get_attention_tp_group"
        text = TEMPLATE.format(i=i, group=group, pad="x" * (i * 97 % 4000))
        data = text.encode() if i % 3 else text.replace("\n", "\r\n").encode()
        name = f"pkg{i % 5}/mod_{i}.py"
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_bytes(data)
        originals[name] = data
    return originals


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.py")}


def test_sigkill_during_fix_leaves_every_file_original_or_fixed(tmp_path: Path) -> None:
    originals = make_tree(tmp_path / "original")
    reference = tmp_path / "reference"
    shutil.copytree(tmp_path / "original", reference)
    started = time.monotonic()
    done = subprocess.run(fix_command(reference), capture_output=True, text=True, timeout=300)
    full = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    fixed = snapshot(reference)
    assert set(fixed) == set(originals)
    assert all(fixed[n] != originals[n] for n in originals)  # every file has a fix

    rng = random.Random(8)
    for attempt in range(KILLS):
        tree = tmp_path / f"killed{attempt}"
        shutil.copytree(tmp_path / "original", tree)
        proc = subprocess.Popen(fix_command(tree), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.1, 1.0) * full)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        after = snapshot(tree)
        assert set(after) == set(originals), f"attempt {attempt}: files appeared or vanished"
        torn = [n for n in originals if after[n] not in (originals[n], fixed[n])]
        assert not torn, f"attempt {attempt}: neither original nor fixed: {torn[:5]}"
        leftovers = [p.name for p in tree.rglob("*") if p.is_file() and not p.name.endswith(".py")]
        assert all(n.startswith(".") and n.endswith(".tmp") for n in leftovers), leftovers
        # a second run finishes the job
        again = subprocess.run(fix_command(tree), capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stdout + again.stderr
        assert snapshot(tree) == fixed
        # and removes what the killed one left (issue 35 item 17)
        assert [p.name for p in tree.rglob("*") if p.is_file() and not p.name.endswith(".py")] == []
