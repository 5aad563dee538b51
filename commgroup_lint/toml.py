"""TOML loading for Python 3.10 (tomli) and later (tomllib).

A checked repository writes the configuration and profile files this reads, so every way a
document can fail is a `TOMLDecodeError`: the parser recurses once per nesting level, and a
deeply nested array or inline table would otherwise raise `RecursionError`.
"""

from __future__ import annotations

import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib as _toml
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as _toml

TOMLDecodeError = _toml.TOMLDecodeError


def loads(text: str) -> dict[str, Any]:
    try:
        return _toml.loads(text)
    except RecursionError:
        raise TOMLDecodeError("nested too deeply (arrays or inline tables inside one another)") from None
