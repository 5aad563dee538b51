"""The start-up hook, run by ``commgroup_lint_runtime.pth`` in every Python process of the
environment where the package is installed, when ``COMMGROUP_LINT_RUNTIME`` is set.

It imports nothing heavy and never torch: it checks the variable, then asks to be called back
once torch has been imported (by the program, whenever it does), and only then installs the
shim. A program that never imports torch is untouched. A bad value is one line on stderr
(not a Python warning, which ``-W error`` would turn into a failure) and the shim stays off.
"""

from __future__ import annotations

import os
import sys
import types

from ._imports import say, when_imported
from ._settings import ENV_VAR, MODES, OFF, parse_switch

_STARTED: list[bool] = []


def start() -> None:
    """Never raises. Runs once: a site directory reached twice (``lib64`` linking to ``lib``
    in a virtual environment) runs the ``.pth`` twice."""
    if _STARTED:
        return
    _STARTED.append(True)
    try:
        raw = os.environ.get(ENV_VAR)
        try:
            mode = parse_switch(raw)
        except ValueError:
            off = ", ".join(v for v in OFF if v)
            say(f"{ENV_VAR}={raw!r} is none of {', '.join(MODES)} (or {off} for off): the shim stays off")
            return
        if mode is not None:
            install_when_torch_imported(mode)
    except Exception as exc:  # pragma: no cover - a broken installation
        say(f"start-up hook failed ({type(exc).__name__}: {exc}); the shim stays off")


def install_when_torch_imported(mode: str, profile: str | None = None, summary: bool = True) -> None:
    """Install the shim for this process once torch is imported (at once if it is);
    ``summary``: print the end-of-run summary at exit."""

    def install(module: types.ModuleType, complete: bool) -> bool:
        from ._process import install_process_wide, summarise_at_exit

        install_process_wide(mode, profile)
        summarise_at_exit(summary)
        return True

    def after_torch(module: types.ModuleType, complete: bool) -> bool:
        # torch imports torch.distributed itself; a build that does not is waited for.
        if "torch.distributed" in sys.modules:
            return install(module, complete)
        when_imported("torch.distributed", install)
        return True

    when_imported("torch", after_torch)
