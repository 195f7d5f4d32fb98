"""``python -m benchmarks pgbouncer``: ``river bench`` direct and through PgBouncer, side by side.

One scratch database, one private PgBouncer in transaction pooling mode in front of
it (``tests.pgbouncer``: its own config and port, never the system's service), and
``river bench --num-total-jobs N --json`` burn-downs alternating between the direct
URL and the PgBouncer URL, round after round, so a change in the machine's load
hits both alike. Prints each run and the medians: jobs/s and the client's CPU per
job (``client_cpu_us_per_job``). Behind PgBouncer the client polls (LISTEN cannot
work there) and never prepares statements; the direct client listens and prepares.

Figures are only worth reading from an idle machine; ``--quick`` checks the harness.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.scratch import Scratch, pg_admin_url

ROOT = Path(__file__).resolve().parent.parent


def bench_once(url: str, *, jobs: int, driver: str, max_workers: int) -> dict[str, Any]:
    """One ``river bench`` burn-down in a fresh process; its JSON result (or ``{"error": ...}``)."""
    cmd = [sys.executable, "-m", "river_tools.cli.main", "bench", "--database-url", url,
           "--num-total-jobs", str(jobs), "--max-workers", str(max_workers), "--driver", driver,
           "--json", "--wipe"]
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks pgbouncer")
    parser.add_argument("--jobs", type=int, default=50_000, help="no-op jobs per burn-down")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--driver", choices=("sync", "trio"), default="sync")
    parser.add_argument("--max-workers", type=int, default=2_000, help="as River Go's bench")
    parser.add_argument("--pool-size", type=int, default=20,
                        help="PgBouncer's default_pool_size (server connections per database)")
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the harness")
    opts = parser.parse_args(list(argv))
    if opts.quick:
        opts.jobs, opts.rounds = 500, 1
    return opts


def main(argv: Sequence[str] = ()) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.pgbouncer import PgBouncer

    opts = parse_args(argv)
    scratch = Scratch()
    bouncer = PgBouncer(pg_admin_url(), pool_mode="transaction", pool_size=opts.pool_size)
    try:
        direct = scratch.postgres("pgbouncer")
        targets = {"direct": direct, "pgbouncer (transaction)": bouncer.url(direct)}
        print(f"river bench --driver {opts.driver} -n {opts.jobs:,} --max-workers {opts.max_workers}, "
              f"{opts.rounds} round(s); PgBouncer default_pool_size {opts.pool_size}")
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in targets}
        for round_no in range(opts.rounds):
            order = list(targets) if round_no % 2 == 0 else list(targets)[::-1]
            for name in order:
                result = bench_once(targets[name], jobs=opts.jobs, driver=opts.driver,
                                    max_workers=opts.max_workers)
                results[name].append(result)
                if "error" in result:
                    print(f"  round {round_no + 1} {name:24s} failed: {result['error']}")
                else:
                    print(f"  round {round_no + 1} {name:24s} {result['jobs_per_sec']:>10,.0f} jobs/s  "
                          f"{result['client_cpu_us_per_job'] or 0:>7.1f} us CPU/job")
        print("medians:")
        for name, runs in results.items():
            good = [r for r in runs if "error" not in r]
            if not good:
                print(f"  {name:24s} no successful run")
                continue
            rate = statistics.median(r["jobs_per_sec"] for r in good)
            cpu = statistics.median(r["client_cpu_us_per_job"] or 0 for r in good)
            print(f"  {name:24s} {rate:>10,.0f} jobs/s  {cpu:>7.1f} us CPU/job  ({len(good)} run(s))")
    finally:
        bouncer.stop()
        scratch.close()


if __name__ == "__main__":
    main(sys.argv[1:])
