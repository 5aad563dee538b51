"""State shared by the torch-free hooks and the shim: which shim is active, the depth of checked
collectives on this thread (a collective run by a checked one is not checked again), and how
many contexts naming a group it is entering (the allocation hook's context type counts too).

The two counts are ``threading.local`` attributes until the allocation hook's extension is in
use; then they are kept in C (:func:`keep_counts_in`), where its fast paths read them."""

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


def keep_counts_in(native: Any) -> None:
    """Keep ``TLS.depth`` and ``OPENING.depth`` in ``native``'s per-thread counts from now on
    (its ``ThreadCount`` descriptors set on their classes; kept there already, nothing
    changes), this thread's counts carried over. With None (tests), in the ``threading.local``
    again: another thread's counts are then those it had when they moved to C."""
    for holder, index in ((TLS, "CHECKING"), (OPENING, "ENTERING")):
        if native is not None and isinstance(vars(type(holder)).get("depth"), native.ThreadCount):
            continue
        now = holder.depth
        type(holder).depth = 0 if native is None else native.ThreadCount(getattr(native, index))
        holder.depth = now


class Active:
    """The installed shim (``None`` when off); hooks read it on every call, so it is a class
    attribute, not a module global that an import could have copied."""

    shim: Any = None
