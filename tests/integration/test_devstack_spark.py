"""The devstack's Spark Connect server (`devstack up --spark`): the pinned pyspark's own server, for real.

One server per test session (the `spark_connect` fixture); the test of `down` runs last in the session.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

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
from tests.conftest import SparkConnectServer

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


def test_up_spark_on_a_running_stack_starts_only_the_server(devstack, spark_connect):
    if os.environ.get("MIRRORBOOK_TEST_RUN_DIR") and not spark_connect.started:
        pytest.skip("reused run dir whose server was already running: nothing was started to check")
    assert spark_connect.started == ["spark-connect"]
    # The rest of the stack was not restarted.
    assert {n: p for n, p in _pids(devstack).items() if n != "spark-connect"} == spark_connect.others_before

    # The recorded pid is the server's JVM itself (not a launcher shell), listening where the state says.
    proc = psutil.Process(spark_connect.pid)
    assert proc.name() == "java"
    assert "org.apache.spark.sql.connect.service.SparkConnectServer" in proc.cmdline()
    assert Path(devstack.require().spark.process.log).is_relative_to(devstack.run_dir)
    port = int(spark_connect.url.rsplit(":", 1)[1])
    assert ports.wait_port_open(port, "127.0.0.1")

    # A second `up --spark` (the CLI, as a user types it) starts nothing.
    before = _pids(devstack)
    out = _cli(devstack, "up", "--spark")
    assert "nothing to do" in out
    assert f"spark connect: {spark_connect.url} (local[*])  pid={spark_connect.pid} up" in out
    assert _pids(devstack) == before

    status = json.loads(_cli(devstack, "status", "--json"))["spark_connect"]
    assert (status["url"], status["pid"], status["alive"]) == (spark_connect.url, spark_connect.pid, True)
    assert status["connection_id"] == "spark_connect_default"


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


def test_down_stops_exactly_the_server_it_started(devstack, spark_connect):
    """`down` on the session stack, then `up` again: the tests (and fixture teardowns) after this one need it."""
    state = devstack.require()
    server = state.spark.process
    assert server.pid == spark_connect.pid and server.alive()
    others = [p for n, p in state.processes().items() if n != "spark-connect"]
    stopped = _cli(devstack, "down")
    assert "spark-connect" in stopped
    assert server.exited()
    assert not any(p.alive() for p in others)
    assert devstack.require().spark.process is None
    assert ports.is_free(int(spark_connect.url.rsplit(":", 1)[1]), "127.0.0.1")
    status = json.loads(_cli(devstack, "status", "--json"))["spark_connect"]
    assert (status["url"], status["pid"], status["alive"]) == (spark_connect.url, None, False)
    devstack.up(overrides={"spark": True})  # the same ports: the session's URLs stay valid
    assert devstack.require().spark.url == spark_connect.url
