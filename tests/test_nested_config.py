"""Each file reports as its nearest configuration says (issue 34, item 2): a file's findings do
not depend on what else is on the command line; `--config` names the one configuration of all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint.cli import main

SOURCE = """\
from sglang.srt.distributed import get_tp_group
from sglang.srt.layers.dp_attention import attn_tp_all_gather_into_tensor, get_local_dp_buffer


def gather(x):
    out = get_local_dp_buffer(get_tp_group())
    attn_tp_all_gather_into_tensor(out, x)
    return get_local_dp_buffer()
"""
BOTH = [("CGL002", 6, 11), ("CGL001", 8, 12)]  # what the source holds
NESTED = [("CGL001", 8, 12)]  # what `dpa/pyproject.toml` (ignoring CGL002) leaves


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git work tree whose `dpa/` has a configuration of its own, entered as a user would."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text("[tool.commgroup-lint]\nmin-confidence = 'medium'\n")
    for name in ("dpa", "other"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "mod.py").write_text(SOURCE)
    (tmp_path / "dpa" / "pyproject.toml").write_text("[tool.commgroup-lint]\nignore = ['CGL002']\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def findings(*args: str) -> dict[str, list[tuple[str, int, int]]]:
    result = CliRunner().invoke(main, ["check", "--format", "json", "--no-cache", *args])
    assert result.exit_code == 1, result.output
    by_path: dict[str, list[tuple[str, int, int]]] = {}
    for f in json.loads(result.stdout):
        by_path.setdefault(f["path"], []).append((f["code"], f["line"], f["column"]))
    return by_path


def test_a_file_alone_reports_as_its_nearest_configuration(project: Path) -> None:
    assert findings("dpa/mod.py") == {"dpa/mod.py": NESTED}
    assert findings("other/mod.py") == {"other/mod.py": BOTH}


def test_checked_together_each_file_keeps_its_own(project: Path) -> None:
    assert findings("dpa/mod.py", "other/mod.py") == {"dpa/mod.py": NESTED, "other/mod.py": BOTH}
    assert findings(".") == {"./dpa/mod.py": NESTED, "./other/mod.py": BOTH}


def test_from_the_subdirectory_too(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project / "dpa")
    assert findings("mod.py", "../other/mod.py") == {"mod.py": NESTED, "../other/mod.py": BOTH}


def test_config_overrides_every_file(project: Path) -> None:
    assert findings("--config", "pyproject.toml", "dpa/mod.py") == {"dpa/mod.py": BOTH}


def test_command_line_options_apply_on_top_of_each_files_configuration(project: Path) -> None:
    assert findings("--ignore", "CGL001", "dpa/mod.py", "other/mod.py") == {"other/mod.py": BOTH[:1]}
    assert findings("--select", "CGL002", "dpa/mod.py") == {"dpa/mod.py": BOTH[:1]}  # --select starts over


def test_the_cache_keeps_each_files_own_findings(project: Path) -> None:
    """The cache is the project's: a nested file's check is never served to another scope."""
    def cached(*paths: str) -> list[tuple[str, str]]:
        result = CliRunner().invoke(main, ["check", "--format", "json", *paths])
        return [(f["path"], f["code"]) for f in json.loads(result.stdout)]

    for _ in range(2):
        assert cached("dpa/mod.py", "other/mod.py") == [("dpa/mod.py", "CGL001"), ("other/mod.py", "CGL002"),
                                                        ("other/mod.py", "CGL001")]
        assert cached("dpa/mod.py") == [("dpa/mod.py", "CGL001")]
    (project / "dpa" / "pyproject.toml").unlink()
    assert cached("dpa/mod.py") == [("dpa/mod.py", "CGL002"), ("dpa/mod.py", "CGL001")]


def test_a_bad_nested_configuration_is_a_usage_error(project: Path) -> None:
    (project / "dpa" / "pyproject.toml").write_text("[tool.commgroup-lint]\nignroe = ['CGL002']\n")
    result = CliRunner().invoke(main, ["check", "other/mod.py", "dpa/mod.py"])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {project / 'dpa' / 'pyproject.toml'}: key 'tool.commgroup-lint.ignroe': "
                                    "unknown key")
