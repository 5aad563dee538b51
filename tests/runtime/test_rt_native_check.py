"""The extension's fast paths (``runtime/collective_check.cpp``, ``runtime/context_entry.cpp``),
built on the CPU with a stand-in for the CUDA allocator's header (``native_build.py``): a pass
found in Python is decided in C from then on, and anything that could change a verdict sends
the call back to Python; a profile context's usual entry is decided in C. On one gloo rank,
where two groups over the same rank are two groups."""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import textwrap
import threading
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from commgroup_lint import runtime  # noqa: E402
from commgroup_lint.runtime import _allocator_hook, _binding, _knowledge, _shim, _targets  # noqa: E402
from commgroup_lint.runtime._table import TABLE  # noqa: E402
from commgroup_lint.runtime._native import Native  # noqa: E402
from commgroup_lint.runtime._state import TLS, keep_counts_in  # noqa: E402
from native_build import play_allocator  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

ENGINE = textwrap.dedent(
    """\
    import contextlib

    import torch.distributed as dist


    class Pool:
        def snapshot(self):  # lists its segments, as a CUDA MemPool does
            return []


    @contextlib.contextmanager
    def use_pool(pool):
        yield


    class Symmetric:
        def __init__(self, group):
            self.group = group

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False


    def symmetric(group, disabled=False):
        return Symmetric(group)


    def described(group, spec=None):  # a parameter named as one of the extension entry's own
        return Symmetric(group)


    POOL = Pool()


    class SymmetricOverPool(Symmetric):  # enters a pool context inside, as the engines' contexts do
        def __enter__(self):
            self.pool_context = use_pool(POOL)
            self.pool_context.__enter__()
            return self

        def __exit__(self, *exc):
            return self.pool_context.__exit__(*exc)


    def symmetric_over_pool(group):
        return SymmetricOverPool(group)


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

    [tool.commgroup-lint.extend-profile.contexts."cglnative.symmetric"]
    param = "group"
    index = 0
    disabled = "disabled"

    [tool.commgroup-lint.extend-profile.contexts."cglnative.described"]
    param = "group"
    index = 0

    [tool.commgroup-lint.extend-profile.contexts."cglnative.symmetric_over_pool"]
    param = "group"
    index = 0

    [tool.commgroup-lint.extend-profile.pool_contexts."cglnative.use_pool"]
    param = "pool"
    index = 0
    """
)


@pytest.fixture(scope="module")
def native(cpu_extension):
    module = cpu_extension
    assert _binding.use_fast_paths(module)
    yield module
    for name in ("check", "remember", "has_torch_function", "handle_torch_function", "set_handle", "group_context",
                 "pool_context"):
        setattr(Native, name, None)
    keep_counts_in(None)


@pytest.fixture
def passes_found(native, monkeypatch):
    """How many passes the check in Python has told the extension of."""
    told = []
    remember = Native.remember
    monkeypatch.setattr(Native, "remember", lambda *args: (told.append(args), remember(*args)))
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


@contextlib.contextmanager
def _entered_through_python():
    """A list with one item for each profile context entered through the wrapper's Python
    (its ``rest``) meanwhile, not decided by the extension."""
    rests = {c for f in (_targets._context_function, _targets._pool_context_function)
             for c in f.__code__.co_consts if getattr(c, "co_name", "") == "rest"}
    entered = []
    sys.setprofile(lambda frame, event, arg: entered.append(1) if event == "call" and frame.f_code in rests else None)
    try:
        yield entered
    finally:
        sys.setprofile(None)


class Manager:
    """Stands for the extension's manager (``Bound``, which binds through the CUDA hook)."""

    def __init__(self, inner, group):
        self.inner, self.group = inner, group


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


