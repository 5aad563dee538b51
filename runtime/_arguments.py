"""Where a profile callable receives the parameters the shim reads: its group, its buffer, its
pool, a context's ``disabled``/``enabled`` switch. Torch-free: the wrappers read them at every call."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

OFF = object()
"""What a call binds to when it binds nothing (switched off, or its default group not found)."""


class Argument:
    """Where a call passes one parameter: its keyword name and its position in ``args``."""

    def __init__(self, name: str, index: int | None) -> None:
        self.name, self.index = name, index
        self.at = index if index is not None and index >= 0 else sys.maxsize  # never in args

    @classmethod
    def of(cls, func: Any, name: str, index: int | None, leading: int) -> Argument:
        """The position from ``func``'s signature when it has the parameter, else the profile's
        call-site ``index`` shifted by the ``leading`` parameters (``self``, ``cls``) that
        ``args`` holds and the call site does not write."""
        try:
            params = list(inspect.signature(func).parameters)
        except (TypeError, ValueError):
            params = []
        if name in params:
            return cls(name, params.index(name))
        return cls(name, None if index is None else index + leading)

    def value(self, args: tuple, kwargs: dict, absent: Any = None) -> Any:
        """The argument, or ``absent`` when it was not passed. (The targets of contexts read
        their arguments the same way, written out: they run at every context's entry.)"""
        if kwargs and self.name in kwargs:
            return kwargs[self.name]
        return args[self.at] if self.at < len(args) else absent


class GroupArgument(Argument):
    """A group argument. Left out or None, it is the profile's ``default`` group, looked up
    when the call runs (``OFF`` when it cannot be found: better nothing bound than the wrong
    group); without a ``default``, None stays None, which the shim reads as the world group."""

    def __init__(self, argument: Argument, default: Callable[[], Any] | None) -> None:
        super().__init__(argument.name, argument.index)
        self.default = default

    def value(self, args: tuple, kwargs: dict, absent: Any = None) -> Any:
        found = super().value(args, kwargs)
        if found is not None or self.default is None:
            return found
        group = self.default()
        return OFF if group is None else group
