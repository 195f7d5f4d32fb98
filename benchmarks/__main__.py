"""``python -m benchmarks [pure|rounds|latency|workflows|sync|trio|all|pgbouncer|dashboard|flow]``:
print figures."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    which = argv[0] if argv else "all"
    if which in ("pure", "all"):
        from benchmarks import pure

        pure.main()
    if which in ("rounds", "all"):
        from benchmarks import rounds

        rounds.main(argv[1:] if which == "rounds" else [])
    if which in ("latency", "all"):
        from benchmarks import latency

        latency.main(argv[1:] if which == "latency" else [])
    if which in ("workflows", "all"):
        from benchmarks import workflows

        workflows.main(argv[1:] if which == "workflows" else [])
    if which in ("dashboard", "all"):  # the web dashboard on a million jobs (issue 33)
        from benchmarks import dashboard

        dashboard.main(argv[1:] if which == "dashboard" else [])
    if which == "flow":  # not in "all": six burn-downs of 20,000 jobs and a hot partition
        from benchmarks import flow

        flow.main(argv[1:])
    if which == "pgbouncer":  # not in "all": it needs a pgbouncer binary
        from benchmarks import pgbouncer

        pgbouncer.main(argv[1:])
    if which in ("sync", "all"):
        try:
            from benchmarks import sync_driver
        except ImportError as exc:
            print(f"sync driver benchmark unavailable: {exc}")
        else:
            sync_driver.main(argv[1:])
    if which in ("trio", "all"):
        from benchmarks import trio_driver, trio_io

        trio_io.main([])
        trio_driver.main(argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
