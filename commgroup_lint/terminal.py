"""Consoles that honour `--color` and `NO_COLOR`.

`NO_COLOR` (https://no-color.org) means no escape code at all here, bold and dim included
(rich on its own drops only the colours); `--color always` overrides it, `--color never`
turns styling off anywhere, and `auto` styles only a terminal.
"""

from __future__ import annotations

import os
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

COLOR_CHOICES = ("auto", "always", "never")


def console(color: str = "auto", file: IO[str] | None = None, stderr: bool = False) -> Console:
    """A console for `file` (else stdout, or stderr) styled as `color` asks."""
    from rich.console import Console  # here: importing rich costs a tenth of a warm run

    if color == "never" or (color == "auto" and os.environ.get("NO_COLOR", "") != ""):
        return Console(file=file, stderr=stderr, color_system=None, highlight=False)
    if color == "always":
        return Console(file=file, stderr=stderr, force_terminal=True, no_color=False, highlight=False)
    return Console(file=file, stderr=stderr, highlight=False)
