"""Profiles: an engine's communication API as data (see `profiles/sglang.toml`).

A profile names, by qualified name, the calls that return groups, read world sizes,
allocate group-bound memory, and run collectives. The analysis only consults a `Profile`;
it never hard-codes an engine's API.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

from commgroup_lint import toml
from commgroup_lint.runtime_profile import RuntimeProfile, parse_runtime


class ProfileError(Exception):
    """A profile (shipped or user-written) is malformed; the message names the key."""


@dataclass(frozen=True)
class GroupInfo:
    description: str
    getter: str | None = None
    import_from: str | None = None


@dataclass(frozen=True)
class GroupParam:
    """Where a call takes its group: a keyword name and a positional index."""

    param: str
    index: int | None


@dataclass(frozen=True)
class BufferParam:
    param: str
    index: int
    groups: frozenset[str]


@dataclass(frozen=True)
class Collective:
    """A collective function: its group comes from an argument or is fixed by the helper."""

    group: GroupParam | None = None
    groups: frozenset[str] = frozenset()
    buffers: tuple[BufferParam, ...] = ()


@dataclass(frozen=True)
class Context:
    group: GroupParam
    disabled: str | None = None


@dataclass(frozen=True)
class Profile:
    name: str
    description: str = ""
    packages: tuple[str, ...] = ()
    groups: dict[str, GroupInfo] = field(default_factory=dict)
    getters: dict[str, frozenset[str]] = field(default_factory=dict)
    same_group_attributes: frozenset[str] = frozenset()
    sizes: dict[str, str] = field(default_factory=dict)
    single_rank: dict[str, tuple[str, ...]] = field(default_factory=dict)
    allocators: dict[str, GroupParam] = field(default_factory=dict)
    contexts: dict[str, Context] = field(default_factory=dict)
    collective_methods: frozenset[str] = frozenset()
    collectives: dict[str, Collective] = field(default_factory=dict)
    local_copies: frozenset[str] = frozenset()
    tensor_factories: frozenset[str] = frozenset()  # by final name: `torch.empty` or a method `new_empty`
    pinned: frozenset[str] = frozenset()
    """Names the user's configuration describes: a definition in the scanned code never overrides them."""
    runtime: RuntimeProfile = field(default_factory=RuntimeProfile)
    """The `[runtime]` table: what only the runtime shim needs (see `runtime_profile`)."""

    def merged(self, other: "Profile") -> "Profile":
        """This profile extended (and overridden, entry by entry) by `other`."""
        return replace(
            self,
            packages=tuple(dict.fromkeys(self.packages + other.packages)),
            groups={**self.groups, **other.groups},
            getters={**self.getters, **other.getters},
            same_group_attributes=self.same_group_attributes | other.same_group_attributes,
            sizes={**self.sizes, **other.sizes},
            single_rank={**self.single_rank, **other.single_rank},
            allocators={**self.allocators, **other.allocators},
            contexts={**self.contexts, **other.contexts},
            collective_methods=self.collective_methods | other.collective_methods,
            collectives={**self.collectives, **other.collectives},
            local_copies=self.local_copies | other.local_copies,
            tensor_factories=self.tensor_factories | other.tensor_factories,
            pinned=self.pinned | frozenset(
                [*other.getters, *other.sizes, *other.allocators, *other.contexts, *other.collectives]
            ),
            runtime=self.runtime.merged(other.runtime),
        )


def shipped_profiles() -> list[str]:
    files = resources.files("commgroup_lint.profiles")
    return sorted(p.name[: -len(".toml")] for p in files.iterdir() if p.name.endswith(".toml"))


def load_shipped(name: str) -> Profile:
    path = resources.files("commgroup_lint.profiles").joinpath(f"{name}.toml")
    if not path.is_file():
        known = ", ".join(shipped_profiles())
        raise ProfileError(f"unknown profile '{name}' (shipped profiles: {known})")
    return parse_profile(toml.loads(path.read_text(encoding="utf-8")), f"profile '{name}'")


_TOP_KEYS = {
    "profile", "groups", "getters", "group_attributes", "sizes", "single_rank", "allocators",
    "contexts", "collective_methods", "collectives", "local_copies", "tensor_factories", "runtime",
}


