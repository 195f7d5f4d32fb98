"""The wheel a team installs (issue 18.1): built, installed into a fresh virtualenv, run from nowhere.

The wheel is built from a copy of the checkout (so the build leaves nothing in the
repository), installed *non-editable* with ``--no-deps`` into a new virtualenv, and
checked there:

- it holds only ``river_*`` top-level packages (``conformance/`` is a development tool
  of this repository, run by ``nox -s conformance``), every ``river_*`` package of the
  checkout among them;
- from an empty working directory, with no ``PYTHONPATH``, every module of the installed
  packages imports, ``river_sync`` is the installed copy, ``conformance`` is not importable,
  ``river --version`` and ``river_sync.__version__`` are the version in pyproject.toml,
  and ``python -m river_tools.demo`` runs its jobs to the expected end.

Dependencies: the virtualenv is made without the system's site-packages and gets, through
a ``.pth`` file, the site directories that hold this interpreter's dependencies (listing a
directory in a ``.pth`` file does not run the ``.pth`` files inside it, so an editable
install of this project living there stays invisible). That works the same from the
system interpreter and from a nox virtualenv, and needs no index.

Building: with a setuptools that builds wheels by itself (>= 70.1, which the ``test``
extra installs) the build runs in this interpreter with ``--no-build-isolation
--no-index``, fully offline; with an older one pip builds in an isolated environment
and fetches setuptools from its configured index or find-links.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import site
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from tests.examples.test_examples import assert_demo_output
from tests.test_layering import _modules, imported_packages

ROOT = Path(__file__).resolve().parents[1]
DIST_NAME = "river-python"
TIMEOUT = 300

# What a copy of the checkout leaves behind: VCS data, caches, build output, virtualenvs.
COPY_IGNORE = shutil.ignore_patterns(
    ".git", ".nox", ".venv", "venv", "build", "dist", "site", "__pycache__", "*.egg-info",
    ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis", "*.sqlite3*", "river.db*",
)


def project_table() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return dict(tomllib.load(f)["project"])


def project_version() -> str:
    return str(project_table()["version"])


def dependency_names() -> list[str]:
    """The distribution names of the project's run-time dependencies (``psycopg[binary]>=3.2`` -> psycopg)."""
    return [re.match(r"[A-Za-z0-9._-]+", dep).group(0) for dep in project_table()["dependencies"]]  # type: ignore[union-attr]


def river_packages_in_checkout() -> set[str]:
    """The ``river_*`` import packages at the top of the repository."""
    return {p.name for p in ROOT.glob("river_*") if (p / "__init__.py").is_file()}


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def offline_build_possible() -> bool:
    """True when this interpreter's setuptools builds a wheel without the ``wheel`` package."""
    try:
        return _version_tuple(metadata.version("setuptools")) >= (70, 1)
    except metadata.PackageNotFoundError:
        return False


def build_command(source: Path, out: Path) -> list[str]:
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out)]
    if offline_build_possible():
        command += ["--no-build-isolation", "--no-index"]
    return [*command, str(source)]


def top_level_names(paths: Iterator[str] | list[str]) -> set[str]:
    """Top-level names of the files a wheel or a RECORD lists, without ``*.dist-info``/``*.data``."""
    names = {path.split("/", 1)[0] for path in paths}
    return {n for n in names if not n.endswith((".dist-info", ".data"))}


def dependency_site_dirs() -> list[str]:
    """The site directories this interpreter finds its packages in, the checkout itself excluded.

    A site directory inside the checkout stays (nox's virtualenvs live in ``.nox/``): what
    it holds of this project is an editable install's finder, which a listed directory
    never runs.
    """
    candidates = [*site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        candidates.append(site.getusersitepackages())
    for requirement in dependency_names():
        with contextlib.suppress(metadata.PackageNotFoundError):
            candidates.append(str(metadata.distribution(requirement).locate_file("")))
    found: list[str] = []
    for entry in candidates:
        path = Path(entry).resolve()
        if path.is_dir() and path != ROOT and str(path) not in found:
            found.append(str(path))
    return found


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    workdir: Path  # empty before the tests run anything in it

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def env(self) -> dict[str, str]:
        """The environment of a user's shell: no PYTHONPATH into the checkout, the venv first on PATH."""
        drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "RIVER_DATABASE_URL",
                "VIRTUAL_ENV"}
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(self, *command: str | Path, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(c) for c in command], cwd=self.workdir, env=self.env(),
                              capture_output=True, text=True, timeout=timeout)
        assert proc.returncode == 0, f"{command}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    source, out, venv, workdir = base / "source", base / "dist", base / "venv", base / "empty"
    shutil.copytree(ROOT, source, ignore=COPY_IGNORE)
    built = subprocess.run(build_command(source, out), capture_output=True, text=True, timeout=TIMEOUT)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = out.glob("river_python-*.whl")

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=TIMEOUT)
    (venv_site,) = venv.glob("lib/python*/site-packages")
    (venv_site / "_river_test_dependencies.pth").write_text("\n".join(dependency_site_dirs()) + "\n")
    installed = Installed(wheel=wheel, venv=venv, workdir=workdir)
    # This interpreter's pip installs into the venv's interpreter (pip >= 22.3), in a user's
    # environment. --ignore-installed: the dependency directories may hold this project too (an
    # editable install of the same version, which pip would take as already installed); the
    # wheel goes into the venv regardless, and nothing outside the venv is touched.
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(installed.python), "install", "--quiet",
         "--no-deps", "--no-index", "--ignore-installed", str(wheel)],
        env=installed.env(), check=True, timeout=TIMEOUT,
    )
    workdir.mkdir()
    return installed


