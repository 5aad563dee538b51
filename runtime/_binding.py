"""Binding at allocation: memory allocated inside binding contexts is recorded as bound to their group.

Binding contexts are the profile's contexts and pool contexts, :class:`simulated_symmetric_memory`
and allocators. What they allocate is learnt one of two ways, chosen when a thread's outermost
context opens:

* on CUDA, once the allocation hook is attached (``_allocator_hook``): the blocks the caching
  allocator handed out while the context was open, collected as it closes; the site is the
  line of the context (the ``with``), as the allocation lines are not seen;
* otherwise, a function mode (``_BindMode``, one per thread) active only inside the contexts:
  every tensor created there with a fresh storage (not a view of an argument), at the line
  that created it.

Outside binding contexts no torch call pays anything.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from . import _check, _collectives, _targets
from ._allocator_hook import HookState, hook
from ._groups import _ProcessGroup, as_process_group
from ._native import traced_as_call
from ._sites import SiteFinder
from ._state import Active, keep_counts_in
from ._table import POOLS, TABLE, Record

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


#: A binding context's part, as a tuple ``(group, pool, registered, mark)`` (a tuple costs no
#: Python call to make: one is made at each context's entry). What is allocated in its body is
#: bound to ``group``. With ``pool`` (a :class:`SimulatedSymmetricPool`) it is also registered as
#: that pool's scheme says; without, registration is left to the real hooks (a NCCL mem pool,
#: torch symmetric memory). Memory bound to several groups at once (one pool registered with
#: each), or drawn from a memory pool (registered with the pool's groups, now or later), has no
#: single allocation group: it is recorded as registered with them (``registered``), and takes
#: the group of an enclosing context that names one (a context over a pool and a group that
#: enters ``use_mem_pool(pool)`` inside). ``mark`` is where the allocation hook's blocks of this
#: context begin (0 under the function mode).
Frame = tuple
_NOWHERE: frozenset = frozenset()
_modes_below = torch._C._len_torch_function_stack  # inside a mode's handler: the modes under it
#: Whether torch.compile (or export) is tracing the caller: the compiler reads it as true.
is_compiling: Callable[[], bool] = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)


class _BindMode(TorchFunctionMode):
    """Records fresh storages created while any binding context is open on this thread. One
    mode per thread however deeply contexts nest (each nesting would otherwise add a mode
    and a dispatch to every torch call in the body): the contexts are its frames. The first
    frame opened binds the memory; the later ones give it their group if it has none. The
    mode is made once per thread and pushed on torch's stack while it has frames, unless the
    allocation hook (``native``, chosen as the first frame opens) learns the memory instead."""

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[Frame] = []
        self.native: Any = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if is_compiling():  # torch.compile traces the call alone (the mode stands aside, as the hooks do)
            return func(*args, **kwargs) if kwargs else func(*args)
        out = func(*args, **kwargs) if kwargs else func(*args)
        if type(out) is _Tensor and not _modes_below():  # the usual allocation, written flat
            if not out.is_meta:
                self._record(out, args, kwargs)
            return out
        if isinstance(out, _Tensor):
            outs: Any = (out,)
        elif isinstance(out, _SEQUENCES):
            outs = [o for o in out if isinstance(o, _Tensor)]
        else:
            return out
        with _no_torch_function():  # a subclass's methods, or modes below: not for the shim's queries
            for t in outs:
                if not t.is_meta:
                    self._record(t, args, kwargs)
        return out

    def _record(self, t: Any, args: tuple, kwargs: dict | None) -> None:
        """Bind ``t``'s storage if it is fresh: not empty, and not that of a tensor passed
        directly (``x.view(...)``, ``x[1:]``; tensors in a list argument do not count:
        ``torch.cat`` of them makes new memory). Written flat: every allocation in a binding
        context comes here."""
        storage = t.untyped_storage()
        nbytes = storage.nbytes()
        if not nbytes:
            return
        ptr = storage.data_ptr()
        for a in args:
            if isinstance(a, _Tensor) and a.untyped_storage().data_ptr() == ptr:
                return
        if kwargs:
            for a in kwargs.values():
                if isinstance(a, _Tensor) and a.untyped_storage().data_ptr() == ptr:
                    return
        frames = self.frames
        rec = TABLE.buffers.get(ptr)
        # The first frame binds, at the user's line (the caller of __torch_function__); a hook's
        # record at a fresh storage's address is stale.
        if rec is None or rec.serial:
            group, pool, registered, _ = frames[0]
            shim = Active.shim
            site = (shim.finder if shim is not None else _PLAIN_FINDER).find(3)
            if pool is None:
                rec = TABLE.bind_storage(storage, ptr, nbytes, group, site, registered)
            else:
                block, registered = pool._acquire(nbytes, group)
                rec = TABLE.bind_storage(storage, ptr, nbytes, group, site, registered, pool if block else None,
                                         block)
            if rec is None or len(frames) == 1:
                return
        _group_from(rec, frames)


def _group_from(rec: Any, frames: list[Frame]) -> None:
    """Memory bound inside without a group takes that of the first enclosing frame naming one."""
    for frame in frames:
        if rec.alloc_group is not None:
            return
        rec.alloc_group = frame[0]
        TABLE.version += 1


class _Modes(threading.local):
    mode: _BindMode | None = None


_MODES = _Modes()
_push_mode = torch._C._push_on_torch_function_stack  # TorchFunctionMode.__enter__/__exit__, without
_pop_mode = torch._C._pop_torch_function_stack  # their two Python calls each


def _thread_mode() -> _BindMode:
    """This thread's mode (and frames), made at its first binding context."""
    mode = _MODES.mode
    if mode is None:
        mode = _MODES.mode = _BindMode()
    return mode


