"""Reading and writing files that a checked repository controls.

Reading: only regular files are read (a FIFO would block for ever, a device such as
`/dev/zero` never ends), and never more than a size cap, checked on the open file so that a
name swapped in between cannot get past it.

Writing: to a temporary file in the same directory, flushed to disk, then renamed over the
old one, so a reader (or a crash) sees the old content or the new, never a part. The rename
replaces the name itself: a symbolic link or other entry at that name is replaced, never
written through (`write_atomically` resolves links first, on purpose, for a caller that wants
that). A replaced file keeps its mode, owner and extended attributes, or is not written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

SOURCE_LIMIT = 4 << 20
"""The largest source file read (4 MiB): a bigger one is reported, not read. Parsing takes
about 500 times a file's size in memory; the largest hand-written Python files we know of
are under 1 MiB."""

TEXT_LIMIT = 16 << 20
"""The largest configuration, profile or ignore file read (16 MiB)."""

TEMPORARY_MARK = ".cgl"
"""In the name of every temporary file this module creates (`.name.cgl<pid>-XXXX.tmp`), so
that one left by a killed run is told apart from the user's files and removed later."""

STALE_SECONDS = 3600
"""A temporary file older than this is stale even when its process id is in use (reused)."""

Folder = int | str
"""A directory names are resolved in: its open descriptor (POSIX), else its path (where the
system resolves no name relative to a descriptor: Windows)."""

_DIR_FDS = ({os.open, os.stat, os.rename, os.unlink, os.access} <= os.supports_dir_fd  # os.replace: as os.rename
            and os.listdir in os.supports_fd)


NO_FOLLOW_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
"""Opening a name to read it: never blocking on a FIFO, never through a link at the name."""

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class NotRegularFile(OSError):
    """The name is not a regular file (a directory, FIFO, socket or device): it is not read."""

    def __init__(self, path: str | os.PathLike[str], kind: str) -> None:
        super().__init__(errno.EINVAL, f"is {kind}, not a regular file", os.fspath(path))
        self.kind = kind


class FileTooLarge(OSError):
    """The file is larger than the cap the caller set: it is not read."""

    def __init__(self, path: str | os.PathLike[str], limit: int) -> None:
        super().__init__(errno.EFBIG, f"is larger than the {_size(limit)} limit", os.fspath(path))
        self.limit = limit


class ChangedOnDisk(OSError):
    """The file no longer holds what the caller read from it: it is not replaced."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(errno.EAGAIN, "changed on disk since it was read", os.fspath(path))


class WriteRefused(OSError):
    """Replacing the file would lose something of it (an owner, a hard link, an attribute), or
    it is read-only: it is left as it is."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(errno.EPERM, reason, os.fspath(path))


def within(path: str, directory: str) -> bool:
    """Whether the path `path` is `directory` or lies below it (both absolute, normalised)."""
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"


