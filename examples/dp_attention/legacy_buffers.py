"""An allocator helper in the style SGLang had before `group` became a required parameter,
and a caller that all-gathers its buffer on attention TP."""

import torch
from sglang.srt.distributed import get_tp_group
from sglang.srt.distributed.device_communicators.pynccl_allocator import use_symmetric_memory
from sglang.srt.layers.dp_attention import attn_tp_all_gather_into_tensor


def get_scratch_buffer(rows: int, hidden_size: int) -> torch.Tensor:
    with use_symmetric_memory(get_tp_group()):
        buffer = torch.empty((rows, hidden_size), dtype=torch.bfloat16)
    return buffer


def gather_scratch(local: torch.Tensor, attn_tp_size: int) -> torch.Tensor:
    gathered = get_scratch_buffer(local.shape[0] * attn_tp_size, local.shape[1])
    attn_tp_all_gather_into_tensor(gathered, local)
    return gathered
