"""Checking an editor's buffer: the text the editor holds, as the file it is said to be.

The buffer is checked as `check --stdin-filename PATH --force-exclude` run in the editor's
workspace folder would check it: the configuration nearest to PATH, its project as context (docs/usage.md, "What a check of a
few files sees"), the same cache; a file the configuration excludes, or git ignores, gets no
findings.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

from commgroup_lint.config import resolve_config
from commgroup_lint.discovery import Discovered
from commgroup_lint.engine import Linter, LintResult
from commgroup_lint.fixer import fix_result
from commgroup_lint.project import display_name
from commgroup_lint.settings import Settings


@dataclass
class Checked:
    text: str  # the buffer the findings are about
    linter: Linter | None  # None: the file is excluded, nothing was checked
    result: LintResult


def check_buffer(path: str, text: str, workspace: str | None = None) -> Checked:
    """The findings in `text`, the content of the file at `path` (absolute) in an editor whose
    workspace folder (the working directory of a `check` there) is `workspace`. Raises
    `ConfigError` or `ProfileError` for a bad configuration."""
    settings = Settings.resolve(resolve_config([path], cwd=Path(workspace) if workspace else None), [path])
    if settings.skips(path):
        return Checked(text, None, LintResult())
    display = display_name(path)
    buffer = Discovered(Path(display), display, True, _encode(text))
    linter, result = settings.lint([display], [buffer])
    return Checked(text, linter, result)


def fixed_text(checked: Checked, unsafe: bool = False) -> str | None:
    """The buffer with every applicable fix applied (as `--fix` would), or None when there is none."""
    if checked.linter is None:
        return None
    report = fix_result(checked.linter, checked.result, checked.result.fixable, unsafe)
    return report.files[0].text if report.files else None


def _encode(text: str) -> bytes:
    """The bytes the file would hold: in the encoding its coding line declares, if any."""
    utf8 = text.encode("utf-8")
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(utf8).readline)[0]
        return text.encode(encoding)
    except (SyntaxError, LookupError, UnicodeEncodeError):
        return utf8  # reported as the file would be (CGL000) when it does not decode
