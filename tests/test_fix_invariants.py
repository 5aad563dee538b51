"""The fixer's invariants (issue 13): a fix that does not remove its finding is reverted and
reported, the count is of fixes that held, and a fix never adds a keyword the callee's
definition does not take. (Exit codes after `--fix` are in test_fix_cli.py; every fixture's
idempotence in test_fix_fixtures.py.)"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint.cli import main
from commgroup_lint.discovery import discover
from commgroup_lint.engine import Linter
from commgroup_lint.fixer import fix_result
from commgroup_lint.model import Applicability, Edit, Fix, RuleSelection
from lintkit import FIXABLE, FIXED, PROFILE

# Two functions: the first's buffer misses its group (its fix holds), the second's too.
TWO = FIXABLE + "\n\n" + FIXABLE.split("\n\n\n", 1)[1].replace("def gather(", "def gather_again(")


def lint(path: Path) -> tuple[Linter, object]:
    linter = Linter(PROFILE, RuleSelection(("CGL",)))
    return linter, linter.lint(discover([str(path)]))


def a_comment_instead(fix: Fix) -> Fix:
    """A fix that edits the file without touching the call it is about."""
    return Fix((Edit(0, 0, "# touched\n"),), Applicability.SAFE, fix.description)


def test_a_fix_that_does_not_remove_its_finding_is_reverted_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_text(FIXABLE, encoding="utf-8")
    linter, result = lint(path)
    [finding] = result.findings
    result.findings[0] = replace(finding, fix=a_comment_instead(finding.fix))
    report = fix_result(linter, result, result.fixable, unsafe=False)
    assert report.files == []
    assert report.failures == [(str(path), (
        "the fix for CGL001 at line 5 (Pass `get_tp_group()`: the group of `dp_gather_partial` at line 6) "
        "did not remove the finding; reverted"
    ))]
    assert report.fixed == 0


def test_only_the_fixes_that_held_are_counted_and_written(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_text(TWO, encoding="utf-8")
    linter, result = lint(path)
    assert [(f.code, f.start.line) for f in result.findings] == [("CGL001", 5), ("CGL001", 11)]
    result.findings[1] = replace(result.findings[1], fix=a_comment_instead(result.findings[1].fix))
    report = fix_result(linter, result, result.fixable, unsafe=False)
    assert report.fixed == 1
    assert [failure for _, failure in report.failures] == [
        "the fix for CGL001 at line 11 (Pass `get_tp_group()`: the group of `dp_gather_partial` at line 12) "
        "did not remove the finding; reverted"
    ]
    [fixed] = report.files
    assert fixed.text == FIXED + "\n\n" + FIXABLE.split("\n\n\n", 1)[1].replace("def gather(", "def gather_again(")


def test_a_keyword_the_definition_does_not_take_is_never_added(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's profile says `acme.mem.sym` takes its group as `group`; the scanned definition
    names it `grp`. Adding `group=` would make a call Python refuses: no fix, and why."""
    (tmp_path / "commgroup-lint.toml").write_text(
        '[extend-profile.profile]\npackages = ["acme"]\n\n'
        '[extend-profile.contexts."acme.mem.sym"]\nparam = "group"\nindex = 1\n',
        encoding="utf-8",
    )
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "__init__.py").write_text("")
    (tmp_path / "acme" / "mem.py").write_text(
        "import contextlib\n\n\n@contextlib.contextmanager\ndef sym(pool, grp=None):\n    yield\n", encoding="utf-8",
    )
    program = (
        "import torch\n"
        "from sglang.srt.distributed import get_tp_group\n"
        "from acme.mem import sym\n\n\n"
        "def reduce(pool, x):\n"
        "    with sym(pool):\n"
        "        out = torch.empty_like(x)\n"
        "    get_tp_group().all_reduce(out)\n"
        "    return out\n"
    )
    (tmp_path / "model.py").write_text(program, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--fix", "--unsafe-fixes", "model.py"])
    assert result.exit_code == 1
    assert "model.py:7:10: CGL001 `sym` is called without its group argument `group`" in result.stdout
    assert "(no fix: `sym` takes no parameter `group` in its definition)" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "Fixed 0 findings, 1 remaining (1 file checked)."
    assert (tmp_path / "model.py").read_text(encoding="utf-8") == program
