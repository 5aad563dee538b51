"""`commgroup-lint coverage`: what the analysis understood of a tree, and what it did not.

A run that finds nothing is only worth something if the analysis followed the code. This
report counts, over the checked files, the places that bind memory to a group (as `sites`
lists them), the collectives that consume such memory, and each group reference among them
resolved to a group the analysis can name (a profile's canonical group, a new group by what
holds it) or left unknown. An unknown one is classified by the construct that held it, with
one example location, so that a user sees which spelling of their code the analysis lost.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from commgroup_lint.analysis.facts import FunctionFacts, is_symbolic
from commgroup_lint.rule import FileContext

NOT_TRACED = "group argument not traced"
UNKNOWN_KINDS = {
    "parameter": "a parameter no caller passes a known group to",
    "self": "an attribute of `self` no method stores a known group in",
    "call": "the result of a call the analysis does not follow",
    "subscript": "an element of a container the analysis does not follow",
    "attribute": "an attribute of an object the analysis does not follow",
    "name": "a name the analysis does not follow",
    NOT_TRACED: "a group argument the analysis could not follow at all",
}
LOST = "memory lost: "  # the kinds of a collective given a buffer or group the analysis lost, after memory was bound
UNKNOWN_KINDS.update({
    LOST + "call": "a collective's buffer or group from a call the analysis does not follow, after memory was bound",
    LOST + "attribute": "a collective's buffer or group from an attribute the analysis does not follow, after memory "
                        "was bound",
    LOST + "subscript": "a collective's buffer or group from an element the analysis does not follow, after memory "
                        "was bound",
    LOST + "name": "a collective's buffer or group from a name the analysis does not follow, after memory was bound",
    LOST + "expression": "a collective's buffer or group from an expression the analysis does not follow, after "
                         "memory was bound",
})


@dataclass
class FileCoverage:
    binding_sites: int = 0
    consumers: int = 0
    consumers_resolved: int = 0
    groups_resolved: int = 0
    unknown: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    @property
    def groups_unknown(self) -> int:
        return sum(n for kind, n in self.unknown.items() if not kind.startswith(LOST))

    @property
    def memory_lost(self) -> int:
        """Collectives given a buffer or group the analysis lost, in functions that bound memory before."""
        return sum(n for kind, n in self.unknown.items() if kind.startswith(LOST))

    def add_unknown(self, kind: str, where: str) -> None:
        self.unknown[kind] += 1
        self.examples.setdefault(kind, where)


class Coverage:
    """Collects each analysed file's counts (`observe`, the engine's observer); `finish` then
    resolves a helper's group parameter through what its callers pass, as `sites` does."""

    def __init__(self) -> None:
        self.files: dict[str, FileCoverage] = defaultdict(FileCoverage)
        self._parameter_sites: dict[tuple[str, int], tuple[str, int]] = {}  # site -> (file, unknown references)
        self._passed: set[tuple[str, int]] = set()  # sites whose callers pass a known group

    def observe(self, ctx: FileContext) -> None:
        path = ctx.source.display
        counts = self.files[path]
        for fn in ctx.functions:
            for a in fn.allocations:
                where = f"{path}:{a.call.span.line}"
                if a.bound_at is not None:  # a helper's memory at its caller: counted at the helper's site
                    if a.groups and not any(is_symbolic(g) for g in a.group_names):
                        self._passed.add(_origin(a.bound_at))
                    continue
                counts.binding_sites += 1
                if a.missing_param is not None:  # a call without its group is CGL001's, not unknown
                    continue
                if a.group_params and a.groups is not None:
                    parameters = sum(is_symbolic(g) and _kind(g[1:], fn) == "parameter" for g in a.group_names)
                    self._parameter_sites[(path, a.call.span.line)] = (path, parameters)
                    self._groups(counts, fn, frozenset(g for g in a.group_names
                                                       if not (is_symbolic(g) and _kind(g[1:], fn) == "parameter")), where)
                else:
                    self._groups(counts, fn, a.group_names if a.groups is not None else None, where)
            consumers: dict[int, list[str]] = defaultdict(list)
            for c in fn.consumptions:
                consumers[id(c.call)] += c.group_names
            for groups in consumers.values():
                counts.consumers += 1
                counts.consumers_resolved += bool(groups) and not any(is_symbolic(g) for g in groups)
            for c in {id(c.call): c for c in fn.consumptions}.values():
                self._groups(counts, fn, frozenset(c.group_names), f"{path}:{c.call.span.line}")
            for call, kind in fn.lost:
                counts.add_unknown(LOST + kind, f"{path}:{call.span.line}")

    def finish(self) -> None:
        """A group parameter is resolved where a caller passes a known group, else unknown."""
        for (path, line), (file, parameters) in sorted(self._parameter_sites.items()):
            counts = self.files[file]
            for _ in range(parameters):
                if (path, line) in self._passed:
                    counts.groups_resolved += 1
                else:
                    counts.add_unknown("parameter", f"{path}:{line}")
        self._parameter_sites.clear()

    @staticmethod
    def _groups(counts: FileCoverage, fn: FunctionFacts, groups: frozenset[str] | None, where: str) -> None:
        if groups is None:
            counts.add_unknown(NOT_TRACED, where)
            return
        for group in groups:
            if is_symbolic(group):
                counts.add_unknown(_kind(group[1:], fn), where)
            else:
                counts.groups_resolved += 1

    def total(self) -> FileCoverage:
        out = FileCoverage()
        for path in sorted(self.files):
            counts = self.files[path]
            out.binding_sites += counts.binding_sites
            out.consumers += counts.consumers
            out.consumers_resolved += counts.consumers_resolved
            out.groups_resolved += counts.groups_resolved
            for kind, n in counts.unknown.items():
                out.unknown[kind] += n
                out.examples.setdefault(kind, counts.examples[kind])
        return out


