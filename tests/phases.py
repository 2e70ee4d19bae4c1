"""Run `make test`'s phases one after the other and print how long each took.

    python tests/phases.py "NAME" "SHELL COMMAND" ["NAME" "SHELL COMMAND" ...]

Every phase runs even if an earlier one failed (so one run reports everything), except that a
phase whose NAME starts with "book" is skipped when the book build failed. The exit status is
0 only if every phase passed.
"""

from __future__ import annotations

import subprocess
import sys
import time


def run(phases: list[tuple[str, str]]) -> int:
    results = []
    for name, command in phases:
        if (
            name != "book"
            and name.startswith("book")
            and any(n == "book" and rc for n, rc, _ in results)
        ):
            results.append((name, None, 0.0))
            continue
        start = time.monotonic()
        rc = subprocess.call(command, shell=True)
        results.append((name, rc, time.monotonic() - start))
    print_table(results)
    return 0 if all(rc == 0 for _, rc, _ in results) else 1


def print_table(results) -> None:
    width = max(len(name) for name, _, _ in results)
    print("\nmake test, phase by phase:")
    for name, rc, seconds in results:
        status = (
            "skipped (the book did not build)"
            if rc is None
            else "passed"
            if rc == 0
            else f"FAILED (exit {rc})"
        )
        print(f"  {name:<{width}}  {seconds:7.1f} s  {status}")
    total = sum(seconds for _, _, seconds in results)
    print(f"  {'total':<{width}}  {total:7.1f} s  ({total / 60:.1f} min)")


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or len(args) % 2:
        sys.exit(__doc__)
    sys.exit(run(list(zip(args[::2], args[1::2]))))
