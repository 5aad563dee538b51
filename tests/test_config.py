"""Configuration files: discovery, every key, errors, and how command-line options override them."""

from __future__ import annotations

import textwrap
from dataclasses import fields
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint.cli import main
from commgroup_lint.config import Config, ConfigError, find_config, load_config
from commgroup_lint.options import resolve_selection
from commgroup_lint.profile import Methods, load_shipped

BAD = "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n\n\ndef forward():\n    return get_local_dp_buffer()\n"
GOOD = "x = 1\n"
CGL001 = "CGL001 `get_local_dp_buffer` is called without its group argument `group`"


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def check(cwd: Path, *args: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(cwd)
    return CliRunner().invoke(main, ["check", "--format", "json", *args])


def codes_at(result) -> list[tuple[str, str, int]]:  # noqa: ANN001
    import json

    return [(f["path"], f["code"], f["line"]) for f in json.loads(result.stdout)]


# --- discovery -------------------------------------------------------------------------------

def test_no_config_found(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(GOOD)
    assert find_config(["a.py"], cwd=tmp_path) is None


def test_pyproject_without_section_is_skipped(tmp_path: Path) -> None:
    write(tmp_path, {
        "pyproject.toml": "[tool.commgroup-lint]\nignore = ['CGL002']\n",
        "pkg/pyproject.toml": "[project]\nname = 'x'\n",
        "pkg/a.py": GOOD,
    })
    assert find_config(["pkg/a.py"], cwd=tmp_path) == tmp_path / "pyproject.toml"


def test_nearest_wins_and_standalone_beats_pyproject(tmp_path: Path) -> None:
    write(tmp_path, {
        "pyproject.toml": "[tool.commgroup-lint]\n",
        "pkg/pyproject.toml": "[tool.commgroup-lint]\n",
        "pkg/commgroup-lint.toml": "",
        "pkg/sub/a.py": GOOD,
        "other/b.py": GOOD,
    })
    assert find_config(["pkg/sub/a.py"], cwd=tmp_path) == tmp_path / "pkg" / "commgroup-lint.toml"
    assert find_config(["pkg/sub"], cwd=tmp_path) == tmp_path / "pkg" / "commgroup-lint.toml"
    assert find_config(["other/b.py"], cwd=tmp_path) == tmp_path / "pyproject.toml"


def test_several_paths_use_their_common_ancestor(tmp_path: Path) -> None:
    write(tmp_path, {
        "pyproject.toml": "[tool.commgroup-lint]\n",
        "pkg/commgroup-lint.toml": "",
        "pkg/a.py": GOOD,
        "other/b.py": GOOD,
    })
    assert find_config(["pkg/a.py", "other/b.py"], cwd=tmp_path) == tmp_path / "pyproject.toml"
    assert find_config([], cwd=tmp_path / "pkg") == tmp_path / "pkg" / "commgroup-lint.toml"


# --- every key -------------------------------------------------------------------------------

def test_every_key_is_read(tmp_path: Path) -> None:
    write(tmp_path, {"pyproject.toml": """
        [tool.commgroup-lint]
        select = ["CGL0", "cgl100"]
        extend-select = ["CGL101"]
        ignore = ["CGL002"]
        exclude = ["generated/", "build"]
        extend-exclude = ["./vendor/x.py"]
        profile = "sglang"
        force-exclude = true

        [tool.commgroup-lint.per-file-ignores]
        "tests/*.py" = ["CGL001"]
        "conftest.py" = ["CGL001", "CGL002"]

        [tool.commgroup-lint.extend-profile.allocators."mypkg.alloc.get_buffer"]
        param = "group"
        index = 0
    """})
    config = load_config(tmp_path / "pyproject.toml")
    root = tmp_path.as_posix()
    assert config.path == tmp_path / "pyproject.toml"
    assert config.select == ("CGL0", "CGL100")
    assert config.extend_select == ("CGL101",)
    assert config.ignore == ("CGL002",)
    assert config.exclude == ("generated", "build")
    assert config.extend_exclude == (f"{root}/vendor/x.py",)
    assert config.profile == "sglang"
    assert config.force_exclude is True
    assert config.per_file_ignores == ((f"{root}/tests/*.py", ("CGL001",)), ("conftest.py", ("CGL001", "CGL002")))
    assert config.extend_profile is not None
    assert "mypkg.alloc.get_buffer" in config.extend_profile.allocators


def test_standalone_file_has_top_level_keys(tmp_path: Path) -> None:
    write(tmp_path, {"commgroup-lint.toml": "ignore = ['CGL001']\n"})
    assert load_config(tmp_path / "commgroup-lint.toml") == Config(path=tmp_path / "commgroup-lint.toml", ignore=("CGL001",))


@pytest.mark.parametrize(("body", "message"), [
    ("selct = ['CGL001']", "key 'tool.commgroup-lint.selct': unknown key (expected one of: select, extend-select, "
     "ignore, per-file-ignores, exclude, extend-exclude, profile, profiles, profile-files, force-exclude, extend-profile, "
     "min-confidence, respect-gitignore, src)"),
    ("extend_select = ['CGL001']", "key 'tool.commgroup-lint.extend_select': unknown key (expected one of: select, "
     "extend-select, ignore, per-file-ignores, exclude, extend-exclude, profile, profiles, profile-files, force-exclude, "
     "extend-profile, min-confidence, respect-gitignore, src); "
     "did you mean 'extend-select'?"),
    ("select = 'CGL001'", "key 'tool.commgroup-lint.select': must be a list of strings"),
    ("ignore = [1]", "key 'tool.commgroup-lint.ignore': must be a list of strings"),
    ("select = ['E501']", "key 'tool.commgroup-lint.select': unknown rule code 'E501' (known: "),
    ("extend-select = ['CGL9']", "key 'tool.commgroup-lint.extend-select': unknown rule code 'CGL9'"),
    ("exclude = 'build'", "key 'tool.commgroup-lint.exclude': must be a list of strings"),
    ("extend-exclude = [true]", "key 'tool.commgroup-lint.extend-exclude': must be a list of strings"),
    ("profile = 'nope'", "key 'tool.commgroup-lint.profile': unknown profile 'nope' (shipped profiles: deepep, deepspeed,"
                         " flashinfer, megatron, sglang, tensorrt_llm, torch, transformer_engine, vllm; your own engine goes"
                         " in `profile-files`)"),
    ("profile = 3", "key 'tool.commgroup-lint.profile': must be a string"),
    ("force-exclude = 'yes'", "key 'tool.commgroup-lint.force-exclude': must be true or false"),
    ("per-file-ignores = ['x']", "key 'tool.commgroup-lint.per-file-ignores': must be a table of glob = [codes]"),
    ("per-file-ignores = {'a.py' = 'CGL001'}", "key 'tool.commgroup-lint.per-file-ignores.\"a.py\"': must be a list of rule codes"),
    ("per-file-ignores = {'a.py' = ['XYZ']}", "key 'tool.commgroup-lint.per-file-ignores.\"a.py\"': unknown rule code 'XYZ'"),
    ("extend-profile = 1", "key 'tool.commgroup-lint.extend-profile': must be a table in the shape of a shipped profile"),
    ("extend-profile = {allocators = {f = {param = 3}}}", "key 'tool.commgroup-lint.extend-profile.allocators.f.param': must be a string"),
    ("extend-profile = {alocators = {}}", "key 'tool.commgroup-lint.extend-profile.alocators': unknown key (expected one of: "),
])
def test_bad_values_name_the_file_and_the_key(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(f"[tool.commgroup-lint]\n{body}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}: {message}")


def test_standalone_errors_have_no_tool_prefix(tmp_path: Path) -> None:
    path = tmp_path / "commgroup-lint.toml"
    path.write_text("select = 1\n")
    with pytest.raises(ConfigError, match=r"commgroup-lint.toml: key 'select': must be a list of strings$"):
        load_config(path)


def test_invalid_toml(tmp_path: Path) -> None:
    path = tmp_path / "commgroup-lint.toml"
    path.write_text("select = [\n")
    with pytest.raises(ConfigError, match=r"commgroup-lint.toml: invalid TOML: "):
        load_config(path)


# --- the command line ------------------------------------------------------------------------

def test_cli_reports_config_errors_with_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {"pyproject.toml": "[tool.commgroup-lint]\nforce-exclude = 1\n", "a.py": GOOD})
    result = check(tmp_path, "a.py", monkeypatch=monkeypatch)
    assert result.exit_code == 2
    assert result.stderr == f"error: {tmp_path / 'pyproject.toml'}: key 'tool.commgroup-lint.force-exclude': must be true or false\n"
    assert result.stdout == ""


def test_cli_config_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {"a.py": BAD, "conf/strict.toml": "ignore = ['CGL001']\n", "pyproject.toml": "[tool.commgroup-lint]\n"})
    assert check(tmp_path, "a.py", monkeypatch=monkeypatch).exit_code == 1
    result = check(tmp_path, "--config", "conf/strict.toml", "a.py", monkeypatch=monkeypatch)
    assert (result.exit_code, result.stdout) == (0, "[]\n")
    missing = check(tmp_path, "--config", "nope.toml", "a.py", monkeypatch=monkeypatch)
    assert (missing.exit_code, missing.stderr) == (2, "error: --config: file 'nope.toml' does not exist\n")


def test_selection_from_config_and_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {"a.py": BAD, "pyproject.toml": "[tool.commgroup-lint]\nselect = ['CGL002']\n"})
    assert check(tmp_path, monkeypatch=monkeypatch).stdout == "[]\n"
    assert codes_at(check(tmp_path, "--select", "CGL001", monkeypatch=monkeypatch)) == [("./a.py", "CGL001", 5)]
    assert codes_at(check(tmp_path, "--extend-select", "CGL001", monkeypatch=monkeypatch)) == [("./a.py", "CGL001", 5)]
    (tmp_path / "pyproject.toml").write_text("[tool.commgroup-lint]\nextend-select = ['CGL001']\nselect = ['CGL002']\n")
    assert codes_at(check(tmp_path, monkeypatch=monkeypatch)) == [("./a.py", "CGL001", 5)]
    assert check(tmp_path, "--ignore", "CGL0", monkeypatch=monkeypatch).stdout == "[]\n"


