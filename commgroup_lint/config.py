"""Configuration files: `[tool.commgroup-lint]` in `pyproject.toml`, or a `commgroup-lint.toml`.

Found as ruff finds its own: from a directory upward, the first one holding a
`commgroup-lint.toml`, or a `pyproject.toml` with a `[tool.commgroup-lint]` table, wins (in one
directory `commgroup-lint.toml` is preferred). Each checked file reports as its nearest
configuration says (see `scopes`); the project's own settings (profiles, cache, context,
excludes) come from the configuration found from the working directory, or from the checked
paths when they lie outside it (`project_config`). `--config PATH` names the one file used for
everything. Paths in `exclude`, `extend-exclude` and `per-file-ignores` are relative to the
directory of the file that sets them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commgroup_lint import toml
from commgroup_lint.discovery import DEFAULT_EXCLUDE
from commgroup_lint.files import read_text
from commgroup_lint.model import Confidence
from commgroup_lint.profile import Profile, ProfileError, load_profiles, parse_profile, shipped_profiles
from commgroup_lint.rule import all_rules

DEFAULT_SRC = (".", "src")
"""The import roots when the configuration sets none (ruff's default `src`)."""

STANDALONE = "commgroup-lint.toml"
PYPROJECT = "pyproject.toml"
SECTION = "commgroup-lint"


class ConfigError(Exception):
    """A configuration file is malformed; the message names the file and the key."""


@dataclass(frozen=True)
class Config:
    """The settings of one configuration file (all defaults when `path` is None).

    Patterns are anchored: a pattern with a `/` is made absolute against the file's directory,
    a bare name (`build`, `*_pb2.py`) matches a file or directory name anywhere. `src` lists
    the import roots as written, relative to the project root (see `project`).
    """

    path: Path | None = None
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    profiles: tuple[str, ...] | None = None  # shipped profiles (`profiles`, or the older `profile`); None: all
    profile_files: tuple[Profile, ...] = ()  # profiles of the user's own engines (`profile-files`)
    force_exclude: bool = False
    extend_profile: Profile | None = None
    min_confidence: Confidence | None = None
    respect_gitignore: bool = True
    src: tuple[str, ...] = DEFAULT_SRC

    @property
    def profile(self) -> str | None:
        """The single profile named by the older `profile` key (or a one-element `profiles`)."""
        return self.profiles[0] if self.profiles and len(self.profiles) == 1 else None


_KEYS = (
    "select", "extend-select", "ignore", "per-file-ignores", "exclude", "extend-exclude",
    "profile", "profiles", "profile-files", "force-exclude", "extend-profile", "min-confidence",
    "respect-gitignore", "src",
)


def find_config(paths: Sequence[str], cwd: Path | None = None) -> Path | None:
    """The configuration file nearest to `paths` (their common ancestor; the current directory
    when empty)."""
    cwd = cwd or Path.cwd()
    return nearest_config(_common_directory([cwd / p for p in paths] or [cwd]))


def nearest_config(start: Path) -> Path | None:
    """The configuration file of `start` (an absolute directory) or of its nearest ancestor."""
    return next(filter(None, map(config_in, (start, *start.parents))), None)


def config_in(directory: Path) -> Path | None:
    """The configuration file of `directory` itself, if it has one."""
    standalone = directory / STANDALONE
    if standalone.is_file():
        return standalone
    pyproject = directory / PYPROJECT
    if pyproject.is_file() and _section(_read_toml(pyproject), pyproject) is not None:
        return pyproject
    return None


def project_config(paths: Sequence[str], cwd: Path | None = None) -> Path | None:
    """The configuration of the project a run belongs to: the one found from the working
    directory (as ruff finds its default settings), so that it does not depend on which of
    its files are named (pre-commit passes the staged ones); from the paths' common ancestor
    when they lie outside the working directory."""
    cwd = Path(os.path.abspath(cwd or Path.cwd()))
    inside = all(_within(Path(os.path.abspath(cwd / p)), cwd) for p in paths)
    return nearest_config(cwd) if inside else find_config(paths, cwd)


def resolve_config(paths: Sequence[str], explicit: str | None = None, cwd: Path | None = None) -> Config:
    """The project's configuration: the file `--config` names, else `project_config`'s (from
    `cwd`, by default the working directory), else the defaults. Raises `ConfigError`."""
    if explicit is not None:
        if not Path(explicit).is_file():
            raise ConfigError(f"--config: file '{explicit}' does not exist")
        return load_config(Path(explicit))
    found = project_config(paths, cwd)
    return load_config(found) if found else Config()


def load_config(path: Path) -> Config:
    """Read and check one configuration file (`pyproject.toml` or `commgroup-lint.toml`)."""
    data = _read_toml(path)
    if path.name == PYPROJECT:
        data = _section(data, path) or {}
        prefix = "tool.commgroup-lint."
    else:
        prefix = ""
    return _Parser(path, prefix).parse(data)


def anchor(pattern: str, root: Path) -> str:
    """`dir/sub` -> `/abs/root/dir/sub`; a bare name or glob (`build`, `*.py`) is kept as is."""
    stripped = pattern.rstrip("/").removeprefix("./")
    if "/" not in stripped:
        return stripped
    return Path(os.path.normpath(root / stripped)).as_posix()


def _common_directory(paths: Iterable[Path]) -> Path:
    resolved = [Path(os.path.abspath(p)) for p in paths]
    try:
        dirs = [p if p.is_dir() else p.parent for p in resolved]
    except OSError as err:  # a folder on the way that may not be searched
        raise ConfigError(f"cannot look for a configuration at '{err.filename}': {err.strerror or err}; "
                          "check the folder's permissions") from None
    return Path(os.path.commonpath([str(d) for d in dirs]))


def _section(data: dict[str, Any], path: Path) -> dict[str, Any] | None:
    """`[tool.commgroup-lint]` of a `pyproject.toml` (None when it has none); raises
    `ConfigError` when `tool` or the section is not a table."""
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: key 'tool' must be a table ([tool]), not {_kind(tool)}")
    section = tool.get(SECTION)
    if section is not None and not isinstance(section, dict):
        raise ConfigError(f"{path}: key 'tool.{SECTION}' must be a table ([tool.{SECTION}]), not {_kind(section)}")
    return section


def _kind(value: object) -> str:
    """How TOML names a value's type, for messages."""
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "an array"}
    return next((name for kind, name in names.items() if isinstance(value, kind)), type(value).__name__)


