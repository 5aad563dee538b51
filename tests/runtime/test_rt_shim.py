"""The shim in one process: a world of one gloo rank, where two groups over the same rank are
still two groups (identity, not membership)."""

from __future__ import annotations

import gc
import os
import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
from torch.distributed import all_reduce as all_reduce_imported_early  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402

from commgroup_lint import runtime  # noqa: E402
from commgroup_lint.profile import Profile  # noqa: E402
from commgroup_lint.runtime import _collectives, _shim  # noqa: E402
from commgroup_lint.runtime._knowledge import Knowledge  # noqa: E402
from commgroup_lint.runtime._table import TABLE  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


@pytest.fixture(autouse=True)
def _clean():
    runtime.clear_violations()
    yield
    runtime.clear_violations()


def _bound(group, *shape):
    with runtime.simulated_symmetric_memory(group):
        return torch.ones(*shape)


def test_same_ranks_different_groups_is_a_mismatch(groups):
    a, b = groups
    buf = _bound(a, 8)
    with runtime.enforce("report") as ctx:
        dist.all_reduce(buf, group=b)
        dist.all_reduce(buf, group=a)
    assert [v.code for v in ctx.violations] == ["CGL002"]
    v = ctx.violations[0]
    assert v.buffer_group == "a" and v.collective_group == "b"
    assert v.path == os.path.realpath(__file__) or v.path == __file__
    assert v.message.startswith("CGL002 buffer bound to group 'a' (allocated at ")


def test_allocation_site_is_the_callers_line(groups):
    a, b = groups
    buf = _bound(a, 4); line = _line()  # noqa: E702
    with runtime.enforce("report") as ctx:
        dist.all_reduce(buf, group=b)
    # the site is the line calling the helper ``_bound`` only if it is declared a helper;
    # undeclared, it is the line inside ``_bound`` that allocated.
    assert ctx.violations[0].line != line
    helper_bound = runtime.helper(_bound_helper)
    runtime.clear_violations()
    buf2 = helper_bound(a, 4); line2 = _line()  # noqa: E702
    with runtime.enforce("report") as ctx:
        dist.all_reduce(buf2, group=b)
    assert ctx.violations[0].line == line2


def _bound_helper(group, *shape):
    with runtime.simulated_symmetric_memory(group):
        return torch.ones(*shape)


def _line():
    import sys

    return sys._getframe(1).f_lineno


def test_views_and_slices_are_recognised(groups):
    a, b = groups
    buf = _bound(a, 4, 8)
    with runtime.enforce("report") as ctx:
        dist.all_reduce(buf[1:3], group=b)
        dist.all_reduce(buf.view(-1)[5:9], group=b)
        dist.all_reduce(buf.t().contiguous(), group=b)  # a copy: a new, unbound buffer
    assert [v.code for v in ctx.violations] == ["CGL002", "CGL002"]  # the copy is unbound
    rec, _ = TABLE.lookup(buf[2:, 3:])
    assert rec is not None and rec.alloc_group is a


def test_freed_storage_clears_the_table(groups):
    a, _ = groups
    gc.collect()  # records of earlier tests' storages waiting for a collection: gone before counting
    before = TABLE.buffer_count()
    buf = _bound(a, 1024)
    start = buf.untyped_storage().data_ptr()
    view = buf[10:20]
    assert TABLE.buffer_count() == before + 1
    del buf
    gc.collect()
    assert TABLE.buffers.get(start) is TABLE.lookup(view)[0] is not None  # the view keeps the storage alive
    del view
    gc.collect()
    assert TABLE.buffers.get(start) is None
    assert TABLE.buffer_count() == before


def test_unbound_buffers_are_not_errors(groups):
    _, b = groups
    with runtime.enforce("assert"):
        dist.all_reduce(torch.ones(4), group=b)
        dist.all_reduce(torch.ones(4))


def test_function_mode_sees_collectives_imported_by_name_before_enforce(groups):
    a, b = groups
    buf = _bound(a, 8)
    with runtime.enforce("report") as ctx:
        all_reduce_imported_early(buf, group=b)
    assert [v.code for v in ctx.violations] == ["CGL002"]


class _Probe(TorchFunctionMode):
    """Records what a function mode is handed for a collective, without running it."""

    def __init__(self, names):
        super().__init__()
        self.names = names
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in self.names:
            self.seen.append((func, name, args, dict(kwargs or {})))
            return None
        return func(*args, **(kwargs or {}))


