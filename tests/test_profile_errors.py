"""Errors in the profiles a configuration brings (`profile-files`, `extend-profile`): each
names the file and the key (as TOML writes it), says what to do, and stops `check` with exit
code 2 and no traceback. The configuration's own keys and `--profile` are in test_config.py."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint.cli import main
from commgroup_lint.profile import load_shipped, parse_profile, relation_problem

SHIPPED = "deepep, deepspeed, flashinfer, megatron, sglang, tensorrt_llm, torch, transformer_engine, vllm"
FORMS = ("write `A == B`, `A < B` or `A > B` (A and B world-size quantities or integers, "
         "the operator between single spaces)")
DOCS = Path(__file__).resolve().parent.parent / "docs"


def check(tmp_path: Path, files: dict[str, str], *args: str, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    for name, text in {"a.py": "x = 1\n", **files}.items():
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "--no-cache", "a.py", *args])
    assert "Traceback" not in result.output
    return result


def config_error(tmp_path: Path, body: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The error `check` prints for a `commgroup-lint.toml` holding `body` (asserting exit 2)."""
    result = check(tmp_path, {"commgroup-lint.toml": body}, monkeypatch=monkeypatch)
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    return result.stderr


# --- a profile file extending an unknown profile --------------------------------------------

def test_profile_file_extending_an_unknown_profile_names_the_file(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"commgroup-lint.toml": 'profile-files = ["acme.toml"]\n',
             "acme.toml": '[profile]\nname = "acme"\nextends = ["pytorch"]\n'}
    result = check(tmp_path, files, monkeypatch=monkeypatch)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: {tmp_path / 'acme.toml'}: key 'profile.extends': unknown profile 'pytorch' "
        f"(shipped profiles: {SHIPPED}); extend one of these (a profile file cannot be extended)\n"
    )
    # the same with `--profile` given: the option is fine, the file is not
    assert check(tmp_path, files, "--profile", "torch", monkeypatch=monkeypatch).stderr == result.stderr


# --- relations in `[single_rank]` and `[aliases]` --------------------------------------------

@pytest.mark.parametrize(("relation", "problem"), [
    ("tp_size != attn_dp_size", "uses `!=`, which cannot be used here"),
    ("tp_size <= 2", "uses `<=`, which cannot be used here"),
    ("tp_size >= 2", "uses `>=`, which cannot be used here"),
    ("attn_tp_size", "has no operator between spaces"),
    ("tp_size==1", "has no operator between spaces"),
    ("tp_size == 1 and dp_size == 1", "is not one comparison of two operands"),
])
def test_relations_that_cannot_be_used_are_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   relation: str, problem: str) -> None:
    path = tmp_path / "commgroup-lint.toml"
    stderr = config_error(tmp_path, f'[extend-profile.single_rank]\nattn_tp = ["tp_size == 1", "{relation}"]\n',
                          monkeypatch)
    assert stderr == (f"error: {path}: key 'extend-profile.single_rank.attn_tp': "
                      f"relation '{relation}' {problem}; {FORMS}\n")
    stderr = config_error(tmp_path, f'[extend-profile.aliases.attn_tp]\n"mod.tp" = "{relation}"\n', monkeypatch)
    assert stderr == (f"error: {path}: key 'extend-profile.aliases.attn_tp.\"mod.tp\"': "
                      f"relation '{relation}' {problem}; {FORMS}\n")


@pytest.mark.parametrize("relation", ["tp_size == attn_dp_size", "attn_tp_size < 2", "tp_size > attn_tp_size",
                                      "  tp_size == 1  ", "tp_size  ==  1"])
def test_relations_the_analysis_reads_are_accepted(relation: str) -> None:
    assert relation_problem(relation) is None
    parsed = parse_profile({"single_rank": {"g": [relation]}, "aliases": {"g": {"h": relation}}}, "p")
    assert (parsed.single_rank, parsed.aliases) == ({"g": (relation,)}, {"g": {"h": relation}})


def test_shipped_profiles_use_only_relations_the_analysis_reads() -> None:
    for name in ("sglang", "vllm", "megatron"):
        profile = load_shipped(name)
        for relation in [*(r for rs in profile.single_rank.values() for r in rs),
                         *(r for others in profile.aliases.values() for r in others.values())]:
            assert relation_problem(relation) is None, (name, relation)


# --- a missing string (`param`, `group_attr`) -----------------------------------------------

@pytest.mark.parametrize(("body", "key"), [
    ('[extend-profile.allocators."mypkg.alloc"]\nindex = 0\n', 'allocators."mypkg.alloc".param'),
    ('[extend-profile.contexts.ctx]\nindex = 0\n', "contexts.ctx.param"),
    ('[extend-profile.registrations.reg]\nbuffer = { index = 0 }\ngroup = { param = "g", index = 1 }\n',
     "registrations.reg.buffer.param"),
    ('[extend-profile.collectives.c]\nbuffers = [{ index = 0 }]\n', "collectives.c.buffers[0].param"),
    ('[extend-profile.runtime.group_classes."mypkg.Group"]\n', 'runtime.group_classes."mypkg.Group".group_attr'),
])
def test_a_missing_string_is_required(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, key: str) -> None:
    assert config_error(tmp_path, body, monkeypatch) == (
        f"error: {tmp_path / 'commgroup-lint.toml'}: key 'extend-profile.{key}': is required (a string)\n")


def test_a_param_of_the_wrong_type_still_must_be_a_string(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert config_error(tmp_path, "[extend-profile.allocators.alloc]\nparam = 3\n", monkeypatch) == (
        f"error: {tmp_path / 'commgroup-lint.toml'}: key 'extend-profile.allocators.alloc.param': must be a string\n")


# --- names with dots are quoted, as TOML writes them -----------------------------------------

ACME = """\
[profile]
name = "acme"
extends = ["torch"]

[allocators."acme.memory.comm_buffer"]
param = "group"
index = "2"
"""


def test_profile_file_errors_quote_dotted_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"commgroup-lint.toml": 'profile-files = ["acme.toml"]\n', "acme.toml": ACME}
    result = check(tmp_path, files, monkeypatch=monkeypatch)
    assert (result.exit_code, result.stderr) == (
        2, f"error: {tmp_path / 'acme.toml'}: key 'allocators.\"acme.memory.comm_buffer\".index': "
           "must be a non-negative integer\n")
    # the message in docs/profiles.md is this one
    assert ("error: /repo/acme.toml: key 'allocators.\"acme.memory.comm_buffer\".index': must be a non-negative "
            "integer") in (DOCS / "profiles.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(("body", "key"), [
    ('[extend-profile.contexts."acme.memory.symmetric"]\nparam = "group"\nenable = "enabled"\n',
     'contexts."acme.memory.symmetric".enable'),
    ('[extend-profile.sizes]\n"acme.get_tp_size" = 1\n', 'sizes."acme.get_tp_size"'),
    ('[extend-profile.getters]\n"acme.get_tp_group" = 1\n', 'getters."acme.get_tp_group"'),
    ('[extend-profile.getters."acme.get"]\nvariants = { "tp=True" = 1 }\n',
     'getters."acme.get".variants."tp=True"'),
    ('[extend-profile]\n"acme.x" = 1\n', '"acme.x"'),
    ('[extend-profile.groups.tp]\nsize = 1\n', "groups.tp.size"),
])
def test_config_errors_quote_dotted_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, key: str) -> None:
    stderr = config_error(tmp_path, body, monkeypatch)
    assert stderr.startswith(f"error: {tmp_path / 'commgroup-lint.toml'}: key 'extend-profile.{key}': "), stderr
