"""Fuzzing (issue 8): generated and mutated programs never make the engine raise or report an
internal error, and `--fix` output parses, keeps every comment and is idempotent.

Fixed seeds, a few hundred programs; `scripts/fuzz.py` runs the same for longer.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzzkit

pytestmark = pytest.mark.slow  # about a minute: the fast subset leaves it to the whole suite

GENERATED_SEEDS = range(120)  # pysource-codegen programs, mutated
CORPUS_SEEDS = range(300)  # examples/ and tests/fixtures/ files, mutated


def assert_no_failures(outcome: fuzzkit.Outcome) -> None:
    if outcome.failures:
        kind, detail, program = outcome.failures[0]
        pytest.fail(f"{len(outcome.failures)} failure(s); first: {kind}: {detail}\n--- program ---\n{program}")


def test_generated_programs() -> None:
    pytest.importorskip("pysource_codegen")
    total = fuzzkit.Outcome()
    for seed in GENERATED_SEEDS:
        program = fuzzkit.program_for(seed, "generated")
        if program is not None:
            total.add(fuzzkit.check_program(program))
    assert total.programs >= 100  # the generator's own unparser gives up on a few seeds
    assert sum(total.findings.values()) > 0  # the insertions reach the analysis
    assert_no_failures(total)


def test_mutated_fixtures() -> None:
    total = fuzzkit.Outcome()
    for seed in CORPUS_SEEDS:
        total.add(fuzzkit.check_program(fuzzkit.program_for(seed, "corpus")))
    assert total.programs == len(CORPUS_SEEDS)
    assert total.findings["CGL001"] > 0 and total.findings["CGL002"] > 0
    if fuzzkit.fixer_available():
        assert total.fixed_files > 0  # the fix checks ran on something
    assert_no_failures(total)


def test_hostile_names_and_elif_chains() -> None:
    """The shapes of issue 35: every reporter keeps a hostile name printable and parseable, and a
    long `elif` chain is analysed, never a CGL000 (the trees of non-regular files run in
    scripts/fuzz.py: a subprocess each)."""
    total = fuzzkit.Outcome()
    for seed in range(40):
        total.add(fuzzkit.shapes_for(seed))
    assert total.programs == 44
    assert total.findings["CGL001"] > 0  # the chains were analysed
    assert_no_failures(total)


hypothesmith = pytest.importorskip("hypothesmith")


@settings(max_examples=100, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(source=hypothesmith.from_node(), seed=st.integers(0, 2**32 - 1))
def test_hypothesmith_programs(source: str, seed: int) -> None:
    program = fuzzkit.mutate(source, random.Random(seed))
    assert_no_failures(fuzzkit.check_program(program))


def test_mutation_keeps_the_program_valid_where_it_can() -> None:
    """Most mutated fixtures still parse, so the analysis (not just the parser) is exercised."""
    programs = [fuzzkit.program_for(seed, "corpus") for seed in range(40)]
    assert sum(map(fuzzkit.parses, programs)) >= 30
