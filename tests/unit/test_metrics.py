"""The Prometheus exposition over a real audit store (SQLite): samples written the way the health check writes them
(`FlowHealth.metrics`), reports and run results the way the runbooks record them — and nothing reachable: the
topology's Kafka and Connect addresses are closed ports, so a scrape that called either could not answer.
The shipped Grafana dashboard asks only for series a scrape serves."""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from mirrorbook.airflow.api.auth import same_secret
from mirrorbook.audit import AuditStore
from mirrorbook.kafka.types import TP
from mirrorbook.metrics import exposition, series_names
from mirrorbook.mm2.flows import ConnectorSummary, DetailedState, FlowState, FlowStatus, PartitionLag, Unreadable
from mirrorbook.runbooks.health import FlowHealth, GroupCheckpointHealth
from mirrorbook.runbooks.health.loss import TargetTopic, assess
from mirrorbook.topology import Topology

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 23, 10, 0, tzinfo=timezone.utc)
CLOSED = "127.0.0.1:9"  # discard port: nothing listens
TOPOLOGY = Topology.model_validate({
    "clusters": {"A": {"connection_id": "a", "bootstrap_servers": CLOSED},
                 "B": {"connection_id": "b", "bootstrap_servers": CLOSED}},
    "connect_clusters": {"A": {"connection_id": "ca", "url": f"http://{CLOSED}"},
                         "B": {"connection_id": "cb", "url": f"http://{CLOSED}"}},
    "flows": [{"source": "A", "target": "B", "connect_cluster": "B"}, {"source": "B", "target": "A", "connect_cluster": "A"}],
})


def _status(source_state: str, rows: list[tuple[str, int, int, int | None, int]]) -> FlowStatus:
    """Partitions as (topic, partition, high watermark, replicated offset, log start)."""
    conns = {"source": ConnectorSummary(name="A->B.MirrorSourceConnector", role="source",
                                        connector_class="MirrorSourceConnector", state=source_state,
                                        tasks_running=1 if source_state == "RUNNING" else 0),
             "checkpoint": ConnectorSummary(name="A->B.MirrorCheckpointConnector", role="checkpoint",
                                            connector_class="MirrorCheckpointConnector", state="RUNNING"),
             "heartbeat": ConnectorSummary(name="A->B.MirrorHeartbeatConnector", role="heartbeat",
                                           connector_class="MirrorHeartbeatConnector", state="RUNNING", tasks_running=1)}
    lag = [PartitionLag(topic=t, partition=p, remote_topic=f"A.{t}", high_watermark=h, replicated_offset=r,
                        lag=h - max((r if r is not None else -1) + 1, low), log_start=low) for t, p, h, r, low in rows]
    detail = DetailedState(enabled=True, ready=True, allConnectorsRunning=source_state == "RUNNING",
                           sourceTaskRunning=source_state == "RUNNING")
    return FlowStatus(flow="A->B", source="A", target="B", connect_cluster="B", state=detail.state(),
                      detailed_state=detail, connectors=conns, lag=lag)


def _record(audit: AuditStore, at: datetime, status: FlowStatus, previous: dict[str, Any] | None,
            targets: list[TargetTopic], **kw: Any) -> dict[str, Any]:
    """One health sample, written as run_health_check writes it."""
    fh = FlowHealth(flow="A->B", source="A", target="B", status=status, heartbeat_lookback_s=240.0,
                    loss=assess(status, targets, {t.topic for t in targets}, previous, at - timedelta(minutes=5), at),
                    **kw)
    metrics = fh.metrics(at)
    audit.record_metrics("A->B", at, metrics)
    return metrics


def _scrape(audit: AuditStore, accept: str | None = None) -> tuple[dict[str, dict[tuple, float]], str]:
    body, content_type = exposition(TOPOLOGY, audit, accept, now=lambda: NOW)
    out: dict[str, dict[tuple, float]] = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out, content_type


def _one(series: dict[tuple, float], **labels: str) -> float:
    [value] = [v for k, v in series.items() if dict(k).items() >= labels.items()]
    return value


@pytest.fixture
def audit(tmp_path: Path) -> AuditStore:
    return AuditStore(f"sqlite:///{tmp_path}/audit.db")


