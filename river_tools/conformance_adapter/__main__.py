"""``python -m river_tools.conformance_adapter``: serve River's conformance protocol on stdio."""

from __future__ import annotations

import logging
import os
import sys

from river_tools.conformance_adapter.jsonrpc import serve
from river_tools.conformance_adapter.server import Adapter

ENV_DRIVER = "RIVER_CONFORMANCE_DRIVER"
ENV_DATABASE_URL = "RIVER_CONFORMANCE_DATABASE_URL"
ENV_APPLICATION_NAME = "RIVER_CONFORMANCE_APPLICATION_NAME"
ENV_LOG_LEVEL = "RIVER_CONFORMANCE_LOG_LEVEL"  # ours, not the protocol's: WARNING unless set


def main() -> int:
    logging.basicConfig(stream=sys.stderr, level=os.environ.get(ENV_LOG_LEVEL, "WARNING").upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        adapter = Adapter(driver=os.environ.get(ENV_DRIVER, ""),
                          database_url=os.environ.get(ENV_DATABASE_URL, ""),
                          application_name=os.environ.get(ENV_APPLICATION_NAME, ""))
    except ValueError as exc:
        print(f"River Python conformance adapter: {exc}", file=sys.stderr)
        return 2
    # The harness closes stdin to end the process; answers must leave one at a time, in order.
    stdin = open(sys.stdin.fileno(), encoding="utf-8", closefd=False)  # noqa: SIM115
    try:
        serve(adapter.handle, stdin, sys.stdout)
    finally:
        adapter.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
