"""A layer communicator: sibling methods move hidden states between DP-attention layouts."""

import torch
from sglang.srt.distributed import get_tensor_model_parallel_world_size, get_tp_group
from sglang.srt.layers.dp_attention import (
    attn_tp_all_gather_into_tensor,
    dp_scatter,
    get_attention_dp_size,
    get_attention_tp_group,
    get_local_dp_buffer,
)


class LayerCommunicator:
    def scatter_hidden_states(self, global_hidden_states, forward_batch):
        if get_tensor_model_parallel_world_size() == get_attention_dp_size():
            group = get_tp_group()
        else:
            group = get_attention_tp_group()
        hidden_states = get_local_dp_buffer(group)
        dp_scatter(hidden_states, global_hidden_states, forward_batch)
        return hidden_states

    def scatter_residual(self, global_residual, forward_batch):
        if get_tensor_model_parallel_world_size() == get_attention_dp_size():
            group = get_tp_group()
        else:
            group = get_attention_tp_group()
        residual = get_local_dp_buffer(group)
        dp_scatter(residual, global_residual, forward_batch)
        return residual

    def scatter_moe_output(self, global_hidden_states, forward_batch):
        hidden_states = get_local_dp_buffer(get_tp_group())
        dp_scatter(hidden_states, global_hidden_states, forward_batch)
        return hidden_states

    def gather_attn_tp(self, local_hidden_states: torch.Tensor) -> torch.Tensor:
        gathered = get_local_dp_buffer(get_tp_group())
        attn_tp_all_gather_into_tensor(gathered, local_hidden_states)
        return gathered
