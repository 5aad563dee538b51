"""A test of a helper given arguments is a literal about those arguments (issue 28): the
condition keeps `overlap_enabled(batch)` whether the source tests the call or a flag bound
from it, and a caller reads it with its own argument in the parameter's place (it was
dropped, so a finding's condition was weaker than its path)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint.analysis.conditions import ARG, END, PARAM, Substitution, display_operand, key_operands, kind
from commgroup_lint.cli import main

MODES = """\
    def overlap_enabled(batch):
        return batch.overlap
    """
TORCH = """\
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    from pkg.modes import overlap_enabled


    def combine(buf, batch, group):
        if overlap_enabled(batch):
            dist.all_reduce(buf, group=group)


    class Mover:
        def __init__(self, n, ranks, batch):
            self.first = dist.new_group(ranks)
            self.second = dist.new_group(ranks)
            use_overlap = overlap_enabled(batch)
            buf = symm_mem.empty(n, device="cuda")
            symm_mem.rendezvous(buf, self.first)
            if use_overlap:
                dist.all_reduce(buf, group=self.second)

        def forward(self, n, step):
            buf = symm_mem.empty(n, device="cuda")
            symm_mem.rendezvous(buf, self.first)
            combine(buf, step, self.second)
    """
# a flag a constructor reads from a helper given its batch, unless the caller passes one
TRANSPORT = """\
    from sglang.srt.distributed import get_tp_group
    from sglang.srt.layers.dp_attention import attn_cp_all_gather_into_tensor, get_local_dp_buffer

    from pkg.modes import overlap_enabled


    class Transport:
        def __init__(self, x, batch, *, use_cp=None):
            _use_cp = overlap_enabled(batch) if use_cp is None else use_cp
            if _use_cp:
                attn_cp_all_gather_into_tensor(x, x)


    def forward(x, forward_batch):
        buf = get_local_dp_buffer(get_tp_group())
        Transport(buf, forward_batch)
    """

# a flag the constructor stores from a helper, tested later through `self` and through the instance
STORED = """\
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    from pkg.modes import overlap_enabled


    class Combiner:
        def __init__(self, batch):
            self.use_overlap = overlap_enabled(batch)

        def combine(self, buf, group):
            use_overlap = self.use_overlap
            if use_overlap:
                dist.all_reduce(buf, group=group)


    def step(n, ranks, step_batch):
        first, second = dist.new_group(ranks), dist.new_group(ranks)
        c = Combiner(step_batch)
        buf = symm_mem.empty(n, device="cuda")
        symm_mem.rendezvous(buf, first)
        if c.use_overlap:
            dist.all_reduce(buf, group=second)

    def step2(n, ranks, step_batch):
        first, second = dist.new_group(ranks), dist.new_group(ranks)
        c = Combiner(step_batch)
        buf = symm_mem.empty(n, device="cuda")
        symm_mem.rendezvous(buf, first)
        c.combine(buf, second)
    """


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pkg").mkdir()
    for name, text in (("__init__", ""), ("modes", MODES), ("torch_style", TORCH), ("transport", TRANSPORT),
                       ("stored", STORED)):
        (tmp_path / "pkg" / f"{name}.py").write_text(textwrap.dedent(text), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def findings(path: str) -> list[tuple[int, str, str]]:
    result = CliRunner().invoke(main, ["check", "--no-cache", "--select", "CGL002", "--format", "json", path])
    assert result.exit_code == 1, result.output
    return [(f["line"], f["message"], f["condition"]) for f in json.loads(result.stdout)]


def test_a_helper_given_arguments_stays_in_the_condition(project: Path) -> None:
    assert findings("pkg/torch_style.py") == [
        (18, "memory registered by `rendezvous` is registered with group `self.first` but reaches `all_reduce` on"
             " group `self.second` at line 20, when overlap_enabled(batch) and use_overlap (no fix: no getter is"
             " known for group `self.second`)", "overlap_enabled(batch) and use_overlap"),
        # the callee tests its parameter `batch`: the caller passed `step`
        (24, "memory registered by `rendezvous` is registered with group `self.first` but reaches `combine` at"
             " line 25, whose `all_reduce` runs on group `self.second`, when overlap_enabled(step) (no fix: no"
             " getter is known for group `self.second`)", "overlap_enabled(step)"),
    ]


def test_a_constructor_flag_read_from_a_helper_reaches_the_caller(project: Path) -> None:
    assert findings("pkg/transport.py") == [
        (15, "memory from `get_local_dp_buffer` is bound to group tp but reaches `Transport` at line 16, whose"
             " `attn_cp_all_gather_into_tensor` runs on group attn_cp, when overlap_enabled(forward_batch)",
             "overlap_enabled(forward_batch)"),
    ]


def test_a_flag_stored_from_a_helper_means_the_helper_where_it_is_tested(project: Path) -> None:
    tail = ", when c.use_overlap and overlap_enabled(step_batch) (no fix: no getter is known for group `second`)"
    assert findings("pkg/stored.py") == [
        (21, "memory registered by `rendezvous` is registered with group `first` but reaches `all_reduce` on group"
             f" `second` at line 23{tail}", "c.use_overlap and overlap_enabled(step_batch)"),
        # tested through `self` in the method, through a local copy of the attribute
        (29, "memory registered by `rendezvous` is registered with group `first` but reaches `combine` at line 30,"
             f" whose `all_reduce` runs on group `second`{tail}", "c.use_overlap and overlap_enabled(step_batch)"),
    ]


def test_argument_operands_are_translated_scoped_and_shown() -> None:
    call = f"@pkg.modes.overlap_enabled({ARG}{PARAM}1:batch{END}, 2)"
    assert display_operand(call) == "overlap_enabled(batch, 2)"
    assert key_operands(call) == (call, f"{PARAM}1:batch")
    assert kind(call) == "data"  # it reads data given to the function, as `batch.overlap` does
    sub = Substitution({1: "~step"}, {}, {}, None)
    assert sub.apply({(call, True)}) == (frozenset({(f"@pkg.modes.overlap_enabled({ARG}~step{END}, 2)", True)}),
                                         False, False)
    # an argument the call site cannot name: the literal is lost, not kept with a stale argument
    assert Substitution({1: None}, {}, {}, None).apply({(call, True)}) == (frozenset(), True, False)
