"""The profile's binding contexts, wrapped: a **context** (a function returning a context
manager, or a context-manager class) binds what is allocated in its body to its group argument,
unless its ``disabled`` argument is true or its ``enabled`` one false; a **pool context**
(``use_mem_pool(pool)``) binds it to the groups its pool is bound to, now or later. The binding
itself is ``_binding``'s; while code is being compiled the wrappers stand aside.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from typing import Any

from commgroup_lint.profile import Context

from ._arguments import OFF, Argument, GroupArgument
from ._binding import binding_open, end_binding, start_binding, start_pool_binding
from ._patch import Patcher
from ._state import OPENING, Active, active


class Binds:
    """How a call of a context binds its body: ``target(args, kwargs)`` is what it binds to
    (``OFF``: nothing), ``start(target)`` begins the binding and returns its frame. A pool
    context has its ``pool`` argument: one made where :func:`_theirs` says so binds nothing.
    A context that names a group ``opens``: pool contexts made while it is made or entered
    may be its own."""

    def __init__(self, target: Callable[[tuple, dict], Any], start: Callable[[Any], Any],
                 pool: Argument | None = None) -> None:
        self.target, self.start, self.pool = target, start, pool
        self.opens = pool is None


@functools.cache
def _lists_segments(cls: Any) -> bool:
    """Whether pools of type ``cls`` list their segments (a CUDA ``MemPool``): the shim then
    reads their registrations from the segments, and their memory's records never carry
    the pool's groups (see ``_registration.bind_pool``)."""
    return callable(getattr(cls, "snapshot", None))


def group_binds(spec: Context, group: GroupArgument, func: Any, leading: int) -> Binds:
    """A profile context: off when its ``disabled`` argument is true or its ``enabled`` one is
    false (left out, each means on)."""
    disabled = Argument.of(func, spec.disabled, None, leading) if spec.disabled else None
    enabled = Argument.of(func, spec.enabled, None, leading) if spec.enabled else None
    # the arguments as Argument.value reads them, written out (no `disabled`: never in args)
    off_name, off_at = (disabled.name, disabled.at) if disabled is not None else ("", sys.maxsize)
    name, at = group.name, group.at

    def target(args: tuple, kwargs: dict) -> Any:
        if kwargs[off_name] if kwargs and off_name in kwargs else off_at < len(args) and args[off_at]:
            return OFF
        if enabled is not None and not enabled.value(args, kwargs, absent=True):
            return OFF
        found = kwargs[name] if kwargs and name in kwargs else args[at] if at < len(args) else None
        return found if found is not None else group.value(args, kwargs)  # left out: its default

    return Binds(target, start_binding)


def pool_binds(pool: Argument) -> Binds:
    """A pool context: what is allocated in its body is bound to its pool's groups.

    Not when the binding of an enclosing context comes first (one is open on this thread, or
    one that names a group is being made or entered) and the pool lists its segments: its
    frame would give the memory no group, and no registered groups either. Those pool
    contexts get no wrapper and no frame: the engines' symmetric-memory contexts enter
    ``use_mem_pool`` inside, so each of them would otherwise pay for two."""

    def target(args: tuple, kwargs: dict) -> Any:
        found = pool.value(args, kwargs)
        return OFF if found is None else found

    return Binds(target, start_pool_binding, pool)


def _theirs(pool: Any) -> bool:
    """Whether a pool context over ``pool`` made now would bind nothing (see :func:`pool_binds`)."""
    return (OPENING.depth > 0 or binding_open()) and _lists_segments(type(pool))  # type: ignore[arg-type]  # a type is hashable


class _BoundContext:
    """The context manager a profile context returned, binding what is allocated in its body.

    The shim's binding starts once the real context is entered and ends before it exits; its
    function mode is then above any the real context pushes, so a binding the real context
    makes itself (a modelled pool with its own registration) comes first and is kept.
    Slotted: every context's entry and exit come here."""

    __slots__ = ("_inner", "_start", "_target", "_opens", "_frame")

    def __init__(self, inner: Any, binds: Binds, target: Any) -> None:
        self._inner, self._start, self._opens = inner, binds.start, binds.opens
        self._target, self._frame = target, None

    def __enter__(self) -> Any:
        if self._opens:  # _opening, written out
            OPENING.depth += 1
            try:
                entered = self._inner.__enter__()
            finally:
                OPENING.depth -= 1
        else:
            entered = self._inner.__enter__()
        self._frame = self._start(self._target)
        return entered

    def __exit__(self, *exc: Any) -> Any:
        frame = self._frame
        if frame is not None:
            self._frame = None
            end_binding(frame)
        return self._inner.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@functools.cache
