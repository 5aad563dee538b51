"""The binding table: which storage is bound to which group, keyed by address intervals.

Each record covers one storage, ``[data_ptr, data_ptr + nbytes)`` on one device, so a
view or slice of a bound buffer (any tensor whose ``data_ptr`` falls inside) finds the
record. A weak reference on the storage, with a callback, removes the record when the storage
is freed, so a later allocation at the same address is not mistaken for the old buffer.

Registered memory segments (a NCCL mem pool registered with a group's communicator) are
kept in a second table of the same shape: there the unit is a segment, not a storage.

Tensors are only asked for ``untyped_storage()``, ``data_ptr()`` and ``get_device()``.
"""

from __future__ import annotations

import bisect
import functools
import threading
import weakref

import torch

_Tensor = torch.Tensor
_SEQUENCES = (list, tuple)
_SETS = (set, frozenset)


class Record:
    """One bound storage. ``alloc_group`` is the group the code allocated it under;
    ``registered`` the groups its memory is registered with (empty when unknown). A set
    passed as ``registered`` is kept, not copied: a memory pool's groups (``PoolGroups``),
    shared by the records of the memory drawn from it, so a pool bound after the allocation
    counts (registration replaces the set, never changes it in place, so a frozenset is
    shared too). ``ref`` is the weak reference on the storage whose callback drops it."""

    __slots__ = ("start", "end", "device", "alloc_group", "site", "registered", "pool", "block", "ref",
                 "__weakref__")

    def __init__(self, start, end, device, alloc_group, site, registered, pool=None, block=None):
        self.start = start
        self.end = end
        self.device = device
        self.alloc_group = alloc_group
        self.site = site
        self.registered = registered if isinstance(registered, _SETS) else frozenset(registered)
        self.pool = pool
        self.block = block
        self.ref = None


class _StorageRef(weakref.ref):
    """A weak reference on a bound storage that knows its record (its callback needs no map
    from references to records; the record holds it alive while it is in the table)."""

    __slots__ = ("record",)


class _Intervals:
    """Sorted, non-overlapping ``[start, end)`` intervals with a payload each, in three
    parallel lists: a lookup is one bisection and two list reads."""

    __slots__ = ("starts", "ends", "items")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.items: list = []

    def put(self, start: int, end: int, item) -> None:
        # Drop anything the new interval overlaps: that memory has been reused.
        starts = self.starts
        lo = bisect.bisect_left(starts, start)
        if lo > 0 and self.ends[lo - 1] > start:
            lo -= 1
        hi = bisect.bisect_left(starts, end, lo)
        if lo == hi:  # nothing overlapped (the usual case: the storage it held was freed)
            starts.insert(lo, start), self.ends.insert(lo, end), self.items.insert(lo, item)
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

    def remove(self, start: int, item=None) -> bool:
        """Drop the interval that starts at ``start`` (only if its payload is ``item``, when
        given); whether one was dropped."""
        starts = self.starts
        i = bisect.bisect_left(starts, start)
        if i < len(starts) and starts[i] == start and (item is None or self.items[i] is item):
            del starts[i], self.ends[i], self.items[i]
            return True
        return False

    def __len__(self) -> int:
        return len(self.starts)


def _device_key(tensor):
    """The device's index, -1 for the CPU (``get_device`` is the cheapest query, and one process
    uses one accelerator type)."""
    return tensor.get_device()


