"""The extension's collective check (``runtime/collective_check.cpp``), built on the CPU with a
stand-in for the CUDA allocator's header (``native_build.py``): a pass found in Python is
decided in C from then on, and anything that could change a verdict sends the call back to
Python. On one gloo rank, where two groups over the same rank are two groups."""

from __future__ import annotations

import contextlib
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from commgroup_lint import runtime  # noqa: E402
from commgroup_lint.runtime import _check, _knowledge, _shim  # noqa: E402
from native_build import build, compiler  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

ENGINE = textwrap.dedent(
    """\
    import torch.distributed as dist


    class Coordinator:
        def __init__(self, group):
            self.device_group = group

        def all_reduce(self, t):
            dist.all_reduce(t, group=self.device_group)
            return t
    """
)
CONFIG = textwrap.dedent(
    """\
    [tool.commgroup-lint.extend-profile.runtime.group_classes."cglnative.Coordinator"]
    group_attr = "device_group"
    """
)


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    if compiler() is None:
        pytest.skip("no C++ compiler to build the extension with")
    module = build(tmp_path_factory.mktemp("native"))
    _check.use_native(module)
    yield module
    _check.Native.check = _check.Native.remember = _check.Native.has_torch_function = None


@pytest.fixture
def passes_found(native, monkeypatch):
    """How many passes the check in Python has told the extension of."""
    told = []
    remember = _check.Native.remember
    monkeypatch.setattr(_check.Native, "remember", lambda *args: (told.append(args), remember(*args)))
    return told


@pytest.fixture
def engine(tmp_path: Path, monkeypatch):
    (tmp_path / "cglnative.py").write_text(ENGINE)
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(_knowledge.PROFILE_ENV_VAR, raising=False)
    import cglnative

    yield cglnative
    del sys.modules["cglnative"]


@contextlib.contextmanager
def _judged():
    """A list with one item for each collective judged in Python (``Shim.verdicts``) meanwhile:
    counted by a profiler, which puts no frame of this file on the stack the shim reads."""
    judged = []
    code = _shim.Shim.verdicts.__code__
    sys.setprofile(lambda frame, event, arg: judged.append(1) if event == "call" and frame.f_code is code else None)
    try:
        yield judged
    finally:
        sys.setprofile(None)


def _line() -> int:
    return sys._getframe(1).f_lineno


def _found(shim) -> list[tuple]:
    found = [(v.code, v.line, v.collective_line, v.buffer_group, v.collective_group) for v in shim.violations]
    shim.violations.clear()
    return found


def test_a_pass_found_in_python_is_decided_in_c_from_then_on(groups, passes_found, engine) -> None:
    a, _ = groups
    with runtime.enforce("report") as shim:
        with runtime.simulated_symmetric_memory(a):
            buf = torch.ones(64)
        coordinator = engine.Coordinator(a)
        for _ in range(4):
            coordinator.all_reduce(buf)  # the group class's check, then torch's (nested: not checked)
            dist.all_reduce(buf, group=a)
            dist.all_reduce(buf, dist.ReduceOp.SUM, a)  # the group by position
        assert _found(shim) == []
    assert len(passes_found) == 1  # the first call; the other eleven were decided in C
    assert torch.equal(buf, torch.ones(64))  # one rank: the all-reduces leave it as it was


def test_a_failing_call_reaches_python_every_time(groups, passes_found) -> None:
    a, b = groups
    with runtime.enforce("report") as shim:
        with runtime.simulated_symmetric_memory(a):
            buf = torch.ones(64); allocated = _line()  # noqa: E702
        with _judged() as judged:
            for _ in range(3):
                dist.all_reduce(buf, group=a)
                dist.all_reduce(buf, group=b); wrong = _line()  # noqa: E702
            dist.all_reduce(buf[8:], group=b); view = _line()  # noqa: E702
        # each call judged in Python; each violation recorded once
        assert _found(shim) == [("CGL002", allocated, wrong, "a", "b"), ("CGL002", allocated, view, "a", "b")]
    assert judged == [1] * 4
    assert len(passes_found) == 1


def test_a_cached_pass_is_forgotten_once_the_memory_is_bound(groups, passes_found) -> None:
    a, b = groups
    with runtime.enforce("report") as shim:
        plain = torch.ones(64)
        dist.all_reduce(plain, group=b)  # unbound: passes, and the pass is cached
        dist.all_reduce(plain, group=b)
        runtime.bind_buffer(plain, a); bound = _line()  # noqa: E702
        dist.all_reduce(plain, group=b); collective = _line()  # noqa: E702
        assert _found(shim) == [("CGL002", bound, collective, "a", "b")]
    assert len(passes_found) == 1


def test_a_pass_holds_while_its_own_record_does(groups, passes_found) -> None:
    """Memory bound elsewhere leaves a cached pass standing; the record at its own address
    replaced (its memory bound again, to another group) does not."""
    a, b = groups
    with runtime.enforce("report") as shim:
        with runtime.simulated_symmetric_memory(a):
            buf = torch.ones(64)
        dist.all_reduce(buf, group=a)
        with runtime.simulated_symmetric_memory(b):
            other = torch.ones(64)
        dist.all_reduce(buf, group=a)
        assert len(passes_found) == 1
        runtime.bind_buffer(buf, b); rebound = _line()  # noqa: E702
        dist.all_reduce(buf, group=a); collective = _line()  # noqa: E702
        assert _found(shim) == [("CGL002", rebound, collective, "b", "a")]
        dist.all_reduce(other, group=b)
    assert len(passes_found) == 2  # the first call, and the other buffer's


def test_another_shim_starts_from_python(groups, passes_found) -> None:
    a, _ = groups
    with runtime.simulated_symmetric_memory(a):
        buf = torch.ones(64)
    for _ in range(2):
        with runtime.enforce("report") as shim:
            dist.all_reduce(buf, group=a)
            dist.all_reduce(buf, group=a)
            assert shim.violations == []
    assert len(passes_found) == 2


def test_has_torch_function_is_the_extensions_while_installed_and_torchs_after(groups, native) -> None:
    c10d = dist.distributed_c10d
    original = c10d.has_torch_function
    with runtime.enforce("report"):
        assert c10d.has_torch_function is native.has_torch_function
        assert native.has_torch_function((torch.ones(1),)) is True  # not checked yet: to the shim
    assert c10d.has_torch_function is original


def test_a_group_class_method_compiles_through_the_check(groups, passes_found, engine) -> None:
    """torch.compile traces the extension's check as the call of the method itself (fullgraph:
    no graph break), and the compiled code's collective is checked when it runs."""
    a, b = groups
    compiled = torch.compile(lambda c, t: c.all_reduce(t * 2), backend="eager", fullgraph=True)
    with runtime.enforce("report") as shim:
        with runtime.simulated_symmetric_memory(a):
            buf = torch.ones(64); allocated = _line()  # noqa: E702
        out = compiled(engine.Coordinator(a), buf)
        assert torch.equal(out, torch.full((64,), 2.0))
        assert _found(shim) == []
        engine.Coordinator(b).all_reduce(buf); collective = _line()  # noqa: E702
        assert [f[:3] for f in _found(shim)] == [("CGL002", allocated, collective)]
