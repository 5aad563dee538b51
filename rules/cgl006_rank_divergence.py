"""
## What it finds
Runtime only (the shim in `commgroup_lint.runtime`, with `enforce(..., divergence=True)`).
The ranks of one collective disagree on whether its buffers are group-bound: some pass
symmetric memory registered with the collective's group, others pass ordinary memory.

## Why it matters
A symmetric-memory collective needs every rank's buffer in the registered window. When a
configuration flag, a cache or a rank-dependent branch leaves one rank with an unregistered
buffer, NCCL falls back on every rank (or, with some algorithms, fails), and the slowdown
looks like a network problem. The check compares the ranks' views over a gloo side group,
never the data group, with a timeout, so it cannot hang the job.

## Example
```python
if rank == 0:
    out = get_local_dp_buffer(get_tp_group())    # bound on rank 0 only
else:
    out = torch.empty_like(x)
get_tp_group().all_reduce(out)                   # CGL006
```

## Fix
Allocate the buffer the same way on every rank: make the branch that decides rank-independent.
"""

from __future__ import annotations

from commgroup_lint.codes import RANK_DIVERGENCE
from commgroup_lint.rule import Invalid, Rule, Valid


class RankDivergence(Rule):
    code = RANK_DIVERGENCE
    name = "rank-divergence"
    summary = "Ranks disagree on whether a collective's buffer is group-bound (runtime)"
    runtime_only = True
    VALID = [Valid("tests/runtime/test_rt_smoke_cpu.py::test_rank_divergence_over_gloo_side_group, the agreeing collective")]
    INVALID = [Invalid("tests/runtime/test_rt_smoke_cpu.py::test_rank_divergence_over_gloo_side_group, the diverging collective", line=1)]
