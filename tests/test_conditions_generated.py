"""Every finding's condition is the whole path condition from the binding to the consumer it names,
on generated paths of 1 to 6 tests in several spellings (see `condkit`)."""

from __future__ import annotations

import pytest

from condkit import generate
from lintkit import lint_text
from commgroup_lint.model import Confidence
from commgroup_lint.reporters.text import conjuncts

SEEDS = range(40)


def _conjuncts(condition: str | None) -> frozenset[str]:
    return frozenset(conjuncts(condition)) if condition else frozenset()


@pytest.mark.parametrize("seed", SEEDS)
def test_printed_condition_is_the_path_condition(tmp_path, seed):
    program = generate(seed)
    found = [f for f in lint_text(tmp_path, program.source, min_confidence=Confidence.LOW) if f.code == "CGL002"]
    assert [f.start.line for f in found] == [program.line], program.source
    assert _conjuncts(found[0].condition) == program.expected, program.source
    assert f", when {found[0].condition}" in found[0].message
