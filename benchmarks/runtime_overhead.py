"""Overhead of commgroup-lint's runtime shim (warn mode), as a table: per collective, in
compiled code, and on the smoke model's step at several sizes.

    python benchmarks/runtime_overhead.py --in-process --device cuda  # 1 process: the cost per event
    python benchmarks/runtime_overhead.py --device cuda --world 1     # 1 GPU: a one-rank NCCL world
    python benchmarks/runtime_overhead.py --device cuda               # 2 GPUs, NCCL
    python benchmarks/runtime_overhead.py --device cpu                # 2 gloo ranks

Acceptance is per event, in one process (``--in-process``): at most 5 us added per checked
collective and at most 10 us per profile context with one allocation inside. The smoke step at
64x7168, 1024x2048, 4096x4096 and 8192x7168 (local tokens x hidden, bf16) is reported as figures,
with no pass or fail. On a world of one rank, the model's symmetric memory and collectives,
which it skips on one-rank groups, are switched back on, so a step makes the calls it makes on
two ranks. Each figure is the median of paired rounds, the plain/shim order alternating between
rounds so that drift cancels; the step's overhead is also given as the median of the per-round
ratios.

The ranks run in the smoke model's directory, so the shim knows it as the linter does (its
``commgroup-lint.toml``: the symmetric-memory context, the coordinator's collective methods).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from datetime import timedelta

TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
sys.path.insert(0, TESTS)
warnings.filterwarnings("ignore", category=FutureWarning)

CUDA_SIZES = "64x7168,1024x2048,4096x4096,8192x7168"
CPU_SIZES = "64x1024,256x1024"


def _timed(fn: Callable[[], object], sync: Callable[[], object], reps: int) -> float:
    """Seconds per call of ``fn``, after one untimed call (the first after a shim is installed
    or removed fills or drops per-process caches: a process pays it once)."""
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) / reps


def paired(fn, sync, reps: int, rounds: int, shim, timer=_timed) -> tuple[float, float, float]:
    """(plain, shimmed, median ratio) from ``rounds`` pairs of timings (``timer``), order
    alternating; one unmeasured warm-up pair first."""
    plain, shimmed = [], []
    for r in range(rounds + 1):
        if r % 2:
            p = timer(fn, sync, reps)
            with shim():
                s = timer(fn, sync, reps)
        else:
            with shim():
                s = timer(fn, sync, reps)
            p = timer(fn, sync, reps)
        if r:
            plain.append(p)
            shimmed.append(s)
    return statistics.median(plain), statistics.median(shimmed), statistics.median(s / p for p, s in zip(plain, shimmed))


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def worker(rank: int, world: int, init: str, device: str, sizes: list[tuple[int, int]], dtype_name: str,
           rounds: int, backend: str) -> None:
    import torch
    import torch.distributed as dist
    from smoke_model import dp_attention, parallel_state
    from smoke_model.model import DecoderLayer

    from commgroup_lint import runtime

    cuda = device == "cuda"
    if world == 1:
        _run_one_rank_groups()
    if cuda:
        torch.cuda.set_device(rank)
    extra = {"device_id": torch.device("cuda", rank)} if cuda else {}
    dist.init_process_group("nccl" if cuda else "gloo", init_method=init, rank=rank, world_size=world,
                            timeout=timedelta(seconds=300), **extra)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    shim = lambda: runtime.enforce("warn")  # noqa: E731
    parallel_state.initialize_model_parallel(world)
    tp = parallel_state.get_tp_group()
    dtype = getattr(torch, dtype_name)
    rows = []

    # one collective: a small buffer bound to its own group (the check runs and passes)
    with runtime.simulated_symmetric_memory(tp, register=not cuda):
        buf = torch.ones(1024, device=device)
    collective = lambda: dist.all_reduce(buf, group=tp.device_group)  # noqa: E731
    for _ in range(50):
        collective()
    plain, shimmed, _ = paired(collective, sync, 200, 15, shim)
    rows.append(("all_reduce 4 KiB, bound buffer", _us(plain), _us(shimmed), f"{(shimmed - plain) * 1e6:+.1f} us/collective"))

    # the same collective in compiled code (a functional collective, checked by its kernel)
    def step(x: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(buf, group=tp.device_group)
        return x * 2 + buf

    compiled = torch.compile(step, backend=backend)
    x = torch.ones(1024, device=device)
    for use_shim in (False, True):  # compile both versions (the shim's wrapper is a new guard)
        with (shim() if use_shim else _nothing()):
            for _ in range(3):
                compiled(x)
    plain, shimmed, _ = paired(lambda: compiled(x), sync, 100, 11, shim)
    rows.append((f"all_reduce in torch.compile ({backend})", _us(plain), _us(shimmed),
                 f"{(shimmed - plain) * 1e6:+.1f} us/collective"))

    for local_len, hidden in sizes:
        dp_attention.initialize_dp_attention(world, local_len, hidden, dtype=dtype, device=device)
        layer = DecoderLayer(hidden, device).to(dtype)
        inp = torch.randn(local_len, hidden, device=device, dtype=dtype)
        run = functools.partial(layer, inp)
        for _ in range(5):
            run()
        reps = 20 if cuda else 3
        plain, shimmed, ratio = paired(run, sync, reps, rounds, shim)
        rows.append((f"smoke step {local_len} x {hidden}", _ms(plain), _ms(shimmed),
                     f"{(shimmed / plain - 1) * 100:+.2f}% (paired {(ratio - 1) * 100:+.2f}%)"))
    if rank == 0:
        print(f"device={device} world={world} torch={torch.__version__} dtype={dtype_name} mode=warn "
              f"rounds={rounds} (medians of paired rounds)")
        print("| measurement | plain | shim | overhead |")
        print("|---|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
        sys.stdout.flush()
    dist.barrier()
    os._exit(0)  # skip NCCL teardown of the registered mem pool: not what is measured


def _run_one_rank_groups() -> None:
    """Symmetric memory and collectives on one-rank groups, which the smoke model skips."""
    import contextlib

    import torch
    import torch.distributed as dist
    from smoke_model import dp_attention, nccl_pool, parallel_state

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


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


#: A stand-in engine for :func:`in_process`, shaped like the smoke model on CUDA: a profile
#: context (``use_symmetric_memory(group)``) whose context manager enters a pool context
#: (``use_pool(pool)``, for ``torch.cuda.use_mem_pool``) inside, so two wrapped contexts nest;
#: a group wrapper whose collective method (checked) runs a torch collective (checked again,
#: skipped by depth).
_ENGINE = '''\
import contextlib

import torch.distributed as dist

class Pool:
    """Like a CUDA MemPool: it lists its segments (none here)."""

    def snapshot(self):
        return []


POOL = Pool()


@contextlib.contextmanager
def use_pool(pool):
    yield


class SymmetricMemory:
    def __init__(self, group):
        self.group = group

    def __enter__(self):
        self._use = use_pool(POOL)
        self._use.__enter__()
        return self

    def __exit__(self, *exc):
        self._use.__exit__(*exc)
        return False


def use_symmetric_memory(group, disabled=False):
    return SymmetricMemory(group)


class Coordinator:
    def __init__(self, pg):
        self.device_group = pg
        self.unique_name = "tp"

    def all_reduce(self, x):
        dist.all_reduce(x, group=self.device_group)
        return x
'''

_ENGINE_CONFIG = '''\
[extend-profile.contexts."cglbench.use_symmetric_memory"]
param = "group"
index = 0
disabled = "disabled"

[extend-profile.pool_contexts."cglbench.use_pool"]
param = "pool"
index = 0

[extend-profile.runtime]
helper_modules = ["cglbench"]

[extend-profile.runtime.group_classes."cglbench.Coordinator"]
group_attr = "device_group"
'''


def _stand_in_engine() -> str:
    """Write the stand-in engine and its configuration to a new directory; its path."""
    root = tempfile.mkdtemp()
    with open(os.path.join(root, "cglbench.py"), "w") as f:
        f.write(_ENGINE)
    with open(os.path.join(root, "commgroup-lint.toml"), "w") as f:
        f.write(_ENGINE_CONFIG)
    return root


def in_process(rounds: int = 9, device: str = "cpu") -> None:
    """One process on torch's fake process group (collectives return at once, no backend
    noise): the shim's CPU cost per call, and per event of the smoke step's path on CUDA (a
    profile context entering a pool context, an allocation inside both, a collective through
    a group wrapper's method) on a stand-in engine. Tensors on ``device``."""
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from commgroup_lint import runtime

    torch.empty(1, device=device)  # CUDA is initialized before any context, as in a model
    os.chdir(_stand_in_engine())  # the shim reads the stand-in's configuration
    sys.path.insert(0, os.getcwd())
    import cglbench

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    g = dist.new_group([0, 1])
    coordinator = cglbench.Coordinator(g)
    with runtime.simulated_symmetric_memory(g):
        buf = torch.ones(1024, device=device)
    out, x = torch.ones(2048, device=device), torch.ones(16, device=device)

    def alloc() -> torch.Tensor:
        with runtime.simulated_symmetric_memory(g, register=False):
            return torch.empty(256, device=device)

    def context() -> None:
        with cglbench.use_symmetric_memory(coordinator):
            pass

    def context_alloc() -> torch.Tensor:
        with cglbench.use_symmetric_memory(coordinator):
            return torch.empty(256, device=device)

    def context_compute() -> torch.Tensor:  # an engine's context around a layer's kernels
        with cglbench.use_symmetric_memory(coordinator):
            return torch.add(torch.mul(torch.sub(x, 1), 2), x).relu_().neg()

    cases = [
        ("all_reduce, bound buffer", lambda: dist.all_reduce(buf, group=g), 5000),
        ("all_gather_into_tensor, bound", lambda: dist.all_gather_into_tensor(out, buf, group=g), 5000),
        ("group wrapper's all_reduce, bound", lambda: coordinator.all_reduce(buf), 5000),
        ("functional all_reduce (kernel)", lambda: funcol.wait_tensor(funcol.all_reduce(buf, "sum", g)), 5000),
        ("allocation in simulated_symmetric_memory (binds, shim or not)", alloc, 5000),
        ("profile context over a pool context, empty", context, 5000),
        ("the same, one allocation inside", context_alloc, 5000),
        ("the same, five torch ops inside (four allocate)", context_compute, 5000),
        ("torch.add (not a collective)", lambda: torch.add(x, x), 20000),
    ]
    print(f"in-process, torch={torch.__version__}, fake process group, tensors on {device}, "
          f"median of {rounds} paired rounds:")
    print("| per call | plain | shim | extra |")
    print("|---|---|---|---|")
    for label, fn, n in cases:
        plain, shimmed, _ = paired(fn, lambda: None, n, rounds, lambda: runtime.enforce("warn"))
        print(f"| {label} | {plain * 1e6:.2f} us | {shimmed * 1e6:.2f} us | {(shimmed - plain) * 1e6:+.2f} us |")
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--world", type=int, default=2, help="ranks (1: one GPU, its groups' calls switched on)")
    parser.add_argument("--sizes", default=None, help=f"local tokens x hidden, comma-separated (cuda: {CUDA_SIZES}; "
                                                      f"cpu: {CPU_SIZES})")
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--rounds", type=int, default=None, help="paired rounds per step size (cuda 21, cpu 7)")
    parser.add_argument("--compile-backend", default=None, help="torch.compile backend (cuda: inductor, cpu: aot_eager)")
    parser.add_argument("--in-process", action="store_true", help="one process, fake process group: us per call")
    ns = parser.parse_args()
    if ns.in_process:
        return in_process(device=ns.device)
    import torch.multiprocessing as mp

    cuda = ns.device == "cuda"
    sizes = [tuple(int(n) for n in s.split("x")) for s in (ns.sizes or (CUDA_SIZES if cuda else CPU_SIZES)).split(",")]
    dtype = ns.dtype or ("bfloat16" if cuda else "float32")
    rounds = ns.rounds or (21 if cuda else 7)
    backend = ns.compile_backend or ("inductor" if cuda else "aot_eager")
    init = "file://" + os.path.join(tempfile.mkdtemp(), "store")
    os.chdir(os.path.join(TESTS, "smoke_model"))  # the shim reads the smoke model's configuration
    mp.spawn(worker, args=(ns.world, init, ns.device, sizes, dtype, rounds, backend), nprocs=ns.world, join=True)


if __name__ == "__main__":
    main()
