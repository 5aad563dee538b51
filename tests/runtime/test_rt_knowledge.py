"""One profile for both halves: the shim binds and checks through the callables the profile and
the user's configuration name (contexts, context classes, allocators, group classes, helpers),
found as the linter finds its configuration; no engine name in the shim's code."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from commgroup_lint import runtime  # noqa: E402
from commgroup_lint.profile import ProfileError  # noqa: E402
from commgroup_lint.runtime import _knowledge  # noqa: E402
from rt_project import clean_env  # noqa: E402

RUNTIME_DIR = Path(__file__).resolve().parents[2] / "runtime"

CONFIG = textwrap.dedent(
    """\
    [tool.commgroup-lint.extend-profile.contexts."cglproj.alloc.symmetric"]
    param = "group"
    index = 0
    disabled = "disabled"

    [tool.commgroup-lint.extend-profile.contexts."cglproj.alloc.Pool"]
    param = "group"
    index = 3

    [tool.commgroup-lint.extend-profile.contexts."cglproj.alloc.MultiPool"]
    param = "groups"
    index = 1

    [tool.commgroup-lint.extend-profile.allocators."cglproj.alloc.buffer"]
    param = "group"
    index = 1

    [tool.commgroup-lint.extend-profile.allocators."cglproj.alloc.Buffers.local"]
    param = "group"
    index = 0

    [tool.commgroup-lint.extend-profile.runtime]
    helper_modules = ["cglproj.helpers"]

    [tool.commgroup-lint.extend-profile.runtime.group_classes."cglproj.groups.Wrapper"]
    group_attr = "pg"
    """
)

ALLOC = textwrap.dedent(
    """\
    import contextlib

    import torch


    @contextlib.contextmanager
    def symmetric(group, disabled=False):
        yield


    class Pool:
        \"\"\"Shaped like Megatron-Core's nccl_mem(pool, enabled, device, group).\"\"\"

        def __init__(self, pool, enabled=True, device=None, group=None):
            self.group = group

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False


    class MultiPool(Pool):
        \"\"\"Shaped like Megatron-Core's MultiGroupMemPoolAllocator(pool, groups).\"\"\"

        def __init__(self, pool, groups):
            self.groups = groups


    def buffer(n, group):
        return torch.empty(n)


    class Buffers:
        @classmethod
        def local(cls, group, n):
            return torch.empty(n)
    """
)

GROUPS = textwrap.dedent(
    """\
    import torch.distributed as dist


    class Wrapper:
        def __init__(self, pg):
            self.pg = pg

        def all_reduce(self, t):
            dist.all_reduce(t, group=self.pg)
            return t
    """
)

# The user's code imports the project's API by name, at module level.
USER = textwrap.dedent(
    """\
    from cglproj.alloc import Buffers, MultiPool, Pool, buffer, symmetric
    from cglproj.groups import Wrapper
    """
)

HELPERS = textwrap.dedent(
    """\
    import torch

    from cglproj.alloc import symmetric


    def make(group):
        with symmetric(group):
            return torch.ones(4)
    """
)


# A helper module declared by its own flag, not by the profile.
FLAGGED = HELPERS.replace("import torch\n", "import torch\n\n__commgroup_lint_helper__ = True\n", 1)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The user's package and configuration, the working directory at its root."""
    package = tmp_path / "cglproj"
    package.mkdir()
    sources = {"__init__": "", "alloc": ALLOC, "groups": GROUPS, "user": USER, "helpers": HELPERS, "flagged": FLAGGED}
    for name, text in sources.items():
        (package / f"{name}.py").write_text(text)
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(_knowledge.PROFILE_ENV_VAR, raising=False)
    runtime.clear_violations()
    yield tmp_path
    for name in [m for m in sys.modules if m == "cglproj" or m.startswith("cglproj.")]:
        del sys.modules[name]


def _line() -> int:
    return sys._getframe(1).f_lineno


def _found(ctx):
    return [(v.code, v.line, v.collective, v.buffer_group, v.collective_group) for v in ctx.violations]


