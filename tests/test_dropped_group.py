"""CGL007 on generated variants: the same dropped group spelled through an alias, a helper, a
method and a kept attribute, and the same code with the group passed on every path (or a cache
keyed by the group), which must stay clean."""

from __future__ import annotations

import itertools

import pytest
from lintkit import lint_text

from commgroup_lint.model import Confidence

# How a function reaches the group it was given; `{g}` is the expression a collective receives.
GIVEN = {
    "parameter": ("def reduce(t, group, {extra}):\n", "group", ""),
    "alias": ("def reduce(t, group, {extra}):\n", "g", "    g = group\n"),
    "kept attribute": ("class Reducer:\n    def __init__(self, group):\n        self.pg = group\n"
                       "    def reduce(self, t, {extra}):\n", "self.pg", ""),
}
# How a collective runs on the default group instead (the `{t}` tensor), with its imports.
DEFAULT = {
    "omitted": ("import torch.distributed as dist\n", "dist.all_reduce({t})"),
    "none": ("import torch.distributed as dist\n", "dist.all_reduce({t}, group=None)"),
    "full name": ("import torch\nimport torch.distributed as dist\n", "torch.distributed.all_reduce({t})"),
    "imported alias": ("import torch.distributed as dist\nfrom torch.distributed import all_reduce as reduce_all\n",
                       "reduce_all({t})"),
}


def _program(given: str, default: str, drop: bool) -> tuple[str, int, int]:
    """A fast path for small tensors and its fallback; the fast path drops the group when `drop`.
    Returns the program, and the line and column of the fast path's collective."""
    head, group, prelude = GIVEN[given]
    imports, call = DEFAULT[default]
    indent = "        " if given == "kept attribute" else "    "
    body = prelude.replace("    ", indent, 1) if prelude else ""
    fast = call.format(t="t") if drop else f"dist.all_reduce(t, group={group})"
    lines = [imports.rstrip("\n"), head.format(extra="limit").rstrip("\n")]
    lines += [line for line in body.split("\n") if line]
    lines += [f"{indent}if t.numel() < limit:", f"{indent}    {fast}", f"{indent}else:",
              f"{indent}    dist.all_reduce(t, group={group})"]
    program = "\n".join(lines) + "\n"
    fast_line = next(i for i, line in enumerate(program.splitlines(), 1) if line.strip() == fast)
    return program, fast_line, len(indent) + 5


CASES = list(itertools.product(GIVEN, DEFAULT))


@pytest.mark.parametrize(("given", "default"), CASES, ids=[f"{g}-{d}" for g, d in CASES])
def test_fast_path_on_the_default_group_is_reported_at_its_collective(tmp_path, given, default):
    program, line, column = _program(given, default, drop=True)
    findings = lint_text(tmp_path, program, select=("CGL007",), min_confidence=Confidence.LOW)
    assert [(f.code, f.start.line, f.start.column, f.confidence) for f in findings] == [
        ("CGL007", line, column, Confidence.HIGH)], program
    assert "when t.numel() < limit;" in findings[0].message
    assert findings[0].condition == "t.numel() < limit"  # the whole path condition, its data too


@pytest.mark.parametrize(("given", "default"), CASES, ids=[f"{g}-{d}" for g, d in CASES])
def test_group_passed_on_every_path_is_clean(tmp_path, given, default):
    program, _, _ = _program(given, default, drop=False)
    assert lint_text(tmp_path, program, select=("CGL007",), min_confidence=Confidence.LOW) == []


def test_message_names_the_parameter_the_other_path_and_what_to_pass(tmp_path):
    program, line, _ = _program("parameter", "omitted", drop=True)
    [finding] = lint_text(tmp_path, program, select=("CGL007",))
    assert finding.message == (
        "`all_reduce` runs on the default group (world), not on `group`, which `reduce` was given and passes"
        f" to `all_reduce` on the other path (line {line + 2}), when t.numel() < limit; pass `group=group`"
    )


def test_a_flag_makes_the_fast_path_medium_and_says_the_condition(tmp_path):
    program = ("import torch.distributed as dist\nclass Reducer:\n    def __init__(self, group):\n"
               "        self.group = group\n    def reduce(self, t):\n        if self.use_custom:\n"
               "            dist.all_reduce(t)\n        else:\n            dist.all_reduce(t, group=self.group)\n")
    [finding] = lint_text(tmp_path, program, select=("CGL007",))
    assert (finding.start.line, finding.confidence, finding.condition) == (7, Confidence.MEDIUM, "self.use_custom")
    assert finding.message.endswith("when self.use_custom; pass `group=self.group`")


