"""A finding's `binding` names the line a fix would change (issue 12): the allocation itself,
the line inside a helper that fixes the group, or the call that chose the group for a helper
taking it as an argument, however many calls the memory passes through on its way out."""

from __future__ import annotations

from pathlib import Path

from lintkit import lint_text

HELPERS = (
    "from sglang.srt.distributed import get_tp_group\n"
    "from sglang.srt.layers.dp_attention import attn_tp_all_reduce, get_local_dp_buffer\n"
    "\n"
    "\n"
    "def fixed_inside():\n"
    "    return get_local_dp_buffer(get_tp_group())\n"  # line 6: the group is fixed here
    "\n"
    "\n"
    "def takes_group(group):\n"
    "    return get_local_dp_buffer(group)\n"  # line 10: bound here, the group comes from the caller
    "\n"
    "\n"
    "def chooses():\n"
    "    return takes_group(get_tp_group())\n"  # line 14: the group is chosen here
    "\n"
    "\n"
    "class Layer:\n"
    "    def fixed(self):\n"
    "        return fixed_inside()\n"  # line 19: passes it on, chooses nothing
    "\n"
    "    def chosen(self):\n"
    "        return chooses()\n"  # line 22: passes it on, chooses nothing
    "\n"
    "    def forward(self):\n"
    "        a = self.fixed()\n"  # line 25: reported where the memory enters this function
    "        attn_tp_all_reduce(a)\n"
    "        b = self.chosen()\n"
    "        attn_tp_all_reduce(b)\n"
    "        c = get_local_dp_buffer(get_tp_group())\n"
    "        attn_tp_all_reduce(c)\n"
)


def bindings(tmp_path: Path) -> list[tuple[str, int, int]]:
    findings = lint_text(tmp_path, HELPERS, select=("CGL002",))
    return [(f.code, f.start.line, f.binding.line) for f in findings]


def test_binding_is_where_the_group_is_fixed_or_chosen(tmp_path: Path) -> None:
    assert bindings(tmp_path) == [
        ("CGL002", 25, 6),  # fixed inside `fixed_inside`, not at the method's call of it
        ("CGL002", 27, 14),  # chosen by `chooses`' call of `takes_group`
        ("CGL002", 29, 29),  # the allocation itself
    ]
