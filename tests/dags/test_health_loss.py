"""The health check finds records a flow can no longer replicate — provoked for real on the devstack, each test on
a scratch flow of its own: retention and delete-records take records while the flow's source connector is
stopped (DATA_LOSS, counted exactly, once); a mirrored topic is deleted and created again on the target
(TARGET_RESET). Both fail the check, alert through the notifier, land in the audit trail and in the sample the
metrics export."""

from __future__ import annotations

import re
import time
import uuid
from datetime import datetime, timezone
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorbook.audit import AuditStore
from mirrorbook.clients import Clients, TopologyResolver
from mirrorbook.connect import ConnectClient
from mirrorbook.connect.wait import wait_for
from mirrorbook.devstack.workload import produce, produce_transactional
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.types import TP
from mirrorbook.replication import backend_for
from mirrorbook.reports.drill_report import DrillSummary, render_html
from mirrorbook.core.engine import RunInfo, Runbook
from mirrorbook.runbooks.rpo import rpo_lower_bound
from mirrorbook.runbooks.health import HealthParams, HealthReport, run_health_check
from mirrorbook.runbooks.health.results import known_loss
from mirrorbook.runbooks.move_report import move_report, render_report
from mirrorbook.runbooks.plan import TranslationPlan
from tests.conftest import ScratchFlow
from tests.dags.conftest import Webhook
from tests.helpers import eventually, set_topic_config, wait_mirrored

pytestmark = [pytest.mark.airflow, pytest.mark.integration]


def _pass(scratch: ScratchFlow, audit: AuditStore) -> HealthReport:
    """One health pass over the scratch flow, as the DAG's task runs it (its sample and events in the audit)."""
    clients = Clients(TopologyResolver(scratch.topology))
    params = HealthParams(flows=re.escape(scratch.flow.name), readiness=False)
    rb = Runbook(RunInfo(run_id=f"health-{uuid.uuid4().hex[:8]}", dag_id="mm2_health_check"), audit)
    return run_health_check(clients, scratch.topology, [scratch.flow], params, audit, rb)


def _green(scratch: ScratchFlow, audit: AuditStore, timeout_s: float = 60.0) -> HealthReport:
    """Passes until one is green: a new flow's heartbeats and tasks take a moment on a loaded machine."""
    deadline = time.monotonic() + timeout_s
    while True:
        report = _pass(scratch, audit)
        if report.ok:
            return report
        assert time.monotonic() < deadline, report.message()
        time.sleep(1.0)


def _replicated(topology: Any, flow: str, topic: str) -> dict[int, int]:
    offsets = backend_for(Clients(TopologyResolver(topology)), topology.flow(flow)).replicated_offsets()
    return {tp.partition: o for tp, o in offsets.items() if tp.topic == topic}


def _wait_replicated(scratch: ScratchFlow, admin_a: KafkaAdmin, flow: str) -> None:
    """Until `flow`'s source connector has committed the end of every partition of the scratch topic."""
    highs = admin_a.high_watermarks(admin_a.partitions([scratch.topic]))
    want = {tp.partition: h - 1 for tp, h in highs.items()}
    eventually(lambda: _replicated(scratch.topology, flow, scratch.topic) == want, timeout=60,
               what=f"{flow} committed {want} of {scratch.topic}")


