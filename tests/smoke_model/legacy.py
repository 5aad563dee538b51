"""The old allocator: ``group`` may be omitted and then defaults to the TP group, as SGLang
hard-coded it before the parameter became required."""

from __future__ import annotations

import torch

from smoke_model import dp_attention
from smoke_model.dp_attention import use_symmetric_memory
from smoke_model.parallel_state import get_tp_group


def get_local_dp_buffer(group=None) -> torch.Tensor:
    if group is None:
        group = get_tp_group()
    with use_symmetric_memory(group):
        return torch.empty((dp_attention._LOCAL_LEN, dp_attention._HIDDEN), dtype=dp_attention._DTYPE,
                           device=dp_attention._DEVICE)
