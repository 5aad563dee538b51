"""Configuration facts (see `config_facts`) read against path conditions.

Each implication and exclusion is a clause over atoms; an atom is true or false under a path
condition when the condition states it (a literal whose operand the atom names, by its source
text or its tail) or, for a relation of world sizes, forces it (`attn_dp_size != 1` forces
`attn_dp_size > 1`). Unit propagation over the clauses finds the fact a condition contradicts;
an `unbound` fact whose atoms all hold says no memory is bound on that path.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from commgroup_lint.analysis.conditions import (
    GLOBAL,
    Literal,
    PathCondition,
    contradicts,
    display_operand,
    map_arguments,
    operand_scope,
    relation_key,
    split_choice,
    split_disjunction,
    split_relation,
)
from commgroup_lint.config_facts import Fact

_OPS = ("!=", "==", "<=", ">=", "<", ">", "is not", "is", "not in", "in")
_CONSTANTS = {"None": None, "True": True, "False": False}


@dataclass(frozen=True)
class _Atom:
    """`key`: a concrete literal key (both sides known: sizes, constants); else `left`/`op`/`right`
    patterns of a relation, or `left` alone for a truthy operand."""

    key: str | None
    left: str
    op: str | None = None
    right: str | None = None


def _side(word: str, quantities: frozenset[str]) -> tuple[str, bool]:
    """An operand written in a fact: (its scoped text, whether it is concrete)."""
    if word.lstrip("-").isdigit():
        return word, True
    if word in _CONSTANTS:
        return repr(_CONSTANTS[word]), True
    if word[:1] in ("'", '"'):
        return repr(word[1:-1]), True
    if word in quantities:
        return "#" + word, True
    return word, False


def parse_atom(text: str, quantities: frozenset[str]) -> tuple[_Atom, bool]:
    """An atom written in a fact, and whether it holds as written (`not x`: False)."""
    holds = not text.startswith("not ")
    body = text.removeprefix("not ").strip()
    for op in _OPS:
        left, found, right = body.partition(f" {op} ")
        if not found:
            continue
        (lhs, lc), (rhs, rc) = _side(left.strip(), quantities), _side(right.strip(), quantities)
        key, as_written = relation_key(lhs, op, rhs)
        if lc and rc:
            return _Atom(key, lhs), holds == as_written
        relation = split_relation(key)
        assert relation is not None
        return _Atom(None, relation[0], relation[1], relation[2]), holds == as_written
    return _Atom(None, body), holds


def operand_matches(pattern: str, operand: str) -> bool:
    """Whether a fact's operand names a literal's: by the text a finding shows, by the
    qualified name or its tail, or by a tail after `*.` (`*.dp_padding_mode.is_max_len()`);
    a call written `f(*)` names `f` given any arguments (`is_cp_active(forward_batch)`)."""
    if pattern.startswith("#") or operand_scope(operand) == "const":
        return pattern == operand
    shown = display_operand(operand)
    full = (map_arguments(operand[1:], display_operand, marked=False) or shown) if operand.startswith(GLOBAL) \
        else shown
    if pattern.endswith("(*)"):
        heads = {head for text in (shown, full) if (head := _called(text)) is not None}
        return any(head == pattern[:-3] or head.endswith("." + pattern[:-3]) for head in heads)
    if pattern.startswith("*."):
        return shown.endswith(pattern[1:]) or full.endswith(pattern[1:]) or shown == pattern[2:]
    return pattern in (shown, full) or full.endswith("." + pattern)


def _called(text: str) -> str | None:
    """`f` of a text that is one call `f(...)` (its first parenthesis closes at the end)."""
    depth, start = 0, text.find("(")
    for i in range(max(start, 0), len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[:start] if start > 0 and i == len(text) - 1 else None
    return None


class Invariants:
    """The implications, exclusions and `unbound` facts of a profile, ready to read conditions."""

    def __init__(self, facts: Iterable[Fact], quantities: frozenset[str]) -> None:
        self._atoms: dict[str, _Atom] = {}
        self._clauses: list[tuple[Fact, tuple[tuple[str, bool], ...]]] = []
        self._unbound: list[tuple[Fact, tuple[tuple[str, bool], ...]]] = []
        for fact in facts:
            when = tuple(self._atom(text, quantities) for text in fact.when)
            if fact.kind == "implies":
                for text in fact.then:
                    self._clauses.append((fact, (*((a, not h) for a, h in when), self._atom(text, quantities))))
            elif fact.kind == "never":
                self._clauses.append((fact, tuple((a, not h) for a, h in when)))
            elif fact.kind == "unbound":
                self._unbound.append((fact, when))
        self._clauses.sort(key=lambda c: len(c[1]))  # constants first: the fact named is the one they break

    def __bool__(self) -> bool:
        return bool(self._clauses or self._unbound)

    def _atom(self, text: str, quantities: frozenset[str]) -> tuple[str, bool]:
        atom, holds = parse_atom(text, quantities)
        name = repr(atom)
        self._atoms.setdefault(name, atom)
        return name, holds

    def excluding(self, cond: PathCondition, where: str | None = None) -> Fact | None:
        """The fact that makes the condition of a path in the function `where` (a qualified
        name) impossible, or that says no memory is bound under it; None when the facts allow it."""
        if not self:
            return None
        values, violated = self._propagate(cond, where)
        if violated is not None:
            return violated
        for fact, when in self._unbound:
            if fact.holds_in(where) and all(values.get(a) is h for a, h in when):
                return fact
        return None

    def _propagate(self, cond: PathCondition, where: str | None) -> tuple[dict[str, bool], Fact | None]:
        working = set(cond)
        values: dict[str, bool] = {}
        changed = True
        while changed:
            changed = False
            for name, atom in self._atoms.items():
                if name not in values and (value := _truth(atom, working)) is not None:
                    values[name] = value
            for fact, clause in self._clauses:
                if any(values.get(a) is h for a, h in clause) or not fact.holds_in(where):
                    continue
                open_ = [(a, h) for a, h in clause if a not in values]
                if not open_:
                    return values, fact
                if len(open_) == 1:
                    a, h = open_[0]
                    values[a] = h
                    atom = self._atoms[a]
                    if atom.key is not None:
                        working.add((atom.key, h))
                    changed = True
        return values, None


def _truth(atom: _Atom, cond: set[Literal]) -> bool | None:
    if atom.key is not None:
        if (atom.key, True) in cond or contradicts(cond | {(atom.key, False)}):
            return True
        if (atom.key, False) in cond or contradicts(cond | {(atom.key, True)}):
            return False
        return None
    for key, holds in cond:
        if split_disjunction(key) is not None or split_choice(key) is not None:
            continue
        relation = split_relation(key)
        if atom.op is None and relation is None and operand_matches(atom.left, key):
            return holds
        if atom.op is not None and relation is not None and relation[1] == atom.op:
            left, _, right = relation
            pairs = [(left, right)] + ([(right, left)] if atom.op in ("==", "is") else [])  # sorted operands
            assert atom.right is not None
            if any(operand_matches(atom.left, x) and operand_matches(atom.right, y) for x, y in pairs):
                return holds
    return None