def test_cli_select_starts_over_as_in_ruff() -> None:
    config = Config(select=("CGL0",), extend_select=("CGL100",), ignore=("CGL001",))
    assert resolve_selection(config, (), (), ()).select == ("CGL0", "CGL100")
    assert resolve_selection(config, (), (), ("CGL002",)).ignore == ("CGL001", "CGL002")
    started_over = resolve_selection(config, ("CGL001",), ("CGL101",), ())
    assert (started_over.select, started_over.ignore) == (("CGL001", "CGL101"), ())
    assert resolve_selection(Config(), (), (), ()).select == ("CGL",)


def test_per_file_ignores_are_relative_to_the_config_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {
        "pyproject.toml": "[tool.commgroup-lint.per-file-ignores]\n'pkg/tests/*.py' = ['CGL001']\n'legacy_*.py' = ['CGL0']\n",
        "pkg/tests/t.py": BAD, "pkg/m.py": BAD, "pkg/legacy_x.py": BAD,
    })
    # Run from a subdirectory: patterns still mean the config file's directory.
    assert codes_at(check(tmp_path / "pkg", monkeypatch=monkeypatch)) == [("./m.py", "CGL001", 5)]
    assert codes_at(check(tmp_path, monkeypatch=monkeypatch)) == [("./pkg/m.py", "CGL001", 5)]


