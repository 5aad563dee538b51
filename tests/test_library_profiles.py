"""The library profiles (`transformer_engine`, `tensorrt_llm`, `deepspeed`) on small programs in each library's
style: what `check` reports (code, line, column, message, fix) and what `sites` lists. The
programs are the static fixtures `<library>_*.py`; `test_fixtures` checks their codes and
positions, these tests the words and the groups the profiles give."""

from __future__ import annotations

from pathlib import Path

from lintkit import EVERY_RULE, FIXTURES, PROFILE, lint_paths

from commgroup_lint.discovery import discover
from commgroup_lint.engine import Linter
from commgroup_lint.inventory import Inventory, render_text
from commgroup_lint.model import Confidence, RuleSelection

STATIC = FIXTURES / "static"


def _report(name: str, root: Path = STATIC) -> list[tuple[str, int, int, str, str | None]]:
    found = lint_paths(root / name, select=EVERY_RULE, min_confidence=Confidence.LOW)
    return [(f.code, f.start.line, f.start.column, f.message, f.fix.description if f.fix else None) for f in found]


def _sites(name: str, root: Path = STATIC) -> str:
    inventory = Inventory()
    Linter(PROFILE, RuleSelection(("CGL000",)), observer=inventory.observe).lint(discover([str(root / name)]))
    return render_text(inventory.sites()).replace(str(root) + "/", "")


def test_deepspeed_symmetric_memory_names_its_groups_and_getter() -> None:
    assert _report("deepspeed_symm_mem_reduce.py") == [(
        "CGL002", 14, 5,
        "memory registered by `rendezvous` is registered with group ds_tp but reaches `all_reduce` on group ds_dp"
        " at line 16",
        "Pass `groups._get_data_parallel_group()`: the group of `all_reduce` at line 16",
    )]


def test_deepspeed_shared_memory_all_reduce_runs_on_the_world() -> None:
    assert _report("deepspeed_shm_inference_all_reduce.py") == [(
        "CGL007", 20, 16,
        "`inference_all_reduce_` runs on the fixed group world, not on `group`, which `inference_all_reduce` was given"
        " (`all_reduce` at line 19 runs on it), when self.shm_comm_op is not None and world_size > 1;"
        " run it on `group`",
        None,
    )]


def test_transformer_engine_symmetric_cache_is_bound_to_its_group() -> None:
    assert _report("transformer_engine_symmetric_all_reduce.py") == [(
        "CGL002", 15, 11,
        "memory from `get_symmetric_memory_tensor` is bound to group dp but reaches `symmetric_all_reduce` on group tp"
        " at line 17",
        "Pass `parallel_state.get_tensor_model_parallel_group()`: the group of `symmetric_all_reduce` at line 17",
    )]


def test_transformer_engine_userbuffers_are_their_domains() -> None:
    assert _report("transformer_engine_userbuffers.py") == [(
        "CGL002", 25, 16,
        "memory from `get_buffer` is bound to group te_ub_tp but reaches `all_gather_into_tensor` on group tp at line 26"
        " (no fix: the helper fixes the group inside)",
        None,
    )]
    assert _sites("transformer_engine_userbuffers.py") == (
        "transformer_engine_userbuffers.py:16: proj_dgrad: `get_buffer` (allocator) -> te_ub_tp\n"
        "    consumed by `general_gemm` on te_ub_tp at transformer_engine_userbuffers.py:17\n"
        "transformer_engine_userbuffers.py:25: proj_fprop_gathered: `get_buffer` (allocator) -> te_ub_tp\n"
        "    consumed by `all_gather_into_tensor` on tp at transformer_engine_userbuffers.py:26\n"
    )


def test_tensorrt_llm_user_buffers_belong_to_their_domain() -> None:
    assert _report("tensorrt_llm_userbuffers.py") == [(
        "CGL002", 22, 11,
        "memory from `create_userbuffers_tensor` is bound to group trtllm_ub_tp but reaches `allgather` on group"
        " mapping.cp_group at line 24; the analysis cannot tell whether these are one group (each is known only by"
        " the expression holding it)",
        None,
    )]
    assert _sites("tensorrt_llm_userbuffers.py") == (
        "tensorrt_llm_userbuffers.py:14: tp_all_reduce: `create_userbuffers_tensor` (allocator) -> trtllm_ub_tp\n"
        "    no collective consumes it in the checked code\n"
        "tensorrt_llm_userbuffers.py:22: cp_gather: `create_userbuffers_tensor` (allocator) -> trtllm_ub_tp\n"
        "    consumed by `allgather` on mapping.cp_group at tensorrt_llm_userbuffers.py:24\n"
    )


