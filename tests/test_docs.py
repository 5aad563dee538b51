"""Rule pages: docs/rules/ matches the rule modules, and `explain` prints the same page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint.cli import main
from commgroup_lint.docs import drift, expected_pages, render_rule_doc, write_pages
from commgroup_lint.rule import all_rules

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "rules"
SECTIONS = ("## What it finds", "## Why it matters", "## Example", "## Fix")


def test_docs_rules_are_up_to_date() -> None:
    problems = drift(DOCS)
    assert not problems, "run `python scripts/generate_rule_docs.py`:\n" + "\n".join(problems)


@pytest.mark.parametrize("rule", all_rules().rules, ids=lambda r: r.code)
def test_every_rule_has_a_complete_page(rule) -> None:  # noqa: ANN001
    doc = rule.documentation()
    positions = [doc.find(section) for section in SECTIONS]
    assert -1 not in positions, f"{rule.code}: the module docstring needs the sections {SECTIONS}"
    assert positions == sorted(positions)
    assert rule.name and rule.summary and not rule.summary.endswith(".")
    assert rule.INVALID, f"{rule.code}: at least one INVALID example"


@pytest.mark.parametrize("code", ["CGL001", "cgl100"])
def test_explain_prints_the_page(code: str) -> None:
    result = CliRunner().invoke(main, ["explain", code])
    assert result.exit_code == 0
    assert result.stdout == (DOCS / f"{code.upper()}.md").read_text(encoding="utf-8")
    assert result.stdout == render_rule_doc(all_rules().by_code(code.upper()))


def test_explain_unknown_code() -> None:
    result = CliRunner().invoke(main, ["explain", "CGL999"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: unknown rule code 'CGL999' (known: CGL000, ")


def test_drift_detects_missing_changed_and_stale_pages(tmp_path: Path) -> None:
    assert write_pages(tmp_path) == sorted(tmp_path / name for name in expected_pages())
    assert drift(tmp_path) == []
    (tmp_path / "CGL001.md").write_text("edited\n")
    (tmp_path / "CGL002.md").unlink()
    (tmp_path / "CGL777.md").write_text("old rule\n")
    (tmp_path / "index.md").write_text("not a rule page\n")
    assert drift(tmp_path) == [
        f"{tmp_path / 'CGL001.md'}: differs from the rule module",
        f"{tmp_path / 'CGL002.md'}: missing",
        f"{tmp_path / 'CGL777.md'}: stale (no such rule)",
    ]
    script = [sys.executable, str(ROOT / "scripts" / "generate_rule_docs.py"), "--directory", str(tmp_path)]
    checked = subprocess.run([*script, "--check"], capture_output=True, text=True)
    assert checked.returncode == 1
    assert "CGL777.md: stale" in checked.stdout
    written = subprocess.run(script, capture_output=True, text=True)
    assert written.returncode == 0
    assert drift(tmp_path) == []
    assert (tmp_path / "index.md").exists() and not (tmp_path / "CGL777.md").exists()
