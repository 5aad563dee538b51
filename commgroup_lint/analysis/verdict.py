"""When a bound buffer and the collective that consumes it disagree, and how sure that is.

The memory may be bound to one of several groups and the collective may run on one of
several, each possibility under its guard. For every pair of possibilities the condition K
under which both hold (with the path to the collective) is a configuration to examine:
under K, the groups the memory can be bound to and the groups the collective can run on
are those whose guards K does not contradict. When no group is in both (reading two names
for one group object as one), the buffer is consumed on the wrong group whenever K holds.
The two sides of a group with a single rank under K differ: a collective on it is a no-op
and never mismatches, but memory bound to it is plain memory (its context registers
nothing), which a collective of a larger group consumes on the slow path. A path that a
configuration fact excludes (see `invariants`) is no configuration to examine.

Confidence: `high` when K says nothing or only relates world sizes; `medium` when it
needs a flag or mode the code sets; `low` when the verdict rests on something the analysis
could not read (a helper's condition it could not translate, a group known only by the
expression holding it, compared with another, or one of several callables a value may hold,
chosen where the analysis cannot say when).
"""

from __future__ import annotations

from dataclasses import dataclass

from commgroup_lint.analysis.api import Api
from commgroup_lint.analysis.conditions import (
    CALLABLE,
    FLAG,
    PathCondition,
    configuration,
    contradicts,
    display_condition,
    implies,
    kind,
    simplify,
)
from commgroup_lint.analysis.facts import Consumption, Guarded, is_symbolic
from commgroup_lint.config_facts import Fact
from commgroup_lint.model import Confidence


@dataclass(frozen=True)
class Mismatch:
    consumption: Consumption
    bound: frozenset[str]  # the groups the memory can be bound to under the condition
    consumer: frozenset[str]  # the groups the collective can run on under it
    literals: PathCondition  # the whole path condition under which it holds (empty: always)
    confidence: Confidence
    narrowing: PathCondition = frozenset()  # of those, the relations that keep two names two groups
    plain: bool = False  # every group it is bound to has one rank here: the memory is not registered

    @property
    def configuration_dependent(self) -> bool:
        """Whether the path to the mismatch needs a configuration (not only that two names be two
        groups, or that the binding's context be switched on)."""
        return bool(configuration(self.literals) - self.narrowing - self.consumption.allocation.switch)

    @property
    def condition(self) -> str | None:
        return display_condition(self.literals) or None


def _possible(options: tuple[Guarded, ...], k: PathCondition) -> frozenset[str]:
    return frozenset(g for g, guard in options if not contradicts(k | guard))


Removed = tuple["Mismatch", Fact]  # a mismatch and the configuration fact that excludes it


def _single_rank(groups: frozenset[str], k: PathCondition, api: Api) -> frozenset[str]:
    return frozenset(g for g in groups if any(implies(k, rel) for rel in api.single_rank(g)))


def _aliased(bound: frozenset[str], consumer: frozenset[str], k: PathCondition, api: Api) -> bool:
    """Whether, under K, some group of one side is the same object as one of the other."""
    return any((rel := api.alias(x, y)) is not None and implies(k, rel) for x in bound for y in consumer)


def mismatches(consumption: Consumption, api: Api, removed: list[Removed] | None = None,
               where: str | None = None) -> list[Mismatch]:
    """Every configuration (by its condition) under which the consumption, in the function
    `where`, is on the wrong group, but those a configuration fact excludes (added to
    `removed`, when given, with the fact)."""
    bindings = consumption.allocation.groups
    if not bindings or not consumption.groups:
        return []
    found: dict[PathCondition, Mismatch] = {}
    for _, bound_guard in bindings:
        for _, consumer_guard in consumption.groups:
            k = consumption.cond | bound_guard | consumer_guard
            if contradicts(k) or k in found:
                continue
            bound = _possible(bindings, k)
            consumer = _possible(consumption.groups, k)
            single = _single_rank(bound | consumer, k, api)
            consumer = consumer - single  # a collective on a one-rank group is a no-op
            if not consumer or (bound - single) & consumer or _aliased(bound - single, consumer, k, api):
                continue
            plain = bound <= single  # a one-rank group's context registers nothing: plain memory
            narrowing = _distinct(bound, consumer, k, api)
            literals = simplify(k | narrowing)
            mismatch = Mismatch(consumption, bound, consumer, literals,
                                _confidence(consumption, bound, consumer, configuration(literals)), narrowing, plain)
            fact = api.invariants.excluding(literals, where)
            if fact is None:
                found[k] = mismatch
            elif removed is not None:
                removed.append((mismatch, fact))
    return sorted(found.values(), key=_preference)


def _distinct(bound: frozenset[str], consumer: frozenset[str], k: PathCondition, api: Api) -> PathCondition:
    """The relations that must fail for two names to be two groups (narrowing the condition)."""
    out = set()
    for x in bound:
        for y in consumer:
            rel = api.alias(x, y)
            if rel is not None and (rel, False) not in k:
                out.add((rel, False))
    return frozenset(out)


def _confidence(consumption: Consumption, bound: frozenset[str], consumer: frozenset[str],
                literals: PathCondition) -> Confidence:
    if consumption.lost or any(is_symbolic(g) for g in bound) or any(is_symbolic(g) for g in consumer) \
            and not exchanged_on_default(consumption):
        return Confidence.LOW
    return literal_confidence(literals)


def exchanged_on_default(consumption: Consumption) -> bool:
    """A builder that leaves its group to the default (WORLD) while the same call gives another
    of its arguments a group (`comm_backend=TorchDistBackend(group=group)`): the code named a
    group there and none for the object, so the two differ whatever that expression holds
    (a caller passing WORLD itself would not need it)."""
    return consumption.allocation.defaulted is not None and consumption.call is consumption.allocation.call


def literal_confidence(literals: PathCondition) -> Confidence:
    """How sure a finding that holds under `literals` is, by what they are about."""
    kinds = {kind(key) for key, _ in literals}
    if CALLABLE in kinds:
        return Confidence.LOW
    return Confidence.MEDIUM if FLAG in kinds else Confidence.HIGH


def _preference(m: Mismatch) -> tuple:
    """Most certain, fewest conditions, first collective; ties by what the finding would say
    (never by the order of a set, which differs between runs)."""
    return (-m.confidence.rank, len(configuration(m.literals)), m.consumption.call.span.line, m.consumption.call.span.col,
            display_condition(m.literals), m.consumption.allocation.name, sorted(m.bound), sorted(m.consumer))


def best(found: list[Mismatch]) -> Mismatch:
    """The mismatch a finding leads with: the most certain, under the fewest conditions."""
    return min(found, key=_preference)
