"""``river_db.insert_middleware``: the one chain both drivers build, and the database stand-in that
puts the periodic enqueuer's inserts through it, on real Postgres and SQLite."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest
import trio

from river_db.insert_middleware import InsertMiddlewareDatabase, insert_chain
from river_protocol.errors import ValidationError
from river_protocol.intents import CountJobs, InsertJobs, InsertParams
from river_protocol.middleware import with_metadata
from river_protocol.states import JobState
from river_sync import Database
from river_trio.database import AsyncDatabase
from tests.drivers.test_client_support import (
    client_db_url_fixture,  # noqa: F401  (the fixture)
    migrated_pg_fixture,  # noqa: F401  (used by the fixture)
)


def _insert(*kinds: str) -> InsertJobs:
    return InsertJobs(jobs=tuple(InsertParams(kind=k, encoded_args=b"{}") for k in kinds),
                      nonce=uuid.uuid4().hex[:16])


def test_the_chain_runs_the_first_middleware_outermost() -> None:
    calls: list[str] = []

    def named(name: str) -> Any:
        def mw(jobs: Sequence[str], call_next: Any) -> Any:
            calls.append(f"{name} in")
            result = call_next([*jobs, name])
            calls.append(f"{name} out")
            return result

        return mw

    chain = insert_chain([named("outer"), named("inner")], lambda jobs: list(jobs))
    assert chain(["job"]) == ["job", "outer", "inner"]
    assert calls == ["outer in", "inner in", "inner out", "outer out"]
    assert insert_chain([], lambda jobs: "as is")(["job"]) == "as is"


def test_only_inserts_pass_through_and_changed_rows_are_checked(client_db_url: str) -> None:
    seen: list[int] = []

    def stamp(jobs: Sequence[InsertParams], call_next: Any) -> Any:
        seen.append(len(jobs))
        return call_next([with_metadata(j, {"stamped": True}) for j in jobs])

    with Database.from_url(client_db_url) as db:
        through = InsertMiddlewareDatabase(db, [stamp])
        results = through.run(_insert("a", "b"))
        assert [r.job.metadata.get("stamped") for r in results] == [True, True]
        assert through.run(CountJobs(), readonly=True) == {(JobState.AVAILABLE, "default", "a"): 1,
                                                            (JobState.AVAILABLE, "default", "b"): 1}
        assert seen == [2]  # the count went straight to the database

        def drop(jobs: Sequence[InsertParams], call_next: Any) -> Any:
            return call_next(jobs[:1])

        with pytest.raises(ValidationError, match="may change rows but not add or drop them"):
            InsertMiddlewareDatabase(db, [drop]).run(_insert("c", "d"))
        assert not through.closed
    assert through.closed


def test_async_middleware_on_an_async_database(client_db_url: str) -> None:
    async def stamp(jobs: Sequence[InsertParams], call_next: Any) -> Any:
        await trio.lowlevel.checkpoint()
        return await call_next([with_metadata(j, {"async": 1}) for j in jobs])

    async def main() -> list[Any]:
        async with await AsyncDatabase.from_url(client_db_url) as db:
            results: list[Any] = await InsertMiddlewareDatabase(db, [stamp]).run(_insert("a"))
            return results

    (result,) = trio.run(main)
    assert result.job.metadata.get("async") == 1