def test_a_helper_that_hides_the_world_is_a_fixed_group(tmp_path):
    program = ("import torch.distributed as dist\ndef world_sum(t):\n    dist.all_reduce(t)\n"
               "def reduce(t, group, limit):\n    if t.numel() < limit:\n        world_sum(t)\n"
               "    else:\n        dist.all_reduce(t, group=group)\n")
    [finding] = lint_text(tmp_path, program, select=("CGL007",))
    assert (finding.start.line, finding.start.column, finding.confidence) == (6, 9, Confidence.MEDIUM)
    assert finding.message.startswith("`all_reduce` runs on the fixed group world, not on `group`")


def test_the_objects_own_method_runs_on_its_group(tmp_path):
    program = ("import torch.distributed as dist\nclass Coordinator:\n    def __init__(self, ranks):\n"
               "        self.device_group = dist.new_group(ranks)\n"
               "    def all_reduce(self, t):\n        dist.all_reduce(t, group=self.device_group)\n"
               "    def reduce_twice(self, t, limit):\n        if t.numel() < limit:\n            self.all_reduce(t)\n"
               "        else:\n            dist.all_reduce(t, group=self.device_group)\n")
    assert lint_text(tmp_path, program, select=("CGL007",), min_confidence=Confidence.LOW) == []


# Caches: `{key}` is the dict's key, `{prelude}` what the getter computes first.
KEYED_BY_GROUP = {
    "the group": ("", "group"),
    "a tuple with the group": ("", "(group, size)"),
    "the group's name": ("    key = group.group_name\n", "key"),
    "its id": ("    key = (id(group), size)\n", "key"),
}


def _cache(prelude: str, key: str) -> str:
    return ("_CACHE = {}\n" f"def get_workspace(group, size):\n{prelude}"
            f"    if {key} not in _CACHE:\n        _CACHE[{key}] = Workspace(group, size)\n    return _CACHE[{key}]\n")


@pytest.mark.parametrize("how", list(KEYED_BY_GROUP))
def test_a_cache_keyed_by_the_group_is_clean(tmp_path, how):
    assert lint_text(tmp_path, _cache(*KEYED_BY_GROUP[how]), select=("CGL007",), min_confidence=Confidence.LOW) == []


def test_a_cache_keyed_by_something_else_is_reported_at_the_store(tmp_path):
    [finding] = lint_text(tmp_path, _cache("", "size"), select=("CGL007",), min_confidence=Confidence.LOW)
    assert (finding.start.line, finding.start.column, finding.confidence) == (4, 9, Confidence.LOW)
    assert finding.message == (
        "`get_workspace` keeps what it builds from `group` in the dict `_CACHE[size]`, keyed by `size`, not by the"
        " group, and hands it to every later caller, whatever group it asks for; no caller here says which groups"
        " it is asked for (a latent hazard while it is one); key the cache by the group (or build one object per"
        " group)"
    )


SLOTS = {
    "module global": ("_WS = None\ndef get(group):\n    global _WS\n    if _WS is None:\n        _WS = Workspace(group)\n"
                      "    return _WS\n", 5, "get"),
    "class attribute": ("class Manager:\n    _comm = None\n    @classmethod\n    def get(cls, group):\n"
                        "        if cls._comm is not None:\n            return cls._comm\n"
                        "        cls._comm = Communicator(group)\n        return cls._comm\n", 7, "Manager.get"),
}


@pytest.mark.parametrize("slot", list(SLOTS))
def test_callers_asking_for_two_groups_make_a_cache_high(tmp_path, slot):
    program, line, callee = SLOTS[slot]
    program += f"def build(tp_group, dp_group):\n    {callee}(tp_group)\n    {callee}(dp_group)\n"
    [finding] = lint_text(tmp_path, program, select=("CGL007",))
    assert (finding.start.line, finding.confidence) == (line, Confidence.HIGH)
    assert "its callers here ask for `dp_group`, `tp_group`" in finding.message


@pytest.mark.parametrize("slot", list(SLOTS))
def test_callers_asking_for_one_group_make_a_cache_low(tmp_path, slot):
    program, line, callee = SLOTS[slot]
    program += f"def build(tp_group):\n    {callee}(tp_group)\n    {callee}(tp_group)\n"
    [finding] = lint_text(tmp_path, program, select=("CGL007",), min_confidence=Confidence.LOW)
    assert (finding.start.line, finding.confidence) == (line, Confidence.LOW)


def test_a_check_of_the_group_beside_the_cache_does_not_key_it(tmp_path):
    program = ("_STATE = None\ndef init(group):\n    global _STATE\n    if _STATE is not None:\n        return\n"
               "    size = group.world_size\n    if size > 16:\n        raise ValueError(size)\n"
               "    _STATE = Workspace(group)\n")
    [finding] = lint_text(tmp_path, program, select=("CGL007",), min_confidence=Confidence.LOW)
    assert (finding.start.line, finding.confidence) == (9, Confidence.LOW)
    assert "a set-up that returns nothing" in finding.message


