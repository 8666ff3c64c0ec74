"""Where spark-submit comes from when Airflow was started without activating the venv."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from mirrorbook.parity.submit import local_env

VENV_BIN = Path(sys.executable).parent


@pytest.mark.skipif(not (VENV_BIN / "spark-submit").is_file(), reason="pyspark's spark-submit is not in this venv")
def test_venv_bin_joins_path_when_spark_submit_is_not_on_it(tmp_path: Path) -> None:
    env = local_env({"PATH": str(tmp_path)})
    assert env["PATH"].split(":")[0] == str(VENV_BIN)
    assert shutil.which("spark-submit", path=env["PATH"]) == str(VENV_BIN / "spark-submit")
    assert env["PYSPARK_PYTHON"] == sys.executable


def test_path_left_alone_when_spark_submit_is_already_on_it(tmp_path: Path) -> None:
    fake = tmp_path / "spark-submit"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert local_env({"PATH": str(tmp_path)})["PATH"] == str(tmp_path)
