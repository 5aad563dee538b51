"""A DeepSeek-V4-style decoder layer forward: gather the DP batch, run the MoE, scatter back."""

import torch
from sglang.srt.distributed import get_tensor_model_parallel_world_size
from sglang.srt.layers.dp_attention import (
    dp_gather_partial,
    dp_scatter,
    get_attention_dp_size,
    get_global_dp_buffer,
    get_local_dp_buffer,
)


class DecoderLayer(torch.nn.Module):
    def __init__(self, mlp: torch.nn.Module) -> None:
        super().__init__()
        self.mlp = mlp

    def forward(self, hidden_states: torch.Tensor, forward_batch) -> torch.Tensor:
        use_dp_gather = get_attention_dp_size() > 1 and get_tensor_model_parallel_world_size() > 1
        if use_dp_gather:
            # the gathered buffer feeds dp_gather_partial, which gathers on the TP group
            hidden_states, local_hidden_states = get_global_dp_buffer(), hidden_states
            dp_gather_partial(hidden_states, local_hidden_states, forward_batch)
        hidden_states = self.mlp(hidden_states)
        if use_dp_gather:
            hidden_states, global_hidden_states = get_local_dp_buffer(), hidden_states
            dp_scatter(hidden_states, global_hidden_states, forward_batch)
        return hidden_states
