"""The shim for a whole process: the environment variable, the pytest plugin, ``python -m``.

Installed once and kept until the process ends. Violations are appended to the log as they
happen (``_log``); at exit a summary goes to stderr, from rank 0 only under ``torchrun`` (and
not from a pytest process, whose plugin prints its own). Nothing here raises: a problem is
one line on stderr and the shim stays off, or goes on without the configuration.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Sequence

from ._imports import say
from ._report import format_summary

_STATE: dict = {}


def install_process_wide(mode: str, profile: str | Sequence[str] | None = None) -> str | None:
    """Install the shim for this process in ``mode`` (or set the mode of the one installed);
    returns the mode, or None when the shim could not be installed."""
    if _STATE.get("shim") is not None:
        _STATE["shim"].mode = mode
        return mode
    try:
        import torch.distributed as dist

        if not dist.is_available():
            say("this torch has no torch.distributed: the shim stays off")
            return None
        from . import _shim

        shim = _shim.install(mode, _knowledge_for(profile))
    except Exception as exc:
        say(f"the shim could not be installed ({type(exc).__name__}: {exc}); it stays off")
        return None
    _STATE.update(shim=shim, pid=os.getpid())
    atexit.register(_at_exit)
    return mode


def _knowledge_for(profile: str | Sequence[str] | None):  # -> Knowledge
    from commgroup_lint.profile import shipped_profiles

    from . import _knowledge

    try:
        knowledge, problem = _knowledge.load_lenient(profile)  # what fails is dropped alone
    except Exception as exc:  # pragma: no cover - a failure no piece accounts for: go on without them
        say(f"{exc}; using the shipped profiles without the configuration")
        return _knowledge.load(shipped_profiles(), use_config=False)
    if problem is not None:
        say(problem)
    return knowledge


def process_mode() -> str | None:
    shim = _STATE.get("shim")
    return shim.mode if shim is not None else None


def summarise_at_exit(enabled: bool) -> None:
    """Whether this process prints the end-of-run summary (the pytest plugin prints its own)."""
    _STATE["quiet"] = not enabled


def _at_exit() -> None:
    if _STATE.get("pid") != os.getpid() or _STATE.get("quiet"):
        return
    if os.environ.get("RANK", "0") != "0":  # torchrun: the summary comes from rank 0 only
        return
    from . import _shim

    found = _shim.violations()
    if found:
        print(format_summary(found), file=sys.stderr)