def test_the_threads_counts_are_kept_in_c(groups, native, passes_found, engine, monkeypatch) -> None:
    """``TLS.depth`` is the extension's count: a collective checked in Python or in C counts as
    running in both; each thread has its own count, never below 0, carried over when moved."""
    a, _ = groups
    seen = []
    monkeypatch.setattr(engine, "dist", types.SimpleNamespace(all_reduce=lambda t, group: seen.append(TLS.depth)))
    with runtime.enforce("report"):
        with runtime.simulated_symmetric_memory(a):
            buf = torch.ones(64)
        coordinator = engine.Coordinator(a)
        coordinator.all_reduce(buf)  # judged in Python
        coordinator.all_reduce(buf)  # decided in C
    assert seen == [1, 1] and len(passes_found) == 1 and TLS.depth == 0
    other = []
    thread = threading.Thread(target=lambda: other.append(TLS.depth))
    TLS.depth = 2
    try:
        thread.start()
        thread.join()
        keep_counts_in(None)
        assert TLS.depth == 2 and other == [0]
    finally:
        keep_counts_in(native)
    assert TLS.depth == 2  # carried over into C
    kept = vars(type(TLS))["depth"]
    keep_counts_in(native)  # kept there already: nothing changes
    assert vars(type(TLS))["depth"] is kept and TLS.depth == 2
    TLS.depth -= 5
    assert TLS.depth == 0


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


def test_torch_dispatch_hooks_are_the_extensions_while_installed_and_torchs_after(groups, native) -> None:
    """A collective that hands itself to torch's function machinery reaches its check through
    the extension's two hooks, under any name: it needs no wrapper (torch.compile sees torch's
    own function, and a group class's method that calls it pays for no wrapper's frame).
    Handed over with positional arguments alone, it is checked on the default group."""
    a, b = groups
    c10d = dist.distributed_c10d
    has, handle, all_reduce = c10d.has_torch_function, c10d.handle_torch_function, dist.all_reduce
    with runtime.simulated_symmetric_memory(a):
        buf = torch.ones(8)
    with runtime.enforce("report") as shim:
        assert c10d.has_torch_function is native.has_torch_function
        assert c10d.handle_torch_function is native.handle_torch_function
        assert dist.all_reduce is all_reduce and c10d.all_reduce is all_reduce
        assert native.has_torch_function((torch.ones(1),)) is True  # not checked yet: to the shim
        dist.all_reduce(buf, group=b); called = _line()  # noqa: E702
        c10d.handle_torch_function(all_reduce, (buf,), buf); handed = _line()  # noqa: E702
        assert [(f[0], f[2], f[3], f[4]) for f in _found(shim)] == [("CGL002", called, "a", "b"),
                                                                    ("CGL002", handed, "a", "world")]
    assert (c10d.has_torch_function, c10d.handle_torch_function) == (has, handle)


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


def test_a_profile_context_naming_a_group_is_entered_in_c(groups, native, engine, monkeypatch) -> None:
    """Its manager comes back over the engine's with the group: a ProcessGroup, or the group of
    a wrapper whose type was seen before; switched off, the engine's manager as it is."""
    a, _ = groups
    monkeypatch.setattr(_allocator_hook.HookState, "context", Manager)
    coordinator = engine.Coordinator(a)
    with runtime.enforce("report"), _entered_through_python() as entered:
        made = [engine.symmetric(a), engine.symmetric(group=a), engine.symmetric(coordinator),
                engine.symmetric(coordinator), engine.symmetric(a, disabled=True), engine.symmetric(a, True)]
    assert [type(m).__name__ for m in made] == ["Manager"] * 4 + ["Symmetric"] * 2
    assert all(m.group is a and type(m.inner) is engine.Symmetric for m in made[:4])
    assert len(entered) == 1  # the first wrapper: its type learnt in Python



