"""mm2_pause_resume end to end: real Airflow (dag.test), real Connect, audit trail checked."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from mirrorbook.audit.models import LockHolder
from mirrorbook.connect import ConnectClient
from mirrorbook.devstack.workload import GroupSpec, park_groups, produce
from tests.faultproxy import FaultProxy

pytestmark = [pytest.mark.airflow, pytest.mark.integration]


def states(url, flow) -> dict[str, tuple[str, list[str]]]:
    """Each connector's state and task states (`url`: a URL, or a secured worker's ConnectSettings)."""
    with ConnectClient(url) as c:
        out = {}
        for role, name in flow.connectors.items():
            st = c.status(name)
            out[role] = (st.connector.state, [t.state for t in st.tasks])
        return out


@pytest.mark.parametrize("action,expect", [
    ("pause", "PAUSED"),
    ("stop", "STOPPED"),
])
def test_each_action_twice_second_run_changes_nothing(run_dag, secure_scratch, action, expect):
    """On the secured stack: Connect on HTTPS with basic auth, as the runbook's connection reaches it."""
    scratch = secure_scratch
    conf = {"flow": scratch.flow.name, "action": action, "connectors": "all"}
    first = run_dag("mm2_pause_resume", conf)
    assert first.state == "success", first.failure() or first.task_states()
    after = states(scratch.connect, scratch.flow)
    assert {s for s, _ in after.values()} == {expect}
    if expect == "STOPPED":
        assert all(tasks == [] for _, tasks in after.values())
    assert first.mutating_calls() == 3

    second = run_dag("mm2_pause_resume", conf)
    assert second.state == "success"
    assert second.mutating_calls() == 0
    assert states(scratch.connect, scratch.flow) == after
    noops = [e for e in second.events(kind="step") if e.action.startswith("step.connector.")]
    assert [e.result for e in noops] == ["noop"] * 3

    resumed = run_dag("mm2_pause_resume", {**conf, "action": "resume"})
    assert resumed.state == "success" and resumed.mutating_calls() == 3
    assert {s for s, _ in states(scratch.connect, scratch.flow).values()} == {"RUNNING"}
    again = run_dag("mm2_pause_resume", {**conf, "action": "resume"})
    assert again.mutating_calls() == 0


def test_one_connector_only(run_dag, dag_scratch, connect_b_url):
    run = run_dag("mm2_pause_resume", {"flow": dag_scratch.flow.name, "action": "pause", "connectors": "checkpoint"})
    assert run.state == "success"
    now = states(connect_b_url, dag_scratch.flow)
    assert now["checkpoint"][0] == "PAUSED" and now["source"][0] == "RUNNING" and now["heartbeat"][0] == "RUNNING"
    assert run.recorded_result() == "success"  # its end, for mirrorbook_runbook_runs_total


def test_dry_run_plans_and_changes_nothing(run_dag, dag_scratch, connect_b_url, use_topology):
    before = states(connect_b_url, dag_scratch.flow)
    with FaultProxy(connect_b_url) as proxy:
        use_topology(dag_scratch.topology, connect_url=proxy.url)
        run = run_dag("mm2_pause_resume", {"flow": dag_scratch.flow.name, "action": "stop", "dry_run": True})
    assert run.state == "success", run.failure()
    assert states(connect_b_url, dag_scratch.flow) == before
    assert [c.method for c in proxy.calls()] == ["GET"] * len(proxy.calls())  # reads only
    planned = [e for e in run.events(kind="call") if e.result == "planned"]
    assert [(e.request.method, e.request.path.rsplit("/", 1)[-1]) for e in planned] == [("PUT", "stop")] * 3
    assert all("is connector=RUNNING" in e.details["precondition"] for e in planned)
    assert run.mutating_calls() == 0
    report = [e for e in run.events() if e.action == "step.connector.stop"]
    assert {e.result for e in report} == {"planned"}
    assert run.recorded_result() == "dry_run"


def test_unknown_flow_fails_first_task_without_any_call(run_dag, dag_scratch, connect_b_url, use_topology):
    with FaultProxy(connect_b_url) as proxy:
        use_topology(dag_scratch.topology, connect_url=proxy.url)
        run = run_dag("mm2_pause_resume", {"flow": "X->Y", "action": "pause"})
    assert run.state == "failed"
    tis = run.task_states()
    assert tis["validate_params"] == "failed" and tis["apply"] == "upstream_failed"
    assert proxy.calls() == []
    assert run.mutating_calls() == 0
    assert run.recorded_result() == "failed"  # the report task, run whatever happened, said so


def test_a_misspelled_dry_run_is_refused_before_any_call(run_dag, dag_scratch, connect_b_url, use_topology):
    before = states(connect_b_url, dag_scratch.flow)
    with FaultProxy(connect_b_url) as proxy:
        use_topology(dag_scratch.topology, connect_url=proxy.url)
        run = run_dag("mm2_pause_resume", {"flow": dag_scratch.flow.name, "action": "pause", "dryrun": True})
    assert run.state == "failed"
    tis = run.task_states()
    assert tis["validate_params"] == "failed" and tis["apply"] == "upstream_failed"
    assert "unknown parameter 'dryrun' — did you mean 'dry_run'?" in run.failure()
    assert [c for c in proxy.calls() if c.method != "GET"] == []
    assert run.mutating_calls() == 0 and states(connect_b_url, dag_scratch.flow) == before


