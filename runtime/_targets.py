"""The profile's callables, hooked where the program defines them: contexts, pool contexts,
allocators, registrations, pool bindings, group classes, helpers.

Each is patched when its module is imported (``_imports.when_imported``), or at once when it
already is; a function imported by name elsewhere before that (``from m import f``) is found
in every loaded module and re-bound too. Classes are patched in place, so every spelling of
them is covered. The wrappers import nothing and cost one attribute read while no shim is
active; while code is being compiled they stand aside, so ``torch.compile`` traces the
original.

* a **context** (a function returning a context manager, or a context-manager class) binds
  what is allocated inside it to its group argument, unless its ``disabled`` argument is true
  or its ``enabled`` argument false;
* a **pool context** (``use_mem_pool(pool)``) binds what is allocated inside it to the groups
  its pool is bound to, now or later;
* an **allocator** binds the tensors it returns to its group argument (those it did not bind
  through a context already);
* a **registration** (``rendezvous(tensor, group)``) registers its buffer argument with its
  group argument, and a **pool binding** its pool argument with its group (or groups);
* a **group class** has its collective methods checked on the group in its ``group_attr``, and
  its ``register_pool`` methods bind their pool to that group;
* **helpers** (allocators and collective helpers) have their frames skipped when the shim
  looks for the caller's line.

A group argument left out (or None) is the entry's ``default`` group, found through the
profile's attributes and getters when the call runs; without a ``default``, torch's
convention: the default (world) group.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import threading
import types
from collections.abc import Callable, Iterable
from typing import Any

from commgroup_lint.profile import Context, GroupParam

from . import _imports, _sites
from ._knowledge import Knowledge
from ._native import Native
from ._patch import Patcher
from ._state import OPENING, Active

_SEQUENCES = (list, tuple)
_OFF = object()
"""What a call binds to when it binds nothing (switched off, or its default group not found)."""


def _active() -> Any:
    """The shim, when one is active and the caller is not being compiled."""
    shim = Active.shim
    return None if shim is None or shim.compiling() else shim


class _Argument:
    """Where a call passes one parameter: its keyword name and its position in ``args``."""

    def __init__(self, name: str, index: int | None) -> None:
        self.name, self.index = name, index
        self._at = index if index is not None and index >= 0 else sys.maxsize  # never in args

    @classmethod
    def of(cls, func: Any, name: str, index: int | None, leading: int) -> _Argument:
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
        return args[self._at] if self._at < len(args) else absent


class _Group(_Argument):
    """A group argument. Left out or None, it is the profile's ``default`` group, looked up
    when the call runs (``_OFF`` when it cannot be found: better nothing bound than the wrong
    group); without a ``default``, None stays None, which the shim reads as the world group."""

    def __init__(self, argument: _Argument, default: Callable[[], Any] | None) -> None:
        super().__init__(argument.name, argument.index)
        self.default = default

    def value(self, args: tuple, kwargs: dict, absent: Any = None) -> Any:
        found = super().value(args, kwargs)
        if found is not None or self.default is None:
            return found
        group = self.default()
        return _OFF if group is None else group


class _Binds:
    """How a call of a context binds its body: ``target(args, kwargs)`` is what it binds to
    (``_OFF``: nothing), ``start(target)`` begins the binding and returns its frame,
    ``end(frame)`` ends it. A pool context has its ``pool`` argument: one made where
    :func:`_theirs` says so binds nothing. A context that names a group ``opens``: pool
    contexts made while it is made or entered may be its own."""

    def __init__(self, target: Callable[[tuple, dict], Any], start: Callable[[Any], Any],
                 end: Callable[[Any], None], pool: _Argument | None = None, spec: tuple = ()) -> None:
        self.target, self.start, self.end, self.pool = target, start, end, pool
        self.opens = pool is None
        self.spec = spec  # the arguments as the extension's context entry reads them (_native)


@functools.cache
def _lists_segments(cls: type) -> bool:
    """Whether pools of type ``cls`` list their segments (a CUDA ``MemPool``): the shim then
    reads their registrations from the segments, and their memory's records never carry
    the pool's groups (see ``_registration.bind_pool``)."""
    return callable(getattr(cls, "snapshot", None))


