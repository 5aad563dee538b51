"""The allocation hook: on CUDA, binding contexts learn their memory from the caching allocator.

Where it can, the shim binds what a context allocates through a trace tracker attached to the
CUDA caching allocator (``allocator_hook.cpp``), not through the function mode that sees every
torch call made in the body: the tracker notes each block handed out while a context is open on
the thread, and the context collects them as it closes. The cost is then per context, not per
torch call, and allocation itself pays a C++ call. A context that allocates the same blocks
again from the same call stack (a model's step) keeps their records, binding nothing new.

The extension is built once per torch and Python version with torch's own builder (a C++
compiler and the CUDA headers are needed, no nvcc), into ``COMMGROUP_LINT_CACHE_DIR`` or the
user's cache directory, and loaded directly afterwards. It is attached once CUDA is
initialized (the allocator exists only then), and used once the process has allocated CUDA
memory: until then (a CPU program in which something initialized CUDA) the function mode binds.
The shim never initializes CUDA itself. The same extension holds the passing case of the
collective check (``collective_check.cpp``) and the usual cases of a profile context's entry
(``context_entry.cpp``), used through ``_native.Native`` once the hook is in use, and the
shim's per-thread counts in C (``thread_counts.cpp``), which both read.
``COMMGROUP_LINT_RUNTIME_HOOK=0`` keeps the function mode. Where the build fails, the reason is
one line on stderr and the function mode is used.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import sys
import warnings
from collections.abc import Callable
from types import ModuleType

from ._imports import say

HOOK_ENV_VAR = "COMMGROUP_LINT_RUNTIME_HOOK"
CACHE_ENV_VAR = "COMMGROUP_LINT_CACHE_DIR"
_HERE = os.path.dirname(os.path.abspath(__file__))
_SOURCES = [os.path.join(_HERE, name)
            for name in ("allocator_hook.cpp", "collective_check.cpp", "context_entry.cpp", "thread_counts.cpp")]
_HEADERS = [os.path.join(_HERE, name) for name in ("class_attribute.h", "thread_counts.h")]
_NAME = "commgroup_lint_allocator_hook"


class HookState:
    """The process's hook: ``attached`` once attached, ``native`` once in use; ``settled`` once
    the answer cannot change (in use, switched off, no CUDA, or the build failed). ``context``:
    the extension's context-manager type (``Bound(inner, group)``), which profile contexts
    return while the hook binds, once configured (``_binding``)."""

    attached: ModuleType | None = None
    native: ModuleType | None = None
    settled = False
    context: type | None = None
    #: called with the extension once it is in use, whoever asked first (``_binding`` sets it)
    configure: Callable[[ModuleType], None] | None = None


def hook() -> ModuleType | None:
    """The hook to bind through, or None (the function mode binds). Asked when a thread's first
    binding context opens, until settled: before CUDA is initialized, and before the process
    has allocated CUDA memory, the mode binds."""
    if HookState.settled:
        return HookState.native
    import torch

    if os.environ.get(HOOK_ENV_VAR, "1").strip() == "0" or not torch.cuda.is_available():
        HookState.settled = True
        return None
    if not torch.cuda.is_initialized():
        return None
    native = HookState.attached or _attach(torch)
    if native is None or not native.in_use():
        return None
    HookState.native, HookState.settled = native, True
    if HookState.configure is not None:
        HookState.configure(native)
    return native


def _attach(torch: ModuleType) -> ModuleType | None:
    """Build or load the hook and attach it (once); None, settled, where it cannot be."""
    try:
        native = _load(torch)
        native.attach(torch.cuda.max_memory_allocated() > 0)  # ever, on this device
    except Exception as exc:  # a missing compiler or header: the mode binds instead
        HookState.settled = True
        say(f"the CUDA allocation hook is not available ({_reason(exc)}); binding through the "
            f"function mode (set {HOOK_ENV_VAR}=0 to skip the build)")
        return None
    from ._table import TABLE

    TABLE.block_serial = native.serial
    HookState.attached = native
    return native


def _build_directory(torch: ModuleType) -> str:
    """Where the hook of this source, torch and Python is built."""
    digest = hashlib.sha256()
    for source in _SOURCES + _HEADERS:
        with open(source, "rb") as f:
            digest.update(f.read())
    digest.update(f"{torch.__version__} {torch.version.cuda} {sys.version}".encode())
    root = os.environ.get(CACHE_ENV_VAR) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "commgroup_lint")
    return os.path.join(root, f"allocator_hook-{digest.hexdigest()[:16]}")


def _load(torch: ModuleType) -> ModuleType:
    """The built extension, imported directly when a finished build is there (no lock file
    left by a build in progress), else built (other processes wait on the builder's lock)."""
    directory = _build_directory(torch)
    built = os.path.join(directory, _NAME + ".so")
    if os.path.exists(built) and not os.path.exists(os.path.join(directory, "lock")):
        loader = importlib.machinery.ExtensionFileLoader(_NAME, built)
        spec = importlib.util.spec_from_file_location(_NAME, built, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module
    from torch.utils import cpp_extension

    os.makedirs(directory, exist_ok=True)
    say(f"building the CUDA allocation hook in {directory} (once per torch and Python version)")
    with warnings.catch_warnings():  # the builder's own warnings are not the program's (-W error)
        warnings.simplefilter("ignore")
        return cpp_extension.load(_NAME, _SOURCES, build_directory=directory, with_cuda=True,
                                  extra_cflags=["-O2"], verbose=False)


def _reason(exc: BaseException) -> str:
    """The line of ``exc`` that says what failed: a compiler's first error, else its first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line.lower()]  # a compiler's or linker's
    reason = (errors or lines or [""])[0]
    return f"{type(exc).__name__}: {reason[:300]}" if reason else type(exc).__name__
