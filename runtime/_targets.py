"""The profile's callables, hooked where the program defines them.

Each is patched when its module is imported (``_imports.when_imported``), or at once; a
function imported by name elsewhere before that (``from m import f``) is re-bound in every
loaded module. Classes are patched in place. Contexts and pool contexts bind their body
(``_contexts``); an allocator binds what it returns, a registration its buffer and a pool
binding its pool, to their group argument (left out: the entry's ``default`` group, else
torch's world group); a group class's collective methods are checked on its ``group_attr``
group; a getter of one group names what it returns after it; helpers' frames are skipped
when the shim looks for the user's line. The wrappers cost one attribute read while no shim is
active, and stand aside while ``torch.compile`` traces.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

from commgroup_lint.profile import GroupParam

from . import _imports, _sites
from ._arguments import OFF, Argument, GroupArgument
from ._binding import bind_result
from ._check import checked
from ._contexts import Binds, context_function, group_binds, patch_context_class, pool_binds
from ._groups import named_group, returned_by_getter
from ._knowledge import Knowledge
from ._patch import Patcher
from ._registration import bind_pool, pool_method, register
from ._state import active


def _then_bind(func: Callable[..., Any], subject: Callable[[Any, tuple, dict], Any], group: GroupArgument,
               action: Callable[[Any, Any], None]) -> Callable[..., Any]:
    """``func``, then (while a shim is active) ``action(subject, group)``: what it returned (an
    allocator) or one of its arguments (a registration's buffer, a pool binding's pool), bound
    to its group argument."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = func(*args, **kwargs)
        if active() is not None:
            target = group.value(args, kwargs)
            if target is not OFF:
                action(subject(out, args, kwargs), target)
        return out

    return wrapper


def _naming(func: Callable[..., Any], canonical: str) -> Callable[..., Any]:
    """``func``, a getter of the profile's group ``canonical``, naming what it returns so."""

    @functools.wraps(func)
    def getter(*args: Any, **kwargs: Any) -> Any:
        out = func(*args, **kwargs)
        if out is not None and active() is not None:
            returned_by_getter(out, canonical)
        return out

    return getter


def _returned(out: Any, args: tuple, kwargs: dict) -> Any:
    return out


def _argument(argument: Argument) -> Callable[[Any, tuple, dict], Any]:
    return lambda out, args, kwargs: argument.value(args, kwargs)


def _group_method(func: Callable[..., Any], name: str, group_attr: str) -> Callable[..., Any]:
    """The method checked on the wrapper's ``group_attr``; while compiling, the original runs
    (torch.compile traces it)."""
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

    def apply(self) -> None:
        k = self.knowledge
        names = {*k.contexts, *k.pool_contexts, *k.allocators, *k.registrations, *k.pool_bindings,
                 *k.group_classes, *k.helpers, *k.getters}
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
            self.patcher.set(owner, attr, wrapper)
            if self.sweeping:
                self.rebind[id(raw)] = (raw, wrapper)
            return
        self.patcher.set(owner, attr, type(raw)(wrapper) if isinstance(raw, (staticmethod, classmethod)) else wrapper)

    def _patch_class(self, name: str, cls: type) -> None:
        k = self.knowledge
        if name in k.group_classes:
            group_attr = k.group_classes[name].group_attr
            wrap_group_methods(cls, k.collective_methods, group_attr, self.patcher)
            wrap_pool_methods(cls, k.register_pool_methods, group_attr, self.patcher)
        binds = self._binds(name, cls.__init__, leading=1)  # type: ignore[misc]  # the class's own
        if binds is not None:
            patch_context_class(cls, binds, self.patcher)

    def _wrapper(self, name: str, func: types.FunctionType, leading: int) -> Callable[..., Any] | None:
        """The wrapper of a profile function, or None when the profile says nothing it acts on."""
        k = self.knowledge
        binds = self._binds(name, func, leading)
        if binds is not None:
            return context_function(func, binds)
        if name in k.allocators:
            return _then_bind(func, _returned, self._group(k.allocators[name], func, leading), bind_result)
        if name in k.registrations:
            spec = k.registrations[name]
            buffer = Argument.of(func, spec.buffer.param, spec.buffer.index, leading)
            return _then_bind(func, _argument(buffer), self._group(spec.group, func, leading), register)
        if name in k.pool_bindings:
            binding = k.pool_bindings[name]
            pool = Argument.of(func, binding.pool.param, binding.pool.index, leading)
            return _then_bind(func, _argument(pool), self._group(binding.groups, func, leading), bind_pool)
        if name in k.getters:
            return _naming(func, k.getters[name])
        return None

    def _binds(self, name: str, func: Any, leading: int) -> Binds | None:
        """How a context (or pool context) of the profile binds, or None for any other name."""
        k = self.knowledge
        if name in k.contexts:
            spec = k.contexts[name]
            return group_binds(spec, self._group(spec.group, func, leading), func, leading)
        if name in k.pool_contexts:
            param = k.pool_contexts[name]
            return pool_binds(Argument.of(func, param.param, param.index, leading))
        return None

    def _group(self, param: GroupParam, func: Any, leading: int) -> GroupArgument:
        """The group argument ``param`` of ``func``, with its ``default`` group."""
        argument = Argument.of(func, param.param, param.index, leading)
        if param.default is None:
            return GroupArgument(argument, None)
        return GroupArgument(argument, functools.partial(named_group, self.knowledge.group_sources.get(param.default, ())))

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
            self.patcher.set(module, key, wrapper)
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
