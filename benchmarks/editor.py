"""What a one-file check costs on a large project with a warm cache: the pre-commit hook with one
staged file, and an editor's diagnostics from `commgroup-lint server`.

    python benchmarks/editor.py TREE                    # e.g. the `sglang` folder of a release
    python benchmarks/editor.py --sglang 0.5.23         # pip-downloads the wheel, unzips it
    python benchmarks/editor.py TREE --file srt/models/deepseek_v4.py --repeat 9

TREE is copied into a temporary project (with a `commgroup-lint.toml`, so that it has a root and
every run sees the whole project), and one run over the whole project warms the cache. Then:

- one file: `commgroup-lint check -q FILE` in a subprocess, as the hook runs it (medians);
- editor: a pygls client starts `commgroup-lint server` over stdio and opens FILE; printed are
  the time from `didOpen` to its diagnostics (the server just started) and, for each `didChange`
  that appends a comment line, the time to the new diagnostics (median).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from bench import copy_tree, fetch_sglang

CHECK = [sys.executable, "-m", "commgroup_lint", "check", "-q"]
SERVER = [sys.executable, "-m", "commgroup_lint", "server"]


def one_file(project: Path, file: str, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run([*CHECK, file], cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - start)
        if done.returncode not in (0, 1):
            sys.exit(f"check {file} failed ({done.returncode}): {done.stderr[-2000:]}")
    return times


async def editor(project: Path, file: str, repeat: int) -> tuple[float, list[float], int]:
    """Seconds to the first diagnostics, to those after each change, and how many findings."""
    client = LanguageClient("commgroup-lint-bench", "1")
    published: asyncio.Queue[types.PublishDiagnosticsParams] = asyncio.Queue()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_publish(params: types.PublishDiagnosticsParams) -> None:
        published.put_nowait(params)

    await client.start_io(*SERVER, cwd=str(project))
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities(),
                                                         root_uri=project.as_uri()))
    client.initialized(types.InitializedParams())
    path = project / file
    uri, text = path.as_uri(), path.read_text(encoding="utf-8")
    start = time.perf_counter()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    first = await asyncio.wait_for(published.get(), timeout=300)
    opened = time.perf_counter() - start
    changes = []
    for version in range(2, repeat + 2):
        text += f"# edit {version}\n"
        start = time.perf_counter()
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
        await asyncio.wait_for(published.get(), timeout=300)
        changes.append(time.perf_counter() - start)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return opened, changes, len(first.diagnostics)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", nargs="?", type=Path)
    parser.add_argument("--sglang", metavar="VERSION", help="download this SGLang release instead of TREE")
    parser.add_argument("--file", help="the file to check, relative to TREE (default: the largest model file "
                                       "that names get_global_dp_buffer)")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    if (args.tree is None) == (args.sglang is None):
        parser.error("give a TREE or --sglang VERSION")
    with tempfile.TemporaryDirectory(prefix="cgl-editor-") as tmp:
        base = Path(tmp)
        source = fetch_sglang(args.sglang, base / "dl") if args.sglang else args.tree
        project = base / "project"
        tree = copy_tree(source, project)
        (project / "commgroup-lint.toml").write_text("")
        if args.file:
            file = f"{tree.name}/{args.file}"
        else:
            named = [p for p in tree.rglob("*.py") if "get_global_dp_buffer" in p.read_text(errors="replace")]
            file = max(named, key=lambda p: p.stat().st_size).relative_to(project).as_posix()
        files = sum(1 for _ in tree.rglob("*.py"))
        subprocess.run([*CHECK, tree.name], cwd=project, stdout=subprocess.DEVNULL)  # warm the cache
        print(f"{source}: {files} Python files; checking {file}; {sys.version.split()[0]}")
        cli = one_file(project, file, args.repeat)
        print(f"one-file run (warm cache): median {statistics.median(cli):.2f} s "
              f"(min {min(cli):.2f}, max {max(cli):.2f}, {len(cli)} runs)")
        opened, changes, findings = asyncio.run(editor(project, file, args.repeat))
        print(f"editor: diagnostics ({findings}) {opened:.2f} s after didOpen (server just started); "
              f"after a change: median {statistics.median(changes):.2f} s "
              f"(min {min(changes):.2f}, max {max(changes):.2f}, {len(changes)} changes)")


if __name__ == "__main__":
    main()
