"""What a finding's message says (issue 34, item 4): the call on the reported line first and the
collective inside it second; where the group was chosen only when it is not the argument on the
reported line; other files' paths relative to the project root, from any directory; a group no
getter returns named by the variable or attribute that holds it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint.cli import main

FILES = {
    "pkg/__init__.py": "",
    "pkg/comm.py": """\
        from sglang.srt.layers.dp_attention import get_attention_tp_group


        def all_gather_attn_tp(output, input_):
            get_attention_tp_group().all_gather_into_tensor(output, input_)
        """,
    "pkg/bufs.py": """\
        import torch
        from sglang.srt.distributed import get_tp_group
        from sglang.srt.layers.dp_attention import use_symmetric_memory


        def get_buf(group, n):
            with use_symmetric_memory(group):
                return torch.empty(n)


        def get_tp_buf(n):
            return get_buf(get_tp_group(), n)


        def passthrough(group, n):
            return get_buf(group, n)
        """,
    "pkg/user.py": """\
        from sglang.srt.distributed import get_tp_group
        from sglang.srt.layers.dp_attention import attn_tp_all_gather_into_tensor, get_local_dp_buffer
        from pkg.bufs import get_buf, get_tp_buf, passthrough
        from pkg.comm import all_gather_attn_tp


        def through_a_helper(x):
            out = get_local_dp_buffer(get_tp_group())
            all_gather_attn_tp(out, x)


        def group_passed_here(x):
            out = get_buf(get_tp_group(), 4)
            attn_tp_all_gather_into_tensor(out, x)


        def group_passed_on(x):
            out = passthrough(get_tp_group(), 4)
            attn_tp_all_gather_into_tensor(out, x)


        def group_chosen_elsewhere(x):
            out = get_tp_buf(4)
            attn_tp_all_gather_into_tensor(out, x)
        """,
    "pkg/own_groups.py": """\
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem


        def two_groups(n, ranks):
            first = dist.new_group(ranks)
            second = dist.new_group(ranks)
            buf = symm_mem.empty(n, device="cuda")
            symm_mem.rendezvous(buf, first)
            dist.all_reduce(buf, group=second)


        class Layer:
            def __init__(self, ranks):
                self.pg = dist.new_group(ranks)

            def forward(self, n):
                other = dist.new_group([0])
                buf = symm_mem.empty(n, device="cuda")
                symm_mem.rendezvous(buf, self.pg)
                dist.all_reduce(buf, group=other)
        """,
}
WHEN = ", when attn_tp_size != tp_size"
USER = [
    (8, "memory from `get_local_dp_buffer` is bound to group tp but reaches `all_gather_attn_tp` at line 9, whose"
        f" `all_gather_into_tensor` runs on group attn_tp{WHEN}"),
    (13, f"memory from `get_buf` is bound to group tp but reaches `attn_tp_all_gather_into_tensor` on group attn_tp"
         f" at line 14{WHEN}"),
    (18, f"memory from `passthrough` is bound to group tp but reaches `attn_tp_all_gather_into_tensor` on group"
         f" attn_tp at line 19{WHEN}"),
    (23, "memory from `get_tp_buf` is bound to group tp (taken at pkg/bufs.py:12, fixed inside the helper at"
         " pkg/bufs.py:7) but reaches `attn_tp_all_gather_into_tensor` on group attn_tp at line 24"
         f"{WHEN} (no fix: the group is chosen by the call at pkg/bufs.py:12: change it there)"),
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


def messages(cwd: Path, path: str, monkeypatch: pytest.MonkeyPatch, of: str = "user.py") -> list[tuple[int, str]]:
    """The CGL002 messages in the file named `of`, checking `path` from `cwd`."""
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--select", "CGL002", "--format", "json", path])
    assert result.exit_code == 1, result.output
    return [(f["line"], f["message"]) for f in json.loads(result.stdout) if Path(f["path"]).name == of]


@pytest.mark.parametrize(("where", "path"), [("", "pkg/user.py"), ("", "."), ("pkg", "user.py"), ("pkg", ".")])
def test_messages_name_the_call_on_the_line_and_the_root_relative_place(
        project: Path, where: str, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert messages(project / where, path, monkeypatch) == USER


def test_from_outside_the_project_too(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert messages(elsewhere, str(project / "pkg" / "user.py"), monkeypatch) == USER


def test_a_new_group_is_named_by_what_holds_it(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert messages(project, "pkg/own_groups.py", monkeypatch, of="own_groups.py") == [
        (9, "memory registered by `rendezvous` is registered with group `first` but reaches `all_reduce` on group"
            " `second` at line 10 (no fix: no getter is known for group `second`)"),
        (20, "memory registered by `rendezvous` is registered with group `self.pg` but reaches `all_reduce` on group"
             " `other` at line 21 (no fix: no getter is known for group `other`)"),
    ]


def test_a_missing_group_names_the_call_on_the_line_too(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "pkg" / "missing.py").write_text(
        "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n"
        "from pkg.comm import all_gather_attn_tp\n\n\n"
        "def gather(x):\n    out = get_local_dp_buffer()\n    all_gather_attn_tp(out, x)\n")
    monkeypatch.chdir(project)
    result = CliRunner().invoke(main, ["check", "--no-cache", "pkg/missing.py"])
    assert result.stdout.splitlines()[0] == (
        "pkg/missing.py:6:11: CGL001 [*] `get_local_dp_buffer` is called without its group argument `group`; the"
        " buffer reaches `all_gather_attn_tp` at line 7, whose `all_gather_into_tensor` runs on group attn_tp")
    assert "     = help: Pass `get_attention_tp_group()`: the group of `all_gather_attn_tp` at line 7 (its" \
           " `all_gather_into_tensor`)" in result.stdout


def test_a_hidden_groups_evidence_survives_a_run_that_named_its_file_another_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache keeps the analysis of `./dp/legacy_buffers.py` (context of a one-file run) for
    `dp/legacy_buffers.py`; CGL003's evidence (its caller consuming on another group) keyed by the
    first name was not found under the second, and the finding fell below `medium`."""
    import shutil

    shutil.copytree(Path(__file__).resolve().parent.parent / "examples" / "dp_attention", tmp_path / "dp")
    (tmp_path / "pyproject.toml").write_text("[tool.commgroup-lint]\n")
    monkeypatch.chdir(tmp_path)
    for paths in (["dp/layer_communicator.py"], ["dp"], ["."]):
        result = CliRunner().invoke(main, ["check", "--select", "CGL003", "--format", "json", *paths])
        found = [(Path(f["path"]).name, f["confidence"]) for f in json.loads(result.stdout)]
        assert found == ([] if paths == ["dp/layer_communicator.py"] else [("legacy_buffers.py", "high")])
