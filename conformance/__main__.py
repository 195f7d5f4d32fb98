"""``python -m conformance``: a table per fixture family; non-zero exit on any failure."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from conformance.runner import DEFAULT_FIXTURES, run_all


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance", description=__doc__)
    parser.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES,
                        help="directory of fixture files in the same format (default: the bundled ones)")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    parser.add_argument("--family", action="append", help="run only this family (repeatable)")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("RIVER_TEST_DATABASE_URL"),
        help="Postgres URL for the schema_postgres family (default: $RIVER_TEST_DATABASE_URL)",
    )
    parser.add_argument(
        "--upstream",
        type=Path,
        default=None,
        help="directory of River's own goldens (default: $RIVER_UPSTREAM_DIR or ../shared/river-upstream)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print every failure in full")
    args = parser.parse_args(argv)

    options = {"database_url": args.database_url, "upstream_dir": args.upstream}
    results = run_all(args.fixtures, args.family, options)
    ok = all(r.failed == 0 for r in results)
    if args.json:
        print(json.dumps({
            "ok": ok,
            "families": {
                r.name: {"cases": r.cases, "passed": r.passed, "failed": r.failed, "skipped": r.skipped,
                         "missing": r.missing, "notes": r.notes,
                         "failures": [{"id": i, "problem": p} for i, p in r.failures]}
                for r in results
            },
        }, indent=2))
    else:
        width = max(len(r.name) for r in results) if results else 6
        print(f"{'family':<{width}}  {'cases':>6}  {'passed':>6}  {'failed':>6}  {'skipped':>7}")
        for r in results:
            status = "  missing" if r.missing else ""
            print(f"{r.name:<{width}}  {r.cases:>6}  {r.passed:>6}  {r.failed:>6}  {r.skipped:>7}{status}")
        for r in results:
            for note in r.notes:
                print(f"\nNOTE {r.name}: {note}")
        for r in results:
            for case_id, problem in r.failures[: None if args.verbose else 5]:
                print(f"\nFAIL {r.name} {case_id}\n{problem}")
            if not args.verbose and r.failed > 5:
                print(f"\n... {r.failed - 5} more failures in {r.name} (use -v)")
        missing = [r.name for r in results if r.missing]
        passed = "\nall families passed"
        if missing:
            passed += f" ({len(missing)} missing: {', '.join(missing)})"
        print(passed if ok else "\nconformance FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
