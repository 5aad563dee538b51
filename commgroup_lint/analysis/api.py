"""What a qualified name means: the profile's entries, overridden by scanned definitions.

Profile entries are matched exactly, or, inside one of the profile's packages, by the
final name (SGLang re-exports its getters from several modules). A `callee().attr` entry
describes an attribute of an object a call returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from commgroup_lint.analysis.conditions import parse_relation
from commgroup_lint.profile import Collective, Context, GroupParam, Profile

T = TypeVar("T")


@dataclass(frozen=True)
class Allocator:
    """A call returning group-bound memory: the group is an argument, or hidden inside."""

    group: GroupParam | None
    hidden_groups: frozenset[str] = frozenset()
    origin: str | None = None  # "path:line" of the definition that fixes a hidden group

    @staticmethod
    def from_profile(param: GroupParam) -> "Allocator":
        return Allocator(param)


class _Table(Generic[T]):
    def __init__(self, entries: dict[str, T], packages: tuple[str, ...]) -> None:
        self._packages = packages
        self._exact = dict(entries)
        self._by_tail = {key: value for name, value in entries.items() if (key := self.tail_key(name))}
        self._hidden: set[str] = set()

    def tail_key(self, name: str) -> str | None:
        for package in self._packages:
            if name.startswith(package + "."):
                head, paren, rest = name.partition("(")
                return f"{package}:{head.rpartition('.')[2]}{paren}{rest}"
        return None

    def get(self, name: str) -> T | None:
        if name in self._hidden:
            return None
        found = self._exact.get(name)
        if found is None and (key := self.tail_key(name)):
            found = None if key in self._hidden else self._by_tail.get(key)
        return found

    def names(self) -> set[str]:
        return set(self._exact)

    def override(self, entries: dict[str, T]) -> None:
        """Scanned definitions win over shipped entries of the same name."""
        for name, value in entries.items():
            self._exact[name] = value
            self._hidden.discard(name)
            if key := self.tail_key(name):
                self._by_tail[key] = value
                self._hidden.discard(key)

    def hide(self, name: str) -> None:
        """A scanned definition says `name` is not what the profile thinks (an old signature)."""
        self._exact.pop(name, None)
        self._hidden.add(name)
        if key := self.tail_key(name):
            self._hidden.add(key)


@dataclass
class Api:
    """The lookup the dataflow consults for every call and attribute it meets."""

    profile: Profile
    getters: _Table[frozenset[str]] = field(init=False)
    sizes: _Table[str] = field(init=False)
    allocators: _Table[Allocator] = field(init=False)
    contexts: _Table[Context] = field(init=False)
    collectives: _Table[Collective] = field(init=False)
    local_copies: _Table[bool] = field(init=False)

    def __post_init__(self) -> None:
        p = self.profile
        self._single_rank = {
            group: frozenset(filter(None, map(parse_relation, relations)))
            for group, relations in p.single_rank.items()
        }
        self.getters = _Table(p.getters, p.packages)
        self.sizes = _Table(p.sizes, p.packages)
        self.allocators = _Table({k: Allocator.from_profile(v) for k, v in p.allocators.items()}, p.packages)
        self.contexts = _Table(p.contexts, p.packages)
        self.collectives = _Table(p.collectives, p.packages)
        self.local_copies = _Table({name: True for name in p.local_copies}, p.packages)
        self._factory_names = frozenset(name.rpartition(".")[2] for name in p.tensor_factories)
        self._pinned_tails = frozenset(filter(None, map(self.getters.tail_key, p.pinned)))

    def is_pinned(self, name: str) -> bool:
        """The user's configuration describes `name`: the scanned code's definition does not override it."""
        pinned = self.profile.pinned
        return name in pinned or (key := self.getters.tail_key(name)) is not None and key in self._pinned_tails

    def is_tensor_factory(self, name: str) -> bool:
        return name.rpartition(".")[2] in self._factory_names

    def is_collective_method(self, name: str) -> bool:
        return name in self.profile.collective_methods

    def is_same_group_attribute(self, name: str) -> bool:
        return name in self.profile.same_group_attributes

    def single_rank_groups(self, relations: frozenset[str]) -> frozenset[str]:
        """Groups that have one rank when all of `relations` hold."""
        return frozenset(g for g, rels in self._single_rank.items() if relations & rels)
