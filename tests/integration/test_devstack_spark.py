"""The devstack's Spark Connect server (`devstack up --spark-workers 1`): the pinned pyspark's own server, on a Spark
standalone cluster of the stack's own (a master and a worker, pyspark's too), for real.

One server per test session (the `spark_connect` fixture); the test of `down` runs last in the session (marked
`last`): nothing starts the stack again after it, and the session's teardown finds it down.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import httpx
import psutil
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from mirrorbook.devstack import ports, spark
from mirrorbook.devstack.errors import PortInUse
from mirrorbook.devstack.spark import SparkConnectState
from mirrorbook.devstack.stack import DevStack
from mirrorbook.devstack.tools import find_java
from mirrorbook.devstack.workload import load
from mirrorbook.parity import connect
from tests.conftest import SparkConnectServer, is_spark
from tests.helpers import spark_executor_pids

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _cli(devstack: DevStack, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "mirrorbook.cli", "devstack", *args, "--run-dir",
                          str(devstack.run_dir)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _pids(devstack: DevStack) -> dict[str, int]:
    return {n: p.pid for n, p in devstack.require().processes().items()}


@pytest.fixture
def session_url(devstack: DevStack, spark_connect: SparkConnectServer, monkeypatch) -> str:
    """The server's URL as the Spark provider's hook builds it from the written `spark_connect_default`."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    conns = json.loads(devstack.connections_path.read_text())
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", json.dumps(conns["spark_connect_default"]))
    return SparkConnectHook().get_connection_url()


@pytest.fixture
def spark_session(session_url: str) -> Iterator[SparkSession]:
    # client_mode: pyspark's process-wide Connect mark must not outlive the test (a later spark-submit
    # started by this process would inherit it and its driver would look for a server).
    with connect.client_mode():
        session = SparkSession.builder.remote(session_url).getOrCreate()
        yield session
        session.stop()


def test_up_spark_on_a_running_stack_starts_only_the_server_and_its_cluster(devstack, spark_connect):
    if os.environ.get("MIRRORBOOK_TEST_RUN_DIR") and not spark_connect.started:
        pytest.skip("reused run dir whose server was already running: nothing was started to check")
    # The cluster's daemons first, the server once its workers are registered; the rest of the stack untouched.
    assert spark_connect.started == ["spark-master", "spark-worker-1", "spark-connect"]
    assert {n: p for n, p in _pids(devstack).items() if not is_spark(n)} == spark_connect.others_before

    # Each recorded pid is the JVM itself (not a launcher shell), logging in the run dir, listening where the
    # state says: the server, the standalone master and its worker.
    state = devstack.require().spark
    for name, main in (("spark-connect", spark.SERVER_CLASS), ("spark-master", spark.MASTER_CLASS),
                       ("spark-worker-1", spark.WORKER_CLASS)):
        record = state.processes()[name]
        proc = psutil.Process(record.pid)
        assert proc.name() == "java" and main in proc.cmdline(), name
        assert Path(record.log).is_relative_to(devstack.run_dir)
    assert state.process.pid == spark_connect.pid
    for port in state.ports():
        assert ports.wait_port_open(port, "127.0.0.1"), port
    # The master lists its worker; the server's application holds an executor of the machine's cores on it.
    master = httpx.get(f"{spark_connect.master_ui}/json/", timeout=10).json()
    assert (master["url"], master["aliveworkers"]) == (spark_connect.master, 1)
    [app] = [a for a in master["activeapps"] if a["name"] == "Spark Connect server"]
    assert app["cores"] == spark.executor_cores()

    # A second `up --spark` (the CLI, as a user types it) starts nothing: the stack keeps its cluster.
    before = _pids(devstack)
    out = _cli(devstack, "up", "--spark")
    assert "nothing to do" in out
    assert f"spark connect: {spark_connect.url} ({spark_connect.master})  pid={spark_connect.pid} up" in out
    assert f"status API {spark_connect.ui}/api/v1" in out
    assert re.search(rf"spark-worker-1: spark://127\.0\.0\.1:\d+ \(UI http://127\.0\.0\.1:\d+\)  "
                     rf"pid={spark_connect.workers['spark-worker-1']} up", out), out
    assert _pids(devstack) == before
    # Another count on the running server is refused before anything starts, naming the fix.
    refused = subprocess.run([sys.executable, "-m", "mirrorbook.cli", "devstack", "up", "--spark-workers", "2",
                              "--run-dir", str(devstack.run_dir)], capture_output=True, text=True)
    assert refused.returncode != 0 and "runs its Spark Connect server on a cluster of 1 Spark worker, not a " \
        "cluster of 2 Spark workers" in refused.stderr and f"fix: mirrorbook devstack down --run-dir " \
        f"{devstack.run_dir}, then up --spark-workers 2" in refused.stderr, refused.stderr
    assert _pids(devstack) == before and devstack.require().settings.spark_workers == 1

    status = json.loads(_cli(devstack, "status", "--json"))["spark_connect"]
    assert (status["url"], status["pid"], status["alive"]) == (spark_connect.url, spark_connect.pid, True)
    assert (status["master"], status["ui"], status["connection_id"]) == (spark_connect.master, spark_connect.ui,
                                                                         "spark_connect_default")
    assert [(n["name"], n["alive"]) for n in status["cluster"]] == [("spark-master", True), ("spark-worker-1", True)]


