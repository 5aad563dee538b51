"""The shim's hot paths keep what the slow ones did: the group behind a wrapper (remembered per
type), a pool's groups (by identity), binding frames (ended by identity, the function mode
pushed only while one is open), sites (cached per instruction, reported by line) and the
table's records (dropped when their storage is freed, not when a replaced one is)."""

from __future__ import annotations

import gc
import sys

import pytest

torch = pytest.importorskip("torch")

from commgroup_lint import runtime  # noqa: E402
from commgroup_lint.runtime import _binding, _groups  # noqa: E402
from commgroup_lint.runtime._table import TABLE, PoolGroups  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


class _Coordinator:
    def __init__(self, group, name=None, **attrs):
        self.device_group = group
        if name is not None:
            self.unique_name = name
        vars(self).update(attrs)


class _Holder:
    def __init__(self, **attrs):
        vars(self).update(attrs)


def test_wrapper_groups_are_their_own_after_the_first(groups):
    a, b = groups
    assert _groups.as_process_group(_Coordinator(a, "a")) is a
    assert _groups.as_process_group(_Coordinator(b, "b")) is b  # same type, another group
    assert _groups.as_process_group(_Coordinator(None, "x", pg=a)) is a  # its holder is another attribute
    # a type seen holding its group in `pg` while `device_group` was None: an instance whose
    # `device_group` is set is read there first, as the long way does
    assert _groups.as_process_group(_Holder(device_group=None, pg=a)) is a
    assert _groups.as_process_group(_Holder(device_group=b, pg=a)) is b


def test_wrapper_label_names_its_group_once(groups):
    import torch.distributed as dist

    pg = dist.new_group([0])
    assert _groups.as_process_group(_Coordinator(pg)) is pg  # no name: nothing labelled
    assert _groups.group_label(pg) != "late"
    assert _groups.as_process_group(_Coordinator(pg, "late")) is pg
    assert _groups.group_label(pg) == "late"


def test_pool_groups_by_identity():
    class Pool:
        def __eq__(self, other):  # equal pools are still two pools
            return True

        __hash__ = None

    pools = PoolGroups()
    p, q = Pool(), Pool()
    assert pools.of(p) is pools.of(p) and pools.of(p) is not pools.of(q)
    pools.of(p).add("g")
    assert pools.of(p) == {"g"} and pools.of(q) == set()
    del p
    gc.collect()
    assert len(pools._groups) == 1  # the entry went with its pool


def test_pool_without_weak_references_is_kept():
    class Slotted:
        __slots__ = ()

    pools = PoolGroups()
    pool = Slotted()
    pools.of(pool).add("g")
    key = id(pool)
    del pool
    gc.collect()
    assert pools._groups[key][1] == {"g"}  # kept alive: its id is not reused


def test_frames_end_by_identity_in_any_order(groups):
    a, _ = groups
    depth = torch._C._len_torch_function_stack()
    first = _binding.start_binding(a)
    second = _binding.start_binding(a)  # an equal frame, another binding
    assert first == second and first is not second
    assert torch._C._len_torch_function_stack() == depth + 1  # one mode however deep
    _binding.end_binding(first)
    assert _binding._MODES.mode.frames == [second] and _binding._MODES.mode.frames[0] is second
    _binding.end_binding(first)  # ended already: nothing
    assert _binding._MODES.mode.frames[0] is second
    t = torch.empty(16)
    _binding.end_binding(second)
    assert torch._C._len_torch_function_stack() == depth
    assert TABLE.lookup(t)[0].alloc_group is a
    assert TABLE.lookup(torch.empty(16))[0] is None  # no frame open: nothing bound


def _line() -> int:
    return sys._getframe(1).f_lineno


def test_sites_are_lines_on_a_warm_path(groups):
    a, _ = groups
    lines, sites = [], []
    for i in range(3):
        with runtime.simulated_symmetric_memory(a):
            x = torch.empty(8); lines.append(_line())  # noqa: E702
            y = torch.empty(8) if i else torch.empty(4); lines.append(_line())  # noqa: E702
        sites += [TABLE.lookup(x)[0].site, TABLE.lookup(y)[0].site]
    assert [s.line for s in sites] == lines
    assert all(s.path == __file__ for s in sites)
    assert sites[1].line == sites[3].line  # two instructions of one line: one line


def test_a_replaced_record_freed_later_leaves_the_new_one(groups):
    a, b = groups
    t = torch.empty(64)
    old = TABLE.bind(t, a, None)
    new = TABLE.bind(t, b, None)  # the same memory bound again: the first record is dropped
    assert TABLE.lookup(t)[0] is new and old is not new
    del old
    gc.collect()
    assert TABLE.lookup(t)[0] is new
    count = TABLE.buffer_count()
    del t, new
    gc.collect()
    assert TABLE.buffer_count() == count - 1
