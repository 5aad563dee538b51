"""
## What it finds
A function or method that is given a group (a parameter it runs a collective on, or, in a
method, its object's group such as `self.tp_group`) and, on some path, runs a collective that
does not receive that group or anything derived from it: the default group instead
(`dist.all_reduce(t)` with no `group=`, or `group=None`), or a fixed one (a getter such as
`get_tp_group()`, a helper that hides its group). The collectives of the scanned code's own
helpers count as well (a helper that reduces over the world without a group). A wrapper that
takes a parameter named for a group (`group`, `tp_group`, `process_group`, `pg`) and never
reads it, while its collective runs on the default group, is reported too. A call whose group
argument is omitted counts only where its callee has a default group (`torch.distributed`'s
world): without one, leaving it out means no collective (TransformerEngine's `general_gemm`
without `ub` is a plain GEMM).

It finds two more ways to lose the group:
- **a builder that drops it on one branch**: a function given a group returns what a call
  builds, and hands the group to the builder on some branches but not on another (a workspace
  factory whose third backend is built without `group`). A branch chosen by a test of the
  group itself (`if group is None:`) is left alone.
- **a cache that ignores it**: the function keeps what it builds from the group in a slot all
  callers share (a module global, a class attribute, a dict keyed by something else) and builds
  it only while the slot is empty, so every later caller gets the first caller's object,
  whatever group it asks for. A dict keyed by the group, or by anything derived from it
  (`group.group_name`, `(id(group), size)`), is a cache per group and is fine.

And one way to hand a call two groups: **two keywords for parts of one group** (`cpu_group=`
and `device_group=`, `group_name=` and `communicator=`: keywords that differ only by the part
they take) given different groups. Keywords that name different roles (`tp_group=`,
`ep_group=`) are left alone.

Reported where the group is dropped: the collective run without it, the builder call made
without it, the store into the shared slot; the message names the given group, the path's
condition, and what to pass.

## Confidence
- **high**: the default group runs on a path that excludes the one where a collective of the
  same name runs on the given group (a fast path and its fallback on different groups), and
  the path needs nothing but sizes or data (`if t.numel() < limit:`, `if self.should_use(t):`).
- **medium**: the same under a flag or mode the code sets (`if self.use_custom_allreduce:`), or
  apart by a test the analysis does not read (`if t.numel() * t.element_size() < limit:`); an engine group's
  default beside collectives that receive the given group (a TP helper called without the
  object's own `self.tp_group`); a wrapper that never reads its group parameter; or a fixed
  group on the other path of the same collective.
- **low**: the world beside collectives on the given group, or a fixed group there (every
  rank's count gathered over the world, then indexed by the group's ranks, is deliberate).

Two keywords given two known groups are high (low when a group is known only by the expression
holding it). A builder that drops its group on one branch is medium. A cache is high when callers in the
same file ask it for different groups, and low otherwise (its callers here all ask for one
group, they are in other files, or it is a set-up that returns nothing): while one group is
asked for, it is a latent hazard, not a wrong result.

`check` reports medium and above by default.

## Why it matters
A collective on the wrong group is not slow, it is wrong: reducing over the world instead of
the tensor-parallel group sums the shards of other replicas into the result, and nothing
fails. On the fast path only, it hides until the input is small enough (or the flag is set)
to take it; with ranks outside the group not calling the collective at all, it hangs.

## Example
```python
import torch.distributed as dist

def all_reduce(tensor, group):
    if tensor.numel() < 4096:
        dist.all_reduce(tensor)               # CGL007: the world, not `group`
    else:
        dist.all_reduce(tensor, group=group)
```

## Fix
Pass the group the function was given: `dist.all_reduce(tensor, group=group)`; for a group's
method, call it on that group (`group.all_reduce(t)`, not `get_tp_group().all_reduce(t)`).
"""

from __future__ import annotations

from collections.abc import Iterator

from commgroup_lint.analysis.api import Api
from commgroup_lint.analysis.builders import DroppedBuild, dropped_builds
from commgroup_lint.analysis.caches import Cached, callers_groups, group_caches
from commgroup_lint.analysis.conditions import display_condition
from commgroup_lint.analysis.dropped import (
    GROUP_WORDS,
    Disagreement,
    Dropped,
    disagreeing_arguments,
    dropped_groups,
    group_parameters,
)
from commgroup_lint.analysis.walk import describe_path
from commgroup_lint.model import Confidence, Finding
from commgroup_lint.rule import FileContext, Invalid, Rule, Valid, format_groups, path_configuration

_TORCH = "import torch.distributed as dist\n"
_SGLANG = "from sglang.srt.distributed import get_tp_group\n"
_MEGATRON = "from torch import distributed as torch_dist\n"


