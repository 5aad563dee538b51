"""Real symmetric memory on CUDA: one NCCL mem pool shared by all groups, registered with a
group's communicator (``register_mem_pool``) when its context exits.

``scheme="per_context"`` registers the pool's segments with the group at each context exit
(newer SGLang); ``scheme="on_create"`` registers a segment only with the group whose context
created it (older SGLang). Nothing here knows of the runtime shim: it binds what is allocated
inside through the profile (``use_symmetric_memory`` is a context in ``commgroup-lint.toml``)
and sees the registrations through ``register_mem_pool``.
"""

from __future__ import annotations

import torch

_POOLS: dict = {}  # scheme -> MemPool (the two schemes never share memory)
_REGISTERED: dict = {}  # (scheme, group) -> set of segment addresses registered with it
_SEEN: dict = {}  # scheme -> segment addresses registered with any group


def _backend(group):
    return group.device_group._get_backend(torch.device("cuda"))


def get_nccl_mem_pool(group, scheme="per_context"):
    if scheme not in _POOLS:
        _POOLS[scheme] = torch.cuda.MemPool(_backend(group).mem_allocator)
    return _POOLS[scheme]


class NcclSymmetricMemory:
    def __init__(self, group, scheme="per_context"):
        self.group = group
        self.scheme = scheme
        self.pool = get_nccl_mem_pool(group, scheme)

    def __enter__(self):
        self._use = torch.cuda.use_mem_pool(self.pool)
        self._use.__enter__()
        return self

    def __exit__(self, *exc):
        self._use.__exit__(*exc)
        segs = {s["address"] for s in self.pool.snapshot()}
        mine = _REGISTERED.setdefault((self.scheme, self.group), set())
        seen = _SEEN.setdefault(self.scheme, set())
        new = segs - mine if self.scheme == "per_context" else segs - seen
        if new:
            torch.cuda.synchronize()
            _backend(self.group).register_mem_pool(self.pool)
            mine |= segs
            seen.update(segs)
        return False
