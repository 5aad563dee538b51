"""How a cold check's time grows: with allocator calls in one file, and with files in a tree.

    python benchmarks/scaling.py                      # both curves, in a temporary directory
    python benchmarks/scaling.py --work DIR --repeat 3
    python benchmarks/scaling.py --calls 1000 2000 --files 5000 10000

Each point is a `check --no-cache` in a fresh interpreter (the median of `--repeat` runs).
Printed per curve: the size, the seconds, and the ratio to the previous point per doubling of
the size (`(t2 / t1) ** (1 / log2(n2 / n1))`): 2.0 is linear, 4.0 quadratic. The target is
within 1.5x of linear (a ratio of at most 3.0). Not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

IMPORT = "from sglang.srt.layers.dp_attention import dp_scatter, get_local_dp_buffer\n"


def one_file(calls: int) -> str:
    """`calls` allocations that forgot their group, in methods whose sibling call sites show
    none (each finding asks for the candidates and the siblings' convention)."""
    methods = "".join(f"    def scatter_{i}(self, x, batch):\n        local = get_local_dp_buffer()\n"
                      "        dp_scatter(local, x, batch)\n\n" for i in range(calls))
    return IMPORT + "\n\nclass Communicator:\n" + methods


def tree_file(i: int) -> str:
    """A module defining an allocator helper of its own (a new gate word per file: the words to
    search for grow with the tree) and calling it without a group."""
    return (IMPORT + f"\n\ndef buffer_{i}(group):\n    return get_local_dp_buffer(group)\n"
            f"\n\ndef forward_{i}():\n    return buffer_{i}(None)\n")


def timed(root: Path, target: str, repeat: int) -> float:
    """The median wall seconds of `check --no-cache` on `target` under `root`."""
    command = [sys.executable, "-m", "commgroup_lint", "check", "--no-cache", "-q", "--exit-zero", target]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            sys.exit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return statistics.median(times)


def curve(title: str, points: list[tuple[int, float]]) -> None:
    print(f"\n{title}")
    print(f"{'size':>8} {'seconds':>9} {'per doubling':>13}")
    for (n, t), previous in zip(points, [None, *points[:-1]]):
        ratio = ""
        if previous is not None and previous[1] > 0:
            ratio = f"{(t / previous[1]) ** (1 / math.log2(n / previous[0])):.2f}x"
        print(f"{n:>8} {t:>9.2f} {ratio:>13}")
    sys.stdout.flush()


def calls_curve(work: Path, sizes: list[int], repeat: int) -> list[tuple[int, float]]:
    points = []
    for calls in sizes:
        root = work / f"calls{calls}"
        root.mkdir()
        (root / "m.py").write_text(one_file(calls), encoding="utf-8")
        points.append((calls, timed(root, "m.py", repeat)))
    return points


def files_curve(work: Path, sizes: list[int], repeat: int) -> list[tuple[int, float]]:
    points = []
    for files in sizes:
        root = work / f"files{files}"
        (root / "pkg").mkdir(parents=True)
        (root / "pkg" / "__init__.py").write_text("", encoding="utf-8")
        for i in range(files):
            (root / "pkg" / f"m{i}.py").write_text(tree_file(i), encoding="utf-8")
        points.append((files, timed(root, ".", repeat)))
        shutil.rmtree(root)  # tens of thousands of files: not kept for the next size
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="where the generated inputs go (default: a temporary directory)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--calls", type=int, nargs="*", default=[1000, 2000, 4000, 8000])
    parser.add_argument("--files", type=int, nargs="*", default=[5000, 10000, 20000])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.work) as scratch:
        work = Path(scratch)
        if args.calls:
            curve("allocator calls in one file", calls_curve(work, args.calls, args.repeat))
        if args.files:
            curve("files in one tree", files_curve(work, args.files, args.repeat))


if __name__ == "__main__":
    main()
