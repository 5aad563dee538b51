"""A value that may hold one of several callables (`self._gather = pick(mode)`), called later.

Each callable is followed under the literal that it is the one held; the analysis cannot say
when the choice goes which way, so a mismatch that needs one is `low` confidence and says
which callable it needs. What two callables of one value do is never combined.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from commgroup_lint.model import Confidence
from lintkit import FIXTURES, lint_paths, lint_text

CHOSEN = FIXTURES / "static" / "callable_chosen_elsewhere.py"

_HELPERS = '''\
import torch

from sglang.srt.distributed import get_moe_ep_group, get_tp_group
from sglang.srt.distributed.device_communicators.pynccl_allocator import use_symmetric_memory


def to_tp(x):
    with use_symmetric_memory(get_tp_group()):
        return torch.empty_like(x)


def to_moe_ep(x):
    with use_symmetric_memory(get_moe_ep_group()):
        return torch.empty_like(x)


def to_moe_ep_big(x):
    with use_symmetric_memory(get_moe_ep_group()):
        return torch.empty((2 * x.shape[0], x.shape[1]))
'''


def _conditions(findings) -> list[tuple[int, str, str | None, str]]:
    return [(f.start.line, f.code, f.condition, f.confidence.value) for f in findings if f.code == "CGL002"]


def test_each_callable_is_followed_under_its_own_condition() -> None:
    found = _conditions(lint_paths(CHOSEN, min_confidence=Confidence.LOW))
    assert found == [
        (58, "CGL002", "attn_tp_size != tp_size and self._gather is _to_attn_tp", "low"),
        (64, "CGL002", "self._buffer is _to_moe_ep", "low"),
        (70, "CGL002", "attn_tp_size != tp_size", "high"),
    ]


def test_a_finding_that_needs_a_choice_is_not_reported_by_default() -> None:
    assert [(f.start.line, f.code) for f in lint_paths(CHOSEN)] == [(29, "CGL003"), (70, "CGL002")]


def test_two_callables_of_one_value_are_never_combined(tmp_path: Path) -> None:
    """One callable binds the buffer, the other consumes it on another group: no path does both."""
    text = _HELPERS + '''

def consume_on_tp(x):
    get_tp_group().all_reduce(x)
    return x


def run(x, flag):
    fn = to_moe_ep if flag else consume_on_tp
    buf = fn(x)
    fn(buf)
'''
    assert _conditions(lint_text(tmp_path, text, min_confidence=Confidence.LOW)) == []


def test_a_choice_made_in_a_helper_module_keeps_its_condition(tmp_path: Path) -> None:
    """A helper of another module returns what its object's chosen callable made: the caller's
    finding names the choice in the helper's terms (its receiver, `Layer(True)`)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "helpers.py").write_text(_HELPERS + '''

class Layer:
    def __init__(self, moe):
        self.make = to_moe_ep if moe else to_tp

    def buffer(self, x):
        return self.make(x)


def moe_buffer(x):
    return Layer(True).buffer(x)
''', encoding="utf-8")
    (package / "model.py").write_text('''\
from sglang.srt.distributed import get_tp_group

from pkg.helpers import moe_buffer


def forward(x):
    buf = moe_buffer(x)
    get_tp_group().all_reduce(buf)
    return buf
''', encoding="utf-8")
    found = [(Path(f.path).name, *_conditions([f])[0]) for f in lint_paths(package, min_confidence=Confidence.LOW)
             if f.code == "CGL002"]
    assert found == [("model.py", 7, "CGL002", "Layer(True).make is to_moe_ep", "low")]


def test_callables_that_do_the_same_need_no_choice(tmp_path: Path) -> None:
    """Either callable binds to MoE EP: the mismatch holds whichever is held, so it is reported by
    default, with no condition."""
    text = _HELPERS + '''

def run(x, big):
    fn = to_moe_ep_big if big else to_moe_ep
    buf = fn(x)
    get_tp_group().all_reduce(buf)
'''
    assert _conditions(lint_text(tmp_path, text)) == [(24, "CGL002", None, "high")]


def test_a_name_bound_again_holds_a_new_choice(tmp_path: Path) -> None:
    """`fn` is bound again between the calls: the first call's choice does not rule out the
    second's, so the MoE EP buffer reaching the TP all-reduce is found."""
    text = _HELPERS + '''

def reduce_tp(x):
    get_tp_group().all_reduce(x)


def reduce_tp_twice(x):
    get_tp_group().all_reduce(x)
    get_tp_group().all_reduce(x)


def run(x, moe, twice):
    fn = to_moe_ep if moe else to_tp
    buf = fn(x)
    fn = reduce_tp_twice if twice else reduce_tp
    fn(buf)
'''
    found = _conditions(lint_text(tmp_path, text, min_confidence=Confidence.LOW))
    assert [(line, code, conf) for line, code, _, conf in found] == [(33, "CGL002", "low")]
    assert found[0][2] == "fn is to_moe_ep"  # the two reducers do the same: no choice to name


def test_the_findings_do_not_depend_on_the_hash_seed() -> None:
    """Which of several callables a finding names, and CGL003's callers, are the same in every
    run (the callables are not taken in a set's order)."""
    outputs = set()
    for seed in ("1", "2", "3", "4"):
        out = subprocess.run(
            [sys.executable, "-m", "commgroup_lint", "check", "--no-cache", "--min-confidence", "low",
             "--format", "json", CHOSEN.name],
            cwd=CHOSEN.parent, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert out.returncode == 1, out.stderr
        outputs.add(json.dumps(json.loads(out.stdout), sort_keys=True))
    assert len(outputs) == 1
