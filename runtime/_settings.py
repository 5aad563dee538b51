"""The environment variables that steer the shim, and the modes it runs in. Torch-free and
import-free: the start-up hook reads them in every process of the environment."""

from __future__ import annotations

ENV_VAR = "COMMGROUP_LINT_RUNTIME"
"""The shim's mode for every process of the environment (see :data:`MODES`)."""
LOG_ENV_VAR = "COMMGROUP_LINT_RUNTIME_LOG"
"""The file every process appends its violations to (``_log``)."""
PROFILE_ENV_VAR = "COMMGROUP_LINT_RUNTIME_PROFILE"
"""The profiles to use, comma-separated (default: every shipped profile)."""

MODES = ("assert", "warn", "report")
#: Values of ``COMMGROUP_LINT_RUNTIME`` (and of the pytest options) that leave the shim off.
OFF = ("", "0", "off", "false", "no")


def check_mode(mode: str) -> str:
    """``mode`` normalised; a ``ValueError`` naming the modes when it is none of them."""
    normal = (mode or "").strip().lower()
    if normal not in MODES:
        raise ValueError(f"commgroup-lint runtime mode must be one of {', '.join(MODES)}, got {mode!r}")
    return normal


def parse_switch(value: str | None) -> str | None:
    """A mode, or None for the values that mean off (unset, ``0``, ``off``, ...); a
    ``ValueError`` for anything else."""
    if value is None or value.strip().lower() in OFF:
        return None
    return check_mode(value)
