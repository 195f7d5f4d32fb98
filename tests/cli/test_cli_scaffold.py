"""`river new-worker`: the generated module imports, registers its kind, and its test passes."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from river_protocol.args import kind_of
from river_protocol.golang.encoding_json import encode_args
from river_tools.cli.main import UsageError, main
from river_tools.cli.scaffold import check_name, class_name

BIN = Path(sys.executable).parent


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def load(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], Any]:
    """Import a generated file under a private name, forgotten after the test."""

    def load(path: Path) -> Any:
        name = f"scaffold_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, module)  # dataclasses look their module up
        spec.loader.exec_module(module)
        return module

    return load


def test_generated_worker_imports_and_its_test_passes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, load: Callable[[Path], Any]
) -> None:
    target = tmp_path / "jobs"  # created on demand
    code, out, err = run(capsys, "new-worker", "send_email", "--dir", str(target), "--queue", "mail")
    assert code == 0 and err == ""
    assert out.splitlines()[:2] == [f"created {target / 'send_email.py'}",
                                    f"created {target / 'test_send_email.py'}"]

    module = load(target / "send_email.py")
    args_type = module.SendEmailArgs
    assert kind_of(args_type) == "send_email"
    assert "send_email" in module.workers
    args = args_type(message="hi")
    assert args.insert_opts().queue == "mail"
    assert encode_args(args) == b'{"message":"hi"}'

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(target)],
        cwd=target, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
    # Public imports only: what a user's code may import, the client package and its testing helpers.
    for generated in (target / "send_email.py", target / "test_send_email.py"):
        lines = generated.read_text().splitlines()
        imports = [line for line in lines if line.startswith(("from ", "import "))]
        river = {line.split()[1] for line in imports if line.split()[1].startswith("river")}
        assert river <= {"river_sync", "river_sync.testing"}, (generated.name, river)
    test_source = (target / "test_send_email.py").read_text()
    assert "def river_workers()" in test_source and "work_once(" in test_source

    ruff = BIN / "ruff"
    if ruff.exists():  # generated code should be lint-clean under the project's rules
        config = Path(__file__).resolve().parents[2] / "pyproject.toml"
        lint = subprocess.run([str(ruff), "check", "--no-cache", "--config", str(config), str(target)],
                              capture_output=True, text=True, timeout=60)
        assert lint.returncode == 0, lint.stdout + lint.stderr


def test_without_queue_and_with_custom_kind(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, load: Callable[[Path], Any]
) -> None:
    assert run(capsys, "new-worker", "resize", "--dir", str(tmp_path), "--kind", "media.resize_v2")[0] == 0
    source = (tmp_path / "resize.py").read_text()
    assert "insert_opts" not in source and "InsertOpts" not in source
    module = load(tmp_path / "resize.py")
    assert module.ResizeArgs.kind == "media.resize_v2"
    assert "media.resize_v2" in module.workers


def test_refuses_to_overwrite(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "test_report.py").write_text("# mine\n")
    code, out, err = run(capsys, "new-worker", "report", "--dir", str(tmp_path))
    assert code == 1 and out == "" and "refusing to overwrite" in err and "test_report.py" in err
    assert not (tmp_path / "report.py").exists()
    assert (tmp_path / "test_report.py").read_text() == "# mine\n"

    assert run(capsys, "new-worker", "invoice", "--dir", str(tmp_path))[0] == 0
    before = (tmp_path / "invoice.py").read_text()
    code, _, err = run(capsys, "new-worker", "invoice", "--dir", str(tmp_path))
    assert code == 1 and "invoice.py" in err
    assert (tmp_path / "invoice.py").read_text() == before


@pytest.mark.parametrize(("name", "flags", "message"), [
    ("SendEmail", [], "snake_case"),
    ("class", [], "snake_case"),
    ("9lives", [], "snake_case"),
    ("test_thing", [], "collected as tests"),
    ("email", [], "shadow"),
    ("river_sync", [], "shadow"),
    ("river_anyio", [], "shadow"),
    ("river_asyncio", [], "shadow"),
    ("psycopg", [], "shadow"),  # an installed package: importing the worker module would shadow it
    ("ok_name", ["--queue", "bad queue!"], "queue"),
    ("ok_name", ["--kind", "x"], "kind"),
])
def test_bad_names_are_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, flags: list[str], message: str
) -> None:
    code, _, err = run(capsys, "new-worker", name, "--dir", str(tmp_path), *flags)
    assert code == 2 and message in err
    assert list(tmp_path.iterdir()) == []


def test_every_river_package_of_the_project_is_a_reserved_name() -> None:
    root = Path(__file__).parents[2]
    packages = {p.parent.name for p in root.glob("river_*/__init__.py")}
    assert {"river_anyio", "river_asyncio"} <= packages
    for name in packages:
        with pytest.raises(UsageError, match="shadow"):
            check_name(name)


def test_class_name() -> None:
    assert class_name("send_email") == "SendEmailArgs"
    assert class_name("a__b_") == "ABArgs"
