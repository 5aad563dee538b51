"""Print how each metamorphic rewrite fares alone: which seeds and values keep their findings.

    python scripts/metamorphic_report.py

One row per rewrite of `tests/metakit.py`, one column per (seed, value): `.` every program of
that cell keeps its expected findings (bug and clean twin, function and method), `X` one does
not. The rewrites marked `X` are the constructs the analysis does not follow yet.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import metakit as m  # noqa: E402
from lintkit import PROFILE  # noqa: E402


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        checker = m.Checker(Path(folder), PROFILE)
        columns = [(seed, v) for seed in m.SEEDS for v in range(len(m.VALUES))]
        print(" " * 24 + " ".join(f"{seed.name}:{m.VALUES[v]}" for seed, v in columns))
        lost = 0
        for name in m.REWRITES:
            cells = []
            for seed, value in columns:
                chains = tuple((name,) if i == value else () for i in range(len(m.VALUES)))
                ok = all(checker.holds(m.Case(seed, method, chains, bug))[0]  # type: ignore[arg-type]
                         for method in (False, True) for bug in (True, False))
                cells.append("." if ok else "X")
            lost += "X" in cells
            print(f"{name:23} " + " ".join(c.center(len(f"{s.name}:{m.VALUES[v]}")) for c, (s, v) in zip(cells, columns)))
        print(f"\n{len(m.REWRITES) - lost} of {len(m.REWRITES)} rewrites keep every finding alone")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
