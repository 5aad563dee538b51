"""The profile keys the shim reads besides contexts and allocators: the configuration's profile
selection and engine profile files, a context's `enabled`, a group argument's `default`,
`registrations`, `pool_contexts`, `pool_bindings`, `methods.register_pool`, collective helpers
with fixed groups, defaults and per-buffer groups, and the size keys (static only). On one gloo
rank, where two groups over the same rank are two groups."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.distributed._symmetric_memory as symm  # noqa: E402

from commgroup_lint import runtime  # noqa: E402
from commgroup_lint.profile import Profile  # noqa: E402
from commgroup_lint.runtime import _knowledge, _shim  # noqa: E402
from commgroup_lint.runtime._knowledge import Knowledge  # noqa: E402
from rt_project import clean_env  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

CONFIG = textwrap.dedent(
    """\
    [tool.commgroup-lint]
    select = ["CGL0"]
    per-file-ignores = {"cglkeys/helpers.py" = ["CGL003"]}
    extend-exclude = ["build"]

    [tool.commgroup-lint.extend-profile.groups.tp]
    description = "the project's tensor-parallel group"
    size = "tp_size"

    [tool.commgroup-lint.extend-profile.group_attributes]
    size = ["world_size"]

    [tool.commgroup-lint.extend-profile.methods]
    size = ["size"]

    [tool.commgroup-lint.extend-profile.getters]
    "cglkeys.groups.get_tp_group" = ["tp"]
    "cglkeys.groups.get_missing_group" = ["missing"]

    [tool.commgroup-lint.extend-profile.contexts."cglkeys.alloc.switchable"]
    param = "group"
    index = 1
    enabled = "enabled"

    [tool.commgroup-lint.extend-profile.allocators."cglkeys.alloc.world_buffer"]
    param = "group"
    index = 1
    default = "world"

    [tool.commgroup-lint.extend-profile.allocators."cglkeys.alloc.tp_buffer"]
    param = "group"
    index = 1
    default = "tp"

    [tool.commgroup-lint.extend-profile.allocators."cglkeys.alloc.missing_buffer"]
    param = "group"
    index = 1
    default = "missing"

    [tool.commgroup-lint.extend-profile.registrations."cglkeys.alloc.register"]
    buffer = { param = "buf", index = 0 }
    group = { param = "group", index = 1 }

    [tool.commgroup-lint.extend-profile.pool_contexts."cglkeys.alloc.use_pool"]
    param = "pool"
    index = 0

    [tool.commgroup-lint.extend-profile.pool_bindings."cglkeys.alloc.bind_pool"]
    pool = { param = "pool", index = 0 }
    groups = { param = "groups", index = 1 }

    [tool.commgroup-lint.extend-profile.contexts."cglkeys.alloc.on_group"]
    param = "group"
    index = 1

    [tool.commgroup-lint.extend-profile.collectives."cglkeys.helpers.tp_all_reduce"]
    groups = ["tp"]

    [tool.commgroup-lint.extend-profile.collectives."cglkeys.helpers.all_reduce_or_world"]
    param = "group"
    index = 1
    default = "world"

    [tool.commgroup-lint.extend-profile.collectives."cglkeys.helpers.gather"]
    buffers = [{ param = "out", index = 0, groups = ["tp when tp_size == dp_size", "world"] }]

    [tool.commgroup-lint.extend-profile.runtime.group_classes."cglkeys.groups.Wrapper"]
    group_attr = "pg"
    """
)

ALLOC = textwrap.dedent(
    """\
    import contextlib


    @contextlib.contextmanager
    def switchable(pool, group=None, enabled=True):
        yield


    def world_buffer(n, group=None):
        return __import__("torch").empty(n)


    def tp_buffer(n, group=None):
        return __import__("torch").empty(n)


    def missing_buffer(n, group=None):
        return __import__("torch").empty(n)


    def register(buf, group):
        return buf


    @contextlib.contextmanager
    def use_pool(pool):
        yield


    def bind_pool(pool, groups):
        pass


    @contextlib.contextmanager
    def on_group(pool, group):
        with use_pool(pool):
            yield
    """
)

GROUPS = textwrap.dedent(
    """\
    TP = None


    def get_tp_group():
        return TP


    def get_missing_group():
        raise AssertionError("the group is not initialised")


    class Wrapper:
        def __init__(self, pg):
            self.pg = pg

        def register_mem_pool(self, pool):
            pass
    """
)

HELPERS = textwrap.dedent(
    """\
    import torch.distributed as dist

    from cglkeys import groups


    def tp_all_reduce(t):
        dist.all_reduce(t, group=groups.TP)


    def all_reduce_or_world(t, group=None):
        dist.all_reduce(t, group=group)


    def gather(out, inp):
        dist.all_reduce(out, group=groups.TP)
    """
)

# An engine of the user's own, in a profile file next to the configuration (`profile-files`).
ENGINE = textwrap.dedent(
    """\
    [profile]
    name = "cglengine"
    extends = ["torch"]

    [groups.ep]
    description = "expert-parallel ranks"
    size = "ep_size"

    [contexts."cglkeys.alloc.on_group"]
    param = "group"
    index = 1
    """
)

SELECTING = textwrap.dedent(
    """\
    [tool.commgroup-lint]
    profiles = ["vllm", "megatron"]
    profile-files = ["engine.toml"]
    """
)

# The parts of Megatron-Core's allocator the shipped profile names, shaped like the real ones
# (`nccl_mem(pool, enabled=True, device=None, group=None, symmetric=True)`, which makes its
# pool context in `__init__` and enters it in `__enter__`), without CUDA: the project's
# `use_pool` stands for `torch.cuda.use_mem_pool`.
MEGATRON = textwrap.dedent(
    """\
    import contextlib

    from cglkeys.alloc import use_pool


    class nccl_mem:
        def __init__(self, pool, enabled=True, device=None, group=None, symmetric=True):
            self.pool, self.group = pool, group
            self.mem_context = use_pool(pool) if enabled else contextlib.nullcontext()

        def __enter__(self):
            self.mem_context.__enter__()
            return self

        def __exit__(self, *exc):
            self.mem_context.__exit__(*exc)
            return False


    class MemPoolAllocatorWithoutRegistration:
        def __init__(self, pool):
            self.pool = pool

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False


    def register_mem_pool(pool, group, symmetric=True):
        pass
    """
)

PACKAGES = {
    "cglkeys/__init__.py": "",
    "cglkeys/alloc.py": ALLOC,
    "cglkeys/groups.py": GROUPS,
    "cglkeys/helpers.py": HELPERS,
    "megatron/__init__.py": "",
    "megatron/core/__init__.py": "",
    "megatron/core/nccl_allocator.py": MEGATRON,
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The user's package, a stand-in for Megatron-Core's allocator and the configuration, the
    working directory at the project's root."""
    for name, text in PACKAGES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(_knowledge.PROFILE_ENV_VAR, raising=False)
    runtime.clear_violations()
    yield tmp_path
    for name in [m for m in sys.modules if m.split(".")[0] in ("cglkeys", "megatron")]:
        del sys.modules[name]
    runtime.clear_violations()


