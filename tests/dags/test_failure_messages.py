"""A failed runbook task names the place and the state (issue #16 item 4), on the real session devstack.

Connect B is reached through a fault proxy, as an operator's Airflow connection would reach it: with basic
auth (which must never be shown) and a short retry deadline. After the first PUT, Connect answers a
409/500 storm: the task's error must name the Connect cluster (alias and URL), the connector by its real
name, the deadline, the attempts and the last error, then what the task itself had already changed (issue #29), then
what the run did so far and changed, each connector of the flow as it stands now, and what a re-run will do — and a
re-run must then do just that.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Callable
from urllib.parse import quote

import pytest

from mirrorbook.connect import ConnectClient
from mirrorbook.devstack.workload import GroupSpec, park_groups, produce
from tests.faultproxy import Fault, FaultProxy
from tests.helpers import wait_mirrored

pytestmark = [pytest.mark.airflow, pytest.mark.integration]
DEADLINE_S = 2
PASSWORD = "s3cr3t-pw"


def storm(connector_path: str) -> list[Fault]:
    """Two 409s (a rebalance), then 500s for as long as the test runs, on PUTs matching `connector_path`."""
    return [Fault(409, count=2, method="PUT", path=connector_path, message="rebalance in progress"),
            Fault(500, count=10_000, method="PUT", path=connector_path, message="storm")]


def through(proxy: FaultProxy, flow: Any, topology: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """The flow's Connect cluster, as its Airflow connection: through the proxy, basic auth, short deadline.
    Returns how to put the session's connection back."""
    var = f"AIRFLOW_CONN_{topology.connect_clusters[flow.connect_cluster].connection_id.upper()}"
    before = os.environ[var]
    host, port = proxy.url.removeprefix("http://").rsplit(":", 1)
    monkeypatch.setenv(var, json.dumps({
        "conn_type": "kafka_connect", "host": host, "port": int(port), "login": "ops", "password": PASSWORD,
        "extra": {"retry_deadline": DEADLINE_S}}))
    return lambda: monkeypatch.setenv(var, before)


def states(url: str, flow: Any) -> dict[str, str]:
    with ConnectClient(url) as c:
        return {role: c.status(name).connector.state for role, name in flow.connectors.items()}


def test_a_storm_after_the_first_pause_names_the_place_the_half_paused_flow_and_what_a_rerun_does(
        run_dag, dag_scratch, connect_b_url, monkeypatch, failures):
    flow = dag_scratch.flow
    errors = failures("mm2_pause_resume")
    checkpoint = flow.connector("checkpoint")
    with FaultProxy(connect_b_url, storm("MirrorCheckpointConnector/pause")) as proxy:
        restore = through(proxy, flow, dag_scratch.topology, monkeypatch)
        run = run_dag("mm2_pause_resume", {"flow": flow.name, "action": "pause"})
    assert run.state == "failed" and run.task_states()["apply"] == "failed"
    text = errors["apply"]
    assert states(connect_b_url, flow) == {"source": "PAUSED", "checkpoint": "RUNNING", "heartbeat": "RUNNING"}
    m = re.match(re.escape(f"Connect cluster B ({proxy.url}): PUT pause of connector {checkpoint} gave up after ")
                 + r"(\d+)" + re.escape(f" attempts within {DEADLINE_S}s; last error: [500] storm"), text)
    assert m, text
    assert int(m.group(1)) >= 2
    assert "%3E" not in text and PASSWORD not in text and "ops:" not in text
    lines = text.splitlines()
    # Issue #29 item 3: the task's own error, right after its first line, says what the task had already changed.
    assert lines[1] == f"  before it failed, it had already changed: {flow.name} source: pause accepted by Connect"
    assert f"  already changed: {flow.name} source: pause accepted by Connect" in lines
    assert f"  may have changed (the call failed after it was sent): {flow.name} checkpoint: pause asked" in lines
    [now] = [ln for ln in lines if ln.startswith(f"  flow {flow.name} now: ")]
    assert now.startswith(f"  flow {flow.name} now: source PAUSED, checkpoint RUNNING, heartbeat RUNNING (read at ")
    assert now.endswith(f"from Connect cluster B ({proxy.url}))")
    assert lines[-1] == (f"  a re-run of this task (clear it) will: on {flow.name}, pause checkpoint; then pause "
                         "heartbeat; and leave source (PAUSED already)")

    # The re-run does what it said: the two calls, not the third.
    restore()
    cleared = run_dag("mm2_pause_resume", {"flow": flow.name, "action": "pause"}, rerun_of=run)
    assert cleared.state == "success", cleared.failure()
    assert states(connect_b_url, flow) == {"source": "PAUSED", "checkpoint": "PAUSED", "heartbeat": "PAUSED"}
    pauses = [e for e in cleared.events(kind="call") if e.action == "connector.pause" and e.result == "ok"]
    assert sorted(e.request.path.rsplit("/", 2)[-2].rsplit(".", 1)[-1] for e in pauses) == \
        ["MirrorCheckpointConnector", "MirrorHeartbeatConnector", "MirrorSourceConnector"]  # the first run's + 2


