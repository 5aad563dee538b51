"""commgroup-lint against ruff on one tree: cold, warm and one-file-changed, side by side.

    python benchmarks/bench.py TREE                     # e.g. the `sglang` folder of a release
    python benchmarks/bench.py --sglang 0.5.23          # pip-downloads the wheel, unzips it
    python benchmarks/bench.py TREE --linearity SMALL_TREE

The tree is copied into a temporary directory (the one-file run edits a file). Each
measurement is repeated `--repeat` times (default 3), the two tools alternating run by run so
that a load on the machine weighs on both alike; medians are printed, with the peak memory of
the largest process of a cold run (its `ru_maxrss`, from `os.wait4`: commgroup-lint's forked
child counts as a process of its own). ruff runs `--isolated --select ALL` (no configuration
of the tree's): cold with `--no-cache`, warm with its cache. Needs `ruff` on PATH
(`pip install ruff`). POSIX only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

CGL = [sys.executable, "-m", "commgroup_lint", "check", "-q"]
RUFF = ["ruff", "check", "--isolated", "--select", "ALL", "-q", "--exit-zero"]


def run(command: list[str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one command: the `ru_maxrss` of its process, which
    covers the largest of it and the children it waited for."""
    start = time.perf_counter()
    child = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    errors = child.stderr.read()  # drained before waiting: a full pipe would block the child
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} failed ({child.returncode}): {errors[-2000:].decode(errors='replace')}")
    return elapsed, usage.ru_maxrss / 1024


def alternating(commands: dict[str, list[str]], cwd: Path, repeat: int,
                before: Callable[[], None] | None = None) -> dict[str, list[tuple[float, float]]]:
    """Each command `repeat` times, one after the other in turn: (seconds, MB) of each run."""
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, command in commands.items():
            if before is not None:
                before()
            runs[name].append(run(command, cwd))
    return runs


def clear_caches(tree: Path) -> None:
    for name in (".commgroup_lint_cache", ".ruff_cache"):
        shutil.rmtree(tree / name, ignore_errors=True)


def median(runs: list[tuple[float, float]], at: int = 0) -> float:
    return statistics.median(r[at] for r in runs)


def measure(tree: Path, repeat: int) -> dict[str, float]:
    files = sum(1 for _ in tree.rglob("*.py"))
    target = max(tree.rglob("*.py"), key=lambda p: ("dp_attention" in p.name, p.stat().st_size))
    original = target.read_bytes()
    counter = [0]

    def touch() -> None:  # a real content change, so a content-hash cache must notice it
        counter[0] += 1
        target.write_bytes(original + f"\n# bench edit {counter[0]}\n".encode())

    r: dict[str, float] = {"files": files}
    try:
        cold = alternating({"cgl": [*CGL, "--no-cache", "."], "ruff": [*RUFF, "--no-cache", "."]}, tree, repeat)
        clear_caches(tree)
        run([*CGL, "."], tree)
        run([*RUFF, "."], tree)
        warm = alternating({"cgl": [*CGL, "."], "ruff": [*RUFF, "."]}, tree, repeat)
        one = alternating({"cgl": [*CGL, "."], "ruff": [*RUFF, "."]}, tree, repeat, touch)
    finally:
        target.write_bytes(original)
    for key, runs in (("cold", cold), ("warm", warm), ("one", one)):
        for tool in ("cgl", "ruff"):
            r[f"{tool}_{key}"] = median(runs[tool])
    r["cgl_cold_mem"], r["ruff_cold_mem"] = median(cold["cgl"], 1), median(cold["ruff"], 1)
    r["cgl_warm_mem"] = median(warm["cgl"], 1)
    return r


def report(name: str, r: dict[str, float]) -> None:
    print(f"\n{name}: {int(r['files'])} Python files, medians of the runs")
    print(f"{'':16}{'commgroup-lint':>16}{'ruff ALL':>12}{'ratio':>8}")
    for label, key in (("cold (no cache)", "cold"), ("warm", "warm"), ("one file changed", "one")):
        c, f = r[f"cgl_{key}"], r[f"ruff_{key}"]
        print(f"{label:16}{c:>14.2f} s{f:>10.2f} s{c / f:>8.2f}")
    print(f"{'peak memory':16}{r['cgl_cold_mem']:>13.0f} MB{r['ruff_cold_mem']:>9.0f} MB   (cold; warm {r['cgl_warm_mem']:.0f} MB)")
    print(f"targets: cold <= 0.75 of ruff's cold run ({r['cgl_cold'] / r['ruff_cold']:.2f}), "
          f"warm <= 0.15 of it ({r['cgl_warm'] / r['ruff_cold']:.2f})")


def fetch_sglang(version: str, into: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(into),
                    f"sglang=={version}"], check=True)
    wheel = next(into.glob("sglang-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        z.extractall(into / "unpacked")
    return into / "unpacked" / "sglang"


def copy_tree(src: Path, into: Path) -> Path:
    dst = into / src.name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".commgroup_lint_cache", ".ruff_cache", "__pycache__"))
    return dst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", nargs="?", type=Path)
    parser.add_argument("--sglang", metavar="VERSION", help="download this SGLang release instead of TREE")
    parser.add_argument("--linearity", type=Path, metavar="SMALL_TREE",
                        help="also time a smaller tree (e.g. SGLang 0.5.8) and compare time per file")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if (args.tree is None) == (args.sglang is None):
        parser.error("give a TREE or --sglang VERSION")
    if shutil.which("ruff") is None:
        sys.exit("ruff is not on PATH: pip install ruff")
    with tempfile.TemporaryDirectory(prefix="cgl-bench-") as tmp:
        base = Path(tmp)
        source = fetch_sglang(args.sglang, base / "dl") if args.sglang else args.tree
        tree = copy_tree(source, base / "big")
        print(f"{os.cpu_count()} cores; {sys.version.split()[0]}; "
              f"{subprocess.run(['ruff', '--version'], capture_output=True, text=True).stdout.strip()}")
        big = measure(tree, args.repeat)
        report(str(source), big)
        if args.linearity:
            small_tree = copy_tree(args.linearity, base / "small")
            small_runs = alternating({"cgl": [*CGL, "--no-cache", "."], "ruff": [*RUFF, "--no-cache", "."]},
                                     small_tree, args.repeat)
            small = {"files": sum(1 for _ in small_tree.rglob("*.py")),
                     "cgl_cold": median(small_runs["cgl"]), "ruff_cold": median(small_runs["ruff"])}
            print(f"\nlinearity (cold, ms per file): {args.linearity}: {int(small['files'])} files")
            for tool in ("cgl", "ruff"):
                a = small[f"{tool}_cold"] / small["files"] * 1000
                b = big[f"{tool}_cold"] / big["files"] * 1000
                print(f"  {tool:5} {a:6.2f} ms/file -> {b:6.2f} ms/file  (x{b / a:.2f} per file for "
                      f"x{big['files'] / small['files']:.2f} files)")


if __name__ == "__main__":
    main()
