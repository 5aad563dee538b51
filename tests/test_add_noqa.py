"""`check --add-noqa` (issue 15, item 12): a suppression comment for every current finding, with its
codes, where the suppression reader takes it as covering the finding; a second check is clean."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint import cli
from commgroup_lint.cli import main
from commgroup_lint.model import Finding, Position
from commgroup_lint.noqa import add_suppressions

IMPORTS = (
    "from sglang.srt.distributed import get_tp_group\n"
    "from sglang.srt.layers.dp_attention import attn_tp_all_gather_into_tensor, get_local_dp_buffer\n"
)
BAD = IMPORTS + (
    "\n\ndef missing():\n    return get_local_dp_buffer()\n"
    "\n\ndef mismatch(x):\n    out = get_local_dp_buffer(get_tp_group())  # noqa: E501\n"
    "    attn_tp_all_gather_into_tensor(out, x)\n"
)
SUPPRESSED = IMPORTS + (
    "\n\ndef missing():\n    return get_local_dp_buffer()  # commgroup-lint: ignore[CGL001]\n"
    "\n\ndef mismatch(x):\n    out = get_local_dp_buffer(get_tp_group())  # noqa: E501  # commgroup-lint: ignore[CGL002]\n"
    "    attn_tp_all_gather_into_tensor(out, x)\n"
)


def check(*args: str):
    return CliRunner().invoke(main, ["check", "--no-cache", *args], catch_exceptions=False)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_add_noqa_suppresses_every_finding(project: Path) -> None:
    (project / "bad.py").write_text(BAD)
    (project / "clean.py").write_text("x = 1\n")
    result = check("--add-noqa", ".")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "Added 2 suppression comments to 1 file.\n")
    assert (project / "bad.py").read_text() == SUPPRESSED
    assert (project / "clean.py").read_text() == "x = 1\n"
    assert check(".").exit_code == 0  # all clear, and no comment is reported unused
    again = check("--add-noqa", ".")
    assert (again.exit_code, again.stderr) == (0, "Added 0 suppression comments to 0 files.\n")
    assert (project / "bad.py").read_text() == SUPPRESSED


def test_only_selected_findings_are_suppressed(project: Path) -> None:
    (project / "bad.py").write_text(BAD)
    check("--add-noqa", "--select", "CGL002", "bad.py")
    assert "ignore[CGL001]" not in (project / "bad.py").read_text()
    assert "ignore[CGL002]" in (project / "bad.py").read_text()


def finding(code: str, line: int, column: int = 1) -> Finding:
    return Finding(code, "a.py", Position(line, column), Position(line, column + 1), "m")


def test_codes_are_added_to_a_directive_already_on_the_line() -> None:
    text = "a = f()  # commgroup-lint: ignore[CGL004]\nb = g()  # commgroup-lint: ignore\n"
    added = add_suppressions(text, [finding("CGL002", 1), finding("CGL001", 1), finding("CGL001", 2)])
    assert added.text == "a = f()  # commgroup-lint: ignore[CGL001, CGL002, CGL004]\nb = g()  # commgroup-lint: ignore[CGL001]\n"
    assert added.comments == 2


def test_a_line_ending_inside_a_string_gets_its_statement_covered() -> None:
    text = 'x = call(buf, """\ntext\n""")\ny = call(\n    a,\n    b)\nz = 1 + \\\n    2\n'
    added = add_suppressions(text, [finding("CGL001", 1), finding("CGL002", 5), finding("CGL002", 7)])
    assert added.text == (
        'x = call(buf, """\ntext\n""")  # commgroup-lint: ignore[CGL001]\ny = call(\n    a,  # commgroup-lint: ignore[CGL002]\n    b)\n'
        'z = 1 + \\\n    2  # commgroup-lint: ignore[CGL002]\n'
    )
    # Line 1 ends in the string and is its statement's first line; line 7 ends in a backslash
    # and starts its statement: the comment goes to the statement's last line, which covers it.
    assert added.unplaced == []


def test_a_finding_inside_a_string_goes_to_its_statements_first_line() -> None:
    text = 'x = call(\n    buf, """\ntext""")\n'
    added = add_suppressions(text, [finding("CGL002", 2)])
    assert added.text == 'x = call(  # commgroup-lint: ignore[CGL002]\n    buf, """\ntext""")\n'


def test_line_endings_and_trailing_spaces() -> None:
    added = add_suppressions("a = f()   \r\nb = 2\r\n", [finding("CGL001", 1)])
    assert added.text == "a = f()  # commgroup-lint: ignore[CGL001]\r\nb = 2\r\n"


def test_unreadable_files_and_suppression_findings_get_none() -> None:
    text = "x = 1  # commgroup-lint: ignore\n"
    added = add_suppressions(text, [finding("CGL000", 1), finding("CGL100", 1), finding("CGL101", 1)])
    assert (added.text, added.comments, added.unplaced) == (text, 0, [])


def test_a_file_changed_meanwhile_is_not_written_and_exits_2(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "bad.py").write_text(BAD)
    real = cli.suppress

    def suppress_then_edit(result):  # noqa: ANN001, ANN202
        report = real(result)
        (project / "bad.py").write_text(BAD + "# edited meanwhile\n")  # someone saves the file
        return report

    monkeypatch.setattr(cli, "suppress", suppress_then_edit)
    result = check("--add-noqa", "bad.py")
    assert result.exit_code == 2
    assert result.stderr == (
        "error: could not add suppressions to bad.py: changed on disk since it was read; not written\n"
        "Added 0 suppression comments to 0 files.\n"
    )
    assert (project / "bad.py").read_text() == BAD + "# edited meanwhile\n"


def test_add_noqa_with_fix_is_a_usage_error(project: Path) -> None:
    (project / "bad.py").write_text(BAD)
    result = check("--add-noqa", "--fix", "bad.py")
    assert (result.exit_code, result.stderr) == (
        2, "error: --add-noqa cannot be combined with --fix or --diff: suppress the findings, or fix them\n")
    assert (project / "bad.py").read_text() == BAD


# --- the three lines it once refused (issue 35, item 15) ----------------------------------------

CALL = IMPORTS + "\n\ndef missing():\n"
DIRECTIVE = "  # commgroup-lint: ignore[CGL001]"


@pytest.mark.parametrize(("name", "before", "after"), [
    ("cr_only", (CALL + "    return get_local_dp_buffer()\n").replace("\n", "\r"),
     (CALL + "    return get_local_dp_buffer()" + DIRECTIVE + "\n").replace("\n", "\r")),
    ("lone_cr_in_a_string", IMPORTS + "s = '''a\rb'''\n" + CALL[len(IMPORTS):] + "    return get_local_dp_buffer()\n",
     IMPORTS + "s = '''a\rb'''\n" + CALL[len(IMPORTS):] + "    return get_local_dp_buffer()" + DIRECTIVE + "\n"),
    ("backslash_on_the_call_line", CALL + "    return get_local_dp_buffer(\\\n    )\n",
     CALL + "    return get_local_dp_buffer(\\\n    )" + DIRECTIVE + "\n"),
])
def test_placed_where_the_reader_covers_the_finding(project: Path, name: str, before: str, after: str) -> None:
    (project / f"{name}.py").write_bytes(before.encode())
    result = check("--add-noqa", ".")
    assert (result.exit_code, result.stderr) == (0, "Added 1 suppression comment to 1 file.\n")
    assert (project / f"{name}.py").read_bytes() == after.encode()
    assert check(".").exit_code == 0  # suppressed, and the comment is not reported unused


def test_a_finding_no_comment_can_reach_is_left_unplaced() -> None:
    """Only where the tokenizer stops before the statement ends (a file that parses never does)."""
    added = add_suppressions('x = f("""a\nb\n', [finding("CGL001", 1)])
    assert (added.text, [f.start.line for f in added.unplaced]) == ('x = f("""a\nb\n', [1])
