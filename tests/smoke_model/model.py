"""The smoke model: a decoder layer with attention data parallelism, shaped like SGLang's.

A DeepSeek-V4-style MoE forward (gather into the global buffer, experts, scatter back into a
local buffer) and a layer communicator whose sibling methods pick the local buffer's group by
the world-size relation. ``bug`` seeds one bug (``VARIANTS``); each seeded line ends with
``# seeded[VARIANT]: STATIC (runtime: RUNTIME on N[,M] ranks)``: what the static linter
reports there, and what the runtime shim reports when the model runs with that bug, on which
world sizes. The static linter reads every branch, so it reports all seeded lines at once.

* ``missing_group``: the communicator's scatter calls the legacy allocator without a group; it
  falls back to TP, but on 4 ranks the buffer feeds an attention-TP collective.
* ``wrong_group``: the MoE forward allocates its global buffer for the MoE-EP group, then
  gathers into it on TP: the same ranks, a different group.
* ``pool_reuse``: the code is correct, but the old pool (``initialize_dp_attention(...,
  pool_scheme="on_create")``) registers a block once: the MoE-EP routing buffer's block is
  handed to the TP global buffer still registered with MoE-EP.
"""

from __future__ import annotations

import torch

from smoke_model.dp_attention import (
    dp_gather_partial,
    dp_scatter,
    get_attention_dp_size,
    get_global_dp_buffer,
    get_local_dp_buffer,
)
from smoke_model.legacy import get_local_dp_buffer as legacy_get_local_dp_buffer
from smoke_model.parallel_state import (
    get_attention_tp_group,
    get_moe_ep_group,
    get_tensor_model_parallel_world_size,
    get_tp_group,
    tensor_model_parallel_all_reduce,
)


class TPMLP(torch.nn.Module):
    """Column-parallel up projection, row-parallel down projection, all-reduce on TP."""

    def __init__(self, hidden: int, seed: int, device):
        super().__init__()
        tp = get_tp_group()
        gen = torch.Generator().manual_seed(seed)
        up = torch.randn(hidden, 2 * hidden, generator=gen) / hidden**0.5
        down = torch.randn(2 * hidden, hidden, generator=gen) / hidden**0.5
        shard = 2 * hidden // tp.world_size
        lo = tp.rank_in_group * shard
        self.up = torch.nn.Parameter(up[:, lo : lo + shard].contiguous().to(device), requires_grad=False)
        self.down = torch.nn.Parameter(down[lo : lo + shard].contiguous().to(device), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(x @ self.up) @ self.down
        return tensor_model_parallel_all_reduce(out)


class DeepseekV4MoE(torch.nn.Module):
    """DeepSeek-V4 style: gather, compute, scatter, each buffer allocated for its consumer."""

    def __init__(self, hidden: int, device, bug: str | None = None):
        super().__init__()
        self.experts = TPMLP(hidden, seed=1, device=device)
        self.bug = bug

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        routing = get_global_dp_buffer(get_moe_ep_group())
        routing.fill_(1.0)
        expert_load = routing.sum(dim=0)
        get_moe_ep_group().all_reduce(expert_load)
        scale = expert_load[:1].reciprocal()  # stays on the device: no host sync
        del routing
        if self.bug == "wrong_group":
            global_hidden = get_global_dp_buffer(get_moe_ep_group())  # seeded[wrong_group]: CGL002 (runtime: CGL002 on 2,4 ranks)
        else:
            global_hidden = get_global_dp_buffer(get_tp_group())  # seeded[pool_reuse]: CGL005 (runtime: CGL005 on 2,4 ranks)
        dp_gather_partial(global_hidden, hidden_states)
        out = self.experts(global_hidden) * scale
        local_hidden = get_local_dp_buffer(get_tp_group())
        dp_scatter(local_hidden, out)
        return local_hidden


class LayerCommunicator:
    """Sibling methods choose the local buffer's group by the same size relation."""

    def __init__(self, bug: str | None = None):
        self.bug = bug

    def gather_hidden_states(self, hidden_states: torch.Tensor) -> torch.Tensor:
        global_hidden = get_global_dp_buffer(get_tp_group())
        dp_gather_partial(global_hidden, hidden_states)
        return global_hidden

    def scatter_hidden_states(self, global_hidden: torch.Tensor) -> torch.Tensor:
        if get_tensor_model_parallel_world_size() == get_attention_dp_size():
            group = get_tp_group()
        else:
            group = get_attention_tp_group()
        if self.bug == "missing_group":
            local_hidden = legacy_get_local_dp_buffer()  # seeded[missing_group]: CGL002 (runtime: CGL002 on 4 ranks)
        else:
            local_hidden = get_local_dp_buffer(group)
        dp_scatter(local_hidden, global_hidden)
        return local_hidden

    def scatter_residual(self, global_residual: torch.Tensor) -> torch.Tensor:
        if get_tensor_model_parallel_world_size() == get_attention_dp_size():
            group = get_tp_group()
        else:
            group = get_attention_tp_group()
        local_residual = get_local_dp_buffer(group)
        dp_scatter(local_residual, global_residual)
        return local_residual


class DecoderLayer(torch.nn.Module):
    def __init__(self, hidden: int, device, bug: str | None = None):
        super().__init__()
        self.moe = DeepseekV4MoE(hidden, device, bug)
        self.mlp = TPMLP(hidden, seed=2, device=device)
        self.comm = LayerCommunicator(bug)

    def forward(self, hidden_states: torch.Tensor):
        global_hidden = self.comm.gather_hidden_states(hidden_states)
        mlp_out = self.mlp(global_hidden)
        local_hidden = self.comm.scatter_hidden_states(mlp_out)
        residual = self.comm.scatter_residual(global_hidden)
        local_hidden.add_(residual)
        next_global = self.comm.gather_hidden_states(local_hidden)
        moe_out = self.moe(hidden_states)
        return moe_out.clone(), next_global.clone()
