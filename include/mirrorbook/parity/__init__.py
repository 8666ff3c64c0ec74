"""Parity glue: the snapshots a runbook step collects, and the Spark jobs that judge them.

- `schemas`   the Parquet schemas of snapshots and results (one place)
- `collector` writes snapshots (expected offsets, committed offsets, watermarks, record ranges,
              group boundaries) from Python data or live clusters
- `submit`    builds the spark-submit of spark_apps/group_parity.py or record_parity.py (for the master it
              runs on), runs it locally and returns the verdict (`ParitySummary`)
- `staging`   a spark-submit to a cluster: its files through MIRRORBOOK_PARITY_URI, read back here
- `engine`    where a run's proofs run (Spark Connect, spark-submit, this worker), chosen from plain values
- `connect`   the same apps run as a Spark Connect client, snapshots sent as Arrow tables
- `local`     the group-offset classification in one process (pyarrow), for small checks and
              as the reference the Spark app is tested against
"""

from mirrorbook.parity.collector import (
    ExpectedOffset,
    GroupBoundary,
    GroupSnapshot,
    RecordRange,
    RecordSnapshot,
    collect_group_snapshot,
    unchanged,
    whole_topic_ranges,
    write_group_snapshot,
    write_record_snapshot,
)
from mirrorbook.parity.submit import (
    ParityFailed,
    ParitySummary,
    SparkJobError,
    SparkSubmitSpec,
    group_parity_job,
    record_parity_job,
    run,
)

__all__ = [
    "ExpectedOffset", "GroupBoundary", "GroupSnapshot", "RecordRange", "RecordSnapshot", "collect_group_snapshot",
    "unchanged", "whole_topic_ranges", "write_group_snapshot", "write_record_snapshot", "ParityFailed",
    "ParitySummary", "SparkJobError", "SparkSubmitSpec", "group_parity_job", "record_parity_job", "run",
]
