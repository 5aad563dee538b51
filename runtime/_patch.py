"""Reversible patches: every change is undone by ``restore``, last first, to the very object
that was there before (or to nothing, when the owner only inherited an attribute or the
mapping had no such key)."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any


class Patcher:
    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def set(self, owner: Any, name: str, value: Any) -> None:
        if name in vars(owner):
            old = vars(owner)[name]
            self._undo.append(lambda: setattr(owner, name, old))
        else:
            self._undo.append(lambda: delattr(owner, name))
        setattr(owner, name, value)

    def set_item(self, mapping: MutableMapping[Any, Any], key: Any, value: Any) -> None:
        if key in mapping:
            old = mapping[key]
            self._undo.append(lambda: mapping.__setitem__(key, old))
        else:
            self._undo.append(lambda: mapping.pop(key, None))
        mapping[key] = value

    def restore(self) -> None:
        while self._undo:
            try:
                self._undo.pop()()
            except (AttributeError, TypeError):  # pragma: no cover - an owner that became read-only
                pass
