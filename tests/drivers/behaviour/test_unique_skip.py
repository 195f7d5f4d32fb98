"""A unique insert skipped as a duplicate returns the stored job as it is (harness leaf
Unique/SkipKeepsExistingKind): a job unique without its kind keeps its kind, and so its worker."""

from __future__ import annotations

from river_sync import Database, InsertManyParams, InsertOpts, UniqueOpts
from tests.drivers.behaviour.support import row
from tests.drivers.harness import Harness
from tests.drivers.test_client_support import Task

OTHER_KIND = "unique_other_kind"


def _set_kind(url: str, job_id: int, kind: str) -> None:
    with Database.from_url(url) as db, db.executor() as ex:
        mark = "%s" if db.dialect.name == "postgres" else "?"
        ex.conn.execute(f"UPDATE river_job SET kind = {mark} WHERE id = {mark}", (kind, job_id))
        ex.conn.commit()


def test_skipped_duplicate_keeps_the_stored_kind(h: Harness, client_db_url: str) -> None:
    opts = InsertOpts(unique_opts=UniqueOpts(by_args=True, exclude_kind=True))
    with h.client(client_db_url) as client:
        first = client.insert(Task("same"), opts)
        assert not first.unique_skipped_as_duplicate
        # Another kind given out of band: the unique key, made without the kind, is unchanged.
        _set_kind(client_db_url, first.job.id, OTHER_KIND)
        stored = row(client_db_url, first.job.id)
        assert stored.kind == OTHER_KIND

        single = client.insert(Task("same"), opts)
        [batched] = client.insert_many([InsertManyParams(Task("same"), opts)])
        for result in (single, batched):
            assert result.unique_skipped_as_duplicate
            assert result.job.id == stored.id and result.job.kind == OTHER_KIND
        after = row(client_db_url, first.job.id)
        assert after.kind == OTHER_KIND and after.metadata == stored.metadata
        page = client.jobs.list(limit=10)
        assert [(j.id, j.kind) for j in page.jobs] == [(stored.id, OTHER_KIND)]
