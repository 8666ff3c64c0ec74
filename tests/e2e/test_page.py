"""The plugin's pages, rendered by headless Chromium with an Airflow session cookie (as the Airflow UI's
external view loads them), kept as screenshots; their link in Airflow's navigation; and a flow's page with
its runbook links (each runbook's form for that flow, the flow's latest run beside it). The forms
themselves, followed into Airflow: tests/e2e/test_forms_ui.py."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta, timezone
from html import unescape
from pathlib import Path

import pytest

from mirrorbook.airflow.api.links import RUNBOOKS
from mirrorbook.trigger import AirflowApi, Credentials
from tests.e2e.browser import chromium, keep, page, render, session_cookie
from tests.e2e.conftest import E2E, SECRET

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.integration]


def _rows(dom: str, table: str) -> list[str]:
    body = re.search(rf'<table id="{table}">.*?<tbody>(.*?)</tbody>', dom, re.S)
    assert body, f"no table {table} in the page"
    return [" ".join(unescape(re.sub(r"<[^>]+>", " ", r)).split())
            for r in re.findall(r"<tr[^>]*>(.*?)</tr>", body.group(1), re.S)]


def _cookie(e2e: E2E) -> list[dict]:
    return session_cookie(e2e.url, e2e.token("admin"))


def test_page_renders_flows_drills_and_audit_in_headless_chromium(e2e: E2E, tmp_path: Path):
    assert chromium(), "chromium is missing: run scripts/bootstrap.sh --test (installs Debian's chromium)"
    e2e.audit.record_artifact("drill-report", "e2e-drill-1", "/reports/drill-e2e-drill-1.html",
                              {"rto_s": 12.5, "skipped": 0, "re_read": 7, "path": "/reports/drill-e2e-drill-1.html"})
    sampled = datetime.now(timezone.utc) - timedelta(minutes=3)
    e2e.audit.record_metrics(e2e.ops.flow.name, sampled, {"source": "mm2_health_check", "heartbeat_age_s": 1.6,
                                                          "checkpoint_age_s_max": 42.0, "checkpoints": []})
    with e2e.client() as api:
        flows = api.get("/mirrorbook/").json()["flows"]
        plugin = next(p for p in api.get("/api/v2/plugins").json()["plugins"] if p["name"] == "mirrorbook")
    shot = tmp_path / "plugin-page.png"

    dom = render(f"{e2e.url}/mirrorbook/page", _cookie(e2e), shot)

    keep(shot)
    assert SECRET not in dom
    rows = _rows(dom, "flows")
    for name, flow in flows.items():  # every flow, with the state the API reports
        assert any(name in r and flow["state"] in r for r in rows), (name, flow["state"], rows)
    assert "Lag (records)" in dom and all(" total max " in r for r in rows)
    ops = next(r for r in rows if e2e.ops.flow.name in r)
    assert "heartbeat 2 s old, checkpoint 42 s old health check 3 min ago" in ops, ops
    assert f'href="/mirrorbook/page/flows/{e2e.ops.alias}/B"' in dom
    drill = next(r for r in _rows(dom, "drills") if "e2e-drill-1" in r)
    assert "12.5" in drill and " 0 " in drill and " 7 " in drill
    newest = e2e.audit.events(limit=1, newest_first=True)
    events = _rows(dom, "events")
    if newest:  # the other e2e tests ran first: the newest event is theirs, made as admin
        assert newest[0].action in events[0] and (newest[0].user or "") in events[0]
    else:
        assert "the audit trail is empty" in events[0]
    assert {"name": "MM2 flows", "href": "/mirrorbook/page", "url_route": "mirrorbook"}.items() <= \
        plugin["external_views"][0].items()


def _dry_run(e2e: E2E, dag_id: str, conf: dict) -> str:
    run_id = f"e2e-page-{uuid.uuid4().hex[:8]}"
    with AirflowApi(e2e.url, timeout_s=60) as api:
        api.login(Credentials(username="admin", password=e2e.password("admin")))
        api.unpause(dag_id)
        api.trigger(dag_id, run_id, conf)
        run = api.wait(dag_id, run_id, timeout_s=240, interval_s=1)
    assert run.state == "success", f"{dag_id} {run_id}: {run.state}\n{e2e.airflow.log_tail(2000)}"
    return run_id


def test_flow_page_shows_the_flow_and_links_each_runbooks_form_and_the_flows_latest_run(e2e: E2E, tmp_path: Path):
    flow = e2e.ops.flow
    run_id = _dry_run(e2e, "mm2_pause_resume", {"flow": flow.name, "action": "pause", "dry_run": True,
                                                "parity": "off"})

    with page(_cookie(e2e)) as tab:
        tab.navigate(f"{e2e.url}/mirrorbook/page/flows/{e2e.ops.alias}/B")
        tab.screenshot(tmp_path / "plugin-flow-page.png")
        dom = tab.dom()
        forms = tab.evaluate("[...document.querySelectorAll('#runbooks a[data-dag]')]"
                             ".map(a => [a.dataset.dag, a.getAttribute('href'), a.target])")
        runs = tab.evaluate("[...document.querySelectorAll('#runbooks a.last-run')]"
                            ".map(a => [a.dataset.run, a.getAttribute('href'), a.target])")

    keep(tmp_path / "plugin-flow-page.png")
    assert SECRET not in dom
    assert f"Flow <code>{flow.name.replace('>', '&gt;')}</code>" in dom and 'class="state REPLICATING"' in dom
    assert [r.split()[0] for r in _rows(dom, "connectors")] == ["MirrorSourceConnector", "MirrorCheckpointConnector",
                                                                 "MirrorHeartbeatConnector"]
    assert all("RUNNING" in r for r in _rows(dom, "connectors"))
    assert {r.split()[0] for r in _rows(dom, "partitions")} >= {e2e.ops.topic}
    assert any(run_id in r and "admin" in r for r in _rows(dom, "events"))  # the flow's own audit events
    # Every runbook: its form for this flow (inside the plugin's frame); the dry run above: its run, in Airflow.
    assert forms == [[d, f"/mirrorbook/page/flows/{e2e.ops.alias}/B/runbooks/{d}", ""] for d in RUNBOOKS]
    assert [run_id, f"/dags/mm2_pause_resume/runs/{run_id}", "_top"] in runs
