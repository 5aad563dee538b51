"""Every way a run can end: one `error:` line and the exit code docs/usage.md lists (issue 35,
items 10, 11 and 17). The console script runs in a subprocess, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_bad_input import GOOD

ENTRY = "import sys\nsys.argv[0] = 'commgroup-lint'\nfrom commgroup_lint.entry import main\nmain()\n"


def cli(cwd: Path, *args: str, prelude: str = "", stdout: int | None = None) -> subprocess.CompletedProcess[str]:
    """The console script's entry point in a fresh interpreter; `prelude` runs first (to simulate a fault)."""
    proc = subprocess.run([sys.executable, "-c", prelude + "\n" + ENTRY, *args], cwd=cwd, text=True, timeout=120,
                          stdout=stdout if stdout is not None else subprocess.PIPE, stderr=subprocess.PIPE,
                          env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "good.py").write_text(GOOD)
    return tmp_path


def only_error(proc: subprocess.CompletedProcess[str], message: str, code: int = 2) -> None:
    assert (proc.returncode, proc.stderr) == (code, f"error: {message}\n")


@pytest.mark.parametrize(("pyproject", "problem"), [
    ("tool = 1\n", "key 'tool' must be a table ([tool]), not an integer"),
    ("[tool]\ncommgroup-lint = 1\n", "key 'tool.commgroup-lint' must be a table ([tool.commgroup-lint]), not an integer"),
    ("[tool]\ncommgroup-lint = [1]\n", "key 'tool.commgroup-lint' must be a table ([tool.commgroup-lint]), not an array"),
    ('[tool.commgroup-lint]\nmin-confidence = ["low"]\n',
     "key 'tool.commgroup-lint.min-confidence': must be one of: high, medium, low"),
])
def test_a_configuration_value_of_the_wrong_type(tree: Path, pyproject: str, problem: str) -> None:
    (tree / "pyproject.toml").write_text(pyproject)
    only_error(cli(tree, "check", "good.py"), f"{tree / 'pyproject.toml'}: {problem}")


@pytest.mark.parametrize("root", ["/", "..", "sub/../..", "outside"])
def test_an_import_root_outside_the_project_is_refused_not_walked(tree: Path, root: str) -> None:
    (tree / "outside").symlink_to("/")
    (tree / "pyproject.toml").write_text(f'[tool.commgroup-lint]\nsrc = ["{root}"]\n')
    only_error(cli(tree, "check", "good.py"), f"{tree / 'pyproject.toml'}: key 'tool.commgroup-lint.src': '{root}' is "
                                              f"not inside the project ({tree}); list import roots as folders relative "
                                              "to this file, inside its folder")


def test_a_profile_file_that_is_not_utf8(tree: Path) -> None:
    (tree / "pyproject.toml").write_text('[tool.commgroup-lint]\nprofile-files = ["mine.toml"]\n')
    (tree / "mine.toml").write_bytes(b'x = "\xff"\n')
    only_error(cli(tree, "check", "good.py"), f"{tree / 'pyproject.toml'}: key 'tool.commgroup-lint.profile-files': "
                                              f"'{tree / 'mine.toml'}' is not UTF-8 text; save it as UTF-8")


def test_a_folder_that_cannot_be_searched(tree: Path) -> None:
    """As root no folder is unsearchable: the refusal is simulated where the search asks."""
    prelude = ("import pathlib\ndef refuse(self): raise PermissionError(13, 'Permission denied', str(self))\n"
               "pathlib.Path.is_dir = refuse\n")
    only_error(cli(tree, "check", "good.py", prelude=prelude),
               "cannot look at path 'good.py': Permission denied; check the folders' permissions")


def test_an_internal_error_exits_2_never_1(tree: Path) -> None:
    prelude = "import commgroup_lint.settings as s\ndef boom(*a, **k): raise LookupError('boom')\ns.Settings.lint = boom\n"
    only_error(cli(tree, "check", "good.py", prelude=prelude),
               "internal error: LookupError: boom (please report this)")


