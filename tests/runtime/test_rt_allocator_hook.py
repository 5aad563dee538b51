"""The allocation hook (``_allocator_hook``): on CUDA, what a binding context allocates is learnt
from the caching allocator, not from a function mode.

On the CPU, a stand-in with the extension's interface reports the blocks (the tests say when
the allocator hands one out or takes it back), so the Python side is checked: blocks bound to
the context's group at the context's line, nesting, and a freed block never taken for a later
one at its address. On one GPU, the real extension is built and attached in a fresh process
(``rt_hook_probe.py``), and the same program runs with the hook switched off. Only the hook
binds what compiled code (inductor) allocates inside a context."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from commgroup_lint import runtime  # noqa: E402
from commgroup_lint.runtime import _allocator_hook, _binding  # noqa: E402
from commgroup_lint.runtime._table import TABLE  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE = os.path.join(HERE, "rt_hook_probe.py")

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _stack(frame, depth: int) -> tuple:
    out = []
    while frame is not None and len(out) < depth:
        out.append((id(frame.f_code), frame.f_lineno))
        frame = frame.f_back
    return tuple(out)


class StandInHook:
    """``allocator_hook.cpp``'s interface and bookkeeping, in Python; ``allocated`` and ``freed``
    are the allocator's trace events (handing out the tensor's block again, the allocator
    reusing an address). ``bindings`` counts the calls of the binder: the steady state makes none."""

    def __init__(self) -> None:
        self.open_contexts = 0
        self.opened: list[tuple[int, int, int, bool]] = []  # (address, size, serial, handed out again)
        self.entries: dict[int, list] = {}  # address -> [serial, parked, key]
        self.gone: list[tuple[int, int]] = []
        self.next_serial = 1
        self.bindings = 0

    def allocated(self, tensor) -> None:
        addr, size = tensor.untyped_storage().data_ptr(), tensor.untyped_storage().nbytes()
        entry = self.entries.get(addr)
        if not self.open_contexts:
            if entry is not None:
                self.gone.append((addr, self.entries.pop(addr)[0]))
            return
        if entry is not None:
            entry[1] = False
            self.opened.append((addr, size, entry[0], True))
            return
        self.entries[addr] = [self.next_serial, False, None]
        self.opened.append((addr, size, self.next_serial, False))
        self.next_serial += 1

    def freed(self, tensor) -> None:
        entry = self.entries.get(tensor.untyped_storage().data_ptr())
        if entry is not None:
            entry[1] = True

    def open(self) -> int:
        self.open_contexts += 1
        return len(self.opened)

    def exit_frame(self, frames, index, binder, with_frame) -> None:
        group, pool, registered, mark = frames[index]
        self.open_contexts -= 1
        keyed = index == 0 and pool is None
        gone, self.gone, kept = self.gone, [], []
        for addr, size, serial, again in self.opened[mark:]:
            entry = self.entries.get(addr)
            if entry is None or entry[1] or entry[0] != serial:
                continue
            if again:
                key = entry[2]
                if keyed and key is not None and key[0] == (id(group), id(pool), id(registered)) \
                        and key[1] == _stack(with_frame, len(key[1])):
                    continue
                gone.append((addr, entry[0]))
                entry[0] = self.next_serial
                self.next_serial += 1
            entry[2] = None
            kept.append((addr, size, entry[0]))
        del self.opened[mark:]
        bound = frames[: index + 1]
        del frames[index]
        if not (gone or kept):
            return
        self.bindings += 1
        walked = binder(gone, kept, bound, with_frame)
        if keyed and 0 < walked <= 8:
            key = ((id(group), id(pool), id(registered)), _stack(with_frame, walked))
            for addr, _, serial in kept:
                if self.entries[addr][0] == serial:
                    self.entries[addr][2] = key

    def serial(self, addr: int) -> int:
        entry = self.entries.get(addr)
        return entry[0] if entry is not None and not entry[1] else 0


@pytest.fixture
def stand_in(monkeypatch):
    hook = StandInHook()
    monkeypatch.setattr(_allocator_hook.HookState, "native", hook)
    monkeypatch.setattr(_allocator_hook.HookState, "settled", True)
    monkeypatch.setattr(_allocator_hook.HookState, "context", None)  # its contexts: the shim's Python
    monkeypatch.setattr(TABLE, "block_serial", hook.serial)
    yield hook
    TABLE.buffers.clear()
    TABLE.kept.clear()


def _found(shim) -> list[tuple]:
    out = [(v.code, v.line, v.collective_line) for v in shim.violations]
    shim.violations.clear()
    return out


def _line() -> int:
    return sys._getframe(1).f_lineno


def test_blocks_are_bound_to_the_context_group_at_its_line(groups, stand_in):
    import torch.distributed as dist

    a, b = groups
    with runtime.enforce("report") as shim:
        with runtime.simulated_symmetric_memory(a, register=False):
            context = _line() - 1
            buf = torch.ones(64)
            stand_in.allocated(buf)
            assert torch._C._len_torch_function_stack() == 0  # no function mode
        dist.all_reduce(buf, group=a)
        assert _found(shim) == []
        dist.all_reduce(buf[8:], group=b)
        assert _found(shim) == [("CGL002", context, _line() - 1)]


def test_a_freed_block_is_not_taken_for_the_next_one_at_its_address(groups, stand_in):
    import torch.distributed as dist

    a, b = groups
    with runtime.enforce("report") as shim:
        with runtime.simulated_symmetric_memory(a, register=False):
            buf = torch.ones(64)
            stand_in.allocated(buf)
            temporary = torch.ones(64)
            stand_in.allocated(temporary)
            stand_in.freed(temporary)  # freed inside: never bound
        start = buf.untyped_storage().data_ptr()
        assert set(TABLE.buffers) == {start}
        stand_in.freed(buf)  # the allocator took the block back: the tensor stands for a later one
        assert TABLE.record_at(start) is None  # kept, but it does not count
        dist.all_reduce(buf, group=b)
        assert _found(shim) == []
        stand_in.allocated(buf)  # handed out again outside any context
        with runtime.simulated_symmetric_memory(b, register=False):
            pass
        assert TABLE.buffers == {}  # dropped at the next collection
        dist.all_reduce(buf, group=b)
        assert _found(shim) == []


@runtime.helper
def _allocate_under(group, buf, stand_in):
    """A helper's context (the site is its caller's line), handing out ``buf``'s block, as the
    caching allocator hands a step's context the same block at every step."""
    with runtime.simulated_symmetric_memory(group, register=False):
        stand_in.allocated(buf)
    return buf


