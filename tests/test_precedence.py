"""Which knowledge wins: the user's configuration, then the scanned code's own definitions, then
the shipped profile (issue 4's precedence)."""

from __future__ import annotations

from pathlib import Path

from commgroup_lint.discovery import discover
from commgroup_lint.engine import Linter
from commgroup_lint.profile import load_shipped, parse_profile

BUFFERS = '''import torch
from sglang.srt.distributed import get_tp_group
from sglang.srt.distributed.device_communicators.pynccl_allocator import use_symmetric_memory


def get_local_dp_buffer():
    with use_symmetric_memory(get_tp_group()):
        buffer = torch.empty(8)
    return buffer
'''
CALLER = '''from sglang.srt.layers.dp_attention import attn_tp_all_gather_into_tensor
from mypkg.buffers import get_local_dp_buffer


def forward(x):
    out = get_local_dp_buffer()
    attn_tp_all_gather_into_tensor(out, x)
'''


def _tree(tmp_path: Path) -> Path:
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "buffers.py").write_text(BUFFERS)
    (package / "model.py").write_text(CALLER)
    return package


def _codes(tmp_path: Path, profile) -> list[tuple[str, int, str]]:  # noqa: ANN001
    result = Linter(profile).lint(discover([str(_tree(tmp_path))]))
    return [(Path(f.path).name, f.start.line, f.code) for f in result.findings]


def test_scanned_definition_is_used(tmp_path: Path) -> None:
    # The body hard-codes TP: CGL003 at the definition, CGL002 at the attention-TP caller.
    assert _codes(tmp_path, load_shipped("sglang")) == [("buffers.py", 6, "CGL003"), ("model.py", 6, "CGL002")]


def test_user_configuration_wins_over_the_scanned_definition(tmp_path: Path) -> None:
    # The user says this allocator takes its group as `group`: a call without it is CGL001.
    user = parse_profile({"allocators": {"mypkg.buffers.get_local_dp_buffer": {"param": "group", "index": 0}}},
                         "commgroup-lint.toml", "extend-profile.")
    codes = _codes(tmp_path, load_shipped("sglang").merged(user, pin=True))
    assert ("model.py", 6, "CGL001") in codes
    assert ("model.py", 6, "CGL002") not in codes


def test_scanned_definition_wins_over_the_shipped_profile(tmp_path: Path) -> None:
    # Shipped: `sglang...get_local_dp_buffer(group)` requires a group. A scanned definition of the
    # same name with no group parameter (an old release) is what calls are checked against.
    tree = tmp_path / "sglang" / "srt" / "layers"
    tree.mkdir(parents=True)
    (tmp_path / "sglang" / "__init__.py").write_text("")
    (tree / "dp_attention.py").write_text(BUFFERS)
    (tree / "user.py").write_text(
        "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n\n\ndef f():\n    return get_local_dp_buffer()\n"
    )
    result = Linter(load_shipped("sglang")).lint(discover([str(tmp_path / "sglang")]))
    assert [f.code for f in result.findings if f.path.endswith("user.py")] == []
