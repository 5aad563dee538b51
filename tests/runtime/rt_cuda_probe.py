"""One GPU, one process: CUDA memory made in a binding context is bound, and forgotten once freed.

Run by ``test_rt_cuda.py`` as ``python rt_cuda_probe.py OUT`` (an NCCL world of one rank, in a
fresh process). Two groups over that rank stand for the right and the wrong one. Writes OUT
(JSON): each case's violations as ``[code, line, collective line]``. The project's profile
context (``symmetric`` in ``mypkg_probe``, declared in its ``commgroup-lint.toml``) and group
class (``Coordinator``) are used at the steps of a model. Memory that inductor's kernels make
inside a context is not seen (the known limit of a shim in plain Python).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist

from commgroup_lint import runtime

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


def _double(t):
    return (t * 2).relu()


def _group_class(project, shim, cases, right, wrong) -> None:
    """Collectives of the project's group class and torch's: right calls pass, a wrong one
    between them is reported once, memory bound by hand after a pass is judged again, and a
    group class's method compiles (fullgraph) through the check."""
    coordinator = project.Coordinator(right)
    with project.symmetric(right):
        held = torch.ones(4096, device="cuda")  # HELD ALLOCATION
    for _ in range(3):
        coordinator.all_reduce(held)
        dist.all_reduce(held, group=wrong)  # REPEATED WRONG
        dist.all_reduce(held, group=right)
    cases["wrong calls between right ones"] = found(shim)
    plain = torch.ones(4096, device="cuda")
    dist.all_reduce(plain, group=wrong)  # unbound: passes
    runtime.bind_buffer(plain, right)  # BOUND BY HAND
    dist.all_reduce(plain, group=wrong)  # AFTER BINDING
    cases["passed, then bound"] = found(shim)
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
        for _ in range(5):  # a model's steps: the caching allocator hands out the same block
            with mypkg_probe.symmetric(right):
                step = torch.ones(4096, device="cuda")  # STEP ALLOCATION
            dist.all_reduce(step, group=right)
            del step
        cases["profile context at each step, right group"] = found(shim)
        with mypkg_probe.symmetric(right):
            step = torch.ones(4096, device="cuda")  # STEP ALLOCATION 2
        dist.all_reduce(step, group=wrong)  # STEP WRONG
        cases["profile context at each step, wrong group"] = found(shim)
        _group_class(mypkg_probe, shim, cases, right, wrong)
    torch.cuda.synchronize()
    result = {"cases": cases}
    with open(out_path, "w") as f:
        json.dump(result, f)
    sys.stdout.flush()
    os._exit(0)  # skip NCCL teardown


if __name__ == "__main__":
    main(sys.argv[1])
