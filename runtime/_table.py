"""The binding table: which storage is bound to which group.

Each record covers one storage, keyed by the address where its memory starts, so any view of a
bound buffer finds it in one dictionary read; a weak reference on the storage removes the
record when the storage is freed, so later memory at that address is not taken for it.
Registered memory segments (a NCCL mem pool registered with a group) are sorted intervals per
device: a buffer is anywhere inside one.
"""

from __future__ import annotations

import bisect
import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch

_Tensor = torch.Tensor
_SEQUENCES = (list, tuple)
_SETS = (set, frozenset)


class Record:
    """One bound storage, starting at ``start``. ``alloc_group`` is the group the code
    allocated it under; ``registered`` the groups its memory is registered with (empty when
    unknown). A set passed as ``registered`` is kept, not copied: a memory pool's groups
    (``PoolGroups``), shared by the records of the memory drawn from it, so a pool bound after
    the allocation counts (registration replaces the set, never changes it in place, so a
    frozenset is shared too). ``ref`` is the weak reference on the storage whose callback
    drops it."""

    __slots__ = ("start", "alloc_group", "site", "registered", "pool", "block", "ref", "__weakref__")

    def __init__(self, start: int, alloc_group: Any, site: Any, registered: Any, pool: Any = None,
                 block: Any = None) -> None:
        self.start = start
        self.alloc_group = alloc_group
        self.site = site
        self.registered = registered if isinstance(registered, _SETS) else frozenset(registered)
        self.pool = pool
        self.block = block
        self.ref: Any = None


class _StorageRef(weakref.ref):
    """A weak reference on a bound storage that knows its record (its callback needs no map
    from references to records; the record holds it alive while it is in the table)."""

    __slots__ = ("record",)
    record: Any


def storage_start(tensor: Any) -> int:
    """Where the memory of ``tensor``'s storage starts: its own address when it starts there
    (no storage object is made for it), else its storage's."""
    return tensor.data_ptr() if not tensor.storage_offset() else tensor.untyped_storage().data_ptr()


class _Intervals:
    """Sorted, non-overlapping ``[start, end)`` intervals with a payload each, in three
    parallel lists: a lookup is one bisection and two list reads."""

    __slots__ = ("starts", "ends", "items")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.items: list = []

    def put(self, start: int, end: int, item) -> None:
        # Drop anything the new interval overlaps: that memory has been handed out again.
        starts = self.starts
        lo = bisect.bisect_left(starts, start)
        if lo > 0 and self.ends[lo - 1] > start:
            lo -= 1
        hi = bisect.bisect_left(starts, end, lo)
        if lo == hi:  # nothing overlapped (the usual case: the storage it held was freed)
            for column, value in ((starts, start), (self.ends, end), (self.items, item)):
                column.insert(lo, value)
        else:
            starts[lo:hi], self.ends[lo:hi], self.items[lo:hi] = [start], [end], [item]

    def get(self, addr: int):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and addr < self.ends[i]:
            return self.items[i]
        return None

    def at(self, start: int) -> int:
        """The index of the interval that starts at ``start``, or -1."""
        i = bisect.bisect_left(self.starts, start)
        return i if i < len(self.starts) and self.starts[i] == start else -1

    def remove(self, start: int) -> None:
        """Drop the interval that starts at ``start``, if there is one."""
        i = self.at(start)
        if i >= 0:
            del self.starts[i], self.ends[i], self.items[i]


