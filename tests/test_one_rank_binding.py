"""Memory bound to a one-rank group is plain memory; a collective on a one-rank group is a no-op."""

from __future__ import annotations

from pathlib import Path

from lintkit import lint_text

HEAD = (
    "from sglang.srt.distributed import get_tp_group, tensor_model_parallel_all_reduce\n"
    "from sglang.srt.layers.dp_attention import attn_tp_all_gather_into_tensor, get_attention_dp_size,"
    " get_attention_tp_group, get_local_dp_buffer, get_tensor_model_parallel_world_size\n"
)


def test_memory_bound_to_a_one_rank_group_reaches_a_larger_groups_collective(tmp_path: Path) -> None:
    source = HEAD + (
        "def f(x):\n"
        "    out = get_local_dp_buffer(get_attention_tp_group())\n"
        "    if get_tensor_model_parallel_world_size() == get_attention_dp_size():\n"
        "        tensor_model_parallel_all_reduce(out)\n"
    )
    found = lint_text(tmp_path, source)
    assert [(f.code, f.start.line, f.start.column) for f in found] == [("CGL002", 4, 11)]
    assert found[0].message == (
        "memory from `get_local_dp_buffer` is bound to group attn_tp (which has one rank here: the memory is not "
        "registered at all) but reaches `tensor_model_parallel_all_reduce` on group tp at line 6, when "
        "attn_dp_size == tp_size and attn_tp_size != tp_size")


def test_a_collective_on_a_one_rank_group_never_mismatches(tmp_path: Path) -> None:
    source = HEAD + (
        "def f(x):\n"
        "    out = get_local_dp_buffer(get_tp_group())\n"
        "    if get_tensor_model_parallel_world_size() == get_attention_dp_size():\n"
        "        attn_tp_all_gather_into_tensor(out, x)\n"
    )
    assert lint_text(tmp_path, source) == []