def test_tensorrt_llm_workspace_is_compared_with_the_rank_list() -> None:
    assert _report("tensorrt_llm_allreduce_workspace.py") == [(
        "CGL002", 22, 17,
        "the object built by `get_allreduce_workspace` is bound to group mapping.tp_group but reaches `allreduce` on"
        " group mapping.cp_group at line 23; the analysis cannot tell whether these are one group (each is known only"
        " by the expression holding it)",
        None,
    )]
    assert _sites("tensorrt_llm_allreduce_workspace.py") == (
        "tensorrt_llm_allreduce_workspace.py:15: tp_all_reduce: `get_allreduce_workspace` (object) -> mapping.tp_group\n"
        "    consumed by `allreduce` on mapping.tp_group at tensorrt_llm_allreduce_workspace.py:16\n"
        "tensorrt_llm_allreduce_workspace.py:22: helix_output_all_reduce: `get_allreduce_workspace` (object) ->"
        " mapping.tp_group\n"
        "    consumed by `allreduce` on mapping.cp_group at tensorrt_llm_allreduce_workspace.py:23\n"
    )


def test_tensorrt_llm_module_workspace_is_named_by_its_attribute() -> None:
    """A package fixture, not a static one: static fixtures seed the generated corpora of the
    cache and speed tests, whose layout a new one would change."""
    root = FIXTURES / "packages" / "tensorrt_llm_module_workspace"
    assert _report("layers.py", root) == [(
        "CGL002", 28, 26,
        "the object built by `get_allreduce_workspace` is bound to group self.mapping.tp_group but reaches"
        " `allreduce` on group self.mapping.cp_group at line 31; the analysis cannot tell whether these are one"
        " group (each is known only by the expression holding it)",
        None,
    )]
    assert _sites("layers.py", root) == (
        "layers.py:18: AllReduce.__init__: `get_allreduce_workspace` (object) -> self.mapping.tp_group\n"
        "    consumed by `allreduce` on self.mapping.tp_group at layers.py:21\n"
        "layers.py:28: HelixAllReduce.__init__: `get_allreduce_workspace` (object) -> self.mapping.tp_group\n"
        "    consumed by `allreduce` on self.mapping.cp_group at layers.py:31\n"
    )


def test_the_fixtures_are_found() -> None:
    libraries = ("deepspeed_", "tensorrt_llm_", "transformer_engine_")
    assert sorted(p.name for p in Path(STATIC).glob("*.py") if p.name.startswith(libraries)) == [
        "deepspeed_shm_inference_all_reduce.py", "deepspeed_symm_mem_reduce.py", "tensorrt_llm_allreduce_workspace.py",
        "tensorrt_llm_userbuffers.py",
        "transformer_engine_symmetric_all_reduce.py", "transformer_engine_userbuffers.py",
    ]


CACHE = (
    "class KVCache:\n"
    "    def __init__(self, pool):\n"
    "        self.pool = pool\n"
    "\n"
    "    def read(self, layer):\n"
    "        return self.pool.get_buffer(layer)\n"
)


def test_an_engine_method_counts_only_where_its_objects_can_exist(tmp_path: Path) -> None:
    """`get_buffer` binds memory only on a TransformerEngine communicator: a run naming no way
    to make one (`get_ub`, `transformer_engine`) does not read the files that say it."""
    (tmp_path / "cache.py").write_text(CACHE)
    alone = Linter(PROFILE, RuleSelection(("CGL",))).lint(discover([str(tmp_path / "cache.py")]))
    assert alone.files_using_api == 0
    (tmp_path / "layer.py").write_text((STATIC / "transformer_engine_userbuffers.py").read_text())
    both = Linter(PROFILE, RuleSelection(("CGL",))).lint(discover([str(tmp_path)]))
    assert both.files_using_api == 2
    assert [(Path(f.path).name, f.start.line) for f in both.findings] == [("layer.py", 25)]
