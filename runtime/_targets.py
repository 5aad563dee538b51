"""The profile's callables, hooked where the program defines them: contexts, allocators,
group classes, helpers.

Each is patched when its module is imported (``_imports.when_imported``), or at once when it
already is; a function imported by name elsewhere before that (``from m import f``) is found
in every loaded module and re-bound too. Classes are patched in place, so every spelling of
them is covered. The wrappers import nothing and cost one attribute read while no shim is
active; while code is being compiled they stand aside, so ``torch.compile`` traces the
original.

* a **context** (a function returning a context manager, or a context-manager class) binds
  what is allocated inside it to its group argument;
* an **allocator** binds the tensors it returns to its group argument (those it did not bind
  through a context already);
* a **group class** has its collective methods checked on the group in its ``group_attr``;
* **helpers** (allocators and collective helpers) have their frames skipped when the shim
  looks for the caller's line.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

from commgroup_lint.profile import Context, GroupParam

from . import _imports, _sites
from ._knowledge import Knowledge
from ._patch import Patcher
from ._state import TLS, Active


def _active() -> Any:
    """The shim, when one is active and the caller is not being compiled."""
    shim = Active.shim
    return None if shim is None or shim.compiling() else shim


class _Argument:
    """Where a call passes one parameter: its keyword name and its position in ``args``."""

    def __init__(self, name: str, index: int | None) -> None:
        self.name, self.index = name, index

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

    def value(self, args: tuple, kwargs: dict) -> Any:
        """The argument, or None when it was not passed (torch's convention: the default group)."""
        if self.name in kwargs:
            return kwargs[self.name]
        if self.index is not None and 0 <= self.index < len(args):
            return args[self.index]
        return None


class _BoundContext:
    """The context manager a profile context returned, binding what is allocated in its body.

    The shim's binding starts once the real context is entered and ends before it exits; its
    function mode is then above any the real context pushes, so a binding the real context
    makes itself (a modelled pool with its own registration) comes first and is kept."""

    def __init__(self, inner: Any, shim: Any, group: Any) -> None:
        self._inner, self._shim, self._group = inner, shim, group
        self._token: Any = None

    def __enter__(self) -> Any:
        entered = self._inner.__enter__()
        self._token = self._shim.start_binding(self._group)
        return entered

    def __exit__(self, *exc: Any) -> Any:
        if self._token is not None:
            self._shim.end_binding(self._token)
            self._token = None
        return self._inner.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _context_function(func: Callable[..., Any], group: _Argument, disabled: _Argument | None) -> Callable[..., Any]:
    """A context that returned a ``nullcontext`` (a one-rank group, symmetric memory off) binds nothing."""

    @functools.wraps(func)
    def context(*args: Any, **kwargs: Any) -> Any:
        cm = func(*args, **kwargs)
        shim = _active()
        if shim is None or not hasattr(cm, "__exit__") or isinstance(cm, contextlib.nullcontext):
            return cm
        if disabled is not None and disabled.value(args, kwargs):
            return cm
        return _BoundContext(cm, shim, group.value(args, kwargs))

    return context


_BINDING = "_commgroup_lint_binding"


def _patch_context_class(cls: type, spec: Context, patcher: Patcher) -> None:
    """``__init__`` notes the group; the binding spans the body, as for ``_BoundContext``."""
    group = _Argument.of(cls.__init__, spec.group.param, spec.group.index, leading=1)
    disabled = _Argument.of(cls.__init__, spec.disabled, None, leading=1) if spec.disabled else None
    init, enter, exit_ = cls.__init__, cls.__enter__, cls.__exit__

    def __init__(*args: Any, **kwargs: Any) -> None:
        init(*args, **kwargs)
        off = disabled is not None and disabled.value(args, kwargs)
        try:
            vars(args[0])[_BINDING] = None if off else [group.value(args, kwargs), None]
        except TypeError:  # no __dict__: such instances are not bound
            pass

    def __enter__(self: Any) -> Any:
        entered = enter(self)
        binding = getattr(self, "__dict__", {}).get(_BINDING)
        shim = _active()
        if binding is not None and binding[1] is None and shim is not None:  # a patched base may have
            binding[1] = (shim, shim.start_binding(binding[0]))
        return entered

    def __exit__(self: Any, *exc: Any) -> Any:
        binding = getattr(self, "__dict__", {}).get(_BINDING)
        if binding is not None and binding[1] is not None:
            shim, token = binding[1]
            shim.end_binding(token)
            binding[1] = None
        return exit_(self, *exc)

    for name, method in (("__init__", __init__), ("__enter__", __enter__), ("__exit__", __exit__)):
        functools.update_wrapper(method, getattr(cls, name))
        patcher.set(cls, name, method)


def _allocator(func: Callable[..., Any], group: _Argument) -> Callable[..., Any]:
    @functools.wraps(func)
    def allocator(*args: Any, **kwargs: Any) -> Any:
        out = func(*args, **kwargs)
        shim = _active()
        if shim is not None:
            shim.bind_result(out, group.value(args, kwargs))
        return out

    return allocator


def _group_method(func: Callable[..., Any], name: str, group_attr: str) -> Callable[..., Any]:
    from ._check import checked  # torch's side: patching happens once a shim is installed

    check = checked(func, name, group_attr=group_attr)  # the group: the wrapper's `group_attr`

    @functools.wraps(func)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _active() is None or TLS.depth:  # compiling first: torch.compile traces the original
            return func(self, *args, **kwargs)
        return check(self, *args, **kwargs)

    return method


def wrap_group_methods(cls: type, methods: Iterable[str], group_attr: str, patcher: Patcher) -> None:
    """Check the collective ``methods`` of a group wrapper class on ``getattr(self, group_attr)``."""
    for name in methods:
        func = inspect.getattr_static(cls, name, None)
        if isinstance(func, types.FunctionType):
            patcher.set(cls, name, _group_method(func, name, group_attr))


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
        for name in {*k.contexts, *k.allocators, *k.group_classes, *k.helpers}:
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
        if name in k.group_classes and isinstance(obj, type):
            wrap_group_methods(obj, k.collective_methods, k.group_classes[name].group_attr, self.patcher)
        if name in k.contexts and isinstance(obj, type):
            _patch_context_class(obj, k.contexts[name], self.patcher)
            return
        wrapper = None
        if name in k.contexts and isinstance(func, types.FunctionType):
            spec = k.contexts[name]
            disabled = _Argument.of(func, spec.disabled, None, leading) if spec.disabled else None
            wrapper = _context_function(func, _Argument.of(func, spec.group.param, spec.group.index, leading), disabled)
        elif name in k.allocators and isinstance(func, types.FunctionType):
            param: GroupParam = k.allocators[name]
            wrapper = _allocator(func, _Argument.of(func, param.param, param.index, leading))
        if wrapper is None:
            return
        self.patcher.set(owner, attr, type(raw)(wrapper) if isinstance(raw, (staticmethod, classmethod)) else wrapper)
        if self.sweeping and isinstance(owner, types.ModuleType):
            self.rebind[id(raw)] = (raw, wrapper)

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
