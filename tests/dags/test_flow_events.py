"""Flow events from real health-check runs (dag.test, the session devstack, a scratch flow of its own): each
state change is an Asset event on `mirrorbook://flows/<source>/<target>` with old/new state, lag and the
check's run id — also when the check itself fails — and mm2_failover_on_alert proposes one unplanned failover,
approval required, once the flow stayed NOT_REPLICATING for the topology's consecutive checks.
(The scheduler itself starting mm2_failover_on_alert on such an event: tests/e2e/test_approval_api.py.)"""

from __future__ import annotations

import re
from typing import Any

import pytest

from mirrorbook.audit import AuditStore
from mirrorbook.connect import ConnectClient
from mirrorbook.connect.wait import wait_for
from mirrorbook.runbooks import alerts
from mirrorbook.runbooks.health.events import flow_uri
from mirrorbook.topology import FailoverOnAlert
from tests.dags.test_health_check import scratch  # noqa: F401 — the fixture: a scratch flow, REPLICATING

pytestmark = [pytest.mark.airflow, pytest.mark.integration]


def asset_events(uri: str) -> list[dict[str, Any]]:
    """The Asset events Airflow registered on `uri`, oldest first: their extra."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(select(AssetEvent).join(AssetModel, AssetEvent.asset_id == AssetModel.id)
                               .where(AssetModel.uri == uri).order_by(AssetEvent.id)).all()
        return [dict(r.extra or {}) for r in rows]


def triggered(dag_id: str, run_id: str) -> Any:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        found = DagRun.find(dag_id=dag_id, run_id=run_id, session=session)
        return (found[0].run_id, found[0].conf, str(found[0].state)) if found else None


def test_state_changes_are_asset_events_and_a_flow_down_for_two_checks_gets_one_proposal(
        run_dag, scratch, use_topology, connect_b_url, audit: AuditStore):  # noqa: F811
    flow = scratch.flow
    use_topology(scratch.topology.model_copy(update={"failover_on_alert": FailoverOnAlert(
        enabled=True, flows=re.escape(flow.name), consecutive_checks=2)}))  # two checks: `down` and `still`
    uri = flow_uri(flow.source, flow.target)
    conf = {"flows": re.escape(flow.name), "readiness": False}

    up = run_dag("mm2_health_check", conf)
    with ConnectClient(connect_b_url) as c:  # paused: still enabled, so NOT_REPLICATING (KIP-1144)
        c.pause(flow.connector("source"))
        wait_for(c, flow.connector("source"), "PAUSED", timeout_s=60)
    down = run_dag("mm2_health_check", conf)
    still = run_dag("mm2_health_check", conf)

    assert up.state == "success" and down.state == still.state == "failed", (down.task_states(), still.task_states())
    assert down.task_states() == {"check_flows": "failed", "flow_events": "success"}
    events = asset_events(uri)
    assert [(e["old_state"], e["new_state"], e["check_run_id"]) for e in events] == [
        (None, "REPLICATING", up.run_id), ("REPLICATING", "NOT_REPLICATING", down.run_id)]  # none for `still`
    assert events[1]["flow"] == flow.name and events[1]["max_lag"] is not None and "total_lag" in events[1]
    assert still.xcom("flow_events") == []

    proposing = run_dag("mm2_failover_on_alert", {"flow": flow.name})
    again = run_dag("mm2_failover_on_alert", {"flow": flow.name})  # the same episode: proposed already

    episode = alerts.Episode(flow=flow.name, since_run_id=down.run_id)
    run_id = alerts.proposal_run_id(episode)
    assert proposing.state == "success", proposing.task_states()
    assert proposing.xcom("wait_for_consecutive_checks") == [episode.model_dump()]
    assert triggered("mm2_failover", run_id) == (run_id, {"flow": flow.name, "mode": "unplanned",
                                                           "approval": "required"}, "queued")
    [proposal] = proposing.events(action="step.alert.proposal")
    assert proposal.details["proposed_run_id"] == run_id and proposal.details["consecutive_checks"] == 2
    assert again.task_states()["propose_failover"] == "skipped", again.task_states()
    assert again.events(action="step.alert.proposal") == []  # recorded once, triggered once
    assert audit.events(action="step.flow.state_changed", run_id=down.run_id)[0].state_after == {
        "state": "NOT_REPLICATING"}
