"""The neutral layer both drivers stand on: blocking database access and the client pieces that do not wait.

``river_sync`` and ``river_anyio`` (behind ``river_trio`` and ``river_asyncio``) both
drive ordinary blocking DB-API connections (psycopg 3, SQLite via the stdlib or
sqlean-py); river_anyio does so from worker threads. Everything about those
connections that does not depend on how a driver waits lives here, once: the
one URL parser (``urls``), opening and resetting connections (``connect``,
``sqlite``), the plan executor (``executor``), the migrator, caller-transaction
adaptation (``caller_tx``),
and the client pieces with no waiting in them (``client_support``, ``events``,
``periodic_jobs``, ``notify_settings``, ``resumable``, ``testing``).

This package imports ``river_protocol`` and database libraries, never a driver.
"""

from river_db.version import package_version

__version__ = package_version()
