"""The same database state at the start of every measured run, on Postgres and SQLite.

``python -m benchmarks rounds`` once ran every round of a system on one database, and
its figures drifted from round to round (issue 19). What a run leaves behind for the
next, read from the code and from how Postgres behaves:

- **Dead tuples and table statistics.** A burn-down of N jobs updates each row twice
  (running, then completed): 2N dead tuples. ``river bench --wipe`` TRUNCATEs
  river_job (a new, empty file: the dead tuples go), but the cumulative statistics
  stay and grow, and they decide when autovacuum and autoanalyze fire. Measured
  (under load, so its jobs/s are no evidence; 4 runs of ``river bench -n 20000`` on
  one database, as the old rounds did): at each start the table was empty but its
  statistics said n_dead_tup 0, 40k, 80k, 120k and n_mod_since_analyze 0, 60k, 120k,
  180k, with reltuples -1 (never analysed, so the vacuum threshold is 50 dead
  tuples). Autovacuum had not come by in those 30 s; a longer series gets a vacuum
  and an analyse of an empty table at a moment of the launcher's choosing, and
  later rounds then plan the fetch and completion statements from other statistics
  than round 1 did.
- **Autovacuum at random.** The launcher visits each database once per
  ``autovacuum_naptime`` (1 min), spread over every database on the server (the test
  suites' scratch databases included). A burn-down lasts seconds, so whether a worker
  vacuums river_job in the middle of one is chance, not a property of the system.
- **WAL and checkpoints.** The same runs wrote 53-65 MB of WAL per 20,000 jobs, so
  about 135 MB per 50,000-job run of each system: a checkpoint for ``max_wal_size``
  (1 GB) every seven or so runs, and one for ``checkpoint_timeout`` (5 min) wherever
  the clock puts it; after any checkpoint each page's first change writes the whole
  page to the WAL (full-page writes), which costs most right after it. Two
  checkpoints were also requested during the first run by other sessions: DROP
  DATABASE forces one, and on a shared server the test suites drop theirs all the
  time (host noise, gone on an idle machine).
- **SQLite's file.** ``DELETE FROM river_job`` leaves the freed pages in the file and
  the WAL file at its high-water mark.
- **The order of systems.** Each round ran the systems in the same order, so a
  system always followed the same one (its checkpoint debt, its dirty buffers, the
  load average it left).

So each run of each system now gets a database of its own, made just before it:

- Postgres: ``CREATE DATABASE ... TEMPLATE`` from a template migrated once (River's
  tables, empty, never analysed; new databases start with empty statistics), then a
  ``CHECKPOINT``, so every run starts right after a checkpoint with nothing dirty and
  the same WAL ahead of it. The database is dropped after the run.
- Autovacuum is off for the template's tables (so for every copy). River Go's bench
  resets its table (TRUNCATE, VACUUM FULL) and leaves autovacuum to chance; a run of
  a few seconds is more often than not missed by it, and turning it off makes "not
  vacuumed during the run" certain and equal for every system, Go's included (it runs
  on a copy of the same template). pgqueuer's tables get the same setting.
- SQLite: a copy of a migrated template file, in a directory of its own, removed
  after the run.
- pgqueuer: a fresh database from ``template0`` per run; it installs its schema in the
  child before the timed part, and turns autovacuum off for its tables as above.

``rounds`` also rotates the systems' order from round to round (a Latin square, so
over as many rounds as systems each one runs once in every position) and reads the
load average before each round (see ``wait_for_quiet``).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from benchmarks.scratch import Scratch

# Every ordinary table of the current schema, and its TOAST table, out of autovacuum's reach.
AUTOVACUUM_OFF = """
DO $$
DECLARE t regclass;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.relkind = 'r' AND n.nspname = current_schema() LOOP
        EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = off, toast.autovacuum_enabled = off)', t);
    END LOOP;
END $$
"""
LOAD_LIMIT = 1.0  # 1-minute load average under which the machine counts as quiet (issue 19)
LOAD_WAIT = 120.0  # seconds to wait for it, at most
LOAD_POLL = 5.0  # the kernel updates the load average every 5 s


def autovacuum_off(url: str) -> None:
    """Turn autovacuum off for every table of the connection's current schema."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(AUTOVACUUM_OFF)


def checkpoint() -> None:
    """Write every dirty buffer out now: the next run starts with no checkpoint owed."""
    Scratch.admin("CHECKPOINT")




class FreshDatabases:
    """Copies of migrated templates (River's tables, empty, autovacuum off), one per run.

    ``postgres(tag)`` and ``sqlite(tag)`` make a copy; ``release(url)`` drops it. The
    templates are made on first use and dropped with ``scratch.close()``."""

    def __init__(self, scratch: Scratch) -> None:
        self.scratch = scratch
        self._pg_template: str | None = None
        self._sqlite_template: str | None = None
        # Why CHECKPOINT was refused (the bench's role may lack the right), if it was.
        self.checkpoint_refused: str | None = None

    def postgres(self, tag: str) -> str:
        if self._pg_template is None:
            from river_db.migrator import Migrator

            url = self.scratch.postgres("template")
            with Migrator(url) as migrator:
                migrator.migrate_up()
            autovacuum_off(url)
            self._pg_template = url
        copy = self.scratch.postgres(tag, template=urlsplit(self._pg_template).path.lstrip("/"))
        if self.checkpoint_refused is None:
            import psycopg

            try:
                checkpoint()
            except psycopg.errors.InsufficientPrivilege as exc:
                self.checkpoint_refused = str(exc).strip()
        return copy

    def sqlite(self, tag: str) -> str:
        if self._sqlite_template is None:
            from river_db.migrator import Migrator

            url = self.scratch.sqlite("template")
            with Migrator(url) as migrator:
                migrator.migrate_up()
            conn = sqlite3.connect(url.removeprefix("sqlite:///"))
            try:  # everything into the main file: only it is copied
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                conn.close()
            self._sqlite_template = url
        copy = self.scratch.sqlite(tag)
        shutil.copyfile(self._sqlite_template.removeprefix("sqlite:///"), copy.removeprefix("sqlite:///"))
        return copy

    def release(self, url: str) -> None:
        self.scratch.drop(url)


def wait_for_quiet(*, limit: float = LOAD_LIMIT, max_wait: float = LOAD_WAIT, poll: float = LOAD_POLL,
                   loadavg: Callable[[], tuple[float, float, float]] = os.getloadavg,
                   sleep: Callable[[float], None] = time.sleep,
                   clock: Callable[[], float] = time.monotonic) -> tuple[float, float]:
    """Wait, at most ``max_wait`` seconds, for the 1-minute load average to fall under
    ``limit``; returns (the last load read, seconds waited). A round's own work leaves the
    load near the core count, and the average decays with a one-minute time constant, so on
    an idle 2-core machine the wait after a round is about 40 s; beyond ``max_wait`` the
    round runs anyway and its figures are marked as taken under load."""
    started = clock()
    load = loadavg()[0]
    while load >= limit and clock() - started + poll <= max_wait:
        sleep(poll)
        load = loadavg()[0]
    return load, clock() - started
