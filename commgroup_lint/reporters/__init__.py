"""Reporters: one `Finding` type, rendered for people (`text`) and for machines."""

from __future__ import annotations

from collections.abc import Callable

from commgroup_lint.engine import LintResult
from commgroup_lint.reporters import github, json_format, junit, sarif

MACHINE_FORMATS: dict[str, Callable[[LintResult], str]] = {
    "json": json_format.render,
    "sarif": sarif.render,
    "github": github.render,
    "junit": junit.render,
}
FORMATS = ("text", *MACHINE_FORMATS)
