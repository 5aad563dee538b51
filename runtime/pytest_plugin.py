"""pytest plugin (entry point ``pytest11``): the runtime shim in tests.

* The session's mode: ``--commgroup-runtime=assert|warn|report|off``, else
  ``COMMGROUP_LINT_RUNTIME``, else the ini option ``commgroup_runtime``. A bad value on the
  command line or in the ini file is a usage error; a bad value in the environment is a
  warning, and the shim stays off. ``--commgroup-runtime-profile`` (ini
  ``commgroup_runtime_profile``) selects profiles.
* ``@pytest.mark.commgroup_runtime("assert")``: that mode for one test.
* The fixture ``commgroup_violations``: the violations recorded during the test, as they come
  (the shim is turned on in ``report`` mode for the test when nothing else turned it on).
* A violation recorded in ``assert`` mode fails the test during which it happened, in this
  process or in a child process the test started (children inherit the mode and append to
  the runtime log, which the plugin reads after each phase of each test); ``warn`` mode
  violations of children are issued as warnings in the test, at the user's line.
* At the end, a ``commgroup-lint runtime`` section lists every violation (printed by rank 0
  only, when pytest runs under ``torchrun``).

Nothing is imported while the shim is off: torch is not needed for pytest to start, and
the shim is installed when the tests import torch.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, cast

import pytest

from ._report import CommGroupRuntimeWarning, Violation, format_summary
from ._settings import ENV_VAR, LOG_ENV_VAR, MODES, PROFILE_ENV_VAR, parse_switch

_PLUGIN = "commgroup-runtime"
_CHOICES = (*MODES, "off")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("commgroup-lint")
    group.addoption(
        "--commgroup-runtime", dest="commgroup_runtime", default=None, choices=_CHOICES,
        help="run the tests under commgroup-lint's runtime shim (default: $COMMGROUP_LINT_RUNTIME, "
        "then the ini option commgroup_runtime); assert mode fails the test where a violation happens",
    )
    group.addoption(
        "--commgroup-runtime-profile", dest="commgroup_runtime_profile", default=None,
        help="comma-separated profiles for the runtime shim (default: detection, see docs/runtime.md)",
    )
    parser.addini("commgroup_runtime", "commgroup-lint runtime shim mode: assert, warn, report or off", default="")
    parser.addini("commgroup_runtime_profile", "profiles for commgroup-lint's runtime shim", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "commgroup_runtime(mode): run this test under commgroup-lint's runtime shim in `mode`"
    )
    config.pluginmanager.register(_Runtime(config, _session_mode(config), _profile(config)), _PLUGIN)


def _session_mode(config: pytest.Config) -> str | None:
    option = config.getoption("commgroup_runtime")
    if option is not None:
        return parse_switch(option)
    env = os.environ.get(ENV_VAR)
    if env is not None:
        try:
            return parse_switch(env)
        except ValueError as exc:
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(f"{ENV_VAR}: {exc}; the runtime shim stays off"), stacklevel=2)
            return None
    try:
        return parse_switch(config.getini("commgroup_runtime"))
    except ValueError as exc:
        raise pytest.UsageError(f"ini option commgroup_runtime: {exc}") from None


def _profile(config: pytest.Config) -> str | None:
    return config.getoption("commgroup_runtime_profile") or config.getini("commgroup_runtime_profile") or None


class RuntimeViolations(Sequence):
    """The violations recorded during one test, read from the runtime log on each access."""

    def __init__(self, runtime: _Runtime, item: pytest.Item) -> None:
        self._runtime, self._item = runtime, item

    def _records(self) -> list[dict[str, Any]]:
        self._runtime.poll()
        return self._runtime.records.get(self._item.nodeid, [])

    def __getitem__(self, index: Any) -> Any:
        found = [Violation.from_dict(r) for r in self._records()]
        return found[index]

    def __len__(self) -> int:
        return len(self._records())

    def __repr__(self) -> str:
        return f"RuntimeViolations({list(self)!r})"


class _Runtime:
    """The plugin's state: the session's mode, the log, and which test is running."""

    def __init__(self, config: pytest.Config, mode: str | None, profile: str | None) -> None:
        self.config = config
        self.mode = mode
        self.profile = profile
        self.log: str | None = None
        self.own_log = False
        self.offset = 0
        self.saved_env: dict[str, str | None] = {}
        self.current: str | None = None  # the nodeid records are attributed to
        self.records: dict[str, list[dict[str, Any]]] = {}
        self.unattributed: list[dict[str, Any]] = []
        self.test_shim: Any = None
        if mode is not None:
            self._start(mode, profile)

    # -- the shim and the log --------------------------------------------------------------
    def _start(self, mode: str, profile: str | None) -> None:
        """Name the log and the mode for this process and its children, and install the
        shim once torch is imported."""
        self._ensure_log()
        self._setenv(ENV_VAR, mode)
        if profile:
            self._setenv(PROFILE_ENV_VAR, profile)
        from ._startup import install_when_torch_imported

        install_when_torch_imported(mode, profile, summary=False)

    def _ensure_log(self) -> None:
        if self.log is not None:
            return
        self.log = os.environ.get(LOG_ENV_VAR)
        if not self.log:  # under torchrun, set it to gather the ranks' violations in one file
            fd, self.log = tempfile.mkstemp(prefix="commgroup-runtime-", suffix=".jsonl")
            os.close(fd)
            self.own_log = True
            self._setenv(LOG_ENV_VAR, self.log)
        self.offset = os.path.getsize(self.log) if os.path.exists(self.log) else 0

    def _setenv(self, key: str, value: str) -> None:
        self.saved_env.setdefault(key, os.environ.get(key))
        os.environ[key] = value

    def poll(self) -> list[dict[str, Any]]:
        """Read what was logged since the last poll and attribute it to the running test."""
        if self.log is None:
            return []
        from ._log import read

        new, self.offset = read(self.log, self.offset)
        if new:
            target = self.records.setdefault(self.current, []) if self.current else self.unattributed
            target.extend(new)
        return new

    # -- per test ----------------------------------------------------------------------------
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any) -> Iterator[None]:
        self.poll()
        self.current = item.nodeid
        shim = sys.modules.get("commgroup_lint.runtime._shim")
        if shim is not None:  # a violation seen in an earlier test is this test's too
            shim.forget_seen()
        marker = item.get_closest_marker("commgroup_runtime")
        wants = parse_switch(marker.args[0] if marker and marker.args else "report") if marker else None
        if wants is None and "commgroup_violations" in getattr(item, "fixturenames", ()) and self.mode is None:
            wants = "report"
        saved = self._enter_test_mode(wants) if wants else None
        try:
            yield
        finally:
            if saved is not None:
                self._exit_test_mode(saved)
            self.current = None

    def _enter_test_mode(self, mode: str) -> dict[str, str | None]:
        """The shim in ``mode`` for this test and the children it starts; returns the
        environment to restore."""
        self._ensure_log()
        saved = {key: os.environ.get(key) for key in (ENV_VAR, PROFILE_ENV_VAR)}
        os.environ[ENV_VAR] = mode
        if self.profile:
            os.environ[PROFILE_ENV_VAR] = self.profile
        from ._shim import enforce

        self.test_shim = enforce(mode, profile=self.profile)
        self.test_shim.__enter__()
        return saved

    def _exit_test_mode(self, saved_env: dict[str, str | None]) -> None:
        shim, self.test_shim = self.test_shim, None
        if shim is not None:
            shim.__exit__(None, None, None)
        _restore(saved_env)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
        outcome: Any = yield
        report = outcome.get_result()
        new = self.poll()
        pid = os.getpid()
        for record in new:
            if record.get("mode") == "warn" and record.get("pid") != pid:  # a child's warning
                warnings.warn_explicit(record["message"], CommGroupRuntimeWarning, record["path"], record["line"])
        failing = [r for r in new if r.get("mode") == "assert"]
        if not failing:
            return
        text = format_summary([Violation.from_dict(r) for r in failing])
        if report.passed:
            report.outcome = "failed"
            report.longrepr = text
        else:
            report.sections.append(("commgroup-lint runtime", text))

    # -- end of session ----------------------------------------------------------------------
    def all_records(self) -> list[dict[str, Any]]:
        self.poll()
        return [r for records in self.records.values() for r in records] + self.unattributed

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.mode == "assert" and session.exitstatus == 0 and any(
                r.get("mode") == "assert" for r in self.all_records()):
            session.exitstatus = 1  # violations outside any test (collection, a late child)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.log is None or os.environ.get("RANK", "0") != "0":  # torchrun: rank 0 prints
            return
        from ._log import merged

        terminalreporter.section("commgroup-lint runtime")
        found = []
        for r in merged(self.all_records()):
            ranks = r.pop("ranks")
            found.append(Violation.from_dict({**r, "rank": ranks[0] if len(ranks) == 1 else None}))
        terminalreporter.write_line(format_summary(found))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        _restore(self.saved_env)
        if self.own_log and self.log:
            try:
                os.unlink(self.log)
            except OSError:
                pass


def _restore(saved_env: dict[str, str | None]) -> None:
    """The environment variables as they were (None: unset)."""
    for key, value in saved_env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def commgroup_violations(request: pytest.FixtureRequest) -> RuntimeViolations:
    """The runtime shim's violations recorded during this test (this process and its
    children), as they are recorded."""
    return RuntimeViolations(cast(_Runtime, request.config.pluginmanager.get_plugin(_PLUGIN)), request.node)
