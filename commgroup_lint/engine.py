"""The engine: read every file, parse only those that can matter, run all rules in one pass.

A file that names no allocator cannot produce a finding, so it is read and decoded (an
undecodable file is still reported) but never parsed. Which files name which gate words is
found by one substring search per word over all the text at once (then confirmed as a whole
word), not by a regular expression per file. The index's analyses (see `SummaryIndex`) are
reused by the check when still valid, and, with a `Cache`, across runs.
"""

from __future__ import annotations

import gc
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache

from commgroup_lint.analysis.api import Api
from commgroup_lint.analysis.module import analyze_module
from commgroup_lint.analysis.recording import Lookups, Recorder, merged
from commgroup_lint.analysis.summaries import IndexedModule, ModuleAnalysis, ModuleSource, SummaryIndex, index_module
from commgroup_lint import suppressions
from commgroup_lint.cache import Cache, CheckResult, FileRecord, content_hash
from commgroup_lint.discovery import Discovered, is_excluded
from commgroup_lint.model import Finding, RuleSelection
from commgroup_lint.parsing import ParseFailure
from commgroup_lint.profile import Profile
from commgroup_lint.rule import FileContext, Rule, all_rules
from commgroup_lint.rules.cgl000_unreadable_file import UnreadableFile
from commgroup_lint.source import SourceError, SourceFile, read_source


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
    sources: dict[str, str] = field(default_factory=dict)  # text of the files with findings, for code frames
    fixable: dict[str, SourceFile] = field(default_factory=dict)  # the files with a fix to offer


