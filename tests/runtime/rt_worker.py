"""One rank of a multi-process runtime test. Run as a script by ``rt_launch.launch``.

Writes a JSON result to ``--out``; the test process asserts on it. Every scenario runs
many checks in one process group so that the suite starts few processes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import traceback
import warnings
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/ -> smoke_model

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", message=".*NumPy.*")

HIDDEN = 64
LOCAL_LEN = 8
# On CUDA the global buffer is large enough (16 MiB) to get a segment of its own from the
# caching allocator, so a freed block is handed out again whole, as in the CPU pool model.
CUDA_HIDDEN = 2048
CUDA_LOCAL_LEN = 1024


def _digest(tensors) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(bytes(t.detach().cpu().contiguous().view(torch.uint8).flatten().tolist()))  # no numpy needed
    return h.hexdigest()


def _torch_surface():
    """The objects the shim may patch, to check it leaves torch (and the model) exactly as it found it."""
    import torch.distributed._symmetric_memory as symm

    from smoke_model import dp_attention, legacy, parallel_state

    c10d = dist.distributed_c10d
    objs = {
        "dist.new_group": dist.new_group,
        "c10d.new_group": c10d.new_group,
        "dist.all_reduce": dist.all_reduce,
        "dist.all_gather_into_tensor": dist.all_gather_into_tensor,
        "c10d.has_torch_function": c10d.has_torch_function,
        "c10d.handle_torch_function": c10d.handle_torch_function,
        "symm.empty": symm.empty,
        "symm.rendezvous": symm.rendezvous,
        "GroupCoordinator.all_gather_into_tensor": parallel_state.GroupCoordinator.__dict__["all_gather_into_tensor"],
        "dp_attention.use_symmetric_memory": dp_attention.use_symmetric_memory,
        "legacy.use_symmetric_memory": legacy.use_symmetric_memory,
    }
    nccl = getattr(dist, "ProcessGroupNCCL", None)
    if nccl is not None and hasattr(nccl, "register_mem_pool"):
        objs["ProcessGroupNCCL.register_mem_pool"] = nccl.register_mem_pool
    return objs


def _setup(args):
    from smoke_model import parallel_state

    parallel_state.initialize_model_parallel(args.attn_dp, backend=None)
    global HIDDEN, LOCAL_LEN
    if args.device == "cuda":
        HIDDEN, LOCAL_LEN = CUDA_HIDDEN, CUDA_LOCAL_LEN
    return "cuda" if args.device == "cuda" else "cpu"


def _input(rank, device):
    gen = torch.Generator().manual_seed(100 + rank)
    return torch.randn(LOCAL_LEN, HIDDEN, generator=gen).to(device)


def _run_variant(variant, device, rank, attn_dp, mode=None):
    """The model with ``variant``'s bug, run once; its outputs' digest and the violations."""
    from commgroup_lint import runtime
    from smoke_model import bug_of, dp_attention, pool_scheme_of
    from smoke_model.model import DecoderLayer

    dp_attention.initialize_dp_attention(attn_dp, LOCAL_LEN, HIDDEN, device=device,
                                         pool_scheme=pool_scheme_of(variant))
    layer = DecoderLayer(HIDDEN, device, bug=bug_of(variant))
    x = _input(rank, device)
    if mode is None:
        outs, found = layer(x), []
    else:
        with runtime.enforce(mode) as ctx:
            outs = layer(x)
        found = [v.as_dict() for v in ctx.violations]
    if device == "cuda":
        torch.cuda.synchronize()
    return _digest(outs), found


def scenario_smoke(args):
    from commgroup_lint import runtime
    from smoke_model import VARIANTS

    rank = dist.get_rank()
    device = _setup(args)
    result = {"variants": {}, "torch_version": torch.__version__}
    before = _torch_surface()
    stack_before = torch._C._len_torch_function_stack()
    for variant in VARIANTS:
        runtime.clear_violations()
        shim_digest, found = _run_variant(variant, device, rank, args.attn_dp, "report")
        plain_digest, _ = _run_variant(variant, device, rank, args.attn_dp)
        result["variants"][variant] = {"violations": found, "equal": shim_digest == plain_digest}
    after = _torch_surface()
    result["restored"] = {k: before[k] is after[k] for k in before}
    result["mode_stack_restored"] = torch._C._len_torch_function_stack() == stack_before

    # assert mode raises after the collective ran (so every rank raises, nobody hangs)
    runtime.clear_violations()
    try:
        _run_variant("wrong_group", device, rank, args.attn_dp, "assert")
        result["assert"] = None
    except runtime.GroupMismatchError as exc:
        result["assert"] = {"message": str(exc), "code": exc.code}
    # warn mode: a CommGroupRuntimeWarning per distinct violation, at the model's line
    runtime.clear_violations()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _run_variant("wrong_group", device, rank, args.attn_dp, "warn")
    result["warn"] = [
        {"message": str(w.message), "path": os.path.realpath(w.filename), "line": w.lineno}
        for w in caught if issubclass(w.category, runtime.CommGroupRuntimeWarning)
    ]
    result["after_all_restored"] = all(v is before[k] for k, v in _torch_surface().items())
    return result


def scenario_divergence(args):
    from commgroup_lint import runtime
    from commgroup_lint.runtime._state import Active

    rank = dist.get_rank()
    result = {}
    with runtime.enforce("report", divergence=True, divergence_timeout=3.0) as ctx:
        group = dist.new_group([0, 1], group_desc="side_test")
        runtime.name_group(group, "tp")
        if rank == 0:
            with runtime.simulated_symmetric_memory(group):
                buf = torch.ones(16)
        else:
            buf = torch.ones(16)
        dist.all_reduce(buf, group=group)
        result["sum"] = buf.tolist()[:2]
        divergence = Active.shim.divergence
        result["has_mirror"] = group in divergence.mirrors
        # A peer that never joins the check: the check gives up after the timeout.
        if rank == 0:
            t0 = time.time()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                verdict = divergence.check("all_reduce", group, [1], (buf,), {})
            result["timeout_s"] = time.time() - t0
            result["timeout_verdict"] = verdict
            result["timeout_warned"] = any("divergence check" in str(w.message) for w in caught)
        else:
            time.sleep(5.0)
    result["violations"] = [v.as_dict() for v in ctx.violations]
    return result


def scenario_symm(args):
    """Real registration on CUDA: torch symmetric memory and a NCCL mem pool."""
    import torch.distributed._symmetric_memory as symm

    from commgroup_lint import runtime

    rank = dist.get_rank()
    device = torch.device("cuda", torch.cuda.current_device())
    tp = dist.new_group([0, 1], group_desc="tp")
    other = dist.new_group([0, 1], group_desc="moe_ep")
    result = {"nccl": ".".join(map(str, torch.cuda.nccl.version())), "rank": rank}
    with runtime.enforce("report") as ctx:
        try:
            t = symm.empty(4096, device=device)
            symm.rendezvous(t, tp)
            t.fill_(1.0)
            dist.all_reduce(t, group=tp)
            dist.all_reduce(t, group=other)
            torch.cuda.synchronize()
            result["symm_sum"] = float(t[0])
        except Exception:
            result["symm_error"] = traceback.format_exc()[-1500:]
        # A symmetric-memory op (no multicast needed) on another group than the rendezvous: the
        # verdict comes before the call, whatever the op then makes of the buffer.
        s = symm.empty(4096, device=device)
        symm.rendezvous(s, tp)
        s.fill_(1.0)
        try:
            torch.ops.symm_mem.one_shot_all_reduce(s, "sum", other.group_name)
            torch.cuda.synchronize()
        except Exception as exc:
            result["symm_op_raised"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        try:
            backend = tp._get_backend(device)
            pool = torch.cuda.MemPool(backend.mem_allocator)
            with torch.cuda.use_mem_pool(pool):
                u = torch.ones(1 << 20, device=device)
            backend.register_mem_pool(pool)
            dist.all_reduce(u, group=tp)
            dist.all_reduce(u[:1024], group=other)
            torch.cuda.synchronize()
            result["pool_sum"] = float(u[0])
            result["pool_segments"] = len(pool.snapshot())
        except Exception:
            result["pool_error"] = traceback.format_exc()[-1500:]
    result["violations"] = [v.as_dict() for v in ctx.violations]
    return result


def _line():
    return sys._getframe(1).f_lineno


def scenario_captured(args):
    """Compiled and captured code on CUDA. In a ``torch.compile``d function (fullgraph) the
    wrong-group all-reduce runs as a functional collective, checked by its kernel; in a CUDA
    graph it is checked when captured, and replays are not re-checked. Outputs are the same
    with and without the shim."""
    from commgroup_lint import runtime

    device = torch.device("cuda", torch.cuda.current_device())
    tp = runtime.name_group(dist.new_group([0, 1], group_desc="tp"), "tp")
    other = runtime.name_group(dist.new_group([0, 1], group_desc="other"), "other")
    with runtime.simulated_symmetric_memory(tp, register=False):
        buf = torch.ones(4096, device=device); compiled_line = _line()  # noqa: E702
        graph_buf = torch.ones(4096, device=device); graph_line = _line()  # noqa: E702

    def step(x, t):
        dist.all_reduce(t, group=other)
        return x * 2 + t

    compiled = torch.compile(step, fullgraph=True)
    x = torch.arange(4096.0, device=device)
    plain = compiled(x, buf.clone())
    with runtime.enforce("report") as ctx:
        shimmed = compiled(x, buf)
    torch.cuda.synchronize()
    result = {
        "compiled": [v.as_dict() for v in ctx.violations], "compiled_line": compiled_line,
        "compiled_equal": torch.equal(plain.view(torch.int32), shimmed.view(torch.int32)),
    }
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # NCCL warms up before a capture
        for _ in range(3):
            dist.all_reduce(torch.ones(4096, device=device), group=other)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with runtime.enforce("report") as ctx:
        with torch.cuda.graph(graph):
            dist.all_reduce(graph_buf, group=other)
        captured = len(ctx.violations)
        for _ in range(2):
            graph.replay()
        torch.cuda.synchronize()
    result.update(graph=[v.as_dict() for v in ctx.violations], graph_line=graph_line, captured=captured,
                  graph_value=float(graph_buf[0]))  # ones, all-reduced twice over two ranks: 4
    return result


def scenario_probe(args):
    """What a function mode is handed for the renamed collectives on this torch."""
    from torch.overrides import TorchFunctionMode

    seen = []

    class Probe(TorchFunctionMode):
        def __torch_function__(self, func, types, a=(), kw=None):
            name = getattr(func, "__name__", "")
            if name in ("all_gather_into_tensor", "all_gather_single", "reduce_scatter_tensor",
                        "reduce_scatter_single", "_all_gather_base", "_reduce_scatter_base"):
                seen.append({"name": name, "nargs": len(a), "kwargs": sorted((kw or {}).keys())})
            return func(*a, **(kw or {}))

    dev = "cuda" if args.device == "cuda" else "cpu"
    out, inp = torch.zeros(2 * dist.get_world_size(), device=dev), torch.ones(2, device=dev)
    with Probe():
        dist.all_gather_into_tensor(out, inp)
        dist.reduce_scatter_tensor(inp, out)
    return {"seen": seen, "torch": torch.__version__}


SCENARIOS = {"smoke": scenario_smoke, "divergence": scenario_divergence, "symm": scenario_symm,
             "captured": scenario_captured, "probe": scenario_probe}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--init", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--attn-dp", type=int, default=2)
    args = parser.parse_args()
    if args.device == "cuda":
        torch.cuda.set_device(args.rank % torch.cuda.device_count())
        backend = "nccl"
    else:
        backend = "gloo"
    kwargs = {}
    if args.device == "cuda":
        kwargs["device_id"] = torch.device("cuda", args.rank % torch.cuda.device_count())
    dist.init_process_group(
        backend, init_method=args.init, rank=args.rank, world_size=args.world, timeout=timedelta(seconds=60), **kwargs
    )
    try:
        result = {"ok": True, **SCENARIOS[args.scenario](args)}
    except BaseException:
        result = {"ok": False, "error": traceback.format_exc()}
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip process-group teardown: a timed-out gloo check must not hang exit


if __name__ == "__main__":
    main()
