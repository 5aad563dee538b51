"""Expected findings, read from the smoke model's ``# seeded:`` markers."""

from __future__ import annotations

import os
import re

SMOKE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "smoke_model")
MARK = re.compile(r"#\s*seeded:\s*(CGL\d{3})\s*\(runtime:\s*(CGL\d{3})\s+on\s+([\d,]+)\s+ranks\)")


def seeded(variant):
    """[(path, line, static_code, runtime_code, world_sizes)] for one variant."""
    path = os.path.join(SMOKE_DIR, f"model_{variant}.py")
    found = []
    with open(path, encoding="utf-8") as fh:
        for lineno, text in enumerate(fh, 1):
            m = MARK.search(text)
            if m:
                sizes = {int(s) for s in m.group(3).split(",")}
                found.append((os.path.realpath(path), lineno, m.group(1), m.group(2), sizes))
    return found


def expected_runtime(variant, world):
    return {(p, line, rt) for p, line, _static, rt, sizes in seeded(variant) if world in sizes}
