"""The linter's side of a runtime test, where it is installed: the runtime tests run where only
torch and pytest are (the GPU machine), and the tests that need the linter's CLI (libcst, click)
or the SARIF schema's validator (jsonschema) skip there, saying which package is missing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def _needs(*packages: str, why: str) -> None:
    for package in packages:
        pytest.importorskip(package, reason=f"{why} needs {package}, which is not installed")


def cli_run() -> Callable[..., Any]:
    """``test_cli.run``: the ``commgroup-lint`` command in a subprocess."""
    _needs("libcst", "click", "rich", "pathspec", why="the commgroup-lint command")
    from test_cli import run

    return run


def sarif_validator() -> Callable[[str], Any]:
    """``test_reporters.validate_sarif``: SARIF text parsed and checked against its schema."""
    _needs("jsonschema", why="validating SARIF")
    from test_reporters import validate_sarif

    return validate_sarif
