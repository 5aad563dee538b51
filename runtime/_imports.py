"""Post-import hooks: run a callback once a module has been imported, without importing it.

``when_imported(name, callback)`` calls ``callback(module, complete)`` at once when ``name`` is
imported; while it is being imported (the shim installed from inside its import), at each read
of its attributes (its class swapped for a subclass meanwhile) until the callback returns True;
otherwise right after its loader executed it (a meta-path finder, consulted only for the
watched names, wraps that module's ``exec_module``). ``complete`` says whether the module has
finished executing. Callbacks never raise into the program: a failure is one line on stderr.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from importlib.abc import MetaPathFinder
from typing import Any

Callback = Callable[[types.ModuleType, bool], bool]


def say(message: str) -> None:
    """One line on stderr: the shim's only way to report a problem of its own."""
    try:
        print(f"commgroup-lint runtime: {message}", file=sys.stderr, flush=True)
    except Exception:  # pragma: no cover - stderr closed
        pass


def _run(callback: Callback, module: types.ModuleType, complete: bool) -> bool:
    try:
        return bool(callback(module, complete)) or complete
    except Exception as exc:  # a hook must never break the program's import
        say(f"hook for {module.__name__} failed: {type(exc).__name__}: {exc}")
        return True


def _initializing(module: types.ModuleType) -> bool:
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


class _Watcher(MetaPathFinder):
    """Finds nothing itself: for a watched name it asks the other finders, then arranges for
    the callbacks to run once the module's loader has executed it."""

    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callback]] = {}
        self.completing: dict[str, tuple[types.ModuleType, type]] = {}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.callbacks:
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    self._after_exec(spec, name)
                return spec
        return None

    def _after_exec(self, spec: Any, name: str) -> None:
        loader = spec.loader
        exec_module = loader.exec_module

        def run_then_notify(module: types.ModuleType) -> None:
            try:
                exec_module(module)
            finally:
                if getattr(loader, "__dict__", {}).get("exec_module") is run_then_notify:
                    del loader.exec_module
            self.fire(name, module)

        try:
            loader.exec_module = run_then_notify  # this module's loader only: its class is untouched
        except (AttributeError, TypeError):
            spec.loader = _NotifyingLoader(loader, run_then_notify)

    def fire(self, name: str, module: types.ModuleType) -> None:
        for callback in self.callbacks.pop(name, ()):
            _run(callback, module, complete=True)
        self.leave_if_idle()

    def leave_if_idle(self) -> None:
        if not self.callbacks and self in sys.meta_path:
            sys.meta_path.remove(self)

    def _watch_reads(self, name: str, module: types.ModuleType) -> None:
        """Call back at the next attribute reads of a module whose import is in progress."""
        if name in self.completing:
            return
        original = type(module)
        watcher = self

        class Completing(original):  # type: ignore[misc, valid-type]
            def __getattribute__(self, attr: str) -> Any:
                watcher.read(name)
                return original.__getattribute__(self, attr)

        self.completing[name] = (module, original)
        module.__class__ = Completing

    def read(self, name: str) -> None:
        entry = self.completing.pop(name, None)
        if entry is None:
            return
        module, original = entry
        module.__class__ = original  # first: the callbacks may read the module themselves
        complete = not _initializing(module)
        pending = [cb for cb in self.callbacks.pop(name, ()) if not _run(cb, module, complete)]
        if pending:
            self.callbacks[name] = pending
            self._watch_reads(name, module)

    def forget(self, name: str, callback: Callback) -> None:
        callbacks = self.callbacks.get(name)
        if callbacks and callback in callbacks:
            callbacks.remove(callback)
            if not callbacks:
                del self.callbacks[name]
                entry = self.completing.pop(name, None)
                if entry is not None:
                    entry[0].__class__ = entry[1]


class _NotifyingLoader:
    """Stands in for a loader that takes no attributes (a class used as its own loader)."""

    def __init__(self, loader: Any, exec_module: Callable[[types.ModuleType], None]) -> None:
        self._loader, self.exec_module = loader, exec_module

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


_WATCHER = _Watcher()


def when_imported(name: str, callback: Callback) -> None:
    """Call ``callback(module)`` once ``name`` is imported (see the module docstring)."""
    module = sys.modules.get(name)
    if module is not None and not _initializing(module):
        _run(callback, module, complete=True)
        return
    _WATCHER.callbacks.setdefault(name, []).append(callback)
    if module is not None:
        _WATCHER._watch_reads(name, module)
    elif _WATCHER not in sys.meta_path:
        sys.meta_path.insert(0, _WATCHER)


def forget(name: str, callback: Callback) -> None:
    """Cancel a ``when_imported`` that has not run yet; the finder leaves once nothing is watched."""
    _WATCHER.forget(name, callback)
    _WATCHER.leave_if_idle()
