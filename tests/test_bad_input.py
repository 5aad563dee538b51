"""Bad input through the real command (issue 8, issue 2 section 7).

Every case puts one bad path beside a good file that holds one known finding, runs
`commgroup-lint check` in a subprocess (or in-process where the case needs a patch), and checks
the exact message, the documented exit code, that no traceback reaches the user, and that the
good file beside it was still checked.

Only files that name an allocator are parsed, so the syntax and nesting cases name one; an
undecodable or binary file is reported whatever it holds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint import settings
from commgroup_lint.cli import main
from commgroup_lint.files import SOURCE_LIMIT
from commgroup_lint.source import too_large

IMPORT = "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n"
GOOD = IMPORT + "\n\ndef forward():\n    return get_local_dp_buffer()\n"
GOOD_FINDING = ("CGL001", 5, 12, "`get_local_dp_buffer` is called without its group argument `group`")
NOT_UTF8_HINT = "convert it to UTF-8 or declare its encoding with a PEP 263 coding line"
TOO_DEEP_PARSER = "nested too deeply for the Python parser"
TOO_DEEP_FUNCTION = "function `forward` nested too deeply to analyse (more than 200 levels); the rest of the file was checked"
PARSER_OUT_OF_MEMORY = "the Python parser ran out of memory (its stack, on deep nesting, or the process's)"


def run_cli(cwd: Path, *args: str, env: dict[str, str] | None = None,
            prelude: str = "") -> subprocess.CompletedProcess[str]:
    """`commgroup-lint ARGS` in a fresh interpreter; `prelude` runs first (to simulate the OS)."""
    code = f"{prelude}\nimport sys\nfrom commgroup_lint.cli import main\nsys.argv[0] = 'commgroup-lint'\nmain()\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})},
    )


def check_json(cwd: Path, *paths: str, prelude: str = "") -> tuple[int, list[tuple], str]:
    proc = run_cli(cwd, "check", "--format", "json", *paths, prelude=prelude)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, normalise(json.loads(proc.stdout)), proc.stderr


def normalise(document: list[dict]) -> list[tuple]:
    """(path, code, line, column, message), with the `./` of a path under `.` dropped and the
    CGL001 message cut to its first clause (the rest explains the fix, which is not tested here)."""
    return [(f["path"].removeprefix("./"), f["code"], f["line"], f["column"],
             f["message"].split(" (no fix:")[0].split(" (fix:")[0]) for f in document]


def good_finding(path: str = "good.py") -> tuple:
    code, line, column, message = GOOD_FINDING
    return (path, code, line, column, message)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "good.py").write_text(GOOD)
    return tmp_path


def write(tree: Path, name: str, content: bytes | str) -> None:
    data = content.encode("utf-8") if isinstance(content, str) else content
    (tree / name).write_bytes(data)


def only_cgl000(tree: Path, name: str, message: str, line: int = 1, column: int = 1) -> None:
    """The bad file gets exactly one CGL000 with `message`; the good file its finding; exit 1."""
    rc, findings, stderr = check_json(tree, ".")
    assert findings == sorted([good_finding(), (name, "CGL000", line, column, message)])
    assert rc == 1, stderr
    assert stderr == ""


def clean(tree: Path, name: str) -> None:
    """The file is fine: only the good file's finding, exit 1 (for that finding)."""
    rc, findings, stderr = check_json(tree, ".")
    assert findings == [good_finding()]
    assert rc == 1 and stderr == ""


# --- syntax and encoding -----------------------------------------------------------------------

def test_syntax_error(tree: Path) -> None:
    write(tree, "broken.py", IMPORT + "def forward(x:\n    return get_local_dp_buffer(x)\n")
    only_cgl000(tree, "broken.py", "syntax error: '(' was never closed", 2, 12)


def test_syntax_error_text_output(tree: Path) -> None:
    """The text report: one line naming the file and the reason, a code frame, a summary."""
    write(tree, "broken.py", IMPORT + "def forward(x:\n    return get_local_dp_buffer(x)\n")
    proc = run_cli(tree, "check", ".")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stdout.splitlines()[0] == "./broken.py:2:12: CGL000 syntax error: '(' was never closed"
    assert f"./good.py:5:12: {GOOD_FINDING[0]} {GOOD_FINDING[3]}" in proc.stdout
    assert proc.stdout.rstrip().endswith("Found 2 findings (2 files checked).")


def test_syntax_error_in_a_file_naming_no_allocator_is_left_to_other_tools(tree: Path) -> None:
    write(tree, "other.py", "def f(x:\n")
    clean(tree, "other.py")


