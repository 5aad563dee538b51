"""Summaries: what each function of the scanned code does with groups, derived from its body.

Before the rules run, every function that can matter is indexed (CPython's parser, lowered
to the same IR, run through the same dataflow) and summarised as a `Behaviour`: the groups
it returns, the memory it returns and the group that memory is bound to (a hidden one, or
the caller's through a parameter), the contexts it builds, the flags it computes, and the
groups each parameter is consumed on, each under the conditions (on sizes, flags, its own
parameters) of the path where it happens. Methods are summarised too: `self.m()`,
`cls.m()` and `super().m()` resolve through the class and its bases. Summaries compose: a
function that passes a parameter to a summarised helper inherits the helper's behaviour, to
a fixpoint (bounded, so recursion terminates). A definition in the scanned code overrides
the profile's entry of the same name, so an old release is checked against its own helpers.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from commgroup_lint.analysis import behaviour as b
from commgroup_lint.analysis import ir
from commgroup_lint.analysis.api import Api, binds_memory
from commgroup_lint.analysis.conditions import PARAM, SIZE, kind, relation_key
from commgroup_lint.analysis.facts import (
    Allocation,
    BufferFact,
    CallableFact,
    CondFact,
    ConstFact,
    ContextFact,
    Fact,
    FunctionFacts,
    GroupFact,
    ObjectFact,
    ParamFact,
    PathFact,
    SelfFieldFact,
    SizeFact,
    TupleFact,
    is_symbolic,
    place_key,
)
from commgroup_lint.analysis.flow import PORTABLE, FunctionFlow, Scope, flatten, guarded_groups, key_attribute, scoped
from commgroup_lint.analysis.module import ClassInfo, StepMemo, analyze_module, class_attributes, module_classes
from commgroup_lint.analysis.names import ImportTable, _package_prefix, collect_imports, module_name_for
from commgroup_lint.analysis.recording import Lookups, Recorder, merged
from commgroup_lint.analysis.verdict import mismatches
from commgroup_lint.model import Confidence
from commgroup_lint.parsing import ParseFailure, lower

MAX_ROUNDS = 8  # summaries of helpers calling helpers settle in a few rounds (chains of 4 or 5 on SGLang); recursion is cut here
MAX_HOPS = 4  # how far indexing follows calls from the files that allocate


@dataclass(frozen=True)
class IndexedModule:
    display: str
    imports: ImportTable
    module: ir.Module
    text: str  # the text the IR was made from


@dataclass(frozen=True)
class FunctionEntry:
    """What the index keeps of one function's facts (small, cached between runs)."""

    qualname: str
    params: tuple[str, ...] | None  # None: the module's top level (no definition)
    summary: b.Behaviour
    wanted: frozenset[str]
    passes_params_to: frozenset[str]
    by_name: bool = False  # a module-level function (or static/class method): callable from other files by name


@dataclass
class ModuleAnalysis:
    """One module's dataflow under the `Api` answers in `lookups`; valid while they hold."""

    entries: tuple[FunctionEntry, ...]
    lookups: Lookups
    facts: list[FunctionFacts] | None = None  # kept within a run, for the check; not cached
    classes: tuple[tuple[str, ClassInfo], ...] = ()
    misuses: tuple[tuple[str, str], ...] = ()  # (where a helper fixes the group, the caller consuming it elsewhere)
    module: str = ""  # its module name, and the modules it imports (the order the index analyses in)
    imports: tuple[str, ...] = ()
    exports: tuple[tuple[str, str], ...] = ()  # (`module.name`, what it imports under that name)


class Previous(NamedTuple):
    """What the last run's index knew of a file (from the cache)."""

    hop: int | None  # the hop of the index that added it; None: not indexed
    analyses: tuple[ModuleAnalysis, ...] = ()  # one per state it was analysed in; none where its content changed
    final: int = -1  # which of them was in use when that run ended


@dataclass(frozen=True)
class ModuleSource:
    path: Path
    display: str
    text: str
    digest: bytes = b""  # content hash, for the cache


def call_index(fn: ir.FunctionDef, is_method: bool, position: int) -> int | None:
    """Where the definition's parameter at `position` sits among a call's positional arguments."""
    index = position - (1 if is_method else 0)
    star = next((i for i, p in enumerate(fn.params) if p.name.startswith("*")), len(fn.params))
    return index if 0 <= index and position < star else None


