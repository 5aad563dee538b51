"""`commgroup-lint server`: a language server (LSP over stdio, built on pygls).

- Diagnostics on open, change and save: `code` is the rule code, `source` is `commgroup-lint`,
  `codeDescription` links the rule's page. A buffer is checked as `check` checks its file
  (`editor.check_buffer`: its configuration, its project as context, the cache). Changes that
  arrive during a check are coalesced: the latest text is checked next, and the result for a
  text that is no longer current is never published.
- Code actions: each fix at the cursor as a quick fix carrying a workspace edit (titled with
  the fix's description; an unsafe one says so and is never preferred), `Disable CODE for this
  line` (the comment `--add-noqa` writes), and the `source.fixAll.commgroup-lint` action, which
  applies the safe fixes as `--fix` does.
- A configuration that cannot be used is shown to the user (once, until it changes), and the
  document gets no findings.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable, Sequence

from lsprotocol import types
from pygls import uris
from pygls.lsp.server import LanguageServer
from pygls.workspace.position_codec import PositionCodec, ServerTextPosition

from commgroup_lint import __version__, rule_url
from commgroup_lint.config import ConfigError
from commgroup_lint.editor import Checked, check_buffer, fixed_text
from commgroup_lint.engine import LintResult
from commgroup_lint.model import Applicability, Edit, Finding, Severity
from commgroup_lint.noqa import add_suppressions
from commgroup_lint.profile import ProfileError
from commgroup_lint.source import line_starts, position

SOURCE = "commgroup-lint"
FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"
_SEVERITY = {Severity.ERROR: types.DiagnosticSeverity.Error, Severity.WARNING: types.DiagnosticSeverity.Warning}
log = logging.getLogger(__name__)


class CommgroupServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(SOURCE, __version__)
        self.checked: dict[str, Checked] = {}  # by URI: the last check of each open document
        self._checking: set[str] = set()  # URIs whose check loop is running
        self._problems: dict[str, str] = {}  # by URI: the configuration problem shown last
        self._lock = asyncio.Lock()  # one check at a time: each reads the whole project

    def request_check(self, uri: str) -> None:
        """Check the document soon; a loop already running for it picks up the new text."""
        if uri not in self._checking:
            self._checking.add(uri)
            asyncio.get_running_loop().create_task(self._check_until_current(uri))

    async def _check_until_current(self, uri: str) -> None:
        try:
            while uri in self.workspace.text_documents:
                document = self.workspace.get_text_document(uri)
                text, version = document.source, document.version
                checked = await self.check(uri, text)
                current = self.workspace.text_documents.get(uri)
                if current is None or current.source != text:
                    continue  # edited (or closed) meanwhile: that result is stale
                self.checked[uri] = checked
                where = self.positions(checked.text)
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                    uri=uri, version=version, diagnostics=[diagnostic(f, where) for f in checked.result.findings]))
                return
        finally:
            self._checking.discard(uri)

    async def check(self, uri: str, text: str) -> Checked:
        """`check_buffer` in a worker thread, one at a time; a configuration that cannot be
        used is shown to the user (once, until it changes) instead of raised."""
        path = self.workspace.get_text_document(uri).path
        async with self._lock:
            checked, problem = await asyncio.to_thread(_check, uri, path, text, self.folder_of(path))
        if problem is not None and self._problems.get(uri) != problem:
            self.window_show_message(types.ShowMessageParams(types.MessageType.Error, problem))
        if problem is None:
            self._problems.pop(uri, None)
        else:
            self._problems[uri] = problem
        return checked

    async def current(self, uri: str) -> Checked:
        """The check of the document's text as it is now (checked again if it changed since)."""
        text = self.workspace.get_text_document(uri).source
        checked = self.checked.get(uri)
        return checked if checked is not None and checked.text == text else await self.check(uri, text)

    def positions(self, text: str) -> Positions:
        return Positions(text, self.workspace.position_codec)

    def folder_of(self, path: str | None) -> str | None:
        """The innermost workspace folder holding `path` (the editor's project), else the root."""
        folders = [p for f in self.workspace.folders.values() if (p := uris.to_fs_path(f.uri)) is not None]
        holding = [f for f in folders if path is not None and os.path.commonpath([f, path]) == f]
        return max(holding, key=len, default=self.workspace.root_path)


def _check(uri: str, path: str | None, text: str, folder: str | None) -> tuple[Checked, str | None]:
    """The check of a buffer, or no findings and what the user should be told."""
    try:
        if path is None:
            raise ConfigError(f"{uri}: not a file on this machine")
        return check_buffer(path, text, folder), None
    except (ConfigError, ProfileError) as err:
        problem = f"commgroup-lint: {err}"
    except Exception as err:  # noqa: BLE001 - a bug: shown, and the server keeps serving
        log.exception("checking %s failed", uri)
        problem = f"commgroup-lint: internal error on {uri}: {err} (please report this)"
    return Checked(text, None, LintResult()), problem


