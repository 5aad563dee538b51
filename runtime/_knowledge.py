"""What the shim knows of the engines: the linter's profiles and the user's configuration.

The same data the static rules read, merged the same way (``config.configured_profile``):
the shipped profiles (all of them unless a selection names some: ``enforce(profile=...)``,
``COMMGROUP_LINT_RUNTIME_PROFILE``, the pytest option, or the configuration's ``profiles``
/ ``profile`` key), each with the profiles it extends, then the user's own engine profiles
(``profile-files``), then the ``extend-profile`` table of the configuration file found from
the working directory upward (``[tool.commgroup-lint]`` in ``pyproject.toml``, or
``commgroup-lint.toml``). Entries whose module is never imported cost nothing, so loading
every shipped profile is the detection.

Reading them imports the linter's profile and configuration modules only: no torch, libcst,
click, rich or pathspec.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from commgroup_lint.config import Config, configured_profile, find_config, load_config
from commgroup_lint.profile import Context, GroupParam, PoolBinding, Profile, Registration
from commgroup_lint.runtime_profile import GroupClass

PROFILE_ENV_VAR = "COMMGROUP_LINT_RUNTIME_PROFILE"
_PLAIN_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


@dataclass(frozen=True)
class Knowledge:
    """The profile entries the shim acts on, by qualified name."""

    contexts: Mapping[str, Context]
    allocators: Mapping[str, GroupParam]
    registrations: Mapping[str, Registration]
    pool_contexts: Mapping[str, GroupParam]
    pool_bindings: Mapping[str, PoolBinding]
    register_pool_methods: frozenset[str]
    """Methods of a group (or of its torch backend) that register a memory pool with it."""
    group_sources: Mapping[str, tuple[str, ...]]
    """For a group name (a `default`), the module attributes and argument-less getters that give it."""
    group_classes: Mapping[str, GroupClass]
    collective_methods: frozenset[str]
    helpers: frozenset[str]
    """Allocators and collective helpers: their frames are skipped to find the caller's line."""
    helper_modules: tuple[str, ...]

    @classmethod
    def of(cls, profile: Profile) -> Knowledge:
        return cls(
            contexts=dict(profile.contexts),
            allocators=dict(profile.allocators),
            registrations=dict(profile.registrations),
            pool_contexts=dict(profile.pool_contexts),
            pool_bindings=dict(profile.pool_bindings),
            register_pool_methods=profile.methods.register_pool,
            group_sources=_group_sources(profile),
            group_classes=dict(profile.runtime.group_classes),
            collective_methods=profile.collective_methods,
            helpers=frozenset(profile.allocators) | frozenset(profile.collectives),
            helper_modules=profile.runtime.helper_modules,
        )


def _group_sources(profile: Profile) -> dict[str, tuple[str, ...]]:
    """Where each group can be read without arguments: the attributes that hold only it
    (``torch.distributed.group.WORLD``), then the plain getters that return only it; a getter
    reached through a call (``get_parallel().tp_group``) is left out."""
    sources: dict[str, list[str]] = {}
    for table in (profile.attributes, profile.getters):
        for name, groups in table.items():
            if len(groups) == 1 and _PLAIN_NAME.fullmatch(name):
                sources.setdefault(next(iter(groups)), []).append(name)
    return {group: tuple(names) for group, names in sources.items()}


def requested_profiles(profile: str | Sequence[str] | None = None) -> tuple[str, ...] | None:
    """The profile names asked for: the argument, else the environment variable, else None."""
    if profile is None:
        profile = os.environ.get(PROFILE_ENV_VAR) or None
    if profile is None:
        return None
    names = profile.split(",") if isinstance(profile, str) else list(profile)
    return tuple(n.strip() for n in names if n.strip()) or None


def load(profile: str | Sequence[str] | None = None, cwd: str | os.PathLike[str] | None = None,
         use_config: bool = True) -> Knowledge:
    """The knowledge for ``profile`` (see the module docstring); raises ``ProfileError`` for
    an unknown profile and ``ConfigError`` for a malformed configuration file."""
    config = find_config([], Path(cwd or os.getcwd())) if use_config else None
    stamp = config.stat().st_mtime_ns if config is not None else None
    return _load(requested_profiles(profile), config, stamp)


@functools.lru_cache(maxsize=8)
def _load(names: tuple[str, ...] | None, config_path: Path | None, _stamp: int | None) -> Knowledge:
    config = load_config(config_path) if config_path is not None else Config()
    return Knowledge.of(configured_profile(config, names))
