"""
## What it finds
A buffer bound to one group (by an allocator's group argument, or by the
`use_symmetric_memory(group)` context it was allocated in) that reaches a collective running
on a different group. The analysis follows the control flow inside each function: branches
that exclude each other, groups chosen by `if`/`else`, views of the buffer and tuple
assignments are all taken into account. It reports only a definite mismatch: when no group
the buffer can be bound to is a group the collective can run on. A group with a single rank
(attention TP when `tp_size == attn_dp_size`) never mismatches.

## Why it matters
Nothing crashes. NCCL silently falls back to its slow, non-symmetric path because the memory
is registered with another communicator, so the optimisation the code was written for never
happens, or happens only by the accident of which context exited last.

## Example
```python
from sglang.srt.distributed import get_tp_group
from sglang.srt.layers.dp_attention import attn_tp_all_gather_into_tensor, get_local_dp_buffer

def forward(hidden_states):
    out = get_local_dp_buffer(get_tp_group())
    attn_tp_all_gather_into_tensor(out, hidden_states)
```

## Fix
Register the buffer with the group of the collective that consumes it:
`get_local_dp_buffer(get_attention_tp_group())`.
"""

from __future__ import annotations

from collections.abc import Iterator

from commgroup_lint.analysis.facts import Allocation, Consumption
from commgroup_lint.autofix import FixPlanner
from commgroup_lint.model import Finding
from commgroup_lint.rule import FileContext, Invalid, Rule, Valid, format_groups

_IMPORTS = (
    "from sglang.srt.distributed import get_tp_group\n"
    "from sglang.srt.layers.dp_attention import attn_tp_all_gather_into_tensor, get_attention_tp_group, get_local_dp_buffer\n"
)


class GroupMismatch(Rule):
    code = "CGL002"
    name = "group-mismatch"
    summary = "A buffer bound to one group is consumed by a collective on another"
    VALID = [
        Valid(_IMPORTS + "def f(x):\n    out = get_local_dp_buffer(get_attention_tp_group())\n"
              "    attn_tp_all_gather_into_tensor(out, x)\n"),
        Valid(_IMPORTS + "def f(x, flag):\n    if flag:\n        out = get_local_dp_buffer(get_tp_group())\n"
              "    if not flag:\n        attn_tp_all_gather_into_tensor(out, x)\n"),
    ]
    INVALID = [
        Invalid(_IMPORTS + "def f(x):\n    out = get_local_dp_buffer(get_tp_group())\n"
                "    attn_tp_all_gather_into_tensor(out, x)\n", line=4,
                fixed=_IMPORTS + "def f(x):\n    out = get_local_dp_buffer(get_attention_tp_group())\n"
                "    attn_tp_all_gather_into_tensor(out, x)\n"),
        Invalid(_IMPORTS + "import torch\n"
                "from sglang.srt.distributed.device_communicators.pynccl_allocator import use_symmetric_memory\n"
                "def f(x):\n    with use_symmetric_memory(get_tp_group()):\n        out = torch.empty(4)\n"
                "    get_attention_tp_group().all_reduce(out[:2])\n", line=6,
                fixed=_IMPORTS + "import torch\n"
                "from sglang.srt.distributed.device_communicators.pynccl_allocator import use_symmetric_memory\n"
                "def f(x):\n    with use_symmetric_memory(get_attention_tp_group()):\n        out = torch.empty(4)\n"
                "    get_attention_tp_group().all_reduce(out[:2])\n"),
    ]

    def check(self, ctx: FileContext) -> Iterator[Finding]:
        mismatches: dict[int, list[Consumption]] = {}
        for fn in ctx.functions:
            for c in fn.consumptions:
                if c.binding and c.groups and not c.binding & c.groups:
                    mismatches.setdefault(id(c.allocation.call), []).append(c)
        planner = FixPlanner(ctx)
        for found in mismatches.values():
            allocation = found[0].allocation
            fix = planner.fix(allocation, replace=True)[0] if allocation.hidden_origin is None else None
            yield ctx.finding(type(self), allocation.call.span, _message(allocation, found), fix)


def _message(allocation: Allocation, found: list[Consumption]) -> str:
    bound = format_groups(found[0].binding)
    if allocation.kind == "context":
        subject = f"memory allocated under `{allocation.short_name}` is registered with group {bound}"
    else:
        subject = f"buffer from `{allocation.short_name}` is bound to group {bound}"
    if allocation.hidden_origin:
        subject += f" (fixed inside the helper at {allocation.hidden_origin})"
    first = found[0]
    message = f"{subject} but reaches `{first.collective}` on group {format_groups(first.groups)} at line {first.call.span.line}"
    if len(found) > 1:
        message += f" (and {len(found) - 1} more collective{'s' if len(found) > 2 else ''})"
    return message
