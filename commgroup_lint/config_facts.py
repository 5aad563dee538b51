"""Configuration facts: what an engine's configuration space allows, stated once as data.

The branches of an engine's code combine into many more paths than its configuration can
take: its argument validation forbids some combinations, its group initialiser makes two
getters return one object under a relation. A profile (shipped, or the user's) states such
facts in its `[facts]` table; the analysis drops every path that contradicts one, and the
findings on it (`check --explain-facts` lists them). See docs/profiles.md#facts.

A fact is one of:

- an implication: `when` (atoms that all hold, none for a constant) then `then` (atoms that
  hold too), as mypy's `always_true` or pyright's `defineConstant` for `when = []`;
- an exclusion: `never = true`: the `when` atoms never all hold together;
- no bound memory: `unbound = true`: under `when`, no memory is bound to any group (the
  engine's symmetric memory is off), so nothing can mismatch;
- a group identity: `same_group = [a, b]`: under `when` (one relation), the two canonical
  groups are one object (generalising `[aliases]`);
- a one-rank group: `single_rank = "g"`: under `when` (one relation), `g` has one rank
  (generalising `[single_rank]`).

`modules` (qualified-name patterns, `pkg.models.big_model*`) limits a fact to the paths of the
functions they match: what one model's validation enforces holds for that model's code only.

An atom is a test as the engine's source writes it: a flag or helper result
(`world_dp_gather_enabled()`, `self.use_attn_tp_group`), a relation of world sizes
(`attn_dp_size > 1`), a mode of data named by its tail (`*.dp_padding_mode.is_max_len()`),
each possibly preceded by `not`. `source` cites the engine code that enforces the fact
(`path/in/package.py:Symbol`) and `evidence` a text that code contains, which
`scripts/check_releases.py` looks for. This module imports nothing of the analysis: the
profile reader uses it, and the runtime shim reads profiles where only torch is installed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import Any

KINDS = ("implies", "never", "unbound", "same_group", "single_rank")
_KEYS = {"when", "then", "never", "unbound", "same_group", "single_rank", "source", "evidence", "modules"}
_OPERATORS = ("!=", "==", "<=", ">=", "<", ">", " is not ", " is ", " not in ", " in ")
_ATOM = re.compile(r"[\w.*()\[\]',=<>!\- ]+")


@dataclass(frozen=True)
class Fact:
    name: str
    kind: str  # one of KINDS
    when: tuple[str, ...] = ()
    then: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()  # same_group: the two groups; single_rank: the one
    source: str = ""  # `path/in/package.py:Symbol` of the engine code that enforces it
    evidence: str = ""  # a text that code contains (checked by scripts/check_releases.py)
    shipped: bool = False  # stated by a shipped profile (left out by `--no-shipped-facts`)
    also: tuple[str, ...] = ()  # other places that enforce it (where other releases keep the code)
    derived: bool = False  # read from the checked code (see `analysis.derived_facts`)
    modules: tuple[str, ...] = ()  # where it holds: patterns of functions' qualified names (empty: everywhere)

    def describe(self) -> str:
        """The fact as a sentence: `world_dp_gather_enabled() implies not symm`, and where it holds."""
        where = f" (in {', '.join(self.modules)})" if self.modules else ""
        return self._sentence() + where

    def holds_in(self, function: str | None) -> bool:
        """Whether the fact holds in the function of that qualified name (None: one not known)."""
        return not self.modules or function is not None and any(fnmatchcase(function, m) for m in self.modules)

    def _sentence(self) -> str:
        when = " and ".join(self.when)
        if self.kind == "implies":
            then = " and ".join(self.then)
            return f"{when} implies {then}" if when else f"always {then}"
        if self.kind == "never":
            return f"never {when}"
        if self.kind == "unbound":
            return f"no memory is bound to a group when {when}"
        if self.kind == "same_group":
            return f"{self.groups[0]} is {self.groups[1]} when {when}"
        return f"{self.groups[0]} has one rank when {when}"


def atom_problem(text: str) -> str | None:
    """Why `text` is not an atom a fact can state, or None when it is one."""
    body = text.removeprefix("not ").strip()
    if not body:
        return "is empty; write a test as the engine's source writes it (`flag()`, `tp_size > 1`, `not self.x`)"
    if not _ATOM.fullmatch(body):
        return f"'{text}' is not one test (a name, call, attribute, or a comparison of two of them)"
    for op in _OPERATORS:
        left, found, right = body.partition(op if op.startswith(" ") else f" {op} ")
        if found:
            if not left.strip() or not right.strip():
                return f"'{text}' compares nothing on one side of `{op.strip()}`"
            return None
    if any(op in body for op in ("=", "<", ">")) and "(" not in body:
        return f"'{text}' has an operator without spaces around it; write `a == b`"
    return None


def parse_facts(table: dict[str, Any], fail: Any, shipped: bool = False) -> tuple[Fact, ...]:
    """The `[facts]` table: `fail(key, problem)` makes the error that names the key."""
    out = []
    for name, data in table.items():
        where = f"facts.{name}"
        if not isinstance(data, dict):
            raise fail(where, "must be a table (`when`, `then`, `source`, ...)")
        for key in data:
            if key not in _KEYS:
                raise fail(f"{where}.{key}", f"unknown key (expected one of: {', '.join(sorted(_KEYS))})")
        when, then = _atoms(data, "when", where, fail), _atoms(data, "then", where, fail)
        kinds = [k for k in ("then", "never", "unbound", "same_group", "single_rank") if k in data]
        if len(kinds) != 1:
            raise fail(where, "needs exactly one of `then`, `never`, `unbound`, `same_group` or `single_rank`")
        kind = "implies" if kinds[0] == "then" else kinds[0]
        groups: tuple[str, ...] = ()
        if kind in ("never", "unbound"):
            if data[kind] is not True:
                raise fail(f"{where}.{kind}", "must be true")
            if not when:
                raise fail(f"{where}.when", f"is required with `{kind}` (the atoms under which it holds)")
        elif kind == "same_group":
            found = data["same_group"]
            if not isinstance(found, list) or len(found) != 2 or not all(isinstance(g, str) for g in found):
                raise fail(f"{where}.same_group", "must be a list of two canonical groups")
            groups = tuple(found)
        elif kind == "single_rank":
            if not isinstance(data["single_rank"], str):
                raise fail(f"{where}.single_rank", "must be a canonical group's name")
            groups = (data["single_rank"],)
        elif not then:
            raise fail(f"{where}.then", "must name at least one atom")
        if kind in ("same_group", "single_rank") and len(when) != 1:
            raise fail(f"{where}.when", "must be one relation of world sizes (`attn_cp_size == tp_size`)")
        sources = _atoms_or_texts(data, "source", where, fail)
        modules = _atoms_or_texts(data, "modules", where, fail)
        out.append(Fact(name, kind, when, then, groups, sources[0] if sources else "",
                        _text(data, "evidence", where, fail), shipped, also=tuple(sources[1:]),
                        modules=tuple(modules)))
    return tuple(out)


def _atoms(data: dict[str, Any], key: str, where: str, fail: Any) -> tuple[str, ...]:
    value = data.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fail(f"{where}.{key}", "must be a string or a list of strings")
    for atom in value:
        problem = atom_problem(atom)
        if problem:
            raise fail(f"{where}.{key}", problem)
    return tuple(a.strip() for a in value)


def _atoms_or_texts(data: dict[str, Any], key: str, where: str, fail: Any) -> list[str]:
    """`source`: one citation, or a list of them (the places different releases keep the code)."""
    value = data.get(key, [])
    value = [value] if isinstance(value, str) else value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fail(f"{where}.{key}", "must be a string or a list of strings (`path/in/package.py:Symbol`)")
    return value


def _text(data: dict[str, Any], key: str, where: str, fail: Any) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise fail(f"{where}.{key}", "must be a string")
    return value


def as_shipped(facts: tuple[Fact, ...]) -> tuple[Fact, ...]:
    return tuple(replace(f, shipped=True) for f in facts)


@dataclass(frozen=True)
class EngineChecks:
    """`[engine_checks]`: where the engine states its own invariants, for facts read from the
    checked code (see `analysis.derived_facts`): its validation functions (`assert A, msg`,
    `if A: raise ...`) and group initialisers (`_ATTN_CP = _TP` under `attn_cp_size == tp_size`),
    by qualified name (`pkg.mod.function`, `pkg.mod.Class.method`); `names` says what a name
    there stands for: a world size (`tensor_model_parallel_size = "tp_size"`) or a canonical
    group (`_TP = "tp"`)."""

    validation: tuple[str, ...] = ()
    initialisers: tuple[str, ...] = ()
    names: tuple[tuple[str, str], ...] = ()

    def merged(self, other: EngineChecks) -> EngineChecks:
        return EngineChecks(tuple(dict.fromkeys(self.validation + other.validation)),
                            tuple(dict.fromkeys(self.initialisers + other.initialisers)),
                            tuple(dict(self.names + other.names).items()))


def parse_engine_checks(table: dict[str, Any], fail: Any) -> EngineChecks:
    for key in table:
        if key not in ("validation", "group_initialisers", "names"):
            raise fail(f"engine_checks.{key}", "unknown key (expected one of: group_initialisers, names, validation)")
    lists = []
    for key in ("validation", "group_initialisers"):
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise fail(f"engine_checks.{key}", "must be a list of qualified function names")
        lists.append(tuple(value))
    names = table.get("names", {})
    if not isinstance(names, dict) or not all(isinstance(v, str) for v in names.values()):
        raise fail("engine_checks.names", 'must be a table of name = "world size or canonical group"')
    return EngineChecks(lists[0], lists[1], tuple(names.items()))
