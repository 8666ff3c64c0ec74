"""Flow events on a real `airflow standalone`: a health check triggered over the REST API announces the failover
flow's state change as an Asset event — whatever the check concludes (test_failover_api.py has stopped that
flow: DISABLED fails the check) — and the scheduler starts mm2_failover_on_alert on it (the topology watches
that flow), which finds nothing to propose for a flow that is not NOT_REPLICATING. (NOT_REPLICATING for enough
checks, the proposal and the cooldown: tests/dags/test_flow_events.py and tests/unit/test_flow_events.py.)
The ops flow is left alone: test_page.py shows its health sample."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import httpx
import pytest

from mirrorbook.runbooks.health.events import flow_uri
from tests.e2e.conftest import E2E
from tests.e2e.test_approval_api import _finished, _tasks, _trigger
from tests.helpers import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.integration]


def _runs_after(api: httpx.Client, dag_id: str, known: set[str], timeout_s: float = 180) -> dict[str, Any]:
    """The first run of `dag_id` not in `known`, once the scheduler has created it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = api.get(f"/api/v2/dags/{dag_id}/dagRuns").json()["dag_runs"]
        new = [r for r in runs if r["dag_run_id"] not in known]
        if new:
            return new[0]
        time.sleep(2)
    raise AssertionError(f"the scheduler started no run of {dag_id} within {timeout_s} s")


def _asset_events(api: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    """The check's asset events. Airflow 3.3.2's API answers 500 for an event whose triggered run is still queued
    (its AssetEventResponse requires created_dagruns[].start_date, None until the run starts): asked again once
    mm2_failover_on_alert's run has started, it answers."""
    got = api.get("/api/v2/assets/events", params={"source_dag_id": "mm2_health_check", "source_run_id": run_id})
    assert got.status_code == 200, got.text
    return got.json()["asset_events"]


def test_a_health_check_announces_a_flow_change_and_the_scheduler_starts_the_alert_dag_on_it(e2e: E2E):
    flow = e2e.failover.flow
    uri = flow_uri(flow.source, flow.target)
    run_id = f"e2e-health-{uuid.uuid4().hex[:8]}"
    with e2e.client() as api:
        api.patch("/api/v2/dags/mm2_failover_on_alert", json={"is_paused": False}).raise_for_status()
        before = {r["dag_run_id"] for r in api.get("/api/v2/dags/mm2_failover_on_alert/dagRuns").json()["dag_runs"]}
        _trigger(api, "mm2_health_check", run_id, {"flows": re.escape(flow.name), "readiness": False})
        _finished(api, "mm2_health_check", run_id)  # failed or not: the check's verdict on the flow
        checked = _tasks(api, "mm2_health_check", run_id)
        events = eventually(lambda: _asset_events(api, run_id), timeout=60, what="the check's asset events")
        alert = _runs_after(api, "mm2_failover_on_alert", before)
        assert _finished(api, "mm2_failover_on_alert", alert["dag_run_id"]) == "success"
        tasks = _tasks(api, "mm2_failover_on_alert", alert["dag_run_id"])

    state = e2e.audit.latest_metrics(flow.name).metrics["state"]  # what this check found
    assert checked["flow_events"] == "success", checked
    [event] = [e for e in events if e["uri"] == uri]
    assert {k: event["extra"][k] for k in ("flow", "new_state", "check_run_id")} == {
        "flow": flow.name, "new_state": state, "check_run_id": run_id}
    assert state != "NOT_REPLICATING", state  # so nothing is proposed
    assert "old_state" in event["extra"] and "max_lag" in event["extra"]
    assert alert["run_type"] == "asset_triggered", alert
    assert tasks == {"wait_for_consecutive_checks": "success", "propose_failover": "skipped"}, tasks
    assert e2e.audit.events(action="step.alert.proposal", flow=flow.name) == []
