"""Files the shim reads or writes are regular files, opened so that nothing can block or flood it.

The shim runs inside the user's program (at ``import torch``, at a violation): a FIFO named as
its log or in ``profile-files`` would hang the program on ``open``, and a link to ``/dev/zero``
would read until memory runs out. Files are opened non-blocking, checked to be regular, and
read up to a size cap."""

from __future__ import annotations

import os
import stat

READ_LIMIT = 16 << 20
"""The most the shim reads of one file (a profile file, or the runtime log since the last read)."""


class NotRegular(OSError):
    """The path is no regular file (a FIFO, a device, a directory, a socket), or too large."""


def _regular(st: os.stat_result, path: str | os.PathLike[str], limit: int | None = None) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise NotRegular(f"{os.fspath(path)} is not a regular file")
    if limit is not None and st.st_size > limit:
        raise NotRegular(f"{os.fspath(path)} is larger than {limit >> 20} MiB")


def open_regular(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """A descriptor on ``path`` opened with ``flags``, never blocking; ``NotRegular`` (an
    ``OSError``) when ``path`` is no regular file (checked before opening as well: a FIFO
    opened for writing with no reader fails with a less helpful ``ENXIO``)."""
    if os.path.exists(path):
        _regular(os.stat(path), path)
    fd = os.open(path, flags | os.O_NONBLOCK, mode)
    try:
        _regular(os.fstat(fd), path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | os.PathLike[str], offset: int = 0, limit: int = READ_LIMIT) -> bytes:
    """At most ``limit`` bytes of the regular file ``path`` from ``offset``."""
    fd = open_regular(path, os.O_RDONLY)
    try:
        os.lseek(fd, offset, os.SEEK_SET)
        chunks, left = [], limit
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_regular(path: str | os.PathLike[str], limit: int = READ_LIMIT) -> None:
    """``NotRegular`` when ``path`` is no regular file or is larger than ``limit`` bytes (a file
    that does not exist is left to its reader to report)."""
    if os.path.exists(path):
        _regular(os.stat(path), path, limit)