def _group_binds(spec: Context, group: _Group, func: Any, leading: int) -> _Binds:
    """A profile context: off when its ``disabled`` argument is true or its ``enabled`` one is
    false (left out, each means on)."""
    from ._binding import end_binding, start_binding  # torch's side: patching happens once a shim is installed

    disabled = _Argument.of(func, spec.disabled, None, leading) if spec.disabled else None
    enabled = _Argument.of(func, spec.enabled, None, leading) if spec.enabled else None
    # the arguments as _Argument.value reads them, written out (no `disabled`: never in args)
    off_name, off_at = (disabled.name, disabled._at) if disabled is not None else ("", sys.maxsize)
    name, at = group.name, group._at

    def target(args: tuple, kwargs: dict) -> Any:
        if kwargs[off_name] if kwargs and off_name in kwargs else off_at < len(args) and args[off_at]:
            return _OFF
        if enabled is not None and not enabled.value(args, kwargs, absent=True):
            return _OFF
        found = kwargs[name] if kwargs and name in kwargs else args[at] if at < len(args) else None
        return found if found is not None else group.value(args, kwargs)  # left out: its default

    # (disabled's name, its position, the group's name, its position, nothing else to read)
    spec = (disabled.name if disabled is not None else None, off_at, name, at,
            enabled is None and group.default is None)
    return _Binds(target, start_binding, end_binding, spec=spec)


def _pool_binds(pool: _Argument) -> _Binds:
    """A pool context: what is allocated in its body is bound to its pool's groups.

    Not when the binding of an enclosing context comes first (one is open on this thread, or
    one that names a group is being made or entered) and the pool lists its segments: its
    frame would give the memory no group, and no registered groups either. Those pool
    contexts get no wrapper and no frame: the engines' symmetric-memory contexts enter
    ``use_mem_pool`` inside, so each of them would otherwise pay for two."""
    from ._binding import end_binding, start_pool_binding  # torch's side, as above

    name, at = pool.name, pool._at  # _Argument.value, written out

    def target(args: tuple, kwargs: dict) -> Any:
        found = kwargs[name] if kwargs and name in kwargs else args[at] if at < len(args) else None
        return _OFF if found is None else found

    return _Binds(target, start_pool_binding, end_binding, pool, spec=(name, at))


def _theirs(pool: Any) -> bool:
    """Whether a pool context over ``pool`` made now would bind nothing (see :func:`_pool_binds`)."""
    from ._binding import binding_open  # torch's side, as above

    return (OPENING.depth > 0 or binding_open()) and _lists_segments(type(pool))


class _BoundContext:
    """The context manager a profile context returned, binding what is allocated in its body.

    The shim's binding starts once the real context is entered and ends before it exits; its
    function mode is then above any the real context pushes, so a binding the real context
    makes itself (a modelled pool with its own registration) comes first and is kept.
    Slotted, with the binding's functions copied in: every context's entry and exit come here."""

    __slots__ = ("_inner", "_start", "_end", "_target", "_opens", "_frame")

    def __init__(self, inner: Any, binds: _Binds, target: Any) -> None:
        self._inner, self._start, self._end, self._opens = inner, binds.start, binds.end, binds.opens
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
            self._end(frame)
        return self._inner.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@functools.cache
def _binds_body(cls: type) -> bool:
    """Whether a context's manager of type ``cls`` can bind its body: not a ``nullcontext``
    (a one-rank group, symmetric memory off). Cached: asked at every context's entry, and an
    ``isinstance`` on ``nullcontext`` (an ABC) runs Python code."""
    return hasattr(cls, "__exit__") and not issubclass(cls, contextlib.nullcontext)


