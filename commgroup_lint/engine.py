"""The engine: read every file, parse only those that can matter, run all rules in one pass.

A file that names no allocator cannot produce a finding, so it is read and decoded (an
undecodable file is still reported) but never parsed. Which files name which gate words is
found by one substring search per word over all the text at once (then confirmed as a whole
word), not by a regular expression per file. The index's analyses (see `SummaryIndex`) are
reused by the check when still valid, and, with a `Cache`, across runs.

With a cache, a file whose `stat` is the one recorded with its content hash is not read
at all (see `cache`): its text is read only if something asks for it (a new gate word, an
analysis that is no longer valid, a finding to show), and then checked against the hash.
Its earlier result stands, an undecodable file's CGL000 included.
"""

from __future__ import annotations

import gc
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from commgroup_lint import suppressions
from commgroup_lint.analysis.api import Api
from commgroup_lint.analysis.indexing import IndexedModule, index_module
from commgroup_lint.analysis.lower_ast import MAX_NESTING
from commgroup_lint.analysis.module import analyze_module
from commgroup_lint.analysis.recording import Lookups, Recorder, merged
from commgroup_lint.analysis.stars import StarExports
from commgroup_lint.analysis.summaries import ModuleAnalysis, ModuleSource, Previous, SummaryIndex
from commgroup_lint.cache import Cache, CheckResult, FileRecord, Stat, content_hash, file_stat, settled
from commgroup_lint.coverage import NOTHING_UNKNOWN, Unknowns, file_unknowns, memory_total, unknown_total
from commgroup_lint.discovery import Discovered, is_excluded
from commgroup_lint.forked import in_halves
from commgroup_lint.mentions import Mentions
from commgroup_lint.model import Confidence, FileScope, Finding, RuleSelection
from commgroup_lint.parsing import ParseFailure
from commgroup_lint.profile import Profile
from commgroup_lint.rule import FileContext, Rule, all_rules
from commgroup_lint.rules.cgl000_unreadable_file import UnreadableFile
from commgroup_lint.source import SourceError, SourceFile, decode, read_bytes


@dataclass(frozen=True)
class InternalError:
    """A rule (or the analysis) raised on a file: a bug in commgroup-lint, not in the user's code."""

    path: str
    rule: str
    error: str


@dataclass
class LintResult:
    findings: list[Finding] = field(default_factory=list)
    files_checked: int = 0
    internal_errors: list[InternalError] = field(default_factory=list)
    files_using_api: int = 0  # files that name a group-bound allocation API (the others cannot hold a finding)
    profiles: tuple[str, ...] = ()  # the profiles the run used
    sources: dict[str, str] = field(default_factory=dict)  # text of the files with findings, for code frames
    fixable: dict[str, SourceFile] = field(default_factory=dict)  # the files with a fix to offer
    groups_unknown: int = 0  # group references `coverage` would report as left unknown
    memory_lost: int = 0  # collectives `coverage` reports as given a buffer or group the analysis lost