def test_a_context_that_allocates_the_same_block_again_keeps_its_record(groups, stand_in):
    import torch.distributed as dist

    a, b = groups
    buf = torch.ones(64)
    with runtime.enforce("report") as shim:
        for step in range(3):  # a model's steps: one line allocates, the block is freed after use
            _allocate_under(a, buf, stand_in)
            first = _line() - 1
            dist.all_reduce(buf, group=b)
            stand_in.freed(buf)
        assert stand_in.bindings == 1  # bound at the first step; counted again at the next ones
        assert _found(shim) == [("CGL002", first, first + 2)]  # one bug, reported once
        for step in range(2):  # another line, same group: the record is made again, once
            _allocate_under(a, buf, stand_in)
            stand_in.freed(buf)
        assert stand_in.bindings == 2
        for group in (b, a):  # the same line under two groups: made again each time
            _allocate_under(group, buf, stand_in)
            stand_in.freed(buf)
        assert stand_in.bindings == 4
        stand_in.allocated(buf)  # the allocator hands the block to a context of group a, same stack
        assert stand_in.bindings == 4 and TABLE.record_at(buf.untyped_storage().data_ptr()) is None
        _allocate_under(a, buf, stand_in)
        again = _line() - 1
        assert stand_in.bindings == 5  # handed out outside a context in between: not counted again
        record = TABLE.record_at(buf.untyped_storage().data_ptr())
        assert record.alloc_group is a and record.site.line == again
        dist.all_reduce(buf, group=a)
        dist.all_reduce(buf, group=b)
        assert _found(shim) == [("CGL002", again, _line() - 1)]


def test_nested_frames_bind_as_the_mode_does(groups, stand_in):
    import torch.distributed as dist

    a, b = groups
    with runtime.enforce("report") as shim:
        pool = object()
        outer = _binding.start_pool_binding(pool)  # a pool context over a context naming a group
        with runtime.simulated_symmetric_memory(a, register=False):
            buf = torch.ones(64)
            stand_in.allocated(buf)
        assert set(TABLE.buffers) == {buf.untyped_storage().data_ptr()}  # collected as the inner frame closed
        _binding.end_binding(outer)
        record = TABLE.buffers[buf.untyped_storage().data_ptr()]
        assert record.alloc_group is a and record.registered is runtime._table.POOLS.of(pool)
        dist.all_reduce(buf, group=b)
        assert [code for code, *_ in _found(shim)] == ["CGL002"]


@pytest.fixture
def unsettled(monkeypatch):
    """The hook's state as in a fresh process."""
    monkeypatch.setattr(_allocator_hook.HookState, "attached", None)
    monkeypatch.setattr(_allocator_hook.HookState, "native", None)
    monkeypatch.setattr(_allocator_hook.HookState, "settled", False)
    monkeypatch.setattr(_allocator_hook.HookState, "context", None)
    monkeypatch.setattr(_allocator_hook.HookState, "configure", None)  # a stand-in has no C side
    monkeypatch.setattr(TABLE, "block_serial", None)


def test_switched_off_the_function_mode_binds_without_a_build(unsettled, monkeypatch):
    monkeypatch.setenv(_allocator_hook.HOOK_ENV_VAR, "0")
    monkeypatch.setattr(_allocator_hook, "_load", lambda torch: pytest.fail("built although switched off"))
    assert _allocator_hook.hook() is None and _allocator_hook.HookState.settled


