"""Profiles: an engine's communication API as data (see `docs/profiles.md` and `profiles/*.toml`).

A profile names, by qualified name, the calls that return groups, read world sizes, bind
memory to a group (contexts, allocators, registrations), and run collectives. Engine
profiles extend the `torch` profile. The analysis only consults a `Profile`; it never
hard-codes an engine's API. This module imports nothing but the TOML reader, so the
runtime shim can read the same files where only torch is installed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from typing import Any

from commgroup_lint import toml
from commgroup_lint.config_facts import EngineChecks, Fact, as_shipped, parse_engine_checks, parse_facts
from commgroup_lint.profile_checks import check_profile
from commgroup_lint.profile_objects import Objects, parse_objects
from commgroup_lint.runtime_profile import RuntimeProfile, parse_runtime


class ProfileError(Exception):
    """A profile (shipped or user-written) is malformed; the message names the key."""


BASE = "torch"
"""The profile every engine profile extends."""


@dataclass(frozen=True)
class GroupInfo:
    """A canonical group. `getter` and `import_from` are how a fix names it; `size` is the world
    size quantity its `world_size` reads (so `group.world_size > 1` is a condition on it)."""

    description: str
    getter: str | None = None
    import_from: str | None = None
    size: str | None = None


@dataclass(frozen=True)
class GroupParam:
    """Where a call takes its group: a keyword name and a positional index. `shape` names the
    attribute of the group the argument is (`pynccl_comm`); `default` is the group used when
    the argument is omitted or None (an optional group, never reported missing)."""

    param: str
    index: int | None
    shape: str | None = None
    default: str | None = None


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
    disabled: str | None = None  # keyword that turns the context off when True
    enabled: str | None = None  # keyword that turns the context off when False


@dataclass(frozen=True)
class Registration:
    """A call that binds an existing tensor to a group (`rendezvous(tensor, group)`)."""

    buffer: GroupParam
    group: GroupParam


@dataclass(frozen=True)
class PoolBinding:
    """A call that binds a memory pool to one or several groups (`register_mem_pool(pool, group)`)."""

    pool: GroupParam
    groups: GroupParam


@dataclass(frozen=True)
class Methods:
    """Methods called on a group (or on an object that stands for one), by name."""

    collective: frozenset[str] = frozenset()  # consume their tensor arguments on the group
    allocator: frozenset[str] = frozenset()  # return memory bound to the group
    same_group: frozenset[str] = frozenset()  # return the group itself (`_get_backend`)
    register_pool: frozenset[str] = frozenset()  # bind their pool argument to the group
    size: frozenset[str] = frozenset()  # return the group's world size (`pg.size()`)

    def merged(self, other: Methods) -> Methods:
        return Methods(*(getattr(self, f.name) | getattr(other, f.name) for f in fields(Methods)))


@dataclass(frozen=True)
class Profile:
    name: str
    description: str = ""
    packages: tuple[str, ...] = ()
    detect: tuple[str, ...] = ()
    extends: tuple[str, ...] = ()
    groups: dict[str, GroupInfo] = field(default_factory=dict)
    getters: dict[str, frozenset[str]] = field(default_factory=dict)
    getter_variants: dict[str, dict[str, frozenset[str]]] = field(default_factory=dict)
    new_groups: frozenset[str] = frozenset()
    attributes: dict[str, frozenset[str]] = field(default_factory=dict)
    same_group_attributes: frozenset[str] = frozenset()
    size_group_attributes: frozenset[str] = frozenset()
    methods: Methods = field(default_factory=Methods)
    wrappers: dict[str, GroupParam] = field(default_factory=dict)
    sizes: dict[str, str] = field(default_factory=dict)
    size_attributes: dict[str, str] = field(default_factory=dict)
    rank_names: frozenset[str] = frozenset()  # attributes and getters (final names) that read a rank
    single_rank: dict[str, tuple[str, ...]] = field(default_factory=dict)
    aliases: dict[str, dict[str, str]] = field(default_factory=dict)
    allocators: dict[str, GroupParam] = field(default_factory=dict)
    contexts: dict[str, Context] = field(default_factory=dict)
    registrations: dict[str, Registration] = field(default_factory=dict)
    pool_contexts: dict[str, GroupParam] = field(default_factory=dict)
    pool_bindings: dict[str, PoolBinding] = field(default_factory=dict)
    collectives: dict[str, Collective] = field(default_factory=dict)
    local_copies: frozenset[str] = frozenset()
    unrelated: frozenset[str] = frozenset()  # in `packages`, named like an entry but another API
    tensor_factories: frozenset[str] = frozenset()  # by final name: `torch.empty` or a method `new_empty`
    objects: Objects = field(default_factory=Objects)
    """The `[objects]` table: objects bound to a group and their consumers (see `profile_objects`)."""
    pinned: frozenset[str] = frozenset()
    """Names the user's configuration describes: a definition in the scanned code never overrides them."""
    names: tuple[str, ...] = ()
    """The profiles merged into this one, base first."""
    parts: tuple[Profile, ...] = ()
    """Those profiles themselves (each engine's own groups and detection), base first."""
    runtime: RuntimeProfile = field(default_factory=RuntimeProfile)
    """The `[runtime]` table: what only the runtime shim needs (see `runtime_profile`)."""
    facts: tuple[Fact, ...] = ()
    """The `[facts]` table: what the engine's configuration space allows (see `config_facts`)."""
    explain_facts: bool = False
    """Report the findings the facts remove, and by which fact, instead of the others."""
    engine_checks: EngineChecks = field(default_factory=EngineChecks)
    """The `[engine_checks]` table: where facts are read from the checked code (see `config_facts`)."""

    @property
    def components(self) -> tuple[Profile, ...]:
        return self.parts or (self,)

    @property
    def collective_methods(self) -> frozenset[str]:
        return self.methods.collective

    def merged(self, other: Profile, pin: bool = False) -> Profile:
        """This profile extended (and overridden, entry by entry) by `other`; with `pin`, the
        other's entries are the user's (a scanned definition of the same name never replaces them)."""
        dicts: dict[str, Any] = {  # Profile's keyword arguments: its tables, merged
            f.name: {**getattr(self, f.name), **getattr(other, f.name)}
            for f in fields(Profile) if isinstance(getattr(self, f.name), dict)
        }
        sets: dict[str, Any] = {
            f.name: getattr(self, f.name) | getattr(other, f.name)
            for f in fields(Profile) if isinstance(getattr(self, f.name), frozenset) and f.name != "pinned"
        }
        pinned = self.pinned | other.pinned
        if pin:
            pinned |= frozenset([*other.getters, *other.sizes, *other.allocators, *other.contexts,
                                 *other.collectives, *other.registrations, *other.pool_contexts,
                                 *other.pool_bindings, *other.objects.names()])
        return replace(
            self, **dicts, **sets,
            packages=tuple(dict.fromkeys(self.packages + other.packages)),
            detect=tuple(dict.fromkeys(self.detect + other.detect)),
            methods=self.methods.merged(other.methods),
            objects=self.objects.merged(other.objects),
            pinned=pinned,
            names=tuple(dict.fromkeys(self.names + other.names)),
            parts=self.components + other.components,
            runtime=self.runtime.merged(other.runtime),
            facts=tuple({f.name: f for f in self.facts + other.facts}.values()),
            engine_checks=self.engine_checks.merged(other.engine_checks),
        )

    def detects(self, module: str) -> bool:
        """Whether importing `module` means using this engine's API."""
        return any(module == d or module.startswith(d + ".") for d in self.detect)