def test_every_collective_is_checked(groups):
    """Through the function mode, or (torch 2.11's list ``reduce_scatter``, which never reaches
    one) through the module attribute; recorded even when the backend refuses the op."""
    a, b = groups
    out, inp = _bound(a, 4), torch.ones(4)
    calls = {
        "all_reduce": lambda: dist.all_reduce(out, group=b),
        "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(out, inp, group=b),
        "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(out, inp, group=b),
        "all_gather": lambda: dist.all_gather([out], inp, group=b),
        "reduce_scatter": lambda: dist.reduce_scatter(out, [inp], group=b),
        "all_to_all_single": lambda: dist.all_to_all_single(out, inp, group=b),
        "broadcast": lambda: dist.broadcast(out, 0, group=b),
        "async all_reduce": lambda: dist.all_reduce(out, group=b, async_op=True),
    }
    for label, call in calls.items():
        runtime.clear_violations()
        with runtime.enforce("report") as ctx:
            try:
                call()
            except RuntimeError:
                pass  # gloo lacks some collectives; the verdict comes first
        assert [v.code for v in ctx.violations] == ["CGL002"], label
        assert ctx.violations[0].collective == label.replace("async ", "")


def _hands_over(func):
    """Whether a collective hands itself to handle_torch_function, or delegates to one that does
    (torch 2.13's all_gather_into_tensor runs all_gather_single)."""
    import inspect

    names = set(inspect.unwrap(func).__code__.co_names)
    c10d = dist.distributed_c10d
    return "handle_torch_function" in names or any(
        n in names and n != func.__name__ and hasattr(c10d, n) for n in _collectives.COLLECTIVE_NAMES)


def test_collective_names_reaching_a_function_mode_are_known(groups):
    """Verify what this torch hands to handle_torch_function, the shim's hook for names
    imported before it (2.13: all_gather_single/reduce_scatter_single)."""
    _, b = groups
    out, inp = torch.zeros(4), torch.ones(4)
    names = set(_collectives.COLLECTIVE_NAMES)
    specs = _collectives.collective_specs()
    calls = {
        "all_reduce": lambda: dist.all_reduce(inp, group=b),
        "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(out, inp, group=b),
        "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(out, inp, group=b),
        "all_gather": lambda: dist.all_gather([out], inp, group=b),
        "all_to_all_single": lambda: dist.all_to_all_single(out, inp, group=b),
        "broadcast": lambda: dist.broadcast(inp, 0, group=b),
    }
    handing = {f.__name__ for f in specs if _hands_over(f)}
    for label, call in calls.items():
        probe = _Probe(names)
        with probe:
            call()
        if label not in handing:  # e.g. torch 2.11's broadcast: checked as a module attribute only
            assert not probe.seen, label
            continue
        assert probe.seen, f"{label} never reached a function mode"
        func, name, args, kwargs = probe.seen[0]
        assert func in specs and _hands_over(func), name
        _, pos, _ = specs[func]
        group = kwargs["group"] if "group" in kwargs else args[pos]
        assert group is b, (label, name)
    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    probe = _Probe(names)
    with probe:
        dist.all_gather_into_tensor(out, inp, group=b)
        dist.reduce_scatter_tensor(out, inp, group=b)
    seen = [name for _, name, _, _ in probe.seen]
    if version >= (2, 13):
        assert seen == ["all_gather_single", "reduce_scatter_single"]
        assert all("group" in kw for _, _, _, kw in probe.seen)  # handed as a keyword
    else:
        assert seen == ["all_gather_into_tensor", "reduce_scatter_tensor"]


def test_renamed_collectives_report_the_familiar_name(groups):
    a, b = groups
    out = _bound(a, 4)
    with runtime.enforce("report") as ctx:
        dist.all_gather_into_tensor(out, torch.ones(4), group=b)
    assert ctx.violations[0].collective == "all_gather_into_tensor"


def test_enforce_restores_torch_exactly_and_adds_no_function_mode(groups):
    import torch.distributed._symmetric_memory as symm

    c10d = dist.distributed_c10d
    surface = lambda: (  # noqa: E731
        symm.empty, symm.rendezvous, dist.new_group, c10d.new_group, dist.all_reduce, c10d.all_reduce,
        c10d.has_torch_function, c10d.handle_torch_function,
        getattr(getattr(dist, "ProcessGroupNCCL", None), "register_mem_pool", None),
    )
    functional = torch.library.get_kernel("_c10d_functional::all_reduce", "CPU")
    before = surface()
    depth = torch._C._len_torch_function_stack()
    with runtime.enforce("report", divergence=True):
        with runtime.enforce("warn"):
            # no mode sees every torch call: the collectives are hooked, nothing else
            assert torch._C._len_torch_function_stack() == depth
        assert symm.empty is not before[0] and c10d.has_torch_function is not before[6]
    after = surface()
    assert all(x is y for x, y in zip(before, after))
    assert torch._C._len_torch_function_stack() == depth
    # the functional collectives' kernels are torch's own again
    assert torch.library.get_kernel("_c10d_functional::all_reduce", "CPU").__class__ is functional.__class__
    out = torch.ops._c10d_functional.wait_tensor(torch.ops._c10d_functional.all_reduce(torch.ones(2), "sum", groups[1].group_name))
    assert out.tolist() == [1.0, 1.0] and runtime.violations() == []


