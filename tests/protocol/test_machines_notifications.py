"""Notification payloads, channel names, the insert throttle, and base helpers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from river_protocol.errors import ValidationError
from river_protocol.intents import InsertParams, Notify
from river_protocol.machines import notifications as n
from river_protocol.machines.base import exponential_backoff, uniform
from river_protocol.machines.throttle import InsertNotifyThrottle
from river_protocol.states import JobState

T0 = datetime(2025, 1, 1, tzinfo=UTC)


class FixedRng:
    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


def test_builders_match_go() -> None:
    assert n.build_insert("q") == '{"queue":"q"}'
    assert n.build_cancel(5, "q") == '{"action":"cancel","job_id":5,"queue":"q"}'
    assert n.build_pause("*") == '{"action":"pause","queue":"*"}'
    assert n.build_resume("q") == '{"action":"resume","queue":"q"}'
    assert n.build_metadata_changed("q", b'{"a": "<b>"}') == (
        '{"action":"metadata_changed","metadata":{"a":"\\u003cb\\u003e"},"queue":"q"}'
    )
    assert n.build_resigned("c1") == '{"action":"resigned","leader_id":"c1"}'
    assert n.build_request_resign() == '{"action":"request_resign","leader_id":""}'
    assert n.build_control(n.ControlPayload("cancel", "q", 7)) == n.build_cancel(7, "q")
    assert n.build_control(n.ControlPayload("pause", "q")) == n.build_pause("q")
    with pytest.raises(ValidationError):
        n.build_metadata_changed("q", b"[1]")


def test_parsers_are_lenient() -> None:
    assert n.parse_insert('{"queue": "q", "extra": 1}') == n.InsertPayload("q")
    assert n.parse_insert("not json") is None
    assert n.parse_control('{"action" : "cancel", "job_id" : 12, "queue" : "q"}') == n.ControlPayload(
        "cancel", "q", 12
    )
    assert n.parse_control('{"action":"explode","queue":"q"}') is None
    assert n.parse_control('{"action":"pause","queue":5}') is None
    parsed = n.parse_control('{"action":"metadata_changed","metadata":{"a":1},"queue":"*"}')
    assert parsed is not None and parsed.metadata == b'{"a":1}' and parsed.applies_to("x")
    assert n.parse_leadership('{"action":"resigned","leader_id":"c"}') == n.LeadershipPayload("resigned", "c")
    assert n.parse_leadership('{"action":"other","leader_id":"c"}') is None
    assert n.parse_leadership("[]") is None


def test_cancel_never_matches_all_queues() -> None:
    assert not n.ControlPayload("cancel", "*", 1).applies_to("q")
    assert n.ControlPayload("cancel", "q", 1).applies_to("q")
    assert n.ControlPayload("pause", "*").applies_to("q")


def test_channel_names() -> None:
    assert n.channel_name("public", "river_insert") == "public.river_insert"
    assert n.quoted_channel("public", "river_insert") == '"public.river_insert"'
    assert n.topic_of_channel("public.river_insert", "public") == "river_insert"
    assert n.topic_of_channel("my.schema.river_control") == "river_control"
    with pytest.raises(ValidationError):
        n.channel_name("x" * 47, "river_leadership")
    with pytest.raises(ValidationError):
        n.channel_name("", "river_insert")


def test_throttle_once_per_cooldown_per_queue() -> None:
    t = InsertNotifyThrottle(timedelta(milliseconds=100))
    assert t.admit(["a", "b", "a"], T0) == ("a", "b")
    assert t.admit(["a"], T0 + timedelta(milliseconds=99)) == ()
    assert t.admit(["a", "c"], T0 + timedelta(milliseconds=100)) == ("a", "c")
    jobs = [
        InsertParams(kind="k", encoded_args=b"{}", queue="x"),
        InsertParams(kind="k", encoded_args=b"{}", queue="y", state=JobState.SCHEDULED),
    ]
    assert t.notify_for_insert(jobs, T0) == Notify("river_insert", ('{"queue":"x"}',))
    assert t.notify_for_insert(jobs, T0) is None
    t.forget_before(T0 + timedelta(seconds=1))
    assert t.admit(["x"], T0 + timedelta(milliseconds=1)) == ("x",)
    with pytest.raises(ValidationError):
        InsertNotifyThrottle(timedelta(0))


def test_jitter_helpers() -> None:
    assert uniform(FixedRng(0.5), timedelta(seconds=5), timedelta(seconds=6)) == timedelta(seconds=5.5)
    assert exponential_backoff(1, 7, FixedRng(0.0)) == timedelta(seconds=0.9)
    assert exponential_backoff(7, 7, FixedRng(1.0)) == timedelta(seconds=64 * 1.1)
    assert exponential_backoff(8, 7, FixedRng(0.5)) == timedelta(seconds=1)
    with pytest.raises(ValidationError):
        exponential_backoff(0, 7, FixedRng(0.5))
    with pytest.raises(ValidationError):
        uniform(FixedRng(0.5), timedelta(seconds=2), timedelta(seconds=1))
