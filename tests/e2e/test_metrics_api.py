"""`/mirrorbook/metrics` served by a real Airflow API server: Airflow's auth or the scrape token (and nothing else),
figures from the health check's sample in the server's audit store, and not one call to Connect — Connect answers
every request with a 503 meanwhile. docs/operating.md's scrape command runs as written."""

from __future__ import annotations

import re
import subprocess
import uuid
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mirrorbook.clients import Clients, FileResolver
from mirrorbook.connections import load_connections
from mirrorbook.devstack.stack import DevStack
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.core.engine import RunInfo, Runbook
from mirrorbook.runbooks.health import HealthParams, run_health_check
from mirrorbook.runbooks.user_topics import record_kind
from tests import docs
from tests.e2e.conftest import E2E, METRICS_TOKEN
from tests.faultproxy import Fault

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.integration]
METRICS = "/mirrorbook/metrics"
SCRAPE_COMMAND = ("tests/e2e/test_metrics_api.py::"
                  "test_metrics_need_airflows_auth_or_the_scrape_token_and_never_ask_connect")  # docs/operating.md


def _samples(text: str) -> dict[str, dict[tuple, float]]:
    out: dict[str, dict[tuple, float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_metrics_need_airflows_auth_or_the_scrape_token_and_never_ask_connect(e2e: E2E):
    # The stack's own A->B: the scratch flows' samples are other tests' (the page test keeps one of its own).
    flow = e2e.topology.flow("A->B")
    params = HealthParams(flows=re.escape(flow.name), readiness=False)
    rb = Runbook(RunInfo(run_id=f"e2e-health-{uuid.uuid4().hex[:6]}", dag_id="mm2_health_check"), e2e.audit)
    # The secured stack's clients, as the health check's task gets them: its connections (SASL_SSL, HTTPS).
    clients = Clients(FileResolver(e2e.topology, load_connections(DevStack(Path(e2e.stack.run_dir)).connections_path)))
    report = run_health_check(clients, e2e.topology, [flow], params, e2e.audit, rb)
    [fh] = report.flows

    down = Fault(503, count=1_000_000, message="Connect is down")  # every request the proxy gets, from now on
    e2e.proxy.faults.append(down)
    before = len(e2e.proxy.calls())
    try:
        with e2e.client(user=None) as anon:
            assert anon.get(METRICS).status_code == 401
            wrong = anon.get(METRICS, headers={"Authorization": f"Bearer {METRICS_TOKEN}x"})
            assert wrong.status_code == 403  # not the token, and no Airflow JWT either
            scraped = anon.get(METRICS, headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        with e2e.client(user="ops") as viewer:  # read access to DAG runs is enough, as for reading flows
            as_viewer = viewer.get(METRICS)
        assert e2e.proxy.calls()[before:] == []  # not one request reached Connect
    finally:
        e2e.proxy.faults.remove(down)

    assert scraped.status_code == 200 and as_viewer.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain; version=0.0.4")
    got = _samples(scraped.text)
    assert _samples(as_viewer.text).keys() == got.keys()
    state = {dict(k)["state"]: v for k, v in got["mirrorbook_flow_state"].items() if dict(k)["flow"] == flow.name}
    assert state[fh.status.state.value] == 1.0 and sum(state.values()) == 1.0
    running = {dict(k)["role"]: v for k, v in got["mirrorbook_flow_connector_running"].items()
               if dict(k)["flow"] == flow.name}
    assert running == {r: float(c.state == "RUNNING") for r, c in fh.status.connectors.items()}
    lag = {(dict(k)["topic"], dict(k)["partition"]): v
           for k, v in got["mirrorbook_flow_replication_lag_records"].items()
           if dict(k)["flow"] == flow.name}
    policy = ReplicationPolicy.for_flow(flow)
    assert lag == {(p.topic, str(p.partition)): float(p.lag) for p in fh.status.lag
                   if record_kind(policy, p.topic) is None} and lag
    runs = {(dict(k)["dag"], dict(k)["result"]): v for k, v in got.get("mirrorbook_runbook_runs_total", {}).items()}
    assert runs == {k: float(n) for k, n in e2e.audit.run_result_counts().items()}

    # docs/operating.md's scrape command, as written (the server's address put in).
    block = docs.block(SCRAPE_COMMAND)
    assert METRICS in block.text
    script = block.text.replace("http://localhost:8080", e2e.url)
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "MIRRORBOOK_METRICS_TOKEN": METRICS_TOKEN})
    assert out.returncode == 0, out.stderr
    assert f'mirrorbook_flow_state{{flow="{flow.name}",source="{flow.source}",state="{fh.status.state.value}",' \
           f'target="{flow.target}"}} 1.0' in out.stdout