def read_regular(path: str | os.PathLike[str], limit: int, *, follow_links: bool = True,
                 folder: Folder | None = None) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them.

    Raises `NotRegularFile`, `FileTooLarge`, or the `OSError` of opening it (`ELOOP` for a
    link when `follow_links` is false). Opened without blocking, so a FIFO is refused rather
    than waited on.
    """
    flags = NO_FOLLOW_READ | getattr(os, "O_BINARY", 0)
    if follow_links:
        flags &= ~getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags) if folder is None else _open(folder, os.fspath(path), flags)
    try:
        return _read_open(fd, path, limit)
    finally:
        os.close(fd)


def _read_open(fd: int, path: str | os.PathLike[str], limit: int) -> bytes:
    """One `read` of the size `fstat` gives (and more while there is more, up to `limit`)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(path, next((kind for test, kind in _KINDS if test(st.st_mode)), "not a file"))
    if st.st_size > limit:
        raise FileTooLarge(path, limit)
    parts = [os.read(fd, min(st.st_size + 1, limit + 1) if st.st_size else 1 << 16)]
    total = len(parts[0])
    if total != st.st_size or not st.st_size:  # a short read, grown since, or a size the system does not know
        while total <= limit and (more := os.read(fd, min(1 << 20, limit + 1 - total))):
            parts.append(more)
            total += len(more)
    if total > limit:
        raise FileTooLarge(path, limit)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_text(path: str | os.PathLike[str], limit: int = TEXT_LIMIT) -> str:
    """A UTF-8 text file (configuration, profile), read as `read_regular` reads."""
    return read_regular(path, limit).decode("utf-8")


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to the file `path` names, following symbolic links (the target gets the new
    content and a link stays a link), creating missing directories: for a file the user
    named (an output file). Files of a checked tree go through `replace_file`."""
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    replace_file(target, data)


def replace_file(path: Path, data: bytes, *, expected: bytes | None = None, keep: bool = True,
                 folder: Folder | None = None) -> None:
    """Replace the entry `path` (its name in `folder`, when given) with a regular file holding `data`.

    With `keep`, an existing file's mode, owner and extended attributes are kept; a file that
    is read-only, has other hard links, or whose owner or attributes cannot be kept raises
    `WriteRefused`. Without it (a cache file), whatever was there is simply replaced.

    With `expected`, the file must still hold those bytes: they are compared after the new
    content is on disk, immediately before the rename (`ChangedOnDisk` if not), and the old
    file is read again after the rename: an edit saved into it in between (by an editor that
    had it open) is put back once it has settled, and `ChangedOnDisk` raised. What remains: an
    editor that saves by renaming its own file in the microseconds between the compare and
    the rename, or one that pauses longer than `SETTLE_SECONDS` in the middle of a save.
    """
    directory, name = os.path.split(os.fspath(path))
    if folder is None:
        with open_directory(Path(directory or ".")) as opened:
            return replace_file(path, data, expected=expected, keep=keep, folder=opened)
    remove_stale_temporaries(folder, name)
    old = _existing(folder, name, path) if keep else None
    tmp = _write_temporary(folder, name, data, old, path)
    try:
        if expected is None:
            _rename(folder, tmp, name)
        else:
            _replace_if_unchanged(folder, tmp, name, expected, path)
    except BaseException:
        with contextlib.suppress(OSError):
            _unlink(folder, tmp)
        raise


def _existing(folder: Folder, name: str, path: Path) -> os.stat_result | None:
    """The `stat` of the file being replaced, after checking that replacing it loses nothing."""
    try:
        st = _lstat(folder, name)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise WriteRefused(path, "is not a regular file")
    if not st.st_mode & 0o222 or not _writable(folder, name):
        raise WriteRefused(path, "is read-only (make it writable to have it fixed)")
    if st.st_nlink > 1:
        raise WriteRefused(path, f"has {st.st_nlink} hard links, which a new file would not keep")
    return st


def _write_temporary(folder: Folder, name: str, data: bytes, old: os.stat_result | None, path: Path) -> str:
    """A new file beside `name` holding `data`, flushed to disk, with `old`'s mode, owner and
    extended attributes (or the mode `open()` gives a new file); its name."""
    fd, tmp = _create_temporary(folder, name)
    try:
        with os.fdopen(fd, "wb", closefd=False) as handle:
            handle.write(data)
            handle.flush()
            if old is None:
                _set_mode(folder, tmp, fd, 0o666 & ~_umask())
            else:
                _copy_metadata(folder, name, tmp, fd, old, path)
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            _unlink(folder, tmp)
        raise
    os.close(fd)
    return tmp


def _create_temporary(folder: Folder, name: str) -> tuple[int, str]:
    """`mkstemp`'s exclusive create (mode 0600), in `folder`."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    names = tempfile._get_candidate_names()  # type: ignore[attr-defined]  # mkstemp's own random names
    for _ in range(100):
        tmp = f".{name}{TEMPORARY_MARK}{os.getpid()}-{next(names)}.tmp"
        try:
            return _open(folder, tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no temporary file name is free", name)


def _copy_metadata(folder: Folder, name: str, tmp: str, fd: int, old: os.stat_result, path: Path) -> None:
    """Give the new file (`tmp`, open as `fd`) the old one's owner, extended attributes and mode."""
    if (old.st_uid, old.st_gid) != _owner(fd):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except OSError:
            raise WriteRefused(path, f"is owned by {old.st_uid}:{old.st_gid}, which a new file cannot keep") from None
    if hasattr(os, "listxattr"):
        source = _open(folder, name, NO_FOLLOW_READ)
        try:
            for attribute in os.listxattr(source):
                _set_attribute(fd, attribute, os.getxattr(source, attribute))
        except OSError as err:
            if err.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP):
                raise WriteRefused(path, f"has extended attributes that cannot be kept ({err.strerror})") from None
        finally:
            os.close(source)
    _set_mode(folder, tmp, fd, stat.S_IMODE(old.st_mode))


def _set_mode(folder: Folder, name: str, fd: int, mode: int) -> None:
    """`fchmod`, or a `chmod` of the name where there is none (Windows before Python 3.13)."""
    if hasattr(os, "fchmod"):
        os.fchmod(fd, mode)
    else:
        where, dir_fd = _in(folder, name)
        os.chmod(where, mode, dir_fd=dir_fd)


