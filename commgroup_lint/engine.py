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
from commgroup_lint.analysis.summaries import ModuleAnalysis, ModuleSource, Previous, SummaryIndex
from commgroup_lint.cache import Cache, CheckResult, FileRecord, Stat, content_hash, file_stat, settled
from commgroup_lint.discovery import Discovered, is_excluded
from commgroup_lint.forked import in_halves
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
        result = LintResult(profiles=self.api.profile.names)
        caching = self.cache is not None
        old = self.cache.load() if self.cache is not None else {}
        started = time.time_ns()
        records: list[tuple[str, FileRecord]] = []
        checked: list[_File] = []
        seen: set[str] = set()
        changed = False  # a file changed, came, or cannot be read since the last run
        for reported, item in [*((True, f) for f in files), *((False, c) for c in context)]:
            display = item.display
            result.files_checked += reported
            seen.add(_cache_key(display))
            record = old.get(_cache_key(display))
            if record is not None and record.path != str(item.path):
                record = None
            stat = file_stat(item.path) if caching and item.content is None else None
            if trust_stat and stat is not None and record is not None and record.stat == stat:
                if record.error is None:  # unchanged: read only if asked for
                    checked.append(_File(item.path, display, record.digest, stat, record, reported))
                    continue
                if reported:
                    self._report_unreadable(result, display, record.error)
                records.append((display, record))
                continue
            try:
                raw = item.content if item.content is not None else read_bytes(item.path)
            except SourceError as err:  # not recorded: the file system may answer otherwise next time
                changed = True
                if reported:
                    self._report_unreadable(result, display, str(err))
                continue
            digest = content_hash(raw) if caching else b""
            try:
                text, encoding = decode(raw)
            except SourceError as err:  # the content decides: recorded like a finding
                changed = changed or record is None or record.error != str(err)
                if reported:
                    self._report_unreadable(result, display, str(err))
                if caching:
                    records.append((display, FileRecord(str(item.path), digest, stat=settled(stat, started), error=str(err))))
                continue
            if record is not None and (record.digest != digest or record.error is not None):
                record = None
            changed = changed or record is None
            file = _File(item.path, display, digest, stat, record, reported)
            file.hold(SourceFile(item.path, display, text, encoding, raw))
            checked.append(file)
        by_display = {f.display: f for f in checked}
        mentions = Mentions(_Texts(by_display),
                            {f.display: (f.record.checked, f.record.found) for f in checked if f.record is not None},
                            self.api.word_anchors)

        def memo(source: ModuleSource) -> Previous | None:
            record = by_display[source.display].record
            return Previous(record.hop, record.analyses, record.final) if record is not None else None

        gone = bool(old.keys() - seen)
        self._build_index([_LazyModuleSource(f) for f in checked], mentions, memo, resume=not changed and not gone)
        words = self._gate_words()
        mentions(mentions.texts, words)  # all files at once: each record holds what its file names
        named = mentions([f.display for f in checked if f.reported], words) if self.gate else set()
        gate = {f.display: not self.gate or f.display in named for f in checked if f.reported}
        usable = {f.display: cached for f in checked if f.display in gate
                  and (cached := self._cached_check(f, gate[f.display])) is not None}
        checks = self._checks([f for f in checked if gate.get(f.display) and f.display not in usable])
        for file in checked:
            display = file.display
            if not file.reported:  # context: what the index learnt is recorded, its old check kept
                if caching:
                    records.append((display, self._record(file, mentions, file.record.result if file.record else None,
                                                          started)))
                continue
            gated = gate[display]
            result.files_using_api += gated
            cached = usable.get(display)
            check: CheckResult | None
            if cached is not None:
                findings, check = _named(cached.findings, display), cached
            else:
                source = file.source
                outcomes, log = checks.get(display, ([], {}))
                errors = [o for o in outcomes if isinstance(o, InternalError)]
                result.internal_errors += errors
                findings = suppressions.apply(source.text, display, [o for o in outcomes if isinstance(o, Finding)],
                                              self.enabled_for(display), source.utf8)
                check = None if errors or display in self.scopes else CheckResult(gated, tuple(findings), log)
            least = self.min_confidence_for(display)
            findings = [f for f in findings if f.confidence.at_least(least)]
            result.findings += findings
            if findings:
                result.sources[display] = file.source.text
            if any(f.fix is not None for f in findings):
                source = file.source
                result.fixable[display] = source
            if caching:
                records.append((display, self._record(file, mentions, check, started)))
        # A buffer (stdin, an editor) leaves the record of its file as it was, so that typing does
        # not rewrite the cache; a file without one gets the buffer's (its `stat` unknown: read next time).
        buffered = {_cache_key(f.display) for f in files if f.content is not None}
        records = [(_cache_key(d), r) for d, r in records]
        records = [(d, old[d] if d in buffered and d in old else r) for d, r in records]
        if self.cache is not None and not (len(records) == len(old) and all(old.get(d) is r for d, r in records)):
            self.cache.save(records)
        result.findings.sort(key=lambda f: f.sort_key)
        return result

    def _cached_check(self, file: _File, gated: bool) -> CheckResult | None:
        """The cache's check of the file, if it still holds (same gate, same answers)."""
        cached = file.record.result if file.record is not None and file.display not in self.scopes else None
        if cached is not None and cached.gated == gated and self.recorder.valid(cached.lookups):
            return cached
        return None

    def _checks(self, files: list[_File]) -> dict[str, tuple[list[Finding | InternalError], Lookups]]:
        """Each file's outcomes and the lookups they depend on; half of them in a forked child
        (see `forked`) unless an observer must see every file's facts here."""
        def check(part: Sequence[_File]) -> list[tuple[list[Finding | InternalError], Lookups]]:
            done = []
            for file in part:
                log: Lookups = {}
                done.append((list(self._check(file.source, log)), log))
            return done

        done = check(files) if self.observer is not None else in_halves(files, check, cost=32)
        return {file.display: outcome for file, outcome in zip(files, done)}

    def _report_unreadable(self, result: LintResult, display: str, reason: str) -> None:
        enabled = self.enabled_for(display)
        result.findings += [f for f in self._unreadable(display, reason) if enabled(f.code)]

    def _record(self, file: _File, mentions: Mentions, check: CheckResult | None, started: int) -> FileRecord:
        index = self._index
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
        stat = settled(file.stat, started)
        old = file.record
        if (old is not None and old.result is check and old.stat == stat and old.checked == checked
                and old.found == found and old.hop == hop and old.final == final and len(old.analyses) == len(analyses)
                and all(a.entries is b.entries and a.lookups is b.lookups for a, b in zip(old.analyses, analyses))):
            return old  # nothing new: the same object, so that an unchanged cache is not written again
        return FileRecord(str(file.path), file.digest, checked, found, analyses, check, stat, hop=hop, final=final)

    def lint_source(self, source: SourceFile) -> Iterator[Finding | InternalError]:
        if not self.needs_analysis(source.text):
            return
        yield from self._check(source, {})

    def _check(self, source: SourceFile, log: Lookups) -> Iterator[Finding | InternalError]:
        """Analyse one file and run the rules; every `Api` lookup made for it goes into `log`."""
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
                    indexed = index_module(source.path, source.display, source.text, self.frontend, self.api.namespaces)
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
        yield from outcomes

    def _unreadable(self, display: str, reason: str, line: int = 1, column: int = 1) -> list[Finding]:
        if any(r.code == UnreadableFile.code for r in self.rules):  # filtered by the file's scope after
            return [UnreadableFile.report(display, reason, line, column)]
        return []