class Linter:
    def __init__(self, profile: Profile, selection: RuleSelection = RuleSelection(),  # noqa: B008 (frozen)
                 per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = (), gate: bool = True,
                 cache: Cache | None = None, frontend: str = "ast",
                 min_confidence: Confidence = Confidence.MEDIUM,
                 observer: Callable[[FileContext], None] | None = None,
                 scopes: Mapping[str, FileScope] | None = None) -> None:
        self.api = Api(profile)
        self.recorder = Recorder(self.api)
        self.selection = selection
        self.per_file_ignores = per_file_ignores  # (anchored glob, codes), see config.Config
        # Files reporting as another configuration says than the run's (see `scopes`): their
        # checks are neither taken from the cache nor written to it, whose key is the run's.
        self.scopes: Mapping[str, FileScope] = scopes or {}
        selections = [selection, *(s.selection for s in self.scopes.values())]
        self._opt_in = frozenset(r.code for r in all_rules().rules if r.opt_in)
        self.rules: list[Rule] = [r() for r in all_rules().rules if any(self._selects(s, r.code) for s in selections)]
        self._gate = _word_pattern(self._gate_words())
        self._index: SummaryIndex | None = None
        self.gate = gate  # False: parse and analyse every file, even those naming no allocator (robustness runs)
        self.cache = cache  # None: no cache
        self.frontend = frontend  # the parser that builds the IR: "ast" (fast) or "cst" (libcst, the reference)
        self.min_confidence = min_confidence  # findings less sure than this are not reported
        self.observer = observer  # sees every analysed file's facts (the `sites` inventory); needs no cache
        self.root: str | None = None  # the project root: paths in messages are relative to it (see `rule`)

    def cache_settings(self) -> tuple[object, ...]:
        """What, besides the tool's own source, decides a cached result."""
        return (self.api.profile, self.selection, self.per_file_ignores, self.gate, self.frontend)

    def _gate_words(self) -> set[str]:
        """Only code that names an allocator can hold a finding: allocation sites, and the
        definitions of allocators (which allocate through a context or another allocator);
        and what a selected rule names besides (CGL007: the collectives)."""
        return self.api.allocation_words() | self._rule_words()

    def _rule_words(self) -> set[str]:
        return set().union(*(rule.gate_words(self.api) for rule in self.rules))

    def index(self, sources: list[SourceFile], mentions: Mentions | None = None,
              memo: Callable[[ModuleSource], Previous | None] | None = None,
              digests: dict[str, bytes] | None = None) -> None:
        """Summarise the scanned code's own helpers before any file is checked."""
        digests = digests or {}
        self._build_index([ModuleSource(s.path, s.display, s.text, digests.get(s.display, b"")) for s in sources],
                          mentions or Mentions({s.display: s.text for s in sources}, anchors=self.api.word_anchors), memo)

    def _build_index(self, modules: list[ModuleSource], mentions: Mentions,
                     memo: Callable[[ModuleSource], Previous | None] | None, resume: bool = False) -> None:
        """The index stage: summarise what the files' helpers do, starting where `memo` says the
        last run's index was (`resume`: no file changed, so where it ended)."""
        self.api.stars.use(StarExports(modules, self.frontend, self.api.namespaces))
        self.recorder.changed()
        index = SummaryIndex(self.api, self.recorder, memo, lambda *args: analyze_module(*args), self.frontend,
                             set().union(*(rule.index_words(self.api) for rule in self.rules)))
        index.build(modules, mentions, resume)
        self._index = index
        self._gate = _word_pattern(self._gate_words())

    def needs_analysis(self, text: str) -> bool:
        return not self.gate or self._gate.search(text) is not None

    def enabled_for(self, display: str) -> Callable[[str], bool]:
        """Whether a code is reported in one file: selected, and not ignored there by per-file-ignores."""
        scope = self.scopes.get(display)
        selection, per_file_ignores = (scope.selection, scope.per_file_ignores) if scope else (self.selection, self.per_file_ignores)
        ignored = tuple(c for pattern, codes in per_file_ignores if is_excluded(display, (pattern,)) for c in codes)
        return lambda code: self._selects(selection, code) and not any(code.startswith(i) for i in ignored)

    def _selects(self, selection: RuleSelection, code: str) -> bool:
        """An opt-in rule (see `Rule.opt_in`) only by its own code, any other by a prefix too."""
        return selection.names(code) if code in self._opt_in else selection.enabled(code)

    def min_confidence_for(self, display: str) -> Confidence:
        scope = self.scopes.get(display)
        return scope.min_confidence if scope else self.min_confidence

    def lint(self, files: Iterable[Discovered], context: Iterable[Discovered] = ()) -> LintResult:
        """Check `files`.

        `context` holds the project's other files: indexed (their helpers summarised) as if
        they were checked, so that a run over a few files finds in them what a run over the
        whole project finds, but never checked or reported on themselves."""
        files, context = list(files), list(context)
        with _collector_paused():
            try:
                return self._lint(files, context, trust_stat=True)
            except _SourceChanged:
                # A file left unread because its `stat` matched was read later in the run and
                # its content was not what the cache says (a write racing the run): start again
                # from a fresh `Api`, reading every file first.
                self.api = Api(self.api.profile)
                self.recorder = Recorder(self.api)
                self._index = None
                return self._lint(files, context, trust_stat=False)

    def _lint(self, files: list[Discovered], context: list[Discovered], trust_stat: bool) -> LintResult:
        """A run's stages in order: read, index, gate, check, suppress, filter. The cache is
        around them (`_RunCache`): it says which files need not be read, where the index starts,
        which checks still hold, and keeps what this run leaves for the next."""
        result = LintResult(profiles=self.api.profile.names)
        cache = _RunCache(self.cache, trust_stat)
        checked, changed = self._read(files, context, cache, result)
        mentions = Mentions(_Texts({f.display: f for f in checked}), cache.mentioned(checked), self.api.word_anchors)
        self._build_index([_LazyModuleSource(f) for f in checked], mentions, cache.memo(checked),
                          resume=not changed and not cache.gone)
        reported = [f for f in checked if f.reported]
        gate = self._gate_files(checked, reported, mentions)
        reused = {f.display: found for f in reported
                  if (found := cache.check(f, gate[f.display], self.recorder, self.scopes)) is not None}
        checks = self._checks([f for f in reported if gate[f.display] and f.display not in reused])
        unknowns: list[Unknowns] = []
        for file in checked:
            if not file.reported:  # context: what the index learnt is recorded, its old check kept
                cache.record(file, mentions, file.record.result if file.record else None, self._index)
                continue
            display = file.display
            result.files_using_api += gate[display]
            check = reused.get(display)
            if check is not None:
                findings = _named(check.findings, display)
                unknowns.append(check.unknowns)
            else:
                outcome = checks.get(display, ([], {}, NOTHING_UNKNOWN))
                findings, check = self._suppress(file, outcome, gate[display], result)
                unknowns.append(outcome[2])
            self._filter(file, findings, result)
            cache.record(file, mentions, check, self._index)
        result.groups_unknown = unknown_total(unknowns)
        result.memory_lost = memory_total(unknowns)
        cache.save(files)
        result.findings.sort(key=lambda f: f.sort_key)
        return result

    def _read(self, files: list[Discovered], context: list[Discovered], cache: _RunCache,
              result: LintResult) -> tuple[list[_File], bool]:
        """Read and decode every file (the cache may vouch for one unread); an unreadable or
        undecodable one is reported (CGL000). Also whether a file changed, came, or cannot be
        read since the last run."""
        checked: list[_File] = []
        changed = False
        for reported, item in [*((True, f) for f in files), *((False, c) for c in context)]:
            display = item.display
            result.files_checked += reported
            record, stat = cache.lookup(item)
            if cache.unchanged(record, stat):
                assert record is not None
                if record.error is None:  # unchanged: read only if asked for
                    checked.append(_File(item.path, display, record.digest, stat, record, reported))
                    continue
                if reported:
                    self._report_unreadable(result, display, record.error)
                cache.keep(display, record)
                continue
            try:
                raw = item.content if item.content is not None else read_bytes(item.path)
            except SourceError as err:  # not recorded: the file system may answer otherwise next time
                changed = True
                if reported:
                    self._report_unreadable(result, display, str(err))
                continue
            digest = cache.digest(raw)
            try:
                text, encoding = decode(raw)
            except SourceError as err:  # the content decides: recorded like a finding
                changed = changed or record is None or record.error != str(err)
                if reported:
                    self._report_unreadable(result, display, str(err))
                cache.undecodable(item, digest, stat, str(err))
                continue
            if record is not None and (record.digest != digest or record.error is not None):
                record = None
            changed = changed or record is None
            file = _File(item.path, display, digest, stat, record, reported)
            file.hold(SourceFile(item.path, display, text, encoding, raw))
            checked.append(file)
        return checked, changed

    def _gate_files(self, checked: list[_File], reported: list[_File], mentions: Mentions) -> dict[str, bool]:
        """Which reported files can hold a finding: those naming a gate word (every file when
        the gate is off). Every file is searched, so that each record holds what its file names."""
        words = self._gate_words()
        mentions([f.display for f in checked], words)
        named = mentions([f.display for f in reported], words) if self.gate else set()
        return {f.display: not self.gate or f.display in named for f in reported}

    def _suppress(self, file: _File, checked: _Outcome, gated: bool,
                  result: LintResult) -> tuple[list[Finding], CheckResult | None]:
        """A fresh check's findings without those its `noqa` comments and per-file ignores
        suppress, and what the cache may keep of it (nothing when a rule raised, or where the
        file reports as another configuration says)."""
        outcomes, log, unknowns = checked
        errors = [o for o in outcomes if isinstance(o, InternalError)]
        result.internal_errors += errors
        source = file.source
        findings = suppressions.apply(source.text, file.display, [o for o in outcomes if isinstance(o, Finding)],
                                      self.enabled_for(file.display), source.utf8)
        return findings, None if errors or file.display in self.scopes else CheckResult(gated, tuple(findings), log,
                                                                                        unknowns)

    def _filter(self, file: _File, findings: list[Finding], result: LintResult) -> None:
        """The findings at least as sure as the file's minimum confidence, into the result,
        with the text of their file (and the file, when one has a fix)."""
        least = self.min_confidence_for(file.display)
        findings = [f for f in findings if f.confidence.at_least(least)]
        result.findings += findings
        if findings:
            result.sources[file.display] = file.source.text
        if any(f.fix is not None for f in findings):
            result.fixable[file.display] = file.source

    def _checks(self, files: list[_File]) -> dict[str, _Outcome]:
        """Each file's outcomes, the lookups they depend on and what it left unknown; half of
        them in a forked child (see `forked`) unless an observer must see every file's facts here."""
        def check(part: Sequence[_File]) -> list[_Outcome]:
            done = []
            for file in part:
                log: Lookups = {}
                unknowns: list[Unknowns] = []
                outcomes = list(self._check(file.source, log, unknowns))
                done.append((outcomes, log, unknowns[0] if unknowns else NOTHING_UNKNOWN))
            return done

        done = check(files) if self.observer is not None else in_halves(files, check, cost=32)
        return {file.display: outcome for file, outcome in zip(files, done)}

    def _report_unreadable(self, result: LintResult, display: str, reason: str) -> None:
        enabled = self.enabled_for(display)
        result.findings += [f for f in self._unreadable(display, reason) if enabled(f.code)]

    def lint_source(self, source: SourceFile) -> Iterator[Finding | InternalError]:
        if not self.needs_analysis(source.text):
            return
        yield from self._check(source, {})

    def _check(self, source: SourceFile, log: Lookups,
               unknowns: list[Unknowns] | None = None) -> Iterator[Finding | InternalError]:
        """Analyse one file and run the rules; every `Api` lookup made for it goes into `log`,
        and what `coverage` would count as left unknown in it into `unknowns`."""
        indexed: IndexedModule | None = None
        functions = None
        index = self._index
        same = index is not None and source.display in index.sources and _same_text(index.sources[source.display], source)
        if same and index is not None:
            analysis = index.current(source.display)
            if analysis is not None and analysis.facts is not None:  # the index's own, still valid: reuse it
                indexed, functions = index.module(source.display), analysis.facts
                log.update(merged(log, analysis.lookups))
        if indexed is None:
            try:
                if same and index is not None:
                    indexed = index.module(source.display)
                else:  # not indexed, or a fix changed it
                    indexed = index_module(source.path, source.display, source.text, self.frontend,
                                           self.api.namespaces, self.api.stars.get)
            except ParseFailure as failure:
                yield from self._unreadable(source.display, failure.reason, failure.line, failure.column)
                return
        for lost in indexed.module.too_deep:
            yield from self._unreadable(source.display, f"function `{lost.name}` nested too deeply to analyse (more than "
                                        f"{MAX_NESTING} levels); the rest of the file was checked",
                                        lost.span.line, lost.span.col + 1)
        with self.recorder.recording(log):
            if functions is None:
                try:
                    functions = analyze_module(indexed.module, indexed.imports, self.api, source.display)
                except RecursionError:
                    yield from self._unreadable(source.display, "nested too deeply to analyse")
                    return
                except Exception as err:  # noqa: BLE001 - reported, never shown as a traceback
                    yield InternalError(source.display, "analysis", f"{type(err).__name__}: {err}")
                    return
            ctx = FileContext(source, indexed.module, indexed.imports, functions, self.api, self.root)
            outcomes: list[Finding | InternalError] = []
            for rule in self.rules:
                try:
                    outcomes += list(rule.check(ctx))
                except Exception as err:  # noqa: BLE001
                    outcomes.append(InternalError(source.display, rule.code, f"{type(err).__name__}: {err}"))
            if self.observer is not None:
                self.observer(ctx)
            if unknowns is not None:
                unknowns.append(file_unknowns(ctx))
        yield from outcomes

    def _unreadable(self, display: str, reason: str, line: int = 1, column: int = 1) -> list[Finding]:
        if any(r.code == UnreadableFile.code for r in self.rules):  # filtered by the file's scope after
            return [UnreadableFile.report(display, reason, line, column)]
        return []


