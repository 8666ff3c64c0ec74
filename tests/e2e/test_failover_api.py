"""A planned failover started the way incident tooling starts it: `mirrorbook trigger … --wait` over
Airflow's REST API, run by a real scheduler/triggerer, and found afterwards under the API user's name
in both audit trails (Airflow's event log and mirrorbook's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from mirrorbook.kafka.admin import KafkaAdmin
from tests.e2e.conftest import E2E

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.integration]
MIRRORBOOK = str(Path(sys.executable).with_name("mirrorbook"))


def _trigger(e2e: E2E, dag_id: str, conf: dict, run_id: str, user: str = "admin") -> subprocess.CompletedProcess:
    env = {**os.environ, "MIRRORBOOK_AIRFLOW_PASSWORD": e2e.password(user)}
    # A bound, not a target: a planned failover with both proofs on the secured stack took over 240 s on a
    # two-core machine at load 20 (every task a process of its own, each opening TLS + SCRAM sessions).
    return subprocess.run([MIRRORBOOK, "trigger", dag_id, "--conf", json.dumps(conf), "--run-id", run_id, "--wait",
                           "--timeout", "420", "--poll", "1", "--url", e2e.url, "--user", user],
                          env=env, capture_output=True, text=True, timeout=480)


def _diagnose(e2e: E2E, dag_id: str, run_id: str) -> str:
    """Task states and mirrorbook's refusals/errors of the run, for a failure message."""
    with e2e.client() as api:
        tis = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances").json().get("task_instances", [])
    errors = [f"{e.action}: {e.error}" for e in e2e.audit.events(run_id=run_id) if e.error]
    return f"tasks: { {t['task_id']: t['state'] for t in tis} }\nerrors: {errors}\n{e2e.airflow.log_tail(2000)}"


def test_planned_failover_over_rest_runs_and_is_audited_with_the_api_user(e2e: E2E):
    scratch = e2e.failover
    run_id = f"e2e-failover-{uuid.uuid4().hex[:8]}"
    # The proofs on, on the session's Spark Connect server: under the real executor they run side by side.
    conf = {"flow": scratch.flow.name, "mode": "planned", "groups": f"{scratch.topic}-g.*", "drain_timeout": 120,
            "max_lag": 0, "parity": "spark",
            "approval": "skip"}  # automation that runs unattended; test_approval_api.py answers approvals

    done = _trigger(e2e, "mm2_failover", conf, run_id)

    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{_diagnose(e2e, 'mm2_failover', run_id)}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["dag_run_id"] == run_id and result["state"] == "success" and result["created"] is True
    printed = done.stdout + done.stderr
    assert e2e.password("admin") not in printed and "eyJ" not in printed  # neither the password nor a JWT

    # Airflow's own audit: the trigger, by the API user, for exactly this run.
    with e2e.client() as api:
        logs = api.get("/api/v2/eventLogs", params={"dag_id": "mm2_failover", "run_id": run_id,
                                                     "event": "trigger_dag_run"}).json()["event_logs"]
        run = api.get(f"/api/v2/dags/mm2_failover/dagRuns/{run_id}").json()
    assert [(log["owner"], log["run_id"]) for log in logs] == [("admin", run_id)]
    assert run["triggering_user_name"] == "admin" and run["logical_date"] is None
    # The two proofs passed, on the Connect server, and overlapped in time (not one after the other).
    with e2e.client() as api:
        tis = {t["task_id"]: t for t in api.get(f"/api/v2/dags/mm2_failover/dagRuns/{run_id}/taskInstances",
                                                params={"limit": 100}).json()["task_instances"]}
    proofs = [tis["group_parity"], tis["record_parity"]]
    assert [p["state"] for p in proofs] == ["success", "success"]
    first, second = sorted(proofs, key=lambda p: p["start_date"])
    assert second["start_date"] < first["end_date"], proofs
    verdicts = [e for e in e2e.audit.events(run_id=run_id) if e.action.startswith("step.parity.")]
    assert {(e.details.get("status"), e.details.get("engine")) for e in verdicts} == {
        ("passed", "spark-connect (spark_connect_default)")} and len(verdicts) == 2

    # mirrorbook's audit: every step and every mutating call of the run carries the API user.
    events = e2e.audit.events(run_id=run_id)
    assert events and {e.user for e in events} == {"admin"}
    calls = [e for e in events if e.kind == "call" and e.mutating and e.result == "ok"]
    assert any(e.action == "connector.stop" for e in calls), [e.action for e in calls]

    # What the run did: groups committed on B, the flow switched off (KIP-1144: DISABLED), nothing skipped.
    report = [a for a in e2e.audit.artifacts(run_id=run_id) if a.kind == "failover-report"]
    assert report and report[-1].summary["plan"]["skipped"] == 0
    assert report[-1].summary["plan"]["groups"] == len(scratch.groups)
    on_b = KafkaAdmin(e2e.stack.kafka_config("B")).committed_offsets(scratch.groups[:2])  # "end", "end-7"
    assert all(on_b[g] for g in scratch.groups[:2]), on_b
    with e2e.client() as api:
        assert api.get(f"/mirrorbook{scratch.path}").json()["state"] == "DISABLED"

    # The same run id again is the same run (an alert fired twice starts no second failover).
    again = _trigger(e2e, "mm2_failover", conf, run_id)
    assert again.returncode == 0 and json.loads(again.stdout.strip().splitlines()[-1])["created"] is False
