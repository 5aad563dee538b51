"""A process-wide shim comes up whatever the configuration says: a piece of it that fails (one
profile file, `extend-profile`, the configuration's or the environment's profile selection, the
file itself when it is not TOML) is dropped alone, and one line on stderr says what failed, what
was dropped and what was kept. `enforce` still raises."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from commgroup_lint.config import ConfigError
from commgroup_lint.runtime import _knowledge
from rt_project import clean_env

EXTEND = textwrap.dedent(
    """\
    [tool.commgroup-lint.extend-profile.contexts."mypkg.alloc.symmetric"]
    param = "group"
    index = 0
    """
)
GOOD = textwrap.dedent(
    """\
    [profile]
    name = "mine"
    extends = ["torch"]

    [contexts."mine.alloc.ctx"]
    param = "group"
    index = 0
    """
)
OURS = ("mine.alloc.ctx", "mypkg.alloc.symmetric")


def _project(root: Path, files: dict[str, str], head: str = "") -> Path:
    listed = ", ".join(f'"{name}"' for name in files)
    (root / "pyproject.toml").write_text(f"[tool.commgroup-lint]\n{head}profile-files = [{listed}]\n\n{EXTEND}")
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def _ours(knowledge: _knowledge.Knowledge) -> list[str]:
    return sorted(name for name in knowledge.contexts if name in OURS)


@pytest.fixture(autouse=True)
def _no_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_knowledge.PROFILE_ENV_VAR, raising=False)


def test_a_malformed_profile_file_is_dropped_alone(tmp_path: Path) -> None:
    root = _project(tmp_path, {"good.toml": GOOD, "bad.toml": "[profile\n"})
    with pytest.raises(ConfigError):
        _knowledge.load(cwd=root)  # enforce's loader: strict
    knowledge, line = _knowledge.load_lenient(cwd=root)
    assert _ours(knowledge) == list(OURS)
    assert "sglang.srt.distributed.parallel_state.GroupCoordinator" in knowledge.group_classes  # the shipped ones
    assert line is not None and line.startswith(f"{root / 'pyproject.toml'}: key 'tool.commgroup-lint.profile-files': ")
    assert line.endswith("; dropped profile file 'bad.toml'; kept profile file 'good.toml', extend-profile")


def test_a_profile_file_extending_an_unknown_profile_is_dropped(tmp_path: Path) -> None:
    root = _project(tmp_path, {"good.toml": GOOD, "odd.toml": GOOD.replace('"torch"', '"nope"').replace("mine", "odd")})
    knowledge, line = _knowledge.load_lenient(cwd=root)
    assert _ours(knowledge) == list(OURS) and "odd.alloc.ctx" not in knowledge.contexts
    assert "unknown profile 'nope'" in line and line.endswith(
        "; dropped profile file 'odd.toml'; kept profile file 'good.toml', extend-profile")


def test_a_malformed_extend_profile_keeps_the_profile_files(tmp_path: Path) -> None:
    root = _project(tmp_path, {"good.toml": GOOD})
    with (root / "pyproject.toml").open("a") as f:
        f.write('\n[tool.commgroup-lint.extend-profile.allocators."mypkg.alloc.buffer"]\nparm = "group"\n')
    knowledge, line = _knowledge.load_lenient(cwd=root)
    assert _ours(knowledge) == ["mine.alloc.ctx"]
    assert "extend-profile.allocators" in line and line.endswith(
        "; dropped extend-profile; kept profile file 'good.toml'")


def test_a_bad_profile_selection_is_dropped_and_the_configuration_kept(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path, {"good.toml": GOOD}, head='profiles = ["nope"]\n')
    monkeypatch.setenv(_knowledge.PROFILE_ENV_VAR, "sglang,bogus")
    knowledge, line = _knowledge.load_lenient(cwd=root)
    assert _ours(knowledge) == list(OURS)
    assert "sglang.srt.distributed.parallel_state.GroupCoordinator" in knowledge.group_classes  # all shipped
    assert "unknown profile 'bogus'" in line and "unknown profile 'nope'" in line
    assert line.endswith("; dropped the profile selection 'sglang,bogus', the configuration's profiles; "
                         "kept profile file 'good.toml', extend-profile")


def test_a_key_the_shim_does_not_read_drops_nothing(tmp_path: Path) -> None:
    root = _project(tmp_path, {"good.toml": GOOD}, head="select = 3\n")
    knowledge, line = _knowledge.load_lenient(cwd=root)
    assert _ours(knowledge) == list(OURS)
    assert line == (f"{root / 'pyproject.toml'}: key 'tool.commgroup-lint.select': must be a list of strings "
                    "(a key the runtime shim does not read: nothing dropped)")


def test_a_configuration_that_is_not_toml_is_dropped_whole(tmp_path: Path) -> None:
    (tmp_path / "commgroup-lint.toml").write_text("profiles = [\n")
    knowledge, line = _knowledge.load_lenient(cwd=tmp_path)
    assert _ours(knowledge) == [] and "sglang.srt.distributed.parallel_state.GroupCoordinator" in knowledge.group_classes
    assert line.startswith(f"{tmp_path / 'commgroup-lint.toml'}: invalid TOML: ")
    assert line.endswith(f"; dropped the configuration {tmp_path / 'commgroup-lint.toml'}; kept nothing of the configuration")


def test_nothing_failing_says_nothing(tmp_path: Path) -> None:
    knowledge, line = _knowledge.load_lenient(cwd=_project(tmp_path, {"good.toml": GOOD}))
    assert line is None and _ours(knowledge) == list(OURS)


def test_the_process_wide_shim_says_it_in_one_line(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    root = _project(tmp_path, {"good.toml": GOOD, "bad.toml": "[profile\n"})
    code = ("from commgroup_lint.runtime import _process; k = _process._knowledge_for(None); "
            f"print(sorted(n for n in k.contexts if n in {OURS!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root,
                         env=clean_env())
    assert out.stdout == f"{sorted(OURS)}\n", out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("commgroup-lint")]
    assert len(lines) == 1 and lines[0].endswith("; dropped profile file 'bad.toml'; kept profile file 'good.toml', "
                                                 "extend-profile")
