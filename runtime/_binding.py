"""Binding at allocation: tensors created inside a context are recorded as bound to its group.

A function mode (``_BindMode``) is active only inside binding contexts: the profile's
contexts and pool contexts, :class:`simulated_symmetric_memory`, allocators. Every tensor
created there with a fresh storage (not a view of an argument) is recorded in the binding
table with its group and the user's allocation line. Outside them no torch call pays anything.
"""

from __future__ import annotations

import threading
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ._groups import as_process_group
from ._sites import SiteFinder
from ._state import Active
from ._table import POOLS, TABLE, _device_key

_Tensor = torch.Tensor
_SEQUENCES = (list, tuple)
#: Bookkeeping on tensors (storage, address) inside a mode's handler must not go through
#: the modes below it (each query would cost a full dispatch).
_no_torch_function = torch._C.DisableTorchFunction
_PLAIN_FINDER = SiteFinder()


def tensor_args(args: tuple, kwargs: dict | None) -> list[Any]:
    """The tensors among a call's arguments and in its list arguments."""
    out = []
    for a in args:
        if isinstance(a, _Tensor):
            out.append(a)
        elif isinstance(a, _SEQUENCES):
            out.extend([b for b in a if isinstance(b, _Tensor)])
    if kwargs:
        for a in kwargs.values():
            if isinstance(a, _Tensor):
                out.append(a)
            elif isinstance(a, _SEQUENCES):
                out.extend([b for b in a if isinstance(b, _Tensor)])
    return out


def _direct_tensors(args: tuple, kwargs: dict | None) -> list[Any]:
    """The tensors passed directly (views are made of those; lists of tensors make new memory)."""
    found = [a for a in args if isinstance(a, _Tensor)]
    if kwargs:
        found.extend(v for v in kwargs.values() if isinstance(v, _Tensor))
    return found


def finder() -> SiteFinder:
    """The active shim's site finder (it knows the profile's helpers), else a plain one."""
    shim = Active.shim
    return shim.finder if shim is not None else _PLAIN_FINDER


class SimulatedSymmetricPool:
    """A model of the shared symmetric pool's registration scheme.

    ``scheme="per_context"``: memory allocated in a group's context is registered with that
    group. ``scheme="on_create"`` (allocators that register a segment once): a block is
    registered once, with the group whose context created it; a block freed and handed out
    again under another group keeps its first registration (pool reuse, CGL005). Blocks are
    modelled by size class (``round_to`` bytes, like the CUDA caching allocator); no memory
    is actually shared, so results are unaffected.
    """

    def __init__(self, scheme: str = "per_context", round_to: int = 512) -> None:
        if scheme not in ("per_context", "on_create"):
            raise ValueError("scheme must be 'per_context' or 'on_create'")
        self.scheme = scheme
        self.round_to = round_to
        self._free: dict[int, list] = {}
        self._lock = threading.Lock()

    def _acquire(self, nbytes: int, group: Any) -> tuple[Any, set]:
        size = -(-nbytes // self.round_to) * self.round_to
        if self.scheme == "per_context":
            return None, {group}
        with self._lock:
            free = self._free.get(size)
            block = free.pop() if free else (size, frozenset({group}))
        return block, set(block[1])

    def _release(self, block: Any) -> None:
        if block is None:
            return
        with self._lock:
            self._free.setdefault(block[0], []).append(block)

    def reset(self) -> None:
        with self._lock:
            self._free.clear()


DEFAULT_POOL = SimulatedSymmetricPool("per_context")


class _BindMode(TorchFunctionMode):
    """Records fresh storages created inside it as bound to ``group``. With ``pool`` they are
    also registered as that pool's scheme says; without, registration is left to the real
    hooks (a NCCL mem pool, torch symmetric memory). Memory bound to several groups at once
    (one pool registered with each), or drawn from a memory pool (registered with the pool's
    groups, now or later), has no single allocation group: it is recorded as registered with
    them, and takes the group of an enclosing context that names one (a context over a pool
    and a group that enters ``use_mem_pool(pool)`` inside)."""

    def __init__(self, group: Any, pool: SimulatedSymmetricPool | None,
                 registered: frozenset | set = frozenset()) -> None:
        super().__init__()
        self.group = group
        self.pool = pool
        self.registered = registered

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **kwargs) if kwargs else func(*args)
        if isinstance(out, _Tensor):
            outs: Any = (out,)
        elif isinstance(out, _SEQUENCES):
            outs = [o for o in out if isinstance(o, _Tensor)]
            if not outs:
                return out
        else:
            return out
        with _no_torch_function():
            inputs = None
            for t in outs:
                if t.is_meta:
                    continue
                storage = t.untyped_storage()
                nbytes = storage.nbytes()
                if not nbytes:
                    continue
                ptr = storage.data_ptr()
                if inputs is None:  # a view of an argument (`x.view(...)`, `x[1:]`) is not fresh memory
                    inputs = {x.untyped_storage().data_ptr() for x in _direct_tensors(args, kwargs)}
                if ptr in inputs:
                    continue
                dev = _device_key(t)
                rec = TABLE.record_at(dev, ptr)
                if rec is None:
                    self.bind(storage, ptr, nbytes, dev)
                elif rec.alloc_group is None and self.group is not None:  # bound inside without a group
                    rec.alloc_group = self.group
        return out

    def bind(self, storage: Any, ptr: int, nbytes: int, dev: Any) -> None:
        site = finder().find()
        if self.pool is not None:
            block, registered = self.pool._acquire(nbytes, self.group)
            TABLE.bind_storage(storage, ptr, nbytes, dev, self.group, site, registered,
                               self.pool if block else None, block)
        else:
            TABLE.bind_storage(storage, ptr, nbytes, dev, self.group, site, self.registered)