# ---------------------------------------------------------------- helpers


def test_top_level_names_ignores_metadata_directories() -> None:
    paths = ["river_sync/__init__.py", "river_sync/py.typed", "river_python-0.1.0.dist-info/RECORD",
             "river_python-0.1.0.data/scripts/x", "conformance/__init__.py"]
    assert top_level_names(paths) == {"river_sync", "conformance"}


def test_dependency_names_are_the_distributions_of_pyproject() -> None:
    names = dependency_names()
    assert "psycopg" in names and "sqlean-py" in names and "tzdata" in names
    assert all(metadata.distribution(name) for name in names)  # each installed here


def test_build_command_is_offline_with_a_modern_setuptools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metadata, "version", lambda name: "80.9.0")
    assert "--no-build-isolation" in build_command(ROOT, ROOT / "out")
    assert "--no-index" in build_command(ROOT, ROOT / "out")
    monkeypatch.setattr(metadata, "version", lambda name: "65.5.0")
    assert "--no-build-isolation" not in build_command(ROOT, ROOT / "out")


# ---------------------------------------------------------------- the wheel and the installed copy


def test_no_shipped_module_imports_the_repository_only_packages() -> None:
    # Statically, so an import inside a function that the probe below never calls counts too.
    found = {
        f"{module}:{line} imports {top}"
        for package in sorted(river_packages_in_checkout())
        for module, path in _modules(package)
        for top, line in imported_packages(path.read_text(encoding="utf-8"), module)
        if top == "conformance"
    }
    assert sorted(found) == []


def test_the_wheel_ships_only_river_packages(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = top_level_names(wheel.namelist())
        (top_level,) = [n for n in wheel.namelist() if n.endswith(".dist-info/top_level.txt")]
        declared = set(wheel.read(top_level).decode().split())
    assert names == river_packages_in_checkout()
    assert declared == names
    assert all(name.startswith("river_") for name in names)
    assert installed.wheel.name == f"river_python-{project_version()}-py3-none-any.whl"


PROBE = textwrap.dedent(
    """
    import importlib, importlib.metadata as md, importlib.util, json, pkgutil, sys
    dist = md.distribution("river-python")
    # RECORD also lists the console script, outside site-packages (../../../bin/river).
    tops = sorted({f.parts[0] for f in dist.files
                   if f.parts[0] != ".." and not f.parts[0].endswith((".dist-info", ".data"))})
    modules = []
    for top in tops:
        package = importlib.import_module(top)
        modules.append(top)
        for info in pkgutil.walk_packages(package.__path__, top + "."):
            if info.name.rsplit(".", 1)[-1] != "__main__":
                importlib.import_module(info.name)
                modules.append(info.name)
    import river_db, river_otel, river_sync
    print(json.dumps({
        "tops": tops,
        "modules": modules,
        "river_sync_file": river_sync.__file__,
        "versions": [md.version("river-python"), river_db.__version__, river_sync.__version__,
                     river_otel.__version__],
        "conformance": importlib.util.find_spec("conformance") is not None,
        "sys_path": sys.path,
    }))
    """
)


def test_installed_copy_imports_alone_from_an_empty_directory(installed: Installed) -> None:
    probe = json.loads(installed.run(installed.python, "-c", PROBE).stdout)
    assert probe["tops"] == sorted(river_packages_in_checkout())
    assert Path(probe["river_sync_file"]).is_relative_to(installed.venv)
    assert not any(Path(p).resolve() == ROOT for p in probe["sys_path"] if p)
    assert probe["conformance"] is False
    assert probe["versions"] == [project_version()] * 4
    # Every module of the wheel imports there: nothing a user runs needs conformance/ or tests/.
    assert {"river_sync.client", "river_tools.cli.main", "river_protocol.dialects.sqlite"} <= set(
        probe["modules"])


def test_river_version_is_the_package_version(installed: Installed) -> None:
    out = installed.run(installed.venv / "bin" / "river", "--version").stdout
    assert out.strip() == f"river {project_version()}"


def test_demo_runs_from_the_installed_wheel_in_an_empty_directory(installed: Installed) -> None:
    proc = installed.run(installed.python, "-m", "river_tools.demo")
    assert_demo_output(proc.stdout)
    assert (installed.workdir / "river-demo.sqlite3").is_file()


DASHBOARD_PROBE = textwrap.dedent(
    """
    import warnings
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient
    import river_ui
    from river_ui.demo import seed_demo
    seed_demo("sqlite://dashboard.sqlite3")
    with TestClient(river_ui.create_app(database_url="sqlite://dashboard.sqlite3")) as web:
        for path in ("/", "/jobs", "/static/river_ui.css", "/static/river_ui.js"):
            assert web.get(path).status_code == 200, path
    print(river_ui.__file__)
    """
)


def test_the_dashboard_ships_its_templates_and_assets(installed: Installed) -> None:
    assets = {
        path.relative_to(ROOT).as_posix()
        for folder in ("templates", "static")
        for path in (ROOT / "river_ui" / folder).iterdir()
    }
    with zipfile.ZipFile(installed.wheel) as wheel:
        shipped = set(wheel.namelist())
    assert assets and assets <= shipped
    # Served from the installed copy alone, with nothing fetched from elsewhere.
    out = installed.run(installed.python, "-c", DASHBOARD_PROBE).stdout
    assert Path(out.strip()).is_relative_to(installed.venv)