def _context_function(func: Callable[..., Any], binds: _Binds) -> Callable[..., Any]:
    """The body of the context ``func`` returned is bound while a shim is active (and the call
    is not being compiled: torch.compile traces the original). With the extension
    (``Native.group_context``), the usual call is decided in C and the rest comes here."""
    if binds.pool is not None:
        return _pool_context_function(func, binds, binds.pool)
    from ._allocator_hook import HookState  # torch's side: patching happens once a shim is installed
    from ._groups import _ProcessGroup, as_process_group

    target, spec = binds.target, binds.spec

    def rest(cm: Any, args: tuple, kwargs: dict) -> Any:
        shim = Active.shim
        if shim is None or not _binds_body(type(cm)) or shim.compiling():
            return cm
        bound = target(args, kwargs)
        if bound is _OFF:
            return cm
        hooked = HookState.context  # the allocation hook's own manager: the binding in C
        if hooked is not None and not isinstance(bound, _SEQUENCES):
            return hooked(cm, bound if type(bound) is _ProcessGroup else as_process_group(bound))
        return _BoundContext(cm, binds, bound)

    @functools.wraps(func)
    def context(*args: Any, **kwargs: Any) -> Any:
        enter = Native.group_context
        if enter is not None:
            return enter(func, rest, spec, *args, **kwargs)
        return rest(func(*args, **kwargs), args, kwargs)

    context.native_entry = ("group_context", func, rest, spec)  # its form in C: _native_form
    return context


def _pool_context_function(func: Callable[..., Any], binds: _Binds, argument: _Argument) -> Callable[..., Any]:
    """:func:`_context_function` of a pool context, with its target and :func:`_theirs` written
    out. The engines' contexts enter one inside theirs, where it binds nothing: that case is
    asked first, before the compiler's flag (a context naming a group is never entered while
    compiling, so the count is then 0, and the compiler reads it as any thread-local). With the
    extension (``Native.pool_context``), that case is decided in C."""
    from ._binding import binding_open  # torch's side: patching happens once a shim is installed

    name, at = argument.name, argument._at
    spec = binds.spec

    def rest(cm: Any, args: tuple, kwargs: dict) -> Any:
        shim = Active.shim
        if shim is None:
            return cm
        pool = kwargs[name] if kwargs and name in kwargs else args[at] if at < len(args) else None
        if pool is None or OPENING.depth > 0 and _lists_segments(type(pool)):
            return cm
        if not _binds_body(type(cm)) or shim.compiling() or binding_open() and _lists_segments(type(pool)):
            return cm
        return _BoundContext(cm, binds, pool)

    @functools.wraps(func)
    def context(*args: Any, **kwargs: Any) -> Any:
        enter = Native.pool_context
        if enter is not None:
            return enter(func, rest, spec, *args, **kwargs)
        return rest(func(*args, **kwargs), args, kwargs)

    context.native_entry = ("pool_context", func, rest, spec)  # its form in C: _native_form
    return context


def use_native(native: Any) -> None:
    """Enter profile contexts through ``native`` (the allocation hook's extension) from now on."""
    import torch

    from ._allocator_hook import HookState
    from ._groups import _HOLDER, _LABELS, _ProcessGroup

    native.configure_contexts(Active, HookState, _binds_body, _lists_segments, _HOLDER, _LABELS, _ProcessGroup,
                              torch.compiler)
    Native.group_context, Native.pool_context = native.group_context, native.pool_context
    shim = Active.shim
    if shim is not None:  # the hook is settled while a shim binds: its wrappers become C calls
        shim.targets.use_native_forms()