def _set_attribute(fd: int, attribute: str, value: bytes) -> None:
    """Set an extended attribute, or find it already set so (a new file gets the directory's
    `security.selinux` label, which an unprivileged user may not write, even unchanged)."""
    try:
        os.setxattr(fd, attribute, value)
    except OSError:
        try:
            same = os.getxattr(fd, attribute) == value
        except OSError:
            same = False
        if not same:
            raise


def _owner(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_uid, st.st_gid


def _replace_if_unchanged(folder: Folder, tmp: str, name: str, expected: bytes, path: Path) -> None:
    """Rename `tmp` over `name` if `name` still holds `expected`; put back an edit that reached
    the old file during the rename."""
    old = _open(folder, name, NO_FOLLOW_READ)
    try:
        if _reread(old, path, len(expected)) != expected:
            raise ChangedOnDisk(path)
        _rename(folder, tmp, name)
        if _reread(old, path, TEXT_LIMIT) == expected:
            return
        after = _settled(old, path)  # saved into the old file while it was being replaced: the edit wins
    finally:
        os.close(old)
    if after is not None:
        replace_file(path, after, folder=folder)
    raise ChangedOnDisk(path)


SETTLE_SECONDS = 0.05
"""How long an edit being saved into a replaced file must stay unchanged to be taken as saved."""


def _settled(fd: int, path: Path) -> bytes | None:
    """The file open as `fd` once a write in progress into it has finished: the same content
    and `stat` over `SETTLE_SECONDS` (at most 40 tries)."""
    last = None
    for _ in range(40):
        now = (os.fstat(fd).st_mtime_ns, _reread(fd, path, TEXT_LIMIT))
        if now == last:
            return now[1]
        last = now
        time.sleep(SETTLE_SECONDS)
    return last[1] if last is not None else None


def _reread(fd: int, path: Path, limit: int) -> bytes | None:
    """The file open as `fd`, from its start; None when it has grown past `limit`."""
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        return _read_open(fd, path, limit)
    except FileTooLarge:
        return None


def remove_stale_temporaries(folder: Folder, name: str | None = None) -> None:
    """Remove the temporary files a killed run left for `name` (for any name when None): those
    of a process that no longer runs, or older than `STALE_SECONDS`."""
    prefix = f".{name}{TEMPORARY_MARK}" if name is not None else "."
    try:
        entries = [e for e in os.listdir(folder) if e.startswith(prefix) and e.endswith(".tmp") and TEMPORARY_MARK in e]
    except OSError:
        return
    for entry in entries:
        pid = _temporary_pid(entry)
        if pid is None or pid == os.getpid():
            continue
        with contextlib.suppress(OSError):
            st = _lstat(folder, entry)
            if stat.S_ISREG(st.st_mode) and (not _running(pid) or time.time() - st.st_mtime > STALE_SECONDS):
                _unlink(folder, entry)


def _temporary_pid(entry: str) -> int | None:
    digits = entry.rpartition(TEMPORARY_MARK)[2].partition("-")[0]
    return int(digits) if digits.isdigit() else None


def _running(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) terminates the process there: leave it to the age
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def _umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def open_directory(path: Path, *, follow_links: bool = True) -> Iterator[Folder]:
    """The directory `path` (not a link to one, without `follow_links`) as a `Folder`: an open
    descriptor where names can be resolved relative to one, so that whatever `path` becomes
    meanwhile, the names are looked up in this directory."""
    if not _DIR_FDS:
        st = os.stat(path) if follow_links else os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            raise OSError(errno.ELOOP, "is a symbolic link", os.fspath(path))
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "Not a directory", os.fspath(path))
        yield os.fspath(path)
        return
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        yield fd
    finally:
        os.close(fd)


def _in(folder: Folder, name: str) -> tuple[str, int | None]:
    """`name` in `folder`, as a path and a `dir_fd` argument."""
    return (name, folder) if isinstance(folder, int) else (os.path.join(folder, name), None)


def _open(folder: Folder, name: str, flags: int, mode: int = 0o777) -> int:
    where, fd = _in(folder, name)
    return os.open(where, flags, mode, dir_fd=fd)


def _lstat(folder: Folder, name: str) -> os.stat_result:
    where, fd = _in(folder, name)
    return os.stat(where, dir_fd=fd, follow_symlinks=False)


def _writable(folder: Folder, name: str) -> bool:
    where, fd = _in(folder, name)
    return os.access(where, os.W_OK, dir_fd=fd, effective_ids=os.access in os.supports_effective_ids)


def _rename(folder: Folder, source: str, target: str) -> None:
    (source_path, fd), (target_path, _) = _in(folder, source), _in(folder, target)
    os.replace(source_path, target_path, src_dir_fd=fd, dst_dir_fd=fd)


def _unlink(folder: Folder, name: str) -> None:
    where, fd = _in(folder, name)
    os.unlink(where, dir_fd=fd)
