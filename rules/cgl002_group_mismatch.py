"""
## What it finds
Memory bound to one group (by an allocator's group argument, by the context it was allocated
in, by a registration such as `rendezvous(t, group)`, or inside a helper or method that returns
it) that reaches a collective running on another group, in some configuration.

The analysis follows the control flow inside each function and through the helpers and methods
it calls (`self.m()`, `super().m()`, module helpers, in this file or others): which group a
branch chooses, which collective a helper runs under which condition of its own, views and
tuples of the buffer, buffers kept on `self` between methods, and callables: a function a
helper is given and calls (`to_dp_local(step, ...)` calling `step(local, ...)`; the call is
checked where the function is passed), one held by a `functools.partial`, by an attribute or by
a record's field (a dataclass method calling `self.reduce(self.partial)`). Every possibility
keeps the condition under which it holds, so the finding says when the mismatch happens:
always, or when a relation of world sizes or a flag holds (`when tp_size != attn_dp_size`,
`when self.use_attn_tp_group`). Branches that exclude each other are never combined.

A collective on a group with a single rank never mismatches (attention TP when
`tp_size == attn_dp_size`); memory bound to such a group is not registered at all, so a
collective of a larger group that consumes it is reported (its condition says the size). Two
names for one group object are one group under the relation that makes them one (from
SGLang 0.5.9 on attention TP is the TP group when `attn_tp_size == tp_size`; the condition
then says `attn_tp_size != tp_size`). Two groups created apart (two `new_group` calls over the
same ranks) are two groups.

An object a library builds for a group (a FlashInfer workspace, a DeepEP buffer: `[objects]` in
the profile) is checked the same way against the ops that take it, and against the builder's own
other group arguments: `create_allreduce_fusion_workspace(..., comm_backend=TorchDistBackend(group=tp))`
without `group` binds the workspace's rendezvous to WORLD, the default, while its handles are
exchanged on TP (vLLM and SGLang hung at warm-up with DP > 1 this way); so does
`create_allreduce_fusion_workspace(world_size=tp_size, ...)` without `group`, a workspace that
spans the TP ranks built on WORLD.

## Confidence
- **high**: the mismatch holds always, or under a relation of world sizes only.
- **medium**: it needs a flag or mode the code sets (`self.use_attn_tp_group`,
  `should_use_dp_reduce_scatterv()`, a boolean parameter).
- **low**: it rests on something the analysis could not read: a helper's condition it could
  not translate to the caller, two groups known only by the expressions holding them
  (`self.group` and `group`), which may be one object (but not a builder that leaves its group
  to the default while the same call gives another argument a group: the code named a group there
  and none for the object), or one of several callables a value
  may hold (`self._gather = pick(mode)`, called later: `when self._gather is _to_attn_tp`),
  chosen where the analysis cannot say when. What two different callables of one value do
  is never combined on one path.

`check` reports medium and above by default; `--min-confidence low` shows the rest (or `high`
only the surest). JSON and SARIF carry `condition`, `confidence` and `binding` (where the memory
is bound: the line a fix changes, inside the helper when that is where it happens).

## Why it matters
Nothing crashes. NCCL silently falls back to its slow, non-symmetric path because the memory
is registered with another communicator, so the optimisation the code was written for never
happens, or happens only by the accident of which context exited last. A mismatch that holds in
one parallel configuration only is found by nobody until that configuration is benchmarked.

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

## Fix safety
The fix is **safe** when every collective that consumes the buffer runs on one group: it
passes that group, spelled as the file spells it. When the consumers' group depends on the
configuration (`dp_reduce_scatter_tensor` runs on TP when `tp_size == attn_dp_size` and on
attention TP otherwise), the fix copies the selection of the group the sibling call sites
use, and is **unsafe** (applied with `--unsafe-fixes`): it changes which group is used in some
configuration. Without such a selection, or for memory whose group is fixed inside a helper,
no fix is offered and the message says why.
"""

from __future__ import annotations

from collections.abc import Iterator