def shipped_profiles() -> list[str]:
    files = resources.files("commgroup_lint.profiles")
    return sorted(p.name[: -len(".toml")] for p in files.iterdir() if p.name.endswith(".toml"))


def load_shipped(name: str) -> Profile:
    """One shipped profile merged over the profiles it extends (the `torch` base first)."""
    return load_profiles([name])


def load_profiles(names: Iterable[str]) -> Profile:
    """The shipped profiles `names`, each with what it extends, merged in order."""
    merged: Profile | None = None
    for name in _with_bases(list(names)):
        single = _load_one(name)
        merged = single if merged is None else merged.merged(single)
    return merged if merged is not None else Profile("none")


def _with_bases(names: list[str], seen: tuple[str, ...] = ()) -> list[str]:
    ordered: list[str] = []
    for name in names:
        if name in seen:
            raise ProfileError(f"profile '{name}' extends itself (through {' -> '.join(seen)})")
        for base in _load_one(name).extends:
            ordered += [n for n in _with_bases([base], (*seen, name)) if n not in ordered]
        if name not in ordered:
            ordered.append(name)
    return ordered


_LOADED: dict[str, Profile] = {}


def _load_one(name: str) -> Profile:
    if name not in _LOADED:
        path = resources.files("commgroup_lint.profiles").joinpath(f"{name}.toml")
        if not path.is_file():
            known = ", ".join(shipped_profiles())
            raise ProfileError(f"unknown profile '{name}' (shipped profiles: {known})")
        parsed = parse_profile(toml.loads(path.read_text(encoding="utf-8")), f"profile '{name}'")
        _LOADED[name] = replace(parsed, facts=as_shipped(parsed.facts))
    return _LOADED[name]