class _Pool:
    """A memory pool that cannot list its segments: bound as a whole."""


class _SegmentPool:
    """A memory pool that lists its segments, as a CUDA ``MemPool`` does: registered by
    segment. Its segments are the storages of ``memory``."""

    def __init__(self) -> None:
        self.memory: list = []

    def snapshot(self) -> list[dict]:
        return [{"device": -1, "address": t.untyped_storage().data_ptr(), "total_size": t.untyped_storage().nbytes()}
                for t in self.memory]


def _line() -> int:
    return sys._getframe(1).f_lineno


def _found(ctx) -> list[tuple]:
    return [(v.code, v.line, v.collective_line, v.buffer_group, v.collective_group) for v in ctx.violations]


def test_the_configuration_selects_profiles_and_adds_engine_profile_files(project: Path) -> None:
    (project / "pyproject.toml").write_text(SELECTING)
    (project / "engine.toml").write_text(ENGINE)
    knowledge = _knowledge.load()
    assert "cglkeys.alloc.on_group" in knowledge.contexts  # the engine's own profile file
    assert "megatron.core.nccl_allocator.nccl_mem" in knowledge.contexts
    assert "vllm.distributed.device_communicators.pynccl_allocator.nccl_symm_mem_context" in knowledge.contexts
    assert not any(name.startswith("sglang.") for name in knowledge.contexts)  # not selected
    assert "torch.distributed._symmetric_memory.rendezvous" in knowledge.registrations  # the base both extend
    assert set(_knowledge.load("sglang").contexts) == {
        "sglang.srt.distributed.device_communicators.pynccl_allocator.use_symmetric_memory", "cglkeys.alloc.on_group"}


