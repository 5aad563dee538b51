"""The runtime log: one JSON object per violation, appended as it happens.

Every process of a run (spawn children, torchrun ranks, server subprocesses) appends to the
file named by ``COMMGROUP_LINT_RUNTIME_LOG``: one line per distinct violation, written with
``O_APPEND`` in a single ``write`` so lines of concurrent processes never interleave. Each
line is :meth:`Violation.as_dict` plus the ``mode`` in force and the ``pid``. The pytest
plugin reads it to fail the test during which a violation happened, and
``commgroup-lint runtime-log`` renders it with the linter's reporters. Only a regular file
is written or read (``_regular``): a FIFO or a device as the log never blocks the program.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from ._imports import say
from ._regular import open_regular, read_regular
from ._report import Violation
from ._settings import LOG_ENV_VAR


def append(violation: Violation, mode: str) -> None:
    """Append ``violation`` to the log, when one is named."""
    path = os.environ.get(LOG_ENV_VAR)
    if not path:
        return
    record = {**violation.as_dict(), "mode": mode, "pid": os.getpid()}
    line = (json.dumps(record) + "\n").encode()
    try:
        fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError as exc:
        if path not in _UNWRITABLE:  # said once: the next violations would say it again
            _UNWRITABLE.add(path)
            say(f"cannot write the runtime log {path}: {exc.strerror or exc}; name a regular file in {LOG_ENV_VAR}")


_UNWRITABLE: set[str] = set()


def read(path: str, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """The records written after byte ``offset`` (at most ``READ_LIMIT`` bytes of them: the
    rest at the next read), and the offset after the last whole line; none from a path that
    is no regular file."""
    try:
        data = read_regular(path, offset)
    except OSError:
        return [], offset
    end = data.rfind(b"\n") + 1  # a line still being written is left for the next read
    records = []
    for line in data[:end].splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records, offset + end


def merged(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per distinct violation (the same bug seen by several ranks or processes),
    with ``ranks`` listing the ranks that saw it."""
    out: dict[tuple, dict[str, Any]] = {}
    for r in records:
        key = (r.get("code"), r.get("path"), r.get("line"), r.get("collective_path"), r.get("collective_line"))
        first = out.setdefault(key, {**r, "ranks": []})
        if r.get("rank") is not None and r["rank"] not in first["ranks"]:
            first["ranks"].append(r["rank"])
    return list(out.values())