def _delete_records(bootstrap: str, tp: TP, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_records([TopicPartition(tp.topic, tp.partition, before)]).values():
        fut.result()


def _flow_message(report: HealthReport) -> list[str]:
    return [v for f in report.flows for v in f.violations]


def test_records_deleted_before_mm2_read_them_are_data_loss_counted_exactly_and_once(
        run_dag, dag_scratch: ScratchFlow, admin_a: KafkaAdmin, admin_b: KafkaAdmin, connect_b_url: str,
        audit: AuditStore, webhook: Webhook):
    s, source = dag_scratch, dag_scratch.flow.connector("source")
    p0, p1 = TP(s.topic, 0), TP(s.topic, 1)
    produce(admin_a.bootstrap, [s.topic], 10)
    wait_mirrored(admin_a, admin_b, s.topic, s.remote)
    _wait_replicated(s, admin_a, s.flow.name)
    _green(s, audit)

    with ConnectClient(connect_b_url) as c:
        c.stop(source)
        wait_for(c, source, "STOPPED", timeout_s=60)
    produce(admin_a.bootstrap, [s.topic], 7)  # offsets 10..16 of each partition: never read by the scratch flow
    # The session's A->B mirrors every topic of A: it must have read them, or the loss would be its too.
    _wait_replicated(s, admin_a, "A->B")
    _delete_records(admin_a.bootstrap, p0, 14)  # 10..13 of partition 0 gone before MM2 read them

    first = _pass(s, audit)
    [fh] = first.flows
    assert [(g.partition, g.next_offset, g.log_start, g.records, g.new) for g in fh.loss.gaps] == [(0, 10, 14, 4, 4)]
    assert any(v.startswith(f"flow {s.flow.name}: DATA_LOSS — 4 record(s) were deleted from {s.alias}") and
               f"{s.topic}-0 4 (offsets 10..13)" in v for v in fh.violations), fh.violations

    set_topic_config(admin_a.bootstrap, s.topic, "retention.ms", "100")  # retention takes the rest: 14..16, 10..16
    eventually(lambda: {tp.partition: w.low for tp, w in admin_a.watermarks([p0, p1]).items()} == {0: 17, 1: 17},
               timeout=60, what="retention deleting both partitions")
    set_topic_config(admin_a.bootstrap, s.topic, "retention.ms", None)

    with ConnectClient(connect_b_url) as c:  # resumed: nothing left to read, so its offsets stay where they were
        c.resume(source)
        wait_for(c, source, "RUNNING", timeout_s=60, min_tasks=1)
    red = run_dag("mm2_health_check", {"flows": re.escape(s.flow.name), "readiness": False})
    assert red.state == "failed", red.task_states()
    assert red.recorded_result() == "failed"
    [alert] = webhook.received
    assert f"flow {s.flow.name}: DATA_LOSS — 14 record(s) were deleted from {s.alias}" in alert["message"]
    assert f"{s.topic}-0 3 (offsets 14..16)" not in alert["message"]  # the gap shows whole: 10..16, counted once
    assert f"{s.topic}-0 7 (offsets 10..16)" in alert["message"] \
        and f"{s.topic}-1 7 (offsets 10..16)" in alert["message"]
    sample = audit.latest_metrics(s.flow.name, source="mm2_health_check").metrics
    assert sample["state"] == "REPLICATING"  # the check failed on the loss alone
    assert {(r["cause"], r["partition"]): r["records"] for r in sample["lost"]} == {("data_loss", 0): 7,
                                                                                   ("data_loss", 1): 7}
    assert sample["records_lost_total"] == 14
    events = audit.events(flow=s.flow.name, action="health.data_loss")
    assert [e.details["records"] for e in events] == [4, 10]  # each record counted by exactly one pass
    assert events[-1].run_id == red.run_id

    produce(admin_a.bootstrap, [s.topic], 3)  # MM2 reads on from the log start: the gap closes
    _wait_replicated(s, admin_a, s.flow.name)
    later = _green(s, audit)  # the check is green again; the count is kept
    assert later.flows[0].loss.total() == 14 and later.flows[0].loss.gaps == []
    known = known_loss(audit, s.flow.name)
    assert (known["records"], known["data_loss"], known["target_reset"]) == (14, 14, 0)

    # The reports say it: an unplanned failover's RPO, any move's report, the drill's.
    bound = rpo_lower_bound(audit, Clients(TopologyResolver(s.topology)), s.flow)
    assert (bound["known_lost"]["records"], bound["known_lost"]["data_loss"]) == (14, 14)
    plan = TranslationPlan(flow=s.flow.name, direction="failover", mode="unplanned", translation="mm2",
                           from_cluster=s.alias, to_cluster="B", groups=[], rows=[])
    text = render_report(move_report(Runbook(RunInfo(run_id="r"), audit, dry_run=True), plan, None, {"rpo": bound}))
    assert (f"known loss on {s.flow.name} (health check, as of {known['sampled_at']}): 14 record(s) — 14 deleted "
            "from the source before MM2 replicated them (DATA_LOSS), 0 copies gone from the target") in text
    assert "RPO: besides, 14 record(s) known lost before the failover (health check, as of " in text
    drill = DrillSummary(run_id="d", flow=s.flow.name, from_cluster=s.alias, to_cluster="B", translation="precise",
                         finished_at=datetime.now(timezone.utc), known_loss=known)
    assert "14 deleted from the source before MM2 replicated them (DATA_LOSS)" in render_html(drill, "d.json")


def test_a_mirrored_topic_recreated_on_the_target_is_a_target_reset_reported_once(
        dag_scratch: ScratchFlow, admin_a: KafkaAdmin, admin_b: KafkaAdmin, audit: AuditStore):
    s = dag_scratch
    produce(admin_a.bootstrap, [s.topic], 5)
    wait_mirrored(admin_a, admin_b, s.topic, s.remote)
    _green(s, audit)  # the sample keeps the remote topic's id and offsets

    before = admin_b.topic_ids([s.remote])[s.remote]
    for fut in admin_b.client.delete_topics([s.remote]).values():
        fut.result()

    def recreated() -> bool:  # MM2 creates a missing remote topic itself (refresh.topics): else we do
        now = admin_b.topic_ids([s.remote]).get(s.remote)
        if now is None:
            try:
                admin_b.create_topics({s.remote: 2})
            except Exception:
                pass  # the broker refuses the name until the deletion has gone through: next time
        return now not in (None, before)
    eventually(recreated, timeout=30, what=f"{s.remote} deleted and created again on B")

    found = _pass(s, audit)
    [fh] = found.flows
    assert not found.ok
    assert sorted((r.partition, r.change, r.records, r.before) for r in fh.loss.resets) == [
        (0, "re-created", 5, (0, 5)), (1, "re-created", 5, (0, 5))]
    [v] = [v for v in fh.violations if "TARGET_RESET" in v]
    assert v.startswith(f"flow {s.flow.name}: TARGET_RESET — {s.remote} on B was deleted and created again "
                        "(its topic id changed) since the check at ")
    assert "10 copied record(s) are gone from B and MM2 will not copy them again" in v
    [event] = audit.events(flow=s.flow.name, action="health.target_reset")
    assert event.details["records"] == 10

    again = _pass(s, audit)  # compared with the re-created topic now: nothing new, the count kept
    assert [v for v in again.violations() if "TARGET_RESET" in v] == []
    sample = audit.latest_metrics(s.flow.name, source="mm2_health_check").metrics
    assert {(r["cause"], r["topic"], r["partition"]): r["records"] for r in sample["lost"]} == {
        ("target_reset", s.remote, 0): 5, ("target_reset", s.remote, 1): 5}
    assert datetime.fromisoformat(sample["lost"][0]["first_at"]) <= datetime.now(timezone.utc)


def test_a_transactional_partition_s_deleted_records_are_counted_in_records_from_what_the_passes_read(
        dag_scratch: ScratchFlow, admin_a: KafkaAdmin, admin_b: KafkaAdmin, connect_b_url: str, audit: AuditStore):
    """Offsets 0-2 committed and mirrored (marker 3); with MM2 stopped, 4-6 committed (marker 7), 8-10 aborted
    (marker 11). A pass counts the lag in records (3 in 9 offsets); then records before 8 are deleted: the gap
    3..7 holds 3 records, not 5 — the previous pass's count less what this pass still sees (none: aborted).
    Partition 1, never read short of its markers, keeps its lag."""
    s, source = dag_scratch, dag_scratch.flow.connector("source")
    p0 = TP(s.topic, 0)
    produce_transactional(admin_a.bootstrap, [s.topic], 1, 3)
    eventually(lambda: s.remote in admin_b.topics() and set(admin_b.high_watermarks(
        [TP(s.remote, p) for p in range(2)]).values()) == {3}, what="the first transaction copied")
    eventually(lambda: _replicated(s.topology, s.flow.name, s.topic) == {0: 2, 1: 2}, what="MM2's offsets flushed")
    _green(s, audit)
    with ConnectClient(connect_b_url) as c:
        c.stop(source)
        wait_for(c, source, "STOPPED", timeout_s=60)
    try:
        produce_transactional(admin_a.bootstrap, [s.topic], 2, 3, abort_every=2)
        counted = _pass(s, audit)
        rows = {p.partition: p for p in counted.flows[0].status.lag if p.topic == s.topic}
        assert {(p.offset_lag, p.lag, p.lag_low) for p in rows.values()} == {(9, 3, 3)}, rows
        _delete_records(admin_a.bootstrap, p0, 8)
        lost = _pass(s, audit)
    finally:
        with ConnectClient(connect_b_url) as c:
            c.resume(source)
    [fh] = lost.flows
    assert [(g.partition, g.next_offset, g.log_start, g.records, g.records_high) for g in fh.loss.gaps] == \
        [(0, 3, 8, 3, 3)]
    assert any(f"DATA_LOSS — 3 record(s) were deleted from {s.alias}" in v and f"{s.topic}-0 3 (offsets 3..7)" in v
               for v in fh.violations), fh.violations
    assert {(r.cause, r.partition): (r.records, r.records_high) for r in fh.loss.ledger} == \
        {("data_loss", 0): (3, None)}
