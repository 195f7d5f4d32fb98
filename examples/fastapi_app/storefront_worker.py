"""The shop's worker process: ``river work storefront_worker:make_client`` (run from this directory).

``make_client`` returns a ``river_asyncio.Client`` that works the ``default``
queue; ``river work`` runs it on asyncio until SIGINT/SIGTERM (the first lets
running jobs finish, the second cancels them). ``--database-url`` is passed on
as ``database_url``; without it ``DATABASE_URL`` is used, as by the web app.

``python storefront_worker.py`` does the same without the CLI: ``main`` runs
the client with ``river_asyncio.run_until_signalled`` and closes the jobs'
engine once it has stopped.
"""

from __future__ import annotations

import asyncio
import logging

from storefront import settings
from storefront.db import Database
from storefront.jobs import make_workers

import river_asyncio


def make_client(database_url: str | None = None, *, database: Database | None = None) -> river_asyncio.Client:
    """The worker's client; ``database`` is the shop's engine for the jobs.

    By default the jobs get an engine without a pool (a connection per job):
    ``river work`` owns the process and the event loop, and has no shutdown step
    where this module could close a pool's connections. Pass ``database`` when
    you run the client yourself and close it after the client has stopped.
    """
    url = database_url or settings.database_url()
    return river_asyncio.Client(
        url,
        workers=make_workers(database or Database.open(url, pooled=False)),
        queues={"default": river_asyncio.QueueConfig(max_workers=10)},
    )


async def main() -> None:
    url = settings.database_url()
    database = Database.open(url)
    try:
        how = await river_asyncio.run_until_signalled(make_client(url, database=database))
    finally:
        await database.close()
    logging.getLogger("storefront.worker").info("worker stopped (%s stop)", how)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(main())