def test_ctrl_c_while_starting_up_exits_130(tree: Path) -> None:
    prelude = ("import builtins\nreal = builtins.__import__\n"
               "def interrupted(name, *a, **k):\n    if name == 'click': raise KeyboardInterrupt\n"
               "    return real(name, *a, **k)\nbuiltins.__import__ = interrupted\n")
    only_error(cli(tree, "check", "good.py", prelude=prelude), "interrupted", 130)


def test_ctrl_c_during_the_check_exits_130(tree: Path) -> None:
    prelude = "import commgroup_lint.settings as s\ndef stop(*a, **k): raise KeyboardInterrupt\ns.Settings.lint = stop\n"
    proc = cli(tree, "check", "good.py", prelude=prelude)
    assert (proc.returncode, proc.stderr) == (130, "\nerror: interrupted\n")  # click's blank line closes the `^C`


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_stdout_on_a_full_device(tree: Path, fmt: str) -> None:
    with open("/dev/full", "w") as full:
        proc = cli(tree, "check", "--format", fmt, "good.py", stdout=full.fileno())
    only_error(proc, "cannot write the report: No space left on device")


def test_the_exit_codes_of_an_ordinary_run(tree: Path) -> None:
    assert cli(tree, "check", "good.py").returncode == 1
    assert cli(tree, "check", "--exit-zero", "good.py").returncode == 0
    assert cli(tree, "check", "--select", "CGL005", "good.py").returncode == 0
    assert cli(tree, "--help").returncode == 0
    only_error(cli(tree, "check", "missing.py"), "path 'missing.py' does not exist; check the spelling or the current directory")
    usage = cli(tree, "check", "--no-such-option")
    assert usage.returncode == 2 and usage.stderr.endswith("Error: No such option '--no-such-option'.\n")


# --- runtime-log: a damaged log is an error, never "All clear" ---------------------------------

RECORD = {"code": "CGL002", "path": "model.py", "line": 3, "message": "buffer bound to group 'tp'", "rank": 0}


@pytest.mark.parametrize(("content", "problem"), [
    (b"1\n", "line 1 is JSON but not a violation record (an object): 1"),
    (b'"x"\n', 'line 1 is JSON but not a violation record (an object): "x"'),
    (b"[]\n", "line 1 is JSON but not a violation record (an object): []"),
    (b"{}\n", "line 1 has no field 'code' holding a string"),
    (json.dumps({**RECORD, "path": None}).encode() + b"\n", "line 1 has no field 'path' holding a string"),
    (json.dumps({k: v for k, v in RECORD.items() if k != "path"}).encode() + b"\n",
     "line 1 has no field 'path' holding a string"),
    (json.dumps({**RECORD, "path": 7}).encode() + b"\n", "line 1 has no field 'path' holding a string"),
    (json.dumps({**RECORD, "line": "3"}).encode() + b"\n", "line 1 has no field 'line' holding a positive integer"),
    (json.dumps({**RECORD, "rank": [0]}).encode() + b"\n", "line 1 has a field 'rank' that is not an integer"),
    (b"not json\n", "line 1 is not JSON"),
])
def test_runtime_log_lines_that_are_not_violations(tmp_path: Path, content: bytes, problem: str) -> None:
    (tmp_path / "log.jsonl").write_bytes(json.dumps(RECORD).encode() + b"\n" + content)
    only_error(cli(tmp_path, "runtime-log", "log.jsonl"),
               f"log.jsonl: {problem.replace('line 1', 'line 2')}; is this a log written by COMMGROUP_LINT_RUNTIME_LOG?")


def test_a_truncated_runtime_log(tmp_path: Path) -> None:
    (tmp_path / "log.jsonl").write_bytes(json.dumps(RECORD).encode() + b"\n" + json.dumps(RECORD).encode()[:20])
    only_error(cli(tmp_path, "runtime-log", "log.jsonl"), "log.jsonl: line 2 is truncated (it has no end of line): "
                                                         "the process writing it may have been killed; the log is incomplete")


def test_a_whole_runtime_log_is_reported(tmp_path: Path) -> None:
    (tmp_path / "log.jsonl").write_bytes(json.dumps(RECORD).encode() + b"\n")
    proc = cli(tmp_path, "runtime-log", "log.jsonl")
    assert proc.returncode == 1 and proc.stdout.startswith("model.py:3:1: CGL002 buffer bound to group 'tp' (ranks 0)\n")
