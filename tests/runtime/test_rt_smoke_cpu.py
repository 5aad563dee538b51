"""The DP-attention smoke model on 2 and 4 gloo processes: seeded bugs caught at their lines."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("torch")

from rt_launch import launch  # noqa: E402
from rt_seeded import MODEL, expected_runtime, seeded  # noqa: E402
from smoke_model import VARIANTS  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=[2, 4], ids=["world2", "world4"])
def smoke(request, tmp_path_factory):
    world = request.param
    return world, launch("smoke", world, tmp_path_factory.mktemp(f"smoke{world}"), attn_dp=2)


def _found(result, variant):
    return {(os.path.realpath(v["path"]), v["line"], v["code"]) for v in result["variants"][variant]["violations"]}


def test_every_variant_has_a_seeded_marker():
    for variant in VARIANTS[1:]:
        assert seeded(variant), variant
    assert not seeded("correct")


@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_reports_exactly_its_seeded_bugs(smoke, variant):
    world, results = smoke
    expected = expected_runtime(variant, world)
    for rank, result in enumerate(results):
        assert _found(result, variant) == expected, f"rank {rank} of {world}"


def test_missing_group_needs_four_ranks(smoke):
    # On 2 ranks TP == attention DP, so the hidden TP default happens to be right: only the
    # static linter (CGL001) sees this bug there.
    world, results = smoke
    codes = {c for r in results for (_, _, c) in _found(r, "missing_group")}
    assert codes == ({"CGL002"} if world == 4 else set())


def _line_after(line, text):
    """The first line after ``line`` of the model that contains ``text``."""
    with open(MODEL, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    return next(i for i in range(line + 1, len(lines) + 1) if text in lines[i - 1])


def test_messages_name_both_groups_and_both_sites(smoke):
    world, results = smoke
    [v] = results[0]["variants"]["wrong_group"]["violations"]
    assert v["message"] == (
        f"CGL002 buffer bound to group 'moe_ep' (allocated at {os.path.relpath(MODEL, os.path.dirname(MODEL))}:{v['line']}) "
        f"is used by all_gather_into_tensor on group 'tp' at model.py:{v['collective_line']}"
    )
    # the model's dp_gather_partial call, not a helper's frame
    assert v["collective_line"] == _line_after(v["line"], "dp_gather_partial(global_hidden")
    assert (v["collective"], v["buffer_group"], v["collective_group"]) == ("all_gather_into_tensor", "moe_ep", "tp")
    if world == 4:
        [m] = results[0]["variants"]["missing_group"]["violations"]
        assert "bound to group 'tp'" in m["message"] and "on group 'attn_tp'" in m["message"]


def test_outputs_bitwise_equal_with_and_without_shim(smoke):
    _, results = smoke
    for result in results:
        assert all(v["equal"] for v in result["variants"].values())


def test_torch_and_the_model_restored_exactly(smoke):
    _, results = smoke
    for result in results:
        assert all(result["restored"].values()), result["restored"]
        assert result["mode_stack_restored"] and result["after_all_restored"]


def test_group_wrapper_methods_checked_once(smoke):
    """The coordinator's method is checked (a profile group class); the torch.distributed call
    it makes is not checked a second time."""
    _, results = smoke
    found = results[0]["variants"]["wrong_group"]["violations"]
    assert [(v["code"], v["collective"]) for v in found] == [("CGL002", "all_gather_into_tensor")]


def test_assert_and_warn_modes(smoke):
    _, results = smoke
    [(_, line, _, _, _)] = seeded("wrong_group")
    for result in results:
        assert result["assert"]["code"] == "CGL002"
        assert result["assert"]["message"].startswith("CGL002 ")
        [warning] = result["warn"]
        assert warning["message"].startswith("CGL002 ")
        assert (warning["path"], warning["line"]) == (MODEL, line)  # the user's line, not the shim's


def test_rank_divergence_over_gloo_side_group(tmp_path):
    results = launch("divergence", 2, tmp_path)
    for result in results:
        assert result["has_mirror"]
        assert result["sum"] == [2.0, 2.0]  # the data collective ran normally
        codes = [v["code"] for v in result["violations"]]
        assert codes == ["CGL006"], result["violations"]
        assert "bound on ranks [0], unbound on ranks [1]" in result["violations"][0]["message"]
    r0 = results[0]
    assert r0["timeout_verdict"] is None and r0["timeout_warned"]
    assert r0["timeout_s"] < 10


def test_the_pool_reuse_rule_page_names_the_seeded_line():
    from commgroup_lint.rule import all_rules

    [(_, line, _, _, _)] = seeded("pool_reuse")
    assert [e.line for e in all_rules().by_code("CGL005").INVALID] == [line]
