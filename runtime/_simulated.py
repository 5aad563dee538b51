"""Simulated symmetric memory: an engine's symmetric-memory context and the shared pool's
registration scheme, minus NCCL, on any device (the CPU tests and the smoke model use it)."""

from __future__ import annotations

import threading
from typing import Any

from ._binding import Frame, end_binding, start_binding


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

    def __exit__(self, *exc: Any) -> None:
        if self._frame is not None:
            frame, self._frame = self._frame, None
            end_binding(frame)
