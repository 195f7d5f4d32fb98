"""`river_async`, the old name of `river_anyio`, still imports: the same module objects."""

from __future__ import annotations

import importlib
import logging


def test_old_package_name_is_the_new_package() -> None:
    import river_anyio
    import river_async

    assert river_async is river_anyio


def test_old_submodule_paths_give_the_same_module_objects() -> None:
    import river_async.client
    import river_async.testing.assertions

    import river_anyio.client
    import river_anyio.testing.assertions

    assert river_async.client is river_anyio.client
    assert river_async.testing.assertions is river_anyio.testing.assertions
    # a class reached through either name is one class, so isinstance checks agree
    from river_async.exports import Workers as old_workers

    from river_anyio.exports import Workers as new_workers

    assert old_workers is new_workers


def test_old_name_of_a_module_not_yet_imported_still_loads_it_once() -> None:
    old = importlib.import_module("river_async.resumable")
    new = importlib.import_module("river_anyio.resumable")
    assert old is new and old.__name__ == "river_anyio.resumable"


def test_an_unknown_old_submodule_is_a_module_not_found_error() -> None:
    import pytest

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("river_async.no_such_module")


def test_the_async_clients_log_under_the_new_package_name() -> None:
    from river_anyio import client

    assert client.log is logging.getLogger("river_anyio.client")
    assert client.job_log is logging.getLogger("river_anyio.jobs")