_TOP_KEYS = {
    "profile", "groups", "getters", "new_groups", "attributes", "group_attributes", "methods",
    "collective_methods", "wrappers", "sizes", "size_attributes", "single_rank", "aliases",
    "allocators", "contexts", "registrations", "pool_contexts", "pool_bindings", "collectives",
    "local_copies", "tensor_factories", "unrelated", "runtime", "facts", "engine_checks", "ranks", "objects",
}


def toml_key(name: str) -> str:
    """`name` as TOML writes it in a dotted key: bare when it can be, else quoted
    (`allocators."acme.memory.comm_buffer".index`)."""
    return name if _BARE_KEY.fullmatch(name) else json.dumps(name, ensure_ascii=False)


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")

_RELATION_FORMS = ("`A == B`, `A < B` or `A > B` (A and B world-size quantities or integers, "
                   "the operator between single spaces)")


def relation_problem(text: str) -> str | None:
    """Why `text` is not a relation `[single_rank]` and `[aliases]` can use, or None when it is
    one. Read as the analysis reads it (`analysis.conditions.parse_literal`): the first operator
    found, two-character ones first, between single spaces; only one that holds as written
    (`==`, `<`, `>`) can say when a group has one rank or two groups are one."""
    for op in ("!=", "==", "<=", ">=", "<", ">"):
        left, found, right = text.partition(f" {op} ")
        if not found:
            continue
        if op not in ("==", "<", ">"):
            return f"relation '{text}' uses `{op}`, which cannot be used here; write {_RELATION_FORMS}"
        if not re.fullmatch(r"\S+", left.strip()) or not re.fullmatch(r"\S+", right.strip()):
            return f"relation '{text}' is not one comparison of two operands; write {_RELATION_FORMS}"
        return None
    return f"relation '{text}' has no operator between spaces; write {_RELATION_FORMS}"


