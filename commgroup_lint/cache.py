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
a partial file; the last writer wins. A file that cannot be read back exactly (truncated,
corrupted, another version) is ignored; a directory that cannot be written means no cache.
"""

from __future__ import annotations

import dataclasses
import enum
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
from commgroup_lint.files import write_atomically
from commgroup_lint.model import Finding

DIRECTORY = ".commgroup_lint_cache"
_MAGIC = b"commgroup-lint cache 6\n"
_DIGEST = 32
RACY_NS = 2_000_000_000  # a file modified this close to a run is read again next time (FAT's 2 s timestamps)

Stat = tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, inode


@dataclass(frozen=True)
class CheckResult:
    gated: bool  # whether the gate sent the file to the analysis
    findings: tuple[Finding, ...]  # after suppressions
    lookups: Lookups


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
    """Only commgroup-lint's own data classes and plain containers come out of a cache file."""

    _BUILTINS = frozenset({"frozenset", "set", "tuple", "list", "dict", "bytes", "str", "int", "bool"})

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in self._BUILTINS:
            return super().find_class(module, name)
        if module == "commgroup_lint" or module.startswith("commgroup_lint."):
            found = super().find_class(module, name)
            if isinstance(found, type):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a cache file")


class Cache:
    def __init__(self, directory: Path, key: str) -> None:
        self.directory = directory
        self.file = directory / f"{key}.pickle"

    def load(self) -> dict[str, FileRecord]:
        """The records of the last run, or none when the file is missing or not intact."""
        try:
            data = self.file.read_bytes()
        except OSError:
            return {}
        try:
            if not data.startswith(_MAGIC):
                return {}
            digest, payload = data[len(_MAGIC): len(_MAGIC) + _DIGEST], data[len(_MAGIC) + _DIGEST:]
            if hashlib.sha256(payload).digest() != digest:
                return {}
            records = _Unpickler(io.BytesIO(payload)).load()
        except Exception:  # noqa: BLE001 - a cache that cannot be read is no cache
            return {}
        if not isinstance(records, dict) or not all(isinstance(r, FileRecord) for r in records.values()):
            return {}
        return records

    def save(self, records: Iterable[tuple[str, FileRecord]]) -> bool:
        """Replace the cache file; False (and nothing written) when the directory is not writable."""
        try:
            payload = pickle.dumps(dict(records), protocol=pickle.HIGHEST_PROTOCOL)
            fresh = not self.directory.is_dir()
            self.directory.mkdir(parents=True, exist_ok=True)
            if fresh:
                (self.directory / ".gitignore").write_text("# created by commgroup-lint\n*\n")
                (self.directory / "CACHEDIR.TAG").write_text(
                    "Signature: 8a477f597d28d172789f06886806bc55\n# commgroup-lint cache\n")
            write_atomically(self.file, _MAGIC + hashlib.sha256(payload).digest() + payload)
            return True
        except (OSError, pickle.PicklingError, RecursionError, TypeError, AttributeError):
            return False