from commgroup_lint.analysis.facts import is_symbolic
from commgroup_lint.analysis.verdict import Mismatch, Removed, best, exchanged_on_default, mismatches
from commgroup_lint.autofix import FixPlanner
from commgroup_lint.model import Confidence, Finding
from commgroup_lint.rule import FileContext, Invalid, Rule, Valid, format_groups, reached

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
        Invalid(_IMPORTS + "from sglang.srt.layers.dp_attention import dp_reduce_scatter_tensor\n"
                "def f(x):\n    out = get_local_dp_buffer(get_tp_group())\n"
                "    dp_reduce_scatter_tensor(out, x)\n", line=5),
        Invalid(_IMPORTS + "class Embedding:\n    def forward(self, x):\n"
                "        out = get_local_dp_buffer(get_tp_group())\n"
                "        if self.use_attn_tp_group:\n            attn_tp_all_gather_into_tensor(out, x)\n",
                line=5, confidence=Confidence.MEDIUM,
                fixed=_IMPORTS + "class Embedding:\n    def forward(self, x):\n"
                "        out = get_local_dp_buffer(get_attention_tp_group())\n"
                "        if self.use_attn_tp_group:\n            attn_tp_all_gather_into_tensor(out, x)\n"),
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
        found: dict[int, list[Mismatch]] = {}
        removed: dict[int, list[Removed]] = {}
        for fn in ctx.functions:
            for c in fn.consumptions:
                gone: list[Removed] = []
                mismatched = mismatches(c, ctx.api, gone, fn.qualname)
                if mismatched:
                    found.setdefault(id(c.allocation.call), []).extend(mismatched)
                if gone:
                    removed.setdefault(id(c.allocation.call), []).extend(gone)
        planner = FixPlanner(ctx)
        for key in dict.fromkeys([*found, *removed]):
            mismatched = found.get(key) or [m for m, _ in removed[key]]
            lead = best(mismatched)
            fact = None if key in found else next(f for m, f in removed[key] if m is lead)
            if ctx.removed(fact):
                continue
            allocation = lead.consumption.allocation
            fix, why = planner.fix_mismatch(allocation, mismatched)
            message = _message(ctx, lead, mismatched)
            if fix is None and why:
                message += f" (no fix: {why})"
            yield ctx.finding(type(self), allocation.call.span, message, fix if fact is None else None,
                              condition=lead.condition, confidence=lead.confidence, allocation=allocation,
                              removed_by=fact)


def _message(ctx: FileContext, lead: Mismatch, found: list[Mismatch]) -> str:
    """What is bound to which group, then the call on the consumer's line and, when that call is
    a helper, the collective inside it; where the group was chosen only when it is not the
    argument of the reported call."""
    allocation = lead.consumption.allocation
    bound = format_groups(lead.bound)
    if allocation.kind == "context":
        subject = f"memory allocated under `{allocation.short_name}` is registered with group {bound}"
    elif allocation.how == "registration":
        subject = f"memory registered by `{allocation.short_name}` is registered with group {bound}"
    elif allocation.how == "object":
        subject = f"the object built by `{allocation.short_name}` is bound to group {bound}"
    else:
        subject = f"memory from `{allocation.short_name}` is bound to group {bound}"
    exchanged = exchanged_on_default(lead.consumption)
    if exchanged:  # the builder's own argument, left out (in the helper, when that is where)
        inside = f" at {ctx.where(allocation.bound_at)}" if allocation.bound_at else ""
        subject += f" (its `{allocation.defaulted}` not given{inside}: the default)"
    elif allocation.bound_at and (allocation.hidden or allocation.chosen):  # the group is not this call's argument
        inside = "fixed inside the helper" if allocation.hidden else "bound inside the helper"
        through = f"taken at {ctx.where(allocation.via)}, " if allocation.via else ""
        subject += f" ({through}{inside} at {ctx.where(allocation.bound_at)})"
    if lead.plain:
        subject += " (which has one rank here: the memory is not registered at all)"
    first = lead.consumption
    if exchanged:
        consumer = format_groups(lead.consumer)
        on = f"the group of `{consumer}`" if any(is_symbolic(g) for g in lead.consumer) else f"group {consumer}"
        message = f"{subject} but its `{first.collective}` is for {on}"
    else:
        message = f"{subject} but reaches {reached(first, format_groups(lead.consumer))}"
    others = {id(m.consumption.call) for m in found} - {id(first.call)}
    if others:
        message += f" (and {len(others)} more collective{'s' if len(others) > 1 else ''})"
    if lead.condition:
        message += f", when {lead.condition}"
    if any(is_symbolic(g) for g in lead.bound | lead.consumer) and not exchanged:
        message += "; the analysis cannot tell whether these are one group (each is known only by the expression" \
                   " holding it)"
    return message
