"""A rank's own slice of a buffer (`x.tensor_split(n)[attn_tp_rank]`) lies at another offset on
each rank: no collective uses it as symmetric memory, so its group is never a mismatch."""

from __future__ import annotations

from pathlib import Path

from lintkit import lint_text

SOURCE = (
    "from sglang.srt.distributed import get_tp_group\n"
    "from sglang.srt.layers.dp_attention import get_attention_tp_group, get_local_dp_buffer\n"
    "from sglang.srt.runtime_context import get_parallel\n"
    "def f(x, out):\n"
    "    local = get_local_dp_buffer(get_attention_tp_group())\n"
    "    get_attention_tp_group().reduce_scatter_tensor(local.tensor_split(4){index}, x)\n"
    "    get_tp_group().all_gather_into_tensor(out, local.tensor_split(4){index})\n"
)


def test_a_rank_slice_consumed_by_another_group_is_no_mismatch(tmp_path: Path) -> None:
    assert lint_text(tmp_path, SOURCE.format(index="[get_parallel().attn_tp_rank]")) == []


def test_a_fixed_slice_is_still_the_buffer(tmp_path: Path) -> None:
    found = lint_text(tmp_path, SOURCE.format(index="[0]"))
    assert [(f.code, f.start.line, f.start.column) for f in found] == [("CGL002", 5, 13)]
