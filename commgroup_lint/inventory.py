"""`commgroup-lint sites`: every place memory is bound to a group, and what consumes it.

The inventory is what the analysis understood, in a table: each allocation, context or
registration that binds memory (the API called there, how it binds, the groups it resolved:
a profile's canonical name, the expression holding a group it could not trace, or `unknown`),
and every collective that consumes that memory, in the same function, in the class's other
methods, or at a caller of the helper that binds it. Each site has a `key` without line
numbers (path, function, API and its rank among the same calls there), so that the
inventories of two releases can be diffed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from commgroup_lint.analysis.facts import Allocation, display_group
from commgroup_lint.rule import FileContext

UNKNOWN = "unknown"


@dataclass(frozen=True)
class Consumer:
    collective: str
    path: str
    line: int
    groups: tuple[str, ...]


@dataclass
class Site:
    path: str
    line: int
    function: str
    api: str
    how: str  # "context", "allocator" or "registration"
    groups: tuple[str, ...]
    key: str
    consumers: list[Consumer] = field(default_factory=list)


def _groups(names: frozenset[str] | set[str], known: bool) -> tuple[str, ...]:
    return tuple(sorted(display_group(g) for g in names)) if known else (UNKNOWN,)


def _union(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    """The groups of both, `unknown` only when neither knows any."""
    known = (set(a) | set(b)) - {UNKNOWN}
    return tuple(sorted(known)) if known else (UNKNOWN,)


class Inventory:
    """Collects sites from each analysed file (`observe`, the engine's observer), then joins the
    consumers found at callers to the site inside the helper that binds the memory. A site
    whose group is its function's parameter lists the groups its callers pass instead."""

    def __init__(self) -> None:
        self._sites: dict[tuple[str, int], Site] = {}
        self._consumers: dict[tuple[str, int], set[Consumer]] = defaultdict(set)
        self._parameters: dict[tuple[str, int], set[str]] = defaultdict(set)  # site -> its groups that are parameters
        self._passed: dict[tuple[str, int], tuple[str, ...]] = {}  # site -> the groups its callers pass

    def observe(self, ctx: FileContext) -> None:
        path = ctx.source.display
        module = ctx.imports.module
        seen: dict[tuple[str, str], int] = defaultdict(int)
        for fn in ctx.functions:
            function = fn.qualname.removeprefix(module).lstrip(".") or "<module>"
            for a in fn.allocations:
                groups = _groups(a.group_names, a.groups is not None)
                if a.bound_at is not None:  # a helper's memory: its site is inside the helper
                    origin = _origin(a, path)
                    self._passed[origin] = _union(self._passed.get(origin, ()), groups)
                    continue
                where = (path, a.call.span.line)
                if fn.node is not None:
                    self._parameters[where] |= {fn.node.params[i].name.lstrip("*") for i in a.group_params}
                site = self._sites.get(where)
                if site is not None:  # one call, several APIs (`ctx()` is one of several partials)
                    site.api = ", ".join(sorted({*site.api.split(", "), a.name}))
                    site.groups = _union(site.groups, groups)
                    continue
                rank = seen[(function, a.name)]
                seen[(function, a.name)] += 1
                key = f"{path}::{function}::{a.short_name}" + (f"#{rank + 1}" if rank else "")
                self._sites[where] = Site(path, a.call.span.line, function, a.name, a.how, groups, key)
            for c in fn.consumptions:
                consumer = Consumer(c.collective, path, c.call.span.line, _groups(c.group_names, True))
                self._consumers[_origin(c.allocation, path)].add(consumer)

    def sites(self) -> list[Site]:
        out = []
        for where, site in sorted(self._sites.items()):
            site.consumers = _merged(self._consumers.get(where, ()))
            parameters = self._parameters.get(where)
            passed = tuple(g for g in self._passed.get(where, ()) if g not in (parameters or ()))
            if parameters and passed:  # (a method of the class passing the same attribute on tells nothing)
                site.groups = _union(tuple(g for g in site.groups if g not in parameters), passed)
            out.append(site)
        return out


def _merged(consumers: Iterable[Consumer]) -> list[Consumer]:
    """One consumer per collective call, with every group it may run on (each configuration's)."""
    groups: dict[tuple[str, int, str], set[str]] = defaultdict(set)
    for c in consumers:
        groups[(c.path, c.line, c.collective)].update(c.groups)
    return [Consumer(collective, path, line, tuple(sorted(names)))
            for (path, line, collective), names in sorted(groups.items())]


def _origin(a: Allocation, path: str) -> tuple[str, int]:
    """The site a consumed buffer was bound at: this call, or the line inside its helper."""
    if a.bound_at:
        where, _, line = a.bound_at.rpartition(":")
        return where, int(line)
    return path, a.call.span.line


def render_json(sites: list[Site]) -> str:
    return json.dumps([asdict(s) for s in sites], indent=2) + "\n"


def render_text(sites: list[Site]) -> str:
    lines = []
    for s in sites:
        apis = ", ".join(f"`{api.rpartition('.')[2]}`" for api in s.api.split(", "))
        lines.append(f"{s.path}:{s.line}: {s.function}: {apis} ({s.how}) -> {', '.join(s.groups)}")
        for c in s.consumers:
            lines.append(f"    consumed by `{c.collective}` on {', '.join(c.groups)} at {c.path}:{c.line}")
        if not s.consumers:
            lines.append("    no collective consumes it in the checked code")
    return "".join(line + "\n" for line in lines)
