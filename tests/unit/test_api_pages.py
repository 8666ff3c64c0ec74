"""The plugin's app without a stack: every route guarded, the pages' rows and links, and HTML that
neither executes nor grows with what it is given."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

from fastapi.routing import APIRoute

from mirrorbook.airflow.api import auth, views
from mirrorbook.airflow.api.app import create_app
from mirrorbook.airflow.api.links import RUNBOOKS, runbook_links, ui_base
from mirrorbook.airflow.api.page import render
from mirrorbook.audit import AuditStore
from mirrorbook.mm2.flows import ConnectorSummary, DetailedState, FlowState, FlowStatus, PartitionLag

NOW = datetime(2026, 11, 23, 10, 0, tzinfo=timezone.utc)
HOSTILE = '<script>alert("x")</script>'


def _dependencies(dependant) -> set:
    out = set()
    for d in dependant.dependencies:
        out.add(d.call)
        out |= _dependencies(d)
    return out


def test_every_route_the_schema_and_its_viewers_included_needs_an_airflow_guard():
    app = create_app()
    routes = [r for r in app.routes if isinstance(r, APIRoute)]
    assert len(routes) == len(app.routes)  # FastAPI's own (public) schema and docs routes are switched off
    assert {"/openapi.json", "/docs", "/redoc", "/page", "/page/flows/{source}/{target}"} <= {r.path for r in routes}
    for route in routes:
        guards = _dependencies(route.dependant) & set(auth.GUARDS)
        assert len(guards) == 1, (route.path, route.methods, guards)
    writes = {(r.path, m) for r in routes for m in r.methods if m != "GET"}
    assert writes == {("/{source}/{target}/pause", "PUT"), ("/{source}/{target}/resume", "PUT"),
                      ("/{source}/{target}/offsets", "PATCH"), ("/{source}/{target}/offsets", "DELETE")}
    for route in routes:
        if route.methods & {"PUT", "PATCH", "DELETE"}:
            assert auth.reader not in _dependencies(route.dependant), route.path  # acting needs more than reading


def test_runbook_links_open_the_flows_latest_run_else_the_dag():
    links = {r.dag_id: r for r in runbook_links("/airflow/mirrorbook", {"mm2_failover": "manual__2026-11-23T10:00:00+00:00"})}
    assert list(links) == list(RUNBOOKS)
    assert links["mm2_failover"].href == "/airflow/dags/mm2_failover/runs/manual__2026-11-23T10%3A00%3A00%2B00%3A00"
    assert links["dr_drill"].href == "/airflow/dags/dr_drill" and links["dr_drill"].run_id is None
    assert ui_base("/mirrorbook") == "" and ui_base("") == ""


def test_the_latest_run_of_each_runbook_on_the_flow_comes_from_the_audit(tmp_path: Path):
    audit = AuditStore(f"sqlite:///{tmp_path}/a.db")
    for run, dag, flow in [("r1", "mm2_failover", "A->B"), ("r2", "mm2_failover", "A->B"), ("r3", "mm2_offsets", "B->A"),
                           ("flows-api__pause", None, "A->B"), ("r4", "not_a_runbook", "A->B")]:
        audit.record(action="step.precheck", kind="step", result="ok", run_id=run, dag_id=dag, flow=flow)
    assert views.latest_runs(audit, "A->B") == {"mm2_failover": "r2"}
    assert views.latest_runs(audit, "B->A") == {"mm2_offsets": "r3"}


def test_freshness_comes_from_the_health_checks_sample_even_behind_a_drills(tmp_path: Path):
    audit = AuditStore(f"sqlite:///{tmp_path}/a.db")
    assert views.freshness(views.health_sample(audit, "A->B"), NOW) == views.Freshness()
    audit.record_metrics("A->B", NOW - timedelta(minutes=4), {
        "source": "mm2_health_check", "heartbeat_age_s": 2.5, "checkpoint_age_s_max": 75.0,
        "checkpoints": [{"group": "g1", "age_s": 5.0, "behind": []}, {"group": "g2", "age_s": 75.0, "behind": ["t-0"]},
                        {"group": "g3", "age_s": None, "behind": []}]})
    for i in range(3):  # a drill samples every second, without freshness figures
        audit.record_metrics("A->B", NOW - timedelta(seconds=30 - i), {"source": "dr_drill", "total_lag": i})
    sample = views.health_sample(audit, "A->B")
    fresh = views.freshness(sample, NOW)
    assert (fresh.heartbeat_age_s, fresh.checkpoint_age_s_max, fresh.sample_age_s) == (2.5, 75.0, 240.0)
    rows, hidden = views.checkpoint_rows(sample)
    assert [(r.group, r.age_s, r.behind) for r in rows] == [("g3", None, 0), ("g2", 75.0, 1), ("g1", 5.0, 0)]
    assert hidden == 0


def _status(name: str = "A->B", partitions: int = 3, error: str | None = None) -> FlowStatus:
    connectors = {role: ConnectorSummary(name=f"{name}.{cls}", role=role, connector_class=cls, state="RUNNING",
                                         tasks_running=1, tasks=["RUNNING"])
                  for role, cls in (("source", "MirrorSourceConnector"), ("checkpoint", "MirrorCheckpointConnector"),
                                    ("heartbeat", "MirrorHeartbeatConnector"))}
    lag = [PartitionLag(topic=f"t{i % 7}", partition=i, remote_topic=f"A.t{i % 7}", high_watermark=1000,
                        replicated_offset=999 - i, lag=i) for i in range(partitions)]
    return FlowStatus(flow=name, source=name.split("->")[0], target="B", connect_cluster="B",
                      state=FlowState.REPLICATING,
                      detailed_state=DetailedState(enabled=True, ready=True, allConnectorsRunning=True,
                                                   sourceTaskRunning=True),
                      connectors=connectors, lag=lag, total_lag=sum(p.lag for p in lag),
                      max_lag=max((p.lag for p in lag), default=0), errors=[error] if error else [])


def _page(status: FlowStatus, user: str = "admin", events: list | None = None) -> str:
    row = views.flow_row(status, None, runbook_links("/mirrorbook", {}), "/mirrorbook", NOW)
    return render("page.html", user, "/mirrorbook", flows=[row], drills=[], events=events or [])


def _events(audit: AuditStore, text: str) -> list[views.EventRow]:
    audit.record(action=f"step.{text}", kind="step", result="error", run_id=text, dag_id=text, flow=text, user=text)
    return views.event_rows(audit.events(limit=5, newest_first=True))


def test_pages_escape_every_value_and_do_not_grow_with_it(tmp_path: Path):
    # Flow names come from the topology (the operator's file) and stay whole: they make the links.
    # What users and clusters supply — users, run ids, actions, errors, traces — is cut.
    audit = AuditStore(f"sqlite:///{tmp_path}/a.db")
    plain = _page(_status(name=HOSTILE + "->B"), events=_events(audit, "x"))
    hostile = _page(_status(name=HOSTILE + "->B", error=HOSTILE * 10_000), user=HOSTILE * 10_000,
                    events=_events(audit, HOSTILE * 10_000)[:1])
    assert "<script" not in hostile and "&lt;script&gt;" in hostile
    assert len(hostile) < len(plain) + 8_000  # each value cut to 200 characters (+ its length), escaped
    assert re.search(r"\(\d+ chars\)", hostile)
    assert 'href="/mirrorbook/page/flows/' in plain and 'target="_top"' in plain
    assert "Lag (records)" in plain and "overflow-wrap: anywhere" in plain and "table-layout: fixed" in plain


def test_the_flow_page_lists_the_worst_partitions_first_and_says_how_many_it_left_out():
    status = _status(partitions=views.MAX_PARTITIONS + 50)
    rows, hidden = views.partition_rows(status)
    assert len(rows) == views.MAX_PARTITIONS and hidden == 50
    assert [r.lag for r in rows[:3]] == [249, 248, 247]
    row = views.flow_row(status, None, runbook_links("/mirrorbook", {}), "/mirrorbook", NOW)
    html = render("flow.html", "admin", "/mirrorbook", flow=row, partitions=rows, hidden_partitions=hidden,
                  checkpoints=[], hidden_groups=0, events=[])
    assert "… and 50 more partition(s) with less lag" in html
    assert html.count('<tr><td><code>t') == views.MAX_PARTITIONS
    assert 'href="/dags/mm2_failover" target="_top"' in html
