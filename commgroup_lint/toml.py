"""TOML loading for Python 3.10 (tomli) and later (tomllib)."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib as _toml
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as _toml

TOMLDecodeError = _toml.TOMLDecodeError
loads = _toml.loads
