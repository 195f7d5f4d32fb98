"""The adapter's transport and strict requests, over real stdio: each error code the protocol names."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from river_tools.conformance_adapter import jsonrpc
from tests.conformance_adapter.adapter_process import AdapterProcess, ScenarioSchema, adapter_in_schema, echo
from tests.conftest import pg_base_url

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def adapter() -> Iterator[tuple[AdapterProcess, ScenarioSchema]]:
    with adapter_in_schema(pg_base_url()) as pair:
        yield pair


def test_bad_json_is_a_parse_error_with_id_zero(adapter: tuple[AdapterProcess, ScenarioSchema]) -> None:
    process, _ = adapter
    for line in ("{not json", "[1, 2]", '"text"', '{"jsonrpc":"2.0","id":"seven","method":"handshake"}',
                 '{"jsonrpc":"2.0","id":1.5,"method":"handshake"}', '{"jsonrpc":"2.0","id":1,"method":7}'):
        answer = process.send_line(line)
        assert answer["error"]["code"] == jsonrpc.PARSE_ERROR, line
        assert answer["id"] == 0
        assert "result" not in answer


def test_wrong_jsonrpc_version_is_an_invalid_request(adapter: tuple[AdapterProcess, ScenarioSchema]) -> None:
    process, _ = adapter
    for envelope in ({"id": 4, "method": "handshake"}, {"jsonrpc": "1.0", "id": 4, "method": "handshake"}):
        answer = process.send_line(json.dumps(envelope))
        assert answer == {"jsonrpc": "2.0", "id": 4,
                          "error": {"code": jsonrpc.INVALID_REQUEST, "message": "jsonrpc must be 2.0"}}


def test_unknown_method(adapter: tuple[AdapterProcess, ScenarioSchema]) -> None:
    process, _ = adapter
    assert process.error_code("not_a_method") == jsonrpc.METHOD_NOT_FOUND
    assert process.error_code("") == jsonrpc.METHOD_NOT_FOUND


def test_unknown_fields_are_invalid_params_at_every_depth(
    adapter: tuple[AdapterProcess, ScenarioSchema],
) -> None:
    process, schema = adapter
    assert process.error_code("handshake", {"unexpected": True}) == jsonrpc.INVALID_PARAMS
    assert process.error_code("insert", {"jobs": [{"message": "m", "opts": {"not_an_option": True}}]}) \
        == jsonrpc.INVALID_PARAMS
    unknown_unique = {"jobs": [{"message": "m", "opts": {"unique": {"by_nothing": True}}}]}
    assert process.error_code("insert", unknown_unique) == jsonrpc.INVALID_PARAMS
    assert process.error_code("start", {"client_id": "unknown", "not_an_option": 1}) == jsonrpc.INVALID_PARAMS
    assert process.error_code("start", {"tuning": {"fast": True}}) == jsonrpc.INVALID_PARAMS
    # Nothing was inserted or started by the refused requests.
    assert schema.conn.execute("SELECT count(*) FROM river_job").fetchone() == (0,)
    assert process.error_code("stats") == jsonrpc.REJECTED


@pytest.mark.parametrize(("method", "params"), [
    ("cancel", {"id": "1"}),
    ("cancel", {"id": 1.5}),
    ("cancel", {"id": 10 ** 20}),
    ("list", {"ids": [True]}),
    ("list", {"limit": "2"}),
    ("list", {"states": "available"}),
    ("insert", {"jobs": {"message": "m"}}),
    ("insert", {"jobs": [{"message": 3}]}),
    ("insert", {"jobs": [{"duration_ms": 1e2}]}),
    ("insert", {"jobs": [{"opts": {"pending": "yes"}}]}),
    ("insert", {"jobs": [{"opts": {"scheduled_at": "tomorrow"}}]}),
    ("stop", {"cancel": 1}),
    ("migrate", {"direction": "sideways"}),
    ("migrate", {"target_version": "3"}),
    ("queue", {"action": "explode", "name": "default"}),
    ("tx_begin", {}),
    ("handshake", [1]),
])
def test_wrong_types_are_invalid_params(adapter: tuple[AdapterProcess, ScenarioSchema], method: str,
                                        params: object) -> None:
    process, _ = adapter
    assert process.error_code(method, params) == jsonrpc.INVALID_PARAMS


def test_missing_and_null_params_take_the_defaults(adapter: tuple[AdapterProcess, ScenarioSchema]) -> None:
    process, _ = adapter
    for request in ({"jsonrpc": "2.0", "id": 9, "method": "handshake"},
                    {"jsonrpc": "2.0", "id": 9, "method": "handshake", "params": None}):
        answer = process.send_line(json.dumps(request))
        assert answer["result"]["implementation"] == "python"
    inserted = process.insert({"message": "nulls", "behavior": None, "opts": {"queue": None, "tags": None}})
    assert inserted[0]["job"]["queue"] == "default"
    assert inserted[0]["job"]["args"] == {"behavior": "", "duration_ms": 0, "message": "nulls"}


def test_not_found_names_jobs_queues_and_transactions(adapter: tuple[AdapterProcess, ScenarioSchema]) -> None:
    process, _ = adapter
    assert process.error_code("cancel", {"id": 987654321}) == jsonrpc.NOT_FOUND
    assert process.error_code("retry", {"id": 987654321}) == jsonrpc.NOT_FOUND
    assert process.error_code("queue", {"action": "pause", "name": "no_such_queue"}) == jsonrpc.NOT_FOUND
    assert process.error_code("queue", {"action": "update", "name": "no_such_queue"}) == jsonrpc.NOT_FOUND
    assert process.error_code("insert", {"jobs": [echo("m")], "tx": "never_opened"}) == jsonrpc.NOT_FOUND
    assert process.error_code("tx_end", {"tx": "never_opened", "commit": True}) == jsonrpc.NOT_FOUND


def test_what_river_refuses_is_rejected(adapter: tuple[AdapterProcess, ScenarioSchema]) -> None:
    process, schema = adapter
    assert process.error_code("insert", {"jobs": [echo("bad tag", tags=["a"])]}) == jsonrpc.REJECTED
    assert process.error_code("insert", {"jobs": []}) == jsonrpc.REJECTED
    assert process.error_code("insert", {"jobs": [echo("bad state", unique={"by_state": ["nowhere"]})]}) \
        == jsonrpc.REJECTED
    assert process.error_code("insert", {"jobs": [echo("bad priority", priority=9)]}) == jsonrpc.REJECTED
    # A batch repeating a unique key: River refuses it whole (Batch/Atomicity), nothing inserted.
    twice = echo("bad repeat", unique={"by_args": True})
    assert process.error_code("insert", {"jobs": [twice, echo("bad neighbour"), twice]}) == jsonrpc.REJECTED
    refused = schema.conn.execute("SELECT count(*) FROM river_job WHERE args->>'message' LIKE 'bad %'")
    assert refused.fetchone() == (0,)
    assert process.error_code("stop") == jsonrpc.REJECTED
    assert process.error_code("start", {"periodic_unique": True}) == jsonrpc.INVALID_PARAMS
    assert process.error_code("start", {"leader_election_disabled": True, "periodic_run_on_start": True}) \
        == jsonrpc.REJECTED
    assert process.error_code("start", {"worker_kinds": ["someone_else"]}) == jsonrpc.INVALID_PARAMS
    assert process.error_code("stats") == jsonrpc.REJECTED  # none of those started a client


def test_answers_keep_request_order_and_ids(adapter: tuple[AdapterProcess, ScenarioSchema]) -> None:
    process, _ = adapter
    answers = [process.call_raw("handshake") for _ in range(3)]
    ids = [answer["id"] for answer in answers]
    assert ids == sorted(ids) and len(set(ids)) == 3


def test_stdin_closing_ends_the_process_cleanly() -> None:
    schema = ScenarioSchema(pg_base_url())
    try:
        process = AdapterProcess("postgres", schema.adapter_url, "river-conformance-python-exit")
        process.call("migrate")
        process.call("start", {"client_id": "exiting", "max_workers": 1})
        assert process.close() == 0  # the running client is stopped on the way out
    finally:
        schema.drop()


def test_bad_environment_fails_at_once() -> None:
    process = AdapterProcess("mysql", "postgresql://nowhere", "x")
    assert process.close() == 2
    assert "RIVER_CONFORMANCE_DRIVER" in process.stderr