def _is_method(facts: FunctionFacts) -> bool:
    fn = facts.node
    return facts.class_qualname is not None and fn is not None and not any(
        isinstance(d, ir.Name) and d.id == "staticmethod" for d in fn.decorators
    )


def summarise(facts: FunctionFacts, display: str, api: Api, imports: ImportTable) -> b.Behaviour:
    """The function's behaviour as its callers see it (empty when it does nothing with groups)."""
    fn = facts.node
    if fn is None:
        return b.Behaviour()
    method = _is_method(facts)

    def arg(position: int) -> b.ArgRef | None:
        if position >= len(fn.params) or fn.params[position].name.startswith("*"):
            return None
        return b.ArgRef(fn.params[position].name, call_index(fn, method, position))

    def star_element(f: ParamFact) -> b.ArgRef | None:
        """`args[k]` of a `*args` parameter: the call's positional argument k places after it."""
        offset = f.name.rpartition("[")[2].rstrip("]")
        start = f.index - (1 if method else 0)
        return b.ArgRef(f.name, start + int(offset)) if offset.isdigit() and start >= 0 else None

    def binding(groups: tuple | None, params: frozenset[int]) -> b.Binding | None:
        if len(params) == 1:
            position = next(iter(params))
            ref = arg(position)
            if ref is None:
                return None
            # a default that is a group binds the memory to it when the caller omits the argument,
            # as does the group the body chooses when it is None (`if group is None: group = tp`);
            # any other default (`group=None`, kept) leaves the caller's call without its group (CGL001)
            default = _default_groups(fn.params[position], api, imports) or _chosen_when_none(groups, ref)
            return b.Binding(param=ref, default=default, required=not default)
        if groups is not None and not params:
            return b.Binding(groups=tuple((g, scoped(guard, PORTABLE)) for g, guard in groups))
        return None

    def returned(f: Fact, in_tuple: bool = False) -> b.Returned | None:
        """What a caller needs of a returned fact: what can carry a group or memory, a flag
        relating world sizes, and (in a tuple, beside such items) a constant that decides a branch."""
        if isinstance(f, GroupFact):
            return b.Groups(((f.group, scoped(f.guard, PORTABLE)),))
        if isinstance(f, ParamFact):
            ref = arg(f.index) if not f.name.endswith("]") else star_element(f)
            return b.Argument(ref) if ref is not None else None
        if isinstance(f, SizeFact):
            return b.Size(f.quantity)
        if isinstance(f, (BufferFact, ContextFact)):
            a = f.allocation
            found = binding(a.groups, a.group_params)
            if found is None:
                return None
            here = f"{display}:{a.call.span.line}"
            if isinstance(f, ContextFact):
                return b.Context(found, origin=a.bound_at or here)
            return b.Memory(found, a.how, a.bound_at or here, scoped(a.cond, PORTABLE), *_taken_at(a, here))
        if isinstance(f, CondFact):
            when_true, when_false = scoped(f.when_true, PORTABLE), scoped(f.when_false, PORTABLE)
            if any(kind(key) == SIZE for key, _ in when_true | when_false):
                return b.Flag(when_true, when_false)
            return None
        if isinstance(f, ObjectFact):
            fields = tuple((name, alternatives(value)) for name, value in f.fields)
            return b.Instance(f.cls, tuple((name, value) for name, value in fields if value))
        if isinstance(f, ConstFact):
            return b.Constant(f.value) if in_tuple else None
        if isinstance(f, SelfFieldFact):
            return b.SelfAttribute(f.attr) if method else None
        if isinstance(f, TupleFact):
            items = tuple(tuple(sorted({r for g in item if (r := returned(g, True)) is not None}, key=canonical))
                          for item in f.items)
            return b.Items(items) if any(r for item in items for r in item if not isinstance(r, b.Constant)) else None
        if isinstance(f, CallableFact):
            return b.Partial(f.path, tuple((keyword, alternatives(value)) for keyword, value in f.args))
        if isinstance(f, PathFact) and f.named and api.call(f.path) is not None:
            return b.Partial(f.path, ())  # a known API returned to be called later
        return None

    def alternatives(value: frozenset) -> tuple[b.Returned, ...]:
        """A value's possibilities in a fixed order (a set's order varies: equal summaries must
        compare equal, or the fixpoint never ends)."""
        return tuple(sorted({r for g in value if (r := returned(g)) is not None}, key=canonical))

    returns = _merge_groups([r for f in facts.returns if (r := returned(f)) is not None])  # ordered there
    consumes: list[b.Consume] = []
    for position, uses in sorted(facts.param_uses.items()):
        ref = arg(position)
        if ref is None:
            continue
        for use in uses:
            fixed = tuple(sorted({(g.group, scoped(g.guard, PORTABLE)) for g in use.groups if isinstance(g, GroupFact)},
                                 key=canonical))
            if fixed:
                consumes.append(b.Consume(ref, fixed, cond=use.cond, name=use.name))
            for g in use.groups:
                if isinstance(g, ParamFact) and (group_ref := arg(g.index)) is not None:
                    consumes.append(b.Consume(ref, group=group_ref, cond=use.cond, name=use.name))
    returned_ids = {id(f.allocation) for r in facts.returns for f in flatten(frozenset({r}))
                    if isinstance(f, (BufferFact, ContextFact))}
    keeps = tuple(dict.fromkeys(
        b.Memory(found, a.how, a.bound_at or f"{display}:{a.call.span.line}", scoped(a.cond, PORTABLE),
                 *_taken_at(a, f"{display}:{a.call.span.line}"))
        for a in facts.allocations
        if a.group_params and id(a) not in returned_ids and (found := binding(a.groups, a.group_params)) is not None
    ))
    calls_params: set[b.CallsParam] = set()
    for call in facts.param_calls:
        args = tuple(map(alternatives, call.args))
        if isinstance(call.callee, str):  # a record's field: the callable it holds may make memory itself
            calls_params.add(b.CallsParam(None, args, call.cond, field=call.callee))
        elif (ref := arg(call.callee)) is not None and any(isinstance(r, (b.Memory, b.Argument))
                                                           for item in args for r in item):
            calls_params.add(b.CallsParam(ref, args, call.cond))  # it hands the callable memory or its arguments
    stores = tuple((attr, stored) for key, value in sorted(facts.stores.items())
                   if fn.name == "__init__" and method and (attr := key_attribute(key)) is not None
                   and (stored := alternatives(value)))
    behaviour = b.Behaviour(tuple(returns), tuple(sorted(set(consumes), key=canonical)), keeps=keeps,
                            calls_params=tuple(sorted(calls_params, key=canonical)), stores=stores)
    if behaviour.empty:
        return behaviour
    return replace(behaviour, origin=f"{display}:{fn.span.line}")