def _native_form(wrapper: Callable[..., Any]) -> Callable[..., Any] | None:
    """A profile context's wrapper as a C call: ``functools.partial`` over the extension's
    entry, which runs no Python of the shim's on the usual call (the wrapper's frame, its
    argument tuple and dictionary were about a quarter of what the shim adds to a context);
    None without the extension. It reads as the function it wraps (name, ``__wrapped__``,
    signature), and torch.compile traces it as the call it stands for
    (``_native.traced_as_call``)."""
    kind, func, rest, spec = getattr(wrapper, "native_entry", (None,) * 4)
    enter = getattr(Native, kind) if kind is not None else None
    if enter is None:
        return None
    return functools.update_wrapper(functools.partial(enter, func, rest, spec), func)


_BINDING = "_commgroup_lint_binding"


def _opening(binds: _Binds, binding: bool, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)``, counted in ``OPENING`` when it makes or enters a context
    that will bind its body to a group."""
    if not (binding and binds.opens):
        return func(*args, **kwargs)
    OPENING.depth += 1
    try:
        return func(*args, **kwargs)
    finally:
        OPENING.depth -= 1


def _patch_context_class(cls: type, binds: _Binds, patcher: Patcher) -> None:
    """``__init__`` notes the target; the binding spans the body, as for ``_BoundContext``."""
    init, enter, exit_ = cls.__init__, cls.__enter__, cls.__exit__

    def __init__(*args: Any, **kwargs: Any) -> None:
        target = binds.target(args, kwargs)
        if target is _OFF or binds.pool is not None and _theirs(target):
            target = _OFF
        _opening(binds, target is not _OFF, init, *args, **kwargs)
        try:
            vars(args[0])[_BINDING] = None if target is _OFF else [target, None]
        except TypeError:  # no __dict__: such instances are not bound
            pass

    def __enter__(self: Any) -> Any:
        binding = getattr(self, "__dict__", {}).get(_BINDING)
        entered = _opening(binds, binding is not None, enter, self)
        if binding is not None and binding[1] is None and _active() is not None:  # a patched base may have
            binding[1] = binds.start(binding[0])
        return entered

    def __exit__(self: Any, *exc: Any) -> Any:
        binding = getattr(self, "__dict__", {}).get(_BINDING)
        if binding is not None and binding[1] is not None:
            binds.end(binding[1])
            binding[1] = None
        return exit_(self, *exc)

    for name, method in (("__init__", __init__), ("__enter__", __enter__), ("__exit__", __exit__)):
        functools.update_wrapper(method, getattr(cls, name))
        patcher.set(cls, name, method)


def _then_bind(func: Callable[..., Any], subject: Callable[[Any, tuple, dict], Any], group: _Group,
               action: str) -> Callable[..., Any]:
    """``func``, then (while a shim is active) ``shim.<action>(subject, group)``: what it
    returned (an allocator) or one of its arguments (a registration's buffer, a pool binding's
    pool), bound to its group argument."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = func(*args, **kwargs)
        shim = _active()
        if shim is not None:
            target = group.value(args, kwargs)
            if target is not _OFF:
                getattr(shim, action)(subject(out, args, kwargs), target)
        return out

    return wrapper


def _returned(out: Any, args: tuple, kwargs: dict) -> Any:
    return out


def _argument(argument: _Argument) -> Callable[[Any, tuple, dict], Any]:
    return lambda out, args, kwargs: argument.value(args, kwargs)


def _group_method(func: Callable[..., Any], name: str, group_attr: str) -> Callable[..., Any]:
    """The method checked on the wrapper's ``group_attr``; while compiling, the original runs
    (torch.compile traces it)."""
    from ._check import checked  # torch's side: patching happens once a shim is installed

    return functools.wraps(func)(checked(func, name, group_attr=group_attr, traced=True))


def wrap_group_methods(cls: type, methods: Iterable[str], group_attr: str, patcher: Patcher) -> None:
    """Check the collective ``methods`` of a group wrapper class on ``getattr(self, group_attr)``."""
    for name in methods:
        func = inspect.getattr_static(cls, name, None)
        if isinstance(func, types.FunctionType):
            patcher.set(cls, name, _group_method(func, name, group_attr))


