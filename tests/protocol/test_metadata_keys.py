"""The reserved metadata names are defined once and used everywhere."""

from __future__ import annotations

from river_protocol import metadata_keys, outcomes, resumable
from river_protocol.dialects.sqlite import jobs as sqlite_jobs
from river_protocol.machines import periodic


def test_modules_use_the_one_definition() -> None:
    assert outcomes.OUTPUT_KEY == metadata_keys.OUTPUT == "output"
    assert resumable.STEP_KEY == metadata_keys.RESUMABLE_STEP == "river:resumable_step"
    assert resumable.CURSOR_KEY == metadata_keys.RESUMABLE_CURSOR == "river:resumable_cursor"
    assert periodic.METADATA_PERIODIC_ID == metadata_keys.PERIODIC_JOB_ID == "river:periodic_job_id"
    assert sqlite_jobs._NONCE_KEY == metadata_keys.UNIQUE_NONCE == "river:unique_nonce"


def test_reserved_names_cover_every_key_river_writes() -> None:
    written = {
        "output", "river:periodic_job_id", "river:rescue_count", "river:resumable_cursor",
        "river:resumable_step", "river:unique_nonce", "cancel_attempted_at", "periodic", "snoozes",
        "unique_key_conflict",
    }
    assert written == metadata_keys.RESERVED