def test_enabled_false_turns_a_context_off(project: Path, groups) -> None:
    a, b = groups
    from cglkeys import alloc

    with runtime.enforce("report") as ctx:
        with alloc.switchable(None, a):
            on = torch.ones(4); on_line = _line()  # noqa: E702
        with alloc.switchable(None, a, enabled=True):
            also_on = torch.ones(4); also_line = _line()  # noqa: E702
        with alloc.switchable(None, a, False):
            off = torch.ones(4)
        with alloc.switchable(None, a, enabled=False):
            off_too = torch.ones(4)
        for t in (on, also_on, off, off_too):
            dist.all_reduce(t, group=b); at = _line()  # noqa: E702
    assert _found(ctx) == [("CGL002", on_line, at, "a", "b"), ("CGL002", also_line, at, "a", "b")]


def test_megatron_nccl_mem_enabled_and_its_world_default(project: Path, groups) -> None:
    """The shipped Megatron-Core entry: `group` at index 3, `default = "world"`, `enabled`."""
    a, b = groups
    from megatron.core.nccl_allocator import nccl_mem

    with runtime.enforce("report") as ctx:
        with nccl_mem(None, group=a):
            on_a = torch.ones(4); a_line = _line()  # noqa: E702
        with nccl_mem(None, True, None, None):  # group None: the default (world) group
            on_world = torch.ones(4); world_line = _line()  # noqa: E702
        with nccl_mem(None, False, None, a):
            off = torch.ones(4)
        with nccl_mem(None, enabled=False, group=a):
            off_too = torch.ones(4)
        for t in (on_a, on_world, off, off_too):
            dist.all_reduce(t, group=b); at = _line()  # noqa: E702
        dist.all_reduce(on_world)  # on the default group: the one it is bound to
    assert _found(ctx) == [("CGL002", a_line, at, "a", "b"), ("CGL002", world_line, at, "world", "b")]


def test_an_omitted_group_is_the_default_the_profile_names(project: Path, groups) -> None:
    a, b = groups
    from cglkeys import alloc
    from cglkeys import groups as engine_groups

    engine_groups.TP = b
    with runtime.enforce("report") as ctx:
        world = alloc.world_buffer(4); world_line = _line()  # noqa: E702
        tp = alloc.tp_buffer(4); tp_line = _line()  # noqa: E702
        tp_none = alloc.tp_buffer(4, None); tp_none_line = _line()  # noqa: E702
        given = alloc.tp_buffer(4, a)  # given: the default does not apply
        unknown = alloc.missing_buffer(4)  # its getter fails: bound to nothing, not to a guess
        dist.all_reduce(world); dist.all_reduce(tp, group=b); dist.all_reduce(given, group=a)  # noqa: E702
        dist.all_reduce(unknown, group=a)
        for t in (world, tp, tp_none):
            dist.all_reduce(t, group=a); at = _line()  # noqa: E702
    assert _found(ctx) == [("CGL002", world_line, at, "world", "a"), ("CGL002", tp_line, at, "b", "a"),
                           ("CGL002", tp_none_line, at, "b", "a")]


def test_registrations_register_the_buffer_with_the_group(project: Path, groups) -> None:
    a, b = groups
    from cglkeys import alloc

    with runtime.enforce("report") as ctx:
        with alloc.switchable(None, a):
            bound = torch.ones(4); bound_line = _line()  # noqa: E702
        alloc.register(bound, b)  # registered with b too: allocated under a all the same
        plain = alloc.register(torch.ones(4), group=b); plain_line = _line()  # noqa: E702
        dist.all_reduce(bound, group=a)
        dist.all_reduce(plain, group=b)
        dist.all_reduce(bound, group=b); bound_at = _line()  # noqa: E702
        dist.all_reduce(plain, group=a); plain_at = _line()  # noqa: E702
    assert _found(ctx) == [("CGL002", bound_line, bound_at, "a", "b"), ("CGL002", plain_line, plain_at, "b", "a")]


def test_torch_rendezvous_is_hooked_through_the_torch_profile(project: Path, groups, monkeypatch) -> None:
    """`registrations."torch.distributed._symmetric_memory.rendezvous"` (a stand-in for the
    CUDA-only original); a profile without the entry leaves it alone."""
    a, b = groups

    def rendezvous(tensor, group):
        return "handle"

    monkeypatch.setattr(symm, "rendezvous", rendezvous)
    with runtime.enforce("report") as ctx:
        t = torch.ones(4)
        assert symm.rendezvous(t, b.group_name) == "handle"; line = _line()  # noqa: E702
        dist.all_reduce(t, group=b)
        dist.all_reduce(t, group=a); at = _line()  # noqa: E702
    assert _found(ctx) == [("CGL002", line, at, "b", "a")]
    assert symm.rendezvous is rendezvous
    shim = _shim.install("report", Knowledge.of(Profile(name="empty")))
    try:
        assert symm.rendezvous is rendezvous
    finally:
        shim.uninstall()


