"""Where the runtime shim's time goes on the smoke step, on ONE GPU (the single-GPU machine).

    python benchmarks/runtime_profile.py [--sizes 64x7168,1024x2048]

The smoke model runs on an NCCL world of one rank. Like the engines, the model skips
symmetric memory and collectives on a one-rank group; here they are switched back on (three
functions replaced by attribute, before the shim hooks them), so each step makes the same
calls as on two ranks: 7 profile contexts over a CUDA ``MemPool`` with one allocation each,
6 collectives through the coordinator. Where this NCCL build has no mem allocator the pool
is a plain ``torch.cuda.MemPool()``, registered with the group as before.

Prints, per size: the step time and its host time, plain and in warn mode (medians of paired
rounds), Python calls per step, and cProfile's time per function per step for both.

``--steady SECONDS`` instead runs the first size's step for that long (under the whole shim, or
plain with ``--plain``) for a sampling profiler, whose samples ``shim_samples.py`` splits:

    py-spy record --native --gil -r 40 -f raw -o shim.txt -- python benchmarks/runtime_profile.py --steady 40
    python benchmarks/shim_samples.py shim.txt

``--parts`` instead splits the shim's cost on the step: the shim in part (the whole shim
without the allocation hook's C fast paths, every collective checked and every context entered
in Python; only the collective checks, torch's and the coordinator's; only the contexts; the
contexts' wrappers without their binding) against the plain step, in interleaved rounds, each
figure the median of the per-round differences; then, per step with the whole shim, how many
collectives and contexts still went through the shim's Python, how many context exits bound
blocks in Python, and how many times the binding table changed (all 0 in a repeating step).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import os
import pstats
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

from runtime_overhead import _timed as _step_time, paired  # noqa: E402


def _run_one_rank_groups(dp_attention, parallel_state, nccl_pool) -> None:
    """Symmetric memory and collectives on one-rank groups, which the model skips."""
    import torch
    import torch.distributed as dist

    def use_symmetric_memory(group, disabled=False):
        if disabled or not dp_attention.SYMMETRIC_MEMORY:
            return contextlib.nullcontext()
        return nccl_pool.NcclSymmetricMemory(group, scheme=dp_attention._POOL_SCHEME)

    def get_nccl_mem_pool(group, scheme="per_context"):
        if scheme not in nccl_pool._POOLS:
            try:
                allocator = nccl_pool._backend(group).mem_allocator
            except RuntimeError:  # "not supported in this NCCL version"
                allocator = None
            nccl_pool._POOLS[scheme] = torch.cuda.MemPool(allocator)
        return nccl_pool._POOLS[scheme]

    def all_reduce(self, input_):
        dist.all_reduce(input_, group=self.device_group)
        return input_

    def all_gather_into_tensor(self, output, input_):
        dist.all_gather_into_tensor(output, input_, group=self.device_group)

    dp_attention.use_symmetric_memory = use_symmetric_memory
    nccl_pool.get_nccl_mem_pool = get_nccl_mem_pool
    parallel_state.GroupCoordinator.all_reduce = all_reduce
    parallel_state.GroupCoordinator.all_gather_into_tensor = all_gather_into_tensor


def _host_time(fn, sync, reps: int) -> float:
    """Seconds per call of ``fn`` on the host: the window ends before the device sync."""
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    elapsed = time.perf_counter() - t0
    sync()
    return elapsed / reps


#: (label, timer, through the function mode although the hook is attached)
_MEASURES = [("step", _step_time, False), ("host time", _host_time, False),
             ("host time, function mode", _host_time, True)]


@contextlib.contextmanager
def _function_mode(allocator_hook):
    """The shim binds through its function mode meanwhile, the hook attached but unused."""
    state = allocator_hook.HookState
    native, context = state.native, state.context
    state.native = state.context = None
    try:
        yield
    finally:
        state.native, state.context = native, context


def _python_calls(run, shim) -> dict[str, int]:
    """Python functions called by one step, with their call counts."""
    counts: dict[str, int] = {}

    def count(frame, event, arg):
        if event == "call":
            code = frame.f_code
            key = f"{os.path.basename(code.co_filename)}:{code.co_name}"
            counts[key] = counts.get(key, 0) + 1

    with shim():
        run()
        sys.setprofile(count)
        try:
            run()
        finally:
            sys.setprofile(None)
    return counts


def _profile(run, sync, shim, steps: int = 100) -> pstats.Stats:
    with shim():
        run()
        sync()
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(steps):
            run()
        sync()
        profiler.disable()
    return pstats.Stats(profiler)


def _shim_in_part(collectives: bool = True, contexts: str = "bind", native: bool = True):
    """A context manager like ``enforce("warn")`` that installs part of the shim. Without
    ``collectives``, no collective is checked (neither torch's nor a group class's methods);
    ``contexts``: ``"bind"`` as the shim does, ``"wrap"`` the profile contexts wrapped by a
    wrapper that binds nothing, ``"off"`` not wrapped. Without ``native``, every collective
    is checked and every context entered in Python (the allocation hook's extension decides none)."""
    from commgroup_lint import runtime
    from commgroup_lint.runtime import _shim, _targets
    from commgroup_lint.runtime._native import Native

    fast_paths = ("check", "group_context", "pool_context")

    @contextlib.contextmanager
    def shim():
        install, wrap, methods = _shim.Shim.install, _targets._context_function, _targets.wrap_group_methods
        fast = {name: getattr(Native, name) for name in fast_paths}
        if not native:
            for name in fast_paths:
                setattr(Native, name, None)

        def partial_install(self):
            if not collectives:
                self.collectives.install = lambda: None
            install(self)

        _shim.Shim.install = partial_install
        if not collectives:
            _targets.wrap_group_methods = lambda *args: None
        if contexts == "wrap":
            _targets._context_function = lambda func, binds: functools.wraps(func)(
                lambda *args, **kwargs: func(*args, **kwargs))
        elif contexts == "off":
            _targets._context_function = lambda func, binds: func
        try:
            with runtime.enforce("warn"):
                yield
        finally:
            _shim.Shim.install, _targets._context_function, _targets.wrap_group_methods = install, wrap, methods
            for name, path in fast.items():
                setattr(Native, name, path)

    return shim


_PARTS = {
    "whole shim": {},
    "whole shim, no C fast paths": {"native": False},
    "collective checks only": {"contexts": "off"},
    "contexts only": {"collectives": False},
    "context wrappers, no binding": {"collectives": False, "contexts": "wrap"},
}


def _in_python(run, shim, steps: int = 10) -> tuple[float, float, float, float]:
    """Per step, with the whole shim: collectives judged in Python and profile contexts
    entered through Python (not by the extension's fast paths), context exits that bound
    blocks in Python (not kept by the allocation hook), and changes of the binding table (each
    sends the next collectives to Python)."""
    from commgroup_lint.runtime import _binding, _check, _targets
    from commgroup_lint.runtime._table import TABLE

    def inner(func, name):
        return next(c for c in func.__code__.co_consts if getattr(c, "co_name", "") == name)

    slow = inner(_check.checked, "slow")
    rests = {inner(_targets._context_function, "rest"), inner(_targets._pool_context_function, "rest")}
    binds = _binding._bind_collected.__code__
    calls = {"slow": 0, "rest": 0, "bind": 0}

    def count(frame, event, arg):
        if event == "call":
            if frame.f_code is slow:
                calls["slow"] += 1
            elif frame.f_code in rests:
                calls["rest"] += 1
            elif frame.f_code is binds:
                calls["bind"] += 1

    with shim():
        run()
        version = TABLE.version
        sys.setprofile(count)
        try:
            for _ in range(steps):
                run()
        finally:
            sys.setprofile(None)
        return (calls["slow"] / steps, calls["rest"] / steps, calls["bind"] / steps,
                (TABLE.version - version) / steps)


def _parts(run, sync, rounds: int, steps: int = 10) -> None:
    """Host time per step of each part of the shim against the plain step, in interleaved
    rounds (the order rotating); the median of the per-round differences."""
    configs = {"plain": contextlib.nullcontext, **{k: _shim_in_part(**v) for k, v in _PARTS.items()}}
    names = list(configs)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds + 1):
        for name in names[r % len(names):] + names[: r % len(names)]:
            with configs[name]():
                t = _host_time(run, sync, steps)
            if r:  # the first round warms every configuration up
                times[name].append(t)
    plain = statistics.median(times["plain"])
    print(f"plain step, host time: {plain * 1e3:.3f} ms")
    for name in names[1:]:
        extra = statistics.median(s - p for s, p in zip(times[name], times["plain"]))
        print(f"{name:30} {extra * 1e6:+7.1f} us ({extra / plain * 100:+.1f}%)")


