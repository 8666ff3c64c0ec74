"""The Spark apps loaded for a Spark Connect run (`mirrorbook.parity.connect.load_app`): the standalone files as they
are, their `import parity_common` answered, and sys.modules left as it was found. Imports pyspark; starts no JVM."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from mirrorbook.parity import connect, submit

APPS = ("group_parity", "record_parity")


def _from(apps: Path) -> list[str]:
    """The names in sys.modules of modules loaded from a file under `apps`."""
    return [name for name, m in list(sys.modules.items()) if str(getattr(m, "__file__", None) or "").startswith(
        str(apps))]


@pytest.fixture
def apps(tmp_path: Path) -> Path:
    """A copy of the apps directory: files this process has not loaded yet."""
    shutil.copytree(submit.apps_dir(), tmp_path / "spark_apps")
    return tmp_path / "spark_apps"


@pytest.mark.parametrize("app", APPS)
def test_an_app_is_loaded_once_with_its_plumbing_and_registers_no_name(apps: Path, app: str,
                                                                       monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delitem(sys.modules, connect.COMMON, raising=False)
    loaded = connect.load_app(apps / f"{app}.py")
    assert loaded.APP == app and loaded.pc is connect.load_common(apps)
    assert connect.load_app(apps / f"{app}.py") is loaded  # executed once per process
    assert _from(apps) == [] and connect.COMMON not in sys.modules


def test_a_parity_common_imported_before_is_put_back(apps: Path, monkeypatch: pytest.MonkeyPatch):
    theirs = ModuleType(connect.COMMON)
    monkeypatch.setitem(sys.modules, connect.COMMON, theirs)
    loaded = connect.load_app(apps / "record_parity.py")
    assert sys.modules[connect.COMMON] is theirs and loaded.pc is not theirs


def test_the_loaded_app_is_the_file_spark_submit_runs(apps: Path):
    # the same bounded-read rule as tests/spark/test_record_parity.py, through the module the loader gives
    app = connect.load_app(apps / "record_parity.py")
    args = app.parse_args(["--source-bootstrap", "a:9092", "--target-bootstrap", "b:9092", "--topic", "t=A.t",
                           "--target-option", "fetch.max.wait.ms=250", "--output", "/x", "--summary", "/x/s.json"])
    assert app.kafka_options(args, "source")["kafka.fetch.max.wait.ms"] == "10"
    assert app.kafka_options(args, "target")["kafka.fetch.max.wait.ms"] == "250"
    assert Path(app.__file__) == apps / "record_parity.py" and app.__name__ == "record_parity"
