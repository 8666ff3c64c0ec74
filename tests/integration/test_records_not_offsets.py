"""Records, not offsets, on real brokers and a real MM2: a topic written by an exactly-once producer (committed and
aborted transactions, each ending in its marker) beside a plain one, mirrored by a flow of the test's own.

- Lag: fully mirrored, the transactional partitions lag 1 by offsets (the last marker) and 0 in records; a gate
  whose max_lag covers the offsets does not even read them.
- Reads: a range ending in markers ends at the partition's end, committed records only (aborted ones too when
  read uncommitted, as MM2's default source consumer does); a count stops at an open transaction.
- The RPO sampler: partitions that show markers are counted in records, the others taken by offsets; with the
  flow paused, the lower bound from its sample counts the committed records MM2 has not copied — never a marker
  or an aborted record.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import Producer

from mirrorbook.audit import AuditStore
from mirrorbook.clients import Clients, TopologyResolver
from mirrorbook.connect import ConnectClient
from mirrorbook.connect.wait import wait_for
from mirrorbook.devstack.stack import DevStack
from mirrorbook.devstack.workload import TxnReport, produce, produce_transactional
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.reader import read_ranges
from mirrorbook.kafka.records import count_records
from mirrorbook.kafka.types import TP
from mirrorbook.replication.mm2_connect_status import flow_status
from mirrorbook.runbooks.checks import drained
from mirrorbook.runbooks.rpo import rpo_lower_bound
from mirrorbook.runbooks.rpo_sampler import run_sampler
from mirrorbook.topology import FlowSpec
from tests.helpers import eventually

pytestmark = pytest.mark.integration
TXNS, PER_TXN, PLAIN = 4, 3, 10  # transactions 2 and 4 aborted: the partitions end with an abort marker


@dataclass
class Mirrored:
    flow: FlowSpec
    clients: Clients
    txn: str
    plain: str
    report: TxnReport
    a: str
    b: str


@pytest.fixture
def mirrored(devstack: DevStack, unique: str) -> Iterator[Mirrored]:
    state = devstack.require()
    a, b = state.brokers["A"].bootstrap, state.brokers["B"].bootstrap
    admin_a, admin_b = KafkaAdmin(a), KafkaAdmin(b)
    txn, plain = f"{unique}-txn", f"{unique}-plain"
    admin_a.create_topics({txn: 2, plain: 2})
    alias = "T" + uuid.uuid4().hex[:6].upper()
    topology = devstack.alias_flow(alias, topics=f"{re.escape(unique)}-(txn|plain)")
    flow = topology.flow(f"{alias}->B")
    with ConnectClient(state.connect_settings("B")) as client:
        wait_for(client, flow.connectors.source, "RUNNING", min_tasks=1)
    report = produce_transactional(a, [txn], TXNS, PER_TXN, abort_every=2)
    produce(a, [plain], PLAIN)
    want = {TP(f"{alias}.{txn}", p): PER_TXN * TXNS for p in range(2)} | {TP(f"{alias}.{plain}", p): PLAIN
                                                                           for p in range(2)}
    eventually(lambda: {t.topic for t in want} <= set(admin_b.topics()) and admin_b.high_watermarks(list(want)) == want,
               what="both topics copied to B, aborted records included")
    try:
        yield Mirrored(flow, Clients(TopologyResolver(topology)), txn, plain, report, a, b)
    finally:
        devstack.remove_flow(flow)


def _rows(m: Mirrored, **kw) -> dict[TP, object] | None:
    """The flow's lag rows once Connect has flushed MM2's offsets of both topics to their last records."""
    rows = {TP(p.topic, p.partition): p for p in flow_status(m.clients, m.flow, **kw).lag}
    mine = {tp: p for tp, p in rows.items() if tp.topic in (m.txn, m.plain)}
    return mine if len(mine) == 4 and all(p.offset_lag <= 1 for p in mine.values()) else None


def test_a_fully_mirrored_transactional_topic_lags_zero_records_not_one_offset(mirrored: Mirrored):
    rows = eventually(lambda: _rows(mirrored), what="MM2's offsets flushed")
    for tp, p in rows.items():
        marker = tp.topic == mirrored.txn
        assert (p.offset_lag, p.lag, p.lag_low) == ((1, 0, 0) if marker else (0, 0, 0)), p
    status = flow_status(mirrored.clients, mirrored.flow)
    assert drained(status, 0, {mirrored.txn, mirrored.plain}) == (True, {})
    # A gate with max_lag 1 needs no read: within 1 by offsets is within 1 by records (at most 1, at least 0).
    gate = {TP(p.topic, p.partition): p for p in flow_status(mirrored.clients, mirrored.flow, count_above=1).lag}
    assert all((gate[tp].lag, gate[tp].lag_low) == (1, 0) for tp in rows if tp.topic == mirrored.txn)
    assert drained(flow_status(mirrored.clients, mirrored.flow, count_above=1), 1, {mirrored.txn})[0]


def test_reads_end_at_trailing_markers_and_counts_stop_at_an_open_transaction(mirrored: Mirrored):
    tp = TP(mirrored.txn, 0)
    admin = KafkaAdmin(mirrored.a)
    end = admin.high_watermarks([tp])[tp]
    step = PER_TXN + 1
    committed = [o for k in range(TXNS) if k % 2 == 0 for o in range(k * step, k * step + PER_TXN)]
    aborted = [o for k in range(TXNS) if k % 2 == 1 for o in range(k * step, k * step + PER_TXN)]
    assert end == TXNS * step
    # The last offset is a marker: the read ends at the partition's end, not after a timeout.
    assert [m.offset() for m in read_ranges(mirrored.a, {tp: (0, end)}, timeout_s=10)] == committed
    assert [m.offset() for m in read_ranges(mirrored.a, {tp: (0, end)}, timeout_s=10,
                                            isolation="read_uncommitted")] == sorted(committed + aborted)
    assert [m.offset() for m in read_ranges(mirrored.a, {tp: (end - 1, end)}, timeout_s=10)] == []
    counted = count_records(admin, {tp: (0, end)})[tp]
    assert (counted.records, counted.exact, counted.high) == (len(committed), True, len(committed))
    # An open transaction: its records are not records yet, and a count does not wait for them.
    producer = Producer({"bootstrap.servers": mirrored.a, "transactional.id": f"open-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for _ in range(3):
        producer.produce(tp.topic, value=b"open", partition=tp.partition)
    producer.flush(30)
    try:
        now = admin.high_watermarks([tp])[tp]
        open_count = count_records(admin, {tp: (0, now)}, timeout_s=10)[tp]
        assert (open_count.read_to, open_count.records, open_count.exact) == (end, len(committed), False)
        assert open_count.high == len(committed) + 3
    finally:
        producer.abort_transaction(30)


def test_the_rpo_sampler_counts_records_where_offsets_are_not_and_bounds_the_loss_in_records(
        mirrored: Mirrored, tmp_path: Path):
    eventually(lambda: _rows(mirrored), what="MM2's offsets flushed")
    audit = AuditStore(f"sqlite:///{tmp_path}/audit.db")
    done = asyncio.run(run_sampler(mirrored.clients, [mirrored.flow], audit, duration_s=2.0, poll_s=0.5))
    assert done.polls >= 2 and done.failures == 0
    assert done.transactional[mirrored.flow.name] == [f"{mirrored.txn}-0", f"{mirrored.txn}-1"]
    kept = audit.replication_sample(mirrored.flow.name)
    rows = {(p["topic"], p["partition"]): p for p in kept.metrics["partitions"]}
    assert rows  # the guard of the loop below
    for (topic, _), row in rows.items():
        assert (row["by"], row["lag"], row["lag_low"]) == ("records" if topic == mirrored.txn else "offsets", 0, 0)

    # MM2 stops copying; A receives a committed transaction, an aborted one and plain records.
    with ConnectClient(mirrored.clients.resolver.connect_settings("B")) as c:
        c.pause(mirrored.flow.connectors.source)
        wait_for(c, mirrored.flow.connectors.source, "PAUSED", timeout_s=30)
        try:
            produce_transactional(mirrored.a, [mirrored.txn], 2, PER_TXN, abort_every=2)
            produce(mirrored.a, [mirrored.plain], 5)
            asyncio.run(run_sampler(mirrored.clients, [mirrored.flow], audit, duration_s=1.5, poll_s=0.5))
            bound = rpo_lower_bound(audit, mirrored.clients, mirrored.flow)
        finally:
            c.resume(mirrored.flow.connectors.source)
    assert bound["sample_source"] == "rpo_sampler" and bound["sample_age_s"] is not None
    assert bound["partitions"] == {f"{mirrored.txn}-0": PER_TXN, f"{mirrored.txn}-1": PER_TXN,
                                   f"{mirrored.plain}-0": 5, f"{mirrored.plain}-1": 5}
    assert bound["records"] == 2 * PER_TXN + 2 * 5  # the aborted transaction and both markers: not a record
    assert bound["estimate"]["kind"] == "estimate" and bound["estimate"]["records"] >= bound["records"]
