"""The `[objects]` table of a profile: objects bound to a group, and what consumes them.

Engines and the libraries they call do not only allocate tensors under a group: they build an
object for one group (a fused all-reduce workspace, an IPC or MNNVL workspace, a DeepEP
`Buffer(group, ...)`) and hand it later to an op that takes the object, not a group. The
object is memory bound to its group like any other, so it flows, is listed by `sites` and is
checked by the same rules; this table says which calls build one (`builders`, with the
argument that carries the group), which ops take one (`consumers`: the argument holding it,
and the group they run on when they take one, else the object's own), and which methods of
such an object return its memory or run on its group (`methods`). Like the rest of a profile
it is data: the loader needs nothing but a TOML reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from commgroup_lint.profile import GroupParam, _Reader

KEYS = frozenset({"builders", "consumers", "methods"})
METHOD_KEYS = frozenset({"allocator", "consumer", "handle"})


@dataclass(frozen=True)
class Builder:
    """A constructor or factory whose result is bound to the group its argument `group` gives;
    with `attr`, to that attribute of the argument (`Workspace(config)` bound to `config.group`)."""

    group: GroupParam
    attr: str | None = None
    also: tuple[GroupParam, ...] = ()
    """Other arguments that carry a group, which must be the object's too (FlashInfer's
    `comm_backend`, the backend its handles are exchanged through): each runs on the object's group."""
    size: GroupParam | None = None
    """The argument giving how many ranks the object spans (`world_size`): a group's world size
    there (`get_tensor_model_parallel_world_size()`) says which group the object is meant for."""


@dataclass(frozen=True)
class ObjectConsumer:
    """An op that takes a group-bound object (`allreduce_fusion(x, workspace=ws)`): it runs on
    the object's group, or on `group` when it takes one; its other arguments are consumed there."""

    object: GroupParam
    group: GroupParam | None = None


@dataclass(frozen=True)
class Objects:
    builders: dict[str, Builder] = field(default_factory=dict)
    consumers: dict[str, ObjectConsumer] = field(default_factory=dict)
    allocator_methods: frozenset[str] = frozenset()  # on an object: memory of the object (its group's)
    consumer_methods: frozenset[str] = frozenset()  # on an object: run on its group, consuming their arguments
    handle_methods: frozenset[str] = frozenset()  # consumer methods returning a handle valid on the object's group only

    def merged(self, other: Objects) -> Objects:
        """This table extended (and overridden, entry by entry) by `other`."""
        return Objects({**self.builders, **other.builders}, {**self.consumers, **other.consumers},
                       self.allocator_methods | other.allocator_methods, self.consumer_methods | other.consumer_methods,
                       self.handle_methods | other.handle_methods)

    def names(self) -> frozenset[str]:
        """The qualified names its entries describe (pinned when given by `extend-profile`)."""
        return frozenset([*self.builders, *self.consumers])


def parse_objects(r: _Reader, data: dict[str, Any]) -> Objects:
    """Build `Objects` from a profile's `[objects]` table (errors name the key)."""
    r.no_unknown(data, set(KEYS), "objects")
    methods = r.table(data, "methods", "objects")
    r.no_unknown(methods, set(METHOD_KEYS), "objects.methods")
    builders = {name: _builder(r, entry, r.at("objects.builders", name))
                for name, entry in r.table(data, "builders", "objects").items()}
    consumers = {name: _consumer(r, entry, r.at("objects.consumers", name))
                 for name, entry in r.table(data, "consumers", "objects").items()}
    handles = frozenset(r.strings(methods, "handle", "objects.methods"))
    return Objects(builders, consumers, frozenset(r.strings(methods, "allocator", "objects.methods")),
                   frozenset(r.strings(methods, "consumer", "objects.methods")) | handles, handles)


def _builder(r: _Reader, data: Any, where: str) -> Builder:
    data = r.entry(data, where, {"param", "index", "shape", "default", "attr", "also", "size"})
    group = r.group_param({k: v for k, v in data.items() if k not in ("attr", "also", "size")}, where)
    size = r.group_param(data["size"], f"{where}.size") if "size" in data else None
    also = data.get("also", [])
    if not isinstance(also, list) or not all(isinstance(a, dict) for a in also):
        raise r.fail(f"{where}.also", "must be a list of tables (each with `param` and `index`)")
    return Builder(group, r.optional(data, "attr", where),
                   tuple(r.group_param(a, f"{where}.also[{i}]") for i, a in enumerate(also)), size)


def _consumer(r: _Reader, data: Any, where: str) -> ObjectConsumer:
    data = r.entry(data, where, {"object", "group"})
    if "object" not in data:
        raise r.fail(f"{where}.object", "is required (a table with `param` and `index`: the argument holding the object)")
    group = r.group_param(data["group"], f"{where}.group") if "group" in data else None
    return ObjectConsumer(r.group_param(data["object"], f"{where}.object"), group)
