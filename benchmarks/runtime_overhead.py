"""Overhead of commgroup-lint's runtime shim (warn mode): per collective and on the smoke step.

    python benchmarks/runtime_overhead.py --device cpu          # 2 gloo ranks
    python benchmarks/runtime_overhead.py --device cuda         # 2 GPUs, NCCL
    python benchmarks/runtime_overhead.py --in-process          # 1 process: us per call

Prints, on rank 0: the extra microseconds per collective (a bound buffer, the check done
and passing), and the smoke model's step time with and without the shim, in percent (from
the medians, and the median of the per-round ratios; rounds alternate plain/shim order).
Target: under 3% on the GPU smoke step.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from datetime import timedelta

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
warnings.filterwarnings("ignore", category=FutureWarning)


def _timed(fn, sync, reps):
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) / reps


def _interleaved(fn, sync, reps, rounds, shim):
    """Paired rounds of (plain, shimmed) timings taken back to back, the order alternating
    between rounds so that drift cancels; one unmeasured warm-up pair first. Returns the
    medians and the median of the per-round ratios (shim / plain)."""
    plain, shimmed = [], []
    for r in range(rounds + 1):
        if r % 2:
            p = _timed(fn, sync, reps)
            with shim():
                s = _timed(fn, sync, reps)
        else:
            with shim():
                s = _timed(fn, sync, reps)
            p = _timed(fn, sync, reps)
        if r:
            plain.append(p)
            shimmed.append(s)
    ratio = statistics.median(s / p for p, s in zip(plain, shimmed))
    return statistics.median(plain), statistics.median(shimmed), ratio


def worker(rank, world, init, device, local_len, hidden, dtype_name):
    import torch
    import torch.distributed as dist

    from commgroup_lint import runtime

    cuda = device == "cuda"
    if cuda:
        torch.cuda.set_device(rank)
    extra = {"device_id": torch.device("cuda", rank)} if cuda else {}
    dist.init_process_group("nccl" if cuda else "gloo", init_method=init, rank=rank, world_size=world,
                            timeout=timedelta(seconds=120), **extra)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    shim = lambda: runtime.enforce("warn")  # noqa: E731
    from smoke_model import dp_attention, parallel_state

    parallel_state.initialize_model_parallel(world)
    dtype = getattr(torch, dtype_name)
    dp_attention.initialize_dp_attention(world, local_len, hidden, dtype=dtype, device=device)
    tp = parallel_state.get_tp_group()

    # per collective: an all-reduce of a small bound buffer on its own group
    with runtime.simulated_symmetric_memory(tp, register=not cuda):
        buf = torch.ones(1024, device=device)
    coll = lambda: torch.distributed.all_reduce(buf, group=tp.device_group)  # noqa: E731
    for _ in range(20):
        coll()
    plain_c, shim_c, _ = _interleaved(coll, sync, 200, 15, shim)

    from smoke_model.model_correct import DecoderLayer

    layer = DecoderLayer(hidden, device).to(dtype)
    x = torch.randn(local_len, hidden, device=device, dtype=dtype)
    step = lambda: layer(x)  # noqa: E731
    for _ in range(5):
        step()
    reps = 20 if cuda else 10
    plain_s, shim_s, ratio = _interleaved(step, sync, reps, 21 if cuda else 7, shim)
    if rank == 0:
        print(f"device={device} world={world} torch={torch.__version__} dtype={dtype_name} "
              f"local_len={local_len} hidden={hidden}")
        print(f"collective all_reduce(4 KiB): plain {plain_c * 1e6:.1f} us, shim {shim_c * 1e6:.1f} us, "
              f"overhead {(shim_c - plain_c) * 1e6:+.1f} us/collective")
        print(f"smoke step: plain {plain_s * 1e3:.3f} ms, shim {shim_s * 1e3:.3f} ms, "
              f"overhead {(shim_s / plain_s - 1) * 100:+.2f}% (median of paired rounds "
              f"{(ratio - 1) * 100:+.2f}%, {(shim_s - plain_s) * 1e3:+.3f} ms/step)")
        sys.stdout.flush()
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)  # skip NCCL teardown of the registered mem pool: not what is measured


def in_process(rounds=7):
    """One process, a gloo world of one (FileStore): the shim's CPU cost alone, in us, per
    checked collective, per bound allocation and per other torch call (the function-mode
    dispatch every torch call pays while the shim is installed)."""
    import torch
    import torch.distributed as dist

    from commgroup_lint import runtime

    store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    g = dist.new_group([0])
    with runtime.simulated_symmetric_memory(g):
        buf = torch.ones(1024)
    x = torch.ones(16)

    def alloc():
        with runtime.simulated_symmetric_memory(g, register=False):
            return torch.empty(256)

    cases = [
        ("all_reduce, bound buffer", lambda: dist.all_reduce(buf, group=g), 2000),
        ("all_gather_into_tensor, bound", lambda: dist.all_gather_into_tensor(buf, buf, group=g), 2000),
        ("allocation in a bound context", alloc, 2000),
        ("torch.add (not a collective)", lambda: torch.add(x, x), 20000),
    ]
    print(f"in-process, torch={torch.__version__}, median of {rounds} paired rounds:")
    for label, fn, n in cases:
        plain, shimmed, _ = _interleaved(fn, lambda: None, n, rounds, lambda: runtime.enforce("warn"))
        print(f"  {label:32s} plain {plain * 1e6:7.2f} us  shim {shimmed * 1e6:7.2f} us  "
              f"extra {(shimmed - plain) * 1e6:+6.2f} us")
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--local-len", type=int, default=None)
    parser.add_argument("--hidden", type=int, default=None)
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--in-process", action="store_true", help="one process, CPU: us per call")
    ns = parser.parse_args()
    if ns.in_process:
        return in_process()
    import torch.multiprocessing as mp

    cuda = ns.device == "cuda"
    local_len = ns.local_len or (4096 if cuda else 64)
    hidden = ns.hidden or (4096 if cuda else 256)
    dtype = ns.dtype or ("bfloat16" if cuda else "float32")
    init = "file://" + os.path.join(tempfile.mkdtemp(), "store")
    mp.spawn(worker, args=(ns.world, init, ns.device, local_len, hidden, dtype), nprocs=ns.world, join=True)


if __name__ == "__main__":
    main()
