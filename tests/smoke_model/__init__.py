"""A miniature DP-attention model over real torch.distributed, shaped like SGLang.

Modules (import root: ``tests/``, package ``smoke_model``):

* ``parallel_state`` -- ``GroupCoordinator`` and the group getters (``get_tp_group``,
  ``get_attention_tp_group``, ``get_attention_cp_group``, ``get_moe_ep_group``) and
  ``get_tensor_model_parallel_world_size``, ``tensor_model_parallel_all_reduce``.
* ``dp_attention`` -- ``use_symmetric_memory``, ``get_local_dp_buffer``,
  ``get_global_dp_buffer``, ``dp_gather_partial``, ``dp_scatter``, ``get_attention_dp_size``,
  ``get_attention_tp_size`` (the current allocator: group required); the pool's registration
  scheme is chosen at initialisation.
* ``legacy`` -- the old allocator whose ``group`` defaults to the TP group.
* ``nccl_pool`` -- real symmetric memory on CUDA (a NCCL mem pool registered with the group).
* ``model`` -- the decoder layer; ``DecoderLayer(hidden, device, bug=...)`` seeds one bug.

The package names its API like SGLang; ``commgroup-lint.toml`` beside it tells both the
linter and the runtime shim which calls bind memory to which group.
"""

#: The model's variants: ``bug=None`` is ``correct``.
VARIANTS = ("correct", "missing_group", "wrong_group", "pool_reuse")


def bug_of(variant: str) -> str | None:
    return None if variant == "correct" else variant


def pool_scheme_of(variant: str) -> str:
    """The pool's registration scheme a variant runs with: pool reuse needs the old one."""
    return "on_create" if variant == "pool_reuse" else "per_context"
