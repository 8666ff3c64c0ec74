"""The installed environment is the one the lock describes (a broken install fails loudly, here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyspark

import mirrorbook
from mirrorbook.maven import versions


def test_pyspark_is_the_pinned_release_not_the_connect_client_copy():
    # apache-airflow-providers-apache-spark pulls pyspark-client, which overwrites pyspark's files.
    assert pyspark.__version__ == versions.SPARK_VERSION
    assert (Path(pyspark.__file__).parent / "jars").is_dir()


def test_pip_check_is_clean():
    out = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_provider_entry_point_registers_the_connection_type():
    from importlib.metadata import entry_points

    eps = [ep for ep in entry_points(group="apache_airflow_provider") if ep.value.startswith("mirrorbook.")]
    assert len(eps) == 1
    info = eps[0].load()()
    assert info["versions"] == [mirrorbook.__version__]
    assert [c["connection-type"] for c in info["connection-types"]] == ["kafka_connect"]