def test_excludes_from_config_and_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {
        "commgroup-lint.toml": "exclude = ['pkg/generated']\nextend-exclude = ['vendored']\n",
        "pkg/generated/g.py": BAD, "pkg/vendored/v.py": BAD, "pkg/m.py": BAD, "other.py": BAD,
    })
    assert codes_at(check(tmp_path / "pkg", monkeypatch=monkeypatch)) == [("./m.py", "CGL001", 5)]
    # --exclude replaces `exclude` (relative to the working directory); extend-exclude still applies.
    paths = [p for p, _, _ in codes_at(check(tmp_path, "--exclude", "other.py", monkeypatch=monkeypatch))]
    assert paths == ["./pkg/generated/g.py", "./pkg/m.py"]
    paths = [p for p, _, _ in codes_at(check(tmp_path, "--extend-exclude", "pkg/m.py,other.py", monkeypatch=monkeypatch))]
    assert paths == []


def test_force_exclude_from_config_and_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {"commgroup-lint.toml": "exclude = ['gen']\n", "gen/g.py": BAD})
    assert codes_at(check(tmp_path, "gen/g.py", monkeypatch=monkeypatch)) == [("gen/g.py", "CGL001", 5)]
    assert check(tmp_path, "--force-exclude", "gen/g.py", monkeypatch=monkeypatch).stdout == "[]\n"
    (tmp_path / "commgroup-lint.toml").write_text("exclude = ['gen']\nforce-exclude = true\n")
    assert check(tmp_path, "gen/g.py", monkeypatch=monkeypatch).stdout == "[]\n"
    assert len(codes_at(check(tmp_path, "--no-force-exclude", "gen/g.py", monkeypatch=monkeypatch))) == 1


def test_extend_profile_adds_an_allocator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {
        "pyproject.toml": """
            [tool.commgroup-lint.extend-profile.allocators."mypkg.alloc.get_buffer"]
            param = "group"
            index = 0
        """,
        "m.py": "from mypkg.alloc import get_buffer\n\n\ndef f():\n    return get_buffer()\n",
    })
    result = check(tmp_path, "m.py", monkeypatch=monkeypatch)
    assert codes_at(result) == [("m.py", "CGL001", 5)]


