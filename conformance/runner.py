"""Runs every fixture family and collects per-case results."""

from __future__ import annotations

import json
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from conformance.families import load_families
from conformance.upstream import missing_is_failure, upstream_dir

DEFAULT_FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class FamilyResult:
    name: str
    cases: int = 0
    passed: int = 0
    skipped: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    # Local runs without River's goldens report them missing instead of failing.
    missing: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return len(self.failures)


class Skip(Exception):
    """Raised by a family's check when the case needs something absent (e.g. no Postgres URL)."""


def run_family(module: ModuleType, fixtures_dir: Path, options: dict[str, Any]) -> FamilyResult:
    result = FamilyResult(module.NAME)
    upstream = getattr(module, "SOURCE", "") == "upstream"
    directory = upstream_dir(options) if upstream else fixtures_dir
    path = directory / module.FILENAME
    if not path.exists():
        if upstream and not missing_is_failure():
            result.missing = True
            result.notes.append(f"River's golden {path} is missing (set RIVER_UPSTREAM_DIR)")
        else:
            result.failures.append(("<file>", f"fixture file {path} not found"))
        return result
    raw = path.read_bytes()
    fixture = json.loads(raw)
    # Families that hash source text (unique-key args) read it from here.
    options = {**options, "fixture_bytes": raw, "notes": result.notes}
    case_fn = getattr(module, "cases", None)
    cases: Iterable[dict[str, Any]] = case_fn(fixture, options) if case_fn else fixture["cases"]
    for case in cases:
        result.cases += 1
        case_id = str(case.get("id", result.cases))
        try:
            problem = module.check(case, fixture, options)
        except Skip as skip:
            result.skipped += 1
            result.cases -= 1
            del skip
            continue
        except Exception:
            problem = "raised:\n" + traceback.format_exc(limit=6)
        if problem is None:
            result.passed += 1
        else:
            result.failures.append((case_id, problem))
    return result


def run_all(
    fixtures_dir: Path = DEFAULT_FIXTURES,
    families: list[str] | None = None,
    options: dict[str, Any] | None = None,
) -> list[FamilyResult]:
    opts = options or {}
    return [
        run_family(m, fixtures_dir, opts)
        for m in load_families(families)
    ]