def test_the_class_attributes_read_in_c_follow_their_classes(groups, native, engine, monkeypatch) -> None:
    """The extension keeps ``Active.shim`` and ``HookState.context`` while their classes are
    unchanged (``class_attribute.h``): a change of either is seen at the next call."""
    a, _ = groups

    class Other(Manager):
        pass

    monkeypatch.setattr(_allocator_hook.HookState, "context", Manager)
    with runtime.enforce("report"):
        made = [engine.symmetric(a), engine.symmetric(a)]
        monkeypatch.setattr(_allocator_hook.HookState, "context", Other)
        made.append(engine.symmetric(a))
    made.append(engine.symmetric(a))  # no shim
    with runtime.enforce("report"):
        made.append(engine.symmetric(a))
    assert [type(m).__name__ for m in made] == ["Manager", "Manager", "Other", "Symmetric", "Other"]


def test_a_profile_context_in_a_module_is_a_c_call_while_the_extension_is_in_use(groups, native, engine,
                                                                                 monkeypatch) -> None:
    """Its wrapper is a ``functools.partial`` over the extension's entry, which reads as the
    function it wraps; a shim installed before the extension was in use switches to it once
    it is; uninstalled, the module holds the engine's function again."""
    a, _ = groups
    original = engine.symmetric
    entries = Native.group_context, Native.pool_context
    monkeypatch.setattr(Native, "group_context", None)
    monkeypatch.setattr(Native, "pool_context", None)
    with runtime.enforce("report"):
        assert type(engine.symmetric) is not functools.partial  # the extension not in use yet
        _targets.use_native(native)  # the hook settles while this shim binds
        form = engine.symmetric
        assert type(form) is functools.partial and form.func is entries[0]
        assert (form.__wrapped__, form.__name__) == (original, "symmetric")
        assert inspect.signature(form) == inspect.signature(original)
        assert type(engine.use_pool) is functools.partial and engine.use_pool.func is entries[1]
        with runtime.enforce("report"):  # a shim installed now takes the C form at once
            assert type(engine.symmetric) is functools.partial
    assert engine.symmetric is original


def test_a_profile_context_called_in_compiled_code_is_traced_as_its_function(groups, native, engine) -> None:
    """torch.compile traces the C form as the engine's call (fullgraph: no graph break)."""
    a, _ = groups

    def step(t):
        engine.symmetric(a, disabled=True)
        engine.described(a, spec="s")
        return t * 2

    with runtime.enforce("report"):
        assert type(engine.symmetric) is type(engine.described) is functools.partial
        out = torch.compile(step, backend="eager", fullgraph=True)(torch.ones(4))
    assert out.tolist() == [2.0] * 4


def test_a_context_whose_switch_cannot_be_read_raises_and_frees_its_manager(groups, native, engine,
                                                                            monkeypatch) -> None:
    """``bool()`` of the ``disabled`` argument raises (a tensor of two values): the call raises
    it, and the engine's manager it made is released."""
    a, _ = groups
    freed = []
    monkeypatch.setattr(_allocator_hook.HookState, "context", Manager)
    monkeypatch.setattr(engine.Symmetric, "__del__", lambda self: freed.append(1), raising=False)
    with runtime.enforce("report"):
        with pytest.raises(RuntimeError, match="ambiguous"):
            engine.symmetric(a, disabled=torch.ones(2))
    assert freed == [1]

@pytest.fixture
def hooked(native, monkeypatch):
    """The built extension as the process's allocation hook, its allocator played by the test:
    ``allocate(t)`` and ``free(t)`` report ``t``'s memory as a block handed out or freed, as
    the CUDA caching allocator tells its trace tracker. ``bindings``: how many times a
    context's exit bound blocks in Python."""
    bindings = []
    bind = _binding._bind_collected
    monkeypatch.setattr(_binding, "_bind_collected", lambda *args: (bindings.append(1), bind(*args))[1])
    event = play_allocator(native, monkeypatch.setattr)
    blocks = set()

    def allocate(t):
        block = (t.data_ptr(), t.untyped_storage().nbytes())
        blocks.add(block)
        event(1, *block)

    yield types.SimpleNamespace(allocate=allocate, free=lambda t: event(0, t.data_ptr(), t.untyped_storage().nbytes()),
                                bindings=bindings)
    # The hook keeps a block's records under its keys, and the table is cleared below: each block
    # is handed out once more outside any context, where the hook forgets it, so that the next
    # test's tensor at the same address (and the same helper's stack) is a new block.
    for block in blocks:
        event(1, *block)
    TABLE.buffers.clear()
    TABLE.kept.clear()


