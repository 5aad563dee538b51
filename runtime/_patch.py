"""Reversible attribute patches: every ``set`` is undone by ``restore`` to the very object
that was there before (or to no attribute at all, when the owner only inherited one)."""

from __future__ import annotations

from typing import Any


class Patcher:
    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, bool, Any]] = []

    def set(self, owner: Any, name: str, value: Any) -> None:
        own = name in vars(owner)
        old = vars(owner)[name] if own else getattr(owner, name, None)
        setattr(owner, name, value)
        self._saved.append((owner, name, own, old))

    def restore(self) -> None:
        while self._saved:
            owner, name, own, old = self._saved.pop()
            try:
                if own:
                    setattr(owner, name, old)
                else:
                    delattr(owner, name)
            except (AttributeError, TypeError):  # pragma: no cover - an owner that became read-only
                pass
