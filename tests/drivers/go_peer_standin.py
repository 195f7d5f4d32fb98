"""A Python stand-in for the Go peer (tests/go_peer): same command line, same output, same work.

``python go_peer_standin.py [-queue QUEUE] [-id CLIENT_ID] DATABASE_URL`` works kind
``go_middle`` in QUEUE with a ``river_sync`` client, records the output the Go peer records
(a negative ``n`` cancels the job, as Go's ``JobCancel``), prints ``ready CLIENT_ID``, then
``worked JOB_ID`` as each job starts, and stops when its standard input closes. Unlike the Go
peer it never leads (``leader_election=False``), and its completer promotes the dependents of
the jobs it completes, as every Python client does. The suite runs the cross-language script
(``go_peer_workflow.py``) with it, so the script is tested where no Go toolchain exists.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

from tests.drivers.go_peer_workflow import GoMiddle, go_output


def main(argv: list[str] | None = None) -> int:
    from river_sync import Client, JobCancel, QueueConfig, WorkContext, Workers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-queue", default="go_peer")
    parser.add_argument("-id", default=f"go-peer-standin-{socket.gethostname()}-{os.getpid()}")
    parser.add_argument("url")
    args = parser.parse_args(argv)
    workers = Workers()

    @workers.job(GoMiddle)
    def middle(ctx: WorkContext, job_args: GoMiddle) -> JobCancel | None:
        print(f"worked {ctx.job.id}", flush=True)
        if job_args.n < 0:
            return JobCancel("go_middle: n must not be negative")
        ctx.record_output(go_output(job_args.n))
        return None

    client = Client(args.url, workers=workers, client_id=args.id, leader_election=False,
                    queues={args.queue: QueueConfig(max_workers=10)})
    client.start()
    print(f"ready {args.id}", flush=True)
    sys.stdin.read()
    client.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