class Linter:
    def __init__(self, profile: Profile, selection: RuleSelection = RuleSelection(),
                 per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = (), gate: bool = True,
                 cache: Cache | None = None, frontend: str = "ast") -> None:
        self.api = Api(profile)
        self.recorder = Recorder(self.api)
        self.selection = selection
        self.per_file_ignores = per_file_ignores  # (anchored glob, codes), see config.Config
        self.rules: list[Rule] = [r() for r in all_rules().rules if selection.enabled(r.code)]
        self._gate = _word_pattern(self._gate_words())
        self._index: SummaryIndex | None = None
        self.gate = gate  # False: parse and analyse every file, even those naming no allocator (robustness runs)
        self.cache = cache  # None: no cache
        self.frontend = frontend  # the parser that builds the IR: "ast" (fast) or "cst" (libcst, the reference)

    def cache_settings(self) -> tuple[object, ...]:
        """What, besides the tool's own source, decides a cached result."""
        return (self.api.profile, self.selection, self.per_file_ignores, self.gate, self.frontend)

    def _gate_words(self) -> set[str]:
        """Only code that names an allocator can hold a finding: allocation sites, and the
        definitions of allocators (which allocate through a context or another allocator)."""
        names = [*self.api.allocators.names(), *self.api.contexts.names()]
        return {name.partition("(")[0].rpartition(".")[2] for name in names}

    def index(self, sources: list[SourceFile], mentions: "Mentions | None" = None,
              memo: Callable[[ModuleSource], tuple[ModuleAnalysis, ...]] | None = None,
              digests: dict[str, bytes] | None = None) -> None:
        """Summarise the scanned code's own helpers before any file is checked."""
        index = SummaryIndex(self.api, self.recorder, memo, lambda *args: analyze_module(*args), self.frontend)
        mentions = mentions or Mentions({s.display: s.text for s in sources})
        digests = digests or {}
        index.build([ModuleSource(s.path, s.display, s.text, digests.get(s.display, b"")) for s in sources], mentions)
        self._index = index
        self._gate = _word_pattern(self._gate_words())

    def needs_analysis(self, text: str) -> bool:
        return not self.gate or self._gate.search(text) is not None

    def enabled_for(self, display: str) -> Callable[[str], bool]:
        """Whether a code is reported in one file: selected, and not ignored there by per-file-ignores."""
        ignored = tuple(c for pattern, codes in self.per_file_ignores if is_excluded(display, (pattern,)) for c in codes)
        return lambda code: self.selection.enabled(code) and not any(code.startswith(i) for i in ignored)

    def lint(self, files: Iterable[Discovered], progress: Callable[[], None] | None = None) -> LintResult:
        """Check `files`; `progress` (if given) is called once per file as it is done."""
        with _collector_paused():
            return self._lint(list(files), progress)

    def _lint(self, files: list[Discovered], progress: Callable[[], None] | None) -> LintResult:
        result = LintResult()
        caching = self.cache is not None
        old = self.cache.load() if self.cache is not None else {}
        sources: list[SourceFile] = []
        digests: dict[str, bytes] = {}
        exact: set[str] = set()
        for item, read in _read_all(files):
            result.files_checked += 1
            if isinstance(read, SourceError):
                enabled = self.enabled_for(item.display)
                result.findings += [f for f in self._unreadable(item.display, str(read)) if enabled(f.code)]
                if progress is not None:
                    progress()
            else:
                if caching:
                    digests[read.display] = content_hash(read.raw)
                # The raw bytes are needed again only to write a fix; most files encode back
                # to them exactly, so those are dropped now and made again for the files with a fix.
                if read.raw and read.encode(read.text) == read.raw:
                    read = replace(read, raw=b"")
                    exact.add(read.display)
                sources.append(read)
        reusable: dict[str, FileRecord] = {}
        for s in sources:
            record = old.get(s.display)
            if record is not None and record.digest == digests[s.display] and record.path == str(s.path):
                reusable[s.display] = record
        mentions = Mentions({s.display: s.text for s in sources},
                            {d: (r.checked, r.found) for d, r in reusable.items()})

        def memo(source: ModuleSource) -> tuple[ModuleAnalysis, ...]:
            record = reusable.get(source.display)
            return record.analyses if record is not None else ()

        self.index(sources, mentions, memo, digests)
        words = self._gate_words()
        mentions(mentions.texts, words)  # all files at once, before asking file by file
        records: list[tuple[str, FileRecord]] = []
        for source in sources:
            display = source.display
            gated = not self.gate or bool(mentions([display], words))
            record = reusable.get(display)
            cached = record.result if record is not None else None
            if cached is not None and cached.gated == gated and self.recorder.valid(cached.lookups):
                findings, check = list(cached.findings), cached
            else:
                log: Lookups = {}
                outcomes = list(self._check(source, log)) if gated else []
                errors = [o for o in outcomes if isinstance(o, InternalError)]
                result.internal_errors += errors
                findings = suppressions.apply(source.text, display, [o for o in outcomes if isinstance(o, Finding)],
                                              self.enabled_for(display))
                check = None if errors else CheckResult(gated, tuple(findings), log)
            result.findings += findings
            if findings:
                result.sources[display] = source.text
            if any(f.fix is not None for f in findings):
                result.fixable[display] = replace(source, raw=source.encode(source.text)) if display in exact else source
            if caching:
                records.append((display, self._record(source, digests[display], mentions, check)))
            if progress is not None:
                progress()
        if self.cache is not None:
            self.cache.save(records)
        result.findings.sort(key=lambda f: f.sort_key)
        return result

    def _record(self, source: SourceFile, digest: bytes, mentions: "Mentions", check: CheckResult | None) -> FileRecord:
        index = self._index
        analyses: tuple[ModuleAnalysis, ...] = ()
        if index is not None:
            if source.display in index.parse_failed:
                analyses = (ModuleAnalysis((), {}),)
            else:
                analyses = tuple(ModuleAnalysis(a.entries, a.lookups) for a in index.history.get(source.display, ()))
        checked, found = mentions.known(source.display)
        return FileRecord(str(source.path), digest, checked, found, analyses, check)

    def lint_source(self, source: SourceFile) -> Iterator[Finding | InternalError]:
        if not self.needs_analysis(source.text):
            return
        yield from self._check(source, {})

    def _check(self, source: SourceFile, log: Lookups) -> Iterator[Finding | InternalError]:
        """Analyse one file and run the rules; every `Api` lookup made for it goes into `log`."""
        indexed: IndexedModule | None = None
        functions = None
        index = self._index
        if index is not None and source.display in index.sources and index.sources[source.display].text == source.text:
            analysis = index.current(source.display)
            if analysis is not None and analysis.facts is not None:  # the index's own, still valid: reuse it
                indexed, functions = index.module(source.display), analysis.facts
                log.update(merged(log, analysis.lookups))
        if indexed is None:
            try:
                if index is not None and source.display in index.sources and index.sources[source.display].text == source.text:
                    indexed = index.module(source.display)
                else:  # not indexed, or a fix changed it
                    indexed = index_module(source.path, source.display, source.text, self.frontend)
            except ParseFailure as failure:
                yield from self._unreadable(source.display, failure.reason, failure.line, failure.column)
                return
        with self.recorder.recording(log):
            if functions is None:
                try:
                    functions = analyze_module(indexed.module, indexed.imports, self.api)
                except RecursionError:
                    yield from self._unreadable(source.display, "nested too deeply to analyse")
                    return
                except Exception as err:  # noqa: BLE001 - reported, never shown as a traceback
                    yield InternalError(source.display, "analysis", f"{type(err).__name__}: {err}")
                    return
            ctx = FileContext(source, indexed.module, indexed.imports, functions, self.api)
            outcomes: list[Finding | InternalError] = []
            for rule in self.rules:
                try:
                    outcomes += list(rule.check(ctx))
                except Exception as err:  # noqa: BLE001
                    outcomes.append(InternalError(source.display, rule.code, f"{type(err).__name__}: {err}"))
        yield from outcomes

    def _unreadable(self, display: str, reason: str, line: int = 1, column: int = 1) -> list[Finding]:
        if self.selection.enabled(UnreadableFile.code):
            return [UnreadableFile.report(display, reason, line, column)]
        return []