def test_a_cache_rebuilt_on_every_call_is_clean(tmp_path):
    program = "_WS = None\ndef get(group):\n    global _WS\n    _WS = Workspace(group)\n    return _WS\n"
    assert lint_text(tmp_path, program, select=("CGL007",), min_confidence=Confidence.LOW) == []


def _builder(mnnvl: str) -> str:
    return ("def create_workspace(backend, size, group=None):\n"
            "    if backend == 'trtllm':\n        return TrtllmWorkspace(size, group=group)\n"
            "    elif backend == 'mnnvl':\n        if not supported():\n            raise ValueError(backend)\n"
            f"        return MnnvlWorkspace({mnnvl})\n"
            "    return LamportWorkspace(size, process_group=group)\n")


def test_a_builder_that_drops_its_group_on_one_backend(tmp_path):
    [finding] = lint_text(tmp_path, _builder("size"), select=("CGL007",))
    assert (finding.start.line, finding.start.column, finding.confidence) == (7, 16, Confidence.MEDIUM)
    assert finding.message == (
        "`create_workspace` returns this without `group`, which the other branches hand to what they return"
        " (line 3, line 8): it is built without the group the caller asked for, when backend == 'mnnvl';"
        " pass `group` here too"
    )


@pytest.mark.parametrize("passed", ["size, group", "size, comm=Backend(group)", "size, group=group.device_group"])
def test_a_builder_passing_its_group_on_every_branch_is_clean(tmp_path, passed):
    assert lint_text(tmp_path, _builder(passed), select=("CGL007",), min_confidence=Confidence.LOW) == []


def test_a_builder_branch_chosen_by_the_group_itself_is_clean(tmp_path):
    program = ("def create(size, group=None):\n    if group is None:\n        return LocalWorkspace(size)\n"
               "    return Workspace(size, group=group)\n")
    assert lint_text(tmp_path, program, select=("CGL007",), min_confidence=Confidence.LOW) == []


# Two keywords for parts of one group: `{a}`/`{b}` spell the groups, `{prelude}` binds names first.
PARTS = {
    "getters": ("", "get_tp_group().cpu_group", "get_moe_ep_group().device_group"),
    "variables": ("    cpu = get_tp_group().cpu_group\n    dev = get_moe_ep_group()\n", "cpu", "dev.device_group"),
    "name and communicator": ("", "get_tp_group().unique_name", "get_moe_ep_group().device_communicator"),
}
_GETTERS = "from sglang.srt.distributed import get_moe_ep_group, get_tp_group\n"


@pytest.mark.parametrize("spelling", list(PARTS))
def test_two_keywords_for_one_group_given_two_groups(tmp_path, spelling):
    prelude, a, b = PARTS[spelling]
    keywords = ("group_name", "communicator") if spelling == "name and communicator" else ("cpu_group", "device_group")
    program = _GETTERS + f"def build():\n{prelude}    return Comm({keywords[0]}={a}, {keywords[1]}={b})\n"
    [finding] = lint_text(tmp_path, program, select=("CGL007",))
    line = program.count("\n")
    assert (finding.start.line, finding.start.column, finding.confidence) == (line, 12, Confidence.HIGH)
    assert finding.message == (f"`{keywords[0]}=` and `{keywords[1]}=` take parts of one group, but this call gives"
                               " them group tp and group moe_ep; give both the same group")


@pytest.mark.parametrize("spelling", list(PARTS))
def test_two_keywords_given_one_group_or_two_roles_are_clean(tmp_path, spelling):
    prelude, a, b = PARTS[spelling]
    same = _GETTERS + f"def build():\n{prelude}    return Comm(cpu_group={a}, device_group={a})\n"
    roles = _GETTERS + f"def build():\n{prelude}    return Layer(tp_group={a}, ep_group={b})\n"
    for program in (same, roles):
        assert lint_text(tmp_path, program, select=("CGL007",), min_confidence=Confidence.LOW) == [], program


