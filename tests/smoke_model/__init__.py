"""A miniature DP-attention model over real torch.distributed, shaped like SGLang.

Modules (import root: ``tests/``, package ``smoke_model``):

* ``parallel_state`` -- ``GroupCoordinator`` and the group getters (``get_tp_group``,
  ``get_attention_tp_group``, ``get_attention_cp_group``, ``get_moe_ep_group``) and
  ``get_tensor_model_parallel_world_size``, ``tensor_model_parallel_all_reduce``.
* ``dp_attention`` -- ``use_symmetric_memory``, ``get_local_dp_buffer``,
  ``get_global_dp_buffer``, ``dp_gather_partial``, ``dp_scatter``, ``get_attention_dp_size``,
  ``get_attention_tp_size`` (the current allocator: group required, per-context registration).
* ``legacy`` -- the old allocator whose ``group`` defaults to the TP group.
* ``pool_v0`` -- the old pool that registers a block once, with the group that created it.
* ``model_correct``, ``model_missing_group``, ``model_wrong_group``, ``model_pool_reuse`` --
  one complete model module per variant. A seeded bug's line ends with
  ``# seeded: CODE (runtime: CODE on N ranks)``: the first code is what the static linter
  reports there, the parenthesis what the runtime shim reports and on which world sizes.
"""

VARIANTS = ("correct", "missing_group", "wrong_group", "pool_reuse")
