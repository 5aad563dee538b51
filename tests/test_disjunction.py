"""Disjunctions in path conditions: what `A or B` says when true (and `A and B` when false)."""

from __future__ import annotations

from commgroup_lint.analysis.conditions import (
    Substitution,
    contradicts,
    disjunction,
    display_condition,
    simplify,
)

F, G, X = ("@m.f()", True), ("@m.g", True), ("~x", False)
SIZE = ("#attn_dp_size == #tp_size", False)


def test_a_disjunction_shows_its_parts_in_parentheses() -> None:
    d = disjunction([frozenset({F}), frozenset({G, X})])
    assert display_condition(d | {SIZE}) == "attn_dp_size != tp_size and ((g and not x) or f())"


def test_a_part_that_always_holds_or_a_single_part_is_no_disjunction() -> None:
    assert disjunction([frozenset({F}), frozenset()]) == frozenset()
    assert disjunction([frozenset({F, G})]) == frozenset({F, G})


def test_a_disjunction_contradicts_only_when_every_part_does() -> None:
    d = disjunction([frozenset({F}), frozenset({G})])
    assert not contradicts(d | {("@m.f()", False)})
    assert contradicts(d | {("@m.f()", False), ("@m.g", False)})


def test_simplify_drops_excluded_parts_and_implied_disjunctions() -> None:
    d = disjunction([frozenset({F}), frozenset({G})])
    assert simplify(d | {("@m.f()", False)}) == frozenset({("@m.f()", False), G})
    assert simplify(d | {F}) == frozenset({F})


def test_a_call_translates_each_part_and_decides_constant_ones() -> None:
    d = disjunction([frozenset({("$0:flag", True)}), frozenset({("$1:mode.on", True)})])
    sub = Substitution(params={0: "self.use", 1: "~batch"}, param_literals={}, constants={}, receiver=None)
    cond, lost, impossible = sub.apply(d)
    assert (lost, impossible) == (False, False)
    assert display_condition(cond) == "(batch.on or self.use)"
    sub = Substitution(params={0: None, 1: "~batch"}, param_literals={}, constants={0: False}, receiver=None)
    assert sub.apply(d)[0] == frozenset({("~batch.on", True)})