class DroppedGroup(Rule):
    code = "CGL007"
    name = "dropped-group"
    summary = "A collective drops the group its function was given"
    opt_in = True  # it reads every file that runs a collective: 3.4x the time of a default run on vLLM
    VALID = [
        Valid(_TORCH + "def all_reduce(t, group):\n    if t.numel() < 4096:\n        dist.all_reduce(t, group=group)\n"
              "    else:\n        dist.all_reduce(t, group=group)\n"),
        Valid(_SGLANG + "def reduce(x, group):\n    if x.is_cpu:\n        return group.all_reduce(x)\n"
              "    return group.all_reduce(x.cuda())\n"),
        Valid(_MEGATRON + "class Linear:\n    def __init__(self, tp_group):\n        self.tp_group = tp_group\n"
              "    def forward(self, x):\n        torch_dist.all_reduce(x, group=self.tp_group)\n        return x\n"),
        Valid(_TORCH + "def broadcast(t):\n    dist.broadcast(t, 0)\n"),
        Valid(_SGLANG + "from sglang.srt.distributed import get_moe_ep_group\n"
              "def make_layer():\n    return Layer(tp_group=get_tp_group(), ep_group=get_moe_ep_group())\n"),
        Valid("def create_workspace(backend, size, group=None):\n    if backend == 'trtllm':\n"
              "        return TrtllmWorkspace(size, group=group)\n    return MnnvlWorkspace(size, comm=Backend(group))\n"),
        Valid("_WORKSPACES = {}\ndef get_workspace(group, size):\n    key = (group.group_name, size)\n"
              "    if key not in _WORKSPACES:\n        _WORKSPACES[key] = Workspace(group, size)\n"
              "    return _WORKSPACES[key]\n"),
    ]
    INVALID = [
        Invalid(_TORCH + "def all_reduce(t, group):\n    if t.numel() < 4096:\n        dist.all_reduce(t)\n"
                "    else:\n        dist.all_reduce(t, group=group)\n", line=4),
        Invalid(_SGLANG + "class Communicator:\n    def __init__(self, group):\n        self.group = group\n"
                "    def reduce(self, x):\n        if self.use_fast_path:\n            return get_tp_group().all_reduce(x)\n"
                "        return self.group.all_reduce(x)\n", line=7, confidence=Confidence.MEDIUM),
        Invalid(_MEGATRON + "class Linear:\n    def __init__(self, tp_group):\n        self.tp_group = tp_group\n"
                "    def forward(self, x):\n        torch_dist.all_reduce(x, group=self.tp_group)\n"
                "        torch_dist.all_gather_into_tensor(x, x, group=None)\n        return x\n",
                line=7, confidence=Confidence.LOW),
        Invalid(_TORCH + "def all_reduce(t, process_group=None):\n    dist.all_reduce(t)\n", line=3,
                confidence=Confidence.MEDIUM),
        Invalid(_TORCH + "def world_sum(t):\n    dist.all_reduce(t)\n"
                "def reduce(t, group, use_custom):\n    if use_custom:\n        world_sum(t)\n"
                "    else:\n        dist.all_reduce(t, group=group)\n", line=6, confidence=Confidence.MEDIUM),
        Invalid("def create_workspace(backend, size, group=None):\n    if backend == 'trtllm':\n"
                "        return TrtllmWorkspace(size, group=group)\n    if backend == 'mnnvl':\n"
                "        return MnnvlWorkspace(size)\n    return OneShotWorkspace(size, group=group)\n",
                line=5, confidence=Confidence.MEDIUM),
        Invalid("class Comm:\n    _shared = None\n    @classmethod\n    def get(cls, group):\n"
                "        if cls._shared is None:\n            cls._shared = Communicator(group)\n"
                "        return cls._shared\ndef build(tp_group, dp_group):\n"
                "    return Comm.get(tp_group), Comm.get(dp_group)\n", line=6),
        Invalid(_SGLANG + "from sglang.srt.distributed import get_moe_ep_group\n"
                "def make_communicator():\n    return PyNcclCommunicator(cpu_group=get_tp_group().cpu_group,\n"
                "                              device_group=get_moe_ep_group().device_group)\n", line=4),
    ]

    @classmethod
    def index_words(cls, api: Api) -> set[str]:
        """The collectives and the getters (a call given two groups needs no collective): the
        files naming one have their helpers summarised. Only compound names: `gather`, `reduce`
        or `send` alone name a tensor's method, `functools.reduce` or a socket, and would have
        the whole tree summarised (vLLM: 1,100 of 3,200 files, five times the run)."""
        profile = api.profile
        words = ({name.rpartition(".")[2].partition("(")[0] for name in [*profile.collectives, *profile.getters]}
                 | set(profile.methods.collective))
        return {word for word in words if "_" in word.strip("_")}

    @classmethod
    def gate_words(cls, api: Api) -> set[str]:
        """Those, and the usual names of a group parameter: a cache or a builder needs no collective."""
        return cls.index_words(api) | GROUP_WORDS

    def check(self, ctx: FileContext) -> Iterator[Finding]:
        for fn in ctx.functions:
            if fn.node is None:
                continue
            for dropped in dropped_groups(fn):
                condition, path_confidence = path_configuration(dropped.use.cond)
                confidence = min(dropped.confidence, path_confidence, key=lambda c: c.rank)
                # the data the path tests too, or the test the dataflow could not read
                path = display_condition(dropped.use.cond) or describe_path(dropped.path)
                yield ctx.finding(type(self), dropped.use.call.span, _message(fn.node.name, dropped, path),
                                  condition=condition, confidence=confidence)
            for mixed in disagreeing_arguments(fn, ctx.api):
                condition, path_confidence = path_configuration(mixed.arguments.cond)
                confidence = min(mixed.confidence, path_confidence, key=lambda c: c.rank)
                yield ctx.finding(type(self), mixed.arguments.call.span, _mixed_message(mixed, condition),
                                  condition=condition, confidence=confidence)
            groups = group_parameters(fn)
            for build in dropped_builds(fn.node, groups):
                yield ctx.finding(type(self), build.call.span, _build_message(fn.node.name, build),
                                  condition=build.condition, confidence=Confidence.MEDIUM)
            for cached in group_caches(fn.node, ctx.module, fn.class_name, groups):
                callers = callers_groups(ctx.module, fn.node, cached.group, method=fn.class_name is not None)
                message, confidence = _cache_message(fn.node.name, cached, callers)
                yield ctx.finding(type(self), cached.store.span, message, confidence=confidence)


