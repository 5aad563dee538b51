"""What the repository promises about itself (issue 15, items 5, 7 and 13): the Python versions it
installs on, the dependencies a plain `pip install` brings, and no path of a development
machine in any file (scripts take locations as arguments)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from commgroup_lint import toml

REPO = Path(__file__).resolve().parent.parent
PROJECT = toml.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
SUPPORTED = ("3.10", "3.11", "3.12", "3.13", "3.14")


def test_every_supported_python_may_install_it() -> None:
    allowed = SpecifierSet(PROJECT["requires-python"])
    assert [v for v in SUPPORTED if f"{v}.0" not in allowed] == []
    assert "3.9.0" not in allowed
    classified = {c.rpartition(" :: ")[2] for c in PROJECT["classifiers"] if c.startswith("Programming Language :: Python :: 3.")}
    assert classified == set(SUPPORTED)


def test_the_language_server_and_gitignore_matching_come_with_a_plain_install() -> None:
    assert {Requirement(r).name for r in PROJECT["dependencies"]} >= {"pygls", "pathspec"}
    assert "pytest-lsp" in {Requirement(r).name for r in PROJECT["optional-dependencies"]["test"]}


# A path only one machine has: a home, a root's home, or the development machine's work area.
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|root|Users/\w+|home/\w+)/")


def test_no_file_names_a_development_machines_path() -> None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and a git checkout")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            check=True, capture_output=True).stdout.decode().split("\0")
    found = []
    for name in filter(None, listed):
        path = REPO / name
        if not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        found += [f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in MACHINE_PATH.finditer(text)]
    assert found == []


def test_every_package_of_the_source_is_installed() -> None:
    """A package added under `commgroup_lint/` (`analysis/flow/`) must be listed, or a
    non-editable install (pre-commit's) lacks it while the editable one works."""
    listed = set(toml.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(REPO).parts) for init in (REPO / "commgroup_lint").rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)