def test_contexts_imported_before_the_shim_bind_at_the_allocation_line(project, groups) -> None:
    a, b = groups
    import cglproj.alloc
    from cglproj import user  # imports the context by name before the shim: re-bound when it installs

    original, symmetric, Pool = cglproj.alloc.symmetric, user.symmetric, user.Pool
    with runtime.enforce("report") as ctx:
        symmetric = user.symmetric
        with symmetric(a):
            fresh = torch.ones(4); line = _line()  # noqa: E702
        dist.all_reduce(fresh, group=a)
        dist.all_reduce(fresh, group=b); wrong = _line()  # noqa: E702
        assert [(v.line, v.collective_line) for v in ctx.violations] == [(line, wrong)]  # live in the block
        with symmetric(a, disabled=True):
            unbound = torch.ones(4)
        dist.all_reduce(unbound, group=b)
        with Pool(None, True, None, a):
            pooled = torch.ones(8); pool_line = _line()  # noqa: E702
        with Pool(None, group=None):  # no group: the default (world) group
            world = torch.ones(8); world_line = _line()  # noqa: E702
        dist.all_reduce(pooled, group=b)
        dist.all_reduce(world, group=b)
    assert [(code, at) for code, at, *_ in _found(ctx)] == [("CGL002", line), ("CGL002", pool_line), ("CGL002", world_line)]
    assert ctx.violations[2].buffer_group == "world"
    assert cglproj.alloc.symmetric is original and user.symmetric is original  # restored, aliases too
    assert "__enter__" in vars(Pool) and Pool.__enter__.__qualname__ == "Pool.__enter__"


def test_a_context_over_several_groups_binds_to_each_of_them(project, groups) -> None:
    a, b = groups
    c = runtime.name_group(dist.new_group([0], group_desc="group_c"), "c")
    from cglproj import user

    modes = torch._C._len_torch_function_stack()
    with runtime.enforce("report") as ctx:
        with user.MultiPool(None, [a, b]):  # a subclass of a context class: bound once
            buf = torch.ones(4); line = _line()  # noqa: E702
        assert torch._C._len_torch_function_stack() == modes
        dist.all_reduce(buf, group=a)
        dist.all_reduce(buf, group=b)
        dist.all_reduce(buf, group=c)
    assert [(code, at, coll_group) for code, at, _, _, coll_group in _found(ctx)] == [("CGL002", line, "c")]


@pytest.mark.parametrize("module", ["cglproj.helpers", "cglproj.flagged"])
def test_a_module_imported_while_the_shim_is_on_is_hooked_at_import(project, groups, module) -> None:
    a, b = groups
    with runtime.enforce("report") as ctx:
        make = importlib.import_module(module).make  # a helper (profile, or its own flag): the caller's line
        buf = make(a); line = _line()  # noqa: E702
        dist.all_reduce(buf, group=b)
    assert [(code, at) for code, at, *_ in _found(ctx)] == [("CGL002", line)]


def test_allocators_bind_what_they_return_at_the_callers_line(project, groups) -> None:
    a, b = groups
    from cglproj import user

    with runtime.enforce("report") as ctx:
        first = user.buffer(4, a); line = _line()  # noqa: E702
        second = user.Buffers.local(a, 8); cls_line = _line()  # noqa: E702
        dist.all_reduce(first, group=b)
        dist.all_reduce(second, group=b)
        dist.all_reduce(second, group=a)
    assert [(code, at) for code, at, *_ in _found(ctx)] == [("CGL002", line), ("CGL002", cls_line)]


def test_group_classes_are_checked_at_their_methods_once(project, groups) -> None:
    a, b = groups
    from cglproj import user

    with runtime.enforce("report") as ctx:
        with user.symmetric(a):
            buf = torch.ones(4)
        user.Wrapper(b).all_reduce(buf); line = _line()  # noqa: E702
    [violation] = ctx.violations
    assert (violation.collective, violation.collective_line, violation.collective_group) == ("all_reduce", line, "b")


def test_profile_selection(project, monkeypatch: pytest.MonkeyPatch) -> None:
    everything = _knowledge.load()
    assert "cglproj.alloc.symmetric" in everything.contexts  # the configuration extends any selection
    assert "sglang.srt.distributed.parallel_state.GroupCoordinator" in everything.group_classes
    assert _knowledge.requested_profiles("sglang, other") == ("sglang", "other")
    monkeypatch.setenv(_knowledge.PROFILE_ENV_VAR, "sglang")
    assert _knowledge.requested_profiles() == ("sglang",)
    with pytest.raises(ProfileError, match="unknown profile 'nope'"):
        _knowledge.load("nope")
    with pytest.raises(ProfileError, match="unknown profile 'nope'"):
        runtime.enforce("report", profile=["nope"]).__enter__()


def test_reading_profiles_and_configuration_needs_no_libcst_click_rich_or_pathspec(project) -> None:
    code = ("import sys; from commgroup_lint.runtime import _knowledge; k = _knowledge.load(); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'libcst', 'click', 'rich', 'pathspec', 'torch'}), "
            "'cglproj.alloc.symmetric' in k.contexts)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=project,
                         env=clean_env())
    assert out.stdout.strip() == "[] True", out.stderr


def test_the_shim_names_no_engine() -> None:
    engines = re.compile(r"sglang|vllm|megatron|torchtitan", re.IGNORECASE)
    hits = [f"{p.name}:{i}" for p in sorted(RUNTIME_DIR.glob("*.py"))
            for i, text in enumerate(p.read_text().splitlines(), 1) if engines.search(text)]
    assert hits == []
