"""Suppression comments: `# commgroup-lint: ignore[CODES]` and `# commgroup-lint: ignore-file[CODES]`.

A line suppression covers its own line and, when it sits on the first or the last line of a
statement that spans several lines, every line of that statement (the logical line, as
`tokenize` sees it: a compound statement's header, not its body); the last line is where a
comment goes when the first ends in a backslash or inside a string. A file suppression covers the file.
Codes are named: a directive without codes suppresses nothing and is reported (CGL101). A
named code that suppressed nothing is reported (CGL100), unless this run does not check that
code (deselected, or ignored for the file), since then nobody can tell whether it is needed.

`# noqa: CODES` (flake8's and ruff's comment) is an alias: for the CGL codes it names it is
`# commgroup-lint: ignore[those codes]`, unused ones reported alike; its other codes are other
linters' business, and a `# noqa` naming no CGL code (blanket, or another linter's codes)
changes nothing here.

Comments are read with `tokenize`, so text inside strings is never taken for a directive, and
nothing is parsed again.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property

from commgroup_lint.model import Finding
from commgroup_lint.rule import all_rules
from commgroup_lint.rules.cgl100_unused_suppression import UnusedSuppression
from commgroup_lint.rules.cgl101_blanket_suppression import BlanketSuppression

MARKER = "commgroup-lint:"
_MARKER_BYTES = MARKER.encode()
DIRECTIVE = re.compile(
    r"#\s*commgroup-lint:\s*(?P<kind>ignore-file|ignore)(?![\w-])(?:\[(?P<codes>[^\]]*)\])?",
    re.IGNORECASE,
)
NOQA = re.compile(r"#\s*noqa:\s?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*)", re.IGNORECASE)
_NOQA_CGL_BYTES = re.compile(rb"noqa[^\n]*cgl")  # a `# noqa` only matters when it names a CGL code
# Reported when unused only through their own rules' logic, never as unused suppressions.
SELF_CODES = frozenset({UnusedSuppression.code, BlanketSuppression.code})


@dataclass
class Directive:
    file_level: bool
    line: int
    column: int  # 1-based, of the `#` that starts the directive
    end_column: int
    codes: tuple[str, ...]
    text: str
    used: set[str] = field(default_factory=set)
    noqa: bool = False  # written as a flake8-style noqa comment

    @property
    def blanket(self) -> bool:
        return not self.codes


@dataclass
class Directives:
    line: dict[int, list[Directive]] = field(default_factory=dict)
    file: list[Directive] = field(default_factory=list)
    statement_start: dict[int, int] = field(default_factory=dict)  # line -> first line of its statement

    def all(self) -> list[Directive]:
        return sorted([*self.file, *(d for ds in self.line.values() for d in ds)], key=lambda d: (d.line, d.column))

    @cached_property
    def _statement_ends(self) -> dict[int, int]:
        """The first line of each statement -> its last line (asked once the file is scanned)."""
        return statement_ends(self.statement_start)

    def covering(self, line: int) -> Iterable[Directive]:
        yield from self.file
        yield from self.line.get(line, ())
        start = self.statement_start.get(line, line)
        if start != line:
            yield from self.line.get(start, ())
        end = self._statement_ends.get(start, start)
        if end not in (line, start):
            yield from self.line.get(end, ())


@dataclass
class Layout:
    """What the tokenizer says about a file's lines (tokens up to a tokenize error are read)."""

    comments: list[tokenize.TokenInfo] = field(default_factory=list)
    statement_start: dict[int, int] = field(default_factory=dict)  # line -> first line of its statement
    open_ends: set[int] = field(default_factory=set)  # lines that end outside a string and a backslash continuation


def statement_ends(statement_start: dict[int, int]) -> dict[int, int]:
    """The first line of each statement -> its last line."""
    ends: dict[int, int] = {}
    for line, start in statement_start.items():
        ends[start] = max(ends.get(start, start), line)
    return ends