class _RunCache:
    """The cache around one run: the records the last run left (`old`), and those this run
    leaves, kept in the order the run meets its files. Without a cache it vouches for nothing
    and keeps nothing."""

    def __init__(self, cache: Cache | None, trust_stat: bool) -> None:
        self.cache = cache
        self.trust_stat = trust_stat  # False: a file's `stat` proves nothing (a run started again)
        self.old = cache.load() if cache is not None else {}
        self.started = time.time_ns()
        self.records: list[tuple[str, FileRecord]] = []
        self.seen: set[str] = set()

    @property
    def enabled(self) -> bool:
        return self.cache is not None

    @property
    def gone(self) -> bool:
        """Whether a file the last run recorded is not in this one (asked once all are read)."""
        return bool(self.old.keys() - self.seen)

    def lookup(self, item: Discovered) -> tuple[FileRecord | None, Stat | None]:
        """The last run's record of the file (if of the same path), and its `stat` now."""
        key = _cache_key(item.display)
        self.seen.add(key)
        record = self.old.get(key)
        if record is not None and record.path != str(item.path):
            record = None
        return record, file_stat(item.path) if self.enabled and item.content is None else None

    def unchanged(self, record: FileRecord | None, stat: Stat | None) -> bool:
        """Whether the file is taken to hold what its record says without reading it."""
        return self.trust_stat and stat is not None and record is not None and record.stat == stat

    def digest(self, raw: bytes) -> bytes:
        return content_hash(raw) if self.enabled else b""

    def keep(self, display: str, record: FileRecord) -> None:
        self.records.append((display, record))

    def undecodable(self, item: Discovered, digest: bytes, stat: Stat | None, error: str) -> None:
        if self.enabled:
            self.records.append((item.display, FileRecord(str(item.path), digest, stat=settled(stat, self.started),
                                                          error=error)))

    def mentioned(self, files: list[_File]) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
        """What each file's record says it was searched for and found to name (see `Mentions`)."""
        return {f.display: (f.record.checked, f.record.found) for f in files if f.record is not None}

    def memo(self, files: list[_File]) -> Callable[[ModuleSource], Previous | None]:
        """What the last run's index knew of each file, for the index to start from."""
        by_display = {f.display: f for f in files}

        def memo(source: ModuleSource) -> Previous | None:
            record = by_display[source.display].record
            return Previous(record.hop, record.analyses, record.final) if record is not None else None

        return memo

    def check(self, file: _File, gated: bool, recorder: Recorder, scopes: Mapping[str, FileScope]) -> CheckResult | None:
        """The cache's check of the file, if it still holds (same gate, same answers)."""
        cached = file.record.result if file.record is not None and file.display not in scopes else None
        if cached is not None and cached.gated == gated and recorder.valid(cached.lookups):
            return cached
        return None

    def record(self, file: _File, mentions: Mentions, check: CheckResult | None, index: SummaryIndex | None) -> None:
        """What this run leaves for the file: the index's analyses of it, its words, its check."""
        if not self.enabled:
            return
        analyses: tuple[ModuleAnalysis, ...] = ()
        hop, final = None, -1
        if index is not None:
            hop = index.hop_of.get(file.display)
            if file.display in index.parse_failed:
                analyses = (ModuleAnalysis((), {}),)
            else:
                history = index.history.get(file.display, ())
                analyses = tuple(ModuleAnalysis(a.entries, a.lookups, None, a.classes, a.misuses, exports=a.exports)
                                 for a in history)
                ended = index.analyses.get(file.display)
                final = next((i for i, a in enumerate(history) if a is ended), -1)
        checked, found = mentions.known(file.display)
        stat = settled(file.stat, self.started)
        old = file.record
        if (old is not None and old.result is check and old.stat == stat and old.checked == checked
                and old.found == found and old.hop == hop and old.final == final and len(old.analyses) == len(analyses)
                and all(a.entries is b.entries and a.lookups is b.lookups for a, b in zip(old.analyses, analyses))):
            self.records.append((file.display, old))  # nothing new: the same object, so an unchanged cache is not written
            return
        self.records.append((file.display, FileRecord(str(file.path), file.digest, checked, found, analyses, check, stat,
                                                      hop=hop, final=final)))

    def save(self, files: list[Discovered]) -> None:
        """Write the records, unless they are the last run's. A buffer (stdin, an editor) leaves
        the record of its file as it was, so that typing does not rewrite the cache; a file
        without one gets the buffer's (its `stat` unknown: read next time)."""
        buffered = {_cache_key(f.display) for f in files if f.content is not None}
        old = self.old
        records = [(_cache_key(d), r) for d, r in self.records]
        records = [(d, old[d] if d in buffered and d in old else r) for d, r in records]
        if self.cache is not None and not (len(records) == len(old) and all(old.get(d) is r for d, r in records)):
            self.cache.save(records)


