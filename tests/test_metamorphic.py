"""Rewrites that do not change what a program does must not change its findings.

Each program is a seed bug (or its clean twin) from `metakit.SEEDS` whose buffer and groups go
through random chains of the rewrites in `metakit.REWRITES`. A failure prints the smallest
program that still fails.
"""

from __future__ import annotations

import random
from pathlib import Path

import metakit as m
import pytest
from lintkit import PROFILE

PROGRAMS = 2000  # per run: half bugs, half clean twins, fixed seeds


@pytest.fixture(scope="module")
def checker(tmp_path_factory: pytest.TempPathFactory) -> m.Checker:
    return m.Checker(tmp_path_factory.mktemp("metamorphic"), PROFILE)


def _fails(checker: m.Checker):
    return lambda case: not checker.holds(case)[0]


def _alone(name: str) -> list[m.Case]:
    """The rewrite once, on each value of each seed, in both frames, bug and clean."""
    cases = []
    for seed in m.SEEDS:
        for value in range(len(m.VALUES)):
            chains = tuple((name,) if i == value else () for i in range(len(m.VALUES)))
            cases += [m.Case(seed, method, chains, bug) for method in (False, True) for bug in (True, False)]
    return cases


def _assert_holds(checker: m.Checker, case: m.Case) -> None:
    holds, _ = checker.holds(case)
    if not holds:
        small = m.minimise(case, _fails(checker))
        found, text = checker.findings(small)
        expected = f"CGL002 at line {m.binding_line(text)}" if small.bug else "no finding"
        pytest.fail(f"{small.describe()}: expected {expected}, found {found}\n{text}")


@pytest.mark.parametrize("name", [seed.name for seed in m.SEEDS])
def test_seed_alone(checker: m.Checker, name: str) -> None:
    seed = next(s for s in m.SEEDS if s.name == name)
    for method in (False, True):
        for bug in (True, False):
            _assert_holds(checker, m.Case(seed, method, ((), (), ()), bug))


@pytest.mark.parametrize("name", m.FOLLOWED)
def test_followed_rewrite_alone(checker: m.Checker, name: str) -> None:
    for case in _alone(name):
        _assert_holds(checker, case)


@pytest.mark.parametrize("name", sorted(m.NOT_FOLLOWED))
def test_a_rewrite_not_followed_is_named_by_coverage(checker: m.Checker, name: str) -> None:
    """Where the model loses a finding, the run says it left something unknown (the line `check`
    prints, the counts `coverage` reports): it never reads as an "All clear" it did not earn."""
    for case in _alone(name):
        holds, text = checker.holds(case)
        if not holds:
            assert checker.unknowns > 0, f"{case.describe()}: lost without a trace\n{text}"


@pytest.mark.parametrize("batch", range(4))
def test_random_chains(checker: m.Checker, batch: int) -> None:
    rng = random.Random(batch)
    for i in range(PROGRAMS // 4):
        _assert_holds(checker, m.random_case(rng, m.FOLLOWED, bug=i % 2 == 0))


def test_rewrites_are_semantics_preserving(tmp_path: Path) -> None:
    """Every rewrite's program is valid Python that compiles (the async ones included)."""
    rng = random.Random(7)
    for name in m.REWRITES:
        for seed in m.SEEDS:
            case = m.Case(seed, rng.random() < 0.5, ((name,), (name,), (name,)), True)
            for module, text in m.render(case).items():
                compile(text, f"{module}.py", "exec")
