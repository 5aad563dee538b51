"""
## What it finds
Runtime only (the shim in `commgroup_lint.runtime`). A buffer allocated under group A whose
memory sits in a symmetric-memory pool block registered with other groups, not A, when a
collective on A consumes it.

## Why it matters
All groups share one symmetric-memory pool. With an allocator that registers a segment once,
when it is created (SGLang before 0.5.12), a cached block handed out again keeps the
registration of the group that created it: the code asked for memory bound to A and got
memory bound to B. NCCL silently takes its slow path. The source shows nothing wrong; only the
allocator's state at run time does.

## Example
```python
with use_symmetric_memory(get_attention_tp_group()):
    scratch = torch.empty(n, hidden)          # first segment: registered with attention TP
del scratch                                   # the block returns to the shared pool
global_hidden = get_global_dp_buffer(get_tp_group())   # the same block, still registered with attention TP
dp_gather_partial(global_hidden, hidden_states)        # CGL005: the TP all-gather misses its registration
```

## Fix
Use an allocator that registers every segment with each group at that group's context exit
(SGLang 0.5.12 and later), or keep per-group pools. Run the smoke tests with
`--commgroup-runtime=assert` to confirm.
"""

from __future__ import annotations

from commgroup_lint.codes import POOL_REUSE
from commgroup_lint.rule import Invalid, Rule, Valid

_SMOKE = "tests/smoke_model/model.py, bug={}"


class PoolReuse(Rule):
    code = POOL_REUSE
    name = "pool-reuse"
    summary = "A reused pool block is registered with another group than the one it was allocated for (runtime)"
    runtime_only = True
    VALID = [Valid(_SMOKE.format("None"))]
    INVALID = [Invalid(_SMOKE.format('"pool_reuse"'), line=77)]
