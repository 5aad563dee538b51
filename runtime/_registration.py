"""Binding at registration: memory registered with a group after it was allocated.

The profile's ``registrations`` (``rendezvous(tensor, group)``) call :func:`register`; its
``pool_bindings`` and its group classes' ``register_pool`` methods call :func:`bind_pool`
(``_targets`` wraps them). Built in is only what a profile cannot say: the tensor that
``torch.distributed._symmetric_memory.empty`` returns is recorded, its group unknown until a
registration names it (so that it keeps its allocation line); torch's own process group and
backend classes carry ``register_mem_pool``, whose group is the backend's; and
``deregister_mem_pool`` unbinds.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from ._binding import finder
from ._groups import as_process_group
from ._patch import Patcher
from ._table import POOLS, TABLE

_DEREGISTER = "deregister_mem_pool"


def install(patcher: Patcher, register_pool_methods: frozenset[str]) -> None:
    _patch_symmetric_empty(patcher)
    for cls in _torch_group_classes():
        for name in sorted(register_pool_methods):
            _patch_pool_method(patcher, cls, name, bind_pool)
        _patch_pool_method(patcher, cls, _DEREGISTER, unbind_pool)


def register(tensor: Any, group: Any) -> None:
    """``tensor``'s memory is now registered with ``group`` (a group or its name) too; memory
    nothing bound is bound to it, at the caller's line. A record that knew no registration
    counted as registered with its allocation group, and still does."""
    if not isinstance(tensor, torch.Tensor):
        return
    pg = as_process_group(group)
    rec, _ = TABLE.lookup(tensor)
    if rec is None:
        rec = TABLE.bind(tensor, pg, finder().find(), ())
    if rec is not None:
        if rec.alloc_group is None:
            rec.alloc_group = pg
        rec.registered = (rec.registered or {rec.alloc_group}) | {pg}  # a new set: a pool's stays the pool's


def bind_pool(pool: Any, groups: Any) -> None:
    """``pool`` is now registered with ``groups`` (a group, or a list of them). A pool whose
    segments can be listed (a CUDA ``MemPool``) has those segments registered, as NCCL
    registers them (memory it allocates later in a new segment is not); any other pool is
    bound as a whole, through the set of groups its memory's records share."""
    if pool is None:
        return
    pgs = {as_process_group(g) for g in (groups if isinstance(groups, (list, tuple)) else [groups])}
    segments = _segments(pool)
    if segments is None:
        POOLS.of(pool).update(pgs)
    for seg in segments or ():
        for pg in pgs:
            TABLE.register_segment(seg["device"], seg["address"], seg["total_size"], pg)


def unbind_pool(pool: Any, group: Any) -> None:
    """``pool`` is no longer registered with ``group``."""
    pg = as_process_group(group)
    segments = _segments(pool)
    if segments is None:
        POOLS.of(pool).discard(pg)
    for seg in segments or ():
        TABLE.drop_segment(seg["device"], seg["address"], pg)


def pool_method(func: Callable[..., Any], group_of: Callable[[Any], Any],
                action: Callable[[Any, Any], None] = bind_pool) -> Callable[..., Any]:
    """A method ``owner.func(pool, ...)`` that (``action``) binds ``pool`` to ``group_of(owner)``
    once it has run."""

    @functools.wraps(func)
    def method(owner: Any, *args: Any, **kwargs: Any) -> Any:
        out = func(owner, *args, **kwargs)
        action(kwargs.get("pool", args[0] if args else None), group_of(owner))
        return out

    return method


def _patch_pool_method(patcher: Patcher, cls: type, name: str, action: Callable[[Any, Any], None]) -> None:
    if name not in vars(cls):
        return
    try:
        patcher.set(cls, name, pool_method(getattr(cls, name), _group_of_backend, action))
    except (AttributeError, TypeError):  # pragma: no cover - an immutable binding class
        pass


def _patch_symmetric_empty(patcher: Patcher) -> None:
    try:
        symm = importlib.import_module("torch.distributed._symmetric_memory")
    except ImportError:  # pragma: no cover - a build without it
        return
    orig_empty = getattr(symm, "empty", None)
    if orig_empty is None:  # pragma: no cover
        return

    def empty(*args: Any, **kwargs: Any) -> Any:
        t = orig_empty(*args, **kwargs)
        TABLE.bind(t, None, finder().find(), ())
        return t

    empty.__wrapped__ = orig_empty  # type: ignore[attr-defined]
    patcher.set(symm, "empty", empty)


def _torch_group_classes() -> list[type]:
    """torch's process group and backend classes (``ProcessGroupNCCL`` where it is built)."""
    c10d = torch._C._distributed_c10d
    bases = (c10d.ProcessGroup, c10d.Backend)
    return [c for c in vars(c10d).values() if isinstance(c, type) and issubclass(c, bases)]


def _group_of_backend(backend: Any) -> Any:
    """The process group ``backend`` is a backend of, for one of its device types (itself when
    it is a group, or when no group has it)."""
    if isinstance(backend, dist.ProcessGroup):
        return backend
    for pg in list(dist.distributed_c10d._world.pg_map):
        for device in getattr(pg, "_device_types", ()):
            try:
                if pg._get_backend(device) is backend:
                    return pg
            except Exception:  # no backend for that device
                continue
    return backend


def _segments(pool: Any) -> list[dict] | None:
    """The pool's segments, or None for a pool that cannot list them."""
    snapshot = getattr(pool, "snapshot", None)
    if snapshot is None:
        return None
    try:
        return list(snapshot())
    except Exception:  # pragma: no cover - a pool that fails to list them
        return []