def test_pool_contexts_bind_to_the_groups_the_pool_is_bound_to_later(project: Path, groups) -> None:
    a, b = groups
    from cglkeys import alloc

    pool = _Pool()
    with runtime.enforce("report") as ctx:
        with alloc.use_pool(pool):
            buf = torch.ones(4); line = _line()  # noqa: E702
        dist.all_reduce(buf, group=b)  # not bound yet: nothing to say
        alloc.bind_pool(pool, [a])
        dist.all_reduce(buf, group=a)
        dist.all_reduce(buf, group=b); at = _line()  # noqa: E702
        alloc.bind_pool(pool, groups=[b])
        dist.all_reduce(buf[1:], group=b)
    assert _found(ctx) == [("CGL002", line, at, "a", "b")]


def test_a_group_context_around_a_pool_context_names_the_allocation_group(project: Path, groups) -> None:
    a, b = groups
    from cglkeys import alloc

    shared, other = _Pool(), _Pool()
    with runtime.enforce("report") as ctx:
        with alloc.on_group(shared, a):  # enters use_pool(shared) inside
            mismatched = torch.ones(4); mismatch_line = _line()  # noqa: E702
        with alloc.on_group(other, a):
            reused = torch.ones(4); reuse_line = _line()  # noqa: E702
        alloc.bind_pool(shared, [a, b])
        alloc.bind_pool(other, [b])
        dist.all_reduce(mismatched, group=b); mismatch_at = _line()  # noqa: E702
        dist.all_reduce(reused, group=a); reuse_at = _line()  # noqa: E702
    assert _found(ctx) == [("CGL002", mismatch_line, mismatch_at, "a", "b"), ("CGL005", reuse_line, reuse_at, "b", "a")]


def test_a_pool_listing_its_segments_inside_a_group_context_adds_no_frame(project: Path, groups) -> None:
    """A group context that makes or enters a pool context over a pool that lists its
    segments (SGLang-shaped `on_group`, Megatron-shaped `nccl_mem`): the memory is bound to
    the group at its allocation line, and the pool context, whose frame would say nothing
    more, opens none. Alone, the pool context still binds, for the allocation line."""
    a, b = groups
    from cglkeys import alloc
    from megatron.core.nccl_allocator import nccl_mem

    from commgroup_lint.runtime import _binding

    pool, lone_pool = _SegmentPool(), _SegmentPool()
    with runtime.enforce("report") as ctx:
        with alloc.on_group(pool, a):
            frames = [len(_binding._MODES.mode.frames)]
            inner = torch.ones(4); inner_line = _line()  # noqa: E702
        with nccl_mem(pool, group=a):
            frames.append(len(_binding._MODES.mode.frames))
            megatron = torch.ones(4); megatron_line = _line()  # noqa: E702
        with alloc.use_pool(lone_pool):
            lone = torch.ones(4); lone_line = _line()  # noqa: E702
        pool.memory, lone_pool.memory = [inner, megatron], [lone]
        alloc.bind_pool(pool, [a, b])
        alloc.bind_pool(lone_pool, [a])
        dist.all_reduce(inner, group=b); inner_at = _line()  # noqa: E702
        dist.all_reduce(megatron, group=b); megatron_at = _line()  # noqa: E702
        dist.all_reduce(lone, group=b); lone_at = _line()  # noqa: E702
    assert frames == [1, 1]
    assert _found(ctx) == [("CGL002", inner_line, inner_at, "a", "b"), ("CGL002", megatron_line, megatron_at, "a", "b"),
                           ("CGL002", lone_line, lone_at, "a", "b")]


def test_megatron_pool_context_and_pool_binding(project: Path, groups) -> None:
    """The shipped Megatron-Core entries: `MemPoolAllocatorWithoutRegistration(pool)` (a pool
    context class) and `register_mem_pool(pool, group)` (a pool binding)."""
    a, b = groups
    from megatron.core import nccl_allocator

    pool = object()  # a pool that takes no weak reference
    with runtime.enforce("report") as ctx:
        with nccl_allocator.MemPoolAllocatorWithoutRegistration(pool):
            buf = torch.ones(4); line = _line()  # noqa: E702
        nccl_allocator.register_mem_pool(pool, a)
        dist.all_reduce(buf, group=a)
        dist.all_reduce(buf, group=b); at = _line()  # noqa: E702
    assert _found(ctx) == [("CGL002", line, at, "a", "b")]


