"""One GPU, one process: the allocation hook binds CUDA memory made in a context, and forgets it.

Run by ``test_rt_allocator_hook.py`` as ``python rt_hook_probe.py OUT`` (the hook attaches once
per process, so each run is a fresh one). On an NCCL world of one rank, two groups over it
stand for the right and the wrong one. Writes OUT (JSON): whether the hook was used, each
case's violations as ``[code, line, collective line]``, and the lines marked below. The last
case is a profile context of a project (``symmetric`` in ``mypkg_probe``, declared in its
``commgroup-lint.toml``) at the steps of a model: its manager's type, and how many times the
shim's Python bound what it allocated.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist

from commgroup_lint import runtime
from commgroup_lint.runtime import _allocator_hook, _binding, _shim, _targets

_PROJECT = {
    "mypkg_probe.py": "class _Symmetric:\n"
                      "    def __init__(self, group):\n"
                      "        self.group = group\n\n"
                      "    def __enter__(self):\n"
                      "        return self\n\n"
                      "    def __exit__(self, *exc):\n"
                      "        return False\n\n\n"
                      "def symmetric(group):\n"
                      "    return _Symmetric(group)\n"
                      "\n\nclass Coordinator:\n"
                      "    def __init__(self, group):\n"
                      "        self.device_group = group\n\n"
                      "    def all_reduce(self, t):\n"
                      "        import torch.distributed as dist\n\n"
                      "        dist.all_reduce(t, group=self.device_group)\n"
                      "        return t\n",
    "commgroup-lint.toml": '[extend-profile.contexts."mypkg_probe.symmetric"]\nparam = "group"\nindex = 0\n\n'
                           '[extend-profile.runtime.group_classes."mypkg_probe.Coordinator"]\n'
                           'group_attr = "device_group"\n',
}
BINDINGS = [0]
PASSES = [0]


def _counted(bind):
    """The shim's binding of what a context's frame collected, counted."""
    def bind_collected(*args):
        BINDINGS[0] += 1
        return bind(*args)
    return bind_collected


def _project() -> None:
    """Write the project and work in it: the shim reads its configuration."""
    root = tempfile.mkdtemp()
    for name, text in _PROJECT.items():
        with open(os.path.join(root, name), "w") as f:
            f.write(text)
    os.chdir(root)
    sys.path.insert(0, root)


def found(shim) -> list[list]:
    out = [[v.code, v.line, v.collective_line] for v in shim.violations]
    shim.violations.clear()
    return out


def _counted_passes(remember):
    """The extension's cache told of a pass found in Python, counted."""
    def counted(*args):
        PASSES[0] += 1
        return remember(*args)
    return counted


def _double(t):
    return (t * 2).relu()


def _native_checks(project, shim, cases, right, wrong) -> None:
    """Collectives decided by the extension's check: a pass found in Python once, then in C;
    a failing call never cached; a cached pass forgotten once the memory is bound; a group
    class's method compiled (fullgraph) through the check."""
    from commgroup_lint.runtime._native import Native

    cases["native check"] = Native.check is not None
    if Native.remember is not None:
        Native.remember = _counted_passes(Native.remember)
    coordinator = project.Coordinator(right)
    with project.symmetric(right):  # HELD CONTEXT
        held = torch.ones(4096, device="cuda")
    before = PASSES[0]
    for _ in range(5):
        coordinator.all_reduce(held)
        dist.all_reduce(held, group=right)
    cases["passes found in Python, 10 right calls"] = PASSES[0] - before
    judged, verdicts = [], _shim.Shim.verdicts.__code__  # counted by a profiler: no frame of the probe's
    sys.setprofile(lambda frame, event, arg: judged.append(1) if event == "call" and frame.f_code is verdicts else None)
    for _ in range(3):
        dist.all_reduce(held, group=wrong)  # REPEATED WRONG
        dist.all_reduce(held, group=right)
    sys.setprofile(None)
    cases["wrong calls between right ones"] = [found(shim), len(judged)]
    plain = torch.ones(4096, device="cuda")
    dist.all_reduce(plain, group=wrong)  # unbound: passes, and the pass is cached
    runtime.bind_buffer(plain, right)  # BOUND BY HAND
    dist.all_reduce(plain, group=wrong)  # AFTER BINDING
    cases["cached pass, then bound"] = found(shim)
    compiled = torch.compile(lambda t: coordinator.all_reduce(t * 2), fullgraph=True)
    out = compiled(held)
    cases["group method compiled"] = [out.shape[0], found(shim)]