def test_outputs_bitwise_equal(groups):
    a, b = groups
    x = torch.randn(64, generator=torch.Generator().manual_seed(0))
    buf = _bound(a, 64)
    buf.copy_(x)
    plain = x.clone()
    dist.all_reduce(plain, group=b)
    with runtime.enforce("report"):
        dist.all_reduce(buf, group=b)
    assert torch.equal(buf.view(torch.int32), plain.view(torch.int32))


def test_modes(groups):
    a, b = groups
    buf = _bound(a, 8)
    with pytest.raises(runtime.GroupMismatchError) as err:
        with runtime.enforce("assert"):
            dist.all_reduce(buf, group=b)
    assert str(err.value).startswith("CGL002 ") and err.value.code == "CGL002"
    runtime.clear_violations()
    with pytest.warns(runtime.CommGroupRuntimeWarning, match="^CGL002 "):
        with runtime.enforce("warn"):
            dist.all_reduce(buf, group=b)
    runtime.clear_violations()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with runtime.enforce("report") as ctx:
            dist.all_reduce(buf, group=b)
    assert len(ctx.violations) == 1 and runtime.violations() == ctx.violations
    with pytest.raises(ValueError):
        runtime.enforce("loud")


def test_pool_reuse_under_the_register_once_scheme(groups):
    a, b = groups
    pool = runtime.SimulatedSymmetricPool("on_create")
    with runtime.simulated_symmetric_memory(a, pool=pool):
        first = torch.empty(256)
    del first
    gc.collect()
    with runtime.simulated_symmetric_memory(b, pool=pool):
        second = torch.empty(256)  # same size class: gets a's block
    with runtime.enforce("report") as ctx:
        dist.all_reduce(second, group=b)
    assert [v.code for v in ctx.violations] == ["CGL005"]
    assert "registered with group 'a'" in ctx.violations[0].message
    # the default scheme registers per context: no pool reuse
    with runtime.simulated_symmetric_memory(a):
        third = torch.empty(256)
    del third
    with runtime.simulated_symmetric_memory(b):
        fourth = torch.empty(256)
    runtime.clear_violations()
    with runtime.enforce("report") as ctx:
        dist.all_reduce(fourth, group=b)
    assert ctx.violations == []


def test_views_inside_the_context_are_not_rebound(groups):
    a, b = groups
    outside = torch.ones(8)
    with runtime.simulated_symmetric_memory(a):
        view = outside.view(2, 4)
        fresh = outside * 2
    assert TABLE.lookup(view)[0] is None
    assert TABLE.lookup(fresh)[0].alloc_group is a


def test_group_labels(groups):
    a, _ = groups
    g = dist.new_group([0], group_desc="my_desc")
    assert runtime.group_label(g) == "my_desc"
    runtime.name_group(g, "attn_cp")
    assert runtime.group_label(g) == "attn_cp"
    assert runtime.group_label(a) == "a"


def test_fast_passing_path_agrees_with_the_full_verdict(groups):
    """Every combination of allocation group, registrations and registered segment: the
    collective reports a violation exactly when the full verdict finds one."""
    import itertools

    a, b = groups
    shim_groups = (None, a, b)
    regs = ((), (a,), (b,), (a, b))
    for alloc, registered, seg, pg in itertools.product(shim_groups, regs, (None, a, b), (a, b)):
        t = torch.ones(16)
        dev = -1  # the CPU
        storage = t.untyped_storage()
        rec = TABLE.bind(t, alloc, runtime.Site("x.py", 1), registered)
        if seg is not None:
            TABLE.register_segment(dev, storage.data_ptr(), storage.nbytes(), seg)
        try:
            shim = _shim.Shim("report", Knowledge.of(Profile(name="empty")))
            got_rec, got_seg = TABLE.lookup(t)
            assert got_rec is rec
            expected = shim._verdict("all_reduce", got_rec, got_seg, pg) is not None
            runtime.clear_violations()
            with runtime.enforce("report") as ctx:
                dist.all_reduce(t, group=pg)
            assert bool(ctx.violations) == expected, (alloc, registered, seg, pg)
        finally:
            if seg is not None:
                TABLE.drop_segment(dev, storage.data_ptr())
            del t, storage  # freed at once (no cycle): its record goes with it


def test_helper_declared_after_its_frames_were_seen(groups):
    a, b = groups

    def late_helper():
        with runtime.simulated_symmetric_memory(a):
            return torch.ones(4)

    first = late_helper()
    runtime.helper(late_helper)  # declared after the finder has cached its frame as user code
    buf = late_helper(); line = _line()  # noqa: E702
    with runtime.enforce("report") as ctx:
        dist.all_reduce(buf, group=b)
    assert ctx.violations[0].line == line
    del first


def test_binding_bookkeeping_does_not_dispatch_through_other_modes(groups):
    """Allocating in a bound context: modes below see the allocation, not the shim's own
    storage and address queries (each would be a full dispatch, e.g. through the shim)."""
    a, _ = groups
    seen = []

    class Counting(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    with Counting():
        with runtime.simulated_symmetric_memory(a):
            t = torch.empty(32)
    assert seen == ["empty"], seen
    assert TABLE.lookup(t)[0].alloc_group is a
