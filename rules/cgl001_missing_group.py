"""
## What it finds
A group-bound allocator (`get_local_dp_buffer`, `get_global_dp_buffer`, `use_symmetric_memory`,
or any allocator your profile names) called without its group argument.

## Why it matters
Once `group` is a required parameter, a call site that was missed raises `TypeError`, but only
when its branch runs: often a path taken under one parallel configuration only. Before that,
the group was implicit and the buffer was registered with whatever the allocator hard-coded.

## Example
```python
from sglang.srt.layers.dp_attention import dp_gather_partial, get_global_dp_buffer

def forward(hidden_states, forward_batch):
    gathered = get_global_dp_buffer()
    dp_gather_partial(gathered, hidden_states, forward_batch)
```

## Fix
Pass the group of the collective that consumes the buffer:
`get_global_dp_buffer(get_tp_group())`, since `dp_gather_partial` gathers on the TP group.
"""

from __future__ import annotations

from collections.abc import Iterator

from commgroup_lint.autofix import FixPlanner
from commgroup_lint.model import Finding
from commgroup_lint.rule import FileContext, Invalid, Rule, Valid, format_groups, path_configuration, reached

_IMPORTS = "from sglang.srt.layers.dp_attention import dp_gather_partial, get_global_dp_buffer, get_local_dp_buffer\n"


class MissingGroup(Rule):
    code = "CGL001"
    name = "missing-group"
    summary = "A group-bound allocator is called without its group"
    VALID = [
        Valid(_IMPORTS + "from sglang.srt.distributed import get_tp_group\n"
              "def f(x, fb):\n    g = get_global_dp_buffer(get_tp_group())\n    dp_gather_partial(g, x, fb)\n"),
        Valid(_IMPORTS + "def f(group):\n    return get_local_dp_buffer(group=group)\n"),
        Valid(_IMPORTS + "def f(*args):\n    return get_local_dp_buffer(*args)\n"),
    ]
    INVALID = [
        Invalid(_IMPORTS + "def f(x, fb):\n    g = get_global_dp_buffer()\n    dp_gather_partial(g, x, fb)\n", line=3,
                fixed=_IMPORTS + "from sglang.srt.distributed import get_tp_group\n"
                "def f(x, fb):\n    g = get_global_dp_buffer(get_tp_group())\n    dp_gather_partial(g, x, fb)\n"),
        Invalid(_IMPORTS + "def f():\n    return get_local_dp_buffer(hidden_size=16)\n", line=3),
        Invalid("from sglang.srt.distributed.device_communicators.pynccl_allocator import use_symmetric_memory\n"
                "def f():\n    with use_symmetric_memory():\n        pass\n", line=3),
    ]

    def check(self, ctx: FileContext) -> Iterator[Finding]:
        planner = FixPlanner(ctx)
        for fn in ctx.functions:
            for allocation in fn.allocations:
                fact = ctx.api.invariants.excluding(allocation.at)
                if allocation.missing_param is None or ctx.removed(fact):
                    continue
                message = f"`{allocation.short_name}` is called without its group argument `{allocation.missing_param}`"
                consumers = [c for c in fn.consumptions if c.allocation.call is allocation.call and c.groups]
                if consumers:
                    first = consumers[0]
                    message += f"; the buffer reaches {reached(first, format_groups(first.group_names))}"
                fix, choice = planner.fix(allocation, replace=False)
                if fix is None:
                    message += f" (no fix: {choice.origin})"
                condition, confidence = path_configuration(allocation.at)  # the call fails whatever its callee does
                if condition:
                    message += f" (on the path where {condition})"
                yield ctx.finding(type(self), allocation.call.span, message, fix if fact is None else None,
                                  condition=condition, confidence=confidence, allocation=allocation, removed_by=fact)
