"""What a run checks and how: a configuration file with the command line's overrides applied.

The command line and the language server both go through `Settings`, so an editor sees the
findings `check` prints: the same selection, profile, excludes, project context and cache.
Each file reports as its nearest configuration says (see `scopes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from commgroup_lint.analysis.api import quantities
from commgroup_lint.analysis.derived_facts import derived
from commgroup_lint.cache import Cache, cache_directory, cache_key
from commgroup_lint.config import Config, configured_profile
from commgroup_lint.discovery import Discovered, discover, is_skipped
from commgroup_lint.engine import Linter, LintResult
from commgroup_lint.fact_citations import CitedFiles, stale
from commgroup_lint.git import IgnoreRules
from commgroup_lint.model import Confidence, FileScope, RuleSelection
from commgroup_lint.profile import Profile
from commgroup_lint.project import context_files, import_roots, project_root
from commgroup_lint.scopes import SelectionOptions, scopes_of


def profile_names(option: str | None) -> list[str] | None:
    """The shipped profiles a comma-separated `--profile` names; None when it names none."""
    names = [n.strip() for n in option.split(",") if n.strip()] if option else []
    return names or None


@dataclass(frozen=True)
class Settings:
    config: Config
    profile: Profile
    selection: RuleSelection
    exclude: tuple[str, ...]  # anchored patterns (see `config.anchor`)
    force_exclude: bool
    respect_gitignore: bool
    root: Path | None  # the project root (see `project`); None: no project
    frontend: str = "ast"
    cache: bool = True
    min_confidence: Confidence = Confidence.MEDIUM
    options: SelectionOptions = SelectionOptions()  # the command line's, applied to every file's configuration
    per_file: bool = True  # False: `--config` names the configuration of every file

    @classmethod
    def resolve(cls, config: Config, paths: Sequence[str], *, select: tuple[str, ...] = (),
                extend_select: tuple[str, ...] = (), ignore: tuple[str, ...] = (),
                exclude: tuple[str, ...] | None = None, extend_exclude: tuple[str, ...] = (),
                force_exclude: bool | None = None, respect_gitignore: bool | None = None,
                profile: str | None = None, frontend: str = "ast", cache: bool = True,
                min_confidence: Confidence | None = None, per_file: bool = True) -> Settings:
        """`config` overridden by what was given (None or empty: not given); `profile` names
        shipped profiles, comma-separated. Raises `ProfileError` for an unknown profile."""
        names = profile_names(profile)
        options = SelectionOptions(select, extend_select, ignore, min_confidence)
        own = options.scope(config)
        return cls(
            config=config,
            profile=configured_profile(config, names),
            selection=own.selection,
            exclude=(exclude if exclude is not None else config.exclude) + config.extend_exclude + extend_exclude,
            force_exclude=config.force_exclude if force_exclude is None else force_exclude,
            respect_gitignore=config.respect_gitignore if respect_gitignore is None else respect_gitignore,
            root=project_root(config, paths),
            frontend=frontend,
            cache=cache,
            min_confidence=own.min_confidence,
            options=options,
            per_file=per_file,
        )

    def discover(self, paths: Sequence[str]) -> list[Discovered]:
        """The files to check under `paths`; raises `PathNotFound`."""
        return discover(paths, self.exclude, self.force_exclude, self.respect_gitignore)

    def skips(self, name: str) -> bool:
        """Whether a file named directly is excluded, or ignored by git (what `--force-exclude`
        applies to named files)."""
        return is_skipped(name, self.exclude, IgnoreRules() if self.respect_gitignore else None)

    def context(self, paths: Sequence[str]) -> list[Discovered]:
        """The project's other files, which the index reads for the helpers those under `paths` use."""
        if self.root is None:
            return []
        roots = import_roots(self.root, self.config.src)
        return context_files(roots, paths, self.exclude, self.respect_gitignore)

    def scopes(self, files: Sequence[Discovered]) -> dict[str, FileScope]:
        """The files whose nearest configuration is not the project's, with their scopes.
        Raises `ConfigError`."""
        return scopes_of((f.display for f in files), self.config, self.options) if self.per_file else {}

    def linter(self, scopes: dict[str, FileScope] | None = None) -> Linter:
        linter = Linter(self.profile, self.selection, per_file_ignores=self.config.per_file_ignores,
                        frontend=self.frontend, min_confidence=self.min_confidence, scopes=scopes or {})
        linter.root = str(self.root) if self.root is not None else None
        if self.cache:
            linter.cache = Cache(cache_directory(self.root), cache_key(*linter.cache_settings()))
        return linter

    def lint(self, paths: Sequence[str], files: Sequence[Discovered]) -> tuple[Linter, LintResult]:
        """Check `files` (found under `paths`) with the rest of the project as context, each
        reporting as its nearest configuration says. Raises `ConfigError`."""
        context = self.context(paths)
        linter = self.with_engine_facts([*files, *context]).linter(self.scopes(files))
        return linter, linter.lint(files, context=context)

    def with_engine_facts(self, files: Sequence[Discovered]) -> Settings:
        """These settings with the facts the engine's own checks state in `files` added (see
        `analysis.derived_facts`), and without the typed facts whose cited code is among
        `files` but no longer holds their evidence (another release: see `fact_citations`)."""
        checks, on_disk = self.profile.engine_checks, [f.path for f in files if f.content is None]
        found = tuple(derived(checks, on_disk, quantities(self.profile))) if checks.validation or checks.initialisers else ()
        cited = CitedFiles()
        kept = tuple(f for f in self.profile.facts if not stale(f, on_disk, cited))
        if not found and len(kept) == len(self.profile.facts):
            return self
        return replace(self, profile=replace(self.profile, facts=kept + found))