class BindingTable:
    def __init__(self):
        # Re-entrant: a storage freed by a garbage collection that runs while the lock is
        # held calls _freed on the same thread.
        self._lock = threading.RLock()
        # device index -> intervals; read directly by the shim's hot path (empty: nothing bound)
        self.buffers: dict[int, _Intervals] = {}
        self.segments: dict[int, _Intervals] = {}
        self._on_freed = self._freed  # one bound method for every weak reference

    # -- buffers -------------------------------------------------------------------
    def bind(self, tensor, alloc_group, site, registered=(), pool=None, block=None):
        storage = tensor.untyped_storage()
        return self.bind_storage(storage, storage.data_ptr(), storage.nbytes(), _device_key(tensor),
                                 alloc_group, site, registered, pool, block)

    def bind_storage(self, storage, start, nbytes, dev, alloc_group, site, registered=(), pool=None, block=None):
        """:meth:`bind` with the storage, its address, size and device key already known."""
        if nbytes == 0 or start == 0:
            return None
        rec = Record(start, start + nbytes, dev, alloc_group, site, registered, pool, block)
        # One weak reference per bound storage, its callback dropping the record when the
        # storage is freed (cheaper than weakref.finalize).
        rec.ref = ref = _StorageRef(storage, self._on_freed)
        ref.record = rec
        with self._lock:
            table = self.buffers.get(dev)
            if table is None:
                table = self.buffers[dev] = _Intervals()
            table.put(start, start + nbytes, rec)
        return rec

    def _freed(self, ref):
        rec = ref.record
        rec.ref = ref.record = None  # no cycle left for the garbage collector
        with self._lock:
            table = self.buffers.get(rec.device)
            # Only a record still in the table: one replaced by a later binding of the
            # same memory is not released again.
            live = table is not None and table.remove(rec.start, rec)
        if live and rec.pool is not None:
            rec.pool._release(rec.block)

    def lookup(self, tensor):
        """The record and the registered-segment groups of the memory ``tensor`` views."""
        buffers, segments = self.buffers, self.segments
        if not buffers and not segments:
            return None, None
        dev = tensor.get_device()  # _device_key, inline: this is the shim's hot path
        table, segs = buffers.get(dev), segments.get(dev)
        if table is None and segs is None:
            return None, None
        addr = tensor.data_ptr()
        rec = seg = None
        if table is not None:  # _Intervals.get, inline
            i = bisect.bisect_right(table.starts, addr) - 1
            if i >= 0 and addr < table.ends[i]:
                rec = table.items[i]
        if segs is not None:
            seg = segs.get(addr)
        return rec, seg

    def passes(self, values, pg) -> bool:
        """Whether every tensor among ``values`` may run a collective on ``pg`` as it is: not
        bound, or allocated under ``pg`` (or under no group known) and registered with it (or
        nowhere). False for a sequence among them: its tensors need the full scan. The shim's
        hot path: one call per collective, nothing built."""
        buffers, segments = self.buffers, self.segments
        for t in values:
            if isinstance(t, _Tensor):
                dev = t.get_device()
                table, segs = buffers.get(dev), segments.get(dev)
                if table is None and segs is None:
                    continue
                addr = t.data_ptr()
                alloc, registered, seg = None, (), None
                if table is not None:
                    i = bisect.bisect_right(table.starts, addr) - 1
                    if i >= 0 and addr < table.ends[i]:
                        rec = table.items[i]
                        alloc, registered = rec.alloc_group, rec.registered
                if segs is not None:
                    seg = segs.get(addr)
                if (alloc is None or alloc is pg) and (
                    (not registered and not seg) or pg in registered or (seg is not None and pg in seg)
                ):
                    continue
                return False
            if isinstance(t, _SEQUENCES):
                return False
        return True

    def has_storage(self, tensor) -> bool:
        table = self.buffers.get(_device_key(tensor))
        if not table:
            return False
        rec = table.get(tensor.untyped_storage().data_ptr())
        return rec is not None

    def buffer_count(self) -> int:
        return sum(len(t) for t in self.buffers.values())

    # -- registered segments ------------------------------------------------------
    def register_segment(self, dev, start, size, group) -> None:
        with self._lock:
            table = self.segments.setdefault(dev, _Intervals())
            i = table.at(start)
            if i >= 0 and table.ends[i] == start + size:
                table.items[i].add(group)
            else:
                table.put(start, start + size, {group})

    def drop_segment(self, dev, start, group=None) -> None:
        """Forget that the segment at ``start`` is registered with ``group`` (None: with any)."""
        with self._lock:
            table = self.segments.get(dev)
            i = table.at(start) if table is not None else -1
            if i < 0:
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
