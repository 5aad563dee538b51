"""The user's key that signs cache files, so that a cache file is unpickled only when this
user's commgroup-lint wrote it (a checked repository can ship any file in its cache folder).

The key is 32 random bytes in `$XDG_CACHE_HOME/commgroup-lint/cache-key` (else
`~/.cache/commgroup-lint/cache-key`): outside every repository, created once with mode 0600
and published by a hard link, so that concurrent first runs agree on one key and no reader
sees half of one. A key file that is not a regular file of this user's, readable by nobody
else, is not used: then there is no cache (said once, on stderr).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import stat
from pathlib import Path

from commgroup_lint.files import NO_FOLLOW_READ, TEMPORARY_MARK, read_regular, within

KEY_BYTES = 32
DIGEST_BYTES = hashlib.sha256().digest_size


def key_path() -> Path:
    """Where the key lives: the user's cache directory (XDG's, as pip's and ruff's)."""
    configured = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(configured) if os.path.isabs(configured) else Path.home() / ".cache"
    return base / "commgroup-lint" / "cache-key"


def signature(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).digest()


def authentic(key: bytes, data: bytes, claimed: bytes) -> bool:
    return hmac.compare_digest(signature(key, data), claimed)


class UnusableKey(OSError):
    """The key file is there but not safe to use, or cannot be made: there is no cache."""


def user_key(project: Path) -> bytes:
    """The key, created on first use; raises `UnusableKey` saying why there is none. A key
    inside `project` (`XDG_CACHE_HOME` within the checked tree, as some CI set up) is one the
    repository could have shipped: it is not used, unless the project holds the home directory."""
    try:
        path = key_path()
    except RuntimeError:  # no home directory (Path.home() on Python 3.12+)
        raise UnusableKey("has no place: set XDG_CACHE_HOME or HOME") from None
    if within(os.path.realpath(path), os.path.realpath(project)) and not within(_home(), os.path.realpath(project)):
        raise UnusableKey(f"{path} lies inside the checked project {project}: set XDG_CACHE_HOME outside it")
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    except UnusableKey:
        raise
    except OSError as err:
        raise UnusableKey(f"{path} cannot be read: {err.strerror or err}") from None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _publish(path, os.urandom(KEY_BYTES))
        return _read(path)
    except UnusableKey:
        raise
    except OSError as err:
        raise UnusableKey(f"{path} cannot be created: {err.strerror or err}") from None


def _home() -> str:
    """The user's home directory, resolved ("" when there is none): a project that holds it
    (linting from `~`, a dotfiles repository) is the user's own, and may hold the key."""
    try:
        return os.path.realpath(Path.home())
    except RuntimeError:
        return ""


def _read(path: Path) -> bytes:
    """The key at `path`, if it is a file that this user alone can have written."""
    fd = os.open(path, NO_FOLLOW_READ)
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UnusableKey(f"{path} is not a regular file; delete it")
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        raise UnusableKey(f"{path} belongs to another user; delete it")
    if st.st_mode & 0o077:
        raise UnusableKey(f"{path} can be read or written by others; delete it (a new one is made)")
    key = read_regular(path, KEY_BYTES, follow_links=False)
    if len(key) != KEY_BYTES:
        raise UnusableKey(f"{path} is not a key of {KEY_BYTES} bytes; delete it")
    return key


def _publish(path: Path, key: bytes) -> None:
    """Write `key` to a new 0600 file and link it to `path`, unless a key is there already."""
    tmp = path.with_name(f".{path.name}{TEMPORARY_MARK}{os.getpid()}-{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        try:
            os.write(fd, key)
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):  # another run made it first: theirs is the key
            os.link(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
