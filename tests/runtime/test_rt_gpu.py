"""The same checks on GPUs: NCCL, real symmetric memory (torch symmetric memory, NCCL mem pools
registered with ``register_mem_pool``, Megatron-Core's own allocator), compiled and captured
code, and the start-up hook in spawned ranks. Marked ``gpu``; skipped without two CUDA devices
(``scripts/gpu_check.sh`` runs them on the device machine)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from rt_launch import launch
from rt_project import MEGATRON_MAIN, line_of, make_megatron_project, make_project, run_ranks
from rt_seeded import expected_runtime
from rt_startup import startup_hook_installed

from smoke_model import VARIANTS

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
needs_hook = pytest.mark.skipif(not startup_hook_installed(), reason="the package is not installed with its start-up hook")


@pytest.fixture(scope="module")
def cuda_smoke(tmp_path_factory):
    return launch("smoke", 2, tmp_path_factory.mktemp("gpu-smoke"), device="cuda", attn_dp=2, timeout=300)


@pytest.mark.parametrize("variant", VARIANTS)
def test_nccl_smoke_variant(cuda_smoke, variant):
    for rank, result in enumerate(cuda_smoke):
        found = {(os.path.realpath(v["path"]), v["line"], v["code"]) for v in result["variants"][variant]["violations"]}
        assert found == expected_runtime(variant, 2), f"rank {rank}: {result['variants'][variant]['violations']}"


def test_nccl_outputs_bitwise_equal_and_torch_restored(cuda_smoke):
    for result in cuda_smoke:
        assert all(v["equal"] for v in result["variants"].values())
        assert all(result["restored"].values()) and result["after_all_restored"]
        assert result["assert"]["code"] == "CGL002"


@pytest.fixture(scope="module")
def symm(tmp_path_factory):
    return launch("symm", 2, tmp_path_factory.mktemp("gpu-symm"), device="cuda", timeout=300)


def test_torch_symmetric_memory_and_nccl_mem_pool(symm):
    for result in symm:
        assert "symm_error" not in result, result["symm_error"]
        assert "pool_error" not in result, result["pool_error"]
        found = [(v["code"], v["collective"], v["buffer_group"], v["collective_group"]) for v in result["violations"]
                 if v["collective"] == "all_reduce"]  # rendezvous'd memory, then the pool's
        assert found == [("CGL002", "all_reduce", "tp", "moe_ep")] * 2, result["violations"]


def test_symmetric_memory_op_on_another_group(symm):
    for result in symm:  # result.get("symm_op_raised"): what the op made of it, for the record
        found = [(v["code"], v["collective"], v["collective_group"]) for v in result["violations"]
                 if v["collective"] != "all_reduce"]
        assert found == [("CGL002", "one_shot_all_reduce", "moe_ep")], result


def test_compiled_and_captured_collectives(tmp_path):
    for result in launch("captured", 2, tmp_path, device="cuda", timeout=400):
        assert [(v["code"], v["line"], v["collective"], v["collective_group"]) for v in result["compiled"]] == [
            ("CGL002", result["compiled_line"], "all_reduce", "other")]
        assert result["compiled_equal"]
        assert result["captured"] == 1  # checked when captured ...
        assert [(v["code"], v["line"]) for v in result["graph"]] == [("CGL002", result["graph_line"])]  # ... not replayed
        assert result["graph_value"] == 4.0


def test_collective_names_on_this_torch(tmp_path):
    from commgroup_lint.runtime import _collectives

    for result in launch("probe", 2, tmp_path, device="cuda", timeout=120):
        assert result["seen"], result
        assert all(s["name"] in _collectives.COLLECTIVE_NAMES for s in result["seen"]), result


def _records(log: Path) -> list[tuple]:
    return sorted((r["code"], r["line"], r["collective_line"], r["rank"]) for r in map(json.loads, log.read_text().splitlines()))


@needs_hook
def test_spawned_nccl_ranks_of_a_script_that_never_imports_the_shim(tmp_path):
    project = make_project(tmp_path / "userproject")
    out = run_ranks(project, project / "runtime.jsonl", "cuda")
    assert out.returncode == 0, out.stderr[-3000:]
    assert _records(project / "runtime.jsonl") == [
        ("CGL002", line_of("ALLOCATION"), line_of("WRONG GROUP"), rank) for rank in (0, 1)]


@needs_hook
@pytest.mark.skipif(importlib.util.find_spec("megatron") is None, reason="needs the megatron-core package")
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="Megatron-Core builds its NCCL allocator with nvcc")
def test_megatron_nccl_mem_is_reported_at_the_line_that_allocated_under_it(tmp_path):
    project = make_megatron_project(tmp_path / "megatron_user")
    out = run_ranks(project, project / "runtime.jsonl")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert out.stdout.count("sum 4.0") == 2  # the right all-reduce, then the wrong one: outputs unchanged
    allocation = line_of("ALLOCATION", MEGATRON_MAIN)
    assert _records(project / "runtime.jsonl") == [
        ("CGL002", allocation, line_of("WRONG GROUP", MEGATRON_MAIN), rank) for rank in (0, 1)]
    print(open(project / "runtime.jsonl").read())  # the closing note quotes it
