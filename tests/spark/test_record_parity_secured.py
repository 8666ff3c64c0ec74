"""record_parity.py on the secured stack (SASL_SSL, SCRAM, a PEM CA through ssl.ca.location): the batched reader
reads both clusters with the librdkafka configs the job ships in its 0600 options file, and gives the verdict
Spark's Kafka source gives from the Java options derived from the same configs. A secured side whose librdkafka
config is not shipped falls back to the Kafka source (the summary says which reader read each side)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from mirrorbook.devstack.stack import DevStack
from mirrorbook.devstack.workload import load, record
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.config import java_client_options
from mirrorbook.parity import collector, submit
from tests.conftest import ensure_replicating
from tests.helpers import wait_mirrored

pytestmark = pytest.mark.spark
PARTITIONS, RECORDS = 3, 40


@pytest.fixture(scope="module")
def secured_mirror(secure_devstack: DevStack) -> tuple[dict, dict, str, str]:
    """A topic mirrored A -> B over SASL_SSL, then a foreign record on B's partition 1 (one EXTRA)."""
    ensure_replicating(secure_devstack)
    state = secure_devstack.require()
    a, b = state.kafka_config("A"), state.kafka_config("B")
    assert isinstance(a, dict) and isinstance(b, dict) and a["security.protocol"] == "SASL_SSL"
    topic = f"sec-{uuid.uuid4().hex[:6]}"
    remote = f"A.{topic}"
    load(a, [topic], PARTITIONS, RECORDS)
    wait_mirrored(KafkaAdmin(a), KafkaAdmin(b), topic, remote)
    producer = Producer({**b, "enable.idempotence": True})
    key, value, headers = record(topic, 1, RECORDS, origin="foreign")
    producer.produce(remote, key=key, value=value, headers=headers, partition=1, timestamp=int(time.time() * 1000))
    assert producer.flush(30) == 0
    return a, b, topic, remote


# The batched reader with its shipped config on SASL_SSL is the failover's record proof in tests/dags/test_failover.py
# (test_the_record_proof_establishes_each_group_position_from_both_clusters_not_from_the_plan); here, the fallback:
# without a shipped librdkafka config the Kafka source reads, and gives the same verdict (a cold spark-submit costs
# the suite half a minute, so each case runs once).
@pytest.mark.parametrize("reader, shipped", [("batched", False)])
def test_both_readers_prove_a_secured_mirror_alike(secured_mirror, reader: str, shipped: bool, tmp_path: Path):
    a, b, topic, remote = secured_mirror
    admin_a, admin_b = KafkaAdmin(a), KafkaAdmin(b)
    ranges = collector.whole_topic_ranges(topic, remote, admin_a.watermarks(admin_a.partitions([topic])),
                                          admin_b.watermarks(admin_b.partitions([remote])))
    snap = collector.write_record_snapshot(tmp_path / "snap", ranges)
    rdkafka = {"source_rdkafka": a, "target_rdkafka": b} if shipped else {}
    summary = submit.run(submit.record_parity_job(
        a["bootstrap.servers"], b["bootstrap.servers"], tmp_path / "out", snapshot=snap, master="local[2]",
        source_options=java_client_options(a), target_options=java_client_options(b), reader=reader, read_tasks=1,
        **rdkafka), timeout_s=600)

    used = "batched" if reader == "batched" and shipped else "kafka-source"
    assert summary.model_extra["inputs"]["readers"] == {"source": used, "target": used}
    assert summary.status == "failed", summary.failure_message()
    diffs = [(d["target_partition"], d["kind"], d["target_offset"])
             for d in pq.read_table(summary.outputs["differences"]).to_pylist()]
    assert diffs == [(1, "EXTRA", RECORDS)]
    assert summary.totals["matched"] == PARTITIONS * RECORDS
    assert (summary.totals["source_records"], summary.totals["target_records"]) == \
        (PARTITIONS * RECORDS, PARTITIONS * RECORDS + 1)
    assert b["sasl.password"] not in Path(summary.log or "").read_text()  # the secret is in no log line
    assert not (tmp_path / "out" / "kafka-options.json").exists()
