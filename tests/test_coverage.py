"""`commgroup-lint coverage`: what the analysis understood, counted, and what it did not, by kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import run

MODEL = '''\
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from vllm.distributed.device_communicators.pynccl_allocator import nccl_symm_mem_context
from vllm.distributed.parallel_state import get_ep_group, get_tp_group


def known(x):
    with nccl_symm_mem_context(get_tp_group().device_communicator.pynccl_comm):
        out = torch.empty_like(x)
    return get_tp_group().all_reduce(out)


def parameter(x, comm):
    with nccl_symm_mem_context(comm):
        out = torch.empty_like(x)
    return get_ep_group().all_reduce(out)


class Holder:
    def step(self, n):
        buf = symm_mem.empty(n, device="cuda")
        symm_mem.rendezvous(buf, self.group)
        dist.all_reduce(buf, group=self.other)
'''


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "plain.py").write_text("x = 1\n")
    return tmp_path


def test_json_counts_what_was_resolved_and_what_was_not(tree: Path) -> None:
    proc = run("coverage", "--format", "json", cwd=tree)
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == {
        "files": 2, "binding_sites": 3, "consumers": 3, "consumers_resolved": 2,
        "groups_resolved": 3, "groups_unknown": 3, "memory_lost": 0,
        "unknown": {"parameter": {"count": 1, "example": "./model.py:15"},
                    "self": {"count": 2, "example": "./model.py:23"}},
        "understood_nothing": None,
    }


def test_text_names_each_kind_with_an_example_and_per_file_with_v(tree: Path) -> None:
    summary = ("2 files: 3 binding sites, 2 of 3 consumers on known groups, 3 group references resolved, "
               "3 left unknown\n"
               "  2 unknown: an attribute of `self` no method stores a known group in (e.g. ./model.py:23)\n"
               "  1 unknown: a parameter no caller passes a known group to (e.g. ./model.py:15)\n")
    assert run("coverage", cwd=tree).stdout == summary
    verbose = run("coverage", "-v", cwd=tree)
    assert verbose.stdout == summary + (
        "./model.py: 3 binding sites, 2 of 3 consumers on known groups, 3 unknown\n"
        "    2 unknown: an attribute of `self` no method stores a known group in (e.g. ./model.py:23)\n"
        "    1 unknown: a parameter no caller passes a known group to (e.g. ./model.py:15)\n")
    per_file = json.loads(run("coverage", "-v", "--format", "json", cwd=tree).stdout)["per_file"]
    assert sorted(per_file) == ["./model.py", "./plain.py"]
    assert per_file["./plain.py"]["binding_sites"] == 0


LOST = '''\
import collections

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
FIELDS = ["value"]  # fields named elsewhere: the record's class is not one the model reads
Entry = collections.namedtuple("Entry", FIELDS)


def step(n, group):
    buf = symm_mem.empty(n, device="cuda")
    symm_mem.rendezvous(buf, group)
    plain = torch.empty(n)
    dist.all_reduce(plain, group=group)
    dist.all_reduce(Entry(buf).value, group=group)
'''


def test_memory_lost_on_the_way_to_a_collective_is_counted_by_construct(tmp_path: Path) -> None:
    """The buffer passes through a construct the model does not follow: not an "All clear"; the
    library's own tensor (`torch.empty`) handed to a collective is plain memory, not a loss."""
    (tmp_path / "lost.py").write_text(LOST)
    document = json.loads(run("coverage", "--format", "json", cwd=tmp_path).stdout)
    assert document["memory_lost"] == 1
    assert document["unknown"]["memory lost: attribute"] == {"count": 1, "example": "./lost.py:15"}
    check = run("check", "--no-cache", cwd=tmp_path)
    assert check.stdout.splitlines()[-1] == ("1 group reference left unknown and 1 collective given a buffer or group "
                                             "the analysis lost: `commgroup-lint coverage` names the constructs.")


def test_a_caller_that_passes_a_known_group_resolves_the_parameter(tree: Path) -> None:
    (tree / "caller.py").write_text("from model import parameter\nfrom vllm.distributed.parallel_state import "
                                    "get_tp_group\n\n\ndef go(x):\n    return parameter(x, get_tp_group().device_communicator."
                                    "pynccl_comm)\n")
    document = json.loads(run("coverage", "--format", "json", cwd=tree).stdout)
    assert (document["groups_resolved"], document["groups_unknown"]) == (4, 2)
    assert document["unknown"] == {"self": {"count": 2, "example": "./model.py:23"}}


def test_a_run_that_understood_nothing_says_why(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text("x = 1\n")
    proc = run("coverage", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[-1].startswith(
        "Nothing was understood: no checked file calls a group-bound API of the profiles (")
    document = json.loads(run("coverage", "--format", "json", cwd=tmp_path).stdout)
    assert document["binding_sites"] == 0
    assert document["understood_nothing"].startswith("no checked file calls a group-bound API")


def test_a_path_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    proc = run("coverage", "missing.py", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (
        2, "error: path 'missing.py' does not exist; check the spelling or the current directory\n")


HINT = "group references left unknown: `commgroup-lint coverage` names the constructs.\n"


def test_check_ends_its_summary_pointing_at_coverage_with_the_count_coverage_reports(tree: Path) -> None:
    cold = run("check", "--no-cache", cwd=tree)
    assert cold.stdout.endswith("\n3 " + HINT)
    (tree / "caller.py").write_text("from model import parameter\nfrom vllm.distributed.parallel_state import "
                                    "get_tp_group\n\n\ndef go(x):\n    return parameter(x, get_tp_group().device_communicator."
                                    "pynccl_comm)\n")
    assert run("check", "--no-cache", cwd=tree).stdout.endswith("\n2 " + HINT)  # the parameter resolved by a caller
    first, warm = run("check", cwd=tree), run("check", cwd=tree)  # the second from the cache: the same count
    assert first.stdout.endswith("\n2 " + HINT) and warm.stdout == first.stdout


def test_check_says_nothing_of_coverage_when_nothing_was_left_unknown(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL.partition("\n\ndef parameter")[0] + "\n")
    assert run("check", "--no-cache", cwd=tmp_path).stdout == "All clear: no findings (1 file checked).\n"
