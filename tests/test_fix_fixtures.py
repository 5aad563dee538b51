"""Autofix cases as files (issue 3): adding a fixture pair adds a test, no new test code.

* `fixtures/fix/<name>.in.py` is copied to a temporary directory and fixed with
  `--fix --unsafe-fixes`; the result must equal `<name>.out.py` byte for byte.
* `<name>.safe.out.py`, when present, is the expected result of `--fix` alone (safe fixes
  only); without it, the safe result must equal `<name>.out.py` too.

Every case also checks idempotence: fixing the fixed file again changes nothing. Files are
compared as bytes, so line endings (CRLF), a BOM and the coding line are part of the check.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from commgroup_lint.discovery import discover
from commgroup_lint.engine import Linter
from commgroup_lint.fixer import fix_result, write
from commgroup_lint.model import RuleSelection
from lintkit import PROFILE

FIX = Path(__file__).parent / "fixtures" / "fix"
CASES = sorted(p.name[: -len(".in.py")] for p in FIX.glob("*.in.py"))


def fix_file(path: Path, unsafe: bool) -> int:
    """Fix `path` in place as `check --fix [--unsafe-fixes]` does; returns the fixes applied."""
    linter = Linter(PROFILE, RuleSelection(("CGL",)))
    result = linter.lint(discover([str(path)]))
    assert result.internal_errors == []
    report = fix_result(linter, result, result.fixable, unsafe)
    assert report.failures == []
    write(report)
    assert report.failures == []
    return report.fixed


def fixed_bytes(tmp_path: Path, name: str, unsafe: bool) -> bytes:
    work = tmp_path / ("unsafe" if unsafe else "safe")
    work.mkdir()
    target = work / f"{name}.py"
    shutil.copyfile(FIX / f"{name}.in.py", target)
    fix_file(target, unsafe)
    once = target.read_bytes()
    assert fix_file(target, unsafe) == 0, "a second --fix run applied more fixes"
    assert target.read_bytes() == once, "a second --fix run changed the file"
    return once


@pytest.mark.parametrize("name", CASES)
def test_fix_unsafe(tmp_path: Path, name: str) -> None:
    expected = (FIX / f"{name}.out.py").read_bytes()
    assert fixed_bytes(tmp_path, name, unsafe=True).decode("latin-1") == expected.decode("latin-1")


@pytest.mark.parametrize("name", CASES)
def test_fix_safe(tmp_path: Path, name: str) -> None:
    safe = FIX / f"{name}.safe.out.py"
    expected = (safe if safe.is_file() else FIX / f"{name}.out.py").read_bytes()
    assert fixed_bytes(tmp_path, name, unsafe=False).decode("latin-1") == expected.decode("latin-1")


def test_every_fixture_is_a_pair() -> None:
    assert CASES
    names = {p.name for p in FIX.iterdir() if p.is_file()}
    expected = {f"{n}.{suffix}" for n in CASES for suffix in ("in.py", "out.py")}
    assert expected <= names
    assert names - expected == {f"{n}.safe.out.py" for n in CASES if f"{n}.safe.out.py" in names}
