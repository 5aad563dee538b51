"""Build the shim's extension (``runtime/*.cpp``) on a machine without CUDA, for the CPU tests.

The CUDA caching allocator's header is replaced by a stand-in (``native_stub/``, first on the
include path) whose ``cgl_test_allocator_event`` plays the allocator; everything else is the
real source, compiled with the C++ compiler and torch's headers and libraries, without ninja.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch.utils import cpp_extension

from commgroup_lint.runtime import _allocator_hook

NAME = "cgl_native_test"
STUB = Path(__file__).parent / "native_stub"


def compiler() -> str | None:
    return shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")


def build(directory: Path) -> ModuleType:
    """Compile each source, link them, and import the module (``RuntimeError`` on failure)."""
    cxx = compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler")
    flags = [f"-I{STUB}", *(f"-I{p}" for p in cpp_extension.include_paths()), f"-I{sysconfig.get_paths()['include']}",
             "-std=c++17", "-O1", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
             f"-DTORCH_EXTENSION_NAME={NAME}", "-DTORCH_API_INCLUDE_EXTENSION_H", "-w"]
    objects, jobs = [], []
    for source in _allocator_hook._SOURCES:
        obj = directory / (Path(source).stem + ".o")
        objects.append(str(obj))
        jobs.append(subprocess.Popen([cxx, *flags, "-c", source, "-o", str(obj)], stderr=subprocess.PIPE, text=True))
    errors = [err for job in jobs for err in [job.communicate()[1]] if job.returncode]
    if errors:
        raise RuntimeError(errors[0][-2000:])
    lib = cpp_extension.library_paths()[0]
    target = directory / f"{NAME}{sysconfig.get_config_var('EXT_SUFFIX')}"
    link = subprocess.run([cxx, "-shared", *objects, f"-L{lib}", "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python",
                           f"-Wl,-rpath,{lib}", "-o", str(target)], capture_output=True, text=True)
    if link.returncode:
        raise RuntimeError(link.stderr[-2000:])
    loader = importlib.machinery.ExtensionFileLoader(NAME, str(target))
    spec = importlib.util.spec_from_file_location(NAME, str(target), loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[NAME] = module
    return module


def play_allocator(native: ModuleType, set_attribute: Callable[[Any, str, Any], None] = setattr
                   ) -> Callable[[int, int, int], None]:
    """Make ``native`` the process's allocation hook, its allocator played by the caller:
    ``event(1, address, size)`` hands out a block, ``event(0, address, size)`` frees it, as the
    CUDA caching allocator tells its trace tracker. ``set_attribute`` sets the shim's state
    (``monkeypatch.setattr`` in a test, to undo it after)."""
    from commgroup_lint.runtime import _binding
    from commgroup_lint.runtime._table import TABLE

    event = ctypes.CDLL(native.__file__).cgl_test_allocator_event
    event.argtypes = [ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64]
    for name, value in (("attached", native), ("native", native), ("settled", True), ("context", None)):
        set_attribute(_allocator_hook.HookState, name, value)
    set_attribute(TABLE, "block_serial", native.serial)
    native.attach(True)
    _binding._configure(native)
    return event
