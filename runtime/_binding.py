"""Binding at allocation: memory allocated inside binding contexts is recorded as bound to their group.

Binding contexts are the profile's contexts and pool contexts (``_contexts``),
:class:`~._simulated.simulated_symmetric_memory` and allocators. What they allocate is learnt by
a function mode (``_BindMode``, one per thread) active only inside the contexts: every tensor
created there with a fresh storage (not a view of an argument), at the line that created it.
Memory allocated where no Python function of torch is called (inside compiled code, a C++
extension) is not seen: that is the known limit of a shim in plain Python.

Outside binding contexts no torch call pays anything.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ._groups import _ProcessGroup, as_process_group
from ._sites import SiteFinder
from ._state import Active
from ._table import POOLS, TABLE

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


#: A binding context's part, as a tuple ``(group, pool, registered)`` (a tuple costs no Python
#: call to make: one is made at each context's entry). What is allocated in its body is bound to
#: ``group``. With ``pool`` (a :class:`~._simulated.SimulatedSymmetricPool`) it is also registered
#: as that pool's scheme says; without, registration is left to the real hooks (a NCCL mem pool,
#: torch symmetric memory). Memory bound to several groups at once (one pool registered with
#: each), or drawn from a memory pool (registered with the pool's groups, now or later), has no
#: single allocation group: it is recorded as registered with them (``registered``), and takes
#: the group of an enclosing context that names one (a context over a pool and a group that
#: enters ``use_mem_pool(pool)`` inside).
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
    mode is made once per thread and pushed on torch's stack while it has frames."""

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[Frame] = []

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
        if rec is None:  # the first frame binds, at the user's line (the caller of __torch_function__)
            group, pool, registered = frames[0]
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


class _Modes(threading.local):
    mode: _BindMode | None = None


_MODES = _Modes()
_push_mode = torch._C._push_on_torch_function_stack  # TorchFunctionMode.__enter__/__exit__, without
_pop_mode = torch._C._pop_torch_function_stack  # their two Python calls each


def _open(group: Any, pool: Any, registered: AbstractSet[Any]) -> Frame:
    """Open a frame on this thread; the first one pushes the thread's mode on torch's stack."""
    mode = _MODES.mode
    if mode is None:
        mode = _MODES.mode = _BindMode()
    frames = mode.frames
    if not frames:
        _push_mode(mode)
    frame = (group, pool, registered)
    frames.append(frame)
    return frame


def binding_open() -> bool:
    """Whether a binding context is open on this thread."""
    mode = _MODES.mode
    return mode is not None and bool(mode.frames)


def start_binding(group: Any, pool: Any = None) -> Frame:
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
    identity: two frames of the same group are equal tuples."""
    mode = _MODES.mode
    frames = mode.frames if mode is not None else []
    i = len(frames) - 1
    while i >= 0 and frames[i] is not frame:
        i -= 1
    if i < 0:  # ended already, or begun on another thread
        return
    del frames[i]
    if not frames:
        _pop_mode()


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


def bind_buffer(tensor: Any, group: Any, *, registered: Any = None) -> Any:
    """Bind an existing tensor's storage to ``group`` by hand (for custom allocators); it
    counts as registered with ``group`` unless ``registered`` names other groups."""
    pg = as_process_group(group)
    regs = {pg} if registered is None else {as_process_group(g) for g in registered}
    TABLE.bind(tensor, pg, finder().find(), regs)
    return tensor