class Mentions:
    """Which gate words each file names as a whole word, searched for once per word.

    All the texts are joined (in chunks) and each word is found with one substring search,
    which is far cheaper than a regular expression per file; a hit is confirmed as a whole
    word (`\\bword\\b`) in the file it falls in. What an unchanged file was found to name in
    the last run (`known`, from the cache) is not searched again.
    """

    CHUNK = 8 << 20  # characters joined at a time (bounds the extra memory)

    def __init__(self, texts: dict[str, str],
                 known: dict[str, tuple[frozenset[str], frozenset[str]]] | None = None) -> None:
        self.texts = texts
        known = known or {}
        self.checked: dict[str, set[str]] = {d: set(known[d][0]) if d in known else set() for d in texts}
        self.found: dict[str, set[str]] = {d: set(known[d][1]) if d in known else set() for d in texts}
        self._interned: dict[frozenset[str], frozenset[str]] = {}

    def __call__(self, displays: Iterable[str], words: Iterable[str]) -> set[str]:
        """Those of `displays` that name one of `words`."""
        words = set(words)
        displays = list(displays)
        todo: dict[frozenset[str], list[str]] = {}
        for d in displays:
            missing = words - self.checked[d]
            if missing:
                todo.setdefault(frozenset(missing), []).append(d)
        if todo:  # one pass for all: a word searched again in a file gives the same answer
            self._scan([d for group in todo.values() for d in group], frozenset().union(*todo))
        return {d for d in displays if not self.found[d].isdisjoint(words)}

    def known(self, display: str) -> tuple[frozenset[str], frozenset[str]]:
        checked = frozenset(self.checked[display])
        checked = self._interned.setdefault(checked, checked)  # one copy in the cache file
        return checked, frozenset(self.found[display])

    def _scan(self, displays: list[str], words: frozenset[str]) -> None:
        texts, found = self.texts, self.found
        i = 0
        while i < len(displays):
            chunk: list[str] = []
            starts: list[int] = []
            size = 0
            while i < len(displays) and (not chunk or size < self.CHUNK):
                chunk.append(displays[i])
                starts.append(size)
                size += len(texts[displays[i]]) + 1
                i += 1
            joined = "\0".join(texts[d] for d in chunk)
            for word in words:
                at = joined.find(word)
                while at != -1:
                    k = bisect_right(starts, at) - 1
                    display = chunk[k]
                    if _whole_word(word).search(texts[display]) is not None:
                        found[display].add(word)
                    at = joined.find(word, starts[k + 1]) if k + 1 < len(starts) else -1
            for d in chunk:
                self.checked[d] |= words


@lru_cache(maxsize=1024)
def _whole_word(word: str) -> re.Pattern[str]:
    return re.compile(r"\b" + re.escape(word) + r"\b")


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while linting: the IR and facts are large, acyclic
    and alive until the end, and the collector's full passes over them cost more than half of
    a cold run. Reference counting still frees everything as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _read_all(files: list[Discovered]) -> Iterator[tuple[Discovered, SourceFile | SourceError]]:
    for item in files:
        try:
            yield item, read_source(item.path, item.display)
        except SourceError as err:
            yield item, err


def _word_pattern(words: Iterable[str]) -> re.Pattern[str]:
    ordered = sorted(words, key=len, reverse=True)
    if not ordered:
        return re.compile(r"(?!x)x")
    return re.compile(r"\b(?:" + "|".join(map(re.escape, ordered)) + r")\b")
