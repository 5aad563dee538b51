#!/usr/bin/env python3
"""Check a tree again and compare its findings with a saved JSON report of it.

    python -m commgroup_lint check --no-cache --output-format json TREE > saved.json   # once, before a change
    python scripts/compare_findings.py saved.json TREE            # after it: exit 0 when the same
    python scripts/compare_findings.py saved.json TREE -- --select CGL002

A finding is its code, file, line, column and message (paths relative to TREE, so a report
saved from another copy of the tree compares too). Prints what was lost and what is new;
exits 1 when anything differs. The check runs as `check --no-cache --output-format json` in a
fresh interpreter; arguments after `--` are passed to it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

Key = tuple[str, str, int, int, str]


def keys(report: list[dict], tree: Path) -> Counter[Key]:
    """The findings of a JSON report, as comparable keys."""
    root = os.path.abspath(tree)

    def relative(path: str) -> str:
        absolute = os.path.abspath(path)
        return os.path.relpath(absolute, root) if absolute.startswith(root + os.sep) else path

    return Counter((f["code"], relative(f["path"]), f["line"], f["column"], f["message"]) for f in report)


def check(tree: Path, extra: list[str]) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "commgroup_lint", "check", "--no-cache", "--output-format", "json",
                           *extra, str(tree)], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"check failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("saved", type=Path, help="a JSON report of TREE (`check --output-format json`)")
    parser.add_argument("tree", type=Path)
    parser.add_argument("extra", nargs="*", help="after `--`: arguments for `check`")
    args = parser.parse_args(argv)
    saved = keys(json.loads(args.saved.read_text()), args.tree)
    now = keys(check(args.tree, args.extra), args.tree)
    lost, new = saved - now, now - saved
    for label, found in (("lost", lost), ("new", new)):
        for code, path, line, column, message in sorted(found.elements()):
            print(f"{label}: {code} {path}:{line}:{column}: {message}")
    print(f"{args.tree}: {sum(saved.values())} saved, {sum(now.values())} now, "
          f"{sum(lost.values())} lost, {sum(new.values())} new")
    return 1 if lost or new else 0


if __name__ == "__main__":
    sys.exit(main())