def wrap_pool_methods(cls: type, methods: Iterable[str], group_attr: str, patcher: Patcher) -> None:
    """Bind the pool argument of the ``register_pool`` methods of a group wrapper class to
    ``getattr(self, group_attr)``."""
    from ._registration import pool_method  # torch's side: patching happens once a shim is installed

    for name in methods:
        func = inspect.getattr_static(cls, name, None)
        if isinstance(func, types.FunctionType):
            patcher.set(cls, name, pool_method(func, lambda owner: getattr(owner, group_attr, None) or owner))


class Targets:
    """Applies one ``Knowledge`` to the program; ``remove()`` undoes every patch."""

    def __init__(self, knowledge: Knowledge) -> None:
        self.knowledge = knowledge
        self.patcher = Patcher()
        self.done: set[str] = set()
        self.by_module: dict[str, list[str]] = {}
        self.watching: list[tuple[str, _imports.Callback]] = []
        self.rebind: dict[int, tuple[Any, Any]] = {}  # id(original) -> (original, wrapper)
        self.sweeping = False  # patches made while applying: the functions may have aliases
        self.in_modules: list[tuple[Any, str, Any]] = []  # (module, name, wrapper) of contexts
        # the hook may settle on another thread than the one that removes the patches
        self.forms_lock = threading.Lock()
        self.removed = False

    def apply(self) -> None:
        k = self.knowledge
        names = {*k.contexts, *k.pool_contexts, *k.allocators, *k.registrations, *k.pool_bindings,
                 *k.group_classes, *k.helpers}
        for name in names:
            parts = name.split(".")
            for i in range(1, len(parts)):
                self.by_module.setdefault(".".join(parts[:i]), []).append(name)
        self.sweeping = True
        for module in self.by_module:
            callback = functools.partial(self._resolve, module)
            self.watching.append((module, callback))
            _imports.when_imported(module, callback)
        self.sweeping = False
        self._rebind_aliases()

    def remove(self) -> None:
        for module, callback in self.watching:
            _imports.forget(module, callback)
        self.watching.clear()
        with self.forms_lock:
            self.removed = True
            self.patcher.restore()

    def _resolve(self, prefix: str, module: types.ModuleType, complete: bool) -> bool:
        """Patch what ``module`` defines of the names under ``prefix``; True when none is left."""
        left = False
        for name in self.by_module[prefix]:
            if name in self.done:
                continue
            owner, attr, obj = _lookup(module, name[len(prefix) + 1 :])
            if obj is None:
                left = True
                continue
            self.done.add(name)
            self._patch(name, owner, attr, obj)
        return complete or not left

    def _patch(self, name: str, owner: Any, attr: str, obj: Any) -> None:
        k = self.knowledge
        raw = inspect.getattr_static(owner, attr)
        func = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
        method = isinstance(owner, type) and isinstance(raw, types.FunctionType)
        leading = 1 if method or isinstance(raw, classmethod) else 0  # self or cls, in args
        if name in k.helpers and isinstance(func, types.FunctionType):
            _sites.helper(inspect.unwrap(func))
        if isinstance(obj, type):
            self._patch_class(name, obj)
            return
        wrapper = self._wrapper(name, func, leading) if isinstance(func, types.FunctionType) else None
        if wrapper is None:
            return
        if isinstance(owner, types.ModuleType):
            self._set_in_module(owner, attr, wrapper)
            if self.sweeping:
                self.rebind[id(raw)] = (raw, wrapper)
            return
        self.patcher.set(owner, attr, type(raw)(wrapper) if isinstance(raw, (staticmethod, classmethod)) else wrapper)

    def _set_in_module(self, module: types.ModuleType, name: str, wrapper: Callable[..., Any]) -> None:
        """``module.name = wrapper``; a context's in its C form where the extension is in use, and
        noted, to take that form once it is (a method's wrapper stays Python: it binds ``self``)."""
        if hasattr(wrapper, "native_entry"):
            self.in_modules.append((module, name, wrapper))
        self.patcher.set(module, name, _native_form(wrapper) or wrapper)

    def use_native_forms(self) -> None:
        """The contexts' wrappers in modules that are still Python take their C form (none once
        the patches are removed: a form set then would have nothing to undo it)."""
        with self.forms_lock:
            if self.removed:
                return
            for module, name, wrapper in self.in_modules:
                form = vars(module).get(name) is wrapper and _native_form(wrapper)
                if form:
                    self.patcher.set(module, name, form)

    def _patch_class(self, name: str, cls: type) -> None:
        k = self.knowledge
        if name in k.group_classes:
            group_attr = k.group_classes[name].group_attr
            wrap_group_methods(cls, k.collective_methods, group_attr, self.patcher)
            wrap_pool_methods(cls, k.register_pool_methods, group_attr, self.patcher)
        binds = self._binds(name, cls.__init__, leading=1)
        if binds is not None:
            _patch_context_class(cls, binds, self.patcher)

    def _wrapper(self, name: str, func: types.FunctionType, leading: int) -> Callable[..., Any] | None:
        """The wrapper of a profile function, or None when the profile says nothing it acts on."""
        k = self.knowledge
        binds = self._binds(name, func, leading)
        if binds is not None:
            return _context_function(func, binds)
        if name in k.allocators:
            return _then_bind(func, _returned, self._group(k.allocators[name], func, leading), "bind_result")
        if name in k.registrations:
            spec = k.registrations[name]
            buffer = _Argument.of(func, spec.buffer.param, spec.buffer.index, leading)
            return _then_bind(func, _argument(buffer), self._group(spec.group, func, leading), "register")
        if name in k.pool_bindings:
            binding = k.pool_bindings[name]
            pool = _Argument.of(func, binding.pool.param, binding.pool.index, leading)
            return _then_bind(func, _argument(pool), self._group(binding.groups, func, leading), "bind_pool")
        return None

    def _binds(self, name: str, func: Any, leading: int) -> _Binds | None:
        """How a context (or pool context) of the profile binds, or None for any other name."""
        k = self.knowledge
        if name in k.contexts:
            spec = k.contexts[name]
            return _group_binds(spec, self._group(spec.group, func, leading), func, leading)
        if name in k.pool_contexts:
            param = k.pool_contexts[name]
            return _pool_binds(_Argument.of(func, param.param, param.index, leading))
        return None

    def _group(self, param: GroupParam, func: Any, leading: int) -> _Group:
        """The group argument ``param`` of ``func``, with its ``default`` group."""
        argument = _Argument.of(func, param.param, param.index, leading)
        if param.default is None:
            return _Group(argument, None)
        from ._groups import named_group  # torch's side: patching happens once a shim is installed

        return _Group(argument, functools.partial(named_group, self.knowledge.group_sources.get(param.default, ())))

    def _rebind_aliases(self) -> None:
        """Re-bind, in every loaded module, the names that hold a function patched since."""
        if not self.rebind:
            return
        found = []
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict):
                continue
            for key, value in namespace.items():
                entry = self.rebind.get(id(value))
                if entry is not None and entry[0] is value:
                    found.append((module, key, entry[1]))
        for module, key, wrapper in found:
            self._set_in_module(module, key, wrapper)
        self.rebind.clear()


def _lookup(module: types.ModuleType, path: str) -> tuple[Any, str, Any]:
    """``(owner, attribute, object)`` for a dotted attribute path, or ``(None, "", None)``."""
    owner: Any = module
    parts = path.split(".")
    for part in parts[:-1]:
        owner = inspect.getattr_static(owner, part, None)
        if owner is None:
            return None, "", None
    obj = inspect.getattr_static(owner, parts[-1], None)
    return (owner, parts[-1], obj) if obj is not None else (None, "", None)