_Outcome = tuple[list[Finding | InternalError], Lookups, Unknowns]  # a file's check: see `Linter._checks`


def _cache_key(display: str) -> str:
    """A file's key in the cache: `./pkg/a.py` (from `check .`) and `pkg/a.py` (pre-commit, an
    editor, a project's context) are one file, and share its record."""
    return os.path.normpath(display)


def _named(findings: Iterable[Finding], display: str) -> list[Finding]:
    """Cached findings, named as this run names their file."""
    return [f if f.path == display else replace(f, path=display) for f in findings]


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while linting: the IR and facts are large, acyclic
    and alive until the end, and the collector's full passes over them cost more than half of
    a cold run. Reference counting still frees everything as usual. Nothing is frozen here: a
    long-lived process (the language server) must get its garbage back; a one-shot command
    may freeze what it keeps until it exits (`cli`)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _word_pattern(words: Iterable[str]) -> re.Pattern[str]:
    ordered = sorted(words, key=len, reverse=True)
    if not ordered:
        return re.compile(r"(?!x)x")
    return re.compile(r"\b(?:" + "|".join(map(re.escape, ordered)) + r")\b")


class _SourceChanged(BaseException):
    """A file taken as unchanged by its `stat` does not hold the content the cache says.

    A `BaseException`, so that it passes through the analysis's `except Exception` handlers
    (which would take it for a bug in one module) up to `Linter.lint`, which starts again."""