def test_flows_from_the_health_checks_latest_sample_and_runbooks_from_the_audit(audit: AuditStore):
    targets = [TargetTopic(topic="A.orders", topic_id="id1", partitions=[(0, 100), (0, 80)])]
    first = _record(audit, NOW - timedelta(minutes=5), _status("RUNNING", [("orders", 0, 100, 99, 0)]), None, targets)
    status = _status("RUNNING", [("orders", 0, 130, 9, 50), ("orders", 1, 80, 69, 0), ("heartbeats", 0, 900, 0, 0)])
    cps = [GroupCheckpointHealth(group="g1", age_s=12.5), GroupCheckpointHealth(group="g2", age_s=340.0),
           GroupCheckpointHealth(group="silent")]  # MM2 never checkpointed it: no age to show
    recreated = [TargetTopic(topic="A.orders", topic_id="id2", partitions=[(0, 3), (0, 0)])]
    _record(audit, NOW - timedelta(seconds=30), status, first, recreated, heartbeat_age_s=None, checkpoints=cps,
            violations=["flow A->B: DATA_LOSS …", "flow A->B: TARGET_RESET …"])
    audit.record_metrics("A->B", NOW - timedelta(seconds=2), {"source": "dr_drill", "state": "DISABLED",
                                                              "partitions": [], "total_lag": 0})  # passed over
    for rto, flow in ((40.0, "A->B"), (12.5, "A->B"), (None, "A->B"), (7.0, "B->A")):
        audit.record_artifact("failover-report", "r", "/x.json", {"rto_s": rto, "flow": flow, "mode": "planned"})
    audit.record_artifact("drill-report", "d", "/d.html", {"rto_s": 3.25, "flow": "A->B", "ok": True})
    for dag, result in (("mm2_failover", "success"), ("mm2_failover", "failed"), ("mm2_failover", "success"),
                        ("mm2_health_check", "failed"), ("mm2_offsets", "dry_run")):
        audit.record_run_result(dag, f"run-{dag}-{result}", result)

    got, content_type = _scrape(audit)
    assert content_type.startswith("text/plain; version=0.0.4")
    state = got["mirrorbook_flow_state"]
    assert _one(state, flow="A->B", state="REPLICATING") == 1.0 and _one(state, flow="A->B", state="DISABLED") == 0
    assert _one(state, flow="B->A", state="UNKNOWN") == 1.0  # never sampled
    lag = got["mirrorbook_flow_replication_lag_records"]
    assert lag == {(("flow", "A->B"), ("partition", "0"), ("topic", "orders")): 80.0,  # 130 - log start 50
                   (("flow", "A->B"), ("partition", "1"), ("topic", "orders")): 10.0}  # heartbeats left out
    assert _one(got["mirrorbook_flow_replication_lag_max_records"], flow="A->B") == 80.0
    assert math.isinf(_one(got["mirrorbook_flow_heartbeat_age_seconds"], flow="A->B"))
    assert {dict(k)["group"]: v for k, v in got["mirrorbook_flow_checkpoint_age_seconds"].items()} == {
        "g1": 12.5, "g2": 340.0}
    assert _one(got["mirrorbook_flow_checkpoint_age_max_seconds"], flow="A->B") == 340.0
    assert _one(got["mirrorbook_flow_connector_running"], role="source") == 1.0
    lost = {(dict(k)["cause"], dict(k)["partition"]): v for k, v in got["mirrorbook_flow_records_lost_total"].items()}
    assert lost == {("data_loss", "0"): 40.0, ("target_reset", "0"): 100.0, ("target_reset", "1"): 80.0}
    assert _one(got["mirrorbook_flow_violations"], flow="A->B") == 2.0
    assert got["mirrorbook_flow_sample_age_seconds"] == {(("flow", "A->B"),): 30.0}  # the health check's, not the drill's
    assert got["mirrorbook_runbook_last_rto_seconds"] == {
        (("dag", "dr_drill"), ("flow", "A->B")): 3.25, (("dag", "mm2_failover"), ("flow", "A->B")): 12.5,
        (("dag", "mm2_failover"), ("flow", "B->A")): 7.0}
    assert {(dict(k)["dag"], dict(k)["result"]): v for k, v in got["mirrorbook_runbook_runs_total"].items()} == {
        ("mm2_failover", "success"): 2.0, ("mm2_failover", "failed"): 1.0, ("mm2_health_check", "failed"): 1.0,
        ("mm2_offsets", "dry_run"): 1.0}


def test_an_empty_store_serves_every_family_and_openmetrics_on_request(audit: AuditStore):
    body, _ = exposition(TOPOLOGY, audit)
    typed = set(re.findall(r"^# TYPE (\S+) ", body.decode(), re.M))
    assert series_names() == typed
    om, content_type = exposition(TOPOLOGY, audit, "application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text") and om.decode().endswith("# EOF\n")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(accept=st.text(max_size=300))
