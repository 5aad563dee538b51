"""Suppression comments: what they cover, what is reported about them (CGL100, CGL101)."""

from __future__ import annotations

from pathlib import Path

import pytest

from commgroup_lint.discovery import discover
from commgroup_lint.engine import Linter
from commgroup_lint.model import RuleSelection
from commgroup_lint.profile import load_shipped
from commgroup_lint.rules.cgl100_unused_suppression import UnusedSuppression
from commgroup_lint.rules.cgl101_blanket_suppression import BlanketSuppression
from commgroup_lint.suppressions import scan

IMPORT = "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n"
MISSING = (
    "`get_local_dp_buffer` is called without its group argument `group` (no fix: no collective consumes the"
    " buffer in this file; no sibling call site shows the group; candidates: attn_cp, attn_tp, moe_dp,"
    " moe_ep, moe_tp, tp)"
)


def lint(tmp_path: Path, text: str, select: tuple[str, ...] = ("CGL",), ignore: tuple[str, ...] = (),
         per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> list[tuple[str, int, int, str]]:
    path = tmp_path / "m.py"
    path.write_text(text, encoding="utf-8")
    linter = Linter(load_shipped("sglang"), RuleSelection(select, ignore), per_file_ignores)
    result = linter.lint(discover([str(path)]))
    assert not result.internal_errors
    return [(f.code, f.start.line, f.start.column, f.message) for f in result.findings]


def test_unsuppressed_finding(tmp_path: Path) -> None:
    assert lint(tmp_path, IMPORT + "x = get_local_dp_buffer()\n") == [("CGL001", 2, 5, MISSING)]


def test_same_line(tmp_path: Path) -> None:
    assert lint(tmp_path, IMPORT + "x = get_local_dp_buffer()  # commgroup-lint: ignore[CGL001]\n") == []


def test_codes_are_case_insensitive_and_listed(tmp_path: Path) -> None:
    text = IMPORT + "x = get_local_dp_buffer()  #commgroup-lint:ignore[cgl002 , cgl001]\n"
    # CGL002 is listed but unused: reported; CGL001 is used.
    assert lint(tmp_path, text) == [(
        "CGL100", 2, 28,
        "unused suppression: `ignore[CGL002]` suppresses nothing; no CGL002 finding on this line or statement",
    )]


def test_first_line_of_a_multiline_statement_covers_the_statement(tmp_path: Path) -> None:
    text = IMPORT + "x = (  # commgroup-lint: ignore[CGL001]\n    1,\n    get_local_dp_buffer(),\n)\n"
    assert lint(tmp_path, text) == []


def test_the_finding_line_inside_a_multiline_statement(tmp_path: Path) -> None:
    text = IMPORT + "x = (\n    1,\n    get_local_dp_buffer(),  # commgroup-lint: ignore[CGL001]\n)\n"
    assert lint(tmp_path, text) == []


def test_a_middle_line_does_not_cover_other_lines(tmp_path: Path) -> None:
    text = IMPORT + "x = (\n    1,  # commgroup-lint: ignore[CGL001]\n    get_local_dp_buffer(),\n)\n"
    assert lint(tmp_path, text) == [
        ("CGL100", 3, 9, "unused suppression: `ignore[CGL001]` suppresses nothing; no CGL001 finding on this line or statement"),
        ("CGL001", 4, 5, MISSING),
    ]


def test_a_compound_header_does_not_cover_its_body(tmp_path: Path) -> None:
    text = IMPORT + "def f():  # commgroup-lint: ignore[CGL001]\n    return get_local_dp_buffer()\n"
    assert [c[:2] for c in lint(tmp_path, text)] == [("CGL100", 2), ("CGL001", 3)]


def test_a_comment_on_its_own_line_covers_only_itself(tmp_path: Path) -> None:
    text = IMPORT + "# commgroup-lint: ignore[CGL001]\nx = get_local_dp_buffer()\n"
    assert [c[:2] for c in lint(tmp_path, text)] == [("CGL100", 2), ("CGL001", 3)]


def test_file_level(tmp_path: Path) -> None:
    text = IMPORT + "x = get_local_dp_buffer()\n\n\ndef f():\n    return get_local_dp_buffer()\n# commgroup-lint: ignore-file[CGL001]\n"
    assert lint(tmp_path, text) == []


def test_unused_file_level(tmp_path: Path) -> None:
    assert lint(tmp_path, "# commgroup-lint: ignore-file[CGL002]\nx = 1\n") == [
        ("CGL100", 1, 1, "unused suppression: `ignore-file[CGL002]` suppresses nothing; no CGL002 finding in this file"),
    ]


@pytest.mark.parametrize("comment", ["# commgroup-lint: ignore", "# commgroup-lint: ignore[]", "# commgroup-lint: ignore[ , ]"])
def test_blanket_line_suppression_is_reported_and_suppresses_nothing(tmp_path: Path, comment: str) -> None:
    assert lint(tmp_path, IMPORT + f"x = get_local_dp_buffer()  {comment}\n") == [
        ("CGL001", 2, 5, MISSING),
        ("CGL101", 2, 28, "blanket suppression: `ignore` without codes suppresses nothing; name the codes, e.g. `ignore[CGL001]`"),
    ]


def test_blanket_file_suppression(tmp_path: Path) -> None:
    assert lint(tmp_path, "# commgroup-lint: ignore-file\n" + IMPORT + "x = get_local_dp_buffer()\n") == [
        ("CGL101", 1, 1, "blanket suppression: `ignore-file` without codes suppresses nothing; name the codes, e.g. `ignore-file[CGL001]`"),
        ("CGL001", 3, 5, MISSING),
    ]


def test_a_file_the_engine_skips_still_has_its_comments_checked(tmp_path: Path) -> None:
    # No allocator named: the file is never parsed, but its suppressions are read.
    assert [c[:2] for c in lint(tmp_path, "x = 1  # commgroup-lint: ignore\n")] == [("CGL101", 1)]


def test_unknown_code(tmp_path: Path) -> None:
    assert lint(tmp_path, "x = 1  # commgroup-lint: ignore[CGL9, E501]\n") == [
        ("CGL100", 1, 8, "unused suppression: `ignore[CGL9]` suppresses nothing; `CGL9` is not a rule code (run `commgroup-lint rules`)"),
        ("CGL100", 1, 8, "unused suppression: `ignore[E501]` suppresses nothing; `E501` is not a rule code (run `commgroup-lint rules`)"),
    ]


def test_codes_this_run_does_not_check_are_not_reported_unused(tmp_path: Path) -> None:
    text = "x = 1  # commgroup-lint: ignore[CGL001]\n"
    assert lint(tmp_path, text, select=("CGL002", "CGL100")) == []
    assert lint(tmp_path, text, ignore=("CGL001",)) == []
    assert lint(tmp_path, text, per_file_ignores=(("m.py", ("CGL001",)),)) == []
    assert [c[:2] for c in lint(tmp_path, text)] == [("CGL100", 1)]


def test_cgl100_and_cgl101_only_when_selected(tmp_path: Path) -> None:
    text = "x = 1  # commgroup-lint: ignore[CGL001]\ny = 2  # commgroup-lint: ignore\n"
    assert [c[:2] for c in lint(tmp_path, text, ignore=("CGL100",))] == [("CGL101", 2)]
    assert [c[:2] for c in lint(tmp_path, text, select=("CGL0", "CGL100"))] == [("CGL100", 1)]
    assert lint(tmp_path, text, per_file_ignores=(("m.py", ("CGL1",)),)) == []


def test_own_findings_can_be_suppressed_at_file_level(tmp_path: Path) -> None:
    text = "# commgroup-lint: ignore-file[CGL100]\nx = 1  # commgroup-lint: ignore[CGL001]\n"
    assert lint(tmp_path, text) == []


def test_text_in_strings_is_not_a_directive(tmp_path: Path) -> None:
    text = IMPORT + 'x = get_local_dp_buffer(name="# commgroup-lint: ignore[CGL001]")\ns = """\n# commgroup-lint: ignore\n"""\n'
    assert [c[:2] for c in lint(tmp_path, text)] == [("CGL001", 2)]


def test_several_directives_and_other_comments_on_a_line(tmp_path: Path) -> None:
    text = IMPORT + "x = get_local_dp_buffer()  # noqa: E501  # commgroup-lint: ignore[CGL001]\n"
    assert lint(tmp_path, text) == []


def test_findings_in_an_unparsable_file(tmp_path: Path) -> None:
    text = "# commgroup-lint: ignore-file[CGL000]\n" + IMPORT + "def f(:\n"
    assert lint(tmp_path, text) == []


def test_scan_reads_tokens_before_a_tokenize_error() -> None:
    found = scan("x = 1  # commgroup-lint: ignore[CGL001]\ny = (\n")
    assert [(d.line, d.codes) for ds in found.line.values() for d in ds] == [(1, ("CGL001",))]


def test_statement_ranges() -> None:
    found = scan("# commgroup-lint: ignore-file[CGL001]\nx = (\n  1,\n)\nif x:\n    y = '''\n'''\n")
    assert found.statement_start == {2: 2, 3: 2, 4: 2, 5: 5, 6: 6, 7: 6}


@pytest.mark.parametrize("rule", [UnusedSuppression, BlanketSuppression])
def test_rule_examples(tmp_path: Path, rule) -> None:  # noqa: ANN001
    for example in rule.VALID:
        assert [c for c in lint(tmp_path, example.code) if c[0] == rule.code] == [], example.code
    for example in rule.INVALID:
        assert [c[1] for c in lint(tmp_path, example.code) if c[0] == rule.code] == [example.line], example.code


@pytest.mark.parametrize("comment", ["# noqa: CGL001", "# noqa:CGL001", "# NOQA: E501, CGL001", "# noqa: F401 CGL001",
                                     "# noqa: CGL001  explanation after the codes"])
def test_noqa_naming_a_cgl_code_is_an_alias(tmp_path: Path, comment: str) -> None:
    assert lint(tmp_path, IMPORT + f"x = get_local_dp_buffer()  {comment}\n") == []
    assert lint(tmp_path, IMPORT + f"x = get_local_dp_buffer(  {comment}\n    hidden_size=16,\n)\n") == []


@pytest.mark.parametrize("comment", ["# noqa", "# noqa: E501", "# noqa: E501,F401", "# noqa CGL001", "# no qa: CGL001"])
def test_noqa_naming_no_cgl_code_changes_nothing(tmp_path: Path, comment: str) -> None:
    """Other linters' comments: no finding suppressed, none reported (no CGL100, no CGL101)."""
    assert lint(tmp_path, IMPORT + f"x = get_local_dp_buffer()  {comment}\n") == [("CGL001", 2, 5, MISSING)]
    assert lint(tmp_path, f"x = 1  {comment}\n") == []


def test_an_unused_noqa_code_is_reported_as_written(tmp_path: Path) -> None:
    assert lint(tmp_path, IMPORT + "x = get_local_dp_buffer()  # noqa: CGL002, E501\n") == [
        ("CGL001", 2, 5, MISSING),
        ("CGL100", 2, 28, "unused suppression: `noqa: CGL002` suppresses nothing; no CGL002 finding on this line or statement"),
    ]
    assert lint(tmp_path, "x = 1  # noqa: CGL9\n")[0][3] == (
        "unused suppression: `noqa: CGL9` suppresses nothing; `CGL9` is not a rule code (run `commgroup-lint rules`)")