class Mentions:
    """Which gate words each file names as a whole word, searched for once per word.

    Each word is a substring search in each file's UTF-8 bytes (as read: no copy), far cheaper
    than a regular expression per file; a hit is confirmed as a whole word (`\\bword\\b`). Many
    words at once (each helper of a large tree is one) are found instead by splitting each file
    into its identifiers once, so that the cost follows the text, not words times files. What
    an unchanged file was found to name in the last run (`known`, from the cache) is not
    searched again. A word with `anchors` counts only in a file that names one of them too
    (`rendezvous` beside `_symmetric_memory`).

    The sets of words each file was searched for are shared between files (most files were
    searched for the same words): a question costs one pass over the files, not one per word.
    """

    def __init__(self, texts: Mapping[str, str | bytes],
                 known: dict[str, tuple[frozenset[str], frozenset[str]]] | None = None,
                 anchors: dict[str, frozenset[str]] | None = None) -> None:
        self.texts = texts  # str, or UTF-8 bytes (`SourceFile.utf8`)
        self.anchors = anchors or {}
        known = known or {}
        self._interned: dict[frozenset[str], frozenset[str]] = {}
        self.checked: dict[str, frozenset[str]] = {d: self._intern(known[d][0] if d in known else frozenset())
                                                   for d in texts}
        self.found: dict[str, set[str]] = {d: set(known[d][1]) if d in known else set() for d in texts}

    def __call__(self, displays: Iterable[str], words: Iterable[str]) -> set[str]:
        """Those of `displays` that name one of `words`. A word is searched for in every file
        not searched for it yet, at once: each word costs one pass over the text."""
        words = set(words)
        displays = list(displays)
        wanted = frozenset(words.union(*(self.anchors.get(w, ()) for w in words)))
        asked = {self.checked[d] for d in displays}  # a few shared sets
        if any(not wanted <= checked for checked in asked):
            by_checked: dict[frozenset[str], list[str]] = {}
            for d, checked in self.checked.items():
                by_checked.setdefault(checked, []).append(d)
            todo = {checked: wanted - checked for checked in by_checked if not wanted <= checked}
            # one pass for all: a word searched again in a file gives the same answer
            self._scan([d for checked in todo for d in by_checked[checked]], frozenset().union(*todo.values()))
        return {d for d in displays if self._names(self.found[d], words)}

    def _intern(self, words: frozenset[str]) -> frozenset[str]:
        return self._interned.setdefault(words, words)

    def _names(self, found: set[str], words: set[str]) -> bool:
        anchors = self.anchors
        return any(w not in anchors or not found.isdisjoint(anchors[w]) for w in found.intersection(words))

    def known(self, display: str) -> tuple[frozenset[str], frozenset[str]]:
        return self.checked[display], frozenset(self.found[display])  # the checked set shared: one copy in the cache file

    def _scan(self, displays: list[str], words: frozenset[str]) -> None:
        needles = [(word, word.encode()) for word in words]
        by_token = {needle: word for word, needle in needles if _IDENTIFIER.fullmatch(needle)}
        if len(by_token) < _TOKENIZE_FROM:
            by_token = {}
        searched = [(word, needle) for word, needle in needles if needle not in by_token]

        def search(part: Sequence[str]) -> list[list[str]]:
            out = []
            for d in part:
                text = self.texts[d]
                data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
                named = [word for word, needle in searched if needle in data and _names_word(data, needle)]
                if by_token:  # a whole word is a whole ASCII identifier; a hit next to a non-ASCII letter is confirmed
                    hits = by_token.keys() & set(_IDENTIFIER.findall(data))
                    named += [by_token[n] for n in hits if data.isascii() or _names_word(data, n)]
                out.append(named)
            return out

        grown: dict[frozenset[str], frozenset[str]] = {}
        for d, named in zip(displays, in_halves(displays, search)):
            self.found[d].update(named)
            old = self.checked[d]
            if old not in grown:
                grown[old] = self._intern(old | words)
            self.checked[d] = grown[old]


