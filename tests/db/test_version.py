"""One version for the project (issue 18.3): pyproject.toml's, through ``river_db.version.package_version``.

Here the packages may come from a checkout whose installed metadata is older than its
pyproject.toml, so these tests compare with what the metadata says; tests/test_wheel.py
checks an installed wheel against pyproject.toml itself.
"""

from __future__ import annotations

import importlib.metadata

import pytest

import river_db
import river_db.version
import river_otel
import river_sync
from river_tools.cli.main import main


def test_package_version_is_the_distributions() -> None:
    assert river_db.version.package_version() == importlib.metadata.version("river-python")


def test_package_version_when_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        assert name == "river-python"
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(river_db.version, "version", missing)
    assert river_db.version.package_version() == "0+unknown"


@pytest.mark.parametrize("package", [river_db, river_sync, river_otel], ids=lambda m: m.__name__)
def test_packages_report_the_one_version(package: object) -> None:
    assert package.__version__ == river_db.version.package_version()  # type: ignore[attr-defined]


def test_river_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"river {river_db.version.package_version()}\n"
