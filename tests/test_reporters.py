"""Machine formats: SARIF (validated against the official 2.1.0 schema), GitHub annotations, JUnit, JSON."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from commgroup_lint import rule_url
from commgroup_lint.cli import main
from commgroup_lint.engine import LintResult
from commgroup_lint.model import Applicability, Edit, Finding, Fix, Position, Severity
from commgroup_lint.reporters import FORMATS, MACHINE_FORMATS, github, junit, sarif
from commgroup_lint.rule import all_rules

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
BAD = "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n\n\ndef forward():\n    return get_local_dp_buffer()\n"
MESSAGE = (
    "`get_local_dp_buffer` is called without its group argument `group` (no fix: no collective consumes the"
    " buffer in this file; no sibling call site shows the group; candidates: attn_cp, attn_tp, moe_dp,"
    " moe_ep, moe_tp, tp)"
)


def validate_sarif(document: str) -> dict:
    log = json.loads(document)
    validator_class = jsonschema.validators.validator_for(SCHEMA)
    validator_class.check_schema(SCHEMA)
    errors = sorted(validator_class(SCHEMA).iter_errors(log), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)
    return log


def run_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, files: dict[str, str]):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return CliRunner().invoke(main, ["check", "--format", fmt, *files])


def test_formats_are_registered() -> None:
    assert FORMATS == ("text", "json", "sarif", "github", "junit")


# --- SARIF -----------------------------------------------------------------------------------

def test_sarif_from_the_cli_is_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_check(tmp_path, monkeypatch, "sarif", {"pkg/bad.py": BAD, "good.py": "x = 1\n"})
    assert result.exit_code == 1
    log = validate_sarif(result.stdout)
    assert log["version"] == "2.1.0"
    assert log["$schema"] == sarif.SCHEMA_URI
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "commgroup-lint"
    assert driver["informationUri"].startswith("https://")
    rules = all_rules().rules
    assert [r["id"] for r in driver["rules"]] == [r.code for r in rules]
    for descriptor, rule in zip(driver["rules"], rules):
        assert descriptor["name"] == rule.name
        assert descriptor["shortDescription"] == {"text": f"{rule.summary}."}
        assert descriptor["fullDescription"]["text"] == rule.documentation()
        assert descriptor["helpUri"] == rule_url(rule.code)
        assert descriptor["help"]["markdown"].startswith(f"# {rule.code}: {rule.name}\n")
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"description": {"text": "The directory the check ran in."}}}
    assert str(tmp_path.resolve()) not in result.stdout  # no absolute path of the checkout
    (res,) = run["results"]
    assert res == {
        "ruleId": "CGL001",
        "ruleIndex": [r.code for r in rules].index("CGL001"),
        "level": "error",
        "message": {"text": MESSAGE},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": "pkg/bad.py", "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": 5, "startColumn": 12, "endLine": 5, "endColumn": 33},
        }}],
        "properties": {"confidence": "high", "condition": None, "binding": {"path": "pkg/bad.py", "line": 5}},
    }


def test_the_schema_check_catches_invalid_logs() -> None:
    log = json.loads(sarif.render(LintResult()))
    log["runs"][0]["results"] = [{"ruleId": "CGL001", "message": {}, "level": "fatal"}]
    validator = jsonschema.validators.validator_for(SCHEMA)(SCHEMA)
    assert {e.validator for e in validator.iter_errors(log)} >= {"enum"}


def test_sarif_clean_run_is_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_check(tmp_path, monkeypatch, "sarif", {"good.py": "x = 1\n"})
    assert result.exit_code == 0
    assert validate_sarif(result.stdout)["runs"][0]["results"] == []


def _sarif_offset(text: str, line: int, column: int) -> int:
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\n", text)]
    return starts[line - 1] + column - 1


def _apply(text: str, spans: list[tuple[int, int, str]]) -> str:
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_sarif_fixes_apply_the_same_edits_by_offset_and_by_line(newline: str) -> None:
    text = newline.join([
        "from sglang.srt.layers.dp_attention import get_local_dp_buffer",
        "def forward():",
        "    ünï = get_local_dp_buffer()",
        "    return ünï",
        "",
    ])
    call = text.index("get_local_dp_buffer()") + len("get_local_dp_buffer(")
    header = text.index("def forward")
    edits = (
        Edit(call, call, "get_tp_group()"),
        Edit(0, 0, "from sglang.srt.distributed import get_tp_group" + newline),
        Edit(header, header + len("def forward():" + newline), "def forward():  # fixed" + newline),
    )
    fix = Fix(edits, Applicability.SAFE, "pass the TP group")
    finding = Finding("CGL001", "m.py", Position(3, 11), Position(3, 32), MESSAGE, Severity.ERROR, fix)
    result = LintResult(findings=[finding], files_checked=1, sources={"m.py": text})
    log = validate_sarif(sarif.render(result))
    (sarif_fix,) = log["runs"][0]["results"][0]["fixes"]
    assert sarif_fix["description"] == {"text": "pass the TP group (safe fix)"}
    (change,) = sarif_fix["artifactChanges"]
    assert change["artifactLocation"] == {"uri": "m.py", "uriBaseId": "%SRCROOT%"}
    expected = _apply(text, [(e.start, e.end, e.replacement) for e in edits])
    by_offset, by_line = [], []
    for replacement in change["replacements"]:
        region = replacement["deletedRegion"]
        new = replacement.get("insertedContent", {}).get("text", "")
        by_offset.append((region["charOffset"], region["charOffset"] + region["charLength"], new))
        by_line.append((_sarif_offset(text, region["startLine"], region["startColumn"]),
                        _sarif_offset(text, region["endLine"], region["endColumn"]), new))
    assert _apply(text, by_offset) == expected
    assert _apply(text, by_line) == expected
    assert change["replacements"][0]["deletedRegion"] == {
        "startLine": 1, "startColumn": 1, "endLine": 1, "endColumn": 1, "charOffset": 0, "charLength": 0,
    }


def test_sarif_pure_deletion_has_no_inserted_content() -> None:
    text = "x = 1  # commgroup-lint: ignore[CGL001]\n"
    fix = Fix((Edit(5, len(text) - 1, ""),), Applicability.SAFE, "remove the comment")
    finding = Finding("CGL100", "m.py", Position(1, 8), Position(1, 40), "unused", Severity.WARNING, fix)
    log = validate_sarif(sarif.render(LintResult([finding], 1, sources={"m.py": text})))
    result = log["runs"][0]["results"][0]
    assert result["level"] == "warning"
    (replacement,) = result["fixes"][0]["artifactChanges"][0]["replacements"]
    assert replacement == {"deletedRegion": {
        "startLine": 1, "startColumn": 6, "endLine": 1, "endColumn": 40, "charOffset": 5, "charLength": 34,
    }}


def test_sarif_uris() -> None:
    assert sarif.artifact_location("./a b/c.py") == {"uri": "a%20b/c.py", "uriBaseId": "%SRCROOT%"}
    assert sarif.artifact_location("/abs/x.py") == {"uri": "file:///abs/x.py"}


# --- GitHub ----------------------------------------------------------------------------------

def test_github_annotations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The title is the rule's name (with its code)."""
    result = run_check(tmp_path, monkeypatch, "github", {"pkg/bad.py": BAD})
    assert result.exit_code == 1
    assert result.stdout == (
        f"::error file=pkg/bad.py,line=5,col=12,endLine=5,endColumn=33,title=missing-group (CGL001)::{MESSAGE}\n"
    )


