"""The Parquet schemas of the parity snapshots and results — the one place they are defined for Python.

The Spark apps cannot import mirrorbook, so spark_apps/parity_common.py declares the same input
schemas as Spark StructTypes; tests/spark/test_schemas.py keeps the two identical.

Inputs (written by `mirrorbook.parity.collector`):
- EXPECTED: where a runbook step says each group's offset must be. `true_offset` is the proven
  position of the record the group reads next (precise translation); when null the check compares
  against `expected_offset`. `source_*` record where the expectation came from (provenance only).
- ACTUAL: committed offsets as read from a cluster (KafkaAdmin.committed_offsets).
- WATERMARKS: low/high watermark per partition, so offsets outside the log are caught.
- RANGES: partition pairs (source topic-partition ↔ mirrored target topic-partition) and the offset
  ranges [start, end) record parity reads on each side; null start/end = earliest/latest.
  `source_stable_end` marks a source partition that carries transactions: its last stable offset when the
  proof was prepared, up to which record parity also reads it read_committed to tell its aborted records apart.
- BOUNDARIES: for record parity, a group's committed offset C on the source and T committed on the
  target, both read when the proof is prepared (not taken from the plan; the plan's offset rides
  along as `plan_offset`): the record at T must be the record at C.

Results (written by the apps; read them with pyarrow.parquet.read_table):
- GROUP_RESULT: one row per (cluster, group, topic, partition), classified.
"""

from __future__ import annotations

import pyarrow as pa

EXPECTED = pa.schema([
    pa.field("cluster", pa.string(), nullable=False),
    pa.field("group", pa.string(), nullable=False),
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("expected_offset", pa.int64(), nullable=False),
    pa.field("true_offset", pa.int64()),
    pa.field("source_cluster", pa.string()),
    pa.field("source_topic", pa.string()),
    pa.field("source_partition", pa.int32()),
    pa.field("source_committed", pa.int64()),
])

ACTUAL = pa.schema([
    pa.field("cluster", pa.string(), nullable=False),
    pa.field("group", pa.string(), nullable=False),
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("committed_offset", pa.int64(), nullable=False),
])

WATERMARKS = pa.schema([
    pa.field("cluster", pa.string(), nullable=False),
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("low", pa.int64(), nullable=False),
    pa.field("high", pa.int64(), nullable=False),
])

RANGES = pa.schema([
    pa.field("source_topic", pa.string(), nullable=False),
    pa.field("source_partition", pa.int32(), nullable=False),
    pa.field("source_start", pa.int64()),
    pa.field("source_end", pa.int64()),
    pa.field("target_topic", pa.string(), nullable=False),
    pa.field("target_partition", pa.int32(), nullable=False),
    pa.field("target_start", pa.int64()),
    pa.field("target_end", pa.int64()),
    pa.field("source_stable_end", pa.int64()),
])

BOUNDARIES = pa.schema([
    pa.field("group", pa.string(), nullable=False),
    pa.field("source_topic", pa.string(), nullable=False),
    pa.field("source_partition", pa.int32(), nullable=False),
    pa.field("source_committed", pa.int64(), nullable=False),
    pa.field("target_topic", pa.string(), nullable=False),
    pa.field("target_partition", pa.int32(), nullable=False),
    pa.field("target_offset", pa.int64()),
    pa.field("plan_offset", pa.int64()),
])

INPUTS: dict[str, pa.Schema] = {"expected": EXPECTED, "actual": ACTUAL, "watermarks": WATERMARKS,
                                "ranges": RANGES, "boundaries": BOUNDARIES}

GROUP_RESULT = pa.schema([
    *[EXPECTED.field(n) for n in ("cluster", "group", "topic", "partition")],
    pa.field("expected_offset", pa.int64()),
    pa.field("true_offset", pa.int64()),
    pa.field("reference_offset", pa.int64()),
    pa.field("reference_kind", pa.string()),     # "true" | "expected" | null (UNEXPECTED)
    pa.field("committed_offset", pa.int64()),
    pa.field("low", pa.int64()),
    pa.field("high", pa.int64()),
    pa.field("status", pa.string()),             # OK | RE-READ | SKIP | MISSING | UNEXPECTED
    pa.field("n", pa.int64()),                   # records re-read / skipped (0 otherwise)
    pa.field("classification", pa.string()),     # "OK", "RE-READ 59", "SKIP 7", "MISSING", "UNEXPECTED"
    pa.field("out_of_range", pa.bool_()),
    pa.field("failed", pa.bool_()),
    pa.field("reason", pa.string()),             # set on failed rows
    *[EXPECTED.field(n) for n in ("source_cluster", "source_topic", "source_partition", "source_committed")],
    pa.field("input_error", pa.string()),        # duplicate/null input rows for the key: the job is no verdict
])

STATUSES = ("OK", "RE-READ", "SKIP", "MISSING", "UNEXPECTED")