def canonical(x: object) -> tuple:
    """A sort key that is the same in every process: sets sorted by their members' keys, not
    iterated (their order follows string hashes, which vary between runs; a summary's
    alternatives in another order would not equal the cached one, and a warm run would redo
    the work)."""
    if isinstance(x, (frozenset, set)):
        return ("{", tuple(sorted(map(canonical, x))))
    if isinstance(x, (tuple, list)):
        return ("(", tuple(map(canonical, x)))
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__, tuple(canonical(getattr(x, f.name)) for f in dataclasses.fields(x)))
    return ("=", type(x).__name__, repr(x))


def _merge_groups(items: list[b.Returned]) -> list[b.Returned]:
    """All the groups a function may return as one `Groups` (first), then the rest in order."""
    groups = [g for item in items if isinstance(item, b.Groups) for g in item.groups]
    rest = [item for item in items if not isinstance(item, b.Groups)]
    merged: list[b.Returned] = [b.Groups(tuple(sorted(set(groups), key=lambda g: (g[0], sorted(g[1])))))] if groups else []
    return merged + sorted(set(rest), key=_returned_order)  # alternatives, in an order every process agrees on


def _returned_order(r: b.Returned) -> tuple:
    """Memory in the order of the calls that took it (the first is the one a finding names),
    then the rest; ties by their canonical key."""
    where = r.via or r.origin if isinstance(r, b.Memory) else None
    if where:
        path, _, line = where.rpartition(":")
        return (0, path, int(line) if line.isdigit() else 0, canonical(r))
    return (1, (), 0, canonical(r))


def _taken_at(a: Allocation, here: str) -> tuple[str | None, bool]:
    """Where memory a deeper helper binds was taken from it, and whether that call chose the
    group (passed the helper a group of its own: not its caller's, none fixed inside). The
    call that chose the group wins, however deep; else this call, the one a reader reaches
    first from a finding in a caller."""
    if not a.bound_at:
        return None, False
    if a.via and a.chosen:
        return a.via, True
    return here, not (a.hidden or a.group_params)


