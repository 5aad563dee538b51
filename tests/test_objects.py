"""Objects bound to a group (`[objects]` in a profile, docs/profiles.md): the worked example of
the docs runs and says what the docs show, and the table's errors name the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint.cli import main
from commgroup_lint.profile import ProfileError, load_shipped, parse_profile

DOCS = Path(__file__).resolve().parent.parent / "docs" / "profiles.md"


def _example() -> tuple[str, str, str]:
    """The worked example's profile, module and `sites` output, as docs/profiles.md shows them."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("Worked example: `fastcomm`"):text.index("### `[runtime]`")]
    toml, python, sites = (re.search(rf"```{kind}\n(.*?)```", section, re.DOTALL).group(1)  # type: ignore[union-attr]
                           for kind in ("toml", "python", "text"))
    return toml, python, sites


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    toml, python, _ = _example()
    (tmp_path / "fastcomm.toml").write_text('[profile]\nname = "fastcomm"\npackages = ["fastcomm"]\n'
                                           'detect = ["fastcomm"]\nextends = ["torch"]\n\n' + toml)
    (tmp_path / "commgroup-lint.toml").write_text('profiles = ["torch"]\nprofile-files = ["fastcomm.toml"]\n')
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "moe.py").write_text(python)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_worked_example_lists_what_the_docs_show(project: Path) -> None:
    result = CliRunner().invoke(main, ["sites", "app"])
    assert (result.exit_code, result.stdout) == (0, _example()[2])


def test_the_worked_example_reports_both_bugs(project: Path) -> None:
    result = CliRunner().invoke(main, ["check", "--no-cache", "app"])
    assert result.exit_code == 1
    lines = [line for line in result.stdout.splitlines() if ": CGL" in line]
    assert [line.split(" (no fix")[0] for line in lines] == [
        "app/moe.py:9:10: CGL002 the object built by `create_workspace` is bound to group `tp` but reaches "
        "`free_workspace` on group `ep` at line 11",
        "app/moe.py:13:17: CGL002 the object built by `Buffer` is bound to group `tp` but reaches `combine` on "
        "group `ep` at line 15",
    ]


@pytest.mark.parametrize(("table", "key", "message"), [
    ({"consumers": {"lib.op": {"group": {"param": "g"}}}}, 'objects.consumers."lib.op".object',
     "is required (a table with `param` and `index`: the argument holding the object)"),
    ({"builders": {"lib.Buffer": {"param": "group", "atr": "x"}}}, 'objects.builders."lib.Buffer".atr',
     "unknown key (expected one of: also, attr, default, index, param, shape, size)"),
    ({"builders": {"lib.Buffer": {"param": "group", "also": {"param": "backend"}}}}, 'objects.builders."lib.Buffer".also',
     "must be a list of tables (each with `param` and `index`)"),
    ({"methods": {"consumers": ["dispatch"]}}, "objects.methods.consumers",
     "unknown key (expected one of: allocator, consumer, handle)"),
    ({"builder": {}}, "objects.builder", "unknown key (expected one of: builders, consumers, methods)"),
])
def test_errors_in_the_objects_table_name_the_key(table: dict, key: str, message: str) -> None:
    with pytest.raises(ProfileError) as err:
        parse_profile({"objects": table}, "acme.toml")
    assert str(err.value) == f"acme.toml: key '{key}': {message}"


def test_the_shipped_library_profiles_describe_objects() -> None:
    flashinfer, deepep = load_shipped("flashinfer"), load_shipped("deepep")
    assert flashinfer.objects.builders["flashinfer.comm.allreduce.create_allreduce_fusion_workspace"].group.default \
        == "world"
    assert "flashinfer.comm.allreduce.allreduce_fusion" in flashinfer.objects.consumers
    assert deepep.objects.builders["deep_ep.Buffer"].group.index == 0
    assert {"dispatch", "combine"} <= deepep.objects.consumer_methods


STATIC = Path(__file__).resolve().parent / "fixtures" / "static"


@pytest.mark.parametrize("name", ["flashinfer_workspace_vllm_no_group", "flashinfer_workspace_sglang_no_group"])
def test_a_workspace_left_to_world_beside_a_backend_of_another_group(name: str) -> None:
    """The upstream bug (vllm-project/vllm#45917, sgl-project/sglang#24452): reported at default
    confidence, naming the omitted argument and the one that carries the other group."""
    result = CliRunner().invoke(main, ["check", "--no-cache", str(STATIC / f"{name}.py")])
    lines = [line.split(": ", 1)[1] for line in result.stdout.splitlines() if ": CGL" in line]
    assert (result.exit_code, lines[0]) == (
        1, "CGL002 the object built by `create_allreduce_fusion_workspace` is bound to group world (its `group` not "
           "given: the default) but its `comm_backend` is for the group of `group`")
    assert len(lines) == {"flashinfer_workspace_vllm_no_group": 1, "flashinfer_workspace_sglang_no_group": 2}[name]


def test_a_workspace_left_to_world_that_spans_the_tp_ranks() -> None:
    """vLLM's fusion pass before vllm-project/vllm#34109: `world_size=self.tp_size` and no group."""
    result = CliRunner().invoke(main, ["check", "--no-cache", str(STATIC / "flashinfer_workspace_vllm_pass_no_group.py")])
    lines = [line.split(": ", 1)[1] for line in result.stdout.splitlines() if ": CGL" in line]
    assert (result.exit_code, lines) == (1, [
        "CGL002 the object built by `create_allreduce_fusion_workspace` is bound to group world (its `group` not "
        "given: the default) but its `world_size` is for group tp, when tp_size > 1",
    ])


def test_a_manager_given_the_tp_size_for_a_workspace_left_to_world(monkeypatch: pytest.MonkeyPatch) -> None:
    """SGLang before sgl-project/sglang#24452: the size comes from the caller, the builder is in the
    manager's method, reached through the module's one instance."""
    monkeypatch.chdir(STATIC.parent.parent.parent)
    result = CliRunner().invoke(main, ["check", "--no-cache", "tests/fixtures/static/flashinfer_workspace_sglang_manager_no_group.py"])
    lines = [line.split(": ", 1)[1] for line in result.stdout.splitlines() if ": CGL" in line]
    where = "tests/fixtures/static/flashinfer_workspace_sglang_manager_no_group.py:42"
    assert (result.exit_code, lines) == (1, [
        f"CGL002 the object built by `initialize` is bound to group world (its `group` not given at {where}: the "
        "default) but its `world_size` is for group tp, when tp_size > 1 and (not initialized or tp_size != "
        "world_size) and comm is not None (no fix: the helper fixes the group inside, at "
        f"{where}: give it a group parameter)",
    ])


def test_the_fixed_manager_binds_its_workspace_to_the_tp_group() -> None:
    """SGLang 0.5.12's form: `group=device_group` inside a `dict(...)` the call spreads (`**kwargs`)."""
    result = CliRunner().invoke(main, ["sites", str(STATIC / "flashinfer_workspace_sglang_manager_group.py")])
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0].endswith(
        "FlashInferWorkspaceManager.initialize: `create_allreduce_fusion_workspace` (object) -> tp")
