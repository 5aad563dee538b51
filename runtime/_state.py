"""State shared by the torch-free hooks and the shim: which shim is active, the depth of checked
collectives on this thread (a collective run by a checked one is not checked again), and how
many contexts naming a group it is entering."""

from __future__ import annotations

import threading
from typing import Any


class _Depth(threading.local):
    depth = 0  # class default: every thread starts at 0 without an initialiser


TLS = _Depth()


class _Opening(threading.local):
    """How many contexts that name a group this thread is making or entering: their binding
    begins once they are entered, after what they do inside (enter ``use_mem_pool``)."""

    depth = 0


OPENING = _Opening()


class Active:
    """The installed shim (``None`` when off); hooks read it on every call, so it is a class
    attribute, not a module global that an import could have copied."""

    shim: Any = None


def active() -> Any:
    """The shim, when one is active and the caller is not being compiled."""
    shim = Active.shim
    return None if shim is None or shim.compiling() else shim
