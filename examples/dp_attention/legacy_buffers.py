"""An allocator helper in the style SGLang had before `group` became a required parameter."""

import torch
from sglang.srt.distributed import get_tp_group
from sglang.srt.distributed.device_communicators.pynccl_allocator import use_symmetric_memory


def get_scratch_buffer(rows: int, hidden_size: int) -> torch.Tensor:
    with use_symmetric_memory(get_tp_group()):
        buffer = torch.empty((rows, hidden_size), dtype=torch.bfloat16)
    return buffer
