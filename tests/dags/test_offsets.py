"""mm2_offsets end to end on a scratch flow: real Airflow, real Connect, real mirrored records."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from mirrorbook.connect import ConnectClient
from mirrorbook.connect.wait import wait_for
from mirrorbook.devstack.workload import produce
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.types import TP
from tests.faultproxy import FaultProxy
from tests.helpers import eventually, seqs

pytestmark = [pytest.mark.airflow, pytest.mark.integration]


def offsets_of(url, name: str) -> dict[int, int | None]:
    with ConnectClient(url) as c:
        return {e.partition["partition"]: e.offset["offset"] for e in c.get_offsets(name).offsets
                if e.partition.get("topic") != "heartbeats" and "partition" in e.partition}


def state_of(url, name: str) -> str:
    with ConnectClient(url) as c:
        return c.status(name).connector.state


def body(scratch, entries: dict[int, int | None]) -> dict:
    return {"offsets": [{"partition": {"cluster": scratch.alias, "topic": scratch.topic, "partition": p},
                         "offset": None if o is None else {"offset": o}} for p, o in entries.items()]}


def _mirror_ten(scratch, config_a) -> None:
    """Ten records per partition mirrored, and the source connector's offsets committed at 9."""
    produce(config_a, [scratch.topic], 10)
    name = scratch.flow.connector("source")
    eventually(lambda: offsets_of(scratch.connect, name) == {0: 9, 1: 9}, timeout=60, what="offsets 9/9 committed")


@pytest.fixture
def mirrored(dag_scratch, bootstrap_a):
    _mirror_ten(dag_scratch, bootstrap_a)
    return dag_scratch


@pytest.fixture
def mirrored_secure(secure_scratch, secured):
    """`mirrored` on the secured stack: the runbooks reach Connect over HTTPS with basic auth and Kafka as the
    `mirrorbook` principal."""
    _mirror_ten(secure_scratch, secured.require().kafka_config("A"))
    return secure_scratch


def conf(scratch, **kw) -> dict:
    return {"flow": scratch.flow.name, "connector": "source", **kw}


def test_list_twice_stores_snapshot_and_strimzi_artifact(run_dag, mirrored_secure, audit):
    mirrored = mirrored_secure
    first = run_dag("mm2_offsets", conf(mirrored, action="list"))
    assert first.state == "success", first.failure()
    path = Path(os.environ["MIRRORBOOK_ARTIFACTS_DIR"]) / f"{mirrored.alias}--B.MirrorSourceConnector.json"
    listed = json.loads(path.read_text())["offsets"]
    own = [e for e in listed if e["partition"]["topic"] == mirrored.topic]
    assert own == [{"partition": {"cluster": mirrored.alias, "partition": p, "topic": mirrored.topic},
                    "offset": {"offset": 9}} for p in (0, 1)]
    assert any(e["partition"]["topic"] == "heartbeats" for e in listed)  # MM2 mirrors heartbeats too
    snaps = audit.snapshots(flow=mirrored.flow.name, kind="connector-offsets")
    assert any(s.run_id == first.run_id for s in snaps)
    assert first.mutating_calls() == 0
    second = run_dag("mm2_offsets", conf(mirrored, action="list"))
    assert second.state == "success" and second.mutating_calls() == 0


@pytest.mark.parametrize("pause", [False, True], ids=["running", "paused"])
def test_alter_refused_unless_stopped_and_no_patch_sent(run_dag, mirrored, connect_b_url, use_topology, pause):
    name = mirrored.flow.connector("source")
    if pause:
        with ConnectClient(connect_b_url) as c:
            c.pause(name)
            wait_for(c, name, "PAUSED", timeout_s=30)
    with FaultProxy(connect_b_url) as proxy:
        use_topology(mirrored.topology, connect_url=proxy.url)
        run = run_dag("mm2_offsets", conf(mirrored, action="alter", offsets=body(mirrored, {0: 3})))
    assert run.state == "failed"
    assert run.task_states()["apply"] == "failed"
    state = "PAUSED" if pause else "RUNNING"
    assert f"{name} is {state}: it must be STOPPED before its offsets can be changed" in run.failure()
    assert proxy.calls(method="PATCH") == [] and [c for c in proxy.calls() if c.method != "GET"] == []
    assert run.mutating_calls() == 0
    assert offsets_of(connect_b_url, name) == {0: 9, 1: 9}


