"""``python -m docs.gen [--check]``: write the generated pages, or only check them."""

from __future__ import annotations

import argparse
import sys

from docs.gen import COMMAND, stale, write


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m docs.gen", description=__doc__)
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a page is out of date"
    )
    args = parser.parse_args()
    if args.check:
        outdated = stale()
        for name in outdated:
            print(f"docs/{name} is out of date: run {COMMAND}", file=sys.stderr)
        return 1 if outdated else 0
    for name in write():
        print(f"wrote docs/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
