"""The adapter's pieces without a process: encoding, strict decoding, row normalisation, settings."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from river_protocol.client_core import LeaderElectionConfig
from river_protocol.job import AttemptError, JobRow
from river_protocol.states import JobState
from river_protocol.unique import states_to_bitmask
from river_protocol.work import CancelCause
from river_sync.context import CancellationToken
from river_tools.conformance_adapter import jsonrpc
from river_tools.conformance_adapter import params as p
from river_tools.conformance_adapter.normalize import has_inexact_numbers, job_metadata, protocol_job
from river_tools.conformance_adapter.server import with_application_name
from river_tools.conformance_adapter.worker import (
    KIND_ECHO,
    KIND_ECHO_RENAMED,
    Barriers,
    EchoWorker,
    FixedRetryPolicy,
    Stats,
    client_settings,
    workers_for,
)

T = datetime(2026, 1, 2, 3, 4, 5, 678_900, tzinfo=UTC)


def test_dumps_writes_exact_numbers_and_raw_json_on_one_line() -> None:
    value = {"d": Decimal("0.1000000000000000055511151231257827"), "big": 10**30,
             "raw": jsonrpc.RawJSON('{"a": 1}'), "s": "a\nb<é>", "none": None, "list": [True, False, 1.5]}
    text = jsonrpc.dumps(value)
    assert "\n" not in text
    assert text == ('{"d":0.1000000000000000055511151231257827,"big":1000000000000000000000000000000,'
                    '"raw":{"a": 1},"s":"a\\nb<é>","none":null,"list":[true,false,1.5]}')
    with pytest.raises(ValueError):
        jsonrpc.dumps(float("inf"))
    with pytest.raises(ValueError):
        jsonrpc.dumps(Decimal("NaN"))
    with pytest.raises(TypeError):
        jsonrpc.dumps(object())


def test_loads_keeps_numbers_exact_and_refuses_what_json_lacks() -> None:
    assert jsonrpc.loads('{"n": 1e400, "i": 12345678901234567890}') == {"n": Decimal("1e400"),
                                                                        "i": 12345678901234567890}
    for text in ("NaN", '{"x": Infinity}'):
        with pytest.raises(ValueError):
            jsonrpc.loads(text)


def test_respond_maps_errors_to_codes() -> None:
    def handle(method: str, params: object) -> object:
        if method == "boom":
            raise RuntimeError("river said no")
        if method == "missing":
            raise jsonrpc.NotFound("no such job")
        return None

    assert jsonrpc.respond(handle, '{"jsonrpc":"2.0","id":3,"method":"ok"}') == {
        "jsonrpc": "2.0", "id": 3, "result": {}}
    assert jsonrpc.respond(handle, '{"jsonrpc":"2.0","id":4,"method":"boom"}')["error"] == {
        "code": jsonrpc.REJECTED, "message": "RuntimeError: river said no"}
    missing = jsonrpc.respond(handle, '{"jsonrpc":"2.0","id":5,"method":"missing"}')
    assert missing["error"]["code"] == jsonrpc.NOT_FOUND
    bad_id = jsonrpc.respond(handle, '{"jsonrpc":"2.0","id":"x","method":"ok"}')
    assert bad_id["error"]["code"] == jsonrpc.PARSE_ERROR


def test_decode_is_strict_and_takes_defaults_for_null() -> None:
    job = p.decode(p.InsertJobParams, {"message": "m", "behavior": None,
                                       "opts": {"scheduled_at": "2031-02-03T04:05:06.789+01:00",
                                                "unique": {"by_state": ["available"]}, "tags": ["a_b"]}})
    assert job.message == "m" and job.behavior == ""
    assert job.opts is not None
    assert job.opts.scheduled_at == datetime(2031, 2, 3, 3, 5, 6, 789_000, tzinfo=UTC)
    assert job.opts.unique == p.UniqueParams(by_state=("available",)) and job.opts.tags == ("a_b",)
    assert p.decode(p.Empty, None) == p.Empty()
    for cls, value in [(p.Empty, {"x": 1}), (p.JobParams, {"id": True}),
                       (p.JobParams, {"id": Decimal("1.0")}), (p.JobParams, {"id": 2**63}),
                       (p.ListParams, {"ids": "1"}), (p.StopParams, {"cancel": 0}),
                       (p.InsertOptsParams, {"scheduled_at": "soon"}), (p.Empty, [])]:
        with pytest.raises(jsonrpc.InvalidParams):
            p.decode(cls, value)
    metadata = p.decode(p.QueueParams, {"metadata": {"n": Decimal("1.25")}}).metadata
    assert metadata == {"n": Decimal("1.25")}  # kept whole, exact


def _row(**kw: object) -> JobRow:
    base: dict[str, object] = {
        "id": 7, "kind": KIND_ECHO,
        "encoded_args": b'{"behavior":"","duration_ms":0,"message":"n","x":1e400}',
        "state": JobState.AVAILABLE, "created_at": T, "scheduled_at": T,
        "metadata": {"river:unique_nonce": "0123456789abcdef", "keep": 1},
    }
    return JobRow(**{**base, **kw})  # type: ignore[arg-type]


def test_protocol_job_is_the_protocols_form() -> None:
    row = _row(unique_key=bytes(range(3)), unique_states=states_to_bitmask(["running", "available"]),
               errors=(AttemptError(at=T, attempt=1, error="boom", trace=""),))
    job = protocol_job(row)
    assert job["args"] == jsonrpc.RawJSON('{"behavior":"","duration_ms":0,"message":"n","x":1e400}')
    assert job["metadata"] == {"keep": 1}
    assert job["created_at"] == "2026-01-02T03:04:05.6789Z"
    assert job["unique_key"] == "000102" and job["unique_states"] == ["available", "running"]
    assert job["errors"] == [{"at": "2026-01-02T03:04:05.6789Z", "attempt": 1, "error": "boom", "trace": ""}]
    assert job["attempted_at"] is None and job["attempted_by"] == [] and job["tags"] == []
    # Stored texts, when read apart, keep what the row reader rounded.
    stored = protocol_job(row, '{"big": 1e400, "river:unique_nonce": "x"}',
                          '[{"at":"2026-01-02T04:04:05.123456789+01:00","attempt":1,"error":"boom"}]')
    assert stored["metadata"] == {"big": Decimal("1e400")}
    assert stored["errors"][0]["at"] == "2026-01-02T03:04:05.123456789Z"
    # Errors that changed since the row was read: the row's own times stand.
    assert protocol_job(row, None, "[]")["errors"] == job["errors"]


def test_inexact_numbers_and_metadata() -> None:
    assert has_inexact_numbers({"a": [1, {"b": float("inf")}]})
    assert not has_inexact_numbers({"a": [1, 2.5, "inf"]})
    assert job_metadata('{"river:unique_nonce":"x","n":1.50}') == {"n": Decimal("1.50")}


def test_application_name_joins_the_url_query() -> None:
    assert with_application_name("postgres://h/db", "a b") == "postgres://h/db?application_name=a%20b"
    assert with_application_name("postgres://h/db?options=-c%20x", "n") == \
        "postgres://h/db?options=-c%20x&application_name=n"
    assert with_application_name("postgres://h/db", "") == "postgres://h/db"


def test_barriers_hold_until_released_and_stay_released() -> None:
    barriers = Barriers()
    barriers.release("early")
    assert barriers.wait("early")
    token = CancellationToken()
    passed: list[bool] = []
    waiter = threading.Thread(target=lambda: passed.append(barriers.wait("late", token)))
    waiter.start()
    waiter.join(0.05)
    assert waiter.is_alive()
    barriers.release("late")
    waiter.join(5)
    assert passed == [True]
    token.cancel(CancelCause.REMOTE_CANCEL)
    assert barriers.wait("never", token) is False  # a cancelled job stops waiting


def test_worker_kinds_and_settings() -> None:
    worker = EchoWorker(Barriers(), Stats())
    assert workers_for((), worker).kinds == frozenset({KIND_ECHO})
    assert workers_for((KIND_ECHO_RENAMED,), worker).kinds == frozenset({KIND_ECHO, KIND_ECHO_RENAMED})
    settings = client_settings(p.StartParams(client_id="c", queues=("a", "b"), fetch_poll_interval_ms=100,
                                             tuning=p.TuningParams(elect_interval_ms=20), retry_delay_ms=5,
                                             poll_only=True, fetch_only_known_kinds=True), worker, Stats())
    assert set(settings["queues"]) == {"a", "b"}
    assert settings["queues"]["a"].fetch_poll_interval == timedelta(milliseconds=100)
    assert settings["queues"]["a"].max_workers == 4
    assert isinstance(settings["leader_election"], LeaderElectionConfig)
    assert settings["leader_election"].interval == timedelta(milliseconds=20)
    assert settings["notifications"] is False and settings["fetch_only_known_kinds"] is True
    assert settings["retry_policy"].next_retry(_row(), T, 0.5) == T + timedelta(milliseconds=5)
    disabled = p.StartParams(leader_election_disabled=True)
    assert client_settings(disabled, worker, Stats())["leader_election_disabled"] is True
    # The client refuses the periodic jobs (LeaderElectionDisabledError, test_protocol_errors).
    refused = client_settings(p.StartParams(leader_election_disabled=True, periodic_run_on_start=True),
                              worker, Stats())
    assert refused["leader_election_disabled"] is True and len(refused["periodic_jobs"]) == 1
    with pytest.raises(jsonrpc.InvalidParams):
        client_settings(p.StartParams(periodic_unique=True), worker, Stats())
    assert FixedRetryPolicy(timedelta(seconds=1)).next_retry(_row(), T, 0.0) == T + timedelta(seconds=1)
