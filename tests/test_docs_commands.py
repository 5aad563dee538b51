"""The README and docs/usage.md say what the code does (issue 34, item 6): the commands they show
run and print what is shown, their links resolve, the rules table is `commgroup-lint rules`',
`--help` points to documentation that exists, and the README keeps its shape."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint import HOMEPAGE
from commgroup_lint.cli import main
from commgroup_lint.docs import fix_safety
from commgroup_lint.rule import all_rules

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SHOWN = [README, ROOT / "docs" / "usage.md"]
LINKED = [*SHOWN, ROOT / "docs" / "architecture.md", ROOT / "examples" / "dp_attention" / "README.md"]
CONSOLE = re.compile(r"^```console\n(.*?)^```$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def shown_commands(document: Path) -> list[tuple[str, str | None]]:
    """Each `$ command` of the document's `console` blocks, with the output shown under it (None
    when none is shown)."""
    found: list[tuple[str, str | None]] = []
    for block in CONSOLE.findall(document.read_text(encoding="utf-8")):
        for part in re.split(r"^\$ ", block, flags=re.MULTILINE)[1:]:
            command, _, output = part.partition("\n")
            found.append((command, output or None))
    return found


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the commands read, in a scratch directory: they may write (the rule pages' script)."""
    root = tmp_path_factory.mktemp("repository")
    for name in ("examples", "docs", "scripts", "commgroup_lint"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


COMMANDS = [(document.name, command, output) for document in SHOWN for command, output in shown_commands(document)]


def test_the_documents_show_commands() -> None:
    assert {name for name, _, _ in COMMANDS} == {"README.md", "usage.md"}
    assert sum(output is not None for _, _, output in COMMANDS) >= 4


@pytest.mark.parametrize(("document", "command", "output"), COMMANDS, ids=[f"{d}: {c}" for d, c, _ in COMMANDS])
def test_a_shown_command_runs_and_prints_what_is_shown(copy: Path, document: str, command: str,
                                                       output: str | None) -> None:
    bin_dir = Path(sys.executable).parent  # `commgroup-lint` and `python` of this environment
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "NO_COLOR": "1"}
    env.pop("COMMGROUP_LINT_RUNTIME", None)
    ran = subprocess.run(["bash", "-c", command], cwd=copy, env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode in (0, 1), ran.stderr
    if output is not None:
        assert ran.stdout == output


@pytest.mark.parametrize("document", LINKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve_inside_the_project(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    assert "shared/" not in text
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        resolved = (document.parent / target.partition("#")[0]).resolve()
        assert resolved.exists(), f"{document.name}: {target}"
        assert resolved.is_relative_to(ROOT), f"{document.name}: {target} is outside the project"


def test_the_rules_table_says_what_rules_says() -> None:
    rows = re.findall(r"^\| \[(CGL\d{3})\]\(docs/rules/\1\.md\) \| ([\w-]+) \| .* \|\s*([\w ]*?)\s*\|$",
                      README.read_text(encoding="utf-8"), re.MULTILINE)
    assert [(code, name, fix) for code, name, fix in rows] == [
        (r.code, r.name, fix_safety(r) or "") for r in all_rules().rules]


def test_the_readme_keeps_its_shape() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    first = text.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert first[0].endswith("pip install . && commgroup-lint check examples/dp_attention")
    assert first[1].endswith("pip install torch==2.13.0 && pip install -e '.[test,runtime]' && python -m pytest")
    assert "--index-url https://download.pytorch.org/whl/cpu" in text
    assert 'python -m pytest -m "not slow"' in text
    assert "pip install commgroup-lint\n" not in text and "rev: v" not in text  # no release, no tag
    assert 'pip install "commgroup-lint @ git+https://github.com/commgroup-lint/commgroup-lint@COMMIT"' in text


@pytest.mark.parametrize("command", [[], ["check"], ["server"], ["rules"], ["explain"], ["sites"]])
def test_help_points_to_documentation_that_exists(command: list[str]) -> None:
    """`pip install` ships no `docs/`: --help names the repository's pages, which exist."""
    shown = CliRunner().invoke(main, [*command, "--help"]).stdout
    for mention in re.findall(r"\S*docs/\S*", shown):
        url = mention.rstrip(").,")
        assert url.startswith(f"{HOMEPAGE}/blob/main/docs/") or url == f"{HOMEPAGE}/tree/main/docs", url
        assert (ROOT / url.split("/main/", 1)[1]).exists(), url


def test_the_install_snippets_name_a_commit_of_the_repository() -> None:
    """pip and pre-commit accept what the docs show: a direct reference to a git URL at a commit
    (there is no release on the registry, and no tag)."""
    from packaging.requirements import Requirement

    for document in SHOWN:
        for line in re.findall(r'pip install "([^"]+)"', document.read_text(encoding="utf-8")):
            requirement = Requirement(line)
            assert (requirement.name, requirement.url) == (
                "commgroup-lint", f"git+{HOMEPAGE}@COMMIT"), f"{document.name}: {line}"
