"""File names that are not text (issue 35, items 13, 14 and 17): an escape code, a bell, a
newline or a byte that is not UTF-8 in a name never reaches the terminal raw, never breaks a
line-based format or the XML of JUnit, and SARIF keeps the exact bytes in its URIs and names
no absolute path of the checkout."""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from lintkit import FIXABLE
from test_bad_input import GOOD
from test_exit_codes import cli
from test_reporters import validate_sarif

NAMES = {  # the name on disk (bytes) -> how it is shown
    b"red\x1b[31mX.py": "red\\x1b[31mX.py",
    b"bell\x07.py": "bell\\x07.py",
    b"new\nline.py": "new\\x0aline.py",
    b"bad\xff.py": "bad\\xff.py",
}
URIS = {b"red\x1b[31mX.py": "red%1B%5B31mX.py", b"bell\x07.py": "bell%07.py", b"new\nline.py": "new%0Aline.py",
        b"bad\xff.py": "bad%FF.py"}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name in NAMES:
        with open(os.path.join(os.fsencode(tmp_path), name), "wb") as f:
            f.write(GOOD.encode())
    return tmp_path


def check(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = cli(tree, "check", "--no-cache", "--color", "never", *args, ".")
    assert proc.returncode == 1, proc.stderr
    return proc


def test_text_output(tree: Path) -> None:
    lines = [line for line in check(tree).stdout.splitlines() if line.startswith("./")]
    assert sorted(line.split(":")[0] for line in lines) == sorted(f"./{shown}" for shown in NAMES.values())
    assert "\x1b" not in check(tree).stdout and "\x07" not in check(tree).stdout


def test_github_annotations(tree: Path) -> None:
    out = check(tree, "--format", "github").stdout
    files = sorted(line.split(",")[0].removeprefix("::error file=") for line in out.splitlines())
    assert files == sorted(NAMES.values())
    assert "\x1b" not in out and "\x07" not in out


def test_junit_is_xml(tree: Path) -> None:
    root = ET.fromstring(check(tree, "--format", "junit").stdout)
    assert sorted(s.get("name") for s in root.iter("testsuite")) == sorted(f"./{shown}" for shown in NAMES.values())


def test_sarif_keeps_the_bytes_and_no_absolute_path(tree: Path) -> None:
    for target in (".", str(tree)):
        proc = cli(tree, "check", "--no-cache", "--format", "sarif", target)
        log = validate_sarif(proc.stdout)
        locations = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in log["runs"][0]["results"]]
        assert sorted(loc["uri"] for loc in locations) == sorted(URIS.values())
        assert {loc["uriBaseId"] for loc in locations} == {"%SRCROOT%"}
        assert str(tree) not in proc.stdout


def test_a_file_outside_the_working_directory_keeps_its_absolute_uri(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "m.py").write_text(GOOD)
    (tmp_path / "here").mkdir()
    proc = cli(tmp_path / "here", "check", "--no-cache", "--format", "sarif", str(tmp_path / "elsewhere" / "m.py"))
    [result] = validate_sarif(proc.stdout)["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": (tmp_path / "elsewhere" / "m.py").as_uri()}


def test_diff_headers(tmp_path: Path) -> None:
    with open(os.path.join(os.fsencode(tmp_path), b"new\nline\x1b[1m.py"), "wb") as f:
        f.write(FIXABLE.encode())
    proc = cli(tmp_path, "check", "--no-cache", "--color", "never", "--diff", ".")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[:2] == ["--- a/./new\\x0aline\\x1b[1m.py", "+++ b/./new\\x0aline\\x1b[1m.py"]


def test_a_location_is_never_taken_for_an_emoji_code(tmp_path: Path) -> None:
    """`m.py:100:12` holds rich's `:100:` emoji code; it is printed as written."""
    (tmp_path / "m.py").write_text(GOOD.replace("\n\ndef forward", "\n" * 95 + "\n\ndef forward"))
    proc = check(tmp_path)
    assert proc.stdout.splitlines()[0].startswith("./m.py:100:12: CGL001 ")
