"""Consoles that honour `--color` and `NO_COLOR`.

`NO_COLOR` (https://no-color.org) means no escape code at all here, bold and dim included
(rich on its own drops only the colours); `--color always` overrides it, `--color never`
turns styling off anywhere, and `auto` styles only a terminal. Whatever the setting, a file
name is shown through `printable`: a name cannot send escape codes to the terminal.
"""

from __future__ import annotations

import os
import re
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

COLOR_CHOICES = ("auto", "always", "never")


def console(color: str = "auto", file: IO[str] | None = None, stderr: bool = False) -> Console:
    """A console for `file` (else stdout, or stderr) styled as `color` asks."""
    from rich.console import Console  # here: importing rich costs a tenth of a warm run

    if color == "never" or (color == "auto" and os.environ.get("NO_COLOR", "") != ""):
        return Console(file=file, stderr=stderr, color_system=None, highlight=False, emoji=False)
    if color == "always":
        return Console(file=file, stderr=stderr, force_terminal=True, no_color=False, highlight=False, emoji=False)
    return Console(file=file, stderr=stderr, highlight=False, emoji=False)  # `a.py:100:1` is no emoji code


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\ufffe\uffff]")


def printable(text: str, keep: str = "") -> str:
    """`text` (a file name, or a message naming one) with what a terminal, an XML document or a
    line-based format cannot take written as `\\xNN`: control characters (escape codes,
    newlines, tabs) and the bytes of a name that is not UTF-8 (which Python keeps as lone
    surrogates), each as the byte it stands for; the characters in `keep` are left as they are."""
    return _UNPRINTABLE.sub(lambda m: m.group() if m.group() in keep else _escaped(m), text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, as `surrogateescape` keeps it
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