def test_github_paths_are_relative_to_the_repository_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GitHub places an annotation by its path from the top of the repository, wherever the run started."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "python" / "pkg").mkdir(parents=True)
    (tmp_path / "python" / "pkg" / "bad.py").write_text(BAD, encoding="utf-8")
    monkeypatch.chdir(tmp_path / "python")
    for given in ("pkg", "pkg/bad.py", "./pkg", str(tmp_path / "python" / "pkg")):
        result = CliRunner().invoke(main, ["check", "--format", "github", "--no-cache", given])
        assert result.stdout.startswith("::error file=python/pkg/bad.py,line=5,"), (given, result.stdout)
    monkeypatch.chdir(tmp_path / "python" / "pkg")
    result = CliRunner().invoke(main, ["check", "--format", "github", "--no-cache", "bad.py"])
    assert result.stdout.startswith("::error file=python/pkg/bad.py,line=5,")


def test_github_escaping_and_warnings() -> None:
    finding = Finding("CGL100", "./dir,x/a:b.py", Position(1, 2), Position(3, 4),
                      "100% unused\r\nsecond line: a, b", Severity.WARNING)
    assert github.render(LintResult([finding], 1)) == (
        "::warning file=dir%2Cx/a%3Ab.py,line=1,col=2,endLine=3,endColumn=4,title=unused-suppression (CGL100)"
        "::100%25 unused%0D%0Asecond line: a, b\n"
    )
    assert github.escape_property("a%b:c,d\n") == "a%25b%3Ac%2Cd%0A"
    assert github.escape_data("a%b:c,d\r") == "a%25b:c,d%0D"
    assert github.render(LintResult()) == ""


# --- JUnit -----------------------------------------------------------------------------------

