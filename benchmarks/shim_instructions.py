"""The instructions the runtime shim adds per event, counted by callgrind: exact where timings are not.

    python benchmarks/shim_instructions.py [--calls 200] [--events context,group,torch] [--extension SO]

A step's time on the GPU moves by tens of microseconds between rounds and machines, more than
a change to the shim's fast paths saves; the instructions an event executes do not move. This
builds the allocation hook's extension for the CPU (the CUDA allocator played by the caller,
as the CPU tests do: ``tests/runtime/native_build.py``; ``--extension`` counts one built
before, to compare two builds), then, for each event of the smoke
step's path on the stand-in engine of ``runtime_overhead.py --in-process`` (a profile context
entering a pool context inside and handing out one block; a collective through a group
class's method; a ``torch.distributed`` collective), runs it warm ``--calls`` times plain and
under the shim (warn mode) under ``valgrind --tool=callgrind``, collecting only those calls.
Prints the instructions per event, plain and with the shim, and the difference.

Instructions are not time: in a model's step the shim's cost is mostly cache misses, which
scale with the memory an event touches (Python frames and attribute lookups touch much). But
an instruction saved is never a regression, and a figure that does not move tells one change
from the next. Needs valgrind and a C++ compiler; exits 2 with a message without them.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
EVENTS = {
    "context": "profile context over a pool context, one block handed out",
    "group": "group class's all_reduce, bound buffer",
    "torch": "torch.distributed.all_reduce, bound buffer",
}
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")
# The loop whose calls are counted runs inside this C function, and nothing else of the run does.
_LOOP = "starmap_next"


def _child(event: str, side: str, calls: int, extension: str) -> None:
    """Run ``event`` warm, then ``calls`` times inside ``_LOOP`` (what callgrind collects)."""
    import importlib.machinery
    import importlib.util

    sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "runtime")]
    import torch
    import torch.distributed as dist
    from native_build import NAME, play_allocator
    from runtime_overhead import _stand_in_engine
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from commgroup_lint import runtime

    loader = importlib.machinery.ExtensionFileLoader(NAME, extension)
    native = importlib.util.module_from_spec(importlib.util.spec_from_file_location(NAME, extension, loader=loader))
    loader.exec_module(native)
    event_call = play_allocator(native)
    os.chdir(_stand_in_engine())  # the shim reads the stand-in's configuration
    sys.path.insert(0, os.getcwd())
    import cglbench

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    group = dist.new_group([0, 1])
    coordinator = cglbench.Coordinator(group)
    buf = torch.ones(256)
    block = (buf.data_ptr(), buf.untyped_storage().nbytes())

    def context() -> None:  # the block handed out and freed again, as in every step
        with cglbench.use_symmetric_memory(coordinator):
            event_call(1, *block)
        event_call(0, *block)

    run = {"context": context, "group": lambda: coordinator.all_reduce(buf),
           "torch": lambda: dist.all_reduce(buf, group=group)}[event]
    with runtime.enforce("warn") if side == "shim" else contextlib.nullcontext():
        with cglbench.use_symmetric_memory(coordinator):  # buf bound, as a step's buffer is
            event_call(1, *block)
        for _ in range(50):
            run()
        collections.deque(itertools.starmap(run, itertools.repeat((), calls)), maxlen=0)


def _count(event: str, side: str, calls: int, extension: str) -> int:
    """The instructions of ``calls`` calls of ``event``."""
    command = ["valgrind", "--tool=callgrind", f"--toggle-collect={_LOOP}", "--callgrind-out-file=/dev/null",
               sys.executable, __file__, "--child", event, side, str(calls), extension]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"},
                          check=False)
    found = _COLLECTED.search(done.stderr)
    if done.returncode or found is None:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        sys.exit(f"shim_instructions: the {side} run of {event!r} failed (exit {done.returncode}):\n{tail}")
    return int(found.group(1))


def _build(directory: Path) -> str:
    """The extension built for the CPU in ``directory``: its path (exits 2 where it cannot be)."""
    sys.path.insert(0, str(HERE.parent / "tests" / "runtime"))
    from native_build import build, compiler

    if compiler() is None:
        print("shim_instructions: no C++ compiler to build the extension with (set CXX)", file=sys.stderr)
        sys.exit(2)
    try:
        return build(directory).__file__
    except RuntimeError as exc:
        print(f"shim_instructions: the extension did not build: {exc}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200, help="calls counted per event and side")
    parser.add_argument("--events", default=",".join(EVENTS), help=f"comma-separated, of: {', '.join(EVENTS)}")
    parser.add_argument("--extension", help="a CPU build of the extension to count (default: built from this checkout)")
    parser.add_argument("--child", nargs=4, metavar=("EVENT", "SIDE", "CALLS", "EXTENSION"), help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.child:
        event, side, calls, extension = ns.child
        _child(event, side, int(calls), extension)
        return
    events = [e.strip() for e in ns.events.split(",") if e.strip()]
    unknown = [e for e in events if e not in EVENTS]
    if unknown or ns.calls < 1:
        parser.error(f"unknown events: {', '.join(unknown)} (known: {', '.join(EVENTS)})" if unknown
                     else "--calls must be at least 1")
    if shutil.which("valgrind") is None:
        print("shim_instructions: valgrind is not installed (it counts the instructions); install it and run again",
              file=sys.stderr)
        sys.exit(2)
    if ns.extension is not None and not os.path.isfile(ns.extension):
        parser.error(f"--extension: no such file: {ns.extension}")
    with tempfile.TemporaryDirectory() as directory:
        extension = ns.extension or _build(Path(directory))
        print(f"instructions per event, warm, {ns.calls} calls counted (callgrind; CPU build of the extension)")
        print(f"{'event':58} {'plain':>9} {'shim':>9} {'added':>8}")
        runs = [(event, side) for event in events for side in ("plain", "shim")]
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            counts = dict(zip(runs, pool.map(lambda run: _count(*run, ns.calls, extension) / ns.calls, runs)))
        for event in events:
            plain, shim = counts[event, "plain"], counts[event, "shim"]
            print(f"{EVENTS[event]:58} {plain:9.0f} {shim:9.0f} {shim - plain:+8.0f}")


if __name__ == "__main__":
    main()
