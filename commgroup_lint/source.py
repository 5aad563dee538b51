"""Reading source files exactly as Python would, and keeping what is needed to write them back.

The text is decoded with the file's own encoding (PEP 263 coding line, or a UTF-8 BOM) and
its line endings are left untouched, so a fix can be written back byte for byte.
"""

from __future__ import annotations

import codecs
import io
import re
import tokenize
from bisect import bisect_right
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from commgroup_lint.files import SOURCE_LIMIT, FileTooLarge, NotRegularFile, read_regular

_LINE_END = re.compile(r"\r\n|\r|\n")


def line_starts(text: str) -> list[int]:
    """Where each line starts; only \\n, \\r\\n and \\r end a line, as in Python's tokenizer."""
    return [0, *(m.end() for m in _LINE_END.finditer(text))]


def position(starts: list[int], offset: int) -> tuple[int, int]:
    """The 1-based line and 0-based column of a character offset."""
    line = bisect_right(starts, offset) - 1
    return line + 1, offset - starts[line]


class SourceError(Exception):
    """A file cannot be checked; the message says why (reported as CGL000)."""


@dataclass(frozen=True)
class SourceFile:
    path: Path
    display: str  # the path as the user gave it (or as found under a directory they gave)
    text: str
    encoding: str  # "utf-8-sig" when the file starts with a BOM
    raw: bytes

    def encode(self, text: str) -> bytes:
        return text.encode(self.encoding)

    @cached_property
    def line_starts(self) -> list[int]:
        return line_starts(self.text)

    def offset(self, line: int, column: int) -> int:
        """Character offset of a 1-based line and a 0-based column."""
        return self.line_starts[line - 1] + column

    def position(self, offset: int) -> tuple[int, int]:
        return position(self.line_starts, offset)

    @cached_property
    def utf8(self) -> bytes:
        """The text in UTF-8: the bytes as read when that is what they are (no copy)."""
        if self.raw and self.encoding in ("utf-8", "utf-8-sig"):
            return self.raw
        return self.text.encode("utf-8", "surrogatepass")

    @cached_property
    def newline(self) -> str:
        return "\r\n" if "\r\n" in self.text else "\n"


def too_large(limit: int) -> str:
    """CGL000's reason for a file over the size limit (the language server's too)."""
    return f"too large to check (over the {limit >> 20} MiB limit for one file); exclude it or split it"


def decode(raw: bytes) -> tuple[str, str]:
    """Decode source bytes; returns (text, encoding). A file over `SOURCE_LIMIT` is refused here,
    where every source passes (files, stdin, editor buffers), before anything parses it."""
    if len(raw) > SOURCE_LIMIT:
        raise SourceError(too_large(SOURCE_LIMIT))
    if b"\x00" in raw:
        raise SourceError("binary file (contains NUL bytes); not Python source")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as err:
        if not str(err.msg).startswith("invalid or missing encoding declaration"):
            raise SourceError(f"invalid coding line: {err.msg}") from None
        encoding = "utf-8"  # no coding line and not UTF-8 in its first lines: say where below
    try:
        codecs.lookup(encoding)
        text = raw.decode(encoding)
    except LookupError:
        raise SourceError(f"unknown encoding '{encoding}' in the coding line") from None
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        hint = "convert it to UTF-8 or declare its encoding with a PEP 263 coding line"
        raise SourceError(f"not valid {encoding} (byte 0x{raw[err.start]:02x} on line {line}); {hint}") from None
    return text, encoding


def read_bytes(path: Path) -> bytes:
    """The file's bytes; raises `SourceError` saying why they cannot be read."""
    try:
        return read_regular(path, SOURCE_LIMIT)
    except FileNotFoundError:
        if path.is_symlink():
            raise SourceError("broken symbolic link (its target does not exist)") from None
        raise SourceError("file disappeared while the run was in progress") from None
    except NotRegularFile as err:
        if err.kind == "a directory":
            raise SourceError("is a directory, not a file") from None
        raise SourceError(f"is {err.kind}, not a regular file; not read") from None
    except FileTooLarge as err:
        raise SourceError(too_large(err.limit)) from None
    except PermissionError:
        raise SourceError("permission denied; make the file readable or exclude it") from None
    except OSError as err:
        raise SourceError(f"cannot be read: {err.strerror or err}") from None


def read_source(path: Path, display: str) -> SourceFile:
    raw = read_bytes(path)
    text, encoding = decode(raw)
    return SourceFile(path, display, text, encoding, raw)
