"""
## What it finds
Sibling call sites that choose their group by different conventions. Siblings are the calls
of the same allocator in one class (or module) whose buffers go to the same kind of consumer,
for example every `get_local_dp_buffer` filled by `dp_scatter`. When most of them choose the
group with a condition on a world-size relation
(`get_tp_group() if get_tensor_model_parallel_world_size() == get_attention_dp_size() else get_attention_tp_group()`,
usually written as an `if`/`else` that assigns `group`) and one passes a fixed group, or a
different condition, the odd one is reported, naming the convention and where it is used.

## Why it matters
The siblings encode a fact about the configuration: which group the buffer must be registered
with under each layout. A new site written differently is right in one configuration and
silently wrong (a slow, unregistered collective) in the other. This is the reviewer's comment
on SGLang's fix: every DP scatter in the layer communicator picks the group the same way, so a
new scatter site should too.

## Example
```python
class LayerCommunicator:
    def scatter_hidden_states(self, global_hidden_states, forward_batch):
        if get_tensor_model_parallel_world_size() == get_attention_dp_size():
            group = get_tp_group()
        else:
            group = get_attention_tp_group()
        hidden_states = get_local_dp_buffer(group)
        dp_scatter(hidden_states, global_hidden_states, forward_batch)

    def scatter_moe_output(self, global_hidden_states, forward_batch):
        hidden_states = get_local_dp_buffer(get_tp_group())   # CGL004
        dp_scatter(hidden_states, global_hidden_states, forward_batch)
```

## Fix
Choose the group as the siblings do. The autofix inserts the siblings' `if`/`else` before the
call and passes the variable; it is an unsafe fix (it changes which group is used in one
configuration), applied with `--fix --unsafe-fixes`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator

from commgroup_lint.analysis.siblings import Convention, Site, consumer_kind, convention, sites
from commgroup_lint.autofix import Choice, FixPlanner
from commgroup_lint.model import Applicability, Finding
from commgroup_lint.rule import FileContext, Invalid, Rule, Valid

_HEAD = (
    "from sglang.srt.distributed import get_tensor_model_parallel_world_size, get_tp_group\n"
    "from sglang.srt.layers.dp_attention import dp_scatter, get_attention_dp_size, get_attention_tp_group, get_local_dp_buffer\n"
)
_SELECT = (
    "        if get_tensor_model_parallel_world_size() == get_attention_dp_size():\n"
    "            group = get_tp_group()\n"
    "        else:\n"
    "            group = get_attention_tp_group()\n"
)


def _method(name: str, group: str, select: bool = True) -> str:
    return (f"    def {name}(self, g, fb):\n" + (_SELECT if select else "")
            + f"        h = get_local_dp_buffer({group})\n        dp_scatter(h, g, fb)\n        return h\n")


class InconsistentSelection(Rule):
    code = "CGL004"
    name = "inconsistent-selection"
    summary = "A call site chooses its group differently from its siblings"
    VALID = [
        Valid(_HEAD + "class C:\n" + _method("a", "group") + _method("b", "group") + _method("c", "group")),
        Valid(_HEAD + "class C:\n" + _method("a", "group") + _method("b", "get_tp_group()", select=False)),
    ]
    INVALID = [
        Invalid(_HEAD + "class C:\n" + _method("a", "group") + _method("b", "group")
                + _method("c", "get_tp_group()", select=False), line=21,
                fixed=_HEAD + "class C:\n" + _method("a", "group") + _method("b", "group") + _method("c", "group")),
    ]

    def check(self, ctx: FileContext) -> Iterator[Finding]:
        families: dict[tuple[str | None, str, str], list[tuple[Site, Convention]]] = defaultdict(list)
        for site in sites(ctx.functions):
            kind = consumer_kind(site)
            found = convention(site, ctx.api, ctx.imports) if kind and site.allocation.missing_param is None else None
            if found is not None and kind:
                families[(site.allocation.class_name, site.allocation.short_name, kind)].append((site, found))
        planner = FixPlanner(ctx)
        for members in families.values():
            counts = Counter(conv.key for _, conv in members)
            key, n = counts.most_common(1)[0]
            majority = next(conv for _, conv in members if conv.key == key)
            if majority.kind != "selection" or n * 2 <= len(members):
                continue
            lines = ", ".join(str(s.allocation.call.span.line) for s, conv in members if conv.key == key)
            for site, conv in members:
                if conv.key == key:
                    continue
                message = (
                    f"`{site.allocation.short_name}` here passes {conv.describe()}, but {n} sibling call sites"
                    f" (lines {lines}) choose the group by a world-size condition ({majority.key})"
                )
                choice = Choice(None, f"the convention of {n} sibling call sites", safe=False, convention=majority)
                fix = planner.fix_with(site.allocation, choice, replace=True)[0]
                if fix is not None:
                    fix = type(fix)(fix.edits, Applicability.UNSAFE, fix.description)
                yield ctx.finding(type(self), site.allocation.call.span, message, fix)
