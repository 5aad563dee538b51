"""Every rule's VALID and INVALID examples are tests (fixit style): adding an example adds a test."""

from __future__ import annotations

import pytest

from commgroup_lint.rule import all_rules
from conftest import lint_text

ENGINE_REPORTED = {"CGL100", "CGL101"}  # produced by suppression handling, tested in test_suppressions

CASES = [
    pytest.param(rule, kind, i, example, id=f"{rule.code}-{kind}-{i}")
    for rule in all_rules().rules
    if rule.code not in ENGINE_REPORTED
    for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID))
    for i, example in enumerate(examples)
]


@pytest.mark.parametrize(("rule", "kind", "index", "example"), CASES)
def test_example(tmp_path, rule, kind, index, example):
    findings = [f for f in lint_text(tmp_path, example.code, select=(rule.code,)) if f.code == rule.code]
    if kind == "valid":
        assert findings == []
    else:
        assert [f.start.line for f in findings] == [example.line]


def test_every_rule_has_examples():
    for rule in all_rules().rules:
        assert rule.VALID and rule.INVALID, rule.code