def test_alter_stop_first_restore_reset(run_dag, mirrored_secure, secured):
    """On the secured stack (the moves of one real path: alter, stop, alter, restore, reset)."""
    mirrored, connect_b_url = mirrored_secure, mirrored_secure.connect
    bootstrap_b = secured.require().kafka_config("B")
    admin_b = KafkaAdmin(bootstrap_b)
    name = mirrored.flow.connector("source")
    # alter with stop_first on a RUNNING connector: it runs again afterwards, from the new position.
    run = run_dag("mm2_offsets", conf(mirrored, action="alter", offsets=body(mirrored, {0: 4}), stop_first=True))
    assert run.state == "success", run.failure()
    assert state_of(connect_b_url, name) == "RUNNING"
    calls = [(e.action, e.request.method) for e in run.events(kind="call") if e.result == "ok"]
    assert calls == [("connector.stop", "PUT"), ("offsets.alter", "PATCH"), ("connector.resume", "PUT")]
    before_alter = [e.snapshot_id for e in run.events(kind="step") if e.action == "step.offsets.alter"][0]
    remote0 = TP(mirrored.remote, 0)
    eventually(lambda: admin_b.high_watermarks([remote0])[remote0] >= 15, what="records 5..9 mirrored again")
    assert seqs(bootstrap_b, remote0, 10, 15) == [5, 6, 7, 8, 9]

    # Now stopped (as an operator would), alter again; a repeat of the same alter changes nothing.
    stop = run_dag("mm2_pause_resume", {"flow": mirrored.flow.name, "action": "stop", "connectors": "source"})
    assert stop.state == "success"
    eventually(lambda: offsets_of(connect_b_url, name) == {0: 9, 1: 9}, what="offsets settled at 9/9")
    alter = conf(mirrored, action="alter", offsets=body(mirrored, {0: 2, 1: None}))
    assert run_dag("mm2_offsets", alter).mutating_calls() == 1
    assert offsets_of(connect_b_url, name) == {0: 2}
    again = run_dag("mm2_offsets", alter)
    assert again.state == "success" and again.mutating_calls() == 0

    # restore puts back exactly what the first alter overwrote; twice changes nothing more.
    restore = conf(mirrored, action="restore", snapshot_id=before_alter)
    assert run_dag("mm2_offsets", restore).mutating_calls() == 1
    assert offsets_of(connect_b_url, name) == {0: 9, 1: 9}
    assert run_dag("mm2_offsets", restore).mutating_calls() == 0

    reset = conf(mirrored, action="reset")
    assert run_dag("mm2_offsets", reset).mutating_calls() == 1
    assert offsets_of(connect_b_url, name) == {}
    assert run_dag("mm2_offsets", reset).mutating_calls() == 0
    assert state_of(connect_b_url, name) == "STOPPED"


def test_dry_run_alter_plans_and_changes_nothing(run_dag, mirrored, connect_b_url):
    name = mirrored.flow.connector("source")
    run = run_dag("mm2_offsets", conf(mirrored, action="alter", offsets=body(mirrored, {0: 1}), stop_first=True,
                                      dry_run=True))
    assert run.state == "success", run.failure()
    planned = [(e.action, e.request.method) for e in run.events(kind="call") if e.result == "planned"]
    assert planned == [("connector.stop", "PUT"), ("offsets.alter", "PATCH"), ("connector.resume", "PUT")]
    assert run.mutating_calls() == 0
    assert state_of(connect_b_url, name) == "RUNNING"
    assert offsets_of(connect_b_url, name) == {0: 9, 1: 9}


