"""Which findings each file reports: the nearest configuration's selection, as ruff resolves it.

A file reports as the configuration nearest to it says (its `select`, `extend-select`,
`ignore`, `per-file-ignores` and `min-confidence`), with the command line's options on top,
so that its findings do not depend on what else is checked with it. What the analysis reads
(profiles, the project context, the cache, excludes) is the project's, decided once per run
by the project's configuration (see `config.project_config`). `--config` names the one
configuration every file uses.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from commgroup_lint.config import Config, config_in, load_config
from commgroup_lint.model import Confidence, FileScope
from commgroup_lint.options import resolve_selection


@dataclass(frozen=True)
class SelectionOptions:
    """The command line's say over every file's selection (empty or None: not given)."""

    select: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    min_confidence: Confidence | None = None

    def scope(self, config: Config) -> FileScope:
        """`config`'s scope with these options applied, as ruff applies its own."""
        return FileScope(
            selection=resolve_selection(config, self.select, self.extend_select, self.ignore),
            per_file_ignores=config.per_file_ignores,
            min_confidence=self.min_confidence or config.min_confidence or Confidence.MEDIUM,
        )


def scopes_of(displays: Iterable[str], project: Config, options: SelectionOptions) -> dict[str, FileScope]:
    """The scope of each of `displays` whose nearest configuration is not `project`'s (the
    others report as the run's own settings say). Raises `ConfigError` for a bad one.
    Nothing is remembered between calls: the language server sees a configuration edited."""
    project_path = Path(os.path.abspath(project.path)) if project.path is not None else None
    nearest: dict[Path, Path | None] = {}
    loaded: dict[Path, FileScope] = {}
    found: dict[str, FileScope] = {}

    def nearest_to(directory: Path) -> Path | None:  # each directory looked at once, not once per file under it
        if directory not in nearest:
            parent = directory.parent
            nearest[directory] = config_in(directory) or (nearest_to(parent) if parent != directory else None)
        return nearest[directory]

    for display in displays:
        path = nearest_to(Path(os.path.abspath(display)).parent)
        if path is not None and path != project_path:
            if path not in loaded:
                loaded[path] = options.scope(load_config(path))
            found[display] = loaded[path]
    return found