def start_binding(group: Any, pool: SimulatedSymmetricPool | None = None) -> _BindMode:
    """Begin binding what is allocated to ``group`` (or to each group of a list of them); end
    it with :func:`end_binding`."""
    if isinstance(group, _SEQUENCES):
        mode = _BindMode(None, None, frozenset(as_process_group(g) for g in group))
    else:
        mode = _BindMode(as_process_group(group), pool)
    mode.__enter__()
    return mode


def start_pool_binding(pool: Any) -> _BindMode:
    """Begin binding what is allocated to the groups ``pool`` is bound to, now or later (the
    body of ``use_mem_pool(pool)``); end it with :func:`end_binding`."""
    mode = _BindMode(None, None, POOLS.of(pool))
    mode.__enter__()
    return mode


def end_binding(mode: _BindMode) -> None:
    mode.__exit__(None, None, None)


def bind_result(out: Any, group: Any) -> None:
    """Bind what an allocator returned (a tensor, or a sequence of them) to ``group``, unless
    a context inside it bound the memory already."""
    tensors = [out] if isinstance(out, _Tensor) else [t for t in out if isinstance(t, _Tensor)] \
        if isinstance(out, _SEQUENCES) else []
    if not tensors:
        return
    pg = as_process_group(group)
    site = finder().find()
    with _no_torch_function():
        for t in tensors:
            if not t.is_meta and not TABLE.has_storage(t):
                TABLE.bind(t, pg, site, ())


class simulated_symmetric_memory:
    """Context manager: tensors allocated inside are bound to ``group``.

    What an engine's symmetric-memory context does on GPUs, minus the NCCL registration, on
    any device. ``pool`` picks the registration scheme that is modelled
    (:class:`SimulatedSymmetricPool`); ``register=False`` records only the allocation group
    and leaves registration to the real hooks (NCCL mem pool, torch symmetric memory).
    """

    def __init__(self, group: Any, *, disabled: bool = False, pool: SimulatedSymmetricPool | None = None,
                 register: bool = True) -> None:
        self.group = None if disabled else group
        self.disabled = disabled
        self.pool = (pool or DEFAULT_POOL) if register else None
        self._mode: _BindMode | None = None

    def __enter__(self) -> simulated_symmetric_memory:
        if not self.disabled:
            self._mode = start_binding(self.group, self.pool)
        return self

    def __exit__(self, *exc: Any) -> bool:
        if self._mode is not None:
            mode, self._mode = self._mode, None
            end_binding(mode)
        return False


def bind_buffer(tensor: Any, group: Any, *, registered: Any = None) -> Any:
    """Bind an existing tensor's storage to ``group`` by hand (for custom allocators); it
    counts as registered with ``group`` unless ``registered`` names other groups."""
    pg = as_process_group(group)
    regs = {pg} if registered is None else {as_process_group(g) for g in registered}
    TABLE.bind(tensor, pg, finder().find(), regs)
    return tensor
