"""What the shim knows of the engines: the linter's profiles and the user's configuration,
merged as the static rules merge them (``config.configured_profile``; see docs/runtime.md).
Entries whose module is never imported cost nothing, so loading every shipped profile is the
detection. Reading them imports no torch, libcst, click, rich or pathspec.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commgroup_lint.config import PYPROJECT, SECTION, Config, ConfigError, configured_profile, find_config, load_config
from commgroup_lint.profile import (
    Context,
    GroupParam,
    PoolBinding,
    Profile,
    ProfileError,
    Registration,
    load_profiles,
)
from commgroup_lint.runtime_profile import GroupClass

from ._regular import NotRegular, check_regular
from ._settings import PROFILE_ENV_VAR

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
    getters: Mapping[str, str]
    """Getters that return one group, with its name (``tp``): what they return is named so."""
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
            getters={name: next(iter(groups)) for name, groups in profile.getters.items()
                     if len(groups) == 1 and _PLAIN_NAME.fullmatch(name)},
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


def _check_profile_files(config: Path) -> None:
    """``ConfigError`` when a file of the configuration's ``profile-files`` is no regular file
    or is too large: read, a FIFO would hang the program at ``import torch`` and a link to
    ``/dev/zero`` would fill its memory. The configuration's own reader then never sees it."""
    from commgroup_lint.config import _read_toml

    data, _ = _section(_read_toml(config), config)
    names = data.get("profile-files", []) if isinstance(data, dict) else []
    for name in names if isinstance(names, list) else []:
        if isinstance(name, str):
            _check_profile_file(config.parent / name, config)


def _section(data: dict[str, Any], path: Path) -> tuple[Any, str]:
    """The configuration's table in the TOML ``data`` of ``path``, as ``load_config`` reads it,
    and the prefix of its keys in messages."""
    if path.name != PYPROJECT:
        return data, ""
    tool = data.get("tool", {})
    return (tool.get(SECTION, {}) if isinstance(tool, dict) else {}), f"tool.{SECTION}."


def _check_profile_file(path: Path, config: Path) -> None:
    try:
        check_regular(path)
    except NotRegular as exc:
        raise ConfigError(f"{config}: key 'profile-files': {exc}; name regular TOML files") from None


@functools.lru_cache(maxsize=8)
def _load(names: tuple[str, ...] | None, config_path: Path | None, _stamp: int | None) -> Knowledge:
    if config_path is not None:
        _check_profile_files(config_path)
    config = load_config(config_path) if config_path is not None else Config()
    return Knowledge.of(configured_profile(config, names))


def load_lenient(profile: str | Sequence[str] | None = None,
                 cwd: str | os.PathLike[str] | None = None) -> tuple[Knowledge, str | None]:
    """:func:`load` for a shim that comes up whatever the configuration says (the start-up hook,
    ``python -m``, the pytest plugin): a piece that fails is dropped alone and the rest is kept.
    The pieces are the shim's: the profile selection, the configuration's ``profiles``, each
    file of ``profile-files``, ``extend-profile`` (the whole file only when it is not TOML).
    Returns the knowledge and one line saying what failed, what was dropped and what was kept
    (None when nothing failed)."""
    try:
        return load(profile, cwd), None
    except (ConfigError, ProfileError) as exc:
        failure = str(exc)
    pieces = _Pieces()
    names = requested_profiles(profile)
    if names is not None and pieces.attempt(f"the profile selection '{','.join(names)}'",
                                            functools.partial(load_profiles, names)) is _FAILED:
        names = None
    path = find_config([], Path(cwd or os.getcwd()))
    config = pieces.config(path) if path is not None else Config()
    knowledge = Knowledge.of(configured_profile(config, names))
    if not pieces.problems:  # a key the shim does not read (the linter reports it)
        return knowledge, f"{failure} (a key the runtime shim does not read: nothing dropped)"
    kept = ", ".join(pieces.kept) or "nothing of the configuration"
    return knowledge, f"{'; '.join(pieces.problems)}; dropped {', '.join(pieces.dropped)}; kept {kept}"


_FAILED = object()


class _Pieces:
    """The configuration read piece by piece with the configuration reader's own parts (a piece
    means what it means to the linter), noting what failed and was dropped, and what was kept."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.dropped: list[str] = []
        self.kept: list[str] = []

    def attempt(self, piece: str, read: Callable[[], Any]) -> Any:
        """``read()``, or ``_FAILED``: then the failure is noted and ``piece`` dropped."""
        try:
            return read()
        except (ConfigError, ProfileError) as exc:
            self.problems.append(str(exc))
            self.dropped.append(piece)
            return _FAILED

    def config(self, path: Path) -> Config:
        """The pieces of the configuration file ``path`` that the shim reads and that hold."""
        from commgroup_lint.config import _Parser, _read_toml

        data = self.attempt(f"the configuration {path}", lambda: _read_toml(path))
        if data is _FAILED:
            return Config()
        data, prefix = _section(data, path)
        parser = _Parser(path, prefix)
        profiles = self.attempt("the configuration's profiles", lambda: parser.profiles(data))
        if profiles not in (None, _FAILED):
            self.kept.append("profiles " + ", ".join(profiles))
        names = self.attempt("profile-files", lambda: parser.strings(data, "profile-files"))
        files = [self._profile_file(parser, name) for name in (() if names is _FAILED else names)]
        extend = self.attempt("extend-profile", lambda: parser.extend_profile(data))
        if extend not in (None, _FAILED):
            self.kept.append("extend-profile")
        return Config(path=path, profiles=None if profiles is _FAILED else profiles,
                      profile_files=tuple(f for f in files if f is not _FAILED),
                      extend_profile=None if extend is _FAILED else extend)

    def _profile_file(self, parser: Any, name: str) -> Any:
        """One file of ``profile-files`` (with the shipped profiles it extends), or ``_FAILED``."""

        def read() -> Profile:
            _check_profile_file(parser.root / name, parser.path)
            (own,) = parser.profile_files({"profile-files": [name]})
            load_profiles(own.extends)
            return own

        own = self.attempt(f"profile file '{name}'", read)
        if own is not _FAILED:
            self.kept.append(f"profile file '{name}'")
        return own