def test_proofs_that_could_not_run_are_refused_before_anything_changes(run_dag, dag_scratch, connect_b_url,
                                                                       monkeypatch):
    # spark-submit to a cluster master would get paths of this worker: refused up front, naming the way out.
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "yarn"}')
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", raising=False)
    before = states(connect_b_url, dag_scratch.flow)
    run = run_dag("mm2_pause_resume", {"flow": dag_scratch.flow.name, "action": "pause", "parity": "spark"})
    assert run.state == "failed" and run.task_states()["validate_params"] == "failed"
    assert 'on master "yarn"' in run.failure() and "spark_connect_default" in run.failure()
    assert "MIRRORBOOK_PARITY_URI" in run.failure()  # both ways out: Spark Connect, or a URI both sides reach
    assert run.mutating_calls() == 0 and states(connect_b_url, dag_scratch.flow) == before
    # A parity URI this worker cannot write to: refused as well, naming it.
    monkeypatch.setenv("MIRRORBOOK_PARITY_URI", "file:///proc/mirrorbook-parity")
    run = run_dag("mm2_pause_resume", {"flow": dag_scratch.flow.name, "action": "pause", "parity": "spark"})
    assert run.state == "failed" and run.task_states()["validate_params"] == "failed"
    assert 'MIRRORBOOK_PARITY_URI="file:///proc/mirrorbook-parity" is not writable from this worker' in run.failure()
    assert run.mutating_calls() == 0 and states(connect_b_url, dag_scratch.flow) == before
    monkeypatch.delenv("MIRRORBOOK_PARITY_URI")
    # A Spark Connect connection named for the run that does not exist: refused, never a silent spark-submit.
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
    run = run_dag("mm2_pause_resume", {"flow": dag_scratch.flow.name, "action": "pause", "parity": "spark",
                                       "spark_connect": "spark_connect_dr_site"})
    assert run.state == "failed" and run.task_states()["validate_params"] == "failed"
    assert ('the Spark Connect connection "spark_connect_dr_site" named by the run\'s spark_connect parameter '
            "does not exist") in run.failure()
    assert run.mutating_calls() == 0 and states(connect_b_url, dag_scratch.flow) == before


def test_second_runbook_on_a_locked_flow_is_refused(run_dag, dag_scratch, connect_b_url, audit, use_topology):
    holder = LockHolder(run_id="manual__other-run", dag_id="mm2_offsets", user="alice")
    audit.acquire_lock(dag_scratch.flow.name, holder)
    try:
        with FaultProxy(connect_b_url) as proxy:
            use_topology(dag_scratch.topology, connect_url=proxy.url)
            run = run_dag("mm2_pause_resume", {"flow": dag_scratch.flow.name, "action": "stop"})
        assert run.state == "failed"
        assert run.task_states()["lock_flow"] == "failed"
        text = run.failure()
        assert "locked by run manual__other-run of DAG mm2_offsets (triggered by alice)" in text
        assert [c for c in proxy.calls() if c.method != "GET"] == []
        assert audit.lock_holder(dag_scratch.flow.name).run_id == "manual__other-run"  # not released by the loser
    finally:
        audit.release_lock(dag_scratch.flow.name, "manual__other-run")
    # Once free, the same request goes through and releases the lock at the end.
    use_topology(dag_scratch.topology)
    run = run_dag("mm2_pause_resume", {"flow": dag_scratch.flow.name, "action": "pause"})
    assert run.state == "success" and audit.lock_holder(dag_scratch.flow.name) is None


def test_stop_with_spark_parity_proves_no_group_moved(run_dag, dag_scratch, connect_b_url, audit, monkeypatch,
                                                      bootstrap_a, admin_a):
    produce(bootstrap_a, [dag_scratch.topic], 10)
    park_groups(admin_a, [dag_scratch.topic], [GroupSpec(name=f"{dag_scratch.alias}-parked", position="end-3")])
    # Out of the box: Airflow started from the venv without activating it (spark-submit is not on PATH),
    # no spark_connect_default (the proofs fall back to spark-submit) and no spark_default connection —
    # the job must still run, on local[*], not on the provider's YARN.
    venv_bin = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin))
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT")
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", raising=False)
    path = os.environ["PATH"]
    run = run_dag("mm2_pause_resume", {"flow": dag_scratch.flow.name, "action": "stop", "parity": "spark"})
    assert run.state == "success", run.failure() or run.task_states()
    # ... without touching the worker's own environment (no process-wide side effects).
    assert os.environ["PATH"] == path and "AIRFLOW_CONN_SPARK_DEFAULT" not in os.environ
    verdict = [e for e in run.events(kind="step") if e.action == "step.parity.group_parity"]
    assert len(verdict) == 1 and verdict[0].result == "noop"  # a check: nothing changed, nothing failed
    assert verdict[0].details.get("status") == "passed", verdict[0].details
    assert verdict[0].details["engine"] == "spark-submit (local[*])"
    assert verdict[0].details["counts"].get("OK", 0) > 0
    summary = json.loads((Path(verdict[0].details["output"]).parent / "summary.json").read_text())
    assert summary["master"] == "local[*]"
