"""Larger cases as files (TorchFix style): adding a fixture adds a test, no new test code.

* `fixtures/static/<name>.py` is linted on its own; `<name>.txt` lists the expected findings,
  one `LINE:COL CODE` per line (an empty file: no findings), followed by the finding's confidence
  when it is not `high` (`12:5 CGL003 low`): every finding at every confidence is listed.
* `fixtures/packages/<name>/` is linted as a directory (so imports between its modules resolve);
  `expected.txt` lists `RELPATH:LINE:COL CODE` lines, RELPATH relative to that directory.

Blank lines and lines starting with `#` in the expectation files are ignored. The comparison
is exact (every finding of every code, in order).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from commgroup_lint.model import Confidence, Finding
from lintkit import EVERY_RULE, FIXTURES, lint_paths

LOW = Confidence.LOW

STATIC = FIXTURES / "static"
PACKAGES = FIXTURES / "packages"

# Cases whose expected output is right but the analysis gets wrong today: fixture name -> reason.
# Each is a real analysis bug; remove the entry when it is fixed (strict xfail says when).
KNOWN_BUGS: dict[str, str] = {}


def _expected(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _param(name: str, *values: object):
    marks = [pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[name])] if name in KNOWN_BUGS else []
    return pytest.param(*values, id=name, marks=marks)


STATIC_CASES = [_param(p.stem, p) for p in sorted(STATIC.glob("*.py"))]
PACKAGE_CASES = [_param(d.name, d) for d in sorted(PACKAGES.iterdir()) if (d / "expected.txt").is_file()]


@pytest.mark.parametrize("source", STATIC_CASES)
def test_static_fixture(source: Path) -> None:
    expected = _expected(source.with_suffix(".txt"))
    found = [f"{f.start.line}:{f.start.column} {f.code}{_confidence(f)}" for f in lint_paths(source, select=EVERY_RULE, min_confidence=LOW)]
    assert found == expected


@pytest.mark.parametrize("root", PACKAGE_CASES)
def test_package_fixture(root: Path) -> None:
    expected = _expected(root / "expected.txt")
    found = [
        f"{Path(f.path).relative_to(root).as_posix()}:{f.start.line}:{f.start.column} {f.code}{_confidence(f)}"
        for f in lint_paths(root, select=EVERY_RULE, min_confidence=LOW)
    ]
    assert found == expected


def _confidence(finding: Finding) -> str:
    return "" if finding.confidence is Confidence.HIGH else f" {finding.confidence.value}"


def test_every_fixture_has_an_expectation() -> None:
    assert STATIC_CASES and PACKAGE_CASES
    assert [p.name for p in STATIC.glob("*.py") if not p.with_suffix(".txt").is_file()] == []
    assert [p.name for p in STATIC.glob("*.txt") if not p.with_suffix(".py").is_file()] == []
    assert [d.name for d in PACKAGES.iterdir() if d.is_dir() and not (d / "expected.txt").is_file()] == []


def test_known_bugs_name_existing_fixtures() -> None:
    names = {p.stem for p in STATIC.glob("*.py")} | {d.name for d in PACKAGES.iterdir() if d.is_dir()}
    assert set(KNOWN_BUGS) <= names
