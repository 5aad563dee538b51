"""The codes of the rules that the runtime shim reports, in a module that imports nothing.

The rules and the runtime shim both read them from here: the shim runs at every rank's start,
where importing a rule module (libcst and the analysis, about 0.2 s) is not affordable.
"""

GROUP_MISMATCH = "CGL002"
"""A group-bound buffer is consumed by a collective on another group."""
POOL_REUSE = "CGL005"
"""A buffer allocated under one group sits in a pool block registered with another."""
RANK_DIVERGENCE = "CGL006"
"""Ranks of one collective disagree on whether a buffer is group-bound."""

RUNTIME_CODES = {
    GROUP_MISMATCH: "group mismatch",
    POOL_REUSE: "pool reuse",
    RANK_DIVERGENCE: "rank divergence",
}
"""The codes the shim can report, with their short names."""
