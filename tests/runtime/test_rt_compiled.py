"""Compiled code: ``torch.compile`` turns ``dist.all_reduce`` into a functional collective that
the compiled graph calls directly; the shim checks it there, at the allocation line, with the
compiled function's outputs unchanged and no graph break (``fullgraph=True`` compiles)."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.distributed._functional_collectives as funcol  # noqa: E402

from commgroup_lint import runtime  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _line() -> int:
    return sys._getframe(1).f_lineno


def _step(x: torch.Tensor, buf: torch.Tensor, group) -> torch.Tensor:
    y = x * 2
    dist.all_reduce(buf, group=group)
    return y + buf


@pytest.fixture(autouse=True)
def _clean():
    runtime.clear_violations()
    torch._dynamo.reset()
    yield
    runtime.clear_violations()


def test_a_wrong_group_all_reduce_in_compiled_code_is_caught(groups) -> None:
    a, b = groups
    compiled = torch.compile(_step, backend="aot_eager", fullgraph=True)
    x = torch.arange(8.0)
    with runtime.simulated_symmetric_memory(a):
        buf = torch.ones(8); line = _line()  # noqa: E702
    plain = compiled(x, buf.clone(), b)
    with runtime.enforce("report") as ctx:
        checked = compiled(x, buf, b)
        compiled(x, buf, a)
    [v] = ctx.violations
    assert (v.code, v.line, v.collective, v.buffer_group, v.collective_group) == ("CGL002", line, "all_reduce", "a", "b")
    # compiled code keeps no frame per line: the collective is placed at the compiled function
    assert (v.collective_path, v.collective_line) == (__file__, _step.__code__.co_firstlineno)
    assert torch.equal(checked.view(torch.int32), plain.view(torch.int32))


def test_functional_collectives_are_checked_in_eager_code_too(groups) -> None:
    a, b = groups
    with runtime.simulated_symmetric_memory(a):
        buf = torch.ones(4); line = _line()  # noqa: E702
    with runtime.enforce("report") as ctx:
        out = funcol.wait_tensor(funcol.all_reduce(buf, "sum", b))
        funcol.wait_tensor(funcol.all_gather_tensor(buf, 0, a))
    assert [(v.code, v.line, v.collective) for v in ctx.violations] == [("CGL002", line, "all_reduce")]
    assert out.tolist() == [1.0] * 4


def _double(t: torch.Tensor) -> torch.Tensor:
    return (t * 2).relu()


def test_compiled_code_called_inside_a_binding_context_compiles_and_binds(groups) -> None:
    # The function mode that binds inside contexts stands aside while the compiler traces: a
    # fullgraph compile inside a context compiled (and raised Unsupported) through it before.
    a, b = groups
    compiled = torch.compile(_double, backend="aot_eager", fullgraph=True)
    with runtime.enforce("report") as ctx:
        with runtime.simulated_symmetric_memory(a, register=False):
            x = torch.ones(8); line = _line()  # noqa: E702
            out = compiled(x)
        dist.all_reduce(x, group=b)
        dist.all_reduce(out, group=b)
    assert torch.equal(out, _double(torch.ones(8)))
    # the graph's ops run at the compiled function's first line (its frame keeps no other)
    assert [(v.code, v.line) for v in ctx.violations] == [("CGL002", line), ("CGL002", _double.__code__.co_firstlineno)]