def _binds_body(cls: Any) -> bool:
    """Whether a context's manager of type ``cls`` can bind its body: not a ``nullcontext``
    (a one-rank group, symmetric memory off). Cached: asked at every context's entry, and an
    ``isinstance`` on ``nullcontext`` (an ABC) runs Python code."""
    return hasattr(cls, "__exit__") and not issubclass(cls, contextlib.nullcontext)


def context_function(func: Callable[..., Any], binds: Binds) -> Callable[..., Any]:
    """The body of the context ``func`` returned is bound while a shim is active (and the call
    is not being compiled: torch.compile traces the original)."""
    target = binds.target
    if binds.pool is not None:
        return _pool_context_function(func, binds, binds.pool)

    @functools.wraps(func)
    def context(*args: Any, **kwargs: Any) -> Any:
        cm = func(*args, **kwargs)
        shim = Active.shim
        if shim is None or not _binds_body(type(cm)) or shim.compiling():  # type: ignore[arg-type]  # a type is hashable
            return cm
        bound = target(args, kwargs)
        return cm if bound is OFF else _BoundContext(cm, binds, bound)

    return context


def _pool_context_function(func: Callable[..., Any], binds: Binds, argument: Argument) -> Callable[..., Any]:
    """:func:`context_function` of a pool context, with :func:`_theirs` written out. The
    engines' contexts enter one inside theirs, where it binds nothing: that case is asked
    first, before the compiler's flag (a context naming a group is never entered while
    compiling, so the count is then 0)."""
    name, at = argument.name, argument.at

    @functools.wraps(func)
    def context(*args: Any, **kwargs: Any) -> Any:
        cm = func(*args, **kwargs)
        shim = Active.shim
        if shim is None:
            return cm
        pool = kwargs[name] if kwargs and name in kwargs else args[at] if at < len(args) else None
        if pool is None or OPENING.depth > 0 and _lists_segments(type(pool)):  # type: ignore[arg-type]  # a type is hashable
            return cm
        if not _binds_body(type(cm)) or shim.compiling() or binding_open() and _lists_segments(type(pool)):  # type: ignore[arg-type]  # a type is hashable
            return cm
        return _BoundContext(cm, binds, pool)

    return context


_BINDING = "_commgroup_lint_binding"


def _opening(binds: Binds, binding: bool, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)``, counted in ``OPENING`` when it makes or enters a context
    that will bind its body to a group."""
    if not (binding and binds.opens):
        return func(*args, **kwargs)
    OPENING.depth += 1
    try:
        return func(*args, **kwargs)
    finally:
        OPENING.depth -= 1


def patch_context_class(cls: type, binds: Binds, patcher: Patcher) -> None:
    """``__init__`` notes the target; the binding spans the body, as for ``_BoundContext``."""
    init, enter, exit_ = (getattr(cls, name) for name in ("__init__", "__enter__", "__exit__"))

    def __init__(*args: Any, **kwargs: Any) -> None:
        target = binds.target(args, kwargs)
        if target is OFF or binds.pool is not None and _theirs(target):
            target = OFF
        _opening(binds, target is not OFF, init, *args, **kwargs)
        try:
            vars(args[0])[_BINDING] = None if target is OFF else [target, None]
        except TypeError:  # no __dict__: such instances are not bound
            pass

    def __enter__(self: Any) -> Any:
        binding = getattr(self, "__dict__", {}).get(_BINDING)
        entered = _opening(binds, binding is not None, enter, self)
        if binding is not None and binding[1] is None and active() is not None:  # a patched base may have
            binding[1] = binds.start(binding[0])
        return entered

    def __exit__(self: Any, *exc: Any) -> Any:
        binding = getattr(self, "__dict__", {}).get(_BINDING)
        if binding is not None and binding[1] is not None:
            end_binding(binding[1])
            binding[1] = None
        return exit_(self, *exc)

    for name, method in (("__init__", __init__), ("__enter__", __enter__), ("__exit__", __exit__)):
        functools.update_wrapper(method, getattr(cls, name))
        patcher.set(cls, name, method)