def parse_profile(data: dict[str, Any], origin: str, prefix: str = "") -> Profile:
    """Build a `Profile` from TOML data; `origin` and `prefix` locate errors for the user."""
    r = _Reader(origin, prefix)
    r.no_unknown(data, _TOP_KEYS, "")
    head = r.table(data, "profile")
    r.no_unknown(head, {"name", "description", "packages", "detect", "extends", "pinned"}, "profile")
    name = r.string(head, "name", "profile", default="custom")
    extends = r.strings(head, "extends", "profile")
    for base in extends:
        if base not in shipped_profiles():
            raise r.fail("profile.extends", f"unknown profile '{base}' (shipped profiles: "
                                            f"{', '.join(shipped_profiles())}); extend one of these "
                                            "(a profile file cannot be extended)")
    getters, variants = r.getters(r.table(data, "getters"))
    methods = r.table(data, "methods")
    r.no_unknown(methods, {f.name for f in fields(Methods)}, "methods")
    legacy_collective = r.strings(r.table(data, "collective_methods"), "names", "collective_methods")
    pinned = r.strings(head, "pinned", "profile")
    profile = Profile(
        name=name,
        description=r.string(head, "description", "profile", default=""),
        packages=tuple(r.strings(head, "packages", "profile")),
        detect=tuple(r.strings(head, "detect", "profile")),
        extends=tuple(extends),
        groups={k: r.group_info(v, r.at("groups", k)) for k, v in r.table(data, "groups").items()},
        getters=getters,
        getter_variants=variants,
        new_groups=frozenset(r.strings(r.table(data, "new_groups"), "names", "new_groups")),
        attributes={k: frozenset(r.strings({k: v}, k, "attributes")) for k, v in r.table(data, "attributes").items()},
        same_group_attributes=frozenset(r.strings(r.table(data, "group_attributes"), "same_group", "group_attributes")),
        size_group_attributes=frozenset(r.strings(r.table(data, "group_attributes"), "size", "group_attributes")),
        methods=Methods(**{f.name: frozenset(r.strings(methods, f.name, "methods")) for f in fields(Methods)})
        .merged(Methods(collective=frozenset(legacy_collective))),
        wrappers={k: r.group_param(v, r.at("wrappers", k)) for k, v in r.table(data, "wrappers").items()},
        sizes={k: r.string({k: v}, k, "sizes") for k, v in r.table(data, "sizes").items()},
        size_attributes={k: r.string({k: v}, k, "size_attributes") for k, v in r.table(data, "size_attributes").items()},
        rank_names=frozenset(r.strings(r.table(data, "ranks"), "names", "ranks")),
        single_rank={k: r.relations(v, k) for k, v in r.table(data, "single_rank").items()},
        aliases={k: r.aliases(v, r.at("aliases", k)) for k, v in r.table(data, "aliases").items()},
        allocators={k: r.group_param(v, r.at("allocators", k)) for k, v in r.table(data, "allocators").items()},
        contexts={k: r.context(v, r.at("contexts", k)) for k, v in r.table(data, "contexts").items()},
        registrations={k: r.registration(v, r.at("registrations", k)) for k, v in r.table(data, "registrations").items()},
        pool_contexts={k: r.group_param(v, r.at("pool_contexts", k)) for k, v in r.table(data, "pool_contexts").items()},
        pool_bindings={k: r.pool_binding(v, r.at("pool_bindings", k)) for k, v in r.table(data, "pool_bindings").items()},
        collectives={k: r.collective(v, r.at("collectives", k)) for k, v in r.table(data, "collectives").items()},
        local_copies=frozenset(r.strings(r.table(data, "local_copies"), "names", "local_copies")),
        unrelated=frozenset(r.strings(r.table(data, "unrelated"), "names", "unrelated")),
        tensor_factories=frozenset(r.strings(r.table(data, "tensor_factories"), "names", "tensor_factories")),
        objects=parse_objects(r, r.table(data, "objects")),
        names=(name,),
        runtime=parse_runtime(r, r.table(data, "runtime")),
        facts=parse_facts(r.table(data, "facts"), r.fail),
        engine_checks=parse_engine_checks(r.table(data, "engine_checks"), r.fail),
        pinned=frozenset(pinned),
    )
    check_profile(r, profile, pinned)
    return profile


