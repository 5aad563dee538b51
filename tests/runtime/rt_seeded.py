"""Expected findings, read from the smoke model's ``# seeded[VARIANT]:`` markers."""

from __future__ import annotations

import os
import re

SMOKE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "smoke_model")
MODEL = os.path.realpath(os.path.join(SMOKE_DIR, "model.py"))
MARK = re.compile(r"#\s*seeded\[(\w+)\]:\s*(CGL\d{3})\s*\(runtime:\s*(CGL\d{3})\s+on\s+([\d,]+)\s+ranks\)")


def seeded(variant: str | None = None) -> list[tuple[str, int, str, str, set[int]]]:
    """``[(path, line, static_code, runtime_code, world_sizes)]`` for one variant (all: None)."""
    found = []
    with open(MODEL, encoding="utf-8") as fh:
        for lineno, text in enumerate(fh, 1):
            m = MARK.search(text)
            if m and variant in (None, m.group(1)):
                sizes = {int(s) for s in m.group(4).split(",")}
                found.append((MODEL, lineno, m.group(2), m.group(3), sizes))
    return found


def expected_runtime(variant: str, world: int) -> set[tuple[str, int, str]]:
    return {(p, line, rt) for p, line, _static, rt, sizes in seeded(variant) if world in sizes}
