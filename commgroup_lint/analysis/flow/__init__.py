"""The group dataflow: an abstract interpreter over one function's IR.

It walks statements in order, following the control flow (branches are analysed apart and
joined; loops run to a fixpoint of two passes; `return`/`raise` end a path), and tracks for
every variable and every attribute of `self` which groups, world sizes, bound buffers,
contexts, callables and flags it may hold. Each `if` adds a literal to the path condition,
and a group chosen inside a branch keeps that branch's literals as its guard, so a buffer
bound under `c` is never compared with a consumer under `not c`.

Every call is looked up in the `Api` (the profile's entries and the scanned code's
summaries) and its `Behaviour` applied: arguments replace parameters, the callee's
conditions are read in the caller's terms, and what it consumes is recorded.

`FunctionFlow` is composed of one part per job, each a module of this package: `state` (the
environment, its join, the keys of references), `statements`, `stores` (writes into objects), `expressions`, `library` (builtins and the standard library), `calls`, `effects`
(a callee's summary applied at a call), `events` (what rules read: allocations, group uses,
consumptions), `literals` (tests read as path conditions) and `arguments`; `base` declares
what the parts share.
"""

from __future__ import annotations

from commgroup_lint.analysis.flow.calls import Calls
from commgroup_lint.analysis.flow.effects import Effects
from commgroup_lint.analysis.flow.events import Events
from commgroup_lint.analysis.flow.expressions import Expressions
from commgroup_lint.analysis.flow.library import Library
from commgroup_lint.analysis.flow.literals import Literals
from commgroup_lint.analysis.flow.state import (
    PORTABLE,
    Env,
    Scope,
    attribute_key,
    cells,
    flatten,
    guarded_groups,
    join,
    key_attribute,
    known_groups,
    merge_guards,
    scoped,
)
from commgroup_lint.analysis.flow.statements import MAX_LISTS, Statements
from commgroup_lint.analysis.flow.stores import Stores

__all__ = [
    "MAX_LISTS", "PORTABLE", "Env", "FunctionFlow", "Scope", "attribute_key", "cells", "flatten", "guarded_groups", "join",
    "key_attribute", "known_groups", "merge_guards", "scoped",
]


class FunctionFlow(Statements, Stores, Expressions, Library, Calls, Effects, Events, Literals):
    """The dataflow of one function: `run` walks its body into its `FunctionFacts`."""