def main(out_path: str) -> None:
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method="file://" + os.path.join(tempfile.mkdtemp(), "store"), rank=0,
                            world_size=1, device_id=torch.device("cuda", 0))
    right, wrong = dist.new_group([0]), dist.new_group([0])
    torch.zeros(1, device="cuda")  # CUDA is in use before the first context, as in a model
    _project()
    import mypkg_probe

    _binding._bind_collected = _counted(_binding._bind_collected)
    cases = {}
    with runtime.enforce("report") as shim:
        with runtime.simulated_symmetric_memory(right, register=False):  # CONTEXT
            buf = torch.ones(4096, device="cuda")  # ALLOCATION
            scratch = torch.zeros(4096, device="cuda") * 2  # a temporary, freed inside
            del scratch
        dist.all_reduce(buf, group=right)
        cases["right group"] = found(shim)
        dist.all_reduce(buf, group=wrong)  # WRONG GROUP
        cases["wrong group"] = found(shim)
        dist.all_reduce(buf[1024:], group=wrong)  # VIEW
        cases["a view, wrong group"] = found(shim)
        address = buf.data_ptr()
        del buf
        reused = [torch.empty(4096, device="cuda") for _ in range(4)]  # memory handed out again, unbound
        for t in reused:
            dist.all_reduce(t, group=wrong)
        cases["freed, then reused outside"] = found(shim)
        cases["reused the address"] = any(t.data_ptr() == address for t in reused)
        with runtime.simulated_symmetric_memory(right, register=False):  # OUTER
            with torch.cuda.use_mem_pool(torch.cuda.MemPool()):
                pooled = torch.ones(2048, device="cuda")
        dist.all_reduce(pooled, group=wrong)  # POOLED WRONG
        cases["nested pool context, wrong group"] = found(shim)
        double = torch.compile(_double, fullgraph=True)  # inductor: its kernels allocate in C++
        with runtime.simulated_symmetric_memory(right, register=False):  # COMPILED CONTEXT
            made = double(torch.ones(4096, device="cuda"))
        dist.all_reduce(made, group=wrong)  # COMPILED WRONG
        cases["made by compiled code in a context, wrong group"] = found(shim)
        cases["compiled output"] = made.sum().item()
        cases["profile context manager"] = type(mypkg_probe.symmetric(right)).__name__
        before = BINDINGS[0]
        rests = [c for f in (_targets._context_function, _targets._pool_context_function)
                 for c in f.__code__.co_consts if getattr(c, "co_name", "") == "rest"]
        decided_in_python = []
        sys.setprofile(lambda frame, event, arg: decided_in_python.append(1)
                       if event == "call" and frame.f_code in rests else None)
        for _ in range(5):  # a model's steps: the caching allocator hands out the same block
            with mypkg_probe.symmetric(right):  # STEP CONTEXT
                step = torch.ones(4096, device="cuda")
            del step
        sys.setprofile(None)
        cases["step contexts entered through Python"] = len(decided_in_python)
        with mypkg_probe.symmetric(right):  # STEP CONTEXT 2
            step = torch.ones(4096, device="cuda")
        dist.all_reduce(step, group=wrong)  # STEP WRONG
        cases["profile context at each step, wrong group"] = found(shim)
        cases["bindings of the steps"] = BINDINGS[0] - before
        _native_checks(mypkg_probe, shim, cases, right, wrong)
    torch.cuda.synchronize()
    result = {"hook": _allocator_hook.HookState.native is not None, "cases": cases}
    with open(out_path, "w") as f:
        json.dump(result, f)
    sys.stdout.flush()
    os._exit(0)  # skip NCCL teardown


if __name__ == "__main__":
    main(sys.argv[1])