def test_the_hook_binds_once_the_process_has_allocated_cuda_memory(unsettled, monkeypatch):
    # CUDA initialized (torch.compile does it, for instance) but no CUDA memory yet: a CPU
    # program's contexts, bound through the function mode; then CUDA memory: the hook.
    class Built(StandInHook):
        memory = None

        def attach(self, memory_in_use):
            self.memory = memory_in_use

        def in_use(self):
            return self.memory

    built = Built()
    monkeypatch.delenv(_allocator_hook.HOOK_ENV_VAR, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: 0)
    monkeypatch.setattr(_allocator_hook, "_load", lambda torch: built)
    assert _allocator_hook.hook() is None and not _allocator_hook.HookState.settled
    assert TABLE.block_serial == built.serial  # attached
    built.memory = True  # the allocator handed out a block
    assert _allocator_hook.hook() is built and _allocator_hook.HookState.settled


def test_a_failed_build_is_one_line_on_stderr_and_the_function_mode_binds(unsettled, monkeypatch, capsys):
    def failed_build(torch):
        raise RuntimeError("Error building extension 'commgroup_lint_allocator_hook': [1/2] g++ -c allocator_hook.cpp\n"
                           "allocator_hook.cpp:16:10: fatal error: cuda_runtime_api.h: No such file or directory\n"
                           "compilation terminated.")

    monkeypatch.delenv(_allocator_hook.HOOK_ENV_VAR, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(_allocator_hook, "_load", failed_build)
    assert _allocator_hook.hook() is None
    assert _allocator_hook.hook() is None  # settled: not tried again
    assert capsys.readouterr().err == (
        "commgroup-lint runtime: the CUDA allocation hook is not available (RuntimeError: allocator_hook.cpp:16:10: "
        "fatal error: cuda_runtime_api.h: No such file or directory); binding through the function mode "
        "(set COMMGROUP_LINT_RUNTIME_HOOK=0 to skip the build)\n")


def _probe(tmp_path, **env) -> dict:
    out = tmp_path / f"probe-{len(env)}.json"
    proc = subprocess.run([sys.executable, PROBE, str(out)], cwd=HERE, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


def _marked(marker: str) -> int:
    with open(PROBE) as f:
        return next(i for i, text in enumerate(f, 1) if text.rstrip().endswith(f"# {marker}"))


@pytest.mark.gpu(devices=1)
@pytest.mark.slow
@pytest.mark.parametrize("hooked", [True, False], ids=["hook", "function mode"])
def test_cuda_memory_bound_through_the_allocator_hook(tmp_path, hooked):
    result = _probe(tmp_path, **({} if hooked else {_allocator_hook.HOOK_ENV_VAR: "0"}))
    assert result["hook"] is hooked
    allocation = _marked("CONTEXT") if hooked else _marked("ALLOCATION")
    pooled = _marked("OUTER") if hooked else _marked("OUTER") + 2
    cases = result["cases"]
    assert cases["right group"] == []
    assert cases["wrong group"] == [["CGL002", allocation, _marked("WRONG GROUP")]]
    assert cases["a view, wrong group"] == [["CGL002", allocation, _marked("VIEW")]]
    assert cases["reused the address"] is True
    assert cases["freed, then reused outside"] == []
    assert cases["nested pool context, wrong group"] == [["CGL002", pooled, _marked("POOLED WRONG")]]
    # inductor's kernels allocate in C++: only the allocator sees their outputs
    compiled = [["CGL002", _marked("COMPILED CONTEXT"), _marked("COMPILED WRONG")]] if hooked else []
    assert cases["made by compiled code in a context, wrong group"] == compiled
    assert cases["compiled output"] == 8192.0
    # a project's profile context: under the hook, the extension's manager, binding the block
    # the first step allocates and counting the same block again at the next steps
    assert cases["profile context manager"] == ("Bound" if hooked else "_BoundContext")
    step = _marked("STEP CONTEXT 2") if hooked else _marked("STEP CONTEXT 2") + 1
    assert cases["profile context at each step, wrong group"] == [["CGL002", step, _marked("STEP WRONG")]]
    assert cases["bindings of the steps"] == (2 if hooked else 0)  # a new stack at the last one
    assert cases["step contexts entered through Python"] == (0 if hooked else 5)  # else the extension's entry
    # the extension's check: one pass found in Python, the other nine in C; a failing call and
    # one on memory bound since are judged in Python
    assert cases["native check"] is hooked
    if hooked:
        assert cases["passes found in Python, 10 right calls"] == 1
    wrong = _marked("REPEATED WRONG")
    held = _marked("HELD CONTEXT") if hooked else _marked("HELD CONTEXT") + 1
    assert cases["wrong calls between right ones"] == [[["CGL002", held, wrong]], 3]  # each judged in Python
    assert cases["cached pass, then bound"] == [["CGL002", _marked("BOUND BY HAND"), _marked("AFTER BINDING")]]
    assert cases["group method compiled"] == [4096, []]