def test_not_utf8_without_a_coding_line(tree: Path) -> None:
    write(tree, "latin.py", b"# caf\xe9\nx = 1\n")
    only_cgl000(tree, "latin.py", f"not valid utf-8 (byte 0xe9 on line 1); {NOT_UTF8_HINT}")


def test_not_utf8_after_the_first_lines(tree: Path) -> None:
    write(tree, "latin.py", b"x = 1\ny = 2\nz = 3  # caf\xe9\n")
    only_cgl000(tree, "latin.py", f"not valid utf-8 (byte 0xe9 on line 3); {NOT_UTF8_HINT}")


def test_coding_line_latin1_is_decoded_and_checked(tree: Path) -> None:
    write(tree, "latin.py", b"# -*- coding: latin-1 -*-\n" + IMPORT.encode() +
          b"\n\ndef forward():\n    s = 'caf\xe9'\n    return get_local_dp_buffer()\n")
    rc, findings, _ = check_json(tree, ".")
    assert findings == sorted([good_finding(), ("latin.py", *GOOD_FINDING[:1], 7, 12, GOOD_FINDING[3])])
    assert rc == 1


def test_unknown_encoding_in_the_coding_line(tree: Path) -> None:
    write(tree, "odd.py", b"# coding: no-such-codec\nx = 1\n")
    only_cgl000(tree, "odd.py", "invalid coding line: unknown encoding: no-such-codec")


def test_utf8_bom(tree: Path) -> None:
    write(tree, "bom.py", b"\xef\xbb\xbf" + GOOD.encode())
    rc, findings, _ = check_json(tree, ".")
    assert findings == sorted([good_finding(), good_finding("bom.py")])
    assert rc == 1


def test_crlf_line_endings(tree: Path) -> None:
    write(tree, "crlf.py", GOOD.replace("\n", "\r\n"))
    rc, findings, _ = check_json(tree, ".")
    assert findings == sorted([good_finding(), good_finding("crlf.py")])
    assert rc == 1


def test_mixed_tabs_and_spaces(tree: Path) -> None:
    write(tree, "tabs.py", IMPORT + "def forward():\n        x = 1\n\treturn get_local_dp_buffer()\n")
    only_cgl000(tree, "tabs.py", "syntax error: inconsistent use of tabs and spaces in indentation", 4, 1)


def test_empty_file(tree: Path) -> None:
    write(tree, "empty.py", b"")
    clean(tree, "empty.py")


def test_binary_file_named_py(tree: Path) -> None:
    write(tree, "blob.py", bytes(range(256)) * 8)
    only_cgl000(tree, "blob.py", "binary file (contains NUL bytes); not Python source")