def test_connection_names_the_server_in_the_providers_form(devstack, spark_connect, session_url):
    conn = json.loads(devstack.connections_path.read_text())["spark_connect_default"]
    assert conn["conn_type"] == "spark_connect"
    assert session_url == f"{spark_connect.url}/"


def test_client_reads_a_devstack_topic_through_the_servers_kafka_source(spark_session, bootstrap_a, unique):
    topic = f"sc-{unique}"
    load(bootstrap_a, [topic], partitions=3, records_per_partition=150)
    df = spark_session.read.format("kafka").option("kafka.bootstrap.servers", bootstrap_a) \
        .option("subscribe", topic).load()
    per_partition = {r["partition"]: (r["n"], r["lo"], r["hi"]) for r in
                     df.groupBy("partition").agg(F.count("*").alias("n"), F.min("offset").alias("lo"),
                                                 F.max("offset").alias("hi")).collect()}
    assert per_partition == {p: (150, 0, 149) for p in range(3)}
    assert spark_session.conf.get("spark.sql.shuffle.partitions") == "4"


def test_taken_port_is_named_before_the_server_starts(tmp_path: Path):
    state = SparkConnectState(port=ports.pick_free(1)[0])
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", state.port))
        holder.listen()
        with pytest.raises(PortInUse, match=f"Port {state.port} \\(for the Spark Connect server\\)"):
            spark.launch(find_java(), state, tmp_path, tmp_path / "logs", driver_memory_mb=512)
    assert not (tmp_path / "logs").exists()  # nothing was launched


@pytest.mark.last
def test_down_stops_exactly_the_server_and_its_cluster(devstack, spark_connect):
    """`down` on the session stack, after every other test: none needs it after this one."""
    connect.close()  # this process's client session first, or pyspark retries releasing it against a server gone
    state = devstack.require()
    server = state.spark.process
    assert server.pid == spark_connect.pid and server.alive()
    executors = [psutil.Process(pid) for e, pid in spark_executor_pids(spark_connect.ui).items() if e != "driver"]
    assert executors and all(e.ppid() in spark_connect.workers.values() for e in executors)
    others = [p for n, p in state.processes().items() if n != "spark-connect"]
    stopped = _cli(devstack, "down")
    # The server first (its application ends), then the worker (its executors with it), then the master.
    assert "spark-connect, spark-worker-1, spark-master" in stopped
    assert server.exited()
    assert not any(p.alive() for p in others)
    assert not any(e.is_running() and e.status() != psutil.STATUS_ZOMBIE for e in executors)  # no JVM left
    assert devstack.require().spark.process is None
    for port in state.spark.ports():
        assert ports.is_free(port, "127.0.0.1"), port
    status = json.loads(_cli(devstack, "status", "--json"))["spark_connect"]
    assert (status["url"], status["pid"], status["alive"]) == (spark_connect.url, None, False)
    assert not any(n["alive"] for n in status["cluster"])
