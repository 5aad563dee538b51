"""CUDA memory made in a binding context, on one GPU (``rt_cuda_probe.py``, in a fresh process):
bound at the line that made it, through views, nested pool contexts, a project's profile context
and group class, and forgotten once freed. And the known limit of a shim in plain Python, on the
GPU and on the CPU: memory that compiled code (inductor's kernels) makes inside a context is not
seen, since no Python function of torch runs for it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from commgroup_lint import runtime  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE = os.path.join(HERE, "rt_cuda_probe.py")


def _marked(marker: str) -> int:
    with open(PROBE) as f:
        return next(i for i, text in enumerate(f, 1) if text.rstrip().endswith(f"# {marker}"))


@pytest.mark.gpu(devices=1)
@pytest.mark.slow
def test_cuda_memory_bound_in_contexts(tmp_path):
    out = tmp_path / "probe.json"
    proc = subprocess.run([sys.executable, PROBE, str(out)], cwd=HERE, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    cases = json.loads(out.read_text())["cases"]
    allocation = _marked("ALLOCATION")
    assert cases["right group"] == []
    assert cases["wrong group"] == [["CGL002", allocation, _marked("WRONG GROUP")]]
    assert cases["a view, wrong group"] == [["CGL002", allocation, _marked("VIEW")]]
    assert cases["reused the address"] is True
    assert cases["freed, then reused outside"] == []
    assert cases["nested pool context, wrong group"] == [["CGL002", _marked("OUTER") + 2, _marked("POOLED WRONG")]]
    # the known limit: inductor's kernels allocate in C++, where the shim does not look
    assert cases["made by compiled code in a context, wrong group"] == []
    assert cases["compiled output"] == 8192.0
    assert cases["profile context at each step, right group"] == []
    assert cases["profile context at each step, wrong group"] == [
        ["CGL002", _marked("STEP ALLOCATION 2"), _marked("STEP WRONG")]]
    assert cases["wrong calls between right ones"] == [["CGL002", _marked("HELD ALLOCATION"), _marked("REPEATED WRONG")]]
    assert cases["passed, then bound"] == [["CGL002", _marked("BOUND BY HAND"), _marked("AFTER BINDING")]]
    assert cases["group method compiled"] == [4096, []]


def _double(t: torch.Tensor) -> torch.Tensor:
    return (t * 2).relu()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None, reason="inductor's CPU kernels need a C++ compiler")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_known_limit_memory_made_by_inductor_kernels_in_a_context_is_not_seen(groups):
    a, b = groups
    runtime.clear_violations()
    torch._dynamo.reset()
    compiled = torch.compile(_double, fullgraph=True)  # inductor: its C++ kernel allocates the output
    with runtime.enforce("report") as ctx:
        with runtime.simulated_symmetric_memory(a, register=False):
            made = compiled(torch.ones(64))
            eager = _double(torch.ones(64))
        dist.all_reduce(made, group=b)  # not seen: bound nowhere
        dist.all_reduce(eager, group=b)  # the same work in eager code: seen
    assert [(v.code, v.line) for v in ctx.violations] == [("CGL002", _double.__code__.co_firstlineno + 1)]
    assert torch.equal(made, eager)
    torch._dynamo.reset()
