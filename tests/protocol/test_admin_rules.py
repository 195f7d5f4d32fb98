"""Rules of the management API: intent sequences, local delivery, listing, cursors, claim filters."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from river_protocol.admin import (
    cancel_intent as make_cancel,
)
from river_protocol.admin import (
    count_by_state,
    decode_job_cursor,
    deliver_control_locally,
    encode_job_cursor,
    encode_queue_metadata,
    job_page,
    list_jobs_intent,
    local_cancel_payload,
    pause_intents,
    update_output_intent,
    update_queue_intents,
)
from river_protocol.claim_filters import TagFilter, claim_filter
from river_protocol.errors import ValidationError
from river_protocol.intents import CancelJob, Notify, PauseQueue, ResumeQueue, UpdateJobMetadata, UpdateQueue
from river_protocol.job import JobRow
from river_protocol.machines.notifications import (
    TOPIC_CONTROL,
    build_cancel,
    build_metadata_changed,
    build_pause,
    build_resume,
    parse_control,
)
from river_protocol.states import JobState

T0 = datetime(2031, 3, 4, 12, 0, 0, 250000, tzinfo=UTC)


def row(job_id: int, state: JobState = JobState.AVAILABLE, **kw: object) -> JobRow:
    return JobRow(id=job_id, kind="k", encoded_args=b"{}", state=state, **kw)  # type: ignore[arg-type]


def test_cancel_intent_stores_go_time_json() -> None:
    intent = make_cancel(7, T0)
    assert isinstance(intent, CancelJob) and intent.id == 7
    assert intent.cancel_attempted_at == b'"2031-03-04T12:00:00.25Z"'
    with pytest.raises(ValidationError, match="positive integer"):
        make_cancel(0, T0)


def test_local_cancel_only_for_running_rows() -> None:
    payload = local_cancel_payload(row(3, JobState.RUNNING, queue="q"))
    assert payload == '{"action":"cancel","job_id":3,"queue":"q"}'
    assert local_cancel_payload(row(3, JobState.CANCELLED)) is None


@pytest.mark.parametrize("pause", [True, False])
def test_pause_and_resume_announce_in_the_same_transaction(pause: bool) -> None:
    change, notify = pause_intents("*", pause=pause)
    assert isinstance(change, PauseQueue if pause else ResumeQueue) and change.name == "*"
    assert isinstance(notify, Notify) and notify.topic == TOPIC_CONTROL
    parsed = parse_control(notify.payloads[0])
    assert parsed is not None and parsed.action == ("pause" if pause else "resume") and parsed.queue == "*"
    with pytest.raises(ValidationError):
        pause_intents("", pause=pause)


def test_queue_update_with_and_without_metadata() -> None:
    (only,) = update_queue_intents("q")
    assert only == UpdateQueue("q")
    update, notify = update_queue_intents("q", {"b": 1, "a": "<x>"})
    assert isinstance(update, UpdateQueue) and update.metadata == b'{"a":"\\u003cx\\u003e","b":1}'
    assert isinstance(notify, Notify)
    expected = '{"action":"metadata_changed","metadata":{"a":"\\u003cx\\u003e","b":1},"queue":"q"}'
    assert notify.payloads == (expected,)
    with pytest.raises(ValidationError, match="one queue"):
        update_queue_intents("*", {})


def test_queue_metadata_forms() -> None:
    assert encode_queue_metadata('{"a": 1}') == b'{"a":1}'
    assert encode_queue_metadata(b"{}") == b"{}"
    for bad in ("[1]", "nope", 5):
        with pytest.raises(ValidationError):
            encode_queue_metadata(bad)


def test_update_output_merges_output_key() -> None:
    intent = update_output_intent(4, {"done": True})
    assert intent == UpdateJobMetadata(4, b'{"output":{"done":true}}')


def test_local_delivery_rule() -> None:
    cancel, pause, resume = build_cancel(3, "q"), build_pause("q"), build_resume("*")
    metadata = build_metadata_changed("q", b"{}")
    for payload in (cancel, pause, resume):
        assert deliver_control_locally(payload, in_caller_tx=False, listening=True)
        assert not deliver_control_locally(payload, in_caller_tx=True, listening=False)
    assert deliver_control_locally(metadata, in_caller_tx=False, listening=False)
    assert not deliver_control_locally(metadata, in_caller_tx=False, listening=True)
    assert not deliver_control_locally('{"action":"bogus","queue":"q"}', in_caller_tx=False, listening=False)


def test_list_intent_validation_and_states_by_name() -> None:
    intent = list_jobs_intent(states=["available", JobState.RUNNING], kinds=("a",), limit=5)
    assert intent.filter.states == (JobState.AVAILABLE, JobState.RUNNING) and intent.limit == 5
    with pytest.raises(ValidationError, match="unknown job state"):
        list_jobs_intent(states=["nope"])
    with pytest.raises(ValidationError, match="single string"):
        list_jobs_intent(kinds="abc")
    with pytest.raises(ValidationError, match="limit"):
        list_jobs_intent(limit=0)
    with pytest.raises(ValidationError, match="order"):
        list_jobs_intent(order_by="kind")
    with pytest.raises(ValidationError, match="timezone"):
        list_jobs_intent(created_after=datetime(2030, 1, 1))


def test_cursor_round_trip_and_mismatch() -> None:
    job = row(9, scheduled_at=T0)
    token = encode_job_cursor(job, "scheduled_at", True)
    assert decode_job_cursor(token, "scheduled_at", True) == (T0, 9)
    assert decode_job_cursor(encode_job_cursor(job, "id", False), "id", False) == (None, 9)
    with pytest.raises(ValidationError, match="same order_by"):
        decode_job_cursor(token, "id", False)
    with pytest.raises(ValidationError, match="invalid job list cursor"):
        decode_job_cursor("!!", "id", False)
    intent = list_jobs_intent(order_by="scheduled_at", descending=True, after=token)
    assert intent.after == (T0, 9)


def test_job_page_has_cursor_only_when_full() -> None:
    intent = list_jobs_intent(limit=2)
    full = job_page(intent, [row(1), row(2)])
    assert full.next_cursor is not None and decode_job_cursor(full.next_cursor, "id", False) == (None, 2)
    assert job_page(intent, [row(1)]).next_cursor is None
    assert job_page(intent, []).next_cursor is None


def test_count_by_state_fills_every_state() -> None:
    counts = count_by_state({(JobState.AVAILABLE, "a", "k"): 2, (JobState.AVAILABLE, "b", "k"): 1,
                             (JobState.RUNNING, "a", "x"): 4})
    assert counts[JobState.AVAILABLE] == 3 and counts[JobState.RUNNING] == 4
    assert counts[JobState.DISCARDED] == 0 and set(counts) == set(JobState)


def test_claim_filter_defaults_off() -> None:
    assert claim_filter(known_kinds={"a"}, fetch_only_known_kinds=False, tag_filter=None).kinds is None
    only = claim_filter(known_kinds={"b", "a"}, fetch_only_known_kinds=True, tag_filter=None)
    assert only.kinds == ("a", "b") and only.tags_any is None and not only.untagged_only
    pool = TagFilter(("red", "red", "blue"))
    tagged = claim_filter(known_kinds=(), fetch_only_known_kinds=False, tag_filter=pool)
    assert tagged.tags_any == ("red", "blue") and not tagged.untagged_only
    untagged = claim_filter(known_kinds=(), fetch_only_known_kinds=False, tag_filter=TagFilter())
    assert untagged.untagged_only and untagged.tags_any is None
    with pytest.raises(ValidationError):
        TagFilter("abc")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        TagFilter(("bad tag!",))


def test_metadata_changed_payload_is_valid_json() -> None:
    _, notify = update_queue_intents("q", json.dumps({"k": [1, 2]}))
    assert isinstance(notify, Notify)
    assert json.loads(notify.payloads[0])["metadata"] == {"k": [1, 2]}


# ---------------------------------------------------------------- helpers both drivers' admin APIs share


def test_control_payloads_are_the_notify_payloads_in_order() -> None:
    from river_protocol.admin import control_payloads, pause_intents, update_queue_intents

    intents = (*pause_intents("q1", pause=True), *update_queue_intents("q2", {"a": 1}))
    payloads = control_payloads(intents)
    assert [parse_control(p).action for p in payloads] == ["pause", "metadata_changed"]
    assert control_payloads(update_queue_intents("q2")) == ()


def test_delete_refusal_names_a_running_job() -> None:
    from river_protocol.admin import JobRunningError, delete_refusal

    running = delete_refusal(ValidationError("job 3 is running and cannot be deleted"))
    assert type(running) is JobRunningError and "job 3 is running" in str(running)
    other = ValidationError("something else")
    assert delete_refusal(other) is other
    already = JobRunningError("running")
    assert delete_refusal(already) is already


def test_list_queues_intent_checks_its_limit() -> None:
    from river_protocol.admin import list_queues_intent
    from river_protocol.intents import ListQueues

    assert list_queues_intent(5, "b") == ListQueues(limit=5, after_name="b")
    for bad in (0, 10_001):
        with pytest.raises(ValidationError, match="limit must be from 1 to 10000"):
            list_queues_intent(bad, None)


def test_found_queue_raises_for_a_missing_one() -> None:
    from river_protocol.admin import found_queue
    from river_protocol.errors import QueueNotFoundError

    row = object()
    assert found_queue("q", row) is row  # type: ignore[arg-type]
    with pytest.raises(QueueNotFoundError, match="queue 'q' not found"):
        found_queue("q", None)