def _exports(imports: ImportTable) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((f"{imports.module}.{local}", target) for local, target in imports.aliases().items()))


def _chosen_when_none(groups: tuple | None, ref: b.ArgRef) -> tuple:
    """The groups the body binds where the parameter is None (its literal `$i:name is None`)."""
    if groups is None or ref.index is None:
        return ()
    none = (relation_key(f"{PARAM}{ref.index}:{ref.param.lstrip('*')}", "is", "None")[0], True)
    return tuple((g, frozenset()) for g, guard in groups if none in guard and not is_symbolic(g))


def _default_groups(param: ir.Param, api: Api, imports: ImportTable) -> tuple:
    if param.default is None:
        return ()
    flow = FunctionFlow(api, Scope(imports), FunctionFacts("<default>", None, None))
    return guarded_groups(flow.eval(param.default)) or ()


class SummaryIndex:
    """Builds summaries over the scanned sources and installs them into an `Api`.

    Each round of the fixpoint re-analyses only the modules whose recorded `Api` lookups
    changed answer (their callees' summaries changed); the others' results are reused, so
    a round costs what changed, and the result is the same as re-analysing everything.
    `memo` (from the cache) says what the last run knew of a file (`Previous`): the index
    starts from where that run ended (see `_resume`).
    """

    def __init__(self, api: Api, recorder: Recorder | None = None,
                 memo: Callable[[ModuleSource], Previous | None] | None = None,
                 analyze: Callable[..., list[FunctionFacts]] | None = None, frontend: str = "ast",
                 words: set[str] | None = None) -> None:
        self.api = api
        self.words = words or set()  # what the rules name besides allocators (the collectives): indexed first too
        self.frontend = frontend
        self._analyze = analyze or analyze_module
        self._memos: dict[str, tuple[IndexedModule, StepMemo]] = {}  # each module's last analysis, function by function
        self.hop_of: dict[str, int] = {}  # the hop that added each module (this run's, or the last run's when resumed)
        self._resumed = False  # whether the index started where the last run's ended
        self.recorder = recorder or Recorder(api)
        self.memo = memo
        self.summaries: dict[str, b.Behaviour] = {}
        self.modules: dict[str, IndexedModule | None] = {}  # by display path; None: IR not built (cached analysis)
        self.sources: dict[str, ModuleSource] = {}
        self.analyses: dict[str, ModuleAnalysis] = {}
        # every analysis of a module this run (and the cached ones): the fixpoint goes through
        # the same intermediate states in every run, so a warm run finds each of them here
        self.history: dict[str, list[ModuleAnalysis]] = {}
        self.parse_failed: set[str] = set()
        self.failed: set[str] = set()  # the analysis raised (a bug, reported by the check)
        self._profile_names = set(api.entries.names())
        self._installed: tuple | None = None  # what `_install` did last
        self._misuses: dict[str, tuple[str, ...]] = {}
        self._definitions: dict[str, tuple[str, ...]] = {}

    def allocator_words(self) -> set[str]:
        return self.api.allocation_words() | self.words

    def build(self, sources: Iterable[tuple[Path, str, str]] | Iterable[ModuleSource],
              mentions: Callable[[Iterable[str], set[str]], set[str]] | None = None, resume: bool = False) -> None:
        """Index on demand: first the files that name an allocator (every finding and every
        allocator definition is there), then the modules defining the helpers those files
        call with a buffer or use as a group, and so on, a few hops deep.

        `sources` are (path, display, text) or `ModuleSource`s; files that do not parse are
        skipped here (the check reports them when they matter). `mentions(displays, words)`
        answers which of the files name one of `words` (see `engine.Mentions`). `resume`: no
        file changed since the run the cache (`memo`) describes, so start where it ended.
        """
        pending: dict[str, ModuleSource] = {}
        for s in sources:
            source = s if isinstance(s, ModuleSource) else ModuleSource(*s)
            pending[source.display] = source
        if mentions is None:
            texts = {d: s.text for d, s in pending.items()}
            mentions = lambda displays, words: _mentioning({d: (None, texts[d]) for d in displays}, words)  # noqa: E731
        modules: _ModuleFinder | None = None
        words: set[str] = set()
        hops = self._resume(pending) if resume else 0
        settled = self._resumed  # a resume ends settled
        while hops < MAX_HOPS:
            new_words = self.allocator_words() - words
            words |= new_words
            chosen = set(mentions(pending, new_words)) if new_words else set()
            if self.summaries or self.modules:
                if modules is None:
                    modules = _ModuleFinder({display: s.path for display, s in pending.items()}, self.api.namespaces)
                chosen |= {d for d in _defining(self._wanted(), modules) if d in pending}
            if not chosen:
                if settled:
                    break
                # what the new modules' summaries change in the others can want more modules
                self._settle(rounds=MAX_ROUNDS)
                settled = True
                continue
            for display in sorted(chosen):  # sorted: the order decides between duplicate definitions
                self._add(pending.pop(display), hops)
            hops += 1
            self._settle(rounds=1, fresh_only=True)  # enough to see what the new ones want
            settled = False
        if not settled:
            self._settle(rounds=MAX_ROUNDS)

    def _resume(self, pending: dict[str, ModuleSource]) -> int:
        """Start where the last run ended, for a caller that knows no file changed, came or went
        since (`build(resume=True)`): the modules it indexed, each with the analysis it ended
        with, installed and settled (nothing is analysed), and its hops spent. Where a file
        changed, its words and wants can choose other modules than the last run's, whose
        choices depended on every file, so the index is built from the start then (with the
        cache's analyses). Returns the hop to go on from."""
        if self.memo is None:
            return 0
        previous = {d: p for d, s in pending.items() if (p := self.memo(s)) is not None and p.hop is not None}
        last_hop = max((p.hop for p in previous.values() if p.hop is not None), default=-1)
        if not previous:
            return 0
        for display in sorted(previous):
            self._add(pending.pop(display), previous[display].hop)  # type: ignore[arg-type]
        for display, known in previous.items():
            history = self.history.get(display)
            if history and 0 <= known.final < len(history):
                self.analyses[display] = history[known.final]
                self._install_classes(history[known.final].classes)
        self._resumed = True
        self._install_all()
        self._install_misuses()
        self._settle(rounds=MAX_ROUNDS)
        return last_hop + 1

    def _add(self, source: ModuleSource, hop: int) -> None:
        self.hop_of[source.display] = hop
        previous = self.memo(source) if self.memo is not None else None
        cached = previous.analyses if previous is not None else ()
        if cached:
            if not cached[0].entries and not cached[0].lookups:  # the cache says it does not parse
                self.parse_failed.add(source.display)
                return
            self.sources[source.display] = source
            self.modules[source.display] = None
            self.history[source.display] = list(cached)  # each checked against the Api before use
            self._install_classes(cached[0].classes)
            self._install_exports(cached[0].exports)
            return
        try:
            module = index_module(source.path, source.display, source.text, self.frontend, self.api.namespaces)
        except ParseFailure:
            self.parse_failed.add(source.display)  # reported by the check, if the file can hold a finding
            return
        self.sources[source.display] = source
        self.modules[source.display] = module
        self._install_classes(tuple(module_classes(module.module, module.imports).items()))
        self._install_exports(_exports(module.imports))

    def _install_exports(self, exports: tuple[tuple[str, str], ...]) -> None:
        """What a module imports can be imported from it: a package's `__init__` re-exports."""
        new = {name: target for name, target in exports if self.api.entries.alias(name) != target}
        if new:
            self.api.entries.add_aliases(new)
            self.recorder.changed()

    def _install_classes(self, classes: tuple[tuple[str, ClassInfo], ...]) -> None:
        """The classes a module defines: `self.m()` in a subclass elsewhere resolves through them."""
        new = {name: info for name, info in classes if self.api.classes.get(name) != info}
        if new:
            self.api.classes.override(new)
            self.recorder.changed()

    def module(self, display: str) -> IndexedModule:
        """The IR of an indexed module (built now if it came from the cache)."""
        module = self.modules[display]
        if module is None:
            s = self.sources[display]
            module = self.modules[display] = index_module(s.path, s.display, s.text, self.frontend, self.api.namespaces)
        return module

    def _wanted(self) -> set[str]:
        """Helpers whose summaries could change a finding: those given a bound buffer or used
        as a group, and, transitively, the helpers they pass their own parameters to."""
        analysed = [a for d in self.modules if (a := self.analyses.get(d)) is not None]
        entries = [e for a in analysed for e in a.entries]
        wanted = {name for e in entries for name in e.wanted}
        passes: dict[str, set[str]] = {}
        for e in entries:
            if e.passes_params_to:
                passes[e.qualname] = set(e.passes_params_to)  # the last module's wins, as before
        frontier = set(wanted)
        while frontier:
            frontier = {callee for name in frontier for callee in passes.get(name, ())} - wanted
            wanted |= frontier
        # a name a module re-exports is defined where it imports it from
        frontier = set(wanted)
        while frontier:
            frontier = {target for name in frontier if (target := self.api.entries.alias(name))} - wanted
            wanted |= frontier
        # the bases of the classes indexed so far: `self.x` a base's `__init__` sets, and the
        # methods a subclass inherits, are read from them
        bases = {base for a in analysed for _, (names, *_) in a.classes for base in names}
        return wanted | {base for base in bases if self.api.classes.get(base) is None}

    def current(self, display: str) -> ModuleAnalysis | None:
        """The module's analysis if it is valid under the `Api` as it is now."""
        analysis = self.analyses.get(display)
        if analysis is not None and self.recorder.valid(analysis.lookups):
            return analysis
        return None

    def analyse(self, display: str) -> ModuleAnalysis:
        """The module's analysis under the `Api` as it is now: the functions of its last
        analysis whose lookups still hold are kept (with their summaries), the others analysed again."""
        m = self.module(display)
        previous = self._memos.get(display)
        memo = StepMemo(self.recorder, previous[1] if previous is not None and previous[0] is m else None)
        with self.recorder.recording() as outside:  # what no single function asked (a class's inherited attributes)
            facts = self._analyze(m.module, m.imports, self.api, m.display, memo)
        kept = {id(f) for f in facts}  # not the passes that only learn what a method stores on `self`
        found = []
        for step in memo.steps:
            if id(step.facts) in kept:
                if step.extra is None:
                    with self.recorder.recording(step.lookups):
                        step.extra = self._summarised(step.facts, m)
                found.append(step.extra)
        self._memos[display] = (m, memo)
        attributes = class_attributes(facts)
        classes = tuple((name, (bases, methods, attributes.get(name, ()), fields, properties))
                        for name, (bases, methods, _, fields, properties) in module_classes(m.module, m.imports).items())
        imported = tuple(sorted({q.rpartition(".")[0] for q in m.imports.aliases().values()} | set(m.imports.aliases().values())))
        return ModuleAnalysis(tuple(entry for entry, _ in found), merged(outside, *(step.lookups for step in memo.steps)),
                              facts, classes, tuple(sorted({x for _, misuses in found for x in misuses})),
                              m.imports.module, imported, _exports(m.imports))

    def _summarised(self, facts: FunctionFacts, m: IndexedModule) -> tuple[FunctionEntry, tuple[tuple[str, str], ...]]:
        """A function's summary, and the hidden-group helpers whose memory it misuses."""
        entry = FunctionEntry(
            facts.qualname,
            None if facts.node is None else tuple(p.name for p in facts.node.params),
            summarise(facts, m.display, self.api, m.imports),
            frozenset(facts.wanted), frozenset(facts.passes_params_to), facts.callable_by_name,
        )
        return entry, _misuses([facts], m.display, self.api)

    def _settle(self, rounds: int, fresh_only: bool = False) -> None:
        """Analyse the modules whose analysis is no longer valid (`fresh_only`: only those never
        analysed) and install the summaries, until nothing changes (at most `rounds` rounds).

        Modules are taken callees first (a module after those it imports), and each one's
        summaries are installed as soon as it is analysed, so its callers in the same round
        already see them: most chains of helpers settle in one round instead of one per link.
        """
        for _ in range(rounds):
            moved = False  # whether any module's analysis changed this round
            for display in self._order():
                if fresh_only and display in self.analyses:
                    continue
                if self.current(display) is not None:
                    continue
                moved = True
                history = self.history.setdefault(display, [])
                found_valid = next((a for a in history if self.recorder.valid(a.lookups)), None)
                if found_valid is not None:
                    self.analyses[display] = found_valid
                else:
                    try:
                        self.analyses[display] = self.analyse(display)
                        history.append(self.analyses[display])
                    except Exception:  # noqa: BLE001 - not indexed; the check reports it
                        del self.modules[display], self.sources[display]
                        self.analyses.pop(display, None)
                        self.history.pop(display, None)
                        self.failed.add(display)
                        continue
                self._install_now(self.analyses[display].entries)
                self._install_classes(self.analyses[display].classes)
            if not moved or not self._install_all():  # nothing moved: what is installed still holds
                break
        self._install_misuses()

    def _install_all(self) -> bool:
        """Install what every analysed module says (summaries, signatures, the words naming
        memory-binding helpers); whether the summaries changed."""
        found: dict[str, b.Behaviour] = {}
        definitions: dict[str, tuple[str, ...]] = {}
        words: set[str] = set()
        for display in self.modules:
            analysis = self.analyses.get(display)
            for entry in analysis.entries if analysis is not None else ():
                if entry.params is None:
                    continue
                definitions[entry.qualname] = entry.params
                if not entry.summary.empty:
                    found[entry.qualname] = entry.summary
                    if entry.by_name and binds_memory(entry.summary):
                        words.add(_final(entry.qualname))
                    elif entry.qualname.endswith(_INIT) and entry.summary.keeps:  # `Buffer(group=...)`
                        words.add(_final(entry.qualname[: -len(_INIT)]))
        self.api.helper_words = words
        self._install(found, definitions)
        changed = found != self.summaries
        self.summaries = found
        return changed

    def _order(self) -> list[str]:
        """The indexed modules, each after the indexed modules it imports (cycles broken by
        name), so that callees are analysed before their callers."""
        by_name: dict[str, str] = {}
        imported: dict[str, tuple[str, ...]] = {}
        for display in sorted(self.modules):
            module = self.modules[display]
            known = self.analyses.get(display) or next(iter(self.history.get(display, ())), None)
            if module is not None:
                name = module.imports.module
                deps = tuple(module.imports.aliases().values())
                deps = tuple({*deps, *(d.rpartition(".")[0] for d in deps)})
            elif known is not None:
                name, deps = known.module, known.imports
            else:
                name, deps = display, ()
            by_name[name] = display
            imported[display] = deps
        order: list[str] = []
        placed: set[str] = set()

        def place(display: str, path: tuple[str, ...]) -> None:
            if display in placed or display in path:
                return
            for dep in sorted(imported[display]):
                target = by_name.get(dep)
                if target is not None and target != display:
                    place(target, (*path, display))
            placed.add(display)
            order.append(display)

        for display in sorted(self.modules):
            place(display, ())
        return order

    def _install_now(self, entries: tuple[FunctionEntry, ...]) -> None:
        """A module's summaries, installed at once for the modules analysed after it."""
        new = {e.qualname: b.Entry(call=e.summary) for e in entries
               if e.params is not None and not e.summary.empty and self.api.overridable(e.qualname, e.summary)}
        changed = {name: entry for name, entry in new.items() if self.api.entries.get(name) != entry}
        if changed:
            self.api.entries.override(changed)
            self.recorder.changed()

    def _install_misuses(self) -> None:
        """Which callers consume a hidden-group helper's memory on another group (CGL003's evidence)."""
        found: dict[str, list[str]] = {}
        for display in self.modules:
            analysis = self.analyses.get(display)  # none yet: a changed module a resume has not analysed
            for origin, caller in analysis.misuses if analysis is not None else ():
                found.setdefault(place_key(origin), []).append(caller)
        misuses = {origin: tuple(sorted(set(callers))) for origin, callers in found.items()}
        if misuses != self._misuses:
            for origin in self._misuses.keys() - misuses.keys():
                self.api.misuses.hide(origin)
            self.api.misuses.override(misuses)
            self._misuses = misuses
            self.recorder.changed()

    def _install(self, found: dict[str, b.Behaviour], definitions: dict[str, tuple[str, ...]]) -> None:
        found = {name: summary for name, summary in found.items() if self.api.overridable(name, summary)}
        if definitions != self._definitions:
            self.api.signatures.override(definitions)
            self._definitions = definitions
        self.api.entries.override({name: b.Entry(call=summary) for name, summary in found.items()})
        # An old release defines a profile allocator without a group parameter: at most a
        # hidden-group allocator (installed above), never a call that is missing its group.
        hidden = []
        for name, params in definitions.items():
            if name in found or self.api.is_pinned(name):
                continue
            behaviour = self.api.call(name)
            binding = _binding_of(behaviour)
            if binding is None or binding.param is None:
                continue
            if _final(name) in self._profile_finals and not _takes(params, binding.param.param):
                self.api.entries.hide(name)
                hidden.append(name)
        # The same overrides and hides, in the same order, as the last time leave the `Api` as
        # it was (each sets entries to fixed values): the answers `valid` remembers still hold.
        installed = (list(found.items()), hidden)
        if installed != self._installed:
            self._installed = installed
            self.recorder.changed()

    @property
    def _profile_finals(self) -> set[str]:
        return {_final(n) for n in self._profile_names}


