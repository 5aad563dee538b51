"""The shim: installs the hooks, decides verdicts at collectives, records violations.

Memory is bound where it is allocated (``_binding``, inside the profile's contexts:
``_contexts``) or registered (``_registration``); the profile's callables are patched by
``_targets``; collectives are checked where they run (``_check``, hooked by ``_collectives`` and
at the profile's group classes). This module ties them together: one :class:`Shim` is installed per process at a
time, by the outermost :class:`enforce` or for the whole process (``_process``). Uninstalling
leaves torch exactly as it was.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

from . import _binding, _knowledge, _log, _registration
from ._collectives import CollectiveHooks
from ._divergence import Divergence
from ._groups import group_label, rank
from ._knowledge import Knowledge
from ._names import learn_names
from ._patch import Patcher
from ._report import (
    GROUP_MISMATCH,
    POOL_REUSE,
    CommGroupRuntimeWarning,
    GroupMismatchError,
    Violation,
)
from ._settings import check_mode
from ._sites import finder_for
from ._state import Active
from ._table import TABLE
from ._targets import Targets

VIOLATIONS: list[Violation] = []
_SEEN: set[tuple] = set()
_STACK: list[enforce] = []  # the enforce blocks now open, outermost first


class Shim:
    """Everything one installation changed, and the verdicts it gives."""

    def __init__(self, mode: str, knowledge: Knowledge, divergence: bool = False,
                 divergence_timeout: float = 30.0) -> None:
        self.mode = check_mode(mode)
        self.knowledge = knowledge
        self.finder = finder_for(tuple(knowledge.helper_modules))
        self.patcher = Patcher()
        self.collectives = CollectiveHooks(self.patcher)
        self.targets = Targets(knowledge)
        self.divergence = Divergence(divergence_timeout, self.finder) if divergence else None

    def install(self) -> None:
        _registration.install(self.patcher, self.knowledge.register_pool_methods)
        self.collectives.install()
        if self.divergence is not None:
            self.divergence.install(self.patcher)
        Active.shim = self
        self.targets.apply()

    def uninstall(self) -> None:
        Active.shim = None
        self.targets.remove()
        self.collectives.uninstall()
        self.patcher.restore()

    compiling = staticmethod(_binding.is_compiling)  # what the hooks ask

    def verdicts(self, name: str, args: tuple, kwargs: dict, pg: Any) -> list[Violation]:
        """The violations of one collective on ``pg`` (the slow path of :func:`checked`)."""
        found = []
        flags: list[int] | None = [] if self.divergence is not None else None
        for t in _binding.tensor_args(args, kwargs):
            rec, seg = TABLE.lookup(t)
            if flags is not None:
                flags.append(int(rec is not None or seg is not None))
            v = self._verdict(name, rec, seg, pg)
            if v is not None:
                found.append(v)
        if flags and self.divergence is not None:
            v = self.divergence.check(name, pg, flags, args, kwargs)
            if v is not None:
                found.append(v)
        return found

    def report(self, found: list[Violation], call: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """Record the violations of a collective, run it, then raise in assert mode. Recorded
        (and warned) before the call, so a collective that fails still leaves its verdict;
        raised after it, so that the other ranks never hang."""
        raise_after = [v for v in found if self.emit(v)]
        out = call(*args, **kwargs)
        if raise_after:
            raise GroupMismatchError(raise_after[0])
        return out

    def _verdict(self, name: str, rec: Any, seg: Any, pg: Any) -> Violation | None:
        if rec is None and seg is None:
            return None
        alloc = rec.alloc_group if rec is not None else None
        registered = set(rec.registered) if rec is not None else set()
        if seg:
            registered |= seg
        if alloc is not None and alloc is not pg:
            code, bound = GROUP_MISMATCH, alloc
        elif alloc is None and registered and pg not in registered:
            code, bound = GROUP_MISMATCH, next(iter(registered))
        elif alloc is not None and registered and pg not in registered:
            code, bound = POOL_REUSE, next(iter(registered))
        else:
            return None
        coll = self.finder.find()
        learn_names((alloc, bound, pg), self.finder.user_frame())
        site = rec.site if rec is not None and rec.site is not None else coll
        if code == GROUP_MISMATCH:
            message = (
                f"{GROUP_MISMATCH} buffer bound to group '{group_label(bound)}' (allocated at {site.short()}) "
                f"is used by {name} on group '{group_label(pg)}' at {coll.short()}"
            )
        else:
            message = (
                f"{POOL_REUSE} buffer allocated under group '{group_label(alloc)}' (at {site.short()}) "
                f"reuses a pool block registered with group '{group_label(bound)}', not "
                f"'{group_label(alloc)}'; {name} on group '{group_label(pg)}' at {coll.short()} "
                "does not get the symmetric path"
            )
        return Violation.at(code, message, site, name, coll, buffer_group=group_label(bound),
                            collective_group=group_label(pg), rank=rank())

    def emit(self, v: Violation) -> bool:
        """Record ``v`` (once per distinct bug); True when it must be raised (assert mode)."""
        key = v.key()
        if key not in _SEEN:
            _SEEN.add(key)
            VIOLATIONS.append(v)
            for block in _STACK:
                block.violations.append(v)
            _log.append(v, self.mode)
            if self.mode == "warn":  # at the user's line, the one the static rules report
                warnings.warn_explicit(v.message, CommGroupRuntimeWarning, v.path, v.line)
        return self.mode == "assert"


class enforce:
    """Install the shim for the duration of a ``with`` block.

    ``mode``: ``"assert"`` raises :class:`GroupMismatchError` (after the collective ran, so
    peers never hang), ``"warn"`` issues a :class:`CommGroupRuntimeWarning` once per
    violation, at the user's line, ``"report"`` only records. ``.violations`` holds what was
    found inside the block, as it is found.

    ``profile``: the profile names to use (a name, a comma-separated string or a list);
    default: ``COMMGROUP_LINT_RUNTIME_PROFILE``, else the configuration's ``profiles``, else
    every shipped profile. The configuration file found from the working directory upward
    adds its ``profile-files`` and ``extend-profile``, as it does for the linter.

    ``divergence=True`` checks, at each collective, that all ranks agree on whether its
    buffers are bound (CGL006), over a gloo mirror of the group created next to it by
    ``new_group`` (so enter ``enforce`` before creating groups, on every rank).

    Inside an active shim (another ``enforce``, the environment variable, the pytest plugin),
    a block only changes the mode; the other settings are the outer shim's.
    """

    def __init__(self, mode: str = "assert", *, profile: str | Sequence[str] | None = None,
                 divergence: bool = False, divergence_timeout: float = 30.0) -> None:
        self.mode = check_mode(mode)
        self.profile = profile
        self.divergence = divergence
        self.divergence_timeout = divergence_timeout
        self.violations: list[Violation] = []
        self._shim: Shim | None = None
        self._outer_mode: str | None = None

    def __enter__(self) -> enforce:
        self.violations = []
        if Active.shim is None:
            self._shim = Shim(self.mode, _knowledge.load(self.profile), self.divergence, self.divergence_timeout)
            self._shim.install()
            forget_seen()
        else:
            self._outer_mode, Active.shim.mode = Active.shim.mode, self.mode
        _STACK.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _STACK.remove(self)
        if self._shim is not None:
            shim, self._shim = self._shim, None
            shim.uninstall()
        elif Active.shim is not None and self._outer_mode is not None:
            Active.shim.mode = self._outer_mode


def install(mode: str, knowledge: Knowledge) -> Shim:
    """Install a shim that stays for the life of the process (see ``_process``)."""
    shim = Shim(mode, knowledge)
    shim.install()
    return shim


def forget_seen() -> None:
    """Record the next occurrence of every violation again (a new test begins)."""
    _SEEN.clear()


def violations() -> list[Violation]:
    """Every violation recorded in this process so far."""
    return list(VIOLATIONS)


def clear_violations() -> None:
    VIOLATIONS.clear()
    _SEEN.clear()
