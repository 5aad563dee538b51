"""Groups as the shim sees them: the ``ProcessGroup`` object behind any spelling of a group,
and a label for messages, as the user names the group. Groups are identified by object, never
by rank membership: two groups over the same ranks are two groups (two communicators)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import torch.distributed as dist

from ._names import WRAPPED as _WRAPPED
from ._names import held_name

_ProcessGroup = dist.ProcessGroup
_NAMED: dict[Any, str] = {}  # name_group's labels
_CANONICAL: dict[Any, str] = {}  # the profile's group a getter returned it as
_LABELS: dict[Any, str] = {}  # group wrappers' own names (``unique_name``)
#: Wrapper type -> the attribute of ``_WRAPPED`` that held its group (``as_process_group``'s fast path).
_HOLDER: dict[type, str] = {}
_ABSENT = object()


def as_process_group(group: Any) -> Any:
    """The ProcessGroup behind ``group``: a ProcessGroup, a wrapper holding one, a group name
    (what functional and symmetric-memory ops take), or None for the default group.

    Called at every binding context's entry: a ProcessGroup, and a wrapper of a type seen
    before whose group has its label, are answered without a further Python call (an
    ``isinstance`` on ``ProcessGroup`` runs its metaclass's ``__instancecheck__`` in Python,
    and so does ``dist.group.WORLD``)."""
    if type(group) is _ProcessGroup:
        return group
    attr = _HOLDER.get(type(group))
    if attr is not None:
        pg = getattr(group, attr, None)
        if type(pg) is _ProcessGroup and pg in _LABELS:
            return pg
    return _resolve(group)


def _resolve(group: Any) -> Any:
    """:func:`as_process_group` the long way; a wrapper's type is remembered with the attribute
    that held its group, and the group labelled with the wrapper's name."""
    if isinstance(group, _ProcessGroup):  # a subclass (WORLD is one too)
        return group
    if group is None or group is dist.group.WORLD:
        return dist.distributed_c10d._get_default_group() if dist.is_initialized() else None
    if isinstance(group, str):
        return dist.distributed_c10d._resolve_process_group(group)  # type: ignore[arg-type]  # a GroupName
    held = False  # an earlier attribute exists (None here): not a type's reliable holder
    for attr in _WRAPPED:
        pg = getattr(group, attr, _ABSENT)
        if isinstance(pg, _ProcessGroup):
            if not held:
                _HOLDER[type(group)] = attr
            label = getattr(group, "unique_name", None) or getattr(group, "group_name", None)
            if isinstance(label, str) and label and pg not in _LABELS:
                _LABELS[pg] = label
            return pg
        held = held or pg is not _ABSENT
    return group


def named_group(sources: Sequence[str]) -> Any:
    """The group a profile names by its name (a ``default = "world"``): the ``ProcessGroup``
    behind the first of ``sources`` (module attributes holding it, getters called without
    arguments) that gives one, or None. Only modules already imported are read: looking a
    group up never imports, and a getter that fails (its group not created yet) gives none."""
    for qualified in sources:
        value = _imported(qualified)
        if callable(value):
            try:
                value = value()
            except Exception:  # an engine's getter before its groups exist
                continue
        pg = as_process_group(value) if value is not None else None
        if isinstance(pg, _ProcessGroup):
            return pg
    return None


def _imported(qualified: str) -> Any:
    """The object a dotted name reaches from the longest prefix that is an imported module."""
    parts = qualified.split(".")
    for i in range(len(parts) - 1, 0, -1):
        found: Any = sys.modules.get(".".join(parts[:i]))
        if found is not None:
            for part in parts[i:]:
                found = getattr(found, part, None)
            return found
    return None


def name_group(group: Any, label: str) -> Any:
    """Give ``group`` (a ProcessGroup or a wrapper) a label for messages; returns ``group``."""
    _NAMED[as_process_group(group)] = label
    return group


def returned_by_getter(group: Any, canonical: str) -> None:
    """``group`` was returned by a getter of the profile's group ``canonical`` (``tp``): that
    is its name from now on (the first getter's, where two return one group)."""
    pg = as_process_group(group)
    if isinstance(pg, _ProcessGroup) and pg not in _CANONICAL:
        _CANONICAL[pg] = canonical


def group_label(pg: Any) -> str:
    """The label for messages, as the user names the group: one given by ``name_group``, else
    the profile's group whose getter returned it (``tp``, ``attn_tp``), else ``world`` for the
    default group, else the variable or attribute the code held it in where a violation was
    found (``ep``, ``self.ep_group``: ``_names``), else its description (a wrapper's
    ``unique_name``, the group's ``group_desc``), else its ordinal (torch's group name)."""
    if pg is None:
        return "<none>"
    label = _NAMED.get(pg) or _CANONICAL.get(pg)
    if label:
        return label
    if dist.is_initialized() and pg is dist.distributed_c10d._get_default_group():
        return "world"
    label = held_name(pg) or _LABELS.get(pg)
    if label:
        return label
    desc = getattr(pg, "group_desc", None)
    if desc and desc not in ("undefined", "default_pg") and not desc.startswith("commgroup"):
        return desc
    return str(getattr(pg, "group_name", pg))


def rank() -> int | None:
    """This process's global rank, or None outside a process group."""
    try:
        return dist.get_rank() if dist.is_initialized() else None
    except (RuntimeError, ValueError):  # pragma: no cover - torn down
        return None
