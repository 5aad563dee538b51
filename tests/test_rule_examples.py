"""Every rule's VALID and INVALID examples are tests (fixit style): adding an example adds a test."""

from __future__ import annotations

import pytest

from commgroup_lint.discovery import discover
from commgroup_lint.engine import Linter
from commgroup_lint.fixer import fix_result
from commgroup_lint.model import Confidence, RuleSelection
from commgroup_lint.profile import load_shipped
from commgroup_lint.rule import all_rules
from lintkit import lint_text

ENGINE_REPORTED = {"CGL100", "CGL101"}  # produced by suppression handling, tested in test_suppressions

CASES = [
    pytest.param(rule, kind, i, example, id=f"{rule.code}-{kind}-{i}")
    for rule in all_rules().rules
    if rule.code not in ENGINE_REPORTED and not rule.runtime_only
    for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID))
    for i, example in enumerate(examples)
]


@pytest.mark.parametrize(("rule", "kind", "index", "example"), CASES)
def test_example(tmp_path, rule, kind, index, example):
    findings = [f for f in lint_text(tmp_path, example.code, select=(rule.code,), min_confidence=Confidence.LOW)
                if f.code == rule.code]
    if kind == "valid":
        assert findings == []
    else:
        assert [(f.start.line, f.confidence) for f in findings] == [(example.line, example.confidence)]
        assert (findings[0].fix is not None) == (example.fixed is not None)


FIXED = [pytest.param(rule, example, id=f"{rule.code}-{i}")
         for rule in all_rules().rules for i, example in enumerate(rule.INVALID) if example.fixed is not None]


@pytest.mark.parametrize(("rule", "example"), FIXED)
def test_invalid_example_fixes_to_its_expected_source(tmp_path, rule, example):
    path = tmp_path / "snippet.py"
    path.write_text(example.code, encoding="utf-8")
    linter = Linter(load_shipped("sglang"), RuleSelection((rule.code,)))
    result = linter.lint(discover([str(path)]))
    [fixed] = fix_result(linter, result, result.fixable, unsafe=True).files
    assert fixed.text == example.fixed


def test_every_rule_has_examples():
    for rule in all_rules().rules:
        assert rule.VALID and rule.INVALID, rule.code
