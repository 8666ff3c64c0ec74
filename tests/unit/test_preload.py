"""mirrorbook.airflow.preload (docs/operating.md: "Scheduler settings for a fast cutover") leaves a task process nothing of
mirrorbook to import: after it, loading every DAG file imports no mirrorbook module, and neither the plugin's web
app nor a Spark client was imported (the API server loads the one; gRPC channels do not survive a fork)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO

PROBE = """
import json, sys
import airflow
import mirrorbook.airflow.preload
before = {m for m in sys.modules if m.startswith("mirrorbook")}
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
after = {m for m in sys.modules if m.startswith("mirrorbook")}
print(json.dumps({"new": sorted(after - before), "dags": sorted(bag.dag_ids), "errors": list(bag.import_errors),
                  "heavy": [m for m in ("pyspark", "grpc", "fastapi") if m in sys.modules]}))
"""


def test_after_the_preload_the_dag_files_import_nothing_of_mirrorbook_and_no_spark_or_web_app(tmp_path):
    # The same mirrorbook as this session's (a worktree's copy before the installed one, when PYTHONPATH says so).
    path = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    out = subprocess.run([sys.executable, "-c", PROBE, str(REPO / "dags")], capture_output=True, text=True,
                         timeout=180, cwd=REPO, env={"AIRFLOW_HOME": str(tmp_path), "PATH": "/usr/bin:/bin",
                                                    "AIRFLOW__CORE__LOAD_EXAMPLES": "False", **path}, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["errors"] == [] and "mm2_failover" in got["dags"], got
    assert got["new"] == [], f"modules a task imports that the preload missed: {got['new']}"
    assert got["heavy"] == [], got["heavy"]
