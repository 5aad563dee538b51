"""Binding at registration: memory registered with a group after it was allocated.

* torch symmetric memory: ``torch.distributed._symmetric_memory.empty(...)`` records the
  tensor (its group still unknown), ``rendezvous(tensor, group)`` binds and registers it;
* a NCCL backend's ``register_mem_pool(pool)``: every segment of the pool is recorded as
  registered with that backend's group, ``deregister_mem_pool`` forgets them. A buffer known
  only through this (allocated outside any profile context) is reported at the collective.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch
import torch.distributed as dist

from ._binding import finder
from ._groups import as_process_group
from ._patch import Patcher
from ._table import TABLE


def install(patcher: Patcher) -> None:
    _patch_symmetric_memory(patcher)
    _patch_mem_pool(patcher)


def _patch_symmetric_memory(patcher: Patcher) -> None:
    try:
        symm = importlib.import_module("torch.distributed._symmetric_memory")
    except ImportError:  # pragma: no cover - a build without it
        return
    orig_empty = getattr(symm, "empty", None)
    orig_rendezvous = getattr(symm, "rendezvous", None)
    if orig_empty is not None:

        def empty(*args: Any, **kwargs: Any) -> Any:
            t = orig_empty(*args, **kwargs)
            TABLE.bind(t, None, finder().find(), ())
            return t

        empty.__wrapped__ = orig_empty  # type: ignore[attr-defined]
        patcher.set(symm, "empty", empty)
    if orig_rendezvous is not None:

        def rendezvous(tensor: Any, group: Any, *args: Any, **kwargs: Any) -> Any:
            handle = orig_rendezvous(tensor, group, *args, **kwargs)
            pg = as_process_group(group)
            rec, _ = TABLE.lookup(tensor)
            if rec is None:
                rec = TABLE.bind(tensor, pg, finder().find(), ())
            if rec is not None:
                if rec.alloc_group is None:
                    rec.alloc_group = pg
                rec.registered.add(pg)
            return handle

        rendezvous.__wrapped__ = orig_rendezvous  # type: ignore[attr-defined]
        patcher.set(symm, "rendezvous", rendezvous)


def _patch_mem_pool(patcher: Patcher) -> None:
    cls = getattr(dist, "ProcessGroupNCCL", None)
    if cls is None or not hasattr(cls, "register_mem_pool"):
        return
    orig_register = cls.register_mem_pool
    orig_deregister = getattr(cls, "deregister_mem_pool", None)

    def register_mem_pool(backend: Any, pool: Any, *args: Any, **kwargs: Any) -> Any:
        out = orig_register(backend, pool, *args, **kwargs)
        pg = _group_of_backend(backend)
        for seg in _segments(pool):
            TABLE.register_segment(seg["device"], seg["address"], seg["total_size"], pg)
        return out

    try:
        patcher.set(cls, "register_mem_pool", register_mem_pool)
    except (AttributeError, TypeError):  # pragma: no cover - an immutable binding class
        return
    if orig_deregister is not None:

        def deregister_mem_pool(backend: Any, pool: Any, *args: Any, **kwargs: Any) -> Any:
            for seg in _segments(pool):
                TABLE.drop_segment(seg["device"], seg["address"])
            return orig_deregister(backend, pool, *args, **kwargs)

        patcher.set(cls, "deregister_mem_pool", deregister_mem_pool)


def _group_of_backend(backend: Any) -> Any:
    for pg in list(dist.distributed_c10d._world.pg_map):
        try:
            if pg._get_backend(torch.device("cuda")) is backend:
                return pg
        except Exception:  # a group without a CUDA backend
            continue
    return backend


def _segments(pool: Any) -> list[dict]:
    try:
        return list(pool.snapshot())
    except Exception:  # pragma: no cover - a pool without snapshots
        return []
