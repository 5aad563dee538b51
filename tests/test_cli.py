"""The `commgroup-lint` console script, run as a user runs it (a subprocess).

Covers: `check` with no path (`.`), each exit code, the JSON schema and that machine formats
print only the document, the text format (finding line, code frame, summary), colour only on a
terminal and never with NO_COLOR, `--select`/`--ignore` lists and prefixes, `rules`, `explain`,
`--version`, and the basics of bad input. Options of `check` beyond these are in
test_cli_options.py; configuration, suppressions and the other formats have their own modules.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from commgroup_lint import __version__
from commgroup_lint.rule import all_rules

REPO = Path(__file__).resolve().parent.parent
EXE = shutil.which("commgroup-lint", path=str(Path(sys.executable).parent)) or shutil.which("commgroup-lint")

IMPORTS = (
    "from sglang.srt.distributed import get_tp_group\n"
    "from sglang.srt.layers.dp_attention import attn_tp_all_gather_into_tensor, get_local_dp_buffer\n"
)
# CGL001 at 6:12 (`get_local_dp_buffer()`), CGL002 at 10:11 (TP buffer, attention-TP gather).
BAD = IMPORTS + (
    "\n\ndef missing():\n    return get_local_dp_buffer()\n"
    "\n\ndef mismatch(x):\n    out = get_local_dp_buffer(get_tp_group())\n    attn_tp_all_gather_into_tensor(out, x)\n"
)
CLEAN = IMPORTS + "\n\ndef fine(x):\n    out = get_local_dp_buffer(get_tp_group())\n    get_tp_group().all_reduce(out)\n"
ISSUE2_KEYS = {
    "code": str, "path": str, "line": int, "column": int, "end_line": int, "end_column": int,
    "message": str, "severity": str, "fix_available": bool,
}
# Colour SGR parameters (foreground/background, 8/16/256/true colour); bold or dim are not colour.
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    assert EXE, "the commgroup-lint console script is not installed"
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM", "COLUMNS")}
    proc = subprocess.run([EXE, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**base, "COLUMNS": "200", **(env or {})})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def findings(proc: subprocess.CompletedProcess[str]) -> list[tuple[str, int, int, str]]:
    return [(f["path"], f["line"], f["column"], f["code"]) for f in json.loads(proc.stdout)]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text(BAD)
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN)
    return tmp_path


# --- paths and exit codes ----------------------------------------------------------------------

def test_check_defaults_to_the_current_directory(tree: Path) -> None:
    proc = run("check", "--format", "json", cwd=tree)
    assert proc.returncode == 1
    assert findings(proc) == [("./pkg/bad.py", 6, 12, "CGL001"), ("./pkg/bad.py", 10, 11, "CGL002")]
    assert findings(run("check", "--format", "json", ".", cwd=tree)) == findings(proc)


def test_exit_0_when_clean(tree: Path) -> None:
    proc = run("check", "pkg/clean.py", cwd=tree)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "All clear: no findings (1 file checked).\n", "")


def test_exit_1_with_findings(tree: Path) -> None:
    proc = run("check", "pkg", cwd=tree)
    assert proc.returncode == 1
    assert proc.stdout.endswith("Found 2 findings (2 files checked).\n[*] 1 fixable with `--fix`.\n")


@pytest.mark.parametrize(
    ("args", "stderr"),
    [
        (("check", "missing.py"), "error: path 'missing.py' does not exist; check the spelling or the current directory\n"),
        (("check", "pkg", "missing_dir"), "error: path 'missing_dir' does not exist; check the spelling or the current directory\n"),
        (("check", "--select", "CGL9", "pkg"), "error: --select: unknown rule code 'CGL9' (known: "),
        (("check", "--select", "CGL001,E501", "pkg"), "error: --select: unknown rule code 'E501' (known: "),
        (("check", "--profile", "nope", "pkg"), "error: --profile: unknown profile 'nope' (shipped profiles: deepep, deepspeed, flashinfer, megatron, sglang, tensorrt_llm, torch, transformer_engine, vllm"),
        (("check", "--format", "yaml", "pkg"), None),
        (("explain", "CGL999"), "error: unknown rule code 'CGL999' (known: CGL000, "),
        (("frobnicate",), None),
    ],
    ids=["missing-file", "missing-dir-beside-a-good-one", "unknown-select", "unknown-in-a-list",
         "unknown-profile", "unknown-format", "explain-unknown", "unknown-command"],
)
def test_exit_2_usage_errors(tree: Path, args: tuple[str, ...], stderr: str | None) -> None:
    proc = run(*args, cwd=tree)
    assert proc.returncode == 2
    assert proc.stdout == ""
    if stderr is not None:
        assert proc.stderr.startswith(stderr), proc.stderr
    else:
        assert "Error:" in proc.stderr or "error:" in proc.stderr


def test_usage_error_with_json_keeps_stdout_empty(tree: Path) -> None:
    proc = run("check", "--format", "json", "nowhere", cwd=tree)
    assert (proc.returncode, proc.stdout) == (2, "")


# --- JSON -------------------------------------------------------------------------------------------

def test_json_schema(tree: Path) -> None:
    proc = run("check", "--format", "json", "pkg", cwd=tree)
    assert proc.returncode == 1
    document = json.loads(proc.stdout)
    assert isinstance(document, list) and len(document) == 2
    for item in document:
        # The keys of issue 2, in this order; issue 3 adds `fix` (an object, or null); issue 12
        # `condition` (a string, or null for always), `confidence` and `binding` (path and line).
        assert list(item)[: len(ISSUE2_KEYS)] == list(ISSUE2_KEYS)
        assert set(item) - set(ISSUE2_KEYS) == {"fix", "condition", "confidence", "binding"}
        assert item["confidence"] in ("high", "medium", "low")
        assert item["condition"] is None or isinstance(item["condition"], str)
        assert set(item["binding"]) == {"path", "line"}
        for key, kind in ISSUE2_KEYS.items():
            assert type(item[key]) is kind, (key, item[key])
        assert item["severity"] in ("error", "warning")
        assert item["line"] >= 1 and item["column"] >= 1
        assert (item["end_line"], item["end_column"]) > (item["line"], item["column"])
    first, second = document
    # 1-based: `    return get_local_dp_buffer()` on line 6, the call starting at column 12.
    assert (first["code"], first["path"], first["line"], first["column"]) == ("CGL001", "pkg/bad.py", 6, 12)
    assert (first["end_line"], first["end_column"]) == (6, 12 + len("get_local_dp_buffer()"))
    assert "`get_local_dp_buffer`" in first["message"] and "`group`" in first["message"]
    assert (second["code"], second["line"], second["column"]) == ("CGL002", 10, 11)
    assert "tp" in second["message"] and "attn_tp" in second["message"] and "line 11" in second["message"]


def test_json_paths_are_as_given(tree: Path) -> None:
    def paths(*args: str, cwd: Path = tree) -> list[str]:
        return sorted({f[0] for f in findings(run("check", "--format", "json", *args, cwd=cwd))})

    assert paths("pkg/bad.py") == ["pkg/bad.py"]
    assert paths("pkg") == ["pkg/bad.py"]
    assert paths("./pkg") == ["./pkg/bad.py"]
    assert paths("bad.py", cwd=tree / "pkg") == ["bad.py"]
    assert paths("../pkg", cwd=tree / "pkg") == ["../pkg/bad.py"]
    absolute = str(tree / "pkg")
    assert paths(absolute) == [os.path.join(absolute, "bad.py")]


def test_json_stdout_is_only_the_document(tree: Path) -> None:
    (tree / "pkg" / "broken.py").write_bytes(b"x = '\xff'\n")
    proc = run("check", "--format", "json", "pkg", cwd=tree)
    assert proc.stdout.startswith("[") and proc.stdout.endswith("]\n")
    assert [f[3] for f in findings(proc)] == ["CGL001", "CGL002", "CGL000"]  # sorted by path
    assert "Found" not in proc.stdout + proc.stderr and "All clear" not in proc.stdout + proc.stderr
    clean = run("check", "--format", "json", "pkg/clean.py", cwd=tree)
    assert (clean.returncode, json.loads(clean.stdout), clean.stderr) == (0, [], "")


# --- text ---------------------------------------------------------------------------------------------

def test_text_format(tree: Path) -> None:
    """A finding with a fix `--fix` applies is marked `[*]` and followed by the fix's description;
    the summary says how many `--fix` would fix."""
    messages = {f["code"]: f["message"] for f in json.loads(run("check", "--format", "json", "pkg", cwd=tree).stdout)}
    proc = run("check", "pkg", cwd=tree)
    assert proc.returncode == 1 and proc.stderr == ""
    assert proc.stdout == (
        f"pkg/bad.py:6:12: CGL001 {messages['CGL001']}\n"
        "   6 |     return get_local_dp_buffer()\n"
        "                  ^^^^^^^^^^^^^^^^^^^^^\n"
        f"pkg/bad.py:10:11: CGL002 [*] {messages['CGL002']}\n"
        "  10 |     out = get_local_dp_buffer(get_tp_group())\n"
        "                 ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "     = help: Pass `get_attention_tp_group()`: the group of `attn_tp_all_gather_into_tensor` at line 11\n"
        "Found 2 findings (2 files checked).\n"
        "[*] 1 fixable with `--fix`.\n"
    )


def test_text_summary_counts(tree: Path) -> None:
    (tree / "one.py").write_text(IMPORTS + "get_local_dp_buffer()\n")
    assert run("check", "one.py", cwd=tree).stdout.endswith("\nFound 1 finding (1 file checked).\n")
    assert run("check", "pkg/clean.py", "one.py", "--select", "CGL002", cwd=tree).stdout == (
        "All clear: no findings (2 files checked).\n"
    )


def test_no_colour_when_not_a_terminal(tree: Path) -> None:
    proc = run("check", "pkg", cwd=tree)
    assert "\x1b" not in proc.stdout + proc.stderr


def _on_terminal(args: list[str], cwd: Path, env: dict[str, str], returncode: int = 1) -> str:
    """Run the console script with stdout and stderr on a pseudo-terminal; return what it wrote."""
    pty = pytest.importorskip("pty")
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS")}
    main_fd, child_fd = pty.openpty()
    try:
        proc = subprocess.run([EXE, *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=child_fd, stderr=child_fd,
                              timeout=120, env={**base, "TERM": "xterm-256color", "COLUMNS": "200", **env})
        os.close(child_fd)
        chunks = []
        while True:
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:  # EIO: the child side is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(main_fd)
    assert proc.returncode == returncode
    return b"".join(chunks).decode()


def test_colour_on_a_terminal_unless_no_color(tree: Path) -> None:
    coloured = _on_terminal(["check", "pkg"], tree, {})
    assert COLOUR.search(coloured), repr(coloured[:200])  # the check below is not vacuous
    plain = _on_terminal(["check", "pkg"], tree, {"NO_COLOR": "1"})
    assert "\x1b" not in plain, repr(plain[:200])  # no colour, and no bold or dim either
    assert "pkg/bad.py" in plain and "CGL002" in plain
    assert "\x1b" not in _on_terminal(["rules"], tree, {"NO_COLOR": "1"}, returncode=0)
    assert "\x1b" in _on_terminal(["rules"], tree, {}, returncode=0)


def test_color_option(tree: Path) -> None:
    assert COLOUR.search(run("check", "--color", "always", "pkg", cwd=tree).stdout)  # not a terminal
    assert COLOUR.search(run("check", "--color", "always", "pkg", cwd=tree, env={"NO_COLOR": "1"}).stdout)
    assert "\x1b" not in _on_terminal(["check", "--color", "never", "pkg"], tree, {})
    assert "\x1b" in run("rules", "--color", "always", cwd=tree).stdout
    assert run("check", "--color", "sometimes", "pkg", cwd=tree).returncode == 2


# --- selection ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("args", "codes"),
    [
        ((), ["CGL001", "CGL002", "CGL000"]),
        (("--select", "CGL001"), ["CGL001"]),
        (("--select", "cgl002"), ["CGL002"]),
        (("--select", "CGL001,CGL000"), ["CGL001", "CGL000"]),
        (("--select", "CGL001, CGL002"), ["CGL001", "CGL002"]),
        (("--select", "CGL00"), ["CGL001", "CGL002", "CGL000"]),
        (("--select", "CGL"), ["CGL001", "CGL002", "CGL000"]),
        (("--ignore", "CGL002"), ["CGL001", "CGL000"]),
        (("--ignore", "CGL000,CGL001"), ["CGL002"]),
        (("--ignore", "CGL00"), []),
        (("--select", "CGL00", "--ignore", "CGL001"), ["CGL002", "CGL000"]),
        (("--select", "CGL001", "--ignore", "CGL001"), []),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else None,
)
def test_select_and_ignore(tree: Path, args: tuple[str, ...], codes: list[str]) -> None:
    (tree / "pkg" / "zz_broken.py").write_bytes(b"\x00\x01binary")
    proc = run("check", "--format", "json", *args, "pkg", cwd=tree)
    assert [f[3] for f in findings(proc)] == codes
    assert proc.returncode == (1 if codes else 0)


# --- rules, explain, version ------------------------------------------------------------------------

def test_rules_lists_every_rule(tree: Path) -> None:
    proc = run("rules", cwd=tree)
    assert (proc.returncode, proc.stderr) == (0, "")
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["Code", "Name", "Fix", "Summary"]
    rules = all_rules().rules
    assert len(rules) >= 5
    for rule in rules:
        row = [line for line in lines if line.split()[:1] == [rule.code]]
        assert len(row) == 1, rule.code
        assert rule.name in row[0] and rule.summary in row[0]
    assert len([line for line in lines[1:] if line.strip()]) == len(rules)


def test_rules_and_explain_say_when_a_fix_is_unsafe(tree: Path) -> None:
    rows = {line.split()[0]: line.split() for line in run("rules", cwd=tree).stdout.splitlines()[1:] if line.strip()}
    assert rows["CGL004"][:3] == ["CGL004", "inconsistent-selection", "unsafe"]
    assert rows["CGL002"][:3] == ["CGL002", "group-mismatch", "safe"]
    assert rows["CGL003"][2] != "safe"  # no fix: the summary follows the name
    page = run("explain", "CGL004", cwd=tree).stdout
    assert "- Fix: unsafe (an unsafe fix is applied only by `commgroup-lint check --fix --unsafe-fixes`)\n" in page
    assert "- Fix: safe (applied by `commgroup-lint check --fix`)\n" in run("explain", "CGL001", cwd=tree).stdout


@pytest.mark.parametrize("code", [r.code for r in all_rules().rules])
def test_explain_prints_the_rule_page(tree: Path, code: str) -> None:
    page = (REPO / "docs" / "rules" / f"{code}.md").read_text(encoding="utf-8")
    proc = run("explain", code, cwd=tree)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, page, "")
    assert run("explain", code.lower(), cwd=tree).stdout == page


def test_version(tree: Path) -> None:
    proc = run("--version", cwd=tree)
    assert (proc.returncode, proc.stdout) == (0, f"commgroup-lint, version {__version__}\n")


def test_help_lists_the_commands(tree: Path) -> None:
    proc = run("--help", cwd=tree)
    assert proc.returncode == 0
    assert all(name in proc.stdout for name in ("check", "rules", "explain"))


# --- bad input basics (the full matrix is in test_bad_input.py) -------------------------------------

def test_bad_input_is_cgl000_and_the_rest_is_still_checked(tree: Path) -> None:
    pkg = tree / "pkg"
    (pkg / "a_syntax.py").write_text(IMPORTS + "def broken(:\n    pass\n")
    (pkg / "b_not_utf8.py").write_bytes(b"x = '\xe9t\xe9'\n")
    (pkg / "c_binary.py").write_bytes(b"\x7fELF\x02\x01\x00\x00get_local_dp_buffer\x00")
    (pkg / "d_latin1.py").write_bytes(
        b"# -*- coding: latin-1 -*-\n" + IMPORTS.encode() + b"# caf\xe9\nget_local_dp_buffer()\n"
    )
    proc = run("check", "--format", "json", "pkg", cwd=tree)
    assert proc.returncode == 1
    found = {(Path(f["path"]).name, f["code"]): f for f in json.loads(proc.stdout)}
    assert sorted(found) == [
        ("a_syntax.py", "CGL000"), ("b_not_utf8.py", "CGL000"), ("bad.py", "CGL001"), ("bad.py", "CGL002"),
        ("c_binary.py", "CGL000"), ("d_latin1.py", "CGL001"),
    ]
    syntax = found["a_syntax.py", "CGL000"]
    assert syntax["line"] == 3 and "syntax" in syntax["message"].lower()
    assert "not valid utf-8" in found["b_not_utf8.py", "CGL000"]["message"]
    assert "binary" in found["c_binary.py", "CGL000"]["message"]
    assert found["d_latin1.py", "CGL001"]["line"] == 5
    text = run("check", "pkg", cwd=tree)
    assert "pkg/a_syntax.py:3:" in text.stdout and "Traceback" not in text.stdout
