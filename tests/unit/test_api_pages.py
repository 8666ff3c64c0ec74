"""The plugin's app without a stack: every route guarded, the pages' rows and links, the runbook forms
(fields, what a submission becomes, where it may come from), and HTML that neither executes nor grows with
what it is given."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi.routing import APIRoute
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.requests import Request

from mirrorbook.airflow.api import auth, runbook_form, views
from mirrorbook.airflow.api.app import create_app
from mirrorbook.airflow.api.links import RUNBOOKS, runbook_links, ui_base
from mirrorbook.airflow.api.page import render
from mirrorbook.airflow.forms import form
from mirrorbook.audit import AuditStore
from mirrorbook.errors import Refused
from mirrorbook.mm2.flows import ConnectorSummary, DetailedState, FlowState, FlowStatus, PartitionLag
from mirrorbook.runbooks.params import InvalidParams, parse
from mirrorbook.runbooks.registry import model_of
from mirrorbook.topology import Topology

NOW = datetime(2026, 11, 23, 10, 0, tzinfo=timezone.utc)
HOSTILE = '<script>alert("x")</script>'
FORM = "/page/flows/{source}/{target}/runbooks/{dag_id}"
TOPOLOGY = Topology.model_validate({
    "clusters": {"A": {"connection_id": "a", "bootstrap_servers": "a:9092"},
                 "B": {"connection_id": "b", "bootstrap_servers": "b:9092"},
                 "E1": {"connection_id": "e1", "bootstrap_servers": "a:9092"}},
    "connect_clusters": {"A": {"connection_id": "ca", "url": "http://a:8083"},
                         "B": {"connection_id": "cb", "url": "http://b:8083"}},
    "flows": [{"source": s, "target": t, "connect_cluster": t if t == "B" else "A"}
              for s, t in (("A", "B"), ("B", "A"), ("E1", "B"), ("B", "E1"))],
})


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
    assert {"/openapi.json", "/docs", "/redoc", "/page", "/page/flows/{source}/{target}", FORM} <= \
        {r.path for r in routes}
    for route in routes:
        guards = _dependencies(route.dependant) & set(auth.GUARDS)
        assert len(guards) == 1, (route.path, route.methods, guards)
    writes = {(r.path, m) for r in routes for m in r.methods if m != "GET"}
    # The form's POST triggers nothing itself: it calls Airflow's REST API with the caller's own token, and
    # Airflow decides whether they may trigger the runbook (the e2e test shows a viewer refused).
    assert writes == {("/{source}/{target}/pause", "PUT"), ("/{source}/{target}/resume", "PUT"),
                      ("/{source}/{target}/offsets", "PATCH"), ("/{source}/{target}/offsets", "DELETE"),
                      (FORM, "POST")}
    for route in routes:
        if route.methods & {"PUT", "PATCH", "DELETE"}:
            assert auth.reader not in _dependencies(route.dependant), route.path  # acting needs more than reading


def test_runbook_links_open_the_flows_form_and_show_its_latest_run():
    flow = SimpleNamespace(source="E1", target="B")
    links = {r.dag_id: r for r in runbook_links("/airflow/mirrorbook", flow,
                                                {"mm2_failover": "manual__2026-11-23T10:00:00+00:00"})}
    assert list(links) == list(RUNBOOKS)
    for dag_id, link in links.items():  # every runbook: its form, this flow in the address
        assert link.href == f"/airflow/mirrorbook/page/flows/E1/B/runbooks/{dag_id}"
    assert links["mm2_failover"].run_href == \
        "/airflow/dags/mm2_failover/runs/manual__2026-11-23T10%3A00%3A00%2B00%3A00"
    assert links["dr_drill"].run_href is None and links["dr_drill"].run_id is None
    assert ui_base("/mirrorbook") == "" and ui_base("") == ""


def test_the_latest_run_of_each_runbook_on_the_flow_comes_from_the_audit(tmp_path: Path):
    audit = AuditStore(f"sqlite:///{tmp_path}/a.db")
    for run, dag, flow in [("r1", "mm2_failover", "A->B"), ("r2", "mm2_failover", "A->B"),
                           ("r3", "mm2_offsets", "B->A"),
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
    row = views.flow_row(status, None, runbook_links("/mirrorbook", status, {}), "/mirrorbook", NOW)
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
    assert 'href="/mirrorbook/page/flows/' in plain and '/runbooks/mm2_failover"' in plain
    assert "Lag (records)" in plain and "overflow-wrap: anywhere" in plain and "table-layout: fixed" in plain


def test_the_flow_page_lists_the_worst_partitions_first_and_says_how_many_it_left_out():
    status = _status(partitions=views.MAX_PARTITIONS + 50)
    rows, hidden = views.partition_rows(status)
    assert len(rows) == views.MAX_PARTITIONS and hidden == 50
    assert [r.lag for r in rows[:3]] == [249, 248, 247]
    row = views.flow_row(status, None, runbook_links("/mirrorbook", status, {"mm2_offsets": "r1"}), "/mirrorbook", NOW)
    html = render("flow.html", "admin", "/mirrorbook", flow=row, partitions=rows, hidden_partitions=hidden,
                  checkpoints=[], hidden_groups=0, events=[])
    assert "… and 50 more partition(s) with less lag" in html
    assert html.count('<tr><td><code>t') == views.MAX_PARTITIONS
    assert 'href="/mirrorbook/page/flows/A/B/runbooks/mm2_failover"' in html
    # Airflow's own pages open in the whole window, out of the plugin's iframe.
    assert 'href="/dags/mm2_offsets/runs/r1" target="_top"' in html


# -- the runbook forms ---------------------------------------------------------------------------------

def _sent(fields: list[runbook_form.FormField]) -> dict[str, str]:
    """What a browser posts for `fields` as shown: every value, and a checkbox only when it is checked."""
    return {**{f.name: f.value for f in fields if f.widget != "checkbox"},
            **{f.name: "on" for f in fields if f.widget == "checkbox" and f.checked}}


@pytest.mark.parametrize("dag_id", list(RUNBOOKS))
def test_a_runbook_form_shows_the_dag_forms_fields_and_posts_its_defaults_for_the_flow(dag_id):
    model = model_of(dag_id)
    params = form(model, TOPOLOGY)
    fields = runbook_form.form_fields(model)
    assert ["flow", *(f.name for f in fields)] == list(params) == list(model.model_fields)
    for f in fields:  # the same titles, descriptions and choices as Airflow's own form for the DAG
        assert (f.title, f.description) == (params[f.name].schema["title"], params[f.name].description or "")
        assert [v for v, _ in f.options] == params[f.name].schema.get("enum", [])
    conf = runbook_form.conf_from_form(model, "E1->B", _sent(fields))
    # Untouched, the form is the DAG's defaults for this flow — not the topology's first flow.
    assert conf == {**{n: p.value for n, p in params.items()}, "flow": "E1->B"}
    parse(model, conf, TOPOLOGY)


def _field_error(model, fields: dict[str, str]) -> str:
    with pytest.raises(Refused) as refused:
        parse(model, runbook_form.conf_from_form(model, "E1->B", fields), TOPOLOGY)
    return refused.value.message


def test_what_a_form_sends_is_refused_by_name_never_defaulted_or_ignored():
    model = model_of("mm2_failover")
    fields = _sent(runbook_form.form_fields(model))
    conf = runbook_form.conf_from_form(model, "E1->B", {**fields, "dry_run": "on", "groups": " ", "max_lag": "7"})
    assert (conf["dry_run"], conf["groups"], conf["max_lag"], conf["allow_skips"]) == (True, None, 7, False)
    assert "Invalid parameter `drain_timeout`" in _field_error(model, {**fields, "drain_timeout": ""})
    assert "Invalid parameter `drain_timeout`" in _field_error(model, {**fields, "drain_timeout": "ten"})
    assert "Invalid parameter `drain_timeout`" in _field_error(model, {**fields, "drain_timeout": "-1"})
    assert "did you mean 'dry_run'?" in _field_error(model, {**fields, "dryrun": "on"})
    assert "Invalid parameter `mode`" in _field_error(model, {**fields, "mode": "sideways"})
    with pytest.raises(InvalidParams, match="`flow` is fixed by the form's address"):
        runbook_form.conf_from_form(model, "E1->B", {**fields, "flow": "A->B"})
    offsets = model_of("mm2_offsets")
    sent = _sent(runbook_form.form_fields(offsets))
    assert "not valid JSON" in _field_error(offsets, {**sent, "action": "alter", "offsets": '{"offsets": [ {'})
    conf = runbook_form.conf_from_form(offsets, "E1->B", {**sent, "action": "reset", "stop_first": "on"})
    assert (conf["action"], conf["stop_first"], conf["offsets"], conf["dry_run"]) == ("reset", True, None, False)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_form_submission_is_a_run_or_a_refusal_never_a_crash(data):
    dag_id = data.draw(st.sampled_from(list(RUNBOOKS)))
    model = model_of(dag_id)
    names = st.sampled_from([*model.model_fields, "dryrun", "flow", "x" * 300])
    values = st.one_of(st.text(max_size=40), st.sampled_from(["on", "", "-1", "1e400", "9" * 5000, "{}", "[]",
                                                              '{"offsets": []}', "null", "auto"]))
    fields = data.draw(st.dictionaries(names, values, max_size=12))
    try:
        parse(model, runbook_form.conf_from_form(model, "E1->B", fields), TOPOLOGY)
    except Refused as exc:
        assert len(exc.message) < 2_000


def _form_page(dag_id: str, flow: str = "E1->B", **kw) -> str:
    spec = SimpleNamespace(name=flow, source=flow.split("->")[0], target="B")
    caller = SimpleNamespace(name="admin")
    response = runbook_form._page(caller, spec, dag_id, model_of(dag_id), "/mirrorbook",
                                  "mirrorbook__20261123T100000Z__0123abcd", **kw)
    return response.body.decode()


def test_the_form_page_fixes_the_flow_puts_dry_run_first_and_says_what_the_fields_do():
    html = _form_page("mm2_failover")
    names = re.findall(r'<(?:input|select|textarea)[^>]* name="([^"]+)"', html)
    assert names[:2] == ["dry_run", "mode"] and "flow" not in names and names[-1] == "run_id"
    assert '<td id="flow"><code' in html and "E1-&gt;B</code>" in html
    assert 'action="/mirrorbook/page/flows/E1/B/runbooks/mm2_failover" target="_top"' in html
    assert "auto: precise when planned, mm2 when unplanned" in html
    assert 'http-equiv="refresh"' not in html  # nothing reloads a form being filled in
    offsets = _form_page("mm2_offsets")
    assert "a reset re-copies every retained record from the start (duplicates on the target)" in offsets
    assert '<option value="source" selected>MirrorSourceConnector</option>' in offsets


def test_a_refused_form_keeps_what_was_typed_escaped_and_bounded():
    html = _form_page("mm2_offsets", flow=HOSTILE + "->B", submitted={"offsets": HOSTILE, "stop_first": "on"},
                      error=HOSTILE * 10_000)
    assert "<script" not in html and "&lt;script&gt;" in html
    assert re.search(r'<textarea [^>]*name="offsets"[^>]*>&lt;script&gt;', html)
    assert re.search(r'name="stop_first" checked', html) and not re.search(r'name="dry_run" checked', html)
    assert len(html) < len(_form_page("mm2_offsets")) + 6_000 and re.search(r"\(\d+ chars\)", html)


def _request(headers: dict[str, str], host: str = "airflow.example:8080") -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in {"host": host, **headers}.items()]
    return Request({"type": "http", "method": "POST", "scheme": "http", "path": "/", "root_path": "/mirrorbook",
                    "headers": raw, "server": ("10.0.0.7", 8080), "query_string": b""})


def test_a_form_post_from_another_site_is_refused(monkeypatch):
    monkeypatch.delenv("AIRFLOW__API__BASE_URL", raising=False)
    assert runbook_form.cross_site(_request({"sec-fetch-site": "same-origin"})) is None
    assert runbook_form.cross_site(_request({})) is None  # not a browser: it carries its own credentials
    assert runbook_form.cross_site(_request({"origin": "http://airflow.example:8080"})) is None
    for headers in ({"sec-fetch-site": "cross-site"}, {"sec-fetch-site": "same-site"},
                    {"sec-fetch-site": "cross-site", "origin": "http://airflow.example:8080"},
                    {"origin": "http://evil.example"}, {"origin": "null"}):
        assert runbook_form.cross_site(_request(headers)), headers
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.corp.example/airflow")
    assert runbook_form.cross_site(_request({"origin": "https://airflow.corp.example"})) is None


def test_the_trigger_goes_to_airflows_declared_address_never_to_the_requests_host(monkeypatch):
    monkeypatch.delenv("AIRFLOW__API__BASE_URL", raising=False)
    assert runbook_form.airflow_api_url(_request({}, host="evil.example"), "/mirrorbook") == "http://10.0.0.7:8080"
    assert runbook_form.airflow_api_url(_request({}), "/airflow/mirrorbook") == "http://10.0.0.7:8080/airflow"
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.corp.example/airflow/")
    assert runbook_form.airflow_api_url(_request({}, host="evil.example"), "/mirrorbook") == \
        "https://airflow.corp.example/airflow"