def _within(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = read_text(path)
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot be read: {getattr(err, 'strerror', None) or err}") from None
    try:
        return toml.loads(text)
    except toml.TOMLDecodeError as err:
        raise ConfigError(f"{path}: invalid TOML: {err}") from None


class _Parser:
    def __init__(self, path: Path, prefix: str) -> None:
        self.path, self.prefix = path, prefix
        self.root = Path(os.path.abspath(path)).parent

    def fail(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.path}: key '{self.prefix}{key}': {problem}")

    def parse(self, data: dict[str, Any]) -> Config:
        for key in data:
            if key not in _KEYS:
                hint = f"; did you mean '{key.replace('_', '-')}'?" if key.replace("_", "-") in _KEYS else ""
                raise self.fail(key, f"unknown key (expected one of: {', '.join(_KEYS)}){hint}")
        confidence = data.get("min-confidence")
        if confidence is not None and (not isinstance(confidence, str) or confidence not in {c.value for c in Confidence}):
            raise self.fail("min-confidence", "must be one of: high, medium, low")
        return Config(
            min_confidence=Confidence(confidence) if confidence is not None else None,
            path=self.path,
            select=self.codes(data, "select") if "select" in data else None,
            extend_select=self.codes(data, "extend-select"),
            ignore=self.codes(data, "ignore"),
            per_file_ignores=self.per_file_ignores(data),
            exclude=tuple(anchor(p, self.root) for p in self.strings(data, "exclude")) if "exclude" in data else DEFAULT_EXCLUDE,
            extend_exclude=tuple(anchor(p, self.root) for p in self.strings(data, "extend-exclude")),
            profiles=self.profiles(data),
            profile_files=self.profile_files(data),
            force_exclude=self.boolean(data, "force-exclude", False),
            extend_profile=self.extend_profile(data),
            respect_gitignore=self.boolean(data, "respect-gitignore", True),
            src=self.src(data) if "src" in data else DEFAULT_SRC,
        )

    def boolean(self, data: dict[str, Any], key: str, default: bool) -> bool:
        value = data.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, "must be true or false")
        return value

    def strings(self, data: dict[str, Any], key: str) -> tuple[str, ...]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, "must be a list of strings")
        return tuple(value)

    def src(self, data: dict[str, Any]) -> tuple[str, ...]:
        """The import roots: folders inside the project (a root outside it, `/` say, would have
        every check walk that folder)."""
        roots = self.strings(data, "src")
        project = os.path.realpath(self.root)
        for root in roots:
            inside = os.path.realpath(self.root / root)  # a link out of the project leaves it too
            if os.path.isabs(root) or not (inside == project or inside.startswith(project.rstrip(os.sep) + os.sep)):
                raise self.fail("src", f"'{root}' is not inside the project ({self.root}); list import roots as "
                                       "folders relative to this file, inside its folder")
        return roots

    def codes(self, data: dict[str, Any], key: str) -> tuple[str, ...]:
        codes = tuple(c.strip().upper() for c in self.strings(data, key))
        for code in codes:
            problem = unknown_code(code)
            if problem:
                raise self.fail(key, problem)
        return codes

    def per_file_ignores(self, data: dict[str, Any]) -> tuple[tuple[str, tuple[str, ...]], ...]:
        table = data.get("per-file-ignores", {})
        if not isinstance(table, dict):
            raise self.fail("per-file-ignores", "must be a table of glob = [codes]")
        entries = []
        for pattern, value in table.items():
            key = f'per-file-ignores."{pattern}"'
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise self.fail(key, "must be a list of rule codes")
            codes = tuple(c.strip().upper() for c in value)
            for code in codes:
                problem = unknown_code(code)
                if problem:
                    raise self.fail(key, problem)
            entries.append((anchor(pattern, self.root), codes))
        return tuple(entries)

    def profiles(self, data: dict[str, Any]) -> tuple[str, ...] | None:
        if "profile" in data and "profiles" in data:
            raise self.fail("profile", "set `profiles` (a list) or `profile` (one name), not both")
        if "profile" in data:
            if not isinstance(data["profile"], str):
                raise self.fail("profile", "must be a string")
            names: tuple[str, ...] = (data["profile"],)
            key = "profile"
        elif "profiles" in data:
            names, key = self.strings(data, "profiles"), "profiles"
        else:
            return None
        for name in names:
            if name not in shipped_profiles():
                raise self.fail(key, f"unknown profile '{name}' (shipped profiles: {', '.join(shipped_profiles())};"
                                     " your own engine goes in `profile-files`)")
        return tuple(names)

    def profile_files(self, data: dict[str, Any]) -> tuple[Profile, ...]:
        found = []
        for name in self.strings(data, "profile-files"):
            path = self.root / name
            try:
                found.append(parse_profile(toml.loads(read_text(path)), origin=str(path)))
            except OSError as err:
                raise self.fail("profile-files", f"cannot read '{path}': {err.strerror or err}") from None
            except UnicodeDecodeError:
                raise self.fail("profile-files", f"'{path}' is not UTF-8 text; save it as UTF-8") from None
            except toml.TOMLDecodeError as err:
                raise self.fail("profile-files", f"'{path}' is not valid TOML: {err}") from None
            except ProfileError as err:
                raise ConfigError(str(err)) from None
        return tuple(found)

    def extend_profile(self, data: dict[str, Any]) -> Profile | None:
        if "extend-profile" not in data:
            return None
        table = data["extend-profile"]
        if not isinstance(table, dict):
            raise self.fail("extend-profile", "must be a table in the shape of a shipped profile")
        head = table.get("profile")
        if isinstance(head, dict) and "extends" in head:
            raise self.fail("extend-profile.profile.extends",
                            "is not read in `extend-profile`, whose entries are added to the profiles the run "
                            "selects: name shipped profiles in `profiles`, or give your engine its own profile "
                            "file (listed in `profile-files`), where `extends` is read")
        try:
            return parse_profile(table, origin=str(self.path), prefix=f"{self.prefix}extend-profile.")
        except ProfileError as err:
            raise ConfigError(str(err)) from None


def configured_profile(config: Config, names: Sequence[str] | None = None) -> Profile:
    """The profile a run uses: the shipped profiles named (by `names`, else the configuration,
    else all of them, each with the profiles it extends), the user's own engine profiles, then
    `extend-profile`, whose entries no scanned definition overrides."""
    chosen = list(names) if names else list(config.profiles or shipped_profiles())
    bases = [name for p in config.profile_files for name in p.extends]
    profile = load_profiles([*chosen, *bases])
    for own in config.profile_files:
        profile = profile.merged(own)
    return profile.merged(config.extend_profile, pin=True) if config.extend_profile else profile


def unknown_code(code: str) -> str | None:
    """Why `code` (a code or a prefix such as `CGL0`) names no rule, or None when it does."""
    known = [r.code for r in all_rules().rules]
    if code.startswith("CGL") and any(k.startswith(code) for k in known):
        return None
    return f"unknown rule code '{code}' (known: {', '.join(known)})"
