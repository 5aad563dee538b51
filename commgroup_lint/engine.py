"""The engine: read every file, parse only those that can matter, run all rules in one pass.

A file that names no allocator cannot produce a finding, so it is read and decoded (an
undecodable file is still reported) but never parsed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from commgroup_lint.analysis.api import Api
from commgroup_lint.analysis.module import analyze_module
from commgroup_lint.analysis.summaries import IndexedModule, SummaryIndex, index_module
from commgroup_lint import suppressions
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
                 per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = (), gate: bool = True) -> None:
        self.api = Api(profile)
        self.selection = selection
        self.per_file_ignores = per_file_ignores  # (anchored glob, codes), see config.Config
        self.rules: list[Rule] = [r() for r in all_rules().rules if selection.enabled(r.code)]
        self._gate = _word_pattern(self._gate_words())
        self._indexed: dict[str, IndexedModule] = {}
        self.gate = gate  # False: parse and analyse every file, even those naming no allocator (robustness runs)

    def _gate_words(self) -> set[str]:
        """Only code that names an allocator can hold a finding: allocation sites, and the
        definitions of allocators (which allocate through a context or another allocator)."""
        names = [*self.api.allocators.names(), *self.api.contexts.names()]
        return {name.partition("(")[0].rpartition(".")[2] for name in names}

    def index(self, sources: list[SourceFile]) -> None:
        """Summarise the scanned code's own helpers before any file is checked."""
        index = SummaryIndex(self.api)
        index.build((s.path, s.display, s.text) for s in sources)
        self._indexed = index.modules
        self._gate = _word_pattern(self._gate_words())

    def needs_analysis(self, text: str) -> bool:
        return not self.gate or self._gate.search(text) is not None

    def enabled_for(self, display: str) -> Callable[[str], bool]:
        """Whether a code is reported in one file: selected, and not ignored there by per-file-ignores."""
        ignored = tuple(c for pattern, codes in self.per_file_ignores if is_excluded(display, (pattern,)) for c in codes)
        return lambda code: self.selection.enabled(code) and not any(code.startswith(i) for i in ignored)

    def lint(self, files: Iterable[Discovered], progress: Callable[[], None] | None = None) -> LintResult:
        """Check `files`; `progress` (if given) is called once per file as it is done."""
        result = LintResult()
        sources: list[SourceFile] = []
        for item in files:
            result.files_checked += 1
            try:
                sources.append(read_source(item.path, item.display))
            except SourceError as err:
                enabled = self.enabled_for(item.display)
                result.findings += [f for f in self._unreadable(item.display, str(err)) if enabled(f.code)]
                if progress is not None:
                    progress()
        self.index(sources)
        for source in sources:
            outcomes = list(self.lint_source(source))
            result.internal_errors += [o for o in outcomes if isinstance(o, InternalError)]
            findings = suppressions.apply(source.text, source.display, [o for o in outcomes if isinstance(o, Finding)],
                                          self.enabled_for(source.display))
            result.findings += findings
            if findings:
                result.sources[source.display] = source.text
            if any(f.fix is not None for f in findings):
                result.fixable[source.display] = source
            if progress is not None:
                progress()
        result.findings.sort(key=lambda f: f.sort_key)
        return result

    def lint_source(self, source: SourceFile) -> Iterator[Finding | InternalError]:
        if not self.needs_analysis(source.text):
            return
        try:
            indexed = self._indexed.get(source.display)
            if indexed is None or indexed.text != source.text:  # not indexed, or a fix changed it
                indexed = index_module(source.path, source.display, source.text)
        except ParseFailure as failure:
            yield from self._unreadable(source.display, failure.reason, failure.line, failure.column)
            return
        try:
            functions = analyze_module(indexed.module, indexed.imports, self.api)
        except RecursionError:
            yield from self._unreadable(source.display, "nested too deeply to analyse")
            return
        except Exception as err:  # noqa: BLE001 - reported, never shown as a traceback
            yield InternalError(source.display, "analysis", f"{type(err).__name__}: {err}")
            return
        ctx = FileContext(source, indexed.module, indexed.imports, functions, self.api)
        for rule in self.rules:
            try:
                yield from list(rule.check(ctx))
            except Exception as err:  # noqa: BLE001
                yield InternalError(source.display, rule.code, f"{type(err).__name__}: {err}")

    def _unreadable(self, display: str, reason: str, line: int = 1, column: int = 1) -> list[Finding]:
        if self.selection.enabled(UnreadableFile.code):
            return [UnreadableFile.report(display, reason, line, column)]
        return []


def _word_pattern(words: Iterable[str]) -> re.Pattern[str]:
    ordered = sorted(words, key=len, reverse=True)
    if not ordered:
        return re.compile(r"(?!x)x")
    return re.compile(r"\b(?:" + "|".join(map(re.escape, ordered)) + r")\b")
