"""Offset translation against the real stack: MM2's checkpoints in one pass, and precise mode.

Every claim is checked with the workload's sequence numbers (seq == the record's offset on A), so
"no skip" and "re-reads" are measured on what a consumer on B actually reads, not on our arithmetic.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

import pytest
from confluent_kafka import Producer

from mirrorbook import cli
from mirrorbook.devstack.workload import GroupSpec, load
from mirrorbook.kafka.sequenced import record
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.reader import read_ranges
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.counts import ZERO, Count
from mirrorbook.mm2.internal_topics import (CheckpointLog, offset_syncs_topic, read_checkpoints, read_heartbeats,
                                            read_offset_syncs)
from mirrorbook.mm2.precise import (ALIGNED_BACK, ALIGNED_END, ALIGNED_START, BOTH_EMPTY, NOT_PROVEN, UNIQUE,
                                    PreciseReport, translate_precise)
from mirrorbook.mm2.records import Checkpoint, OffsetSync
from mirrorbook.topology import load_topology
from mirrorbook.mm2.remote_cluster_utils import (checkpoint_topics, group_matcher, heartbeat_topics,
                                                 replication_hops, translate_offsets, translate_offsets_all,
                                                 upstream_clusters)
from tests.conftest import TEST_MM2
from tests.helpers import eventually, seqs, set_topic_config, wait_mirrored

pytestmark = pytest.mark.integration

RECORDS = 400
PARTITIONS = 3
# end-N for N < offset.lag.max: Kafka's own bound (MirrorConnectorsIntegrationBaseTest) applies.
NEAR_END = ["end", "end-1", "end-7", "end-60", "end-99"]
POSITIONS = NEAR_END + ["end-150", "end-333", "begin", "1", "101", "250", "none"]


@dataclass
class Scenario:
    tag: str
    topics: list[str]
    groups: dict[str, str]                  # group → position
    committed: dict[str, dict[TP, int]]     # on A
    high_a: dict[TP, int]
    high_b: dict[TP, int]                   # by target partition
    checkpoints: CheckpointLog

    @property
    def regex(self) -> str:
        return f"{self.tag}-g.*"

    def target(self, tp: TP) -> TP:
        return TP(f"A.{tp.topic}", tp.partition)


def checkpoints_settled(bootstrap_b: str, regex: str, committed: dict[str, dict[TP, int]],
                        high_a: dict[TP, int], high_b: dict[TP, int]) -> CheckpointLog:
    """Every committed (group, partition) has a checkpoint for its current offset; groups at the end
    have MM2's exact one (made after the sync of the last record). Else the first that has not, named."""
    log = read_checkpoints(bootstrap_b, "A", group_filter=group_matcher(regex))
    for g, offsets in committed.items():
        for tp, c in offsets.items():
            cp = log.latest.get((g, f"A.{tp.topic}", tp.partition))
            remote = TP(f"A.{tp.topic}", tp.partition)
            assert cp is not None and cp.upstream_offset == c, f"{g} {tp}: committed {c}, latest checkpoint {cp}"
            assert c != high_a[tp] or cp.downstream_offset == high_b[remote], \
                f"{g} {tp} at the end ({c}): checkpoint {cp}, {remote} ends at {high_b[remote]}"
    return log


@pytest.fixture(scope="module")
def scenario(devstack, bootstrap_a, bootstrap_b, admin_a, admin_b) -> Scenario:
    tag = f"tr-{uuid.uuid4().hex[:6]}"
    topics = [f"{tag}-t0", f"{tag}-t1"]
    groups = {f"{tag}-g{i:02d}": pos for i, pos in enumerate(POSITIONS)}
    load(bootstrap_a, topics, PARTITIONS, RECORDS, [GroupSpec(name=g, position=p) for g, p in groups.items()])
    high_b: dict[TP, int] = {}
    for t in topics:
        high_b.update(wait_mirrored(admin_a, admin_b, t, f"A.{t}"))
    committed = {g: offs for g, offs in admin_a.committed_offsets(groups).items() if offs}
    high_a = admin_a.high_watermarks(admin_a.partitions(topics))
    log = eventually(lambda: checkpoints_settled(bootstrap_b, f"{tag}-g.*", committed, high_a, high_b),
                     timeout=180, what="checkpoints for every parked group")  # over 90 s once, in a CI run
    return Scenario(tag, topics, groups, committed, high_a, high_b, log)


