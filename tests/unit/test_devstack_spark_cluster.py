"""`devstack up --spark-workers N`: the ports, settings, daemon arguments and stopping order of the Spark standalone
cluster the Spark Connect server runs on, and a count out of range (or not a count) refused before anything is
written or started. No JVM: devstack/spark.py's pure parts and the stack's bookkeeping."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from mirrorbook.cli import build_parser
from mirrorbook.cli.devstack import _overrides
from mirrorbook.devstack import config, spark
from mirrorbook.devstack.errors import DevstackError
from mirrorbook.devstack.processes import ProcessRecord
from mirrorbook.devstack.stack import DevStack, StackState, merged

RUN = Path("/run")


def _state(workers: int) -> spark.SparkConnectState:
    return spark.cluster_state(20000, workers, iter(range(20001, 20100)))


def _me(log: str = "x") -> ProcessRecord:
    """A record naming a process that is alive: this one."""
    return ProcessRecord.of(os.getpid(), log, log)


def _gone(log: str) -> ProcessRecord:
    return ProcessRecord(pid=os.getpid(), create_time=1.0, log=log, cmd_summary=log)


@given(st.integers(0, 4))
def test_a_cluster_of_n_workers_takes_its_ports_in_order_each_once(n):
    state = _state(n)
    assert len(state.ports()) == 1 + spark.cluster_ports(n)  # all distinct
    if not n:
        assert (state.master, state.workers, state.ui, state.master_url) == (None, [], None, "local[*]")
        assert spark.cluster_settings(state, 1024) == {}
        return
    assert state.ui == "http://127.0.0.1:20001" and state.master_url == "spark://127.0.0.1:20002"
    assert [node.name for node in state.nodes()] == ["spark-master"] + [f"spark-worker-{i}" for i in range(1, n + 1)]
    assert state.workers[-1].ui_port == 20000 + spark.cluster_ports(n)


@given(st.integers(1, 4), st.integers(256, 8192))
def test_the_server_takes_an_executor_of_the_machines_cores_on_each_worker_and_leaves_room_for_a_job(n, mb):
    state = _state(n)
    cores = os.cpu_count() or 1
    conf = spark.cluster_settings(state, mb)
    assert conf["spark.master"] == state.master_url
    assert (conf["spark.executor.cores"], conf["spark.cores.max"]) == (str(cores), str(n * cores))
    assert conf["spark.executor.memory"] == f"{mb}m"
    assert (conf["spark.ui.enabled"], conf["spark.ui.port"]) == ("true", str(state.ui_port))
    worker = state.workers[0]
    args = spark.daemon_args(state, worker, RUN, mb)
    assert args[0] == spark.WORKER_CLASS and args[-1] == state.master_url
    assert args[1:7] == ["--host", "127.0.0.1", "--port", str(worker.port), "--webui-port", str(worker.ui_port)]
    offered = dict(zip(args[7:-1:2], args[8:-1:2]))
    # Two executors of the server's size: the server's, held for its life, and a spark-submit job's beside it.
    assert offered == {"--cores": str(2 * cores), "--memory": f"{2 * mb}m", "--work-dir": "/run/spark/workers"}
    assert spark.daemon_args(state, state.master, RUN, mb) == [
        spark.MASTER_CLASS, "--host", "127.0.0.1", "--port", str(state.master.port), "--webui-port",
        str(state.master.ui_port)]


def test_down_stops_the_server_then_the_workers_then_the_master(tmp_path):
    state = DevStack(tmp_path)._allocate(config.StackSettings(spark_workers=2), None)
    state.spark = _state(2)
    state.spark.process = _me("server")
    for node in state.spark.nodes():
        node.process = _me(node.name)
    names = list(state.processes())
    assert names[-4:] == ["spark-connect", "spark-worker-2", "spark-worker-1", "spark-master"]


def test_the_server_and_the_cluster_are_started_by_one_environment(tmp_path):
    env = spark.spark_env("/usr/lib/jvm/x/bin/java", tmp_path, tmp_path / "logs")
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"  # the hostname may resolve elsewhere
    assert (env["JAVA_HOME"], env["SPARK_CONF_DIR"]) == ("/usr/lib/jvm/x", str(tmp_path / "conf"))
    assert env["PYSPARK_PYTHON"] == sys.executable  # the Python a Connect client's functions run in


def test_workers_mean_spark_and_stay_with_the_stack_when_not_given_again():
    s = config.StackSettings(spark_workers=1)
    assert s.spark and s.spark_workers == 1
    assert merged(s, {"spark": True}).spark_workers == 1  # a later `up --spark` keeps the cluster
    assert merged(s, {"spark_workers": 0}).spark  # back to local[*], still a server
    args = build_parser().parse_args(["devstack", "up", "--spark-workers", "2"])
    assert _overrides(args) == {"spark_workers": 2}


def _declared(tmp_path: Path, workers: int) -> tuple[DevStack, StackState]:
    stack = DevStack(tmp_path)
    state = stack._allocate(config.StackSettings(spark_workers=workers), None)
    stack._ensure_spark_declared(state)
    return stack, state


def test_another_count_on_a_running_server_is_refused_naming_both_and_the_fix(tmp_path):
    stack, state = _declared(tmp_path, 1)
    assert state.spark is not None and len(state.spark.workers) == 1
    state.spark.workers[0].process = _me()
    for asked, said in ((2, "a cluster of 2 Spark workers"), (0, "local[*]")):
        wanted = state.model_copy(update={"settings": merged(state.settings, {"spark_workers": asked})})
        with pytest.raises(DevstackError) as err:
            stack._ensure_spark_declared(wanted)
        assert str(err.value).startswith(f"The stack in {tmp_path} runs its Spark Connect server on a cluster of 1 "
                                         f"Spark worker, not {said}")
        assert err.value.hint == (f"mirrorbook devstack down --run-dir {tmp_path}, then up --spark-workers {asked} "
                                 "(Kafka's data and ports and the server's URL are kept)")


def test_a_stopped_servers_cluster_is_redeclared_to_the_asked_size_keeping_the_servers_port(tmp_path):
    stack, state = _declared(tmp_path, 1)
    assert state.spark is not None
    port, old = state.spark.port, state.spark
    old.process, old.workers[0].process = _gone("server"), _gone("worker")
    state.settings = merged(state.settings, {"spark_workers": 3})
    stack._ensure_spark_declared(state)
    assert state.spark.port == port and len(state.spark.workers) == 3
    others = state.all_ports() - state.spark.ports()
    assert not others & state.spark.ports() and len(state.spark.ports()) == 1 + spark.cluster_ports(3)
    state.settings = merged(state.settings, {"spark_workers": 0})
    stack._ensure_spark_declared(state)
    assert (state.spark.port, state.spark.master, state.spark.ports()) == (port, None, {port})


@settings(max_examples=25, deadline=None)
@given(st.one_of(st.integers(max_value=-1), st.integers(min_value=5)))
def test_a_worker_count_out_of_range_is_refused_before_anything_is_written(tmp_path_factory, n):
    run_dir = tmp_path_factory.mktemp("ds")
    args = build_parser().parse_args(["devstack", "up", "--spark-workers", str(n), "--run-dir", str(run_dir)])
    with pytest.raises(ValidationError, match="spark_workers"):
        DevStack(run_dir).up(overrides=_overrides(args))
    assert list(run_dir.iterdir()) == []


@settings(max_examples=25, deadline=None)
@given(st.text(min_size=1).filter(lambda t: not t.strip().lstrip("+-").isdigit() and not t.startswith("-")))
def test_a_worker_count_that_is_no_count_is_refused_by_the_cli(n):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["devstack", "up", "--spark-workers", n])


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 4))
def test_declared_ports_never_collide_with_the_stacks_own(n):
    stack = DevStack(Path("/nonexistent"))
    state = stack._allocate(config.StackSettings(spark=True, spark_workers=n), None)
    kafka = state.all_ports()
    stack._ensure_spark_declared(state)
    assert state.spark is not None and not kafka & state.spark.ports()


def test_settings_that_ask_for_no_server_leave_the_declared_cluster_as_it_is(tmp_path):
    """As a test session's: `up(stack_settings())` on a reused run dir whose server runs on a cluster."""
    stack, state = _declared(tmp_path, 1)
    declared = state.spark
    assert declared is not None
    declared.workers[0].process = _me()
    state.settings = config.StackSettings()
    stack._ensure_spark_declared(state)
    assert state.spark is declared