@pytest.mark.parametrize("overrides,needle", [
    ({"flow": "Q->Z"}, 'Unknown flow "Q->Z"'),
    ({"action": "alter", "offsets": "{\"offsets\": [ {"}, "not valid JSON"),
    ({"action": "alter", "offsets": {"offsets": [{"partition": {"topic": "t", "partition": 0},
                                                  "offset": {"offset": 1}}]}}, "missing the 'cluster' key"),
    ({"action": "alter", "offsets": "NEG"}, "cannot be negative"),
    ({"action": "alter", "connector": "checkpoint", "offsets": "CP5"}, "the only accepted value"),
    ({"action": "restore"}, "needs `snapshot_id`"),
], ids=["unknown-flow", "malformed-json", "wrong-keys", "negative", "checkpoint-not-zero", "restore-no-snapshot"])
def test_bad_input_fails_first_task_without_any_call(run_dag, dag_scratch, connect_b_url, use_topology, overrides,
                                                     needle):
    if overrides.get("offsets") == "NEG":
        overrides["offsets"] = body(dag_scratch, {0: -5})
    if overrides.get("offsets") == "CP5":
        overrides["offsets"] = {"offsets": [{"partition": {"group": "g", "topic": f"{dag_scratch.alias}.t",
                                                           "partition": 0}, "offset": {"offset": 5}}]}
    with FaultProxy(connect_b_url) as proxy:
        use_topology(dag_scratch.topology, connect_url=proxy.url)
        run = run_dag("mm2_offsets", {**conf(dag_scratch, action="list"), **overrides})
    assert run.state == "failed"
    assert run.task_states()["validate_params"] == "failed"
    assert run.task_states()["apply"] == "upstream_failed"
    assert needle in run.failure()
    assert proxy.calls() == []


def test_alter_with_spark_parity_judges_connector_offsets_and_groups(run_dag, mirrored, connect_b_url,
                                                                    monkeypatch):
    # Through the spark_default connection (the provider's SparkSubmitHook), with this venv not on the
    # worker's PATH: spark-submit is found through the subprocess's own environment, and the worker's
    # environment is left as it was.
    venv_bin = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin))
    before = dict(os.environ)
    run = run_dag("mm2_offsets", conf(mirrored, action="alter", offsets=body(mirrored, {0: 4, 1: 7}),
                                      stop_first=True, parity="spark"))
    assert run.state == "success", run.failure() or run.task_states()
    verdict = [e for e in run.events(kind="step") if e.action == "step.parity.group_parity"][0]
    assert verdict.result == "noop" and verdict.details["status"] == "passed"
    # The connector's own offsets were among the rows the job judged (as read back while STOPPED).
    assert verdict.details["totals"].get("rows", 0) >= 2 or sum(verdict.details["counts"].values()) >= 2
    assert {k: os.environ.get(k) for k in ("PATH", "AIRFLOW_CONN_SPARK_DEFAULT")} == \
        {k: before.get(k) for k in ("PATH", "AIRFLOW_CONN_SPARK_DEFAULT")}


def test_an_unknown_snapshot_fails_at_validate_params_naming_the_flows_latest(run_dag, dag_scratch, connect_b_url,
                                                                             use_topology, audit):
    """Restoring a snapshot that does not exist is refused by the first task, for good — not found by `apply`
    as a retryable error — and the refusal names the connector's latest snapshots, newest first."""
    name = dag_scratch.flow.connector("source")
    sids = [audit.save_snapshot("connector-offsets", dag_scratch.flow.name, name, {"offsets": []},
                                note=f"before alter {i}") for i in range(2)]
    with FaultProxy(connect_b_url) as proxy:
        use_topology(dag_scratch.topology, connect_url=proxy.url)
        run = run_dag("mm2_offsets", conf(dag_scratch, action="restore", snapshot_id="snap-not-there"))
    tis = {ti.task_id: ti for ti in run.dag_run.get_task_instances()}
    assert run.state == "failed"
    assert str(tis["validate_params"].state) == "failed" and tis["validate_params"].try_number == 1
    assert {str(tis[t].state) for t in ("lock_flow", "apply")} == {"upstream_failed"}
    failure = run.failure()
    assert f'No snapshot "snap-not-there" in the audit store; the latest snapshots of {name} are: {sids[1]} ' \
           f"(before alter 1," in failure
    assert failure.index(sids[1]) < failure.index(sids[0])
    assert proxy.calls() == [] and run.mutating_calls() == 0
