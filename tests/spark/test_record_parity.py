"""record_parity.py under real spark-submit (local[2]) reading the devstack's topics through Spark's Kafka
source: the spark-sql-kafka 4.2.0 jar set resolved by artifacts.spark_kafka_libs, on pyspark 4.3.0.

Three submissions: records + boundaries on the clean mirror (pass); records + boundaries with
tampered partitions on B (fail, named); checksums only over whole topics (fail on the tampered pairs).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from mirrorbook.devstack.workload import load, record
from mirrorbook.kafka.types import TP
from mirrorbook.parity import collector, submit
from tests.helpers import wait_mirrored
from tests.spark.conftest import CONNECT_ONLY, PARTITIONS, RECORDS, SKIP_BY, Scene

pytestmark = pytest.mark.spark
MASTER = "local[2]"
BASE = 10  # records per partition of the tampered topic before tampering


@dataclass(frozen=True)
class Tampered:
    topic: str
    remote: str


def _produce(bootstrap: str, topic: str, partition: int, records: list[tuple[tuple[bytes, bytes, list], int]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for (key, value, headers), ts in records:
        producer.produce(topic, key=key, value=value, headers=headers, partition=partition, timestamp=ts)
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def tampered(devstack, admin_a, admin_b, bootstrap_a, bootstrap_b) -> Tampered:
    """Partition 0: a foreign record on B. Partition 1: a copy of the record A writes at offset 12, produced on
    B before A writes offsets 10-14, so B holds it twice, the first time out of order."""
    topic = f"faulty-{uuid.uuid4().hex[:6]}"
    remote = f"A.{topic}"
    load(bootstrap_a, [topic], 2, BASE)
    wait_mirrored(admin_a, admin_b, topic, remote)
    now = int(time.time() * 1000)
    _produce(bootstrap_b, remote, 0, [(record(topic, 0, BASE, origin="foreign"), now)])
    _produce(bootstrap_b, remote, 1, [(record(topic, 1, 12, origin="workload"), now)])
    _produce(bootstrap_a, topic, 1, [(record(topic, 1, seq, origin="workload"), now if seq == 12 else now + 1 + seq)
                                     for seq in range(BASE, BASE + 5)])
    wait_mirrored(admin_a, admin_b, topic, remote)
    highs = admin_b.high_watermarks([TP(remote, 0), TP(remote, 1)])
    assert highs == {TP(remote, 0): BASE + 1, TP(remote, 1): BASE + 6}
    return Tampered(topic, remote)


def _ranges(admin_a, admin_b, topic: str, remote: str) -> list[collector.RecordRange]:
    src = admin_a.watermarks(admin_a.partitions([topic]))
    tgt = admin_b.watermarks(admin_b.partitions([remote]))
    return collector.whole_topic_ranges(topic, remote, src, tgt)


@CONNECT_ONLY
def test_clean_mirror_and_group_boundaries_pass(run_job, scene: Scene, admin_a, admin_b, bootstrap_a, bootstrap_b,
                                                tmp_path: Path):
    snap = collector.write_record_snapshot(
        tmp_path / "snap", _ranges(admin_a, admin_b, scene.topic, scene.remote),
        scene.boundaries("g-precise") + scene.boundaries("g-mm2"))
    spec = submit.record_parity_job(bootstrap_a, bootstrap_b, tmp_path / "out", snapshot=snap, master=MASTER)
    assert any("spark-sql-kafka-0-10_2.13-4.2.0.jar" in j for j in spec.jars)
    summary = run_job(spec)

    assert summary.exit_code == 0 and summary.passed, summary.failure_message()
    assert summary.totals["matched"] == PARTITIONS * RECORDS
    assert summary.totals["missing"] == summary.totals["extra"] == summary.totals["order_violations"] == 0
    pairs = pq.read_table(summary.outputs["pairs"]).to_pylist()
    assert len(pairs) == PARTITIONS and all(p["checksum_equal"] and p["source_records"] == RECORDS for p in pairs)
    bounds = {(b["group"], b["source_partition"]): b for b in pq.read_table(summary.outputs["boundaries"]).to_pylist()}
    for p in range(PARTITIONS):
        precise = bounds[(scene.groups["g-precise"], p)]
        # The record at T on B is the record at C on A.
        assert (precise["status"], precise["exact"], precise["reread"], precise["skip"]) == ("OK", True, 0, 0)
        assert precise["next_source"]["hash"] == precise["next_target"]["hash"]
        pos = scene.positions[("g-mm2", p)]
        mm2 = bounds[(scene.groups["g-mm2"], p)]
        assert (mm2["reread"], mm2["skip"]) == (pos.true - pos.translated, 0)
        assert not mm2["failed"]


def test_tampered_mirror_and_skipping_group_fail_named(run_job, capfd, scene: Scene, tampered: Tampered, admin_a, admin_b,
                                                       bootstrap_a, bootstrap_b, tmp_path: Path):
    t = tampered
    foreign = collector.GroupBoundary(group="g-foreign", source_topic=t.topic, source_partition=0,
                                      source_committed=BASE, target_topic=t.remote, target_partition=0,
                                      target_offset=BASE)  # A is at its end; on B the foreign record is next
    snap = collector.write_record_snapshot(
        tmp_path / "snap",
        _ranges(admin_a, admin_b, scene.topic, scene.remote) + _ranges(admin_a, admin_b, t.topic, t.remote),
        scene.boundaries("g-skip") + [foreign])
    summary = run_job(submit.record_parity_job(bootstrap_a, bootstrap_b, tmp_path / "out", snapshot=snap, master=MASTER))

    assert summary.exit_code == 1 and summary.status == "failed", summary.failure_message()
    diffs = sorted((d["target_partition"], d["kind"], d["source_offset"], d["target_offset"])
                   for d in pq.read_table(summary.outputs["differences"]).to_pylist())
    assert diffs == [(0, "EXTRA", None, BASE), (1, "EXTRA", None, 13), (1, "ORDER", 12, BASE)]
    pairs = {(p["source_topic"], p["source_partition"]): p for p in pq.read_table(summary.outputs["pairs"]).to_pylist()}
    assert not pairs[(t.topic, 0)]["checksum_equal"] and pairs[(t.topic, 1)]["order_violations"] == 1
    assert not any(pairs[(scene.topic, p)]["failed"] for p in range(PARTITIONS))

    message = summary.failure_message()
    assert f"pair {t.topic}-0 -> {t.remote}-0: counts/checksums differ" in message and "1 extra on the target" in message
    assert (f"record {t.topic}-1 -> {t.remote}-1: ORDER: source offset 12 is at target offset {BASE}, "
            f"before its predecessor's 12") in message
    assert f"record {t.topic}-0 -> {t.remote}-0: EXTRA on the target: target offset {BASE}" in message
    for p in range(PARTITIONS):
        pos = scene.positions[("g-skip", p)]
        assert (f"group {scene.groups['g-skip']} {scene.topic}-{p} -> {scene.remote}-{p}: SKIP {SKIP_BY} "
                f"(source committed {pos.committed}, target committed {pos.true + SKIP_BY}, "
                f"true target offset {pos.true})") in message  # the truth, found from the records
    assert f"group g-foreign {t.topic}-0 -> {t.remote}-0: MISMATCH" in message
    # spark-submit's own log; over Spark Connect the job's lines go to this process's stderr
    log = Path(summary.log).read_text() if summary.log else capfd.readouterr().err
    assert "PARITY-FAIL record_parity group g-foreign" in log


@CONNECT_ONLY
def test_checksums_over_whole_topics_name_the_tampered_partitions(run_job, scene: Scene, tampered: Tampered, bootstrap_a,
                                                                   bootstrap_b, tmp_path: Path):
    t = tampered
    summary = run_job(submit.record_parity_job(bootstrap_a, bootstrap_b, tmp_path / "out", master=MASTER,
                                            topics={scene.topic: scene.remote, t.topic: t.remote},
                                            checksums_only=True))

    assert summary.exit_code == 1 and summary.status == "failed"
    assert summary.failures_total == 2
    labels = sorted(f.label for f in summary.failures)
    assert labels == [f"pair {t.topic}-0 -> {t.remote}-0", f"pair {t.topic}-1 -> {t.remote}-1"]
    pairs = {(p["source_topic"], p["source_partition"]): p for p in pq.read_table(summary.outputs["pairs"]).to_pylist()}
    assert (pairs[(t.topic, 1)]["source_records"], pairs[(t.topic, 1)]["target_records"]) == (BASE + 5, BASE + 6)
    assert all(pairs[(scene.topic, p)]["checksum_equal"] for p in range(PARTITIONS))
    assert "differences" not in summary.outputs