class BindingTable:
    def __init__(self) -> None:
        # Re-entrant: a storage freed by a garbage collection that runs while the lock is
        # held calls _freed on the same thread.
        self._lock = threading.RLock()
        # storage start -> record (addresses of one process differ across devices); read
        # directly by the shim's hot paths (empty: nothing bound)
        self.buffers: dict[int, Record] = {}
        # device index (-1: the CPU) -> registered segments' intervals
        self.segments: dict[int, _Intervals] = {}
        self._on_freed = self._freed  # one bound method for every weak reference

    # -- buffers -------------------------------------------------------------------
    def bind(self, tensor: Any, alloc_group: Any, site: Any, registered: Any = (), pool: Any = None,
             block: Any = None) -> Record | None:
        storage = tensor.untyped_storage()
        return self.bind_storage(storage, storage.data_ptr(), storage.nbytes(), alloc_group, site, registered,
                                 pool, block)

    def bind_storage(self, storage: Any, start: int, nbytes: int, alloc_group: Any, site: Any,
                     registered: Any = (), pool: Any = None, block: Any = None) -> Record | None:
        """:meth:`bind` with the storage, its address and size already known. A record bound
        before at the same address is replaced (its storage was freed, or this is the same
        memory bound again)."""
        if nbytes == 0 or start == 0:
            return None
        rec = Record(start, alloc_group, site, registered, pool, block)
        # One weak reference per bound storage, its callback dropping the record when the
        # storage is freed (cheaper than weakref.finalize).
        rec.ref = ref = _StorageRef(storage, self._on_freed)
        ref.record = rec
        self.buffers[start] = rec
        return rec

    def _freed(self, ref: _StorageRef) -> None:
        """The storage of ``ref`` is being freed: its memory is not yet back in the allocator,
        so no other binding of that address can come between the read and the delete."""
        rec: Record = ref.record
        rec.ref = ref.record = None  # no cycle left for the garbage collector
        # Only a record still in the table: one replaced by a later binding of the same
        # memory is not released again.
        if self.buffers.get(rec.start) is rec:
            self._drop(rec)

    def _drop(self, rec: Record) -> None:
        del self.buffers[rec.start]
        if rec.pool is not None:
            rec.pool._release(rec.block)

    def lookup(self, tensor: Any) -> tuple[Record | None, set | None]:
        """The record and the registered-segment groups of the memory ``tensor`` views."""
        buffers, segments = self.buffers, self.segments
        rec = buffers.get(storage_start(tensor)) if buffers else None
        segs = segments.get(tensor.get_device()) if segments else None
        return rec, segs.get(tensor.data_ptr()) if segs is not None else None

    def passes(self, values: Any, pg: Any) -> bool:
        """Whether every tensor among ``values`` may run a collective on ``pg`` as it is: not
        bound, or allocated under ``pg`` (or under no group known) and registered with it (or
        nowhere). False for a sequence among them: its tensors need the full scan. The shim's
        hot path: one call per collective, nothing built."""
        buffers, segments = self.buffers, self.segments
        for t in values:
            if isinstance(t, _Tensor):
                rec = seg = None
                if buffers:  # storage_start(t), inline
                    rec = buffers.get(t.data_ptr() if not t.storage_offset() else t.untyped_storage().data_ptr())
                if segments:
                    segs = segments.get(t.get_device())
                    if segs is not None:  # _Intervals.get, inline
                        addr = t.data_ptr()
                        i = bisect.bisect_right(segs.starts, addr) - 1
                        if i >= 0 and addr < segs.ends[i]:
                            seg = segs.items[i]
                if rec is None:
                    if not seg or pg in seg:
                        continue
                    return False
                alloc, registered = rec.alloc_group, rec.registered
                if (alloc is None or alloc is pg) and (
                    (not registered and not seg) or pg in registered or (seg is not None and pg in seg)
                ):
                    continue
                return False
            if isinstance(t, _SEQUENCES):
                return False
        return True

    def has_storage(self, tensor: Any) -> bool:
        return tensor.untyped_storage().data_ptr() in self.buffers

    def buffer_count(self) -> int:
        return len(self.buffers)

    # -- registered segments ------------------------------------------------------
    def register_segment(self, dev, start, size, group) -> None:
        with self._lock:
            table = self.segments.setdefault(dev, _Intervals())
            i = table.at(start)
            if i < 0 or table.ends[i] != start + size:
                table.put(start, start + size, {group})
            else:  # registered with it already, maybe (an engine registers its pool at each context)
                table.items[i].add(group)

    def drop_segment(self, dev, start, group=None) -> None:
        """Forget that the segment at ``start`` is registered with ``group`` (None: with any)."""
        with self._lock:
            table = self.segments.get(dev)
            if table is None or (i := table.at(start)) < 0:
                return
            if group is not None:
                table.items[i].discard(group)
            if group is None or not table.items[i]:
                table.remove(start)


class PoolGroups:
    """The groups each memory pool is bound to, by the pool's identity: one live set per pool,
    which the records of memory drawn from it share. An entry goes when its pool does (a pool
    that takes no weak reference is kept alive instead, so its identity stays its own).

    Keyed by ``id(pool)`` with a weak reference to check it (a ``WeakKeyDictionary`` makes a
    new weak reference at each lookup, in Python: every pool context's entry asks)."""

    def __init__(self) -> None:
        self._groups: dict[int, tuple] = {}  # id(pool) -> (weak reference or keeper, groups)

    def of(self, pool) -> set:
        entry = self._groups.get(id(pool))
        if entry is None or entry[0]() is not pool:
            entry = self._add(pool)
        return entry[1]

    def _add(self, pool) -> tuple:
        key = id(pool)
        groups = self._groups

        def gone(ref) -> None:
            if groups.get(key, (None,))[0] is ref:
                del groups[key]

        ref: Callable[[], Any]
        try:
            ref = weakref.ref(pool, gone)
        except TypeError:  # no weak reference: kept alive
            ref = functools.partial(_itself, pool)
        entry = groups[key] = (ref, set())
        return entry


def _itself(obj):
    return obj


#: The one table of bindings of this process.
TABLE = BindingTable()
#: The groups of the memory pools bound so far.
POOLS = PoolGroups()
