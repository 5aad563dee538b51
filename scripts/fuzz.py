#!/usr/bin/env python3
"""Fuzz the engine (and `--fix`) outside CI, as tests/test_fuzz.py does, for longer.

    python scripts/fuzz.py --count 10000 --seed 0 --jobs 8
    python scripts/fuzz.py --seconds 600 --failures fuzz-failures/

Seeds run from --seed upward; each seed gives one pysource-codegen program and one mutated
example/fixture file (both mutated with allocator and collective insertions), the latter also
under a hostile file name through every reporter; every 10th seed a long `if`/`elif` chain,
and every 50th a tree of non-regular files (a FIFO, a link to /dev/zero, ...) checked by the
command under a time and memory limit (`--no-trees` to skip). Prints the numbers of programs,
findings and failures; every failing input is saved to --failures. Exits 1 if anything failed.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import fuzzkit  # noqa: E402


def run_seed(seed: int, fix: bool = True, trees: bool = True) -> fuzzkit.Outcome:
    total = fuzzkit.Outcome()
    for source in ("generated", "corpus"):
        program = fuzzkit.program_for(seed, source)
        if program is not None:
            total.add(fuzzkit.check_program(program, fix=fix))
    total.add(fuzzkit.shapes_for(seed, trees=trees))
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=None, help="stop after this many programs (default: 10000 "
                                                                  "unless --seconds is given)")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this much time")
    parser.add_argument("--seed", type=int, default=0, help="first seed (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=multiprocessing.cpu_count(), help="worker processes")
    parser.add_argument("--failures", type=Path, default=Path("fuzz-failures"),
                        help="directory for failing inputs (default: %(default)s)")
    parser.add_argument("--no-fix", action="store_true", help="check the engine only, not --fix")
    parser.add_argument("--no-trees", action="store_true", help="skip the trees of non-regular files")
    args = parser.parse_args(argv)
    if args.count is None and args.seconds is None:
        args.count = 10_000
    started = time.monotonic()
    total = fuzzkit.Outcome()
    seeds = iter(range(args.seed, 2**62))
    last_print = started
    with multiprocessing.Pool(args.jobs) as pool:
        for outcome in pool.imap(functools.partial(run_seed, fix=not args.no_fix, trees=not args.no_trees), seeds, chunksize=8):
            total.add(outcome)
            for kind, detail, program in outcome.failures:
                args.failures.mkdir(parents=True, exist_ok=True)
                n = len(list(args.failures.glob("*.py")))
                (args.failures / f"failure_{n:05d}.py").write_text(f"# {kind}: {detail}\n{program}", encoding="utf-8")
            now = time.monotonic()
            if now - last_print > 30:
                last_print = now
                print(f"  {total.programs} programs, {len(total.failures)} failures, {now - started:.0f}s", flush=True)
            if (args.count is not None and total.programs >= args.count) or \
               (args.seconds is not None and now - started >= args.seconds):
                pool.terminate()
                break
    elapsed = time.monotonic() - started
    print(f"programs: {total.programs} (parsed: {total.parsed}), seeds from {args.seed}, {elapsed:.0f}s")
    print("findings: " + (", ".join(f"{c} {n}" for c, n in sorted(total.findings.items())) or "none"))
    print(f"fixed files checked: {total.fixed_files}")
    print(f"failures: {len(total.failures)}" + ("" if not total.failures else f" (saved under {args.failures}/)"))
    for kind, n in Counter(k for k, _, _ in total.failures).most_common():
        print(f"  {kind}: {n}")
    return 1 if total.failures else 0


if __name__ == "__main__":
    sys.exit(main())
