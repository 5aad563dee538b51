"""DP-attention buffers and gathers, shaped like ``sglang.srt.layers.dp_attention``.

Max-length padding: every attention-DP rank holds ``local_len`` tokens; the global buffer
holds ``attention_dp_size * local_len``. The symmetric pool registers memory with the group
of each context (``pool_scheme="per_context"``, newer SGLang) or a block once, with the group
that created it (``"on_create"``, older SGLang). On CUDA it is a real NCCL mem pool
(``nccl_pool``); on the CPU the runtime shim's model of one.
"""

from __future__ import annotations

import contextlib

import torch

from commgroup_lint.runtime import SimulatedSymmetricPool, simulated_symmetric_memory
from smoke_model.parallel_state import get_attention_tp_group, get_tp_group

_ATTN_DP_SIZE = 1
_LOCAL_LEN = 0
_HIDDEN = 0
_DTYPE = torch.float32
_DEVICE = torch.device("cpu")
_POOL_SCHEME = "per_context"
_CPU_POOLS = {scheme: SimulatedSymmetricPool(scheme) for scheme in ("per_context", "on_create")}
SYMMETRIC_MEMORY = True


def initialize_dp_attention(attention_dp_size, local_len, hidden, dtype=torch.float32, device="cpu",
                            pool_scheme="per_context"):
    global _ATTN_DP_SIZE, _LOCAL_LEN, _HIDDEN, _DTYPE, _DEVICE, _POOL_SCHEME
    _ATTN_DP_SIZE, _LOCAL_LEN, _HIDDEN = attention_dp_size, local_len, hidden
    _DTYPE, _DEVICE, _POOL_SCHEME = dtype, torch.device(device), pool_scheme
    _CPU_POOLS[pool_scheme].reset()


def get_attention_dp_size() -> int:
    return _ATTN_DP_SIZE


def get_attention_tp_size() -> int:
    return get_attention_tp_group().world_size


def get_attention_dp_rank() -> int:
    return get_tp_group().rank_in_group // get_attention_tp_size()


def use_symmetric_memory(group, disabled=False):
    disabled = disabled or not SYMMETRIC_MEMORY or group.world_size == 1
    if disabled:
        return contextlib.nullcontext()
    if _DEVICE.type == "cuda":
        from smoke_model.nccl_pool import NcclSymmetricMemory

        return NcclSymmetricMemory(group, scheme=_POOL_SCHEME)
    return simulated_symmetric_memory(group, pool=_CPU_POOLS[_POOL_SCHEME])


def get_local_dp_buffer(group) -> torch.Tensor:
    with use_symmetric_memory(group):
        return torch.empty((_LOCAL_LEN, _HIDDEN), dtype=_DTYPE, device=_DEVICE)


def get_global_dp_buffer(group) -> torch.Tensor:
    with use_symmetric_memory(group):
        return torch.empty((_ATTN_DP_SIZE * _LOCAL_LEN, _HIDDEN), dtype=_DTYPE, device=_DEVICE)


def dp_gather_partial(global_tokens: torch.Tensor, local_tokens: torch.Tensor) -> None:
    """Reduce-scatter the partial local tokens on attention TP, all-gather on TP."""
    attn_tp = get_attention_tp_group()
    if attn_tp.world_size > 1:
        scattered = torch.empty(
            (local_tokens.shape[0] // attn_tp.world_size, local_tokens.shape[1]),
            dtype=local_tokens.dtype,
            device=local_tokens.device,
        )
        attn_tp.reduce_scatter_tensor(scattered, local_tokens)
    else:
        scattered = local_tokens
    get_tp_group().all_gather_into_tensor(global_tokens, scattered)


def dp_scatter(local_tokens: torch.Tensor, global_tokens: torch.Tensor) -> None:
    """A local copy: this DP rank's slice of the global tokens."""
    start = get_attention_dp_rank() * local_tokens.shape[0]
    local_tokens.copy_(global_tokens[start : start + local_tokens.shape[0]])