def test_profile_key_and_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {"commgroup-lint.toml": "profile = 'sglang'\n", "a.py": BAD})
    assert len(codes_at(check(tmp_path, "a.py", monkeypatch=monkeypatch))) == 1
    result = check(tmp_path, "--profile", "nope", "a.py", monkeypatch=monkeypatch)
    assert result.exit_code == 2
    assert result.stderr == ("error: --profile: unknown profile 'nope' (shipped profiles: deepep, deepspeed, flashinfer, megatron, sglang, tensorrt_llm, torch, transformer_engine, vllm; "
                             "your own engine goes in `profile-files`)\n")


NOPE = ("error: --profile: unknown profile 'nope' (shipped profiles: deepep, deepspeed, flashinfer, megatron, sglang, tensorrt_llm, torch, transformer_engine, vllm; "
        "your own engine goes in `profile-files`)\n")


@pytest.mark.parametrize("command", ["check", "sites"])
def test_only_the_option_is_labelled_with_the_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      command: str) -> None:
    write(tmp_path, {"a.py": GOOD})
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, [command, "--profile", "sglang, nope", "a.py"])
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", NOPE)
    # a profile file's own error names the file, never `--profile`, given or not
    write(tmp_path, {"commgroup-lint.toml": "profile-files = ['acme.toml']\n",
                     "acme.toml": "[profile]\nextends = ['pytorch']\n"})
    expected = (f"error: {tmp_path / 'acme.toml'}: key 'profile.extends': unknown profile 'pytorch' (shipped profiles: "
                "deepep, deepspeed, flashinfer, megatron, sglang, tensorrt_llm, torch, transformer_engine, vllm); extend one of these (a profile file cannot be extended)\n")
    for option in ((), ("--profile", "torch")):
        result = CliRunner().invoke(main, [command, *option, "a.py"])
        assert (result.exit_code, result.stdout, result.stderr) == (2, "", expected)


def test_extends_in_extend_profile_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {"a.py": GOOD, "pyproject.toml": "[tool.commgroup-lint.extend-profile.profile]\nextends = ['sglang']\n"})
    result = check(tmp_path, "a.py", monkeypatch=monkeypatch)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: {tmp_path / 'pyproject.toml'}: key 'tool.commgroup-lint.extend-profile.profile.extends': is not read "
        "in `extend-profile`, whose entries are added to the profiles the run selects: name shipped profiles in "
        "`profiles`, or give your engine its own profile file (listed in `profile-files`), where `extends` is read\n"
    )
    # the rest of its `[profile]` table is still read
    write(tmp_path, {"pyproject.toml": "[tool.commgroup-lint.extend-profile.profile]\npackages = ['mypkg']\n"})
    assert load_config(tmp_path / "pyproject.toml").extend_profile.packages == ("mypkg",)


def test_methods_get_group_is_an_unknown_key(tmp_path: Path) -> None:
    """Nothing reads `methods.get_group`: the loader and the torch profile no longer have it."""
    assert "get_group" not in {f.name for f in fields(Methods)}
    assert load_shipped("torch").methods == Methods(same_group=frozenset({"_get_backend"}),
                                                   register_pool=frozenset({"register_mem_pool"}),
                                                   size=frozenset({"size"}))
    path = tmp_path / "commgroup-lint.toml"
    path.write_text("[extend-profile.methods]\nget_group = ['get_group']\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == (f"{path}: key 'extend-profile.methods.get_group': unknown key "
                              "(expected one of: allocator, collective, register_pool, same_group, size)")


def test_usage_documents_every_key_and_the_options_that_override_them() -> None:
    """docs/usage.md's "Configuration" names every key the loader reads, and its table every option
    that overrides one; it links the profile reference."""
    import re

    from commgroup_lint.config import _KEYS

    usage = (Path(__file__).resolve().parent.parent / "docs" / "usage.md").read_text(encoding="utf-8")
    section = usage[usage.index("## Configuration"):usage.index("## Suppressing a finding")]
    for key in _KEYS:
        assert re.search(rf"(^|\n){re.escape(key)} = |`{re.escape(key)}`", section), key
    options = re.findall(r"^\| `(--[a-z-]+)", section, re.M)
    assert options == ["--select", "--extend-select", "--ignore", "--exclude", "--extend-exclude", "--force-exclude",
                       "--respect-gitignore", "--profile", "--min-confidence", "--config"]
    assert "[docs/profiles.md](profiles.md)" in section