def test_a_file_just_under_the_size_limit(tree: Path) -> None:
    padding = "x = 1  # padding line\n" * ((SOURCE_LIMIT - 200) // 22)
    write(tree, "big.py", GOOD + padding + "y = get_local_dp_buffer()\n")
    assert SOURCE_LIMIT - 200 < (tree / "big.py").stat().st_size <= SOURCE_LIMIT
    rc, findings, _ = check_json(tree, ".")
    last = 5 + padding.count("\n") + 1
    assert findings == sorted([good_finding(), good_finding("big.py"),
                               ("big.py", "CGL001", last, 5, GOOD_FINDING[3])])
    assert rc == 1


def test_a_file_over_the_size_limit_is_reported_not_read(tree: Path) -> None:
    """Parsing takes about 500 times a file's size in memory: a file over `SOURCE_LIMIT` is
    one CGL000, and the files beside it are still checked."""
    padding = "x = 1  # padding line\n" * (SOURCE_LIMIT // 22 + 1)
    write(tree, "big.py", GOOD + padding)
    assert (tree / "big.py").stat().st_size > SOURCE_LIMIT
    only_cgl000(tree, "big.py", too_large(SOURCE_LIMIT))
    assert too_large(SOURCE_LIMIT) == ("too large to check (over the 4 MiB limit for one file); "
                                       "exclude it or split it")


@pytest.mark.parametrize("over", [0, 1])
def test_the_size_limit_is_exact(tmp_path: Path, over: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from commgroup_lint import source

    path = tmp_path / "m.py"
    path.write_text(GOOD)
    monkeypatch.setattr(source, "SOURCE_LIMIT", len(GOOD) - over)
    if over:
        with pytest.raises(source.SourceError, match="too large to check"):
            source.read_bytes(path)
    else:
        assert source.read_bytes(path) == GOOD.encode()


# --- nesting: CPython's parser and the lowering both refuse; nothing may crash the process --------

@pytest.mark.parametrize("name, expression, message", [
    ("parens", "(" * 5000 + "1" + ")" * 5000, "syntax error: too many nested parentheses"),
    ("calls", "f(" * 5000 + "1" + ")" * 5000, "syntax error: too many nested parentheses"),
    ("sum", "+".join(["a"] * 100_000), TOO_DEEP_PARSER),
    ("chain", "a" + ".b" * 100_000, TOO_DEEP_PARSER),
    ("call_chain", "f" + "(1)" * 50_000, TOO_DEEP_PARSER),
    ("unary", "-" * 100_000 + "a", PARSER_OUT_OF_MEMORY),
    ("conditional", "a if b else " * 20_000 + "c", PARSER_OUT_OF_MEMORY),
    ("lambdas", "lambda: " * 20_000 + "1", PARSER_OUT_OF_MEMORY),
    # deep enough for the dataflow's recursion, shallow enough for CPython's parser: the function is lost
    ("sum_1k", "+".join(["a"] * 1000), TOO_DEEP_FUNCTION),
    ("attribute_chain_600", "get_local_dp_buffer(g)" + ".b" * 600, TOO_DEEP_FUNCTION),
    ("call_chain_600", "get_local_dp_buffer(g)" + "(1)" * 600, TOO_DEEP_FUNCTION),
    ("calls_190", "f(" * 190 + "get_local_dp_buffer(g)" + ")" * 190, None),
])
def test_deeply_nested_expressions(tree: Path, name: str, expression: str, message: str | None) -> None:
    source = IMPORT + "\n\ndef forward(g):\n    x = " + expression + "\n    return x\n"
    write(tree, f"{name}.py", source)
    rc, findings, stderr = check_json(tree, ".")
    assert good_finding() in findings
    bad = [f for f in findings if f[0] == f"{name}.py"]
    if message is None:
        assert bad == [] and rc == 1
        return
    # Python 3.10's parser builds some trees 3.11 refuses; then the lowering refuses them instead
    accepted = {message, TOO_DEEP_FUNCTION} if message in (TOO_DEEP_PARSER, PARSER_OUT_OF_MEMORY) and sys.version_info < (3, 11) else {message}
    assert len(bad) == 1 and bad[0][1:2] == ("CGL000",) and bad[0][4] in accepted
    assert rc == 1 and stderr == ""


def test_deep_statements_with_a_deep_expression(tree: Path) -> None:
    """99 nested blocks (near the tokenizer's limit of 100) and an expression 150 deep inside."""
    blocks = "".join(" " * i + "if x:\n" for i in range(1, 99))
    source = IMPORT + "def forward(g):\n" + blocks + " " * 99 + "y = get_local_dp_buffer(g)" + ".b" * 150 + "\n"
    write(tree, "deep.py", source)
    only_cgl000(tree, "deep.py", TOO_DEEP_FUNCTION, 2, 1)


def test_too_many_indentation_levels(tree: Path) -> None:
    source = IMPORT + "".join(" " * i + "if x:\n" for i in range(120)) + " " * 120 + "pass\n"
    write(tree, "indent.py", source)
    rc, findings, stderr = check_json(tree, ".")
    bad = [f for f in findings if f[0] == "indent.py"]
    assert [(f[1], f[4]) for f in bad] == [("CGL000", "syntax error: too many levels of indentation")]
    assert good_finding() in findings and rc == 1 and stderr == ""


# --- the file system ------------------------------------------------------------------------------

def test_directory_symlink_to_its_parent(tree: Path) -> None:
    (tree / "pkg").mkdir()
    write(tree / "pkg", "inner.py", GOOD)
    (tree / "pkg" / "loop").symlink_to("..", target_is_directory=True)
    rc, findings, stderr = check_json(tree, ".")
    assert findings == sorted([good_finding(), good_finding("pkg/inner.py")])
    assert rc == 1 and stderr == ""
    # named on the command line, the link is walked once, and its own loop is not followed
    rc, findings, _ = check_json(tree, "pkg/loop")
    assert findings == sorted([good_finding("pkg/loop/good.py"), good_finding("pkg/loop/pkg/inner.py")])


def test_file_symlink_loop(tree: Path) -> None:
    (tree / "a.py").symlink_to("b.py")
    (tree / "b.py").symlink_to("a.py")
    rc, findings, stderr = check_json(tree, ".")
    loop = "cannot be read: Too many levels of symbolic links"
    assert findings == sorted([("a.py", "CGL000", 1, 1, loop), ("b.py", "CGL000", 1, 1, loop), good_finding()])
    assert rc == 1 and stderr == ""
    rc, findings, stderr = check_json(tree, "a.py", "good.py")
    assert findings == [("a.py", "CGL000", 1, 1, loop), good_finding()]


def test_broken_symlink(tree: Path) -> None:
    (tree / "gone.py").symlink_to("missing.py")
    only_cgl000(tree, "gone.py", "broken symbolic link (its target does not exist)")


UNREADABLE = "permission denied; make the file readable or exclude it"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="running as root: file permissions do not apply (the simulated test covers it)")
def test_unreadable_file(tree: Path) -> None:
    write(tree, "secret.py", GOOD)
    (tree / "secret.py").chmod(0)
    try:
        only_cgl000(tree, "secret.py", UNREADABLE)
    finally:
        (tree / "secret.py").chmod(0o644)


def test_unreadable_file_simulated(tree: Path) -> None:
    """As root (CI containers) chmod 000 does not stop a read, so the read itself is made to fail."""
    write(tree, "secret.py", GOOD)
    prelude = (
        "import os\n"
        "_open = os.open\n"
        "def fake_open(path, flags, *rest, **kwargs):\n"
        "    if os.path.basename(os.fspath(path)) == 'secret.py':\n"
        "        raise PermissionError(13, 'Permission denied', os.fspath(path))\n"
        "    return _open(path, flags, *rest, **kwargs)\n"
        "os.open = fake_open\n"
    )
    rc, findings, stderr = check_json(tree, ".", prelude=prelude)
    assert findings == sorted([good_finding(), ("secret.py", "CGL000", 1, 1, UNREADABLE)])
    assert rc == 1 and stderr == ""


def test_directory_named_like_a_python_file(tree: Path) -> None:
    (tree / "x.py").mkdir()
    write(tree / "x.py", "inner.py", GOOD)
    rc, findings, stderr = check_json(tree, ".")
    assert findings == sorted([good_finding(), good_finding("x.py/inner.py")])
    assert rc == 1 and stderr == ""
    rc, findings, _ = check_json(tree, "x.py")
    assert findings == [good_finding("x.py/inner.py")] and rc == 1


def test_path_that_does_not_exist(tree: Path) -> None:
    proc = run_cli(tree, "check", "good.py", "nope.py")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == "error: path 'nope.py' does not exist; check the spelling or the current directory\n"


def test_file_deleted_while_the_run_is_in_progress(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file is found, then removed before it is read."""
    write(tree, "doomed.py", GOOD)
    real_discover = settings.discover

    def discover_then_delete(*args, **kwargs):
        found = real_discover(*args, **kwargs)
        (tree / "doomed.py").unlink()
        return found

    monkeypatch.setattr(settings, "discover", discover_then_delete)
    monkeypatch.chdir(tree)
    result = CliRunner().invoke(main, ["check", "--format", "json", "."])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    findings = [(f[0], f[1], f[4]) for f in normalise(json.loads(result.stdout))]
    assert findings == [("doomed.py", "CGL000", "file disappeared while the run was in progress"),
                        ("good.py", GOOD_FINDING[0], GOOD_FINDING[3])]
    assert result.exit_code == 1


# --- internal errors ------------------------------------------------------------------------------

def test_a_rule_that_raises_is_an_internal_error_and_other_files_are_still_reported(
        tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from commgroup_lint.rules.cgl001_missing_group import MissingGroup

    write(tree, "boom.py", GOOD)
    real_check = MissingGroup.check

    def check(self, ctx):  # noqa: ANN001
        if ctx.source.display.endswith("boom.py"):
            raise RuntimeError("boom")
        return real_check(self, ctx)

    monkeypatch.setattr(MissingGroup, "check", check)
    monkeypatch.chdir(tree)
    result = CliRunner().invoke(main, ["check", "--format", "json", "."])
    assert result.exit_code == 2
    assert normalise(json.loads(result.stdout)) == [good_finding()]
    assert result.stderr == "internal error: rule CGL001 failed on ./boom.py: RuntimeError: boom (please report this)\n"

    result = CliRunner().invoke(main, ["check", "."])  # text: the finding, the summary, the error
    assert result.exit_code == 2
    assert f"./good.py:5:12: CGL001 {GOOD_FINDING[3]}" in result.stdout
    assert "internal error: rule CGL001 failed on ./boom.py: RuntimeError: boom" in result.stderr


def test_an_analysis_that_raises_is_an_internal_error(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from commgroup_lint import engine

    write(tree, "boom.py", GOOD)
    real = engine.analyze_module

    def analyze(module, imports, api, *rest):  # noqa: ANN001, ANN002
        if imports.module == "boom":
            raise KeyError("oops")
        return real(module, imports, api, *rest)

    monkeypatch.setattr(engine, "analyze_module", analyze)
    monkeypatch.chdir(tree)
    result = CliRunner().invoke(main, ["check", "--format", "json", "."])
    assert result.exit_code == 2
    assert [f[:2] for f in normalise(json.loads(result.stdout))] == [("good.py", "CGL001")]
    assert result.stderr == "internal error: rule analysis failed on ./boom.py: KeyError: 'oops' (please report this)\n"
