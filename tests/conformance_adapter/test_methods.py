"""Each method of River's conformance protocol over real stdio, checked against the database."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from decimal import Decimal

import pytest

from river_tools.conformance_adapter import jsonrpc
from tests.conformance_adapter.adapter_process import (
    AdapterFailed,
    AdapterProcess,
    ScenarioSchema,
    adapter_in_schema,
    echo,
    wait_for,
)
from tests.conftest import pg_base_url

pytestmark = pytest.mark.postgres

Pair = tuple[AdapterProcess, ScenarioSchema]


@pytest.fixture(scope="module")
def adapter() -> Iterator[Pair]:
    with adapter_in_schema(pg_base_url()) as pair:
        yield pair


def _count(schema: ScenarioSchema, query: str) -> int:
    row = schema.conn.execute(query).fetchone()
    assert row is not None
    return int(row[0])


def test_handshake_names_python_and_the_driver(adapter: Pair) -> None:
    process, _ = adapter
    result = process.call("handshake")
    assert result["implementation"] == "python"
    assert result["driver"] == "postgres"
    assert result["version"]


def test_connections_carry_the_application_name_and_the_url_schema(adapter: Pair) -> None:
    process, schema = adapter
    process.insert(echo("connect"))
    rows = schema.conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (process.application_name,)
    ).fetchone()
    assert rows is not None and 1 <= rows[0] <= 10
    assert _count(schema, "SELECT count(*) FROM river_job WHERE args->>'message' = 'connect'") == 1


def test_migrate_up_down_and_to_a_target() -> None:
    with adapter_in_schema(pg_base_url(), migrate=False) as (process, schema):
        applied = process.call("migrate")["versions"]
        assert applied == sorted(applied) and applied[0] == 1 and len(applied) >= 6
        latest = applied[-1]
        assert process.call("migrate")["versions"] == []
        assert process.call("migrate", {"direction": "down"})["versions"] == [latest]
        assert process.call("migrate", {"direction": "down", "target_version": latest - 3})["versions"] \
            == [latest - 1, latest - 2]
        assert process.call("migrate", {"target_version": latest - 1})["versions"] == [latest - 2, latest - 1]
        versions = schema.conn.execute("SELECT version FROM river_migration ORDER BY version").fetchall()
        assert [v for (v,) in versions] == list(range(1, latest))
        assert process.call("migrate", {"direction": "down", "target_version": -1})["versions"] \
            == list(range(latest - 1, 0, -1))
        assert schema.conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema.name,)).fetchone() == (0,)
        assert process.error_code("migrate", {"target_version": 999}) == jsonrpc.REJECTED


def test_insert_batch_with_options_and_unique_duplicates(adapter: Pair) -> None:
    process, schema = adapter
    metadata = ('{"exact":0.1000000000000000055511151231257827,'
                '"big":123456789012345678901234567890,"note":"a<b>&"}')
    line = json.dumps({"jsonrpc": "2.0", "id": 1000, "method": "insert", "params": {"jobs": [
        {"behavior": "sleep", "duration_ms": 5, "message": "options",
         "opts": {"max_attempts": 7, "priority": 2, "queue": "elsewhere", "tags": ["job-rows", "tag_2"],
                  "scheduled_at": "2031-02-03T04:05:06.789Z", "metadata": "__METADATA__"}},
        {"message": "pending", "opts": {"pending": True}},
        {"message": "unique", "opts": {"unique": {"by_args": True, "by_queue": True}}},
    ]}}).replace('"__METADATA__"', metadata)
    answer = process.send_line(line)
    results = answer["result"]["results"]
    options, pending, unique = (r["job"] for r in results)
    assert [r["unique_skipped_as_duplicate"] for r in results] == [False, False, False]
    # The same unique job in a later batch is skipped as a duplicate of the stored one.
    again = process.send_line(json.dumps({"jsonrpc": "2.0", "id": 1001, "method": "insert", "params": {
        "jobs": [{"message": "unique", "opts": {"unique": {"by_args": True, "by_queue": True}}}]}}))
    [duplicate] = again["result"]["results"]
    assert duplicate["unique_skipped_as_duplicate"] is True
    assert duplicate["job"]["id"] == unique["id"]
    assert options["args"] == {"behavior": "sleep", "duration_ms": 5, "message": "options"}
    assert (options["max_attempts"], options["priority"], options["queue"], options["tags"]) \
        == (7, 2, "elsewhere", ["job-rows", "tag_2"])
    assert options["scheduled_at"] == "2031-02-03T04:05:06.789Z"
    assert options["state"] == "scheduled"
    assert pending["state"] == "pending"
    assert unique["unique_key"] is not None and len(unique["unique_key"]) == 64
    assert unique["unique_states"] == [
        "available", "completed", "pending", "retryable", "running", "scheduled"]
    assert "river:unique_nonce" not in unique["metadata"]
    # Exact as given, in the row and in the answer.
    stored = schema.conn.execute(
        "SELECT metadata->>'exact', metadata->>'big', metadata->>'note' FROM river_job WHERE id = %s",
        (options["id"],)).fetchone()
    assert stored == ("0.1000000000000000055511151231257827", "123456789012345678901234567890", "a<b>&")
    assert _count(schema, "SELECT count(*) FROM river_job WHERE args->>'message' = 'unique'") == 1


def test_insert_batch_repeating_a_unique_key_is_refused_whole(adapter: Pair) -> None:
    # River refuses such a batch (harness leaf Batch/Atomicity): an error answer, nothing stored.
    process, schema = adapter
    unique = {"message": "twice", "opts": {"unique": {"by_args": True}}}
    answer = process.send_line(json.dumps({"jsonrpc": "2.0", "id": 1002, "method": "insert", "params": {
        "jobs": [{"message": "first"}, unique, unique]}}))
    assert "result" not in answer and answer["error"]["message"]
    assert _count(schema, "SELECT count(*) FROM river_job WHERE args->>'message' IN ('first', 'twice')") == 0


def test_unique_without_kind_needs_another_part_of_the_key(adapter: Pair) -> None:
    # Harness leaf Batch/Atomicity's last step: newer River refuses exclude_kind with no args,
    # period or queue in the key (River v0.43 took it as "not unique"); -32002, nothing stored.
    process, schema = adapter
    states = ["available", "pending", "running", "scheduled"]
    for unique in ({"exclude_kind": True}, {"exclude_kind": True, "by_state": states}):
        with pytest.raises(AdapterFailed) as refused:
            process.insert(echo("unique without kind", unique=unique))
        assert refused.value.code == jsonrpc.REJECTED
        assert "ExcludeKind requires ByArgs, ByPeriod or ByQueue" in refused.value.message
    stored = "SELECT count(*) FROM river_job WHERE args->>'message' = 'unique without kind'"
    assert _count(schema, stored) == 0
    [kept] = process.insert(echo("unique without kind", queue="nowhere",
                                 unique={"exclude_kind": True, "by_queue": True}))
    assert kept["job"]["unique_key"] is not None


def test_unique_skip_keeps_the_existing_kind(adapter: Pair) -> None:
    # Harness leaf Unique/SkipKeepsExistingKind: a job unique by args without its kind, given
    # another kind out of band, is returned as stored by a skipped single and batched insert.
    process, schema = adapter
    job = echo("unique skip keeps kind", queue="nowhere",
               unique={"by_args": True, "exclude_kind": True})
    [first] = process.insert(job)
    schema.conn.execute("UPDATE river_job SET kind = 'conformance_unique_other_kind' WHERE id = %s",
                        (first["job"]["id"],))
    existing = process.call("list", {"ids": [first["job"]["id"]]})["jobs"][0]
    assert existing["kind"] == "conformance_unique_other_kind"
    [single] = process.insert(job)
    [batched] = process.insert(job)
    for result in (single, batched):
        assert result == {"job": existing, "unique_skipped_as_duplicate": True}
    assert process.call("list", {"ids": [existing["id"]]})["jobs"] == [existing]


def test_numbers_beyond_a_float_are_reported_exactly(adapter: Pair) -> None:
    process, schema = adapter
    numbers = '{"beyond_float":1e400,"negative":-9223372036854775808}'
    job_id = schema.insert_raw('{"behavior":"","duration_ms":0,"message":"big","n":1e400}', metadata=numbers)
    request = {"jsonrpc": "2.0", "id": 77, "method": "list", "params": {"ids": [job_id]}}
    raw = process.send_raw(json.dumps(request))
    # Strict JSON (no Infinity), numbers read exactly: what the harness's decoder accepts.
    answer = json.loads(raw, parse_float=Decimal, parse_constant=_no_constant)
    job = answer["result"]["jobs"][0]
    assert Decimal(job["metadata"]["beyond_float"]) == Decimal("1e400")
    assert job["metadata"]["negative"] == -9223372036854775808
    assert Decimal(job["args"]["n"]) == Decimal("1e400")


def _no_constant(name: str) -> None:
    raise AssertionError(f"the answer holds {name}, which JSON lacks")


def test_list_filters_orders_and_pages(adapter: Pair) -> None:
    process, _ = adapter
    ids = [r["job"]["id"] for r in process.insert(*[
        echo(f"page {i}", priority=i + 1, tags=["pagination_jobs"], queue="paging",
             scheduled_at=f"2099-01-01T00:00:0{i + 1}Z", metadata={"page": i}) for i in range(3)])]
    params = {"direction": "desc", "limit": 2, "order_by": "scheduled_at", "priorities": [1, 2, 3],
              "queues": ["paging"], "states": ["scheduled"], "tags_all": ["pagination_jobs"]}
    first = process.call("list", params)
    assert [job["id"] for job in first["jobs"]] == [ids[2], ids[1]]
    assert first["cursor"]
    rest = process.call("list", {**params, "after": first["cursor"]})
    assert [job["id"] for job in rest["jobs"]] == [ids[0]]
    assert rest["cursor"]
    assert process.call("list", {**params, "after": rest["cursor"]}) == {"cursor": None, "jobs": []}
    by_kind = process.call("list", {"kinds": ["nobody"], "ids": ids})
    assert by_kind == {"cursor": None, "jobs": []}
    by_time = process.call("list", {**params, "order_by": "time", "direction": "asc"})
    assert [job["id"] for job in by_time["jobs"]] == [ids[0], ids[1]]
    # River Go's cursor text: URL-safe base64 of its JSON, the sort value in Go's time format.
    assert json.loads(base64.urlsafe_b64decode(by_time["cursor"])) == {
        "id": ids[1], "kind": "conformance_echo", "queue": "paging", "sort_field": "time",
        "time": "2099-01-01T00:00:02Z"}
    with_metadata = process.call("list", {"ids": ids, "metadata": {"page": 1},
                                          "tags_all": ["pagination_jobs"]})
    assert [job["id"] for job in with_metadata["jobs"]] == [ids[1]]
    assert process.call("list", {"ids": ids, "tags_all": ["pagination_jobs", "absent"]})["jobs"] == []
    assert process.error_code("list", {"order_by": "kind"}) == jsonrpc.REJECTED
    unfinalized = {"order_by": "finalized_at", "states": ["available"]}
    assert process.error_code("list", unfinalized) == jsonrpc.REJECTED
    assert process.error_code("list", {"after": "???"}) == jsonrpc.INVALID_PARAMS


def test_cancel_and_retry(adapter: Pair) -> None:
    process, schema = adapter
    (job,) = (r["job"] for r in process.insert(echo("control", queue="control_only")))
    cancelled = process.call("cancel", {"id": job["id"]})
    assert cancelled["state"] == "cancelled" and cancelled["finalized_at"] is not None
    assert schema.job(job["id"])["state"] == "cancelled"  # type: ignore[index]
    retried = process.call("retry", {"id": job["id"]})
    assert retried["state"] == "available" and retried["finalized_at"] is None
    assert process.call("list", {"ids": [job["id"]]})["jobs"] == [retried]


def test_queue_pause_resume_update(adapter: Pair) -> None:
    process, schema = adapter
    process.call("start", {"client_id": "queue-owner", "queues": ["q_admin"], "max_workers": 1})
    try:
        # As River Go's Start: the queue's row exists once start has answered.
        assert _count(schema, "SELECT count(*) FROM river_queue WHERE name = 'q_admin'") == 1
        process.call("queue", {"action": "pause", "name": "q_admin"})
        assert schema.conn.execute("SELECT paused_at IS NOT NULL FROM river_queue WHERE name = 'q_admin'") \
            .fetchone() == (True,)
        process.call("queue", {"action": "resume", "name": "q_admin"})
        process.call("queue", {"action": "update", "name": "q_admin",
                               "metadata": {"owner": "python", "n": 1.25}})
        row = schema.conn.execute(
            "SELECT paused_at, metadata FROM river_queue WHERE name = 'q_admin'").fetchone()
        assert row == (None, {"owner": "python", "n": 1.25})
        process.call("queue", {"action": "pause", "name": "*"})
        process.call("queue", {"action": "resume", "name": "*"})
        stats = wait_for("queue events",
                         lambda: (s := process.call("stats"))["events"].count("queue_resumed") >= 2 and s)
        assert stats["events"].count("queue_paused") == 2
    finally:
        process.call("stop")


def test_transactions_commit_and_roll_back(adapter: Pair) -> None:
    process, schema = adapter
    process.call("tx_begin", {"tx": "kept"})
    process.call("tx_begin", {"tx": "dropped"})
    assert process.error_code("tx_begin", {"tx": "kept"}) == jsonrpc.REJECTED
    kept = process.insert(echo("in kept tx", queue="tx_only"), tx="kept")[0]["job"]
    dropped = process.insert(echo("in dropped tx", queue="tx_only"), tx="dropped")[0]["job"]
    assert schema.job(kept["id"]) is None  # not visible before commit
    assert process.call("list", {"ids": [kept["id"]], "tx": "kept"})["jobs"][0]["id"] == kept["id"]
    cancelled = process.call("cancel", {"id": kept["id"], "tx": "kept"})
    assert cancelled["state"] == "cancelled"
    process.call("tx_end", {"tx": "kept", "commit": True})
    process.call("tx_end", {"tx": "dropped"})
    assert schema.job(kept["id"])["state"] == "cancelled"  # type: ignore[index]
    assert schema.job(dropped["id"]) is None
    assert process.error_code("tx_end", {"tx": "kept"}) == jsonrpc.NOT_FOUND


def test_start_works_jobs_and_stats_count_events(adapter: Pair) -> None:
    process, schema = adapter
    process.call("start", {"client_id": "py-worker", "queues": ["work"], "max_workers": 3,
                           "error_handler_cancel": True, "retry_delay_ms": 10})
    try:
        assert process.error_code("start", {"client_id": "second"}) == jsonrpc.REJECTED
        jobs = [r["job"] for r in process.insert(
            echo("done", queue="work"), echo("out", "output", queue="work"),
            echo("nope", "cancel", queue="work"), echo("fails", "error", queue="work", max_attempts=1),
            echo("snooze", "snooze_once", queue="work", metadata={}),
            echo("raises", "no_such_behavior", queue="work"))]
        done, output, cancelled, failed, snoozed, raised = (schema.wait_job(job["id"]) for job in jobs)
        assert done["state"] == "completed" and done["attempted_by"] == ["py-worker"]
        assert output["metadata"]["output"] == {"message": "out"}
        assert cancelled["state"] == "cancelled"
        # Returned as a Go worker returns its error: the bare message, no trace.
        assert failed["state"] == "discarded"
        assert [(e["error"], e["trace"]) for e in failed["errors"]] == [("conformance retryable error", "")]
        assert snoozed["state"] == "completed" and "snoozes" in snoozed["metadata"]
        assert raised["state"] == "cancelled"  # the error handler cancels a raised failure
        stats = wait_for("the outcomes", lambda: len((s := process.call("stats"))["events"]) >= 7 and s)
        assert sorted(stats["events"]) == sorted([
            "job_completed", "job_completed", "job_cancelled", "job_failed", "job_snoozed", "job_completed",
            "job_cancelled"])
        assert stats["error_handler_calls"] == 1
    finally:
        process.call("stop")
    assert process.error_code("stats") == jsonrpc.REJECTED


def test_release_lets_a_barrier_job_finish_in_its_attempt(adapter: Pair) -> None:
    process, schema = adapter
    process.call("release", {"name": "released early"})  # a release before any wait holds for later waits
    process.call("start", {"client_id": "barrier", "queues": ["barrier"], "max_workers": 2})
    try:
        early, held = (r["job"] for r in process.insert(
            echo("released early", "barrier_wait", queue="barrier"),
            echo("held", "barrier_output", queue="barrier")))
        assert schema.wait_job(early["id"])["state"] == "completed"
        running = schema.wait_job(held["id"], "running")
        process.call("release", {"name": "held"})
        finished = schema.wait_job(held["id"])
        assert (finished["state"], finished["attempt"]) == ("completed", running["attempt"])
        assert finished["metadata"]["output"] == {"race": "worker"}
    finally:
        process.call("stop")


def test_claim_barrier_holds_the_first_claim_while_a_cancel_arrives(adapter: Pair) -> None:
    process, schema = adapter
    process.call("start", {"client_id": "claim-time", "queues": ["claim"], "max_workers": 1,
                           "claim_barrier": "claim"})
    try:
        wait_for("a listener", lambda: schema.conn.execute(
            # The listener's last statement: its LISTENs, or the UNLISTEN of its start-up probe.
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
            " AND (query ILIKE 'listen %%' OR query ILIKE 'unlisten %%')",
            (process.application_name,)).fetchone()[0])  # type: ignore[index]
        job = process.insert(echo("claimed", "cooperative_cancel", queue="claim"))[0]["job"]
        running = schema.wait_job(job["id"], "running")
        assert running["attempted_by"] == ["claim-time"]
        assert process.call("cancel", {"id": job["id"]})["state"] == "running"
        time.sleep(0.5)  # the cancel reaches the client while the claim is held (Postgres: at commit)
        process.call("release", {"name": "claim"})
        cancelled = schema.wait_job(job["id"])
        assert cancelled["state"] == "cancelled"
        assert cancelled["errors"][0]["error"] == "JobCancelError: job cancelled remotely"
        assert process.call("stats")["cancelled_at_start"] == 1
    finally:
        process.call("stop")


def test_stop_with_cancel_interrupts_running_jobs(adapter: Pair) -> None:
    process, schema = adapter
    process.call("start", {"client_id": "hard-stop", "queues": ["hard"], "max_workers": 1})
    job = process.insert(echo("interrupted", "cooperative_cancel", queue="hard"))[0]["job"]
    schema.wait_job(job["id"], "running")
    process.call("stop", {"cancel": True})
    after = schema.job(job["id"])
    assert after is not None and after["state"] in ("available", "retryable")


def test_periodic_job_and_periodic_starts(adapter: Pair) -> None:
    process, schema = adapter
    process.call("start", {"client_id": "periodic", "queues": ["periodic_only"],
                           "periodic_run_on_start": True, "periodic_unique": True,
                           "tuning": {"elect_interval_ms": 20}})
    try:
        wait_for("the periodic enqueuer", lambda: process.call("stats")["periodic_starts"] == 1)
        rows = wait_for("both periodic jobs", lambda: len(found := schema.conn.execute(
            "SELECT metadata->>'river:periodic_job_id', metadata->'periodic', unique_key IS NOT NULL "
            "FROM river_job WHERE metadata ? 'river:periodic_job_id' ORDER BY id").fetchall()) == 2 and found)
        assert rows == [("conformance-periodic", True, True), ("conformance-periodic-marker", True, False)]
    finally:
        process.call("stop")


def test_request_resign_moves_leadership(adapter: Pair) -> None:
    process, schema = adapter
    process.call("start", {"client_id": "resigner", "queues": ["resign"],
                           "tuning": {"elect_interval_ms": 50}})
    try:
        def elected() -> object:
            return schema.conn.execute("SELECT elected_at FROM river_leader").fetchone()

        (first,) = wait_for("a leader", elected)
        process.call("tx_begin", {"tx": "resign"})
        process.call("request_resign", {"tx": "resign"})
        process.call("tx_end", {"tx": "resign"})  # rolled back: nothing published
        process.call("request_resign")
        wait_for("a new term", lambda: (row := elected()) is not None and row[0] != first)
        assert process.call("stats")["periodic_starts"] >= 2
    finally:
        process.call("stop")


def test_requests_in_named_schemas_stay_within_ten_connections(adapter: Pair) -> None:
    process, schema = adapter
    names = [f"{schema.name}_custom", schema.name + "s" * (46 - len(schema.name)), f"MixedCase{schema.name}"]
    names += [f"{schema.name}_v{i}" for i in range(4)]
    try:
        for name in names:
            schema.conn.execute(f'CREATE SCHEMA "{name}"')
            assert process.call("migrate", {"schema": name})["versions"]
            assert process.call("migrate", {"schema": name})["versions"] == []  # seen as migrated
            job = process.insert(echo("in a named schema"), schema=name)[0]["job"]
            assert process.call("list", {"ids": [job["id"]], "schema": name})["jobs"] == [job]
            assert _count(schema, f"SELECT count(*) FROM \"{name}\".river_job") == 1
        assert _count(schema, "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                              f"'{process.application_name}'") <= 10
        too_long = schema.name + "s" * (47 - len(schema.name))
        refused = process.error_code("insert", {"jobs": [echo("too long")], "schema": too_long})
        assert refused == jsonrpc.REJECTED
        process.call("start", {"client_id": "custom-schema", "schema": names[0], "max_workers": 1})
        try:
            job = process.insert(echo("worked in a named schema"), schema=names[0])[0]["job"]
            wait_for("the job completing", lambda: process.call(
                "list", {"ids": [job["id"]], "schema": names[0]})["jobs"][0]["state"] == "completed")
        finally:
            process.call("stop")
    finally:
        for name in names:
            schema.conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def test_attempt_error_times_keep_the_nanoseconds_stored(adapter: Pair) -> None:
    process, schema = adapter
    error = '{"at":"2026-01-02T04:04:06.123456789+01:00","attempt":1,"error":"boom","trace":""}'
    job_id = schema.insert_raw('{"behavior":"","duration_ms":0,"message":"errs"}', attempt=1, errors=(error,))
    (job,) = process.call("list", {"ids": [job_id]})["jobs"]
    assert job["errors"] == [
        {"at": "2026-01-02T03:04:06.123456789Z", "attempt": 1, "error": "boom", "trace": ""}]
    assert process.call("retry", {"id": job_id})["errors"] == job["errors"]


def test_attempt_errors_in_other_shapes_are_read_leniently_and_kept(adapter: Pair) -> None:
    # Harness leaf Chaos/DecodeIsolation (newer River): a job whose stored attempt errors are
    # in shapes River does not write is worked, not failed as undecodable; they are reported
    # as River reads them and left as stored.
    process, schema = adapter
    odd = ('{"at": "2024-01-02 03:04:05+00", "attempt": "1", "error": {"message": "boom"},'
           ' "trace": ["frame"]}')
    sparse = '{"error": "sparse", "extra": true}'
    job_id = schema.insert_raw('{"behavior":"","duration_ms":0,"message":"odd errors"}',
                               errors=(odd, "42", sparse))
    schema.conn.execute("UPDATE river_job SET queue = 'decode_isolation' WHERE id = %s", (job_id,))
    before = schema.conn.execute("SELECT errors::text FROM river_job WHERE id = %s", (job_id,)).fetchone()
    process.call("start", {"client_id": "decode", "queues": ["decode_isolation"], "max_workers": 1})
    try:
        worked = schema.wait_job(job_id)
    finally:
        process.call("stop")
    assert (worked["state"], worked["attempt"]) == ("completed", 1)
    zero = "0001-01-01T00:00:00Z"
    assert process.call("list", {"ids": [job_id]})["jobs"][0]["errors"] == [
        {"at": zero, "attempt": 1, "error": '{"message":"boom"}', "trace": '["frame"]'},
        {"at": zero, "attempt": 0, "error": "42", "trace": ""},
        {"at": zero, "attempt": 0, "error": "sparse", "trace": ""},
    ]
    after = schema.conn.execute("SELECT errors::text FROM river_job WHERE id = %s", (job_id,)).fetchone()
    assert after == before


def test_resumable_cursor_and_sleep_behaviours(adapter: Pair) -> None:
    process, schema = adapter
    job = process.insert(echo("resumable", "resumable_cursor", queue="resumable", max_attempts=3,
                              metadata={"application": "retained"}))[0]["job"]
    seen: list[tuple[object, ...]] = []
    for attempt in (1, 2, 3):
        process.call("start", {"client_id": "resumable", "queues": ["resumable"], "max_workers": 1,
                               "retry_delay_ms": 60_000})
        row = schema.wait_job(job["id"], "completed" if attempt == 3 else "retryable")
        process.call("stop")
        seen.append((row["attempt"], row["metadata"].get("river:resumable_step"),
                     row["metadata"].get("river:resumable_cursor"), row["metadata"].get("cursor_observed")))
        assert row["metadata"]["first_attempt"] == 1 and row["metadata"]["application"] == "retained"
        if attempt < 3:
            process.call("retry", {"id": job["id"]})
    assert seen == [(1, "first", {"second": 7}, None), (2, "second", None, 7), (3, "second", None, 7)]

    process.call("start", {"client_id": "sleeper", "queues": ["sleep"], "max_workers": 1})
    try:
        nap = {"behavior": "sleep", "duration_ms": 150, "message": "nap", "opts": {"queue": "sleep"}}
        slept = process.insert(nap)
        done = schema.wait_job(slept[0]["job"]["id"])
        assert done["state"] == "completed"
    finally:
        process.call("stop")


def test_start_fetch_only_known_kinds_and_leader_election_disabled(adapter: Pair) -> None:
    """The start options River's Fleet leaves need (Go v0.48's FetchOnlyKnownKinds and
    LeaderElectionDisabled): a client knowing only the peer kind works it, leaves the echo job
    in the same queue available with no attempt used, and never writes river_leader."""
    process, schema = adapter
    row = schema.conn.execute(
        "INSERT INTO river_job (args, kind, max_attempts, queue) VALUES"
        " ('{\"behavior\":\"\",\"message\":\"peer\"}'::jsonb, 'conformance_echo_peer', 25, 'fleet')"
        " RETURNING id").fetchone()
    assert row is not None
    [other] = [r["job"] for r in process.insert(echo("not mine", queue="fleet"))]
    process.call("start", {"client_id": "fleet-peer", "queues": ["fleet"],
                           "worker_kinds": ["conformance_echo_peer"], "fetch_only_known_kinds": True,
                           "leader_election_disabled": True, "fetch_poll_interval_ms": 50})
    try:
        assert schema.wait_job(int(row[0]))["state"] == "completed"
        left = schema.job(other["id"])
        assert left is not None and (left["state"], left["attempt"]) == ("available", 0)
        assert schema.conn.execute("SELECT count(*) FROM river_leader").fetchone() == (0,)
    finally:
        process.call("stop")