def test_any_accept_header_gets_one_of_the_two_formats(audit: AuditStore, accept: str):
    body, content_type = exposition(TOPOLOGY, audit, accept)
    assert content_type.split(";")[0] in ("text/plain", "application/openmetrics-text") and b"mirrorbook_flow_state" in body


@settings(max_examples=200, deadline=None)
@given(given_token=st.text(max_size=80), expected=st.text(min_size=1, max_size=80))
def test_the_scrape_token_matches_only_itself(given_token: str, expected: str):
    assert same_secret(given_token, expected) is (given_token == expected)
    assert same_secret(expected, expected) and not same_secret(expected + "x", expected)


# -- the shipped dashboard -------------------------------------------------------------------------------

PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or",
                "unless", "inf", "nan"}


def promql_metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers outside strings, label matchers, ranges and
    grouping clauses that are not functions, aggregations, keywords or numbers."""
    expr = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'', '""', expr)
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    names = set()
    for m in re.finditer(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", expr):
        word, call = m.group(1), m.group(2)
        if not call and word.lower() not in PROMQL_WORDS:
            names.add(word)
    return names


def test_the_promql_reader_finds_metric_names_only():
    assert promql_metric_names('sum by (flow, cause) (increase(mirrorbook_flow_records_lost_total{flow=~"$flow"}[1h]))'
                               ) == {"mirrorbook_flow_records_lost_total"}
    assert promql_metric_names("topk(10, a_b{x='y z'}) / on (flow) group_left c + max_over_time(d[5m]) > 0 and e") \
        == {"a_b", "c", "d", "e"}


def _panels(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for p in panels:
        out.append(p)
        out += _panels(p.get("panels", []))  # collapsed rows hold theirs
    return out


def test_every_panel_of_the_grafana_dashboard_queries_series_a_scrape_serves(audit: AuditStore):
    dashboard = json.loads((REPO / "docs" / "grafana" / "mirrorbook.json").read_text())
    body, _ = exposition(TOPOLOGY, audit)
    served = {n + s for n in re.findall(r"^# TYPE (\S+) ", body.decode(), re.M) for s in ("", "_total")}
    panels = [p for p in _panels(dashboard["panels"]) if p.get("type") not in ("row", "text")]
    assert len(panels) >= 10
    asked: set[str] = set()
    for p in panels:
        exprs = [t["expr"] for t in p.get("targets", []) if t.get("expr")]
        assert exprs, f"panel {p.get('title')!r} has no query"
        for expr in exprs:
            names = promql_metric_names(expr)
            assert names and names <= served, (p["title"], expr, names - served)
            asked |= names
    for var in dashboard["templating"]["list"]:
        if var.get("type") == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", query)
            assert inner and promql_metric_names(inner.group(1)) <= served, query
    # Every series the issue asks for is on the dashboard.
    assert {"mirrorbook_flow_state", "mirrorbook_flow_replication_lag_records",
            "mirrorbook_flow_heartbeat_age_seconds", "mirrorbook_flow_checkpoint_age_seconds",
            "mirrorbook_flow_connector_running", "mirrorbook_flow_records_lost_total",
            "mirrorbook_runbook_last_rto_seconds", "mirrorbook_runbook_runs_total"} <= asked


def test_a_flow_whose_connectors_could_not_be_read_is_unknown_not_disabled(audit: AuditStore):
    """A health sample of an UNKNOWN flow (Connect refused mirrorbook): the state series says UNKNOWN, once — the
    label that also stands for "never sampled" — and DISABLED is 0."""
    status = _status("RUNNING", []).model_copy(update={
        "state": FlowState.UNKNOWN,
        "detailed_state": DetailedState(enabled=None, ready=None, allConnectorsRunning=None, sourceTaskRunning=None),
        "unreadable": Unreadable(cause="Connect cluster B (…) refused the credentials of basic-auth user 'x'")})
    _record(audit, NOW - timedelta(seconds=5), status, None, [])
    state = _scrape(audit)[0]["mirrorbook_flow_state"]
    assert {dict(k)["state"]: v for k, v in state.items() if dict(k)["flow"] == "A->B"} == {
        "DISABLED": 0.0, "REPLICATING": 0.0, "CONCERNING": 0.0, "NOT_REPLICATING": 0.0, "UNKNOWN": 1.0}
