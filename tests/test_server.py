"""`commgroup-lint server` end to end (issue 15, item 7): a real LSP client (pytest-lsp, on pygls)
starts the server as an editor does, over stdio, opens the bundled example and reads what comes
back: diagnostics, quick fixes as workspace edits, the fix-all source action; and that the
document's configuration and its project apply."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from commgroup_lint import rule_url

pytestmark = pytest.mark.asyncio(loop_scope="function")

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "dp_attention"
PUBLISH = types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The bundled example in a git work tree of its own (the server writes its cache there)."""
    root = tmp_path / "project"
    shutil.copytree(EXAMPLE, root / "dp_attention")
    (root / ".git").mkdir()
    return root


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "commgroup_lint", "server"]))
async def client(lsp_client: LanguageClient, project: Path):
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=project.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=project.as_uri(), name="project")]))
    yield
    await lsp_client.shutdown_session()


async def published(client: LanguageClient, send) -> types.PublishDiagnosticsParams:  # noqa: ANN001
    """Send a notification and wait for the diagnostics it causes."""
    waiting = client.protocol.wait_for_notification_async(PUBLISH)
    send()
    return await asyncio.wait_for(waiting, timeout=120)


async def open_file(client: LanguageClient, path: Path, text: str | None = None) -> types.PublishDiagnosticsParams:
    document = types.TextDocumentItem(uri=path.as_uri(), language_id="python", version=1,
                                      text=path.read_text(encoding="utf-8") if text is None else text)
    return await published(client, lambda: client.text_document_did_open(
        types.DidOpenTextDocumentParams(text_document=document)))


def summary(params: types.PublishDiagnosticsParams) -> list[tuple[str, int, int, int, int]]:
    return [(d.code, d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character)
            for d in params.diagnostics]


