"""Write docs/rules/CGLxxx.md for every rule, from the rule modules; remove pages of rules that
no longer exist. `--check` writes nothing and exits 1 when the pages are out of date.

    python scripts/generate_rule_docs.py          # after adding or changing a rule
    python scripts/generate_rule_docs.py --check  # in CI (tests/test_docs.py does the same)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from commgroup_lint.docs import drift, write_pages

DEFAULT = Path(__file__).resolve().parent.parent / "docs" / "rules"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report pages that differ; exit 1 if any")
    parser.add_argument("--directory", type=Path, default=DEFAULT, help="where the pages live (default: docs/rules)")
    args = parser.parse_args(argv)
    if args.check:
        problems = drift(args.directory)
        for line in problems:
            print(line)
        return 1 if problems else 0
    for path in write_pages(args.directory):
        print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