def test_a_pool_context_inside_a_group_context_is_returned_as_it_is(groups, hooked, engine) -> None:
    """While a context naming a group is being entered (by the extension's manager or the
    shim's: both count in C), a pool context over a pool that lists its segments gets no
    binding of its own, decided in C; alone, it binds (in Python)."""
    a, _ = groups
    with runtime.enforce("report"), _entered_through_python() as entered:
        with engine.symmetric_over_pool(a) as in_c:
            pass
        binds = _targets._Binds(lambda args, kwargs: a, start=lambda target: None, end=lambda frame: None)
        with _targets._BoundContext(engine.SymmetricOverPool(a), binds, a) as in_python:  # it counts in OPENING
            pass
        alone = engine.use_pool(engine.POOL)
    assert type(in_c).__name__ == "SymmetricOverPool"
    assert type(in_c.pool_context).__name__ == "_GeneratorContextManager"
    assert type(in_python.pool_context).__name__ == "_GeneratorContextManager"
    assert type(alone).__name__ == "_BoundContext"
    assert len(entered) == 1  # the one alone


def _handed_out(t, group, engine, hooked) -> None:
    """``t``'s memory handed out by the allocator inside a profile context over ``group``, from
    one call stack (a model's step)."""
    with engine.symmetric(group):
        hooked.allocate(t)


def test_the_hook_binds_a_context_block_at_the_with_line(groups, hooked, engine) -> None:
    a, b = groups
    with runtime.enforce("report") as shim:
        with engine.symmetric(a):  # the extension's manager, entered in C
            t = torch.ones(64); hooked.allocate(t)  # noqa: E702
        opened = _line() - 2
        dist.all_reduce(t, group=a)
        dist.all_reduce(t, group=b); collective = _line()  # noqa: E702
        assert _found(shim) == [("CGL002", opened, collective, "a", "b")]
    assert len(hooked.bindings) == 1


def test_a_block_handed_out_again_in_the_same_context_keeps_its_record(groups, hooked, engine) -> None:
    """A model's steps: the same block in the same context from the same stack binds once; the
    same block under another group is bound again."""
    a, b = groups
    t = torch.ones(64)
    with runtime.enforce("report") as shim:
        for _ in range(4):
            _handed_out(t, a, engine, hooked)
            dist.all_reduce(t, group=a)
            hooked.free(t)
        assert len(hooked.bindings) == 1
        _handed_out(t, b, engine, hooked)
        dist.all_reduce(t, group=a); collective = _line()  # noqa: E702
        assert [f[2:] for f in _found(shim)] == [(collective, "b", "a")]
    assert len(hooked.bindings) == 2


def test_a_block_handed_out_under_groups_in_turn_keeps_a_record_for_each(groups, hooked, engine,
                                                                          passes_found) -> None:
    """The engines' global DP buffer: one block, handed out under one group's context and then
    under another's at every step. Each binds once; from then on the hook brings the record of
    the context that has the block back, and the collectives on it are decided in C."""
    a, b = groups
    t = torch.ones(64)
    with runtime.enforce("report") as shim:
        for _ in range(4):
            for group in (a, b):
                _handed_out(t, group, engine, hooked)
                dist.all_reduce(t, group=group)
                hooked.free(t)
        assert _found(shim) == []
        assert len(hooked.bindings) == 2
        assert len(passes_found) == 2  # one pass found in Python under each record
        _handed_out(t, b, engine, hooked)
        dist.all_reduce(t, group=a); collective = _line()  # noqa: E702
        assert [f[2:] for f in _found(shim)] == [(collective, "b", "a")]
    assert len(hooked.bindings) == 2