def create_server() -> CommgroupServer:
    server = CommgroupServer()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: CommgroupServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.request_check(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: CommgroupServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.request_check(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: CommgroupServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.request_check(params.text_document.uri)  # the project around it may have changed too

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CommgroupServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.checked.pop(params.text_document.uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL]))
    async def code_action(ls: CommgroupServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        checked = await ls.current(uri)
        where = ls.positions(checked.text)
        only = params.context.only
        actions: list[types.CodeAction] = []
        if only is None or _asks(only, types.CodeActionKind.QuickFix):
            for f in checked.result.findings:
                if _overlaps(where.finding(f), params.range):
                    actions += quick_fixes(uri, f, where)
        if only is None or _asks(only, FIX_ALL):
            fixed = await asyncio.to_thread(fixed_text, checked)
            if fixed is not None:
                actions.append(types.CodeAction(
                    title="commgroup-lint: apply all safe fixes", kind=FIX_ALL,
                    edit=where.workspace_edit(uri, [_replacement(checked.text, fixed)])))
        return actions

    return server


def serve() -> None:
    """Speak LSP on stdin and stdout until the client says exit."""
    create_server().start_io()


class Positions:
    """A text's character offsets and (line, code point) pairs, in the client's units (UTF-16
    unless the client negotiated another encoding), its lines split as `source.line_starts`
    splits them."""

    def __init__(self, text: str, codec: PositionCodec) -> None:
        self.text, self.codec = text, codec
        self.starts = line_starts(text)
        self.lines = [text[a:b] for a, b in zip(self.starts, [*self.starts[1:], len(text)], strict=True)]

    def at(self, line: int, column: int) -> types.Position:
        """A 1-based line and a 0-based code-point column."""
        return self.codec.position_to_client_units(self.lines, ServerTextPosition(line - 1, column))

    def finding(self, f: Finding) -> types.Range:
        return types.Range(start=self.at(f.start.line, f.start.column - 1), end=self.at(f.end.line, f.end.column - 1))

    def workspace_edit(self, uri: str, edits: Iterable[Edit]) -> types.WorkspaceEdit:
        changes = [types.TextEdit(range=types.Range(start=self.at(*position(self.starts, e.start)),
                                                    end=self.at(*position(self.starts, e.end))),
                                  new_text=e.replacement)
                   for e in sorted(edits, key=lambda e: (e.start, e.end))]
        return types.WorkspaceEdit(changes={uri: changes})


def diagnostic(f: Finding, where: Positions) -> types.Diagnostic:
    return types.Diagnostic(
        range=where.finding(f), message=f.message, severity=_SEVERITY[f.severity], code=f.code,
        source=SOURCE, code_description=types.CodeDescription(href=rule_url(f.code)),
    )


def quick_fixes(uri: str, f: Finding, where: Positions) -> list[types.CodeAction]:
    """The finding's fix (if it has one), then a suppression comment for its line."""
    actions = []
    related = [diagnostic(f, where)]
    if f.fix is not None:
        unsafe = f.fix.applicability is Applicability.UNSAFE
        actions.append(types.CodeAction(
            title=f"{'Unsafe fix' if unsafe else 'Fix'} {f.code}: {f.fix.description}",
            kind=types.CodeActionKind.QuickFix, diagnostics=related, is_preferred=not unsafe,
            edit=where.workspace_edit(uri, f.fix.edits)))
    suppressed = add_suppressions(where.text, [f])
    if suppressed.comments:
        actions.append(types.CodeAction(
            title=f"Disable {f.code} for this line", kind=types.CodeActionKind.QuickFix, diagnostics=related,
            edit=where.workspace_edit(uri, [_replacement(where.text, suppressed.text)])))
    return actions


def _replacement(old: str, new: str) -> Edit:
    """One edit that turns `old` into `new`: the span between their common prefix and suffix."""
    prefix = 0
    limit = min(len(old), len(new))
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]:
        suffix += 1
    return Edit(prefix, len(old) - suffix, new[prefix:len(new) - suffix])


def _asks(only: Sequence[str], kind: str) -> bool:
    """Whether a request limited to the kinds `only` wants actions of `kind` (kinds nest by dots)."""
    return any(kind == o or kind.startswith(f"{o}.") for o in only)


def _overlaps(a: types.Range, b: types.Range) -> bool:
    def key(p: types.Position) -> tuple[int, int]:
        return (p.line, p.character)

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)