def _misuses(facts: list[FunctionFacts], display: str, api: Api) -> tuple[tuple[str, str], ...]:
    found = {
        (c.allocation.bound_at, f"{display}:{c.call.span.line}")
        for fn in facts for c in fn.consumptions
        if c.allocation.hidden and c.allocation.bound_at
        and any(m.confidence is not Confidence.LOW for m in mismatches(c, api))  # a path known to be taken
    }
    return tuple(sorted(found))


_INIT = ".__init__"


def _binding_of(behaviour: b.Behaviour | None) -> b.Binding | None:
    if behaviour is None:
        return None
    memory, context = behaviour.allocator(), behaviour.context()
    found = memory or context
    return found.binding if found is not None else None


def _takes(params: tuple[str, ...], param: str) -> bool:
    return any(p == param or p.startswith("*") for p in params)


def _final(name: str) -> str:
    return name.partition("(")[0].rpartition(".")[2]


def _mentioning(pending: dict[str, tuple[Path | None, str]], words: set[str]) -> set[str]:
    pattern = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, words), key=len, reverse=True)) + r")\b")
    return {display for display, (_, text) in pending.items() if any(w in text for w in words) and pattern.search(text)}


class _ModuleFinder:
    """Which scanned file is a module: files are grouped by their last name part (a package's
    `__init__.py` by its directory), so only the few candidates get their full module name
    worked out, not every scanned file."""

    def __init__(self, paths: dict[str, Path], namespaces: frozenset[str]) -> None:
        self._paths = paths
        self._namespaces = namespaces
        self._by_last: dict[str, list[str]] | None = None
        self._prefixes: dict[str, tuple[str, ...]] = {}

    def get(self, module: str) -> str | None:
        if self._by_last is None:
            self._by_last = {}
            for display, path in self._paths.items():
                stem = path.stem if path.name != "__init__.py" else path.parent.name
                self._by_last.setdefault(stem, []).append(display)
        found = None
        for display in self._by_last.get(module.rpartition(".")[2], ()):
            if _module_name(self._paths[display], self._prefixes, self._namespaces) == module:
                found = display  # the last one, as a dict built over all files would keep
        return found