def test_register_pool_methods_of_group_classes_and_torch_backends(project: Path, groups, monkeypatch) -> None:
    """`methods.register_pool` (`register_mem_pool`) on a profile group class, and on torch's
    backend classes (here gloo's, given stand-ins of the CUDA-only methods): a pool that lists
    its segments has those registered, and `deregister_mem_pool` forgets them."""
    a, b = groups
    from cglkeys import groups as engine_groups

    calls = []
    monkeypatch.setattr(dist.ProcessGroupGloo, "register_mem_pool", lambda self, pool: calls.append("reg"), raising=False)
    monkeypatch.setattr(dist.ProcessGroupGloo, "deregister_mem_pool", lambda self, pool: calls.append("dereg"),
                        raising=False)
    seg_memory = torch.ones(16)

    class Pool:
        def snapshot(self):
            storage = seg_memory.untyped_storage()
            return [{"device": -1, "address": storage.data_ptr(), "total_size": storage.nbytes()}]

    from cglkeys import alloc

    whole = _Pool()
    with runtime.enforce("report") as ctx:
        with alloc.use_pool(whole):
            pooled = torch.ones(4); pooled_line = _line()  # noqa: E702
        engine_groups.Wrapper(b).register_mem_pool(whole)
        backend = a._get_backend(torch.device("cpu"))
        backend.register_mem_pool(Pool())
        dist.all_reduce(pooled, group=a); pooled_at = _line()  # noqa: E702
        dist.all_reduce(seg_memory, group=b); seg_at = _line()  # noqa: E702
        backend.deregister_mem_pool(Pool())
        dist.all_reduce(seg_memory, group=b)
    assert calls == ["reg", "dereg"]
    assert _found(ctx) == [("CGL002", pooled_line, pooled_at, "b", "a"), ("CGL002", seg_at, seg_at, "a", "b")]


def test_collective_helpers_with_fixed_groups_defaults_and_buffers_are_skipped(project: Path, groups) -> None:
    """Collective entries with `groups`, `default` or `buffers` only make their frames skipped:
    the shim checks the torch collective they run, on the group that really reaches it."""
    a, b = groups
    from cglkeys import groups as engine_groups
    from cglkeys import helpers

    engine_groups.TP = b
    with runtime.enforce("report") as ctx:
        with runtime.simulated_symmetric_memory(a):
            buf = torch.ones(4); line = _line()  # noqa: E702
        helpers.tp_all_reduce(buf); fixed_at = _line()  # noqa: E702
        helpers.all_reduce_or_world(buf); default_at = _line()  # noqa: E702
        helpers.all_reduce_or_world(buf, a)
        helpers.gather(buf, buf); buffers_at = _line()  # noqa: E702
    assert _found(ctx) == [("CGL002", line, fixed_at, "a", "b"), ("CGL002", line, default_at, "a", "world"),
                           ("CGL002", line, buffers_at, "a", "b")]
    assert {"cglkeys.helpers.tp_all_reduce", "cglkeys.helpers.gather"} <= _knowledge.load().helpers
    assert "sglang.srt.layers.dp_attention.dp_gather_partial" in _knowledge.load("sglang").helpers


BLOCKED = textwrap.dedent(
    """\
    import json, os, sys
    from importlib.abc import MetaPathFinder

    BLOCKED = {"libcst", "click", "rich", "pathspec", "pygls"}


    class NotInstalled(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}")


    sys.meta_path.insert(0, NotInstalled())
    import torch
    import torch.distributed as dist
    from commgroup_lint import runtime

    dist.init_process_group("gloo", init_method="file://" + os.path.abspath("store"), rank=0, world_size=1)
    a, b = dist.new_group([0]), dist.new_group([0])
    from cglkeys import alloc

    with runtime.enforce("report") as ctx:
        with alloc.switchable(None, a):
            t = torch.ones(4)
        dist.all_reduce(t, group=b)
    imported = sorted({m.split(".")[0] for m in sys.modules} & BLOCKED)
    print(json.dumps({"codes": [v.code for v in ctx.violations], "imported": imported}))
    dist.destroy_process_group()
    """
)


def test_the_shim_runs_where_only_torch_and_the_package_are_installed(project: Path) -> None:
    """The configuration (rule selection, per-file ignores, excludes, profile keys) is read
    without the linter's own dependencies, as on a GPU machine that installs the package alone."""
    (project / "blocked.py").write_text(BLOCKED)
    out = subprocess.run([sys.executable, "blocked.py"], capture_output=True, text=True, timeout=120, cwd=project,
                         env=clean_env())
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.splitlines()[-1]) == {"codes": ["CGL002"], "imported": []}
