"""
## What it finds
An allocation API that hides its group from its callers: a function that allocates
group-bound memory with a hard-coded group (`use_symmetric_memory(get_tp_group())`) and
returns it without taking a group parameter, or whose group parameter has a default.
Reported at the definition. By default (`--min-confidence medium`) a helper with a fixed group
is reported only where a caller in the checked code consumes its memory on another group
on a path CGL002 reports by default (confidence high; the message names the callers); a
group parameter with a default is reported at medium confidence; a fixed group whose every
known consumer runs on that group, or is misused only on a path of unknown feasibility, is
low confidence, shown with `--min-confidence low`. Helpers that only pass on another
helper's hidden group are not
reported again (the finding is where the group is fixed), and neither are functions that
hand the buffer to another call before returning it, or return the result of a computation
run under the context rather than a fresh tensor (`torch.empty` and the other factories the
profile lists): a layer step is not an allocation API.

## Why it matters
Every caller gets memory registered with that one group, whatever collective it feeds the
buffer to next: this is how SGLang's buffers came to be registered with the TP group while
attention-CP gathers consumed them. Upstream made `group` a required parameter with no default
precisely because "a default makes group inconsistency easy".

## Example
```python
import torch
from sglang.srt.distributed import get_tp_group
from sglang.srt.distributed.device_communicators.pynccl_allocator import use_symmetric_memory

def get_scratch_buffer(rows):
    with use_symmetric_memory(get_tp_group()):
        buffer = torch.empty(rows)
    return buffer
```

## Fix
Take the group as a required parameter and register with it:
`def get_scratch_buffer(group, rows): with use_symmetric_memory(group): ...`, then pass, at
each call site, the group of the collective that consumes the buffer.
"""

from __future__ import annotations

from collections.abc import Iterator

from commgroup_lint.analysis.facts import BufferFact, place_key
from commgroup_lint.model import Confidence, Finding
from commgroup_lint.rule import FileContext, Invalid, Rule, Valid, format_groups

_HEAD = (
    "import torch\n"
    "from sglang.srt.distributed import get_tp_group\n"
    "from sglang.srt.distributed.device_communicators.pynccl_allocator import use_symmetric_memory\n"
)


class HiddenGroup(Rule):
    code = "CGL003"
    name = "hidden-group"
    summary = "An allocation helper fixes its group inside instead of taking it from the caller"
    VALID = [
        Valid(_HEAD + "def get_buffer(group, rows):\n    with use_symmetric_memory(group):\n"
              "        buf = torch.empty(rows)\n    return buf\n"),
        Valid(_HEAD + "def forward(x):\n    with use_symmetric_memory(get_tp_group()):\n"
              "        out = torch.empty(4)\n    get_tp_group().all_reduce(out)\n    return out\n"),
    ]
    INVALID = [
        Invalid(_HEAD + "from sglang.srt.layers.dp_attention import attn_tp_all_gather_into_tensor\n"
                "def get_buffer(rows):\n    with use_symmetric_memory(get_tp_group()):\n"
                "        buf = torch.empty(rows)\n    return buf\n"
                "def gather(x):\n    out = get_buffer(4)\n    attn_tp_all_gather_into_tensor(out, x)\n", line=5),
        Invalid(_HEAD + "def get_buffer(rows, group=get_tp_group()):\n    with use_symmetric_memory(group):\n"
                "        buf = torch.empty(rows)\n    return buf\n", line=4, confidence=Confidence.MEDIUM),
        Invalid(_HEAD + "def get_buffer(rows):\n    with use_symmetric_memory(get_tp_group()):\n"
                "        buf = torch.empty(rows)\n    return buf\n", line=4, confidence=Confidence.LOW),
    ]

    def check(self, ctx: FileContext) -> Iterator[Finding]:
        for fn in ctx.functions:
            if fn.node is None:
                continue
            returned = sorted((f.allocation for f in fn.returns if isinstance(f, BufferFact)),
                              key=lambda a: (a.call.span.line, a.call.span.col))
            for allocation in returned:
                if id(allocation.call) in fn.passed_on or allocation.bound_at is not None:
                    continue  # a step that fills or consumes the buffer, or a wrapper reported where the group is
                if allocation.kind == "context" and id(allocation.call) not in fn.factory_made:
                    continue  # the result of a computation run under the context, not a fresh allocation
                misused = ctx.api.misuses.get(place_key(f"{ctx.source.display}:{allocation.call.span.line}")) or ()
                if len(allocation.group_names) == 1 and not allocation.group_params:
                    # the call may bind to one of several fixed groups, one per path: name them all
                    groups = frozenset().union(*(a.group_names for a in returned if a.call is allocation.call))
                    message = (
                        f"`{fn.node.name}` returns memory registered with the fixed group {format_groups(groups)}"
                        f" (line {allocation.call.span.line}) and takes no group: every caller gets that group,"
                        " whatever collective consumes the buffer; take the group as a required parameter"
                    )
                    confidence = Confidence.LOW
                elif len(allocation.group_params) == 1:
                    param = fn.node.params[next(iter(allocation.group_params))]
                    if param.default is None:
                        continue
                    message = (
                        f"`{fn.node.name}` registers its memory with parameter `{param.name}`, which has a default:"
                        " a caller that omits it silently gets the default group; make the parameter required"
                    )
                    confidence = Confidence.MEDIUM
                else:
                    continue
                if misused:
                    message += (f"; {_callers([ctx.where(m) for m in misused])} consume{'s' if len(misused) == 1 else ''}"
                                " it on another group")
                    confidence = Confidence.HIGH
                yield ctx.finding(type(self), fn.node.span, message, confidence=confidence, allocation=allocation)
                break


def _callers(sites: list[str]) -> str:
    shown = ", ".join(sites[:3])
    return f"{shown} and {len(sites) - 3} more" if len(sites) > 3 else shown