def _steady(run, sync, seconds: float, config) -> None:
    """The step, over and over for ``seconds``, then the steps made and their time."""
    with config():
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(20):
                run()
            sync()
            steps += 20
        elapsed = time.perf_counter() - start
    print(f"{steps} steps, {elapsed / steps * 1e3:.3f} ms a step")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="64x7168,1024x2048", help="local tokens x hidden, comma-separated")
    parser.add_argument("--rounds", type=int, default=15, help="paired rounds of 20 steps")
    parser.add_argument("--top", type=int, default=20, help="functions listed per cProfile table")
    parser.add_argument("--parts", action="store_true", help="split the shim's cost into its parts instead")
    parser.add_argument("--steady", type=float, metavar="SECONDS",
                        help="run the first size's step that long instead, for a sampling profiler")
    parser.add_argument("--plain", action="store_true", help="with --steady: without the shim")
    ns = parser.parse_args()

    import torch
    import torch.distributed as dist

    os.chdir(os.path.join(os.path.dirname(HERE), "tests", "smoke_model"))  # the shim reads its configuration
    from smoke_model import dp_attention, nccl_pool, parallel_state

    _run_one_rank_groups(dp_attention, parallel_state, nccl_pool)
    from smoke_model.model import DecoderLayer

    from commgroup_lint import runtime
    from commgroup_lint.runtime import _allocator_hook

    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method="file://" + os.path.join(tempfile.mkdtemp(), "store"), rank=0,
                            world_size=1, device_id=torch.device("cuda", 0))
    parallel_state.initialize_model_parallel(1)
    sync = torch.cuda.synchronize
    shim = lambda: runtime.enforce("warn")  # noqa: E731
    plain = contextlib.nullcontext

    torch.empty(1, device="cuda")  # the hook binds once the process has allocated CUDA memory
    hooked = _allocator_hook.hook() is not None  # attached, unless it cannot be
    print(f"torch={torch.__version__} nccl={torch.cuda.nccl.version()} one GPU, warn mode, binding through "
          f"the {'allocation hook' if hooked else 'function mode'}, medians of {ns.rounds} paired rounds of 20 steps")
    for size in ns.sizes.split(","):
        local_len, hidden = (int(n) for n in size.split("x"))
        dp_attention.initialize_dp_attention(1, local_len, hidden, dtype=torch.bfloat16, device="cuda")
        layer = DecoderLayer(hidden, "cuda").to(torch.bfloat16)
        run = functools.partial(layer, torch.randn(local_len, hidden, device="cuda", dtype=torch.bfloat16))
        for _ in range(10):
            run()
        if ns.steady:
            _steady(run, sync, ns.steady, plain if ns.plain else shim)
            break
        print(f"\n== smoke step {size}")
        if ns.parts:
            _parts(run, sync, ns.rounds * 4)
            judged, entered, bound, changes = _in_python(run, shim)
            print(f"a step: collectives judged in Python {judged:.1f}, contexts entered through Python "
                  f"{entered:.1f}, context exits binding in Python {bound:.1f}, binding table changes {changes:.1f}")
            continue
        for label, timer, through_mode in _MEASURES if hooked else _MEASURES[:2]:
            with _function_mode(_allocator_hook) if through_mode else contextlib.nullcontext():
                p, s, _ = paired(run, sync, 20, ns.rounds, shim, timer=timer)
            print(f"{label:26} plain {p * 1e3:.3f} ms  shim {s * 1e3:.3f} ms  "
                  f"{(s - p) * 1e6:+.1f} us ({(s / p - 1) * 100:+.2f}%)")
        calls = {label: _python_calls(run, ctx) for label, ctx in (("plain", plain), ("shim", shim))}
        print(f"Python calls per step: plain {sum(calls['plain'].values())}, shim {sum(calls['shim'].values())}")
        for label, ctx in (("plain", plain), ("shim", shim)):
            stats = _profile(run, sync, ctx)
            print(f"-- cProfile, {label}: {stats.total_tt * 10:.3f} ms a step under the profiler; time per step:")
            rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[: ns.top]
            for (file, line, name), (_, calls_, own, _, _) in rows:
                print(f"   {own * 1e4:7.1f} us  {calls_ // 100:3d} calls  {os.path.basename(file)}:{line} {name}")
    sys.stdout.flush()
    os._exit(0)  # skip NCCL teardown of the registered pool: not what is measured


if __name__ == "__main__":
    main()
