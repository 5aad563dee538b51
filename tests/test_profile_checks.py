"""Profile authors see what happens (issue 29, item 4): an entry that can never match is an
error naming it (exit 2, no traceback), `[profile] pinned` keeps an entry the checked code
would replace, and `sites -v` says which entries the checked code's own definitions replace."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint.cli import main
from commgroup_lint.profile import ProfileError, load_shipped, parse_profile, shipped_profiles

NO_MODULE = ("names no module, so no call ever matches it: write the qualified name (`module.function`, "
             "`module.Class.method`); a method called on a group goes in `[methods]`")


@pytest.mark.parametrize(("data", "message"), [
    ({"collectives": {"all_reduce": {"groups": ["tp"]}}}, f"key 'collectives.all_reduce': {NO_MODULE}"),
    ({"objects": {"builders": {"Buffer": {"param": "group"}}}}, f"key 'objects.builders.Buffer': {NO_MODULE}"),
    ({"methods": {"collective": ["torch.distributed.all_reduce"]}},
     "key 'methods.collective': 'torch.distributed.all_reduce' is not a name: methods and attributes are matched by "
     "their name alone (`all_reduce`); a function goes under its qualified name in a table such as `[collectives]`"),
    ({"wrappers": {"acme.Comm": {"param": "group", "index": 0}},
      "collectives": {"acme.Comm.all_reduce": {"groups": ["tp"]}}},
     "key 'collectives.\"acme.Comm.all_reduce\"': is a method of `acme.Comm`, a `[wrappers]` entry: building one "
     "gives the group itself, so a call on it never reaches this entry; list the method's name under `[methods]` "
     "instead"),
    ({"profile": {"pinned": ["acme.ops.tp_all_reduce"]}},
     "key 'profile.pinned': 'acme.ops.tp_all_reduce' is no entry of this profile: pin the qualified name of one of "
     "its entries (a table key such as `allocators.\"pkg.mod.f\"`)"),
])
def test_an_entry_that_can_never_match_is_an_error_naming_it(data: dict, message: str) -> None:
    with pytest.raises(ProfileError) as err:
        parse_profile(data, "acme.toml")
    assert str(err.value) == f"acme.toml: {message}"


def test_shipped_profiles_hold_no_entry_that_can_never_match() -> None:
    for name in shipped_profiles():
        load_shipped(name)


ACME = """\
[profile]
name = "acme"
packages = ["acme"]
extends = ["torch"]
{pinned}
[getters]
"acme.groups.get_tp_group" = ["tp"]
"acme.groups.get_ep_group" = ["ep"]

[methods]
collective = ["all_reduce"]
allocator = ["scratch"]

[collectives."acme.ops.tp_all_reduce"]
groups = ["tp"]
"""

OPS = """\
from acme.groups import get_ep_group


def tp_all_reduce(x):
    return get_ep_group().all_reduce(x)  # not what the profile says: EP


def staging(x):
    return get_ep_group().scratch(x)
"""

APP = """\
from acme.groups import get_tp_group
from acme.ops import tp_all_reduce


def step(x):
    return tp_all_reduce(get_tp_group().scratch(x))
"""


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pinned: str) -> None:
    files = {"acme.toml": ACME.format(pinned=pinned), "commgroup-lint.toml": 'profile-files = ["acme.toml"]\n',
             "acme/__init__.py": "", "acme/groups.py": "", "acme/ops.py": OPS, "app.py": APP}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    monkeypatch.chdir(tmp_path)


def test_sites_v_says_which_entries_the_checked_code_replaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _project(tmp_path, monkeypatch, pinned="")
    result = CliRunner().invoke(main, ["sites", "-v", "app.py", "acme"])
    assert result.exit_code == 0
    assert "consumed by `all_reduce` on ep at app.py:6" in result.stdout
    assert result.stderr == (
        "note: profile entry `acme.ops.tp_all_reduce` is replaced by its definition at acme/ops.py:4; to keep the "
        "entry, pin it (`pinned` in the profile's `[profile]`, or the entry under `extend-profile`)\n")
    quiet = CliRunner().invoke(main, ["sites", "app.py", "acme"])
    assert (quiet.exit_code, quiet.stderr) == (0, "")


def test_a_pinned_entry_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _project(tmp_path, monkeypatch, pinned='pinned = ["acme.ops.tp_all_reduce"]\n')
    result = CliRunner().invoke(main, ["sites", "-v", "app.py", "acme"])
    assert (result.exit_code, result.stderr) == (0, "")
    assert "consumed by `tp_all_reduce` on tp at app.py:6" in result.stdout


def test_an_entry_that_can_never_match_stops_check_with_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _project(tmp_path, monkeypatch, pinned='pinned = ["acme.ops.tp_all_gather"]\n')
    result = CliRunner().invoke(main, ["check", "--no-cache", "app.py"])
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.startswith(f"error: {tmp_path / 'acme.toml'}: key 'profile.pinned': 'acme.ops.tp_all_gather' "
                                    "is no entry of this profile")
    assert "Traceback" not in result.output