class _File:
    """A file to check: read already, or (its `stat` unchanged since the cache recorded its
    content hash) read when first asked for, and then held to that hash."""

    __slots__ = ("path", "display", "digest", "stat", "record", "reported", "_source")

    def __init__(self, path: Path, display: str, digest: bytes, stat: Stat | None, record: FileRecord | None,
                 reported: bool = True) -> None:
        self.path, self.display, self.digest, self.stat = path, display, digest, stat
        self.record = record  # the cache's record of this content, if any
        self.reported = reported  # False: a context file, indexed but not checked
        self._source: SourceFile | None = None

    def hold(self, read: SourceFile) -> None:
        self._source = read

    @property
    def loaded(self) -> bool:
        return self._source is not None

    @property
    def source(self) -> SourceFile:
        if self._source is None:
            try:
                raw = read_bytes(self.path)
                text, encoding = decode(raw)
            except SourceError:
                raise _SourceChanged(self.display) from None
            if content_hash(raw) != self.digest:
                raise _SourceChanged(self.display)
            self.hold(SourceFile(self.path, self.display, text, encoding, raw))
        assert self._source is not None
        return self._source


class _LazyModuleSource(ModuleSource):
    """The index's view of a `_File`: its text read only when the index needs it (to parse a
    module whose cached analysis is no longer valid)."""

    def __init__(self, file: _File) -> None:  # noqa: D107 - the dataclass fields, set as a frozen one would
        object.__setattr__(self, "path", file.path)
        object.__setattr__(self, "display", file.display)
        object.__setattr__(self, "digest", file.digest)
        object.__setattr__(self, "file", file)

    @property
    def text(self) -> str:
        return self.file.source.text  # type: ignore[attr-defined]


def _same_text(indexed: ModuleSource, source: SourceFile) -> bool:
    """Whether the index's module is `source` as it is now (a fix changes the text)."""
    try:
        return indexed.text == source.text
    except _SourceChanged:  # asked after the run (a fix's re-check) about a file changed since
        return False


class _Texts(Mapping[str, bytes]):
    """The files' UTF-8 bytes by display path for `Mentions`, each read only when searched."""

    def __init__(self, files: dict[str, _File]) -> None:
        self._files = files

    def __getitem__(self, display: str) -> bytes:
        return self._files[display].source.utf8

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)
