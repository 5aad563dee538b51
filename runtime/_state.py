"""State shared by the torch-free hooks and the shim: which shim is active, and the depth of
checked collectives on this thread (a collective run by a checked one is not checked again)."""

from __future__ import annotations

import threading
from typing import Any


class _Depth(threading.local):
    depth = 0  # class default: every thread starts at 0 without an initialiser


TLS = _Depth()


class Active:
    """The installed shim (``None`` when off); hooks read it on every call, so it is a class
    attribute, not a module global that an import could have copied."""

    shim: Any = None
