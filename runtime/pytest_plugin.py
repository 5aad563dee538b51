"""pytest plugin (entry point ``pytest11``): ``--commgroup-runtime=assert|warn|report``.

Installs the shim for the whole test session (default: ``COMMGROUP_LINT_RUNTIME``),
prints a summary of violations at the end -- including those of child processes that
imported ``commgroup_lint.runtime`` (they inherit ``COMMGROUP_LINT_RUNTIME`` and write to
the log file the plugin names in ``COMMGROUP_LINT_RUNTIME_LOG``) -- and fails the session
in ``assert`` mode when there were any. Without the option nothing is imported: torch
is not needed for pytest to start.
"""

from __future__ import annotations

import json
import os
import tempfile

from ._report import MODES, format_summary

_KEY = "commgroup_runtime_state"


def pytest_addoption(parser):
    group = parser.getgroup("commgroup-lint")
    group.addoption(
        "--commgroup-runtime",
        action="store",
        dest="commgroup_runtime",
        default=None,
        choices=MODES,
        help="install commgroup-lint's runtime shim for the session "
        "(default: $COMMGROUP_LINT_RUNTIME); assert mode fails the session on violations",
    )


def pytest_configure(config):
    mode = config.getoption("commgroup_runtime") or os.environ.get("COMMGROUP_LINT_RUNTIME") or None
    if not mode or mode not in MODES:
        return
    from . import _process

    installed = _process.install_process_wide(mode)
    if installed is None:
        return
    _process._STATE["in_pytest"] = True
    fd, log = tempfile.mkstemp(prefix="commgroup-runtime-", suffix=".jsonl")
    os.close(fd)
    state = {"mode": installed, "log": log, "saved_env": {
        k: os.environ.get(k) for k in ("COMMGROUP_LINT_RUNTIME", "COMMGROUP_LINT_RUNTIME_LOG")}}
    os.environ["COMMGROUP_LINT_RUNTIME"] = installed
    os.environ["COMMGROUP_LINT_RUNTIME_LOG"] = log
    config.stash_commgroup = state  # type: ignore[attr-defined]


def _state(config):
    return getattr(config, "stash_commgroup", None)


def _collect(state):
    from . import _process

    found = [v.as_dict() for v in _process.process_violations()]
    try:
        with open(state["log"], encoding="utf-8") as fh:
            found += [json.loads(line) for line in fh if line.strip()]
    except OSError:
        pass
    seen, unique = set(), []
    for v in found:
        key = (v["code"], v["path"], v["line"], v.get("collective_path"), v.get("collective_line"))
        if key not in seen:
            seen.add(key)
            unique.append(v)
    return unique


def pytest_sessionfinish(session, exitstatus):
    state = _state(session.config)
    if state is None:
        return
    state["found"] = _collect(state)
    if state["found"] and state["mode"] == "assert" and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = _state(config)
    if state is None:
        return
    found = state.get("found")
    if found is None:
        found = state["found"] = _collect(state)
    terminalreporter.section("commgroup-lint runtime")
    from ._report import Violation

    terminalreporter.write_line(format_summary([Violation(**{k: v[k] for k in (
        "code", "message", "path", "line", "collective", "collective_path", "collective_line",
        "buffer_group", "collective_group", "rank")}) for v in found]))


def pytest_unconfigure(config):
    state = _state(config)
    if state is None:
        return
    for k, v in state["saved_env"].items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        os.unlink(state["log"])
    except OSError:
        pass