class _Reader:
    """Typed access to TOML values with errors that name the offending key."""

    def __init__(self, origin: str, prefix: str) -> None:
        self.origin, self.prefix = origin, prefix

    def fail(self, key: str, problem: str) -> ProfileError:
        return ProfileError(f"{self.origin}: key '{self.prefix}{key}': {problem}")

    @staticmethod
    def at(where: str, key: str) -> str:
        """The dotted key of `key` inside the table `where` ("" for the top), quoted as TOML
        quotes it: `allocators."acme.memory.comm_buffer"`."""
        return f"{where}.{toml_key(key)}" if where else toml_key(key)

    def no_unknown(self, data: dict[str, Any], allowed: set[str], where: str) -> None:
        for key in data:
            if key not in allowed:
                raise self.fail(self.at(where, key), f"unknown key (expected one of: {', '.join(sorted(allowed))})")

    def table(self, data: dict[str, Any], key: str, where: str = "") -> dict[str, Any]:
        value = data.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(self.at(where, key), "must be a table")
        return value

    def entry(self, data: Any, where: str, allowed: set[str]) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise self.fail(where, "must be a table")
        self.no_unknown(data, allowed, where)
        return data

    def string(self, data: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
        if key not in data and default is None:
            raise self.fail(self.at(where, key), "is required (a string)")
        value = data.get(key, default)
        if not isinstance(value, str):
            raise self.fail(self.at(where, key), "must be a string")
        return value

    def optional(self, data: dict[str, Any], key: str, where: str) -> str | None:
        return self.string(data, key, where) if key in data else None

    def strings(self, data: dict[str, Any], key: str, where: str) -> list[str]:
        value = data.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(self.at(where, key), "must be a string or a list of strings")
        return value

    def relations(self, data: Any, group: str) -> tuple[str, ...]:
        """A `[single_rank]` entry: relations under any of which `group` has one rank."""
        where = self.at("single_rank", group)
        found = self.strings({group: data}, group, "single_rank")
        for relation in found:
            problem = relation_problem(relation)
            if problem:
                raise self.fail(where, problem)
        return tuple(found)

    def index(self, data: dict[str, Any], where: str) -> int | None:
        value = data.get("index")
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise self.fail(f"{where}.index", "must be a non-negative integer")
        return value

    def group_info(self, data: Any, where: str) -> GroupInfo:
        data = self.entry(data, where, {"description", "getter", "import_from", "size"})
        return GroupInfo(
            self.string(data, "description", where, default=""),
            self.optional(data, "getter", where),
            self.optional(data, "import_from", where),
            self.optional(data, "size", where),
        )

    def getters(self, table: dict[str, Any]) -> tuple[dict[str, frozenset[str]], dict[str, dict[str, frozenset[str]]]]:
        """`name = [groups]`, or a table `{groups = [...], variants = {"keyword=value" = [...]}}`."""
        getters, variants = {}, {}
        for name, value in table.items():
            where = self.at("getters", name)
            if isinstance(value, dict):
                self.no_unknown(value, {"groups", "variants"}, where)
                getters[name] = frozenset(self.strings(value, "groups", where))
                found = self.table(value, "variants", where)
                variants[name] = {k: frozenset(self.strings({k: v}, k, f"{where}.variants")) for k, v in found.items()}
            else:
                getters[name] = frozenset(self.strings({name: value}, name, "getters"))
        return getters, variants

    def aliases(self, data: Any, where: str) -> dict[str, str]:
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise self.fail(where, 'must be a table of other_group = "relation under which they are one group"')
        for other, relation in data.items():
            problem = relation_problem(relation)
            if problem:
                raise self.fail(self.at(where, other), problem)
        return dict(data)

    def group_param(self, data: Any, where: str, extra: frozenset[str] = frozenset()) -> GroupParam:
        data = self.entry(data, where, {"param", "index", "shape", "default", *extra})
        return GroupParam(self.string(data, "param", where), self.index(data, where),
                          self.optional(data, "shape", where), self.optional(data, "default", where))

    def context(self, data: Any, where: str) -> Context:
        data = self.entry(data, where, {"param", "index", "shape", "default", "disabled", "enabled"})
        group = self.group_param(data, where, frozenset({"disabled", "enabled"}))
        return Context(group, self.optional(data, "disabled", where), self.optional(data, "enabled", where))

    def registration(self, data: Any, where: str) -> Registration:
        data = self.entry(data, where, {"buffer", "group"})
        if "buffer" not in data or "group" not in data:
            raise self.fail(where, "needs `buffer` and `group` (each a table with `param` and `index`)")
        return Registration(self.group_param(data["buffer"], f"{where}.buffer"),
                            self.group_param(data["group"], f"{where}.group"))

    def pool_binding(self, data: Any, where: str) -> PoolBinding:
        data = self.entry(data, where, {"pool", "groups"})
        if "pool" not in data or "groups" not in data:
            raise self.fail(where, "needs `pool` and `groups` (each a table with `param` and `index`)")
        return PoolBinding(self.group_param(data["pool"], f"{where}.pool"),
                           self.group_param(data["groups"], f"{where}.groups"))

    def collective(self, data: Any, where: str) -> Collective:
        data = self.entry(data, where, {"param", "index", "shape", "default", "groups", "buffers"})
        group = self.group_param({k: v for k, v in data.items() if k not in ("groups", "buffers")}, where) \
            if "param" in data else None
        buffers = data.get("buffers", [])
        if not isinstance(buffers, list) or not all(isinstance(b, dict) for b in buffers):
            raise self.fail(f"{where}.buffers", "must be a list of tables")
        parsed = []
        for i, b in enumerate(buffers):
            self.no_unknown(b, {"param", "index", "groups"}, f"{where}.buffers[{i}]")
            index = self.index(b, f"{where}.buffers[{i}]")
            if index is None:
                raise self.fail(f"{where}.buffers[{i}].index", "is required (a non-negative integer)")
            parsed.append(BufferParam(self.string(b, "param", f"{where}.buffers[{i}]"), index,
                                      frozenset(self.strings(b, "groups", f"{where}.buffers[{i}]"))))
        fixed = frozenset(self.strings(data, "groups", where))
        if group is None and not fixed and not parsed:
            raise self.fail(where, "needs `param` (the group argument), `groups` or `buffers`")
        return Collective(group, fixed, tuple(parsed))