def test_junit_with_findings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_check(tmp_path, monkeypatch, "junit",
                       {"a.py": BAD, "b.py": BAD + "\n\ndef g():\n    return get_local_dp_buffer()\n", "c.py": "x = 1\n"})
    assert result.exit_code == 1
    assert result.stdout.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites ')
    root = ET.fromstring(result.stdout.split("\n", 1)[1])
    assert root.tag == "testsuites"
    assert root.attrib == {"name": "commgroup-lint", "tests": "3", "failures": "3", "errors": "0"}
    suites = root.findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures")) for s in suites] == [("a.py", "1", "1"), ("b.py", "2", "2")]
    cases = suites[1].findall("testcase")
    assert [(c.get("name"), c.get("classname"), c.get("line"), c.get("column")) for c in cases] == [
        ("commgroup-lint.CGL001", "b", "5", "12"), ("commgroup-lint.CGL001", "b", "9", "12"),
    ]
    failure = cases[0].find("failure")
    assert failure is not None
    assert failure.attrib == {"message": MESSAGE, "type": "error"}  # the type is the severity
    assert failure.text == f"line 5, col 12, {MESSAGE}"


def test_junit_failure_type_is_the_severity() -> None:
    finding = Finding("CGL100", "a.py", Position(1, 1), Position(1, 2), "unused", Severity.WARNING)
    root = ET.fromstring(junit.render(LintResult([finding], 1)).split("\n", 1)[1])
    assert root.find("testsuite/testcase/failure").get("type") == "warning"


def test_junit_clean_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_check(tmp_path, monkeypatch, "junit", {"c.py": "x = 1\n"})
    assert result.exit_code == 0
    root = ET.fromstring(result.stdout.split("\n", 1)[1])
    assert root.attrib == {"name": "commgroup-lint", "tests": "1", "failures": "0", "errors": "0"}
    (suite,) = root.findall("testsuite")
    (case,) = suite.findall("testcase")
    assert case.attrib == {"name": "No errors found", "classname": "commgroup-lint"}
    assert case.find("failure") is None


def test_junit_escapes_markup() -> None:
    finding = Finding("CGL001", "a<&>.py", Position(1, 1), Position(1, 2), 'a "<b>" & c')
    root = ET.fromstring(junit.render(LintResult([finding], 1)).split("\n", 1)[1])
    case = root.find("testsuite/testcase")
    assert root.find("testsuite").get("name") == "a<&>.py"
    assert case.find("failure").get("message") == 'a "<b>" & c'


# --- JSON ------------------------------------------------------------------------

def test_json_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_check(tmp_path, monkeypatch, "json", {"a.py": BAD})
    assert json.loads(result.stdout) == [{
        "code": "CGL001", "path": "a.py", "line": 5, "column": 12, "end_line": 5, "end_column": 33,
        "message": MESSAGE, "severity": "error", "fix_available": False, "fix": None,
        "condition": None, "confidence": "high", "binding": {"path": "a.py", "line": 5},
    }]


FIXABLE = (
    "from sglang.srt.distributed import get_tp_group\n"
    "from sglang.srt.layers.dp_attention import dp_gather_partial, get_global_dp_buffer\n"
    "def f(x, fb):\n"
    "    g = get_global_dp_buffer()\n"
    "    dp_gather_partial(g, x, fb)\n"
)


def test_json_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_check(tmp_path, monkeypatch, "json", {"a.py": FIXABLE})
    [finding] = json.loads(result.stdout)
    assert (finding["fix_available"], finding["fix"]) == (True, {
        "applicability": "safe",
        "message": "Pass `get_tp_group()`: the group of `dp_gather_partial` at line 5",
        "edits": [{"line": 4, "column": 30, "end_line": 4, "end_column": 30, "content": "get_tp_group()"}],
    })


@pytest.mark.parametrize("fmt", sorted(MACHINE_FORMATS))
def test_machine_formats_print_only_the_document(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    result = run_check(tmp_path, monkeypatch, fmt, {"a.py": BAD})
    assert result.stderr == ""
    assert "Found" not in result.stdout


def test_text_shortens_a_long_condition_unless_verbose() -> None:
    from commgroup_lint.reporters.text import conjuncts, shown_message

    condition = "a > 1 and (b or (c and d)) and e and f and g and h"
    f = Finding("CGL002", "x.py", Position(1, 1), Position(1, 2), f"bound to tp, when {condition}", condition=condition)
    assert conjuncts(condition) == ["a > 1", "(b or (c and d))", "e", "f", "g", "h"]
    assert shown_message(f, verbose=False) == "bound to tp, when a > 1 and (b or (c and d)) and e and f and 2 more"
    assert shown_message(f, verbose=True) == f.message
