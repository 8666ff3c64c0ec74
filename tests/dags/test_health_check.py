"""mm2_health_check end to end: real Airflow (dag.test), real Connect + MM2 on the session devstack,
each test on a scratch flow of its own (it stops or breaks only that flow), alerts received by a real
local webhook."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, Callable, Iterator

import pytest

from mirrorbook.audit import AuditStore
from mirrorbook.clients import Clients, FileResolver, TopologyResolver
from mirrorbook.connections import load_connections
from mirrorbook.connect import ConnectClient
from mirrorbook.connect.wait import wait_for
from mirrorbook.devstack.stack import DevStack
from mirrorbook.devstack.workload import GroupSpec, load, produce
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.flows import flow_status
from mirrorbook.mm2.remote_cluster_utils import translate_offsets
from mirrorbook.topology import Topology
from tests.conftest import ScratchFlow
from tests.dags.conftest import Webhook
from tests.helpers import eventually, set_topic_config, wait_mirrored

pytestmark = [pytest.mark.airflow, pytest.mark.integration]


def _scratch(stack: DevStack, use_topology, clients_of: Callable[[Topology, str], Clients],
             transactions: int = 0) -> Iterator[ScratchFlow]:
    """A scratch flow of this test, replicating one topic that already holds records and a parked group
    (so MM2 checkpoints it at once). The topic is named `A.<…>`: the session's B->A flow sees its copy on
    B (`<alias>.A.<…>`) as a cycle and never replicates it, so whatever a test breaks on that copy stays
    inside the test (B->A copies topic configs to A and would fail on them too). With `transactions`, the
    records are written in that many transactions of 20 each, every second one aborted (MM2 copies those too)."""
    state = stack.require()
    admin_a, admin_b = KafkaAdmin(state.kafka_config("A")), KafkaAdmin(state.kafka_config("B"))
    alias = "H" + uuid.uuid4().hex[:6].upper()
    topic = f"A.hc-{uuid.uuid4().hex[:8]}"
    load(state.kafka_config("A"), [topic], 2, 20, [GroupSpec(name=f"{topic}-g", position="end-3")],
         transactions=transactions, abort_every=2)
    flow = ScratchFlow(stack.alias_flow(alias, topics=re.escape(topic)), alias, topic, state.connect_settings("B"))
    use_topology(flow.topology)
    if transactions:
        copies = {TP(flow.remote, p): 20 * transactions for p in range(2)}  # records, aborted ones included
        eventually(lambda: flow.remote in admin_b.topics() and admin_b.high_watermarks(list(copies)) == copies,
                   what=f"{topic} copied to B")
    else:
        wait_mirrored(admin_a, admin_b, topic, flow.remote)
    clients = clients_of(flow.topology, alias)
    eventually(lambda: flow_status(clients, flow.flow).state.value == "REPLICATING", timeout=60,
               what=f"{flow.flow.name} REPLICATING")
    yield flow
    stack.remove_flow(flow.flow)


@pytest.fixture
def scratch(devstack: DevStack, use_topology) -> Iterator[ScratchFlow]:
    yield from _scratch(devstack, use_topology, lambda topo, _alias: Clients(TopologyResolver(topo)))


@pytest.fixture
def secure_health_scratch(secured: DevStack, use_topology, monkeypatch: pytest.MonkeyPatch) -> Iterator[ScratchFlow]:
    """`scratch` on the secured stack: every id of its topology (the scratch alias too) through the secured
    connections, as the DAGs resolve them."""
    def clients_of(topo: Topology, alias: str) -> Clients:
        spec = json.loads(secured.connections_path.read_text())["mirrorbook_kafka_a"]
        monkeypatch.setenv(f"AIRFLOW_CONN_MIRRORBOOK_KAFKA_{alias}", json.dumps(spec))
        conns = load_connections(secured.connections_path)
        return Clients(FileResolver(topo, {**conns, f"mirrorbook_kafka_{alias.lower()}": conns["mirrorbook_kafka_a"]}))

    yield from _scratch(secured, use_topology, clients_of)


@pytest.fixture
def txn_scratch(devstack: DevStack, use_topology) -> Iterator[ScratchFlow]:
    yield from _scratch(devstack, use_topology, lambda topo, _alias: Clients(TopologyResolver(topo)), transactions=3)


def _conf(scratch: ScratchFlow, **kw: Any) -> dict[str, Any]:
    return {"flows": re.escape(scratch.flow.name), **kw}


def test_green_on_a_healthy_flow_and_a_sample_per_run_lands_in_the_audit(run_dag, secure_health_scratch, secured,
                                                                         audit: AuditStore, webhook: Webhook):
    """On the secured stack: lag, heartbeats and checkpoints read as the `mirrorbook` principal over SASL_SSL."""
    scratch = secure_health_scratch
    group = f"{scratch.topic}-g"
    eventually(lambda: translate_offsets(secured.require().kafka_config("B"), scratch.alias, group), timeout=60,
               what="a checkpoint")

    run = run_dag("mm2_health_check", _conf(scratch))
    assert run.state == "success", run.task_states()
    assert webhook.received == []

    [sample] = audit.metrics(scratch.flow.name)
    m = sample.metrics
    assert m["state"] == "REPLICATING" and m["source"] == "mm2_health_check" and m["violations"] == []
    rows = {(p["topic"], p["partition"]): p for p in m["partitions"]}
    for p in range(2):  # what the RPO estimate reads, exactly
        row = rows[(scratch.topic, p)]
        assert row["high_watermark"] == 20 and row["replicated_offset"] == 19 and row["lag"] == 0
    assert 0 <= m["heartbeat_age_s"] < 30
    assert m["hops"] == 1  # A's heartbeats reach B as <alias>.heartbeats
    [cp] = [c for c in m["checkpoints"] if c["group"] == group]
    assert 0 <= cp["age_s"] < 60 and cp["behind"] == []


def test_a_fully_mirrored_transactional_topic_lags_zero_records_and_passes_max_lag_0(run_dag, txn_scratch,
                                                                                     audit: AuditStore):
    """Exactly-once writes (transactions, every second one aborted, each ending in its marker): the partitions end
    with a marker, so by offsets they lag 1 forever. The check counts records: lag 0, and max_lag=0 holds."""
    scratch = txn_scratch
    clients = Clients(TopologyResolver(scratch.topology))

    def flushed() -> bool:  # Connect has committed MM2's offset of each partition's last record
        return {(p.offset_lag, p.lag) for p in flow_status(clients, scratch.flow).lag if p.topic == scratch.topic} \
            == {(1, 0)}
    eventually(flushed, what="MM2's offsets flushed to the last records")

    run = run_dag("mm2_health_check", _conf(scratch, max_lag=0))
    assert run.state == "success", run.failure() or run.task_states()
    [sample] = audit.metrics(scratch.flow.name)
    rows = [p for p in sample.metrics["partitions"] if p["topic"] == scratch.topic]
    assert len(rows) == 2 and all((r["offset_lag"], r["lag"], r["lag_low"]) == (1, 0, 0) for r in rows), rows
    assert sample.metrics["violations"] == []


def test_red_naming_the_flow_when_its_source_connector_stops_then_green_after_resume(
        run_dag, scratch, admin_a, admin_b, connect_b_url, webhook: Webhook):
    source = scratch.flow.connector("source")
    with ConnectClient(connect_b_url) as c:
        c.stop(source)
        wait_for(c, source, "STOPPED", timeout_s=60)

    red = run_dag("mm2_health_check", _conf(scratch))
    assert red.state == "failed"
    # The run is the check's: flow_events (a teardown) ran and announced the change, and decides nothing.
    assert red.task_states() == {"check_flows": "failed", "flow_events": "success"}
    [alert] = webhook.received  # the notifier POSTed one JSON alert
    assert alert["dag_id"] == "mm2_health_check" and alert["run_id"] == red.run_id
    assert f"flow {scratch.flow.name} is DISABLED (required REPLICATING): source STOPPED" in alert["message"]
    assert [f["flow"] for f in alert["details"]["flows"]] == [scratch.flow.name]

    with ConnectClient(connect_b_url) as c:
        c.resume(source)
        wait_for(c, source, "RUNNING", timeout_s=60, min_tasks=1)
    green = run_dag("mm2_health_check", _conf(scratch))
    assert green.state == "success", webhook.received[1:]
    assert len(webhook.received) == 1


def test_restart_failed_brings_back_a_task_that_failed_on_a_target_topic_config_error(
        run_dag, scratch, admin_a, admin_b, connect_b_url, audit: AuditStore, webhook: Webhook):
    """A realistic FAILED task: the target topic refuses MM2's records (max.message.bytes too small), the
    source task dies with "Unrecoverable exception from producer send callback". Once the topic is fixed,
    only a restart brings the task back — which is what restart_failed does."""
    source = scratch.flow.connector("source")
    set_topic_config(admin_b.bootstrap, scratch.remote, "max.message.bytes", "64")
    produce(admin_a.bootstrap, [scratch.topic], 5)
    with ConnectClient(connect_b_url) as c:
        eventually(lambda: "FAILED" in [t.state for t in c.status(source).tasks], timeout=90, what="a FAILED task")

    red = run_dag("mm2_health_check", _conf(scratch))  # without restart_failed it only reports it
    assert red.state == "failed"
    assert "source RUNNING (0 task(s) running, tasks FAILED)" in webhook.received[-1]["message"]
    assert red.mutating_calls() == 0

    set_topic_config(admin_b.bootstrap, scratch.remote, "max.message.bytes", None)  # the operator fixes the topic
    fixed = run_dag("mm2_health_check", _conf(scratch, restart_failed=True))
    assert fixed.state == "success", webhook.received[-1]
    [call] = [e for e in fixed.events(kind="call") if e.mutating and e.result != "intent"]
    assert call.result == "ok" and call.request.method == "POST"
    assert call.request.path.endswith("/restart") and call.flow == scratch.flow.name
    [sample] = audit.metrics(scratch.flow.name, limit=1)
    assert sample.metrics["restarted"] == [f"{source}: restarted FAILED parts, RUNNING again"]
    wait_mirrored(admin_a, admin_b, scratch.topic, scratch.remote)  # the refused records got through
