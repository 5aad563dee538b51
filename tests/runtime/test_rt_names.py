"""Groups named as the user names them: the profile's group whose getter returned the group
object (``tp``), else the variable or attribute the code holds it in (``ep``,
``self.ep_group``), else its description, else its ordinal; ``name_group`` first of all."""

from __future__ import annotations

import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from commgroup_lint import runtime  # noqa: E402

ENGINE = textwrap.dedent(
    """\
    import torch.distributed as dist

    _GROUPS = {}


    def get_expert_group():
        return _GROUPS["expert"]
    """
)
CONFIG = '[extend-profile.getters]\n"cgl_names_engine.get_expert_group" = ["moe_ep"]\n'


@pytest.fixture
def fresh(groups):
    """Two new groups over the world's one rank, with no name of any kind yet."""
    runtime.clear_violations()
    yield dist.new_group([0]), dist.new_group([0])
    runtime.clear_violations()


def _names(ctx) -> list[tuple[str, str]]:
    return [(v.buffer_group, v.collective_group) for v in ctx.violations]


def test_local_variables(fresh):
    tp, ep = fresh
    with runtime.enforce("report") as ctx:
        with runtime.simulated_symmetric_memory(tp):
            buf = torch.ones(4)
        dist.all_reduce(buf, group=ep)
    assert _names(ctx) == [("tp", "ep")]
    assert ctx.violations[0].message.startswith("CGL002 buffer bound to group 'tp' (allocated at ")


class _Layer:
    def __init__(self, tp_group, ep_group):
        self.tp_group, self.ep_group = tp_group, ep_group

    def forward(self, group):  # `group` is a parameter: an alias of the caller's name
        with runtime.simulated_symmetric_memory(self.tp_group):
            buf = torch.ones(4)
        dist.all_reduce(buf, group=group)


def test_attributes_before_parameters(fresh):
    layer = _Layer(*fresh)
    with runtime.enforce("report") as ctx:
        layer.forward(layer.ep_group)
    assert _names(ctx) == [("self.tp_group", "self.ep_group")]


def _reduce(buf, group):
    dist.all_reduce(buf, group=group)


def test_a_parameter_takes_the_callers_variable_name(fresh):
    first, second = fresh
    with runtime.enforce("report") as ctx:
        with runtime.simulated_symmetric_memory(first):
            buf = torch.ones(4)
        _reduce(buf, second)
    assert _names(ctx) == [("first", "second")]


def test_the_getter_that_returned_a_group_names_it(fresh, tmp_path, monkeypatch):
    (tmp_path / "cgl_names_engine.py").write_text(ENGINE)
    (tmp_path / "commgroup-lint.toml").write_text(CONFIG)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "cgl_names_engine", raising=False)
    import cgl_names_engine

    expert, other = fresh
    cgl_names_engine._GROUPS["expert"] = expert
    with runtime.enforce("report") as ctx:
        held = cgl_names_engine.get_expert_group()  # the getter's group beats the variable's name
        with runtime.simulated_symmetric_memory(held):
            buf = torch.ones(4)
        dist.all_reduce(buf, group=other)
    assert _names(ctx) == [("moe_ep", "other")]


def test_description_then_ordinal_when_the_code_holds_no_name(groups):
    runtime.clear_violations()
    described = dist.new_group([0], group_desc="experts")
    with runtime.enforce("report") as ctx:
        with runtime.simulated_symmetric_memory(described):
            buf = torch.ones(4)
        del described  # held by no variable now
        dist.all_reduce(buf, group=dist.new_group([0]))
    [v] = ctx.violations
    assert v.buffer_group == "experts"
    assert v.collective_group.isdigit()  # torch's group name: its ordinal
    runtime.clear_violations()


def test_name_group_comes_first(fresh):
    tp, ep = fresh
    runtime.name_group(ep, "experts")
    with runtime.enforce("report") as ctx:
        with runtime.simulated_symmetric_memory(tp):
            buf = torch.ones(4)
        dist.all_reduce(buf, group=ep)
    assert _names(ctx) == [("tp", "experts")]


def test_looking_for_names_keeps_no_local_alive(fresh):
    """Before Python 3.13, reading a frame's locals stores a copy in the frame: a buffer the code
    deleted after a violation stayed alive (and its memory was never handed out again)."""
    import gc
    import weakref

    tp, ep = fresh
    with runtime.enforce("report") as ctx:
        with runtime.simulated_symmetric_memory(tp):
            buf = torch.ones(4)
        dist.all_reduce(buf, group=ep)
        storage = weakref.ref(buf.untyped_storage())
        del buf
        gc.collect()
    assert _names(ctx) == [("tp", "ep")]
    assert storage() is None


class _Proxy:
    """An object whose attributes fail, as a lazy proxy's can."""

    @property
    def __dict__(self):  # noqa: PLW3201
        raise RuntimeError("not materialised")

    @property
    def __class__(self):
        raise RuntimeError("not materialised")


def test_a_local_whose_attributes_fail_is_no_group(fresh):
    tp, ep = fresh
    proxy = _Proxy()  # noqa: F841  (in the frame the names are looked for in)
    with runtime.enforce("report") as ctx:
        with runtime.simulated_symmetric_memory(tp):
            buf = torch.ones(4)
        dist.all_reduce(buf, group=ep)
    assert _names(ctx) == [("tp", "ep")]
