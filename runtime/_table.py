"""The binding table: which storage is bound to which group, keyed by address intervals.

Each record covers one storage, ``[data_ptr, data_ptr + nbytes)`` on one device, so a
view or slice of a bound buffer (any tensor whose ``data_ptr`` falls inside) finds the
record. A weak reference on the storage, with a callback, removes the record when the storage
is freed, so a later allocation at the same address is not mistaken for the old buffer.

Registered memory segments (a NCCL mem pool registered with a group's communicator) are
kept in a second table of the same shape: there the unit is a segment, not a storage.

No torch import: tensors are only asked for ``untyped_storage()``/``data_ptr()``/``device``.
"""

from __future__ import annotations

import bisect
import threading
import weakref


class Record:
    """One bound storage. ``alloc_group`` is the group the code allocated it under;
    ``registered`` the groups its memory is registered with (empty when unknown)."""

    __slots__ = ("start", "end", "device", "alloc_group", "site", "registered", "pool", "block", "__weakref__")

    def __init__(self, start, end, device, alloc_group, site, registered, pool=None, block=None):
        self.start = start
        self.end = end
        self.device = device
        self.alloc_group = alloc_group
        self.site = site
        self.registered = set(registered)
        self.pool = pool
        self.block = block


class _Intervals:
    """Sorted, non-overlapping ``[start, end)`` intervals with a payload each."""

    def __init__(self):
        self.starts: list[int] = []
        self.items: dict[int, object] = {}
        self.ends: dict[int, int] = {}

    def put(self, start: int, end: int, item) -> None:
        # Drop anything the new interval overlaps: that memory has been reused.
        i = bisect.bisect_left(self.starts, start)
        if i > 0 and self.ends[self.starts[i - 1]] > start:
            i -= 1
        while i < len(self.starts) and self.starts[i] < end:
            old = self.starts.pop(i)
            del self.items[old], self.ends[old]
        bisect.insort(self.starts, start)
        self.items[start] = item
        self.ends[start] = end

    def get(self, addr: int):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0:
            start = self.starts[i]
            if addr < self.ends[start]:
                return self.items[start]
        return None

    def remove(self, start: int, item=None) -> None:
        if start in self.items and (item is None or self.items[start] is item):
            self.starts.remove(start)
            del self.items[start], self.ends[start]

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
        self._buffers: dict[tuple, _Intervals] = {}
        self._segments: dict[tuple, _Intervals] = {}
        # One weak reference per bound storage, its callback clearing the record when the
        # storage is freed (cheaper than weakref.finalize); ref -> (device, start, record).
        self._refs: dict = {}

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
        ref = weakref.ref(storage, self._freed)
        with self._lock:
            self._buffers.setdefault(dev, _Intervals()).put(start, start + nbytes, rec)
            self._refs[ref] = (dev, start, rec)
        return rec

    def _freed(self, ref):
        with self._lock:
            entry = self._refs.pop(ref, None)
            if entry is None:
                return
            dev, start, rec = entry
            table = self._buffers.get(dev)
            # Only a record still in the table: one replaced by a later binding of the
            # same memory (or dropped by clear()) is not released again.
            live = table is not None and table.items.get(start) is rec
            if live:
                table.remove(start, rec)
        if live and rec.pool is not None:
            rec.pool._release(rec.block)

    def lookup(self, tensor):
        """The record and the registered-segment groups of the memory ``tensor`` views."""
        buffers, segments = self._buffers, self._segments
        if not buffers and not segments:
            return None, None
        dev = _device_key(tensor)
        table, segs = buffers.get(dev), segments.get(dev)
        if table is None and segs is None:
            return None, None
        addr = tensor.data_ptr()
        return (table.get(addr) if table is not None else None), (segs.get(addr) if segs is not None else None)

    def has_storage(self, tensor) -> bool:
        table = self._buffers.get(_device_key(tensor))
        if not table:
            return False
        rec = table.get(tensor.untyped_storage().data_ptr())
        return rec is not None

    def has_address(self, dev, addr) -> bool:
        table = self._buffers.get(dev)
        return bool(table) and table.get(addr) is not None

    def buffer_count(self) -> int:
        return sum(len(t) for t in self._buffers.values())

    # -- registered segments ------------------------------------------------------
    def register_segment(self, dev, start, size, group) -> None:
        with self._lock:
            table = self._segments.setdefault(dev, _Intervals())
            groups = table.get(start)
            if groups is not None and table.ends[start] == start + size:
                groups.add(group)
            else:
                table.put(start, start + size, {group})

    def drop_segment(self, dev, start) -> None:
        with self._lock:
            table = self._segments.get(dev)
            if table is not None:
                table.remove(start)

    def clear(self) -> None:
        with self._lock:
            self._buffers.clear()
            self._segments.clear()
            self._refs.clear()


#: The one table of bindings of this process.
TABLE = BindingTable()
