"""KIP-1144 flow states observed on the real stack, and per-partition replication lag."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mirrorbook.clients import Clients, TopologyResolver
from mirrorbook.connect import ConnectClient
from mirrorbook.connect.wait import wait_for
from mirrorbook.devstack.workload import produce
from mirrorbook.mm2.flows import FlowState, flow_status
from tests.helpers import eventually

pytestmark = pytest.mark.integration


def _own_lag(status, scratch) -> dict[int, int]:
    return {tp.partition: lag for tp, lag in status.lag_by_partition().items() if tp.topic == scratch.topic}


def _status(scratch):
    return flow_status(Clients(TopologyResolver(scratch.topology)), scratch.flow)


def test_replicating_when_healthy_with_lag_draining_to_zero(scratch_flow, bootstrap_a):
    produce(bootstrap_a, [scratch_flow.topic], 50)

    def drained():
        s = _status(scratch_flow)
        return s if s.state == FlowState.REPLICATING and _own_lag(s, scratch_flow) == {0: 0, 1: 0} else None

    s = eventually(drained, timeout=60, what="REPLICATING with zero lag")
    assert s.detailed_state.model_dump(by_alias=True) == {
        "enabled": True, "ready": True, "allConnectorsRunning": True, "sourceTaskRunning": True}
    own = [p for p in s.lag if p.topic == scratch_flow.topic]
    assert all(p.replicated_offset == 49 and p.high_watermark == 50 for p in own) and len(own) == 2
    # MM2 always mirrors heartbeats topics, whatever `topics` says: they are part of the flow's lag.
    assert "heartbeats" in {p.topic for p in s.lag}
    assert scratch_flow.remote in s.replicated_topics
    body = s.kip1144_detail()
    assert body["MirrorSourceConnector"] == "RUNNING" and body["MirrorSourceConnectorTasksRunning"] == 1
    assert body["links"]["pause [PUT]"] == f"/{scratch_flow.alias}/B/pause"


def test_lag_is_hw_minus_1_minus_connector_offset_while_paused(scratch_flow, bootstrap_a, connect_b_url):
    name = scratch_flow.flow.connector("source")
    produce(bootstrap_a, [scratch_flow.topic], 20)
    eventually(lambda: _own_lag(_status(scratch_flow), scratch_flow) == {0: 0, 1: 0}, what="drained")
    with ConnectClient(connect_b_url) as c:
        c.pause(name)
        wait_for(c, name, "PAUSED", timeout_s=30)
        produce(bootstrap_a, [scratch_flow.topic], 30)
        s = _status(scratch_flow)
        assert _own_lag(s, scratch_flow) == {0: 30, 1: 30}
        c.resume(name)


def test_states_not_replicating_concerning_disabled(scratch_flow, connect_b_url):
    f = scratch_flow.flow
    with ConnectClient(connect_b_url) as c:
        # Every connector paused: enabled, but no source task runs.
        for _, name in f.connectors.items():
            c.pause(name)
        for _, name in f.connectors.items():
            wait_for(c, name, "PAUSED", timeout_s=30)
        s = _status(scratch_flow)
        assert s.state == FlowState.NOT_REPLICATING
        assert s.detailed_state.enabled and not s.detailed_state.source_task_running

        # Source running again but the checkpoint connector down: CONCERNING.
        c.resume(f.connector("source"))
        c.resume(f.connector("heartbeat"))
        c.stop(f.connector("checkpoint"))
        wait_for(c, f.connector("source"), "RUNNING", timeout_s=30, min_tasks=1)
        wait_for(c, f.connector("checkpoint"), "STOPPED", timeout_s=30)
        s = _status(scratch_flow)
        assert s.state == FlowState.CONCERNING
        assert s.detailed_state.source_task_running and not s.detailed_state.all_connectors_running

        # Source connector STOPPED (what failover does): the flow is switched off -> DISABLED.
        c.stop(f.connector("source"))
        wait_for(c, f.connector("source"), "STOPPED", timeout_s=30)
        s = _status(scratch_flow)
        assert s.state == FlowState.DISABLED and not s.detailed_state.enabled


def test_missing_connectors_and_unreachable_connect(scratch_flow, devstack):
    devstack.remove_flow(scratch_flow.flow)
    s = _status(scratch_flow)
    assert s.state == FlowState.DISABLED and not s.detailed_state.ready
    assert {c.state for c in s.connectors.values()} == {"MISSING"}

    # Connect not answering: nothing is known of the connectors — UNKNOWN, its flags null, never DISABLED — and
    # the first thing said of the flow is why.
    topo = scratch_flow.topology.model_copy(deep=True)
    topo.connect_clusters["B"].url = "http://localhost:9"
    s = flow_status(Clients(TopologyResolver(topo)), topo.flow(scratch_flow.flow.name))
    assert s.state == FlowState.UNKNOWN and set(s.detailed_state.model_dump().values()) == {None}
    assert {c.state for c in s.connectors.values()} == {"UNKNOWN"} and s.lag == [] and not s.unreadable.refused
    assert s.errors[0] == s.unreadable.cause and s.unreadable.cause.startswith(
        "Connect cluster B (http://localhost:9): GET /connectors?expand=status&expand=info gave up after ")
    assert s.describe().startswith(f"{s.unreadable.cause}; so flow {s.flow} is UNKNOWN: its connectors could not "
                                   "be read")


def test_flows_cli(devstack):
    out = subprocess.run([sys.executable, "-m", "mirrorbook.cli", "flows", "--topology",
                          str(devstack.topology_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "A->B" in out.stdout and "B->A" in out.stdout and "REPLICATING" in out.stdout