def test_one_pass_equals_kafka_per_group_translation(scenario, bootstrap_b):
    everything = translate_offsets_all(bootstrap_b, "A", scenario.regex)
    assert len(everything) >= 10 and len(everything) == len(scenario.committed)
    for group in scenario.groups:
        assert translate_offsets(bootstrap_b, "A", group) == everything.get(group, {}), group
    none_group = next(g for g, p in scenario.groups.items() if p == "none")
    assert none_group not in everything and translate_offsets(bootstrap_b, "A", none_group) == {}
    # Groups at the very beginning translate exactly (MM2 syncs the first record: 0 -> 0).
    begin = next(g for g, p in scenario.groups.items() if p == "begin")
    assert set(everything[begin].values()) == {0}


def test_consumer_seeking_to_mm2_offsets_never_skips(scenario, bootstrap_b):
    translated = translate_offsets_all(bootstrap_b, "A", scenario.regex)
    assert scenario.committed
    for group, offsets in scenario.committed.items():
        ranges = {scenario.target(tp): (translated[group][scenario.target(tp)], scenario.high_b[scenario.target(tp)])
                  for tp in offsets}
        seen: dict[TP, list[int]] = {tp: [] for tp in ranges}
        for m in read_ranges(bootstrap_b, ranges):  # a consumer assigned at the translated offsets
            seen[TP(m.topic(), m.partition())].append(json.loads(m.value())["seq"])
        for tp, c in offsets.items():
            seqs, high = seen[scenario.target(tp)], scenario.high_a[tp]
            first = seqs[0] if seqs else high
            # No skip: it reads every record from at most C on, in order, up to the end.
            assert first <= c and seqs == list(range(first, high)), (group, tp)
            if scenario.groups[group] in NEAR_END:
                assert c - first <= TEST_MM2.offset_lag_max, (group, tp, c - first)


def test_precise_on_a_drained_topic_re_reads_and_skips_nothing(scenario, bootstrap_a, bootstrap_b):
    report = translate_precise(bootstrap_a, bootstrap_b, "A", "B", scenario.regex)
    expected_rows = sum(len(o) for o in scenario.committed.values())
    assert report.totals.partitions == expected_rows and report.totals.groups == len(scenario.committed)
    assert report.totals.proven == expected_rows, [r.reason for r in report.rows if not r.proven]
    assert (report.totals.re_read, report.totals.skip, report.totals.mm2_skip) == (ZERO, ZERO, ZERO)
    assert report.totals.mm2_re_read.is_exact and report.totals.mm2_re_read.low > 0  # precise saves these
    assert report.malformed_records == 0
    # Prove it independently: the record at the precise offset on B is the one at C on A.
    seq_at = {tp: {m.offset(): json.loads(m.value())["seq"] for m in read_ranges(bootstrap_b, {tp: (0, h)})}
              for tp, h in scenario.high_b.items()}
    for row in report.rows:
        tp = row.target_tp
        assert row.offset == row.precise_offset
        if row.source_offset == scenario.high_a[TP(row.source_topic, row.partition)]:
            assert row.precise_offset == scenario.high_b[tp]  # fully consumed: nothing left to read
        else:
            assert seq_at[tp][row.precise_offset] == row.source_offset, row
        # MM2's re-read count agrees with the sequence numbers.
        assert row.mm2_re_read == Count.exact(sum(1 for o in range(row.mm2_offset, row.precise_offset)
                                                  if o in seq_at[tp]))
        assert row.mm2_offset == scenario.checkpoints.latest[(row.group, tp.topic, tp.partition)].downstream_offset


