"""Process-wide installation (``COMMGROUP_LINT_RUNTIME``, the pytest plugin, ``python -m``).

The shim stays installed until the process ends; at exit the violations are printed to
stderr and, when ``COMMGROUP_LINT_RUNTIME_LOG`` names a file, appended to it as JSON
lines so a parent process (the pytest plugin) can collect its children's findings.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import sys
import warnings

from ._report import check_mode, format_summary

_STATE: dict = {}


def install_process_wide(mode: str):
    mode = check_mode(mode)
    if _STATE.get("mode"):
        return _STATE["mode"]
    if importlib.util.find_spec("torch") is None:
        warnings.warn("commgroup-lint runtime: torch is not installed; the shim stays off", stacklevel=2)
        return None
    from . import _shim

    ctx = _shim.enforce(mode)
    ctx.__enter__()
    _STATE.update(mode=mode, ctx=ctx, pid=os.getpid())
    atexit.register(_at_exit)
    return mode


def process_mode():
    return _STATE.get("mode")


def process_violations():
    if not _STATE.get("mode"):
        return []
    from . import _shim

    return _shim.violations()


def _at_exit():
    if _STATE.get("pid") != os.getpid():
        return
    found = process_violations()
    log = os.environ.get("COMMGROUP_LINT_RUNTIME_LOG")
    if log and found and not _STATE.get("in_pytest"):
        with open(log, "a", encoding="utf-8") as fh:
            for v in found:
                fh.write(json.dumps(v.as_dict()) + "\n")
    if found and not _STATE.get("in_pytest"):
        print(format_summary(found), file=sys.stderr)
