"""``python -m commgroup_lint.runtime [--mode M] script.py [args]`` (or ``-m module``):
run a program with the shim installed, like ``coverage run``. Works under ``torchrun -m``."""

from __future__ import annotations

import argparse
import os
import runpy
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m commgroup_lint.runtime")
    parser.add_argument("--mode", default=os.environ.get("COMMGROUP_LINT_RUNTIME") or "warn",
                        choices=("assert", "warn", "report"))
    parser.add_argument("-m", dest="module", action="store_true", help="run target as a module")
    parser.add_argument("target")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    os.environ["COMMGROUP_LINT_RUNTIME"] = ns.mode
    from ._process import install_process_wide

    install_process_wide(ns.mode)
    sys.argv = [ns.target, *ns.args]
    if ns.module:
        runpy.run_module(ns.target, run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(ns.target, run_name="__main__")


if __name__ == "__main__":
    main()
