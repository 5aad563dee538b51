"""A configuration or profile file nested too deeply for the TOML parser is invalid TOML
(exit 2, one `error:` line), not a `RecursionError` traceback: the checked repository writes
these files."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint import toml
from commgroup_lint.cli import main

DEEP = "[" * 100_000 + "]" * 100_000
NESTED = "nested too deeply (arrays or inline tables inside one another)"


def test_loads_says_too_deep() -> None:
    with pytest.raises(toml.TOMLDecodeError, match=r"^nested too deeply \(arrays or inline tables"):
        toml.loads(f"x = {DEEP}\n")
    assert toml.loads("x = [[1]]\n") == {"x": [[1]]}


@pytest.mark.parametrize("where", ["configuration", "profile-files"])
def test_a_deep_file_is_an_error_not_a_traceback(project: Path, where: str) -> None:
    (project / "a.py").write_text("x = 1\n")
    if where == "configuration":
        (project / "pyproject.toml").write_text(f"[tool.commgroup-lint]\nx = {DEEP}\n")
        expected = f"error: {project / 'pyproject.toml'}: invalid TOML: {NESTED}\n"
    else:
        (project / "pyproject.toml").write_text('[tool.commgroup-lint]\nprofile-files = ["engine.toml"]\n')
        (project / "engine.toml").write_text(f"x = {DEEP}\n")
        expected = (f"error: {project / 'pyproject.toml'}: key 'tool.commgroup-lint.profile-files': "
                    f"'{project / 'engine.toml'}' is not valid TOML: {NESTED}\n")
    result = CliRunner().invoke(main, ["check", "."])
    assert result.exit_code == 2
    assert result.stderr == expected
