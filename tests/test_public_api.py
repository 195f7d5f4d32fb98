"""What a new user reaches for first (issue 10.6): names every driver exports, the documented Client table."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any, ClassVar

import pytest

import river_asyncio
import river_sync
import river_trio
from river_db.migrator import Migrator
from river_protocol.args import arg_field, json_name
from river_protocol.retry import RetryPolicy

CLIENT_GUIDE = Path(__file__).resolve().parent.parent / "docs/guides/client.md"


@pytest.mark.parametrize("driver", [river_sync, river_trio, river_asyncio], ids=lambda m: m.__name__)
def test_first_reach_names_import_from_either_driver(driver: Any) -> None:
    # Plain `from river_sync import arg_field` used to fail: the README's first example needs it.
    namespace: dict[str, Any] = {}
    exec(f"from {driver.__name__} import arg_field, RetryPolicy, Migrator, SubscriptionTimeoutError",
         namespace)
    assert namespace["arg_field"] is arg_field
    assert namespace["RetryPolicy"] is RetryPolicy
    assert namespace["Migrator"] is Migrator
    assert issubclass(namespace["SubscriptionTimeoutError"], TimeoutError)

    @dataclasses.dataclass
    class Args:
        kind: ClassVar[str] = "first_reach"
        customer: int = namespace["arg_field"](json="customer_id")

    (field,) = dataclasses.fields(Args)
    assert json_name(field) == "customer_id"

    class Now:
        def next_retry(self, job: Any, now: Any, rand: float) -> Any:
            return now

    assert isinstance(Now(), namespace["RetryPolicy"])


USER_CAUGHT_ERRORS = ("RiverError", "ValidationError", "EncodingError", "CronParseError", "UniqueKeyError",
                      "MigrationError", "RiverProSchemaError", "JobNotFoundError", "QueueNotFoundError",
                      "DatabaseUnavailableError")


@pytest.mark.parametrize("driver", [river_sync, river_trio, river_asyncio], ids=lambda m: m.__name__)
def test_every_driver_exports_the_shared_errors(driver: Any) -> None:
    # The docs tell users to catch these from the client package they import; each is the one
    # class river_protocol.errors defines, so `except river_sync.ValidationError` catches a
    # ValidationError raised anywhere in the project.
    from river_protocol import errors

    for name in USER_CAUGHT_ERRORS:
        assert name in driver.__all__, name
        assert getattr(driver, name) is getattr(errors, name), name
        assert issubclass(getattr(driver, name), errors.RiverError), name
    with pytest.raises(driver.ValidationError, match="invalid state"):
        driver.UniqueOpts(by_state=["bogus"])


@pytest.mark.parametrize("driver", [river_sync, river_trio, river_asyncio], ids=lambda m: m.__name__)
def test_every_driver_exports_the_river_pro_refusal_as_a_migration_error(driver: Any) -> None:
    # Migration 8's refusal on SQLite (River Pro's objects beside river_job) is caught by its own
    # name from the client package, and by the MigrationError handlers already written.
    import river_protocol

    error = driver.RiverProSchemaError("refused", version=8, direction="up", objects=("river_workflow",))
    assert driver.RiverProSchemaError is river_protocol.RiverProSchemaError
    with pytest.raises(driver.MigrationError) as caught:
        raise error
    assert caught.value.objects == ("river_workflow",)
    assert (caught.value.version, caught.value.direction) == (8, "up")


def documented_client_table() -> list[tuple[str, str]]:
    """(parameter, default) rows of the client guide's table under "The `Client` constructor"."""
    text = CLIENT_GUIDE.read_text(encoding="utf-8")
    section = text.split("\n## The `Client` constructor\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", section, flags=re.MULTILINE)
    return [(name, default.strip()) for name, default in rows]


@pytest.mark.parametrize("client", [river_sync.Client, river_trio.Client, river_asyncio.Client],
                         ids=["sync", "trio", "asyncio"])
def test_documented_client_table_lists_exactly_the_constructor_parameters(client: type) -> None:
    params = [p for p in inspect.signature(client.__init__).parameters.values() if p.name != "self"]
    rows = documented_client_table()
    assert [name for name, _ in rows] == [p.name for p in params]
    # Where the default is a literal, the table says the same one.
    for (name, documented), param in zip(rows, params, strict=True):
        if param.default is inspect.Parameter.empty:
            assert documented == "(required)", name
        elif param.default is None or isinstance(param.default, bool) or param.default == ():
            assert documented == f"`{param.default!r}`", name


def test_documented_table_reader_sees_a_missing_row() -> None:
    rows = documented_client_table()
    assert rows and rows[0] == ("database", "(required)")
    assert len({name for name, _ in rows}) == len(rows)


def test_documented_client_table_sentence_names_every_client() -> None:
    section = CLIENT_GUIDE.read_text().split("## The `Client` constructor", 1)[1].split("\n| parameter", 1)[0]
    for name in ("river_sync.Client", "river_trio.Client", "river_asyncio.Client"):
        assert f"`{name}`" in section, name


@pytest.mark.parametrize("driver", [river_trio, river_asyncio], ids=lambda m: m.__name__)
def test_async_drivers_carry_a_version_and_their_event_loop(driver: Any) -> None:
    import river_anyio

    assert driver.__version__ == river_anyio.__version__ and driver.__version__
    assert driver.__name__.removeprefix("river_") == driver.Client.ANYIO_BACKEND


@pytest.mark.parametrize("driver", [river_sync, river_trio, river_asyncio], ids=lambda m: m.__name__)
def test_one_outcome_vocabulary_is_documented_and_the_other_still_imports(driver: Any) -> None:
    # Go's raised vocabulary is the documented one; the returned outcomes stay importable.
    from river_protocol import outcomes, work

    for name in ("JobSnooze", "JobCancel", "JobDiscard"):
        assert name in driver.__all__ and getattr(driver, name) is getattr(work, name)
    for name in ("Cancel", "Completed", "Discard", "Failed", "Snooze"):
        assert name not in driver.__all__ and getattr(driver, name) is getattr(outcomes, name), name
    assert "WorkOutcome" not in driver.__all__ and driver.WorkOutcome is work.WorkOutcome
    namespace: dict[str, Any] = {}
    exec(f"from {driver.__name__} import Snooze, WorkOutcome", namespace)
    assert namespace["Snooze"] is outcomes.Snooze