def _defining(names: set[str], modules: _ModuleFinder) -> set[str]:
    """The files of the modules that define `names` (`pkg.mod.func`, `pkg.mod.Class.method`)."""
    found = set()
    for name in names:
        parts = name.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            display = modules.get(".".join(parts[:cut]))
            if display is not None:
                found.add(display)
                break
    return found


def _module_name(path: Path, prefixes: dict[str, tuple[str, ...]], namespaces: frozenset[str]) -> str:
    """`module_name_for(path)[0]`, resolving each directory (and finding its package) once
    rather than for every file; plain strings, as this runs for every scanned file."""
    text = os.fspath(path)
    if os.path.islink(text):
        return module_name_for(path, namespaces)[0]
    head, slash, name = text.rpartition("/")
    parent = head or ("/" if slash else ".")
    prefix = prefixes.get(parent)
    if prefix is None:
        prefix = prefixes[parent] = _package_prefix(Path(parent).resolve(), namespaces)
    dot = name.rfind(".")
    stem = name[:dot] if 0 < dot < len(name) - 1 else name  # as `Path.stem`
    parts = [*prefix] if name == "__init__.py" else [*prefix, stem]
    return ".".join(parts) or stem


def index_module(path: Path, display: str, text: str, frontend: str = "ast",
                 namespaces: frozenset[str] = frozenset()) -> IndexedModule:
    """Parse and lower to the IR (see `parsing.lower`); raises `ParseFailure`."""
    module = lower(text, display, frontend)
    name, is_package = module_name_for(path, namespaces)
    return IndexedModule(display, ImportTable(name, is_package, collect_imports(module.body)), module, text)