def layout(text: str) -> Layout:
    """Lines as the parser counts them: CR, LF and CRLF each end one (a lone CR too, even
    inside a string), so line numbers agree with the findings'."""
    found = Layout()
    statement_first: int | None = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if tok.type == tokenize.COMMENT:
                found.comments.append(tok)
            elif tok.type in (tokenize.NEWLINE, tokenize.NL):
                found.open_ends.add(tok.start[0])
                if tok.type == tokenize.NEWLINE:
                    first = statement_first if statement_first is not None else tok.start[0]
                    for line in range(first, tok.end[0] + 1):
                        found.statement_start[line] = first
                    statement_first = None
            elif tok.type not in (tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
                if statement_first is None:
                    statement_first = tok.start[0]
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


def scan(text: str, utf8: bytes | None = None) -> Directives:
    """The directives in `text` (`utf8`: the same text in UTF-8, for a cheaper first test:
    lowering bytes is several times faster than lowering a string, and most files have none)."""
    found = Directives()
    lowered = utf8.lower() if utf8 is not None else text.lower().encode("utf-8", "surrogatepass")
    if _MARKER_BYTES not in lowered and _NOQA_CGL_BYTES.search(lowered) is None:
        return found  # (other linters' `# noqa` comments are common: they cost no tokenizing)
    lines = layout(text)
    for tok in lines.comments:
        for match in DIRECTIVE.finditer(tok.string):
            _add(found, match, tok.start[0], tok.start[1])
        for match in NOQA.finditer(tok.string):
            _add_noqa(found, match, tok.start[0], tok.start[1])
    found.statement_start = lines.statement_start
    return found


def _add_noqa(found: Directives, match: re.Match[str], line: int, offset: int) -> None:
    """`# noqa: CODES` as a line directive for the CGL codes among CODES, if any."""
    named = (c.upper() for c in re.split(r"[,\s]+", match.group("codes")) if c)
    codes = tuple(dict.fromkeys(c for c in named if c.startswith("CGL")))
    if codes:
        found.line.setdefault(line, []).append(Directive(
            file_level=False, line=line, column=offset + match.start() + 1, end_column=offset + match.end() + 1,
            codes=codes, text=match.group(0), noqa=True))


def _add(found: Directives, match: re.Match[str], line: int, offset: int) -> None:
    raw = match.group("codes")
    codes = tuple(dict.fromkeys(c.strip().upper() for c in (raw or "").split(",") if c.strip()))
    directive = Directive(
        file_level=match.group("kind").lower() == "ignore-file",
        line=line,
        column=offset + match.start() + 1,
        end_column=offset + match.end() + 1,
        codes=codes,
        text=match.group(0),
    )
    if directive.file_level:
        found.file.append(directive)
    else:
        found.line.setdefault(line, []).append(directive)


def apply(text: str, display: str, findings: Iterable[Finding], enabled: Callable[[str], bool],
          utf8: bytes | None = None) -> list[Finding]:
    """The findings that survive `enabled` (selection and per-file ignores) and the file's
    suppression comments, plus the findings about the comments themselves (CGL100, CGL101)."""
    findings = [f for f in findings if enabled(f.code)]
    directives = scan(text, utf8)
    if not directives.file and not directives.line:
        return findings
    kept = [f for f in findings if not _suppress(directives, f)]
    known = {r.code for r in all_rules().rules}
    extra: list[Finding] = []
    for d in directives.all():
        if d.blanket:
            extra.append(BlanketSuppression.report(display, d.line, d.column, d.end_column, d.file_level))
            continue
        for code in d.codes:
            if code in d.used or code in SELF_CODES:
                continue
            if code not in known:
                extra.append(UnusedSuppression.report(display, d.line, d.column, d.end_column, code, d.file_level,
                                                      unknown=True, noqa=d.noqa))
            elif enabled(code):
                extra.append(UnusedSuppression.report(display, d.line, d.column, d.end_column, code, d.file_level,
                                                      noqa=d.noqa))
    # The file's own directives (and per-file ignores) may silence these too.
    kept += [f for f in extra if enabled(f.code) and not _suppress(directives, f)]
    return kept


def _suppress(directives: Directives, finding: Finding) -> bool:
    for d in directives.covering(finding.start.line):
        if finding.code in d.codes:
            d.used.add(finding.code)
            return True
    return False