CLEAN = {
    "a cache rebuilt when the group differs": (
        "_buffer = None\ndef get_buffer(group, size):\n    global _buffer\n"
        "    if _buffer is None or _buffer.group != group or _buffer.size < size:\n"
        "        _buffer = Buffer(group, size)\n    return _buffer\n"),
    "a router computing values, not building objects": (
        "def route(t, freqs, cu_seqlens=None, cp_group=None):\n    if cu_seqlens is None:\n"
        "        return rotate_bshd(t, freqs)\n    return rotate_thd(t, cu_seqlens, freqs, cp_group=cp_group)\n"),
    "a builder given only the group's size on one branch": (
        "def build(kind, group=None):\n    if kind == 'a':\n        return Local(size=group.size())\n"
        "    return Packed()\n"),
    "a flag named for a group": (
        "def build(kind, share_in_group=False):\n    if kind == 'a':\n        return Cached(share_in_group)\n"
        "    return Plain()\n"),
    "a tensor's gather": (
        "import torch.distributed as dist\ndef pick(t, index):\n    if t.numel() < 4:\n        dist.all_reduce(t)\n"
        "        return t\n    return t.gather(0, index)\n"),
    "a helper given the group, whose default is another": (
        "import torch.distributed as dist\ndef bcast(t, pp_group=None):\n    if pp_group is None:\n"
        "        pp_group = dist.group.WORLD\n    dist.broadcast(t, 0, group=pp_group)\n"
        "class Controller:\n    def __init__(self, pp_group):\n        self.pp_group = pp_group\n"
        "    def step(self, t):\n        bcast(t, pp_group=self.pp_group)\n"),
    "a default chosen because the group is None": (
        "from vllm.distributed.communication_op import tensor_model_parallel_all_reduce\n"
        "class Embedding:\n    def __init__(self, parallel_group=None):\n        self.parallel_group = parallel_group\n"
        "    def forward(self, x):\n        return (self.parallel_group.all_reduce(x) if self.parallel_group is not None\n"
        "                else tensor_model_parallel_all_reduce(x))\n"),
    "a group passed after a starred argument": (
        "import torch.distributed as dist\ndef exchange(t, size, group):\n    dist.all_gather_into_tensor(t, t, group=group)\n"
        "def forward(parts, size, cp_group, last):\n    dist.all_reduce(parts[0], group=cp_group)\n"
        "    if last:\n        exchange(*parts, size, cp_group)\n"),
    "handles of collectives on the group, returned": (
        "import torch.distributed as dist\ndef gather(t, group, fused):\n    if fused:\n"
        "        handle = dist.all_reduce(t, group=group, async_op=True)\n        return ReduceHandle(handle)\n"
        "    handles = [dist.all_gather_into_tensor(t, t, group=group, async_op=True)]\n    return GatherHandles(handles)\n"),
    "a device beside a group": (
        "from sglang.srt.distributed import get_tp_group\n"
        "def make(device):\n    return Comm(group=get_tp_group().cpu_group, device=device)\n"),
}


@pytest.mark.parametrize("case", list(CLEAN))
def test_shapes_that_keep_their_group_are_clean(tmp_path, case):
    assert lint_text(tmp_path, CLEAN[case], select=("CGL007",), min_confidence=Confidence.LOW) == []


def test_the_world_beside_the_given_group_is_low_and_an_engine_default_medium(tmp_path):
    world = ("import torch.distributed as dist\ndef counts(t, ring_group):\n    dist.all_gather([t], t)\n"
             "    dist.all_reduce(t, group=ring_group)\n")
    [finding] = lint_text(tmp_path, world, select=("CGL007",), min_confidence=Confidence.LOW)
    assert (finding.start.line, finding.confidence) == (3, Confidence.LOW)
    engine = ("from megatron.core.tensor_parallel.mappings import reduce_from_tensor_model_parallel_region\n"
              "import torch.distributed as dist\nclass Attention:\n    def __init__(self, tp_group):\n"
              "        self.tp_group = tp_group\n    def forward(self, t):\n"
              "        dist.all_reduce(t, group=self.tp_group)\n        return reduce_from_tensor_model_parallel_region(t)\n")
    [finding] = lint_text(tmp_path, engine, select=("CGL007",))
    assert (finding.start.line, finding.confidence) == (8, Confidence.MEDIUM)
    assert finding.message.startswith("`reduce_from_tensor_model_parallel_region` runs on the default group (tp), not on `self.tp_group`")


def test_an_omitted_group_with_no_declared_default_runs_no_collective(tmp_path):
    """TransformerEngine's `general_gemm` overlaps communication only when given `ub` (its
    profile declares no default): without it, it is a plain GEMM, not a collective on a default
    group, so a function given a group that calls it so drops nothing."""
    program = (
        "import torch.distributed as dist\n"
        "from transformer_engine.pytorch.cpp_extensions.gemm import general_gemm\n"
        "def forward(x, w, tensor_parallel_group):\n"
        "    out = x.new_empty(x.shape)\n"
        "    dist.all_gather_into_tensor(out, x, group=tensor_parallel_group)\n"
        "    return general_gemm(w, out)\n"
    )
    assert lint_text(tmp_path, program, select=("CGL007",), min_confidence=Confidence.LOW) == []
