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

This module is the index and its fixpoint (`SummaryIndex`); `summarise` reads one function's
facts as its summary, and `indexing` reads files into the index and finds where names are defined.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from commgroup_lint.analysis import behaviour as b
from commgroup_lint.analysis.api import Api, binds_memory
from commgroup_lint.analysis.facts import FunctionFacts, place_key
from commgroup_lint.analysis.indexing import IndexedModule, ModuleFinder, defining, index_module, mentioning
from commgroup_lint.analysis.module import ClassInfo, StepMemo, analyze_module, class_attributes, module_classes
from commgroup_lint.analysis.names import ImportTable
from commgroup_lint.analysis.recording import Lookups, Recorder, merged
from commgroup_lint.analysis.summarise import summarise
from commgroup_lint.analysis.verdict import mismatches
from commgroup_lint.model import Confidence
from commgroup_lint.parsing import ParseFailure

MAX_ROUNDS = 8  # summaries of helpers calling helpers settle in a few rounds (chains of 4 or 5 on SGLang); recursion is cut here
MAX_HOPS = 4  # how far indexing follows calls from the files that allocate
MAX_REEXPORTS = 8  # how many re-exports a wanted name is followed through


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
        self._scanned: set[str] = set()  # the entries installed from summaries (see `Api.entries.withdraw`)
        self._package_exports: dict[str, str] = {}  # what the packages read since `_add_reexported` last looked

    def allocator_words(self) -> set[str]:
        return self.api.allocation_words() | self.words

    def build(self, sources: Iterable[tuple[Path, str, str]] | Iterable[ModuleSource],
              mentions: Callable[[Iterable[str], set[str]], set[str]] | None = None, resume: bool = False) -> None:
        """Index on demand: first the files that name an allocator (every finding and every
        allocator definition is there), then the modules defining the helpers those files
        call with a buffer or use as a group, and so on, a few hops deep.

        `sources` are (path, display, text) or `ModuleSource`s; files that do not parse are
        skipped here (the check reports them when they matter). `mentions(displays, words)`
        answers which of the files name one of `words` (see `mentions.Mentions`). `resume`: no
        file changed since the run the cache (`memo`) describes, so start where it ended.
        """
        pending: dict[str, ModuleSource] = {}
        for s in sources:
            source = s if isinstance(s, ModuleSource) else ModuleSource(*s)
            pending[source.display] = source
        if mentions is None:
            texts = {d: s.text for d, s in pending.items()}
            mentions = lambda displays, words: mentioning({d: (None, texts[d]) for d in displays}, words)  # noqa: E731
        self._forget_absent_methods(pending, mentions)
        modules: ModuleFinder | None = None
        words: set[str] = set()
        hops = self._resume(pending) if resume else 0
        settled = self._resumed  # a resume ends settled
        while hops < MAX_HOPS:
            new_words = self.allocator_words() - words
            words |= new_words
            chosen = set(mentions(pending, new_words)) if new_words else set()
            wanted: set[str] = set()
            if self.summaries or self.modules:
                if modules is None:
                    modules = ModuleFinder({display: s.path for display, s in pending.items()}, self.api.namespaces)
                wanted = self._wanted()
                chosen |= {d for d in defining(wanted, modules) if d in pending}
            if not chosen:
                if settled:
                    break
                # what the new modules' summaries change in the others can want more modules
                self._settle(rounds=MAX_ROUNDS)
                settled = True
                continue
            for display in sorted(chosen):  # sorted: the order decides between duplicate definitions
                self._add(pending.pop(display), hops)
            if modules is not None:
                self._add_reexported(wanted, modules, pending, hops)
            hops += 1
            self._settle(rounds=1, fresh_only=True)  # enough to see what the new ones want
            settled = False
        if not settled:
            self._settle(rounds=MAX_ROUNDS)

    def _forget_absent_methods(self, pending: dict[str, ModuleSource],
                               mentions: Callable[[Iterable[str], set[str]], set[str]]) -> None:
        """An engine's methods that bind memory (`ub.get_buffer`) are no gate words in a run
        where no file names any way to make its objects: SGLang says `get_buffer` in ten files
        about its own caches, and never names TransformerEngine's `get_ub`."""
        owners = self.api.method_word_owners()
        if not owners:
            return
        mentions(pending, set().union(*(names for _, names in owners)))  # one search for all
        named = [(words, bool(mentions(pending, set(names)))) for words, names in owners]
        present = {word for words, seen in named if seen for word in words}
        self.api.forget_method_words({word for words, seen in named if not seen for word in words} - present)

    def _add_reexported(self, wanted: set[str], modules: ModuleFinder, pending: dict[str, ModuleSource],
                        hop: int) -> None:
        """The modules where the packages just read say a wanted name is defined (`from .impl
        import relay` in a package's `__init__`), read in the same hop: a re-export is no call."""
        for _ in range(MAX_REEXPORTS):
            if not self._package_exports:
                return
            exports, self._package_exports = self._package_exports, {}
            targets = {target for name in wanted if (target := self._exported(name, exports.get))} - wanted
            found = {d for d in defining(targets, modules) if d in pending}
            if not found:
                return
            for display in sorted(found):
                self._add(pending.pop(display), hop)
            wanted = wanted | targets

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
            self._install_exports(cached[0].exports, source)
            return
        try:
            module = index_module(source.path, source.display, source.text, self.frontend, self.api.namespaces,
                                  self._star_names)
        except ParseFailure:
            self.parse_failed.add(source.display)  # reported by the check, if the file can hold a finding
            return
        self.sources[source.display] = source
        self.modules[source.display] = module
        self._install_classes(tuple(module_classes(module.module, module.imports).items()))
        self._install_exports(_exports(module.imports), source)

    def _star_names(self, module: str) -> tuple[tuple[str, str], ...] | None:
        return self.api.stars.get(module)  # through the `Api`'s table: the lookup is recorded

    def _install_exports(self, exports: tuple[tuple[str, str], ...], source: ModuleSource) -> None:
        """What a module imports can be imported from it: a package's `__init__` re-exports."""
        if source.path.name == "__init__.py":
            self._package_exports.update(exports)
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
            module = self.modules[display] = index_module(s.path, s.display, s.text, self.frontend, self.api.namespaces,
                                                                   self._star_names)
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
        # a name a module re-exports is defined where it imports it from (a few re-exports
        # deep: `pkg.a` imported as `pkg.a.b`'s `a` names itself again and again)
        frontier = set(wanted)
        for _ in range(MAX_REEXPORTS):
            frontier = {target for name in frontier if (target := self._exported(name))} - wanted
            wanted |= frontier
        # the bases of the classes indexed so far: `self.x` a base's `__init__` sets, and the
        # methods a subclass inherits, are read from them
        bases = {base for a in analysed for _, (names, *_) in a.classes for base in names}
        return wanted | {base for base in bases if self.api.classes.get(base) is None}

    def _exported(self, name: str, alias: Callable[[str], str | None] | None = None) -> str | None:
        """Where a wanted name is defined when a module re-exports it (`alias`: of those
        modules only) or what it is part of: `pkg.relay().comm` is `relay`'s result, `pkg.Cls.m`
        a method of the class `pkg.Cls` is."""
        head, call, rest = name.partition("(")
        parts = head.split(".")
        for cut in range(len(parts), 1, -1):
            target = (alias or self.api.entries.alias)(".".join(parts[:cut]))
            if target is not None:
                return ".".join((target, *parts[cut:])) + call + rest
        return None

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
                        for name, (bases, methods, _, fields, properties) in memo.classes(m.module, m.imports).items())
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
            if not moved:  # every analysis holds under what is installed: a fixpoint, which a resume finds as it is
                break
            self._install_all()
        self._install_misuses()

    def _install_all(self) -> None:
        """Install what every analysed module says (summaries, signatures, the words naming
        memory-binding helpers)."""
        found: dict[str, b.Behaviour] = {}
        definitions: dict[str, tuple[str, ...]] = {}
        words: set[str] = set()
        functions: set[str] = set()  # words naming a module-level function (or a class): plain words
        methods: dict[str, set[str]] = {}  # words naming a static or class method: the classes defining it
        classes = self.api.classes.defined()
        for display in self.modules:
            analysis = self.analyses.get(display)
            for entry in analysis.entries if analysis is not None else ():
                if entry.params is None:
                    continue
                definitions[entry.qualname] = entry.params
                if not entry.summary.empty:
                    found[entry.qualname] = entry.summary
                    if entry.by_name and binds_memory(entry.summary):
                        word, owner = _final(entry.qualname), entry.qualname.rpartition(".")[0]
                        words.add(word)
                        if owner in classes:
                            methods.setdefault(word, set()).add(owner)
                        else:
                            functions.add(word)
                    elif entry.qualname.endswith(_INIT) and entry.summary.keeps:  # `Buffer(group=...)`
                        word = _final(entry.qualname[: -len(_INIT)])
                        words.add(word)
                        functions.add(word)
        self.api.set_helper_words(words, {w: owners for w, owners in methods.items() if w not in functions})
        self._install(found, definitions)
        self.summaries = found

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
        stale = {e.qualname for e in entries if e.qualname in self._scanned and e.qualname not in new}
        if changed:
            self.api.entries.override(changed)
            self._scanned |= changed.keys()
        if stale:
            self.api.entries.withdraw(stale)
            self._scanned -= stale
        if changed or stale:
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
        self.api.entries.withdraw(self._scanned - found.keys())
        self._scanned = set(found)
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
        and any(m.confidence is not Confidence.LOW for m in mismatches(c, api, where=fn.qualname))  # a path taken
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


def _exports(imports: ImportTable) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((f"{imports.module}.{local}", target) for local, target in imports.aliases().items()))