def parse_profile(data: dict[str, Any], origin: str, prefix: str = "") -> Profile:
    """Build a `Profile` from TOML data; `origin` and `prefix` locate errors for the user."""
    reader = _Reader(origin, prefix)
    reader.no_unknown(data, _TOP_KEYS, "")
    head = reader.table(data, "profile")
    reader.no_unknown(head, {"name", "description", "packages"}, "profile")
    return Profile(
        name=reader.string(head, "name", "profile", default="custom"),
        description=reader.string(head, "description", "profile", default=""),
        packages=tuple(reader.strings(head, "packages", "profile")),
        groups={k: reader.group_info(v, f"groups.{k}") for k, v in reader.table(data, "groups").items()},
        getters={k: frozenset(reader.strings({k: v}, k, "getters")) for k, v in reader.table(data, "getters").items()},
        same_group_attributes=frozenset(reader.strings(reader.table(data, "group_attributes"), "same_group", "group_attributes")),
        sizes={k: reader.string({k: v}, k, "sizes") for k, v in reader.table(data, "sizes").items()},
        single_rank={k: tuple(reader.strings({k: v}, k, "single_rank")) for k, v in reader.table(data, "single_rank").items()},
        allocators={k: reader.group_param(v, f"allocators.{k}") for k, v in reader.table(data, "allocators").items()},
        contexts={k: reader.context(v, f"contexts.{k}") for k, v in reader.table(data, "contexts").items()},
        collective_methods=frozenset(reader.strings(reader.table(data, "collective_methods"), "names", "collective_methods")),
        collectives={k: reader.collective(v, f"collectives.{k}") for k, v in reader.table(data, "collectives").items()},
        local_copies=frozenset(reader.strings(reader.table(data, "local_copies"), "names", "local_copies")),
        tensor_factories=frozenset(reader.strings(reader.table(data, "tensor_factories"), "names", "tensor_factories")),
        runtime=parse_runtime(reader, reader.table(data, "runtime")),
    )


class _Reader:
    """Typed access to TOML values with errors that name the offending key."""

    def __init__(self, origin: str, prefix: str) -> None:
        self.origin, self.prefix = origin, prefix

    def fail(self, key: str, problem: str) -> ProfileError:
        return ProfileError(f"{self.origin}: key '{self.prefix}{key}': {problem}")

    def no_unknown(self, data: dict[str, Any], allowed: set[str], where: str) -> None:
        for key in data:
            if key not in allowed:
                path = f"{where}.{key}" if where else key
                raise self.fail(path, f"unknown key (expected one of: {', '.join(sorted(allowed))})")

    def table(self, data: dict[str, Any], key: str, where: str = "") -> dict[str, Any]:
        value = data.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(f"{where}.{key}" if where else key, "must be a table")
        return value

    def string(self, data: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
        value = data.get(key, default)
        if not isinstance(value, str):
            raise self.fail(f"{where}.{key}", "must be a string")
        return value

    def strings(self, data: dict[str, Any], key: str, where: str) -> list[str]:
        value = data.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{where}.{key}", "must be a string or a list of strings")
        return value

    def index(self, data: dict[str, Any], where: str) -> int | None:
        value = data.get("index")
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise self.fail(f"{where}.index", "must be a non-negative integer")
        return value

    def group_info(self, data: Any, where: str) -> GroupInfo:
        if not isinstance(data, dict):
            raise self.fail(where, "must be a table")
        self.no_unknown(data, {"description", "getter", "import_from"}, where)
        return GroupInfo(
            self.string(data, "description", where, default=""),
            data.get("getter") and self.string(data, "getter", where),
            data.get("import_from") and self.string(data, "import_from", where),
        )

    def group_param(self, data: Any, where: str) -> GroupParam:
        if not isinstance(data, dict):
            raise self.fail(where, "must be a table")
        self.no_unknown(data, {"param", "index"}, where)
        return GroupParam(self.string(data, "param", where), self.index(data, where))

    def context(self, data: Any, where: str) -> Context:
        if not isinstance(data, dict):
            raise self.fail(where, "must be a table")
        self.no_unknown(data, {"param", "index", "disabled"}, where)
        disabled = self.string(data, "disabled", where) if "disabled" in data else None
        return Context(GroupParam(self.string(data, "param", where), self.index(data, where)), disabled)

    def collective(self, data: Any, where: str) -> Collective:
        if not isinstance(data, dict):
            raise self.fail(where, "must be a table")
        self.no_unknown(data, {"param", "index", "groups", "buffers"}, where)
        group = GroupParam(self.string(data, "param", where), self.index(data, where)) if "param" in data else None
        buffers = data.get("buffers", [])
        if not isinstance(buffers, list) or not all(isinstance(b, dict) for b in buffers):
            raise self.fail(f"{where}.buffers", "must be a list of tables")
        parsed = []
        for i, b in enumerate(buffers):
            self.no_unknown(b, {"param", "index", "groups"}, f"{where}.buffers[{i}]")
            index = self.index(b, f"{where}.buffers[{i}]")
            if index is None:
                raise self.fail(f"{where}.buffers[{i}].index", "is required")
            parsed.append(BufferParam(self.string(b, "param", f"{where}.buffers[{i}]"), index,
                                      frozenset(self.strings(b, "groups", f"{where}.buffers[{i}]"))))
        fixed = frozenset(self.strings(data, "groups", where))
        if group is None and not fixed and not parsed:
            raise self.fail(where, "needs `param` (the group argument), `groups` or `buffers`")
        return Collective(group, fixed, tuple(parsed))
