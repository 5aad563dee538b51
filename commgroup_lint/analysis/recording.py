"""Which entries of the `Api` an analysis looked up, so that its result can be reused.

The dataflow of a module is a function of the module's IR and of what the `Api` answers for
the names it asks about. While recording, every answer is logged; a logged analysis stays
valid for as long as every logged name still gets the same answer (summaries installed
since then changed nothing it asked about). This is what lets the summary fixpoint
re-analyse only the modules whose callees changed, and a warm run reuse a cached result.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from commgroup_lint.analysis.api import Api, _Table

# table name -> {looked-up name: the answer}
Lookups = dict[str, dict[str, Any]]


class Recorder:
    """Wraps the lookup tables of one `Api` (per instance; the class is left alone)."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._log: Lookups | None = None
        self._plain: dict[str, Any] = {}
        self._answers: dict[str, dict[str, Any]] = {}  # the answers now, for `valid`
        for name, table in vars(api).items():
            if isinstance(table, _Table):
                self._wrap(name, table)

    def _wrap(self, name: str, table: _Table) -> None:
        plain = table.get  # the bound method of the class
        self._plain[name] = plain

        def get(key: str, _plain=plain, _name=name):  # noqa: ANN001, ANN202
            found = _plain(key)
            log = self._log
            if log is not None:
                log[_name][key] = found
            return found

        table.get = get  # type: ignore[method-assign,assignment]

    @contextmanager
    def recording(self, into: Lookups | None = None) -> Iterator[Lookups]:
        """Log every lookup made inside the block (into `into`, extended, when given)."""
        log: Lookups = into if into is not None else {}
        for name in self._plain:
            log.setdefault(name, {})
        outer, self._log = self._log, log
        try:
            yield log
        finally:
            self._log = outer

    def changed(self) -> None:
        """The `Api` was changed (summaries installed): forget the answers remembered for `valid`."""
        self._answers.clear()

    def valid(self, lookups: Lookups) -> bool:
        """Whether every logged lookup still gets the same answer."""
        answers = self._answers
        for name, entries in lookups.items():
            plain = self._plain.get(name)
            if plain is None:
                if entries:
                    return False
                continue
            known = answers.setdefault(name, {})
            for key, value in entries.items():
                try:
                    now = known[key]
                except KeyError:
                    now = known[key] = plain(key)
                if now != value:
                    return False
        return True


def merged(*logs: Lookups) -> Lookups:
    out: Lookups = {}
    for log in logs:
        for name, entries in log.items():
            out.setdefault(name, {}).update(entries)
    return out
