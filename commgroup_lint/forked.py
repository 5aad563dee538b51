"""Two cores for one pure function: half of the items in a forked child process.

The gate's word search reads every file once per word (about a second on SGLang's 4,700
files) and is pure: the child inherits the texts already read (copy on write), searches
the first half and sends back only the words it found. Anything that makes forking unsafe
or not worth it (no `fork`, other threads running, little work) keeps the work here, as
does a child that fails: the parent then does its half too.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

MIN_COST = 512  # less work (in the caller's units) is done here: a fork costs some milliseconds


def in_halves(items: Sequence[T], work: Callable[[Sequence[T]], list[R]], cost: int = 1) -> list[R]:
    """`work(items)`, computed as `work(first half) + work(second half)`, the first half in a
    forked child when that is possible and worth it (`cost`: of one item, in units of a
    small file's word search; `work` must not depend on the order of the calls)."""
    if len(items) * cost < MIN_COST or not _can_fork():
        return work(items)
    cut = len(items) // 2
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, and leave without running any exit handler
        status = 1
        try:
            os.close(read_end)
            with os.fdopen(write_end, "wb") as out:
                out.write(pickle.dumps(work(items[:cut]), pickle.HIGHEST_PROTOCOL))
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    received = os.fdopen(read_end, "rb")
    status = 1
    try:
        mine = work(items[cut:])
        payload = received.read()
    except BaseException:  # this half failed (a changed file, Ctrl-C): the other is not wanted
        os.kill(pid, signal.SIGKILL)
        raise
    finally:  # never a zombie, nor a child blocked on a full pipe
        received.close()
        status = os.waitpid(pid, 0)[1]
    theirs = pickle.loads(payload) if status == 0 else work(items[:cut])
    return theirs + mine


def _can_fork() -> bool:
    # forking a process with other threads can leave the child holding a lock forever
    return hasattr(os, "fork") and threading.active_count() == 1
