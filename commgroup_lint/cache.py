"""The cache in `.commgroup_lint_cache/`: what each file gave in the last run, reused when valid.

One file per configuration: its name is a hash of commgroup-lint's own source, the Python
version, the profile, the rule selection, per-file ignores and the gate, so a change to any
of them starts from nothing. Inside, per checked file (by its path) and its content hash:

- the gate words searched for in it and the ones it names (so an unchanged file is not
  searched again);
- the index's analysis of it (summaries, wanted helpers), with the `Api` lookups it made, the
  hop of the index that added it and which analysis it ended with (the next run starts there);
- its findings (fixes included), with every `Api` lookup its analysis and rules made.

A record is reused only for the same content, and an analysis or findings only while each
of its lookups gets the same answer in this run: when a summarised helper in another file
changes, the files that asked about it are analysed again (see `analysis/recording.py`).

The same content is known without reading the file when its `stat` is the one recorded
(size, modification and change times in nanoseconds, inode), as git's index and ruff's
cache do: a file whose `stat` matches is assumed to hold the bytes hashed when the record
was made. Any write changes the change time, which `touch` and `os.utime` cannot set back, so a
file rewritten with its old size and modification time is still read again. A `stat` is recorded only for a file
last modified or changed at least `RACY_NS` before the run started ("racily clean" files,
in git's words): within a timestamp's granularity a second write could leave it unchanged,
so such a file is read again next time. A file that cannot be decoded keeps its reason
(reported as CGL000 while its `stat` matches); one that cannot be read at all is not recorded.

Written atomically (a temporary file renamed over the old one), so concurrent runs never see
a partial file; the last writer wins. The folder is the checked repository's to fill, so each
file is signed with the user's key (see `signing`), and one without a valid signature is never
unpickled; a file that cannot be read back exactly (truncated, corrupted, another version,
foreign) is ignored, and a directory that cannot be written means no cache.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import enum
import errno
import hashlib
import io
import os
import pickle
import stat as stat_module
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commgroup_lint.analysis.recording import Lookups
from commgroup_lint.analysis.summaries import ModuleAnalysis
from commgroup_lint.coverage import NOTHING_UNKNOWN, Unknowns
from commgroup_lint.files import Folder, open_directory, read_regular, remove_stale_temporaries, replace_file
from commgroup_lint.model import Finding
from commgroup_lint.signing import DIGEST_BYTES, UnusableKey, authentic, signature, user_key

DIRECTORY = ".commgroup_lint_cache"
_MAGIC = b"commgroup-lint cache 7\n"
CACHE_LIMIT = 1 << 30  # the largest cache file read (SGLang's is 7 MB)
RACY_NS = 2_000_000_000  # a file modified this close to a run is read again next time (FAT's 2 s timestamps)

Stat = tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, inode


@dataclass(frozen=True)
class CheckResult:
    gated: bool  # whether the gate sent the file to the analysis
    findings: tuple[Finding, ...]  # after suppressions
    lookups: Lookups
    unknowns: Unknowns = NOTHING_UNKNOWN  # what `coverage` would count as left unknown (see `check`'s summary)


@dataclass
class FileRecord:
    path: str
    digest: bytes
    checked: frozenset[str] = frozenset()  # gate words searched for in the file
    found: frozenset[str] = frozenset()  # the ones it names
    analyses: tuple[ModuleAnalysis, ...] = ()  # the index's, one per state it was analysed in (no facts);
    # one without entries or lookups: it does not parse
    result: CheckResult | None = None
    stat: Stat | None = None  # the file's `stat` when its content was hashed; None: read it next time
    error: str | None = None  # why its content cannot be decoded (a CGL000), when it cannot
    hop: int | None = None  # the index hop that added it (None: not indexed)
    final: int = -1  # which of `analyses` the index ended with


def file_stat(path: Path) -> Stat | None:
    """What the shortcut compares (see the module's docstring); None for what is not a regular file."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat_module.S_ISREG(st.st_mode):
        return None
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def settled(stat: Stat | None, started_ns: int) -> Stat | None:
    """`stat`, if it is old enough to be trusted in a later run (see `RACY_NS`), else None."""
    if stat is None or max(stat[1], stat[2]) >= started_ns - RACY_NS:
        return None
    return stat


def content_hash(raw: bytes) -> bytes:
    return hashlib.sha1(raw, usedforsecurity=False).digest()


def tool_hash() -> str:
    """A hash of commgroup-lint's own source (rules and shipped profiles included)."""
    import commgroup_lint
    import commgroup_lint.rules

    h = hashlib.sha256(sys.version.encode())
    roots = sorted({Path(p) for p in (*commgroup_lint.__path__, *commgroup_lint.rules.__path__)})
    for root in roots:
        for directory, subdirs, files in os.walk(root):
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".toml")):
                    path = Path(directory) / name
                    h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def canonical(value: Any) -> Any:
    """A representation that does not depend on set order or hash seeds."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, tuple((f.name, canonical(getattr(value, f.name))) for f in dataclasses.fields(value)))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(canonical(k)), canonical(v)) for k, v in value.items())))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(repr(canonical(v)) for v in value)))
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    if isinstance(value, enum.Enum):
        return value.value
    return value


def cache_key(*settings: Any) -> str:
    h = hashlib.sha256(tool_hash().encode())
    h.update(repr(canonical(settings)).encode())
    return h.hexdigest()[:24]


def cache_directory(project_root: Path | None) -> Path:
    """At the project root (next to the configuration file, else at the top of the git work
    tree), else in the current directory (as ruff's)."""
    return (project_root or Path.cwd()) / DIRECTORY


class _Unpickler(pickle.Unpickler):
    """Only commgroup-lint's own data classes and plain containers come out of a cache file:
    each by its exact name in a module already imported (never an attribute path such as
    `dataclasses.inspect.attrgetter`, which reaches what a module imported). A second defence:
    the signature is checked before this runs."""

    _BUILTINS = frozenset({"frozenset", "set", "tuple", "list", "dict", "bytes", "str", "int", "bool"})

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in self._BUILTINS:
            return getattr(builtins, name)
        if (module == "commgroup_lint" or module.startswith("commgroup_lint.")) and name.isidentifier():
            found = vars(sys.modules[module]).get(name) if module in sys.modules else None
            if isinstance(found, type) and found.__module__ == module and found.__qualname__ == name and _plain(found):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a cache file")


def _plain(cls: type) -> bool:
    """A data class, an enumeration or a named tuple: what the cache holds, nothing that acts."""
    return dataclasses.is_dataclass(cls) or issubclass(cls, enum.Enum) or (issubclass(cls, tuple) and hasattr(cls, "_fields"))


_MARKERS = (
    (".gitignore", b"# created by commgroup-lint\n*\n"),  # first: the folder is ignored before it holds anything
    ("CACHEDIR.TAG", b"Signature: 8a477f597d28d172789f06886806bc55\n# commgroup-lint cache\n"),
)


_WARNED: set[str] = set()  # the key problems said already (a language server lives long)


class Cache:
    """One configuration's cache file, signed with the user's key (see `signing`) and read
    back only when the signature holds. Nothing is followed out of the folder: the folder must
    be a real directory (not a link), and an entry in it that is a link, a FIFO or anything but
    a regular file is ignored when reading and replaced (the name, not what it points to) when
    writing."""

    def __init__(self, directory: Path, key: str) -> None:
        self.directory = directory
        self.file = directory / f"{key}.pickle"
        self._signing_key: bytes | None = None

    def _user_key(self) -> bytes | None:
        """`signing.user_key()` (one outside the project), read once per cache (a run loads
        and saves once); None, said once per process on stderr, when there is none."""
        if self._signing_key is None:
            try:
                self._signing_key = user_key(self.directory.parent)
            except UnusableKey as err:
                if str(err) not in _WARNED:
                    _WARNED.add(str(err))
                    sys.stderr.write(f"warning: no cache: its signing key {err}\n")
        return self._signing_key

    def load(self) -> dict[str, FileRecord]:
        """The records of the last run, or none when the file is missing or not intact (said
        in one line on stderr: a cache file that is there should be one this user wrote)."""
        key = self._user_key()
        if key is None:
            return {}
        try:
            with open_directory(self.directory, follow_links=False) as folder:
                data = read_regular(self.file.name, CACHE_LIMIT, follow_links=False, folder=folder)
        except FileNotFoundError:
            return {}
        except OSError as err:
            if not isinstance(err, NotADirectoryError) or os.path.lexists(self.directory):
                self._ignored("it or its folder is a symbolic link" if err.errno == errno.ELOOP else err.strerror or str(err))
            return {}
        records = self._decode(data, key)
        if records is None:
            self._ignored("damaged, or not written by this user's commgroup-lint")
            return {}
        return records

    def _decode(self, data: bytes, key: bytes) -> dict[str, FileRecord] | None:
        claimed, body = data[:DIGEST_BYTES], data[DIGEST_BYTES:]
        if not body.startswith(_MAGIC) or not authentic(key, self.file.name.encode() + body, claimed):
            return None
        try:
            records = _Unpickler(io.BytesIO(body[len(_MAGIC):])).load()
        except Exception:  # noqa: BLE001 - a cache that cannot be read is no cache
            return None
        if not isinstance(records, dict) or not all(isinstance(r, FileRecord) for r in records.values()):
            return None
        return records

    def _ignored(self, why: str) -> None:
        sys.stderr.write(f"warning: ignoring the cache file {self.file} ({why}); it is rebuilt\n")

    def save(self, records: Iterable[tuple[str, FileRecord]]) -> bool:
        """Replace the cache file; False (and nothing written) when the directory is not
        writable, is not a directory, or there is no key."""
        key = self._user_key()
        if key is None:
            return False
        try:
            body = _MAGIC + pickle.dumps(dict(records), protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, RecursionError, TypeError, AttributeError):
            return False
        try:
            with contextlib.suppress(FileExistsError):  # not `parents=True`: never through a link
                os.mkdir(self.directory)
            with open_directory(self.directory, follow_links=False) as folder:
                remove_stale_temporaries(folder)
                for name, content in _MARKERS:  # repaired when a run was killed between the two
                    if _holds(folder, name, content):
                        continue
                    replace_file(Path(name), content, keep=False, folder=folder)
                replace_file(Path(self.file.name), signature(key, self.file.name.encode() + body) + body,
                             keep=False, folder=folder)
            return True
        except OSError:
            return False


def _holds(folder: Folder, name: str, content: bytes) -> bool:
    try:
        return read_regular(name, len(content), follow_links=False, folder=folder) == content
    except OSError:
        return False