_IDENTIFIER = re.compile(rb"[A-Za-z0-9_]+")
_TOKENIZE_FROM = 64  # words at once from which splitting each file into identifiers is cheaper


def _names_word(data: bytes, needle: bytes) -> bool:
    at = data.find(needle)
    while at != -1:
        if _whole_word_at(data, at, len(needle)):
            return True
        at = data.find(needle, at + 1)
    return False


_ASCII_WORD = frozenset(b"_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _whole_word_at(data: bytes, at: int, length: int) -> bool:
    """Whether the identifier found at `at` is a whole word there (as `\\bword\\b` on the text)."""
    return not (at and _word_char_ending(data, at - 1)) and not (at + length < len(data) and _word_char_starting(data, at + length))


def _word_char_ending(data: bytes, end: int) -> bool:
    """Whether the character whose last byte is at `end` is a word character."""
    byte = data[end]
    if byte < 0x80:
        return byte in _ASCII_WORD
    start = end
    while start > 0 and end - start < 3 and data[start] & 0xC0 == 0x80:  # back to the lead byte
        start -= 1
    return _is_word(data[start:end + 1])


def _word_char_starting(data: bytes, start: int) -> bool:
    byte = data[start]
    if byte < 0x80:
        return byte in _ASCII_WORD
    size = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
    return _is_word(data[start:start + size])


def _is_word(encoded: bytes) -> bool:
    char = encoded.decode("utf-8", "replace")[:1]
    return char.isalnum() or char == "_"


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
