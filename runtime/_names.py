"""The names groups have in the user's code: the variable or attribute holding a group where a
violation is found (``ep``, ``self.ep_group``), so that a message names it as the code does.

Looked up only when a violation names a group that has no better name (``_groups.group_label``
says which come first), once per group and collective site: the cost is the violation's alone.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Iterable
from typing import Any

import torch.distributed as dist

_HELD: dict[Any, str] = {}
_SEARCHED: set[tuple[Any, Any, int]] = set()
_MAX_FRAMES = 32
_NO_NAME = ("self", "cls")
#: Attributes under which group wrappers hold their ProcessGroup (``_groups`` reads the same).
WRAPPED = ("device_group", "process_group", "pg")


def held_name(pg: Any) -> str | None:
    """The name the code was found holding ``pg`` in, if any."""
    return _HELD.get(pg)


def group_in(value: Any) -> Any:
    """The ProcessGroup ``value`` is or wraps (read from its instance attributes only: no
    property of the user's runs), else None."""
    try:
        if isinstance(value, dist.ProcessGroup):
            return value
        attrs = vars(value)
    except Exception:  # no __dict__, or a proxy whose __class__ or __dict__ fails: no group
        return None
    for attr in WRAPPED:
        pg = attrs.get(attr)
        if isinstance(pg, dist.ProcessGroup):
            return pg
    return None


def learn_names(groups: Iterable[Any], frame: types.FrameType | None) -> None:
    """Note the name each of ``groups`` has in the code, from ``frame`` (the user's line of a
    violation) outward: in each frame, an attribute of ``self`` (``self.ep_group``), then a
    local variable that is not a parameter, then a module global; a parameter's name (an alias
    of its caller's variable) only when no frame has another."""
    if frame is None:
        return
    site = (frame.f_code, frame.f_lasti)
    wanted = {pg for pg in groups if pg is not None and pg not in _HELD and (pg, *site) not in _SEARCHED}
    if not wanted:
        return
    _SEARCHED.update((pg, *site) for pg in wanted)
    parameters: dict[Any, str] = {}
    f: types.FrameType | None = frame
    for _ in range(_MAX_FRAMES):
        if f is None or not wanted:
            break
        for name, pg in _candidates(f, parameters):
            if pg in wanted:
                _HELD[pg] = name
                wanted.discard(pg)
        f = f.f_back
    for pg in wanted:
        if pg in parameters:
            _HELD[pg] = parameters[pg]


def _locals(frame: types.FrameType) -> dict[str, Any]:
    """A copy of ``frame``'s local variables. Before Python 3.13, reading a function frame's
    ``f_locals`` stores such a copy in the frame, which keeps every local's value alive as long
    as the frame runs (a buffer the code deleted would never go back to the allocator): that
    copy is emptied again, unless something else holds it (``locals()`` returned it to the
    code), and the next reader refills it."""
    stored = frame.f_locals
    copy = dict(stored)
    if sys.version_info < (3, 13) and frame.f_code.co_flags & inspect.CO_OPTIMIZED:
        if sys.getrefcount(stored) <= _HELD_BY_FRAME_AND_HERE:
            stored.clear()
    return copy


#: References to a function frame's stored locals while ``_locals`` reads them: the frame's,
#: ``stored``'s and ``getrefcount``'s argument.
_HELD_BY_FRAME_AND_HERE = 3


def _candidates(frame: types.FrameType, parameters: dict[Any, str]) -> list[tuple[str, Any]]:
    """``(name, group)`` for what ``frame`` holds, best first; parameters go to ``parameters``."""
    code = frame.f_code
    params = set(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
    local = _locals(frame)
    found = []
    owner = local.get("self")
    if owner is not None:
        try:
            attrs = list(vars(owner).items())
        except Exception:  # as in group_in
            attrs = []
        found += [(f"self.{attr}", pg) for attr, value in attrs if (pg := group_in(value)) is not None]
    for name, value in local.items():
        pg = group_in(value) if name not in _NO_NAME and not name.startswith("__") else None
        if pg is None:
            continue
        if name in params:
            parameters.setdefault(pg, name)
        else:
            found.append((name, pg))
    if code.co_flags & inspect.CO_OPTIMIZED:  # a function's: its module's globals are another namespace
        found += [(name, pg) for name, value in list(frame.f_globals.items())
                  if not name.startswith("__") and (pg := group_in(value)) is not None]
    return found
