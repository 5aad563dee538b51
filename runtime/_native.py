"""The allocation hook's extension's fast paths, once the hook is in use (None before, and
without it): the passing case of the collective check (``collective_check.cpp``, which takes
``(func, slow, spec, args, kwargs)``) and the usual cases of a profile context's entry
(``context_entry.cpp``, which take ``(func, rest, spec, *args, **kwargs)``). Each calls
``func(*args, **kwargs)`` itself and decides in C, or hands the call to the shim's Python.
torch.compile traces each as ``func(*args, **kwargs)``.

Torch-free: the hooks read it on every call; ``_binding`` fills it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _imports


class Native:
    #: ``check(func, slow, spec, args, kwargs)``: a collective known to pass, run from C
    check: Callable[..., Any] | None = None
    #: ``remember(shim, args, kwargs, group)``: the check in Python found this call passing
    remember: Callable[..., Any] | None = None
    #: ``distributed_c10d.has_torch_function`` while a shim is installed (``_collectives``)
    has_torch_function: Callable[[Any], bool] | None = None
    #: ``distributed_c10d.handle_torch_function`` while a shim is installed (``_collectives``),
    #: and ``set_handle(checks, python_handle)`` to give it a shim's checks
    handle_torch_function: Callable[..., Any] | None = None
    set_handle: Callable[[dict, Callable[..., Any]], None] | None = None
    #: ``group_context(func, rest, spec, *args, **kwargs)``: a profile context naming a group
    group_context: Callable[..., Any] | None = None
    #: ``pool_context(func, rest, spec, *args, **kwargs)``: a pool context
    pool_context: Callable[..., Any] | None = None


_TRACED: list[Callable[..., Any]] = []  # the entries given to torch.compile (held: their ids stay theirs)


def _as_call(func: Any, rest: Any, spec: Any, args: tuple, kwargs: dict) -> Any:
    return func(*args, **kwargs)


def _as_spread_call(func: Any, rest: Any, spec: Any, /, *args: Any, **kwargs: Any) -> Any:
    return func(*args, **kwargs)  # positional-only above: the call's own names may be these


def traced_as_call(*entries: Callable[..., Any], spread: bool = False) -> None:
    """torch.compile traces each of ``entries`` (``entry(func, rest, spec, args, kwargs)``, or
    with ``spread`` ``entry(func, rest, spec, *args, **kwargs)``) as ``func(*args, **kwargs)``:
    registered once ``torch._dynamo`` is imported."""

    def register(module: Any, complete: bool) -> bool:
        if not complete:
            return False
        import torch

        for entry in entries:
            if entry in _TRACED:  # torch.compile takes one polyfill per function
                continue
            _TRACED.append(entry)
            torch.compiler.substitute_in_graph(entry, skip_signature_check=True)(
                _as_spread_call if spread else _as_call)
        return True

    _imports.when_imported("torch._dynamo", register)