def _configure(native: Any) -> None:
    """Once the hook is in use, its context type (``HookState.context``) is given what it needs
    of this module, and profile contexts return it from then on. Where torch.compile can be
    told to trace them as plain calls, its fast paths are used too (``_native``): collectives
    known to pass and the usual profile contexts are decided in C."""
    keep_counts_in(native)  # the extension's context type counts in C, fast paths or not
    native.configure(_MODES, _thread_mode, start_binding, end_binding, _bind_collected, _NOWHERE, TABLE)
    HookState.context = native.Bound
    use_fast_paths(native)


def use_fast_paths(native: Any) -> bool:
    """Decide collectives known to pass and the usual profile contexts in ``native`` from now
    on, where torch.compile can be told to trace them as plain calls (torch 2.5 and newer) and
    the GIL guards their caches (not a free-threaded CPython running without it). They read the
    thread's counts in C, so ``native`` keeps them from then on (``_state.keep_counts_in``)."""
    gil = getattr(sys, "_is_gil_enabled", None)
    if not hasattr(torch.compiler, "substitute_in_graph") or gil is not None and not gil():
        return False
    keep_counts_in(native)
    _check.use_native(native)
    _collectives.use_native(native)
    _targets.use_native(native)
    traced_as_call(native.check)
    traced_as_call(native.group_context, native.pool_context, spread=True)
    return True


HookState.configure = _configure


def _open(group: Any, pool: Any, registered: frozenset) -> Frame:
    """Open a frame on this thread. The first one chooses how its memory is learnt (the hook,
    else the mode, pushed on torch's stack while the thread has frames)."""
    mode = _MODES.mode or _thread_mode()
    frames = mode.frames
    if not frames:
        mode.native = native = HookState.native if HookState.settled else hook()
        if native is None:
            _push_mode(mode)
    else:
        native = mode.native
    frame = (group, pool, registered, native.open() if native is not None else 0)
    frames.append(frame)
    return frame


def binding_open() -> bool:
    """Whether a binding context is open on this thread."""
    mode = _MODES.mode
    return mode is not None and bool(mode.frames)


def start_binding(group: Any, pool: SimulatedSymmetricPool | None = None) -> Frame:
    """Begin binding what is allocated to ``group`` (or to each group of a list of them); end
    it with :func:`end_binding`."""
    if isinstance(group, _SEQUENCES):
        return _open(None, None, frozenset(as_process_group(g) for g in group))
    return _open(group if type(group) is _ProcessGroup else as_process_group(group), pool, _NOWHERE)


def start_pool_binding(pool: Any) -> Frame:
    """Begin binding what is allocated to the groups ``pool`` is bound to, now or later (the
    body of ``use_mem_pool(pool)``); end it with :func:`end_binding`."""
    return _open(None, None, POOLS.of(pool))


def end_binding(frame: Frame) -> None:
    """End the binding ``frame`` began (the last one, usually). Frames are told apart by
    identity: two frames of the same group are equal tuples. Under the allocation hook, the
    hook closes the frame and hands what is new to :func:`_bind_collected`."""
    mode = _MODES.mode
    frames = mode.frames if mode is not None else ()
    i = len(frames) - 1
    while i >= 0 and frames[i] is not frame:
        i -= 1
    if i < 0:  # ended already, or begun on another thread
        return
    native = mode.native
    if native is not None:  # the context's `with` is two frames up (end_binding, its __exit__)
        native.exit_frame(frames, i, _bind_collected, sys._getframe(2))
        return
    del frames[i]
    if not frames:
        _pop_mode()


def _bind_collected(freed: list, blocks: list, frames: list[Frame], with_frame: Any) -> int:
    """Bind the blocks the hook collected as a frame closed, as the mode would have bound them
    (``frames``: those open while they were allocated; the first binds, the others give it
    their group), at the line of the context; drop the records ``freed`` first (a block's
    address may be among both). Returns how many frames from ``with_frame`` (the context's
    `with`) the site search walked: the hook keeps the records of a context that allocates the
    same blocks again from the same stack, and calls this only for what is new."""
    if freed:
        TABLE.forget_blocks(freed)
    if not blocks:
        return 0
    group, pool, registered, _ = frames[0]
    shim = Active.shim
    site, walked = (shim.finder if shim is not None else _PLAIN_FINDER).find_from(with_frame)
    buffers, kept = TABLE.buffers, TABLE.kept
    nested = len(frames) > 1
    for start, nbytes, serial in blocks:
        regs, owner, block = registered, None, None
        if pool is not None:
            block, regs = pool._acquire(nbytes, group)
            owner = pool if block else None
        earlier = buffers.get(start)
        if earlier is not None and earlier.serial:  # not reported freed: the hook keeps it under its key
            kept[earlier.serial] = earlier
        rec = buffers[start] = Record(start, group, site, regs, owner, block, serial)
        if nested:
            _group_from(rec, frames)
    return walked


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
        self._frame: Frame | None = None

    def __enter__(self) -> simulated_symmetric_memory:
        if not self.disabled:
            self._frame = start_binding(self.group, self.pool)
        return self

    def __exit__(self, *exc: Any) -> bool:
        if self._frame is not None:
            frame, self._frame = self._frame, None
            end_binding(frame)
        return False


def bind_buffer(tensor: Any, group: Any, *, registered: Any = None) -> Any:
    """Bind an existing tensor's storage to ``group`` by hand (for custom allocators); it
    counts as registered with ``group`` unless ``registered`` names other groups."""
    pg = as_process_group(group)
    regs = {pg} if registered is None else {as_process_group(g) for g in registered}
    TABLE.bind(tensor, pg, finder().find(), regs)
    return tensor
