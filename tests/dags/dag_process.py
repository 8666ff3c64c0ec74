"""Run one DAG with dag.test() in a process of its own, so a test can kill it (SIGKILL) mid-task.

    python -m tests.dags.dag_process <dag_id> '<conf as JSON>'

Its environment is the test's (topology, connections, audit store, AIRFLOW_HOME)."""

from __future__ import annotations

import json
import sys

from tests.conftest import REPO
from tests.dags.conftest import full_conf, paced_dag_test


def main(dag_id: str, conf: str) -> None:
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(REPO / "dags")).get_dag(dag_id)
    with paced_dag_test():
        dag.test(run_conf=full_conf(dag, json.loads(conf)))


if __name__ == "__main__":
    main(*sys.argv[1:3])
