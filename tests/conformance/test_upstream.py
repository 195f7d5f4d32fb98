"""River's own goldens, read where conformance.upstream finds them, through the upstream_* families."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from conformance.families import FAMILY_MODULES, load_families
from conformance.raw_json import array_elements, compact, raw_value
from conformance.runner import run_all, run_family
from conformance.upstream import DEFAULT_UPSTREAM_DIR, UPSTREAM_ENV, missing_is_failure, upstream_dir

UPSTREAM_FAMILIES = [name for name in FAMILY_MODULES if name.startswith("upstream_")]
CASE_COUNTS = {
    "upstream_unique_keys": 23,
    "upstream_cron": 36,
    "upstream_cron_invalid": 21,
    "upstream_snooze": 16,
    "upstream_job_states": 9,
    "upstream_notifications": 10,
    "upstream_metadata_keys": 6,
    "upstream_attempt_error": 2,
    "upstream_retry": 5,
}


def test_every_golden_section_has_a_family() -> None:
    assert sorted(UPSTREAM_FAMILIES) == sorted(CASE_COUNTS)


@pytest.mark.parametrize("name", UPSTREAM_FAMILIES)
def test_upstream_family_passes_every_case(name: str) -> None:
    if not upstream_dir().exists() and not missing_is_failure():
        pytest.skip(f"River's goldens are not at {upstream_dir()} (CI fails instead)")
    (result,) = run_all(families=[name])
    assert result.failures == []
    assert not result.missing
    assert (result.cases, result.passed, result.skipped) == (CASE_COUNTS[name], CASE_COUNTS[name], 0)


def test_the_default_directory_sits_beside_the_repository() -> None:
    repo = Path(__file__).resolve().parents[2]
    assert repo.parent / "shared" / "river-upstream" == DEFAULT_UPSTREAM_DIR
    assert upstream_dir(env={}) == DEFAULT_UPSTREAM_DIR
    assert upstream_dir(env={UPSTREAM_ENV: "/x"}) == Path("/x")
    assert upstream_dir({"upstream_dir": Path("/y")}, env={UPSTREAM_ENV: "/x"}) == Path("/y")


@pytest.mark.parametrize(("ci", "fails"), [("true", True), ("1", True), ("", False), ("false", False)])
def test_ci_decides_whether_a_missing_golden_fails(ci: str, fails: bool) -> None:
    assert missing_is_failure({"CI": ci}) is fails


def _family(name: str) -> ModuleType:
    (module,) = load_families([name])
    return module


def test_missing_goldens_fail_under_ci_and_are_reported_missing_locally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _family("upstream_metadata_keys")
    monkeypatch.setenv(UPSTREAM_ENV, str(tmp_path / "absent"))
    monkeypatch.setenv("CI", "true")
    under_ci = run_family(module, tmp_path, {})
    assert [case_id for case_id, _ in under_ci.failures] == ["<file>"] and not under_ci.missing
    monkeypatch.delenv("CI")
    local = run_family(module, tmp_path, {})
    assert local.failures == [] and local.missing and "RIVER_UPSTREAM_DIR" in local.notes[0]


def test_a_wrong_golden_fails_its_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = {"output": "output", "rescue_count": "river:rescued", "unique_nonce": "river:unique_nonce"}
    (tmp_path / "protocol_values.json").write_text(json.dumps({"metadata_keys": keys}))
    monkeypatch.setenv(UPSTREAM_ENV, str(tmp_path))
    result = run_family(_family("upstream_metadata_keys"), tmp_path, {})
    assert (result.cases, result.passed) == (3, 2)
    assert result.failures == [("rescue_count", "key: got 'river:rescue_count', want 'river:rescued'")]


def test_a_unique_key_golden_is_hashed_from_its_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Same value, two spellings: only the text decides the hash.
    case = {
        "expected_sha256": "", "expected_state_mask": 245, "kind": "k", "name": "spelling",
        "now": "2026-01-02T03:04:05Z", "queue": "default",
        "scheduled_at": None, "selected_unique_paths": None,
        "options": {"by_args": True, "by_period_nanos": 0, "by_queue": False, "exclude_kind": False},
    }
    import hashlib

    case["expected_sha256"] = hashlib.sha256(b'&kind=k&args={"n":1.50}').hexdigest()
    text = json.dumps({"cases": [{**case, "args": {"n": 1.5}}], "typed_only_cases": []}, indent=2)
    (tmp_path / "unique_keys.json").write_text(text.replace('"n": 1.5', '"n": 1.50'))
    monkeypatch.setenv(UPSTREAM_ENV, str(tmp_path))
    result = run_family(_family("upstream_unique_keys"), tmp_path, {})
    assert (result.cases, result.passed, result.failures) == (1, 1, [])
    (tmp_path / "unique_keys.json").write_text(text)
    again = run_family(_family("upstream_unique_keys"), tmp_path, {})
    assert [case_id for case_id, _ in again.failures] == ["spelling"]


def test_raw_value_returns_the_source_bytes() -> None:
    doc = b'{"a": [ {"x": 1.50, "x": 2}, "\\u0041" ], "b": {"c": [1, 2]}}'
    assert raw_value(doc, "a", 0, "x") == b"1.50"
    assert raw_value(doc, "a", 1) == b'"\\u0041"'
    assert raw_value(doc, "b") == b'{"c": [1, 2]}'
    assert compact(raw_value(doc, "a")) == b'[{"x":1.50,"x":2},"\\u0041"]'
    assert list(array_elements(b"[ ]")) == []
    for path in (("z",), ("a", 5), ("a", "x")):
        with pytest.raises(KeyError):
            raw_value(doc, *path)
    with pytest.raises(ValueError, match="not a JSON array"):
        list(array_elements(b"{}"))
