"""The runtime shim's own share of a sampled step, from a sampling profiler's raw stacks.

    py-spy record --native --gil -r 40 -f raw -o shim.txt -- python benchmarks/runtime_profile.py --steady 40
    python benchmarks/shim_samples.py shim.txt [--step DecoderLayer.forward] [--top 20]

Reads collapsed stacks (one ``frame;frame;... count`` per line, outermost first, as py-spy's
``-f raw`` writes them). A sample is in the step when a frame of the ``--step`` function is on
its stack; it is the shim's own when it has a frame of the shim (its Python modules, or the
allocation hook's extension) and no Python frame above the last of them: the shim's code and
the C it calls, not the engine's code it calls (a collective's body, a context's ``__enter__``).
Prints the step's samples, the shim's own share of them, and that share by the shim's entry
point (its outermost frame) and by stack below it.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys

_PYTHON_FRAME = re.compile(r"\((?P<file>[^()]*\.py):\d+\)$")
_EXTENSION = "commgroup_lint_allocator_hook"
_RUNTIME = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runtime")


def _shim_files() -> set[str]:
    """The shim's modules, as ``runtime/<name>.py`` (how a profiler names an editable install's
    files; an installed one ends the same way under ``commgroup_lint/``)."""
    return {f"runtime/{name}" for name in os.listdir(_RUNTIME) if name.endswith(".py")}


def _is_shim(frame: str, files: set[str]) -> bool:
    if _EXTENSION in frame:
        return True
    found = _PYTHON_FRAME.search(frame)
    return found is not None and any(found["file"].endswith(name) for name in files)


def _name(frame: str) -> str:
    return frame.split(" (")[0].replace("(anonymous namespace)::", "")


def split(lines: list[str], step: str) -> tuple[int, int, collections.Counter, collections.Counter]:
    """(samples in the step, the shim's own among them, own by entry point, own by stack)."""
    files = _shim_files()
    in_step = own = 0
    by_entry: collections.Counter = collections.Counter()
    by_stack: collections.Counter = collections.Counter()
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames, n = stack.split(";"), int(count)
        if not any(_name(f) == step for f in frames):
            continue
        in_step += n
        shim = [i for i, f in enumerate(frames) if _is_shim(f, files)]
        if not shim or any(_PYTHON_FRAME.search(f) for f in frames[shim[-1] + 1:]):
            continue
        own += n
        by_entry[_name(frames[shim[0]])] += n
        by_stack[" > ".join(_name(f) for f in frames[shim[0]:])] += n
    return in_step, own, by_entry, by_stack


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw", help="the profiler's collapsed stacks (py-spy record -f raw)")
    parser.add_argument("--step", default="DecoderLayer.forward", help="the step's function, as the profiler names it")
    parser.add_argument("--top", type=int, default=20, help="stacks listed")
    ns = parser.parse_args()
    try:
        with open(ns.raw, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError as exc:
        sys.exit(f"shim_samples: cannot read {ns.raw}: {exc.strerror}")
    in_step, own, by_entry, by_stack = split(lines, ns.step)
    if not in_step:
        sys.exit(f"shim_samples: no sample of {ns.raw} has {ns.step} on its stack (see --step)")
    print(f"samples in the step: {in_step}; the shim's own: {own} ({own / in_step * 100:.1f}%)")
    print("by entry point:")
    for name, n in by_entry.most_common():
        print(f"  {n:5d}  {name}")
    print("by stack:")
    for stack, n in by_stack.most_common(ns.top):
        print(f"  {n:5d}  {stack}")


if __name__ == "__main__":
    main()
