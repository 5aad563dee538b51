"""The speed-ups never change a finding: the gate, the reuse of the index's analyses, and
`--frontend`, on the fixtures and on a generated corpus (no timing here: see benchmarks/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from commgroup_lint.discovery import discover
from speedkit import FIXTURES, ROOT, check, generate, linter

TREES = [ROOT / "examples", FIXTURES, *sorted(p for p in FIXTURES.glob("*/*") if p.is_dir())]


@pytest.mark.parametrize("tree", TREES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_gate_hides_no_finding_on_the_fixtures(tree: Path) -> None:
    assert check([tree], gate=True) == check([tree], gate=False)


def test_each_fixture_file_alone_gated_or_not() -> None:
    for path in sorted((FIXTURES / "static").glob("*.py")):
        assert check([path], gate=True) == check([path], gate=False), path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(tmp_path_factory.mktemp("corpus"), count=300)


def test_the_corpus_has_findings_of_every_kind(corpus: Path) -> None:
    findings, errors, files = check([corpus])
    assert files == 302 and not errors
    codes = {f[0] for f in findings}
    assert {"CGL001", "CGL002"} <= codes
    assert any(f[6] is not None for f in findings)  # some come with a fix


def test_the_gate_hides_no_finding_on_a_generated_corpus(corpus: Path) -> None:
    assert check([corpus], gate=True) == check([corpus], gate=False)


@pytest.mark.parametrize("gate", [True, False])
def test_libcst_front_end_finds_the_same(corpus: Path, gate: bool) -> None:
    """The two front ends lower to one IR: the same findings and fixes, to the column."""
    assert check([corpus], gate=gate, frontend="cst") == check([corpus], gate=gate)


def test_fixtures_with_the_libcst_front_end() -> None:
    assert check([FIXTURES], frontend="cst") == check([FIXTURES])


ONE_FILE = sorted([*(FIXTURES / "static").glob("*.py"), *(FIXTURES / "fix").glob("*.in.py")])


@pytest.mark.parametrize("path", ONE_FILE, ids=lambda p: p.name)
def test_each_fixture_file_alone_with_the_libcst_front_end(path: Path) -> None:
    """File by file too: a file's own imports and edits, not hidden by a neighbour's."""
    assert check([path], frontend="cst") == check([path])


STORE_RENDEZVOUS = 'from torch.distributed import rendezvous\n\nstore = next(rendezvous("env://"))\n'
SYMMETRIC_RENDEZVOUS = (
    "import torch.distributed._symmetric_memory as symm_mem\n"
    "\n"
    "\n"
    "def make(group):\n"
    "    t = symm_mem.empty(16)\n"
    "    symm_mem.rendezvous(t, group)\n"
    "    return t\n"
)


def test_a_word_another_api_shares_counts_only_beside_its_module(tmp_path: Path) -> None:
    """The store's `rendezvous` is not symmetric memory's: a file naming it without naming
    `_symmetric_memory` is not one that uses a group-bound API (the gate skips it)."""
    (tmp_path / "store.py").write_text(STORE_RENDEZVOUS, encoding="utf-8")
    (tmp_path / "symm.py").write_text(SYMMETRIC_RENDEZVOUS, encoding="utf-8")
    assert linter().lint(discover([str(tmp_path / "store.py")])).files_using_api == 0
    assert linter().lint(discover([str(tmp_path / "symm.py")])).files_using_api == 1


def test_checks_and_searches_split_with_a_forked_child_find_the_same(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from commgroup_lint import forked

    alone = check([corpus, FIXTURES])
    monkeypatch.setattr(forked, "MIN_COST", 1)  # every search and every check is split
    assert check([corpus, FIXTURES]) == alone
