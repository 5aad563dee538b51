"""The old symmetric pool: a block is registered once, with the group whose context created
it; a block freed and handed out again under another group keeps that registration."""

from __future__ import annotations

import contextlib

import torch

from commgroup_lint.runtime import SimulatedSymmetricPool, simulated_symmetric_memory
from smoke_model import dp_attention

__commgroup_lint_helper__ = True

POOL = SimulatedSymmetricPool("on_create")


def use_symmetric_memory(group, disabled=False):
    disabled = disabled or not dp_attention.SYMMETRIC_MEMORY or group.world_size == 1
    if disabled:
        return contextlib.nullcontext()
    if dp_attention._DEVICE.type == "cuda":
        from smoke_model.nccl_pool import NcclSymmetricMemory

        return NcclSymmetricMemory(group, scheme="on_create")
    return simulated_symmetric_memory(group, pool=POOL)


def get_local_dp_buffer(group) -> torch.Tensor:
    with use_symmetric_memory(group):
        return torch.empty((dp_attention._LOCAL_LEN, dp_attention._HIDDEN), dtype=dp_attention._DTYPE,
                           device=dp_attention._DEVICE)


def get_global_dp_buffer(group) -> torch.Tensor:
    with use_symmetric_memory(group):
        return torch.empty((dp_attention._ATTN_DP_SIZE * dp_attention._LOCAL_LEN, dp_attention._HIDDEN),
                           dtype=dp_attention._DTYPE, device=dp_attention._DEVICE)
