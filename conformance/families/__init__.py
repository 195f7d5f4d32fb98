"""One module per fixture family; ``FAMILIES`` lists them in report order."""

from __future__ import annotations

import importlib
from types import ModuleType

FAMILY_MODULES = (
    "go_json",
    "unique_keys",
    "unique_states",
    "retry",
    "snooze",
    "cron",
    "schema_sqlite",
    "schema_postgres",
    "upstream_unique_keys",
    "upstream_cron",
    "upstream_cron_invalid",
    "upstream_snooze",
    "upstream_job_states",
    "upstream_notifications",
    "upstream_metadata_keys",
    "upstream_attempt_error",
    "upstream_retry",
)


def load_families(names: list[str] | None = None) -> list[ModuleType]:
    return [
        importlib.import_module(f"conformance.families.{name}")
        for name in FAMILY_MODULES
        if names is None or name in names
    ]