def test_a_failover_whose_stop_fails_says_the_offsets_are_written_while_the_flow_still_runs(
        run_dag, dag_scratch, connect_b_url, admin_a, admin_b, monkeypatch, failures):
    flow, topic = dag_scratch.flow, dag_scratch.topic
    errors = failures("mm2_failover")
    produce(admin_a.bootstrap, [topic], 20)
    group = f"{dag_scratch.alias.lower()}-g"
    park_groups(admin_a, [topic], [GroupSpec(name=group, position="end-3")])
    wait_mirrored(admin_a, admin_b, topic, dag_scratch.remote)
    conf = {"flow": flow.name, "groups": re.escape(group), "drain_timeout": 60, "max_lag": 0,
            "start_reverse_flow": False}
    with FaultProxy(connect_b_url, storm("MirrorCheckpointConnector/stop")) as proxy:
        through(proxy, flow, dag_scratch.topology, monkeypatch)
        run = run_dag("mm2_failover", conf)
    assert run.state == "failed" and run.task_states()["stop_flow"] == "failed"
    assert admin_b.committed_offsets([group])[group]  # written on B ...
    # The source's stop came first (the cutover waits for it), the others' side by side: the storm on the
    # checkpoint's held back neither, and the flow never counted as stopped (no RTO below).
    assert states(connect_b_url, flow) == {"source": "STOPPED", "checkpoint": "RUNNING", "heartbeat": "STOPPED"}
    source = re.escape(quote(flow.connector("source"), safe=""))
    [first] = proxy.calls("PUT", f"/connectors/{source}/stop$")
    then = [c.arrived for c in proxy.calls("PUT", "/stop$") if c is not first]
    awaited = [c.arrived for c in proxy.calls("GET", f"/connectors/{source}/status$") if c.arrived > first.arrived]
    assert then and awaited and min(then) > min(awaited), "the others were asked before the source's stop was awaited"
    text = errors["stop_flow"]
    assert text.startswith(f"Connect cluster B ({proxy.url}): PUT stop of connector {flow.connector('checkpoint')} "
                           "gave up after ")
    lines = text.splitlines()
    stopped = {f"{flow.name} source: stop accepted by Connect", f"{flow.name} heartbeat: stop accepted by Connect"}
    first = "  before it failed, it had already changed: "
    assert lines[1].startswith(first) and set(lines[1].removeprefix(first).split(", ")) == stopped, lines[1]
    [so_far] = [ln for ln in lines if ln.startswith("  already changed: ")]
    assert so_far.removeprefix("  already changed: ").split(", ")[0] == "offsets of 1 group(s) written on B"
    assert set(so_far.removeprefix("  already changed: ").split(", ")[1:]) == stopped, so_far
    assert f"  may have changed (the call failed after it was sent): {flow.name} checkpoint: stop asked" in lines
    assert any(ln.startswith(f"  flow {flow.name} now: source STOPPED, checkpoint RUNNING, heartbeat STOPPED (read at ")
               for ln in lines), text
    assert lines[-1] == (f"  a re-run of this task (clear it) will: on {flow.name}, stop checkpoint; and leave source "
                         "(STOPPED already), heartbeat (STOPPED already)")
    report = run.report()
    assert report["rto_s"] is None
    assert {"failover.precheck", "failover.translate", "failover.write_offsets", "failover.verify",
            "connector.stop (source)"} <= set(report["so_far"]["completed"])
    assert report["so_far"]["changed"][0] == "offsets of 1 group(s) written on B"
    assert stopped <= set(report["so_far"]["changed"][1:])
