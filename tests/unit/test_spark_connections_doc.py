"""docs/proofs.md's three ways to point the proofs at a Spark, each block run as written by bash: what it leaves in
the environment is read back by mirrorbook as Airflow would have it — through Airflow's connections from
`AIRFLOW_CONN_*` variables and `MIRRORBOOK_PARITY_URI` — and the proofs go where the page says. (No Spark is
reached: where a proof would then run is tests/spark's and tests/dags/test_installed.py's to prove.)"""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

from mirrorbook.errors import Refused
from tests import docs
from tests.unit.test_params import TOPOLOGY

pytestmark = pytest.mark.airflow

SPARK_BLOCKS = "tests/unit/test_spark_connections_doc.py::test_each_way_to_a_spark_is_read_as_the_page_says"
OURS = ("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", "AIRFLOW_CONN_SPARK_DEFAULT", "MIRRORBOOK_PARITY_URI")


def _exported(script: str) -> dict[str, str]:
    """The variables the block leaves set, bash running it as written in a clean environment."""
    done = subprocess.run(["bash", "-euc", script + "\nenv -0"], capture_output=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    pairs = [item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item]
    return {k: v for k, v in pairs if k in OURS}


def test_each_way_to_a_spark_is_read_as_the_page_says(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.bases.hook import BaseHook

    from mirrorbook.airflow.operators.parity import check_proof_engine, spark_connect_url, spark_submit_master
    from mirrorbook.parity import staging, submit

    connect, local, cluster = (docs.block(SPARK_BLOCKS, needle) for needle in
                               ('"spark_connect"', '"local[*]"', '"yarn"'))
    assert [b.path for b in (connect, local, cluster)] == ["docs/proofs.md"] * 3
    run = SimpleNamespace(parity="spark", dry_run=False, spark_connect="")

    def environment(block: docs.Block) -> None:
        for name in OURS:
            monkeypatch.delenv(name, raising=False)
        for name, value in _exported(block.text).items():
            monkeypatch.setenv(name, value)

    # 1. A Spark Connect server: the proofs go there, whatever spark-submit would use.
    environment(connect)
    assert spark_connect_url() == "sc://spark-connect.example:15002/"
    check_proof_engine(run, TOPOLOGY)  # accepted before anything changes: nothing shared with Spark is needed

    # 2. spark-submit on the worker itself.
    environment(local)
    assert spark_connect_url() is None and spark_submit_master() == "local[*]" and submit.is_local("local[*]")
    check_proof_engine(run, TOPOLOGY)

    # 3. A cluster master (YARN, cluster mode, a queue), and the location the worker and the cluster both reach.
    environment(cluster)
    assert spark_connect_url() is None and spark_submit_master() == "yarn" and not submit.is_local("yarn")
    assert BaseHook.get_connection("spark_default").extra_dejson == {"deploy-mode": "cluster", "queue": "dr"}
    assert staging.parity_uri() == "s3a://dr-evidence/mirrorbook"
    # ... without which that master is refused up front, naming both ways out.
    monkeypatch.delenv("MIRRORBOOK_PARITY_URI")
    with pytest.raises(Refused, match="MIRRORBOOK_PARITY_URI") as refused:
        check_proof_engine(run, TOPOLOGY)
    assert "spark_connect_default" in str(refused.value)