def test_translate_cli_prints_both_modes(scenario, devstack, capsys, tmp_path):
    topology = str(devstack.topology_path)
    args = ["translate", "--flow", "A->B", "--groups", scenario.regex, "--topology", topology]

    def run(*extra: str) -> str:
        capsys.readouterr()
        assert cli.main([*args, *extra]) == 0
        return capsys.readouterr().out

    mm2 = json.loads(run("--json"))
    assert mm2["mode"] == "mm2" and mm2["groups"] == len(scenario.committed) and mm2["source_readable"]
    assert {(r["group"], r["topic"], r["partition"]): r["offset"] for r in mm2["rows"]} == \
        {k: cp.downstream_offset for k, cp in scenario.checkpoints.latest.items()}
    # The source is readable: each group's committed offset on A, and what MM2's checkpoint re-reads and skips
    # from there — counted against the records (the checkpoints are settled, so MM2 skips nothing here).
    committed = {(g, f"A.{tp.topic}", tp.partition): c
                 for g, offs in scenario.committed.items() for tp, c in offs.items()}
    assert {(r["group"], r["topic"], r["partition"]): r["committed"] for r in mm2["rows"]} == committed
    assert all(Count.model_validate(r["skip"]) == ZERO for r in mm2["rows"])
    re_read = Count.model_validate(mm2["totals"]["re_read"])
    assert re_read.is_exact and re_read.low > 0 and mm2["totals"]["skipping"] == 0
    assert mm2["totals"]["committed_partitions"] == len(committed) and mm2["totals"]["without_checkpoint"] == 0
    table = run()
    assert f"{len(scenario.committed)} groups" in table
    assert table.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "COMMITTED", "CHECKPOINTED-AT", "OFFSET",
                                             "RE-READ", "SKIP"]
    assert f"MM2's checkpoints re-read {re_read.low} and skip 0 records over {len(committed)} committed" in table
    # Without a readable source, MM2's checkpoints alone, and the table says what it cannot show.
    blind = load_topology(topology)
    blind.clusters["A"].bootstrap_servers = None
    blind.clusters["A"].connection_id = f"not_defined_{scenario.tag}"  # in no AIRFLOW_CONN_*, no Airflow, no file
    blind_path = tmp_path / "blind.yaml"
    blind_path.write_text(blind.to_yaml())
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIRFLOW_HOME", str(tmp_path / "no-airflow"))  # an Airflow not set up here: not asked
        assert cli.main([*args[:-1], str(blind_path)]) == 0
    blind_table = capsys.readouterr().out
    assert "A is not readable (no bootstrap_servers in the topology)" in blind_table and "COMMITTED" not in blind_table
    table = run("--mode", "precise")
    assert "aligned" in table and "precise mode re-reads 0 and skips 0 records" in table
    assert cli.main(["translate", "--flow", "A->C", "--topology", topology]) == 2
    assert 'Unknown flow "A->C"' in capsys.readouterr().err
    # The installed entry point, end to end, in JSON.
    out = subprocess.run([sys.executable, "-m", "mirrorbook.cli", *args, "--mode", "precise", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    precise = PreciseReport.model_validate_json(out.stdout)
    assert precise.totals.proven == precise.totals.partitions == sum(len(o) for o in scenario.committed.values())


def compacting(bootstrap: str, topic: str) -> None:
    """Make the broker's log cleaner compact `topic` within a second or two, as it would in hours: small segments,
    any dirty ratio, no lag (the devstack's cleaner looks for work every second: `log.cleaner.backoff.ms`)."""
    for key, value in (("segment.ms", "100"), ("min.cleanable.dirty.ratio", "0.01"), ("min.compaction.lag.ms", "0")):
        set_topic_config(bootstrap, topic, key, value)


def test_groups_behind_the_newest_offset_sync_and_at_zero_are_placed_exactly_once_older_syncs_are_compacted(
        scratch_flow, bootstrap_a, bootstrap_b, admin_a, admin_b):
    """MM2's offset-syncs topic compacted by the broker's cleaner: one sync per partition is left, its newest. Two
    stray records on B (a copy of A's future record 130 after A's 119, one of a record A never held after A's
    139), as re-sends would leave. Every group whose next record has a copy is placed exactly — at 0 and below the
    first stray from both partitions' starts, further (beyond `max_window` of them) and between the strays by
    unique content, behind the newest sync back from it, at the end after its copy — and the one whose record has
    two copies in reach is not proven, and starts where it skips nothing. Each checked with the workload's
    sequence numbers (seq == A's offset)."""
    s = scratch_flow
    tp_a, tp_b = TP(s.topic, 0), TP(s.remote, 0)
    base_ts = int(time.time() * 1000) - 10_000

    def write(config: str, topic: str, seqs: range | list[int]) -> None:
        p = Producer({"bootstrap.servers": config, "linger.ms": 5})
        for seq in seqs:
            key, value, headers = record(s.topic, 0, seq, "workload")
            p.produce(topic, key=key, value=value, headers=headers, partition=0, timestamp=base_ts + seq)
        assert p.flush(30) == 0

    def b_holds(n: int) -> None:
        eventually(lambda: s.remote in admin_b.topics() and admin_b.high_watermarks([tp_b])[tp_b] == n, timeout=90,
                   what=f"{n} records on {tp_b}")

    write(bootstrap_a, s.topic, range(0, 120))
    b_holds(120)
    write(bootstrap_b, s.remote, [130])   # B 120: a stray copy of A's future 130
    write(bootstrap_a, s.topic, range(120, 140))
    b_holds(141)
    write(bootstrap_b, s.remote, [999])   # B 141: a record A never held
    write(bootstrap_a, s.topic, range(140, 200))
    b_holds(202)
    syncs_topic = offset_syncs_topic(s.alias, "B", "target")
    newest = eventually(lambda: (found := read_offset_syncs(bootstrap_b, s.alias, "B", location="target")
                                 .syncs.get(tp_a)) and found[-1].upstream_offset == 199 and found[-1],
                        what="MM2's sync of A's last record")
    # The cleaner skips the active segment, which rolls only when a record arrives after segment.ms. Waiting for
    # MM2's next sync of any partition took over 180 s on a loaded machine, so each poll appends a sync of a topic
    # nobody mirrors: it rolls the segment and touches no key of this partition.
    nudge = Producer({"bootstrap.servers": bootstrap_b})

    def one_sync_left() -> list | None:
        roll = OffsetSync(f"{s.topic}-roll", 0, 0, 0)
        nudge.produce(syncs_topic, key=roll.key_bytes(), value=roll.value_bytes())
        nudge.flush(10)
        found = read_offset_syncs(bootstrap_b, s.alias, "B", location="target").syncs.get(tp_a, [])
        return found if len(found) == 1 else None

    compacting(bootstrap_b, syncs_topic)
    left = eventually(one_sync_left, timeout=120, what="the cleaner leaving one sync for the partition")
    assert left == [newest] and (newest.upstream_offset, newest.downstream_offset) == (199, 201)

    groups = {f"{s.topic}-at{c}": c for c in (0, 60, 110, 125, 130, 150, 200)}
    committed = {g: {tp_a: c, TP(s.topic, 1): 0} for g, c in groups.items()}  # partition 1: empty on both sides
    admin_a.alter_group_offsets(committed)
    report = translate_precise(bootstrap_a, bootstrap_b, s.alias, "B", f"{re.escape(s.topic)}-at.*",
                               offset_syncs_location="target", max_window=100)
    rows = {(r.source_offset, r.partition): r for r in report.rows}
    assert {c: (rows[(c, 0)].proof, rows[(c, 0)].precise_offset) for c in groups.values()} == {
        0: (ALIGNED_START, 0), 60: (ALIGNED_START, 60), 110: (UNIQUE, 110), 125: (UNIQUE, 126),
        130: (NOT_PROVEN, None), 150: (ALIGNED_BACK, 152), 200: (ALIGNED_END, 202)}
    assert {rows[(0, 1)].proof} == {BOTH_EMPTY} and rows[(0, 1)].precise_offset == 0
    for c in (0, 60, 110, 125, 150):  # a consumer at the position reads A's record c next
        assert seqs(bootstrap_b, tp_b, rows[(c, 0)].offset, rows[(c, 0)].offset + 1) == [c]
    ambiguous = rows[(130, 0)]
    assert "ambiguous: 2 records in target window (100, 142)" in ambiguous.reason, ambiguous.reason
    assert "130 offsets from the partitions' first records: the window exceeds max_window 100" in ambiguous.reason
    # Not proven: a position that provably skips nothing, its re-read bounded — the truth (B records from there to
    # A's 130, at B 131, the stray included) within the bounds.
    assert ambiguous.skip == ZERO and ambiguous.offset <= 131
    assert ambiguous.re_read.low <= 131 - ambiguous.offset <= ambiguous.re_read.high


def test_a_transactional_partition_is_aligned_record_by_record(admin_a, admin_b, bootstrap_a, bootstrap_b, unique):
    """Exactly-once producers: commit markers take offsets on A and are never copied; MM2's source consumer reads
    `read_uncommitted` (the Java default), so it copies the records of aborted transactions as plain records
    (measured: B holds them). Groups anywhere — at a marker, inside an aborted transaction, past the last record
    with markers to the end — are placed exactly: on the copy of the first record MM2 read at or after their
    offset, or at B's end."""
    topic, remote = f"txn-{unique}", f"A.txn-{unique}"
    admin_a.create_topics({topic: 1})
    producer = Producer({"bootstrap.servers": bootstrap_a, "transactional.id": f"txn-{unique}"})
    producer.init_transactions()
    seq = 0
    for txn in range(8):  # 8 transactions of 5 records, the 2nd and 5th aborted; each ends with its marker
        producer.begin_transaction()
        for _ in range(5):
            producer.produce(topic, key=b"k%d" % seq, value=json.dumps({"seq": seq, "txn": txn}).encode(),
                             partition=0)
            seq += 1
        producer.flush(30)
        (producer.abort_transaction if txn in (1, 4) else producer.commit_transaction)()
    tp_a, tp_b = TP(topic, 0), TP(remote, 0)
    as_mm2_reads = {m.offset(): json.loads(m.value())["seq"]
                    for m in read_ranges(bootstrap_a, {tp_a: (0, admin_a.high_watermarks([tp_a])[tp_a])},
                                         isolation="read_uncommitted")}
    assert len(as_mm2_reads) == 40 and admin_a.high_watermarks([tp_a])[tp_a] == 48  # 8 markers
    eventually(lambda: remote in admin_b.topics() and admin_b.high_watermarks([tp_b])[tp_b] == 40, timeout=90,
               what="every record MM2 read, aborted ones included, on B")
    on_b = {json.loads(m.value())["seq"]: m.offset() for m in read_ranges(bootstrap_b, {tp_b: (0, 40)})}
    assert sorted(on_b) == list(range(40))  # the aborted transactions' records too, as plain records
    # Offsets: txn k's records at 6k..6k+4, its marker at 6k+5. 11: a marker; 13: inside an aborted transaction;
    # 47: the last marker; 48: the end.
    positions = [0, 3, 5, 6, 11, 13, 29, 30, 46, 47, 48]
    groups = {f"{unique}-at{c}": c for c in positions}
    admin_a.alter_group_offsets({g: {tp_a: c} for g, c in groups.items()})
    report = translate_precise(bootstrap_a, bootstrap_b, "A", "B", f"{re.escape(unique)}-at.*")
    assert report.totals.proven == len(positions), [(r.source_offset, r.reason) for r in report.rows if not r.proven]
    for row in report.rows:
        c = row.source_offset
        nxt = min((o for o in as_mm2_reads if o >= c), default=None)
        want = on_b[as_mm2_reads[nxt]] if nxt is not None else 40
        assert row.precise_offset == want, (c, row)
    assert {r.source_offset: r.proof for r in report.rows}[48] == ALIGNED_END


def test_remote_cluster_utils_and_readers_on_the_stack(devstack, bootstrap_a, bootstrap_b, admin_a, admin_b, unique):
    assert replication_hops(admin_b, "A") == 1  # A's heartbeats arrive on B as A.heartbeats
    assert replication_hops(admin_a, "B") == 1
    assert replication_hops(admin_b, "nowhere") == -1
    assert "A" in upstream_clusters(admin_b) and "A.heartbeats" in heartbeat_topics(bootstrap_b)
    assert "A.checkpoints.internal" in checkpoint_topics(admin_b)
    beats = read_heartbeats(bootstrap_b)
    assert ("A", "B") in beats.latest() and beats.malformed == 0
    assert time.time() * 1000 - beats.latest()[("A", "B")].timestamp_ms < 60_000

    # Garbage in a checkpoints topic is skipped and counted; good records around it still count.
    alias = f"Z{uuid.uuid4().hex[:6]}"
    topic = f"{alias}.checkpoints.internal"
    KafkaAdmin(bootstrap_b).create_topics({topic: 1})
    good, newer = Checkpoint("g1", "Z.t", 0, 10, 9), Checkpoint("g1", "Z.t", 0, 20, 18)
    p = Producer({"bootstrap.servers": bootstrap_b})
    for key, value in [(good.key_bytes(), good.value_bytes()), (b"\x00\x05ab", good.value_bytes()),
                       (newer.key_bytes(), newer.value_bytes()), (newer.key_bytes(), b"\x00\x07"),
                       (newer.key_bytes(), None)]:
        p.produce(topic, key=key, value=value)
    assert p.flush(30) == 0
    log = read_checkpoints(bootstrap_b, alias)
    assert (log.records, log.malformed) == (5, 3)
    assert translate_offsets(bootstrap_b, alias, "g1") == {TP("Z.t", 0): 18}
    assert translate_offsets_all(bootstrap_b, alias, "g.*") == {"g1": {TP("Z.t", 0): 18}}


def test_translate_learns_where_the_offset_syncs_are_from_the_flows_backend(topology, scratch_flow):
    from mirrorbook.cli.translate import syncs_location

    # the devstack's own flow keeps MM2's default; a scratch flow keeps its syncs on the target
    from mirrorbook.clients import Clients, TopologyResolver

    assert syncs_location(Clients(TopologyResolver(topology)), topology.flow("A->B")) == "source"
    scratch = Clients(TopologyResolver(scratch_flow.topology))
    assert syncs_location(scratch, scratch_flow.flow) == "target"
    assert syncs_location(scratch, scratch_flow.flow, "source") == "source"  # the flag overrides  # the flag overrides
