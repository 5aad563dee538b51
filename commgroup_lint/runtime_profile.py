"""The `[runtime]` table of a profile: what only the runtime shim needs to know of an engine.

The static linter reads a helper's body to learn what it does; the shim cannot, so two things
are named here. Group wrapper classes whose collective methods (the profile's
`collective_methods`) do not go through `torch.distributed` (a pynccl communicator, custom
ops) are checked at the method, on the `ProcessGroup` held in `group_attr`. Helper modules
allocate or run collectives on their callers' behalf: their frames are skipped when the shim
reports a line, so the line reported is the caller's, the one the static linter reports.
Everything else the shim needs (contexts, pool contexts, allocators, registrations, pool
bindings, `methods.register_pool`, the groups' `default`s, collectives) is the profile's
shared data; docs/runtime.md lists what the shim does with each key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from commgroup_lint.profile import _Reader


@dataclass(frozen=True)
class GroupClass:
    """A group wrapper: its collective methods run on the `ProcessGroup` in `group_attr`."""

    group_attr: str


@dataclass(frozen=True)
class RuntimeProfile:
    group_classes: Mapping[str, GroupClass] = field(default_factory=dict)
    helper_modules: tuple[str, ...] = ()

    def merged(self, other: RuntimeProfile) -> RuntimeProfile:
        """This table extended (and overridden, class by class) by `other`."""
        return RuntimeProfile(
            group_classes={**self.group_classes, **other.group_classes},
            helper_modules=tuple(dict.fromkeys(self.helper_modules + other.helper_modules)),
        )


def parse_runtime(reader: _Reader, data: dict[str, Any]) -> RuntimeProfile:
    """Build a `RuntimeProfile` from a profile's `[runtime]` table (errors name the key)."""
    reader.no_unknown(data, {"group_classes", "helper_modules"}, "runtime")
    classes = {}
    for name, entry in reader.table(data, "group_classes", "runtime").items():
        where = reader.at("runtime.group_classes", name)
        if not isinstance(entry, dict):
            raise reader.fail(where, "must be a table")
        reader.no_unknown(entry, {"group_attr"}, where)
        classes[name] = GroupClass(reader.string(entry, "group_attr", where))
    return RuntimeProfile(classes, tuple(reader.strings(data, "helper_modules", "runtime")))
