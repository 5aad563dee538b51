"""commgroup-lint's runtime shim: the static rules' checks, re-done while real code runs.

Importing this package never imports torch; torch is loaded when a name below that needs it
is first used. Installing the package installs a start-up hook (``commgroup_lint_runtime.pth``):
with ``COMMGROUP_LINT_RUNTIME=assert|warn|report`` set, every Python process of the
environment installs the shim when it imports torch. What the shim knows of the engines comes
from the linter's profiles and the user's configuration (``_knowledge``).

Public API (see ``docs/runtime.md``):

* :class:`enforce` -- context manager installing the shim (``mode="assert"|"warn"|"report"``).
* :class:`simulated_symmetric_memory` -- tag tensors allocated inside as bound to a group.
* :class:`SimulatedSymmetricPool` -- the registration scheme the simulated pool models.
* :class:`GroupMismatchError`, :class:`CommGroupRuntimeWarning`, :class:`Violation`.
* :func:`name_group`, :func:`group_label`, :func:`bind_buffer`, :func:`helper`,
  :func:`violations`, :func:`clear_violations`, :func:`install_from_env`.
"""

from __future__ import annotations

import os
from typing import Any

from ._report import (
    CODES,
    GROUP_MISMATCH,
    MODES,
    POOL_REUSE,
    RANK_DIVERGENCE,
    CommGroupRuntimeWarning,
    GroupMismatchError,
    Site,
    Violation,
    parse_switch,
)
from ._sites import helper

ENV_VAR = "COMMGROUP_LINT_RUNTIME"
LOG_ENV_VAR = "COMMGROUP_LINT_RUNTIME_LOG"
PROFILE_ENV_VAR = "COMMGROUP_LINT_RUNTIME_PROFILE"

_LAZY = {
    "enforce": "_shim",
    "violations": "_shim",
    "clear_violations": "_shim",
    "simulated_symmetric_memory": "_binding",
    "SimulatedSymmetricPool": "_binding",
    "bind_buffer": "_binding",
    "name_group": "_groups",
    "group_label": "_groups",
}

__all__ = sorted(
    {
        *_LAZY,
        "CODES",
        "GROUP_MISMATCH",
        "POOL_REUSE",
        "RANK_DIVERGENCE",
        "MODES",
        "CommGroupRuntimeWarning",
        "GroupMismatchError",
        "Site",
        "Violation",
        "helper",
        "install_from_env",
        "ENV_VAR",
        "LOG_ENV_VAR",
        "PROFILE_ENV_VAR",
    }
)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{module}", __name__), name)


def install_from_env() -> str | None:
    """Install the shim for the whole process now if ``COMMGROUP_LINT_RUNTIME`` asks for it
    (for an environment without the start-up hook); idempotent. Returns the mode, or None."""
    mode = parse_switch(os.environ.get(ENV_VAR))
    if mode is None:
        return None
    from ._process import install_process_wide

    return install_process_wide(mode)
