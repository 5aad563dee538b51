"""``python -m commgroup_lint.runtime [--mode M] [--profile P] script.py [args]`` (or ``-m
module``): run a program with the shim installed, like ``coverage run``; works under
``torchrun -m``. Where the package is installed, ``COMMGROUP_LINT_RUNTIME`` does the same for
every process without this wrapper."""

from __future__ import annotations

import argparse
import os
import runpy
import sys

from ._settings import ENV_VAR, MODES, PROFILE_ENV_VAR


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m commgroup_lint.runtime")
    parser.add_argument("--mode", default=os.environ.get(ENV_VAR) or "warn", choices=MODES)
    parser.add_argument("--profile", default=os.environ.get(PROFILE_ENV_VAR),
                        help="comma-separated profile names (default: detection, see docs/runtime.md)")
    parser.add_argument("-m", dest="module", action="store_true", help="run target as a module")
    parser.add_argument("target")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    os.environ[ENV_VAR] = ns.mode  # the program's own children inherit the shim
    if ns.profile:
        os.environ[PROFILE_ENV_VAR] = ns.profile
    from ._process import install_process_wide

    install_process_wide(ns.mode)
    sys.argv = [ns.target, *ns.args]
    if ns.module:
        runpy.run_module(ns.target, run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(ns.target, run_name="__main__")


if __name__ == "__main__":
    main()
