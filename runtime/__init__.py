"""commgroup-lint's runtime shim: the static rules' checks, re-done while real code runs.

Importing this package never imports torch: the names that need it are loaded when first
used. Installing the package installs a start-up hook (``commgroup_lint_runtime.pth``): with
``COMMGROUP_LINT_RUNTIME=assert|warn|report`` set, every Python process of the environment
installs the shim when it imports torch. The public API is ``__all__`` (see docs/runtime.md).
"""

from __future__ import annotations

import os
from typing import Any

from ._report import (
    CODES,
    GROUP_MISMATCH,
    POOL_REUSE,
    RANK_DIVERGENCE,
    CommGroupRuntimeWarning,
    GroupMismatchError,
    Site,
    Violation,
)
from ._settings import ENV_VAR, LOG_ENV_VAR, MODES, PROFILE_ENV_VAR, parse_switch
from ._sites import helper

_LAZY = {
    "enforce": "_shim",
    "violations": "_shim",
    "clear_violations": "_shim",
    "simulated_symmetric_memory": "_simulated",
    "SimulatedSymmetricPool": "_simulated",
    "bind_buffer": "_binding",
    "name_group": "_groups",
    "group_label": "_groups",
}

__all__ = [
    "CODES",
    "ENV_VAR",
    "GROUP_MISMATCH",
    "LOG_ENV_VAR",
    "MODES",
    "POOL_REUSE",
    "PROFILE_ENV_VAR",
    "RANK_DIVERGENCE",
    "CommGroupRuntimeWarning",
    "GroupMismatchError",
    "Site",
    "SimulatedSymmetricPool",
    "Violation",
    "bind_buffer",
    "clear_violations",
    "enforce",
    "group_label",
    "helper",
    "install_from_env",
    "name_group",
    "simulated_symmetric_memory",
    "violations",
]


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