def _message(function: str, dropped: Dropped, condition: str | None) -> str:
    use = dropped.use
    if dropped.held_by is None:
        message = f"`{function}` takes `{dropped.held}` but never uses it: `{use.collective}` runs on {dropped.instead}"
    else:
        message = f"`{use.collective}` runs on {dropped.instead}, not on `{dropped.held}`, which `{function}` was given"
        if dropped.partner is not None:
            message += (f" and passes to `{dropped.partner.collective}` on the other path"
                        f" (line {dropped.partner.call.span.line})")
        else:
            message += f" (`{dropped.held_by.collective}` at line {dropped.held_by.call.span.line} runs on it)"
    if condition:
        message += f", when {condition}"
    return f"{message}; {dropped.advice}"


def _cache_message(function: str, cached: Cached, callers: list[str | None]) -> tuple[str, Confidence]:
    """Callers asking for different groups make the cache wrong now (high). Otherwise it is a
    latent hazard (low): one caller, callers that all pass one group, a set-up run once per
    process, or callers in other files (engines pass one group per process to such getters:
    vLLM's FlashInfer workspaces are only ever asked for the TP group)."""
    where = f"the {cached.kind} `{cached.slot}`"
    if cached.key is not None:
        where += f", keyed by `{cached.key}`, not by the group,"
    message = (f"`{function}` keeps what it builds from `{cached.group}` in {where} and hands it to every later"
               " caller, whatever group it asks for")
    asked = sorted({c for c in callers if c is not None})
    if len(asked) > 1:
        message += f"; its callers here ask for {', '.join(f'`{a}`' for a in asked)}"
        confidence = Confidence.HIGH
    elif callers:
        message += f"; {'its one caller here asks' if len(callers) == 1 else 'its callers here all ask'} for one group"
        confidence = Confidence.LOW
    elif not cached.returned:
        message += "; it is a set-up that returns nothing (a latent hazard if it is only ever run for one group)"
        confidence = Confidence.LOW
    else:
        message += "; no caller here says which groups it is asked for (a latent hazard while it is one)"
        confidence = Confidence.LOW
    return f"{message}; key the cache by the group (or build one object per group)", confidence


def _build_message(function: str, build: DroppedBuild) -> str:
    kept = ", ".join(f"line {line}" for line in sorted({c.span.line for c in build.kept}))
    message = (f"`{function}` returns this without `{build.group}`, which the other branches hand to what they"
               f" return ({kept}): it is built without the group the caller asked for")
    if build.condition:
        message += f", when {build.condition}"
    return f"{message}; pass `{build.group}` here too"


def _mixed_message(mixed: Disagreement, condition: str | None) -> str:
    (first, first_groups), (second, second_groups) = mixed.first, mixed.second
    message = (f"`{first}=` and `{second}=` take parts of one group, but this call gives them group"
               f" {format_groups(first_groups)} and group {format_groups(second_groups)}")
    if condition:
        message += f", when {condition}"
    return f"{message}; give both the same group"
