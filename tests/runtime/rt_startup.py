"""Where the start-up hook is: tests that need it skip where the package was not installed."""

from __future__ import annotations

import site
from pathlib import Path

PTH = "commgroup_lint_runtime.pth"


def startup_hook_installed() -> bool:
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    return any((Path(d) / PTH).is_file() for d in dirs)
