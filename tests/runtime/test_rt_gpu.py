"""The same checks on GPUs: NCCL, real symmetric memory (torch symmetric memory and the NCCL
mem-pool registration). Marked ``gpu``; skipped without two CUDA devices."""

from __future__ import annotations

import os

import pytest

from rt_launch import launch
from rt_seeded import expected_runtime

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


@pytest.fixture(scope="module")
def cuda_smoke(tmp_path_factory):
    return launch("smoke", 2, tmp_path_factory.mktemp("gpu-smoke"), device="cuda", attn_dp=2, timeout=300)


@pytest.mark.parametrize("variant", ["correct", "missing_group", "wrong_group", "pool_reuse"])
def test_nccl_smoke_variant(cuda_smoke, variant):
    for rank, result in enumerate(cuda_smoke):
        found = {(os.path.realpath(v["path"]), v["line"], v["code"]) for v in result["variants"][variant]["violations"]}
        assert found == expected_runtime(variant, 2), f"rank {rank}: {result['variants'][variant]['violations']}"


def test_nccl_outputs_bitwise_equal_and_torch_restored(cuda_smoke):
    for result in cuda_smoke:
        assert all(v["equal"] for v in result["variants"].values())
        assert all(result["restored"].values()) and result["after_all_restored"]
        assert result["assert"]["code"] == "CGL002"


def test_torch_symmetric_memory_and_nccl_mem_pool(tmp_path):
    results = launch("symm", 2, tmp_path, device="cuda", timeout=300)
    for result in results:
        assert "symm_error" not in result, result["symm_error"]
        assert "pool_error" not in result, result["pool_error"]
        codes = [(v["code"], v["buffer_group"], v["collective_group"]) for v in result["violations"]]
        assert codes == [("CGL002", "tp", "moe_ep"), ("CGL002", "tp", "moe_ep")], result["violations"]


def test_collective_names_on_this_torch(tmp_path):
    results = launch("probe", 2, tmp_path, device="cuda", timeout=120)
    from commgroup_lint.runtime import _shim

    for result in results:
        assert result["seen"], result
        assert all(s["name"] in _shim.COLLECTIVE_NAMES for s in result["seen"]), result