def apply(text: str, edit: types.WorkspaceEdit, uri: str) -> str:
    """Apply a workspace edit as an editor does (this example is ASCII: a character is a column)."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    assert edit.changes is not None and list(edit.changes) == [uri]
    for change in sorted(edit.changes[uri], key=lambda c: (c.range.start.line, c.range.start.character), reverse=True):
        start = offsets[change.range.start.line] + change.range.start.character
        end = offsets[change.range.end.line] + change.range.end.character
        text = text[:start] + change.new_text + text[end:]
    return text


async def actions_at(client: LanguageClient, uri: str, diagnostic: types.Diagnostic,
                     only: list[str] | None = None) -> list[types.CodeAction]:
    result = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=diagnostic.range,
        context=types.CodeActionContext(diagnostics=[diagnostic], only=only)))
    assert result is not None
    return [a for a in result if isinstance(a, types.CodeAction)]


async def test_diagnostics_of_the_bundled_example(client: LanguageClient, project: Path) -> None:
    path = project / "dp_attention" / "deepseek_v4_forward.py"
    params = await open_file(client, path)
    assert params.uri == path.as_uri()
    # check --format json: (23, 50) and (27, 51), 1-based, to the end of the call
    assert summary(params) == [("CGL001", 22, 49, 22, 71), ("CGL001", 26, 50, 26, 71)]
    first = params.diagnostics[0]
    assert (first.source, first.severity) == ("commgroup-lint", types.DiagnosticSeverity.Error)
    assert first.code_description is not None and first.code_description.href == rule_url("CGL001")
    assert first.message.startswith("`get_global_dp_buffer` is called without its group argument `group`")


async def test_a_quick_fix_carries_the_fix_as_a_workspace_edit(client: LanguageClient, project: Path) -> None:
    path = project / "dp_attention" / "deepseek_v4_forward.py"
    text = path.read_text(encoding="utf-8")
    params = await open_file(client, path)
    actions = await actions_at(client, path.as_uri(), params.diagnostics[0])
    assert [(a.title, a.kind, a.is_preferred) for a in actions] == [
        ("Fix CGL001: Pass `get_tp_group()`: the group of `dp_gather_partial` at line 24", "quickfix", True),
        ("Disable CGL001 for this line", "quickfix", None),
        ("commgroup-lint: apply all safe fixes", "source.fixAll.commgroup-lint", None),
    ]
    fixed = apply(text, actions[0].edit, path.as_uri())
    assert fixed == text.replace(
        "from sglang.srt.distributed import get_tensor_model_parallel_world_size\n",
        "from sglang.srt.distributed import get_tensor_model_parallel_world_size, get_tp_group\n",
    ).replace("= get_global_dp_buffer(), hidden_states", "= get_global_dp_buffer(get_tp_group()), hidden_states")
    disabled = apply(text, actions[1].edit, path.as_uri())
    assert disabled.splitlines()[22].endswith("hidden_states  # commgroup-lint: ignore[CGL001]")

    # the editor applies the fix: the document changes, and the diagnostics with it
    after = await published(client, lambda: client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=path.as_uri(), version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=fixed)])))
    assert (after.version, summary(after)) == (2, [("CGL001", 26, 50, 26, 71)])


async def test_fix_all_applies_the_safe_fixes_as_check_fix_does(client: LanguageClient, project: Path) -> None:
    path = project / "dp_attention" / "layer_communicator.py"
    text = path.read_text(encoding="utf-8")
    params = await open_file(client, path)
    assert [d.code for d in params.diagnostics] == ["CGL004", "CGL002"]
    unsafe = await actions_at(client, path.as_uri(), params.diagnostics[0], only=[types.CodeActionKind.QuickFix])
    assert unsafe[0].title.startswith("Unsafe fix CGL004: Pass `group`: the convention of 2 sibling call sites")
    assert unsafe[0].is_preferred is False
    [fix_all] = await actions_at(client, path.as_uri(), params.diagnostics[1], only=[types.CodeActionKind.SourceFixAll])
    assert fix_all.kind == "source.fixAll.commgroup-lint"

    expected = project / "expected.py"
    expected.write_text(text, encoding="utf-8")
    done = await asyncio.create_subprocess_exec(sys.executable, "-m", "commgroup_lint", "check", "--fix", "--no-cache",
                                                str(expected), stdout=asyncio.subprocess.DEVNULL)
    await done.wait()
    assert apply(text, fix_all.edit, path.as_uri()) == expected.read_text(encoding="utf-8") != text


async def test_the_projects_configuration_applies(client: LanguageClient, project: Path) -> None:
    path = project / "dp_attention" / "legacy_buffers.py"
    assert [d.code for d in (await open_file(client, path)).diagnostics] == ["CGL003", "CGL002"]
    (project / "pyproject.toml").write_text('[tool.commgroup-lint]\nignore = ["CGL003"]\n')
    saved = await published(client, lambda: client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=path.as_uri()))))
    assert [d.code for d in saved.diagnostics] == ["CGL002"]


async def test_the_rest_of_the_project_is_the_context(client: LanguageClient, project: Path) -> None:
    """The helper in `comm.py` decides the group: an open `user.py` alone shows neither."""
    (project / "pkg").mkdir()
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "comm.py").write_text(
        "from sglang.srt.layers.dp_attention import get_attention_tp_group\n\n\n"
        "def all_gather_attn_tp(output, input_):\n    get_attention_tp_group().all_gather_into_tensor(output, input_)\n")
    user = project / "pkg" / "user.py"
    text = ("from sglang.srt.distributed import get_tp_group\n"
            "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n"
            "from pkg.comm import all_gather_attn_tp\n\n\n"
            "def gather(x):\n    out = get_local_dp_buffer(get_tp_group())\n    all_gather_attn_tp(out, x)\n")
    params = await open_file(client, user, text)  # never saved: the editor's text is what is checked
    assert summary(params) == [("CGL002", 6, 10, 6, 45)]


async def test_a_bad_configuration_is_shown_not_raised(client: LanguageClient, project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.commgroup-lint]\nselct = ["CGL001"]\n')
    path = project / "dp_attention" / "deepseek_v4_forward.py"
    waiting = client.protocol.wait_for_notification_async(types.WINDOW_SHOW_MESSAGE)
    params = await open_file(client, path)
    message = await asyncio.wait_for(waiting, timeout=120)
    assert list(params.diagnostics) == []
    assert message.type == types.MessageType.Error
    assert message.message.startswith(f"commgroup-lint: {project / 'pyproject.toml'}: key 'tool.commgroup-lint.selct'")


async def test_each_document_reports_as_its_nearest_configuration(client: LanguageClient, project: Path) -> None:
    """As `check` run in the workspace folder (tests/test_nested_config.py): `dpa/` ignores CGL002."""
    source = ("from sglang.srt.distributed import get_tp_group\n"
              "from sglang.srt.layers.dp_attention import attn_tp_all_gather_into_tensor, get_local_dp_buffer\n\n\n"
              "def gather(x):\n    out = get_local_dp_buffer(get_tp_group())\n    attn_tp_all_gather_into_tensor(out, x)\n"
              "    return get_local_dp_buffer()\n")
    (project / "pyproject.toml").write_text("[tool.commgroup-lint]\n")
    for name in ("dpa", "other"):
        (project / name).mkdir()
        (project / name / "mod.py").write_text(source)
    (project / "dpa" / "pyproject.toml").write_text('[tool.commgroup-lint]\nignore = ["CGL002"]\n')
    nested = [("CGL001", 7, 11, 7, 32)]
    assert summary(await open_file(client, project / "dpa" / "mod.py")) == nested
    assert summary(await open_file(client, project / "other" / "mod.py")) == [("CGL002", 5, 10, 5, 45), *nested]
