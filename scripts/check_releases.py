#!/usr/bin/env python3
"""Run the engine over whole SGLang trees with the gate off: every file read, parsed and analysed.

    python scripts/check_releases.py --base RELEASES 0.5.8 0.5.13 0.5.23   # RELEASES/<v>/sglang or RELEASES/sglang-<v>/sglang
    python scripts/check_releases.py --root /path/to/sglang/python/sglang

Prints, per tree: files, files parsed, CGL000 findings (with their reasons), other findings,
internal errors (rule, file, error) and the time; then each shipped configuration fact that no
longer matches the code it cites in that tree (see `commgroup_lint.fact_citations`). Exits 1
on a crash or an internal error.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

from commgroup_lint.discovery import discover
from commgroup_lint.engine import Linter
from commgroup_lint.fact_citations import CitedFiles, citation_problem
from commgroup_lint.profile import load_shipped


def check_tree(root: Path, gate: bool) -> dict:
    started = time.perf_counter()
    files = discover([str(root)])
    linter = Linter(load_shipped("sglang"), gate=gate)
    try:
        result = linter.lint(files)
    except BaseException:  # noqa: BLE001 - the point of this script is to see it
        return {"root": str(root), "files": len(files), "crash": traceback.format_exc(),
                "seconds": time.perf_counter() - started}
    unreadable = [f for f in result.findings if f.code == "CGL000"]
    return {
        "root": str(root),
        "files": result.files_checked,
        "cgl000": unreadable,
        "findings": Counter(f.code for f in result.findings if f.code != "CGL000"),
        "internal_errors": result.internal_errors,
        "seconds": time.perf_counter() - started,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", help="release versions under --base (default: all found there)")
    parser.add_argument("--base", type=Path,
                        help="a directory of unpacked releases: <version>/sglang or sglang-<version>/sglang")
    parser.add_argument("--root", type=Path, action="append", default=[], help="a tree to check (repeatable)")
    parser.add_argument("--gate", action="store_true", help="keep the allocator gate on (as the CLI runs)")
    args = parser.parse_args(argv)
    roots = list(args.root)
    if args.base is None:
        if args.versions or not roots:
            parser.error("give --base RELEASES (holding <version>/sglang) or --root TREE")
        versions = []
    else:
        versions = args.versions or sorted(p.name.removeprefix("sglang-") for p in args.base.iterdir()
                                           if (p / "sglang").is_dir())
    for version in versions:
        found = [t for t in (args.base / version / "sglang", args.base / f"sglang-{version}" / "sglang") if t.is_dir()]
        if not found:
            parser.error(f"no {version}/sglang or sglang-{version}/sglang under {args.base}")
        roots.append(found[0])
    failed = False
    print(f"{'tree':<48} {'files':>6} {'CGL000':>6} {'findings':>8} {'internal':>8} {'seconds':>8}")
    for root in roots:
        r = check_tree(root, args.gate)
        name = str(root.relative_to(args.base)) if args.base and root.is_relative_to(args.base) else str(root)
        if "crash" in r:
            failed = True
            print(f"{name:<48} {r['files']:>6}  CRASH after {r['seconds']:.1f}s\n{r['crash']}")
            continue
        failed |= bool(r["internal_errors"])
        print(f"{name:<48} {r['files']:>6} {len(r['cgl000']):>6} {sum(r['findings'].values()):>8} "
              f"{len(r['internal_errors']):>8} {r['seconds']:>8.1f}")
        for f in r["cgl000"]:
            print(f"    CGL000 {f.path}:{f.start.line}: {f.message}")
        for e in r["internal_errors"]:
            print(f"    internal error: {e.rule} on {e.path}: {e.error}")
        if r["findings"]:
            print("    findings: " + ", ".join(f"{code} {n}" for code, n in sorted(r["findings"].items())))
        cited = CitedFiles()
        for fact in load_shipped("sglang").facts:
            problem = citation_problem(fact, root, cited)
            if problem:
                print(f"    stale fact `{fact.name}`: {problem}")
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
