"""Rank divergence (CGL006): the ranks of one collective disagree on whether its buffers are
group-bound. Opt-in (``enforce(divergence=True)``): each check is a gloo round trip.

The flags are exchanged over a gloo *mirror* of the collective's group, never over the data
group: the patched ``new_group`` creates one next to each group made while the shim is
installed (and one for the world group at installation), so every rank must install the
shim at the same point, before creating its groups.
"""

from __future__ import annotations

import warnings
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from ._binding import tensor_args
from ._groups import group_label, rank
from ._names import learn_names
from ._patch import Patcher
from ._report import RANK_DIVERGENCE, CommGroupRuntimeWarning, Site, Violation
from ._sites import SiteFinder
from ._table import TABLE


class Divergence:
    def __init__(self, timeout: float, finder: SiteFinder) -> None:
        self.timeout = timedelta(seconds=timeout)
        self.finder = finder
        self.mirrors: dict[Any, Any] = {}

    def install(self, patcher: Patcher) -> None:
        c10d = dist.distributed_c10d
        orig = c10d.new_group
        mirrors, timeout = self.mirrors, self.timeout

        def new_group(*args: Any, **kwargs: Any) -> Any:
            pg = orig(*args, **kwargs)
            if kwargs.get("use_local_synchronization"):
                return pg
            ranks = args[0] if args else kwargs.get("ranks")
            mirror = orig(ranks=ranks, backend="gloo", timeout=timeout)
            if isinstance(pg, dist.ProcessGroup) and isinstance(mirror, dist.ProcessGroup):
                mirrors[pg] = mirror
            return pg

        new_group.__wrapped__ = orig  # type: ignore[attr-defined]
        patcher.set(c10d, "new_group", new_group)
        if dist.new_group is orig:
            patcher.set(dist, "new_group", new_group)
        if dist.is_initialized():
            mirrors[c10d._get_default_group()] = orig(backend="gloo", timeout=timeout)

    def check(self, name: str, pg: Any, flags: list[int], args: tuple, kwargs: dict) -> Violation | None:
        """Exchange this rank's "bound or not" flags with the collective's other ranks."""
        mirror = self.mirrors.get(pg)
        if mirror is None:
            return None
        try:
            mine = torch.tensor(flags, dtype=torch.int64)
            gathered = [torch.empty_like(mine) for _ in range(mirror.size())]
            dist.all_gather(gathered, mine, group=mirror)
        except Exception as exc:  # a timeout, a peer that never came: never hang the job
            warnings.warn(
                f"commgroup-lint: rank-divergence check for {name} on group '{group_label(pg)}' "
                f"failed ({type(exc).__name__}: {str(exc)[:120]})",
                CommGroupRuntimeWarning,
                stacklevel=2,
            )
            return None
        ranks = dist.get_process_group_ranks(mirror)
        rows = [g.tolist() for g in gathered]
        if all(r == rows[0] for r in rows):
            return None
        coll = self.finder.find()
        learn_names((pg,), self.finder.user_frame())
        alloc: Site = coll
        for t in tensor_args(args, kwargs):
            rec, _ = TABLE.lookup(t)
            if rec is not None and rec.site is not None:
                alloc = rec.site
                break
        bound = [ranks[i] for i, r in enumerate(rows) if any(r)]
        unbound = [ranks[i] for i, r in enumerate(rows) if not all(r)]
        message = (
            f"{RANK_DIVERGENCE} ranks disagree on whether the buffers of {name} on group '{group_label(pg)}' "
            f"at {coll.short()} are group-bound: bound on ranks {bound}, unbound on ranks {unbound}"
        )
        return Violation.at(RANK_DIVERGENCE, message, alloc, name, coll, collective_group=group_label(pg),
                            rank=rank(), details={"bound_ranks": bound, "unbound_ranks": unbound})