@dataclass(frozen=True)
class Unknowns:
    """What `coverage` counts as left unknown in one file, as plain data a check keeps (and
    caches) with its findings: the unknown group references no other file can resolve, and the
    helper sites whose group parameter a caller in another file may pass a known group to."""

    fixed: int = 0
    memory_lost: int = 0  # collectives given a buffer or group the analysis lost, after memory was bound
    parameter_sites: tuple[tuple[str, int, int], ...] = ()  # (path, line, group parameters there)
    passed: frozenset[tuple[str, int]] = frozenset()  # the helper sites this file's callers pass a known group to


NOTHING_UNKNOWN = Unknowns()  # one object for every file without an unknown, so a cache holds it once


def file_unknowns(ctx: FileContext) -> Unknowns:
    """One file's `Unknowns`, counted as `Coverage.observe` counts them."""
    one = Coverage()
    one.observe(ctx)
    counts = one.files[ctx.source.display]
    found = Unknowns(
        counts.groups_unknown,
        counts.memory_lost,
        tuple(sorted((os.path.normpath(path), line, n) for (path, line), (_, n) in one._parameter_sites.items())),
        frozenset((os.path.normpath(path), line) for path, line in one._passed),
    )
    return NOTHING_UNKNOWN if found == NOTHING_UNKNOWN else found


def unknown_total(files: Iterable[Unknowns]) -> int:
    """How many group references `coverage` reports as left unknown over these files: a helper
    site's group parameter is resolved where any of them passes it a known group (see `finish`)."""
    files = list(files)
    passed = frozenset().union(*(u.passed for u in files))
    return sum(u.fixed + sum(n for path, line, n in u.parameter_sites if (path, line) not in passed) for u in files)


def memory_total(files: Iterable[Unknowns]) -> int:
    """How many collectives these files give a value the analysis lost after binding memory."""
    return sum(u.memory_lost for u in files)


def _origin(bound_at: str) -> tuple[str, int]:
    where, _, line = bound_at.rpartition(":")
    return where, int(line) if line.isdigit() else 0


def _kind(expression: str, fn: FunctionFacts) -> str:
    """Which construct held a group the analysis knows only by its expression."""
    params = {p.name.lstrip("*") for p in fn.node.params} if fn.node is not None else set()
    if expression in params:
        return "parameter"
    if expression.startswith("self."):
        return "self"
    if "(" in expression:
        return "call"
    if "[" in expression:
        return "subscript"
    if "." in expression:
        return "attribute"
    return "name"


def understood_nothing(total: FileCoverage, files_using_api: int, profiles: tuple[str, ...]) -> str | None:
    """Why the run found nothing to follow, when it found nothing."""
    if total.binding_sites:
        return None
    if not files_using_api:
        return f"no checked file calls a group-bound API of the profiles ({', '.join(profiles)})"
    return "the checked files name the profiles' APIs, but no call there binds memory to a group"


def render_json(coverage: Coverage, reason: str | None, verbose: bool) -> str:
    total = coverage.total()
    document: dict[str, object] = {
        "files": len(coverage.files),
        **_counts(total),
        "understood_nothing": reason,
    }
    if verbose:
        document["per_file"] = {path: _counts(counts) for path, counts in sorted(coverage.files.items())}
    return json.dumps(document, indent=2) + "\n"


def _counts(c: FileCoverage) -> dict[str, object]:
    return {
        "binding_sites": c.binding_sites,
        "consumers": c.consumers,
        "consumers_resolved": c.consumers_resolved,
        "groups_resolved": c.groups_resolved,
        "groups_unknown": c.groups_unknown,
        "memory_lost": c.memory_lost,
        "unknown": {kind: {"count": n, "example": c.examples[kind]} for kind, n in sorted(c.unknown.items())},
    }


def render_text(coverage: Coverage, reason: str | None, verbose: bool) -> str:
    total = coverage.total()
    files = len(coverage.files)
    lines = [f"{files} file{'s' if files != 1 else ''}: {total.binding_sites} binding sites, "
             f"{total.consumers_resolved} of {total.consumers} consumers on known groups, "
             f"{total.groups_resolved} group references resolved, {total.groups_unknown} left unknown"
             + (f", {total.memory_lost} collective{'s' if total.memory_lost != 1 else ''} given a buffer or group the analysis lost"
                if total.memory_lost else "")]
    lines += _unknown_lines(total, "  ")
    if reason is not None:
        lines.append(f"Nothing was understood: {reason}.")
    if verbose:
        for path, counts in sorted(coverage.files.items()):
            if counts.binding_sites or counts.consumers or counts.unknown:
                lines.append(f"{path}: {counts.binding_sites} binding sites, {counts.consumers_resolved} of "
                             f"{counts.consumers} consumers on known groups, {counts.groups_unknown} unknown")
                lines += _unknown_lines(counts, "    ")
    return "".join(line + "\n" for line in lines)


def _unknown_lines(counts: FileCoverage, indent: str) -> list[str]:
    return [f"{indent}{n} unknown: {UNKNOWN_KINDS[kind]} (e.g. {counts.examples[kind]})"
            for kind, n in counts.unknown.most_common()]
