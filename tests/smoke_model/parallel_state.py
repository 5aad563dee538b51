"""Group coordinators and getters, shaped like ``sglang.srt.distributed.parallel_state``.

Groups on N ranks with attention DP size D: TP = all ranks; attention TP = blocks of
N // D consecutive ranks; MoE EP = all ranks (same ranks as TP, a different group).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

_TP = None
_ATTN_TP = None
_ATTN_CP = None
_MOE_EP = None


class GroupCoordinator:
    """A ProcessGroup plus the collectives the model calls on it."""

    def __init__(self, group_ranks, group_name, backend=None):
        rank = dist.get_rank()
        self.unique_name = group_name
        self.device_group = None
        self.ranks = []
        for ranks in group_ranks:
            pg = dist.new_group(ranks, backend=backend, group_desc=group_name)
            if rank in ranks:
                self.ranks = list(ranks)
                self.device_group = pg
        self.world_size = len(self.ranks)
        self.rank_in_group = self.ranks.index(rank)

    def all_reduce(self, input_):
        if self.world_size == 1:
            return input_
        dist.all_reduce(input_, group=self.device_group)
        return input_

    def all_gather_into_tensor(self, output, input_):
        if self.world_size == 1:
            output.copy_(input_)
            return
        dist.all_gather_into_tensor(output, input_, group=self.device_group)

    def reduce_scatter_tensor(self, output, input_):
        if self.world_size == 1:
            output.copy_(input_)
            return
        dist.reduce_scatter_tensor(output, input_, group=self.device_group)


def initialize_model_parallel(attention_dp_size: int, backend=None) -> None:
    global _TP, _ATTN_TP, _ATTN_CP, _MOE_EP
    world = dist.get_world_size()
    attn_tp = world // attention_dp_size
    everyone = [list(range(world))]
    _TP = GroupCoordinator(everyone, "tp", backend)
    _ATTN_TP = GroupCoordinator(
        [list(range(d * attn_tp, (d + 1) * attn_tp)) for d in range(attention_dp_size)], "attn_tp", backend
    )
    _ATTN_CP = GroupCoordinator([[r] for r in range(world)], "attn_cp", backend)
    _MOE_EP = GroupCoordinator(everyone, "moe_ep", backend)


def get_tp_group() -> GroupCoordinator:
    return _TP


def get_attention_tp_group() -> GroupCoordinator:
    return _ATTN_TP


def get_attention_cp_group() -> GroupCoordinator:
    return _ATTN_CP


def get_moe_ep_group() -> GroupCoordinator:
    return _MOE_EP


def get_tensor_model_parallel_world_size() -> int:
    return _TP.world_size


def tensor_model_parallel_all_reduce(input_: torch.Tensor) -> torch.Tensor:
    return get_tp_group().all_reduce(input_)
