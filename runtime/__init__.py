"""commgroup-lint's runtime shim: the static rules' checks, re-done while real code runs.

Importing this package never imports torch; torch is loaded when a name below that
needs it is first used, or when ``COMMGROUP_LINT_RUNTIME`` asks for the shim.

Public API (see ``docs/runtime.md``):

* :class:`enforce` -- context manager installing the shim (``mode="assert"|"warn"|"report"``).
* :class:`simulated_symmetric_memory` -- tag tensors allocated inside as bound to a group.
* :class:`SimulatedSymmetricPool` -- the registration scheme the simulated pool models.
* :class:`GroupMismatchError`, :class:`CommGroupRuntimeWarning`, :class:`Violation`.
* :func:`name_group`, :func:`bind_buffer`, :func:`helper`, :func:`wrap_group_methods`,
  :func:`violations`, :func:`clear_violations`, :func:`install_from_env`.
"""

from __future__ import annotations

import os

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
)
from ._sites import DEFAULT_HELPER_MODULES, helper

ENV_VAR = "COMMGROUP_LINT_RUNTIME"
LOG_ENV_VAR = "COMMGROUP_LINT_RUNTIME_LOG"

_LAZY = {
    "enforce",
    "simulated_symmetric_memory",
    "SimulatedSymmetricPool",
    "name_group",
    "group_label",
    "bind_buffer",
    "wrap_group_methods",
    "violations",
    "clear_violations",
}

__all__ = sorted(
    _LAZY
    | {
        "CODES",
        "GROUP_MISMATCH",
        "POOL_REUSE",
        "RANK_DIVERGENCE",
        "MODES",
        "CommGroupRuntimeWarning",
        "GroupMismatchError",
        "Site",
        "Violation",
        "DEFAULT_HELPER_MODULES",
        "helper",
        "install_from_env",
        "ENV_VAR",
    }
)


def __getattr__(name):
    if name in _LAZY:
        from . import _shim

        return getattr(_shim, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def install_from_env():
    """Install the shim for the whole process (this thread) if ``COMMGROUP_LINT_RUNTIME``
    is set; idempotent. Returns the mode installed, or None."""
    from ._process import install_process_wide

    mode = os.environ.get(ENV_VAR, "").strip().lower()
    if not mode or mode in ("0", "off", "false", "no"):
        return None
    return install_process_wide(mode)


if os.environ.get(ENV_VAR):
    install_from_env()
