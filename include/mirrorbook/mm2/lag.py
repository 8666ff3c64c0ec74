"""Replication lag in records: what the source holds that MM2 has not replicated yet, counted as a consumer
counts (`kafka.records`), not as offsets.

By offsets, lag = end offset − the source connector's next offset. On a partition written in transactions that
over-counts: markers and aborted records take offsets (a fully mirrored partition whose last offset is a commit
marker lags "1" forever), and MM2 copies records, never markers. The offsets figure is exact where it is 0 and
an upper bound elsewhere, so only a partition whose offsets lag is above what the caller needs to know
(`above`: 0 for a figure, a gate's `max_lag` for a gate — a partition within it by offsets is within it by
records) is read, from the connector's next offset to the end, bounded (`kafka.records`).

A row then says: `lag` — at most this many records (exactly, where `lag_low` equals it); `lag_low` — at least
this many; `offset_lag` — the offsets figure. Aborted records are not lag: MM2's default source consumer copies
them (`read_uncommitted`), but no `read_committed` consumer on either cluster reads them as data, and whether it
copied them changes nothing a failover must wait for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.records import PER_PARTITION, count_records
from mirrorbook.kafka.types import TP

if TYPE_CHECKING:
    from mirrorbook.mm2.flows import PartitionLag

STATUS_TOTAL = 100_000  # offsets one status reads at most, over all its partitions


def range_of(row: "PartitionLag") -> tuple[int, int]:
    """The source offsets a row's lag covers: from the connector's next offset (or the log start) to the end (none
    for a row without its offsets lag: a sample older than it)."""
    return row.high_watermark - (row.offset_lag or 0), row.high_watermark


def count_lag(admin: KafkaAdmin, rows: Iterable["PartitionLag"], *, above: int = 0,
              per_partition: int = PER_PARTITION, total: int = STATUS_TOTAL) -> list["PartitionLag"]:
    """`rows` with their lag in records established wherever their offsets lag exceeds `above`."""
    rows = list(rows)
    wanted = {TP(r.topic, r.partition): range_of(r) for r in rows if (r.offset_lag or 0) > above}
    counts = count_records(admin, wanted, per_partition=per_partition, total=total) if wanted else {}
    out = []
    for r in rows:
        c = counts.get(TP(r.topic, r.partition))
        out.append(r if c is None else r.model_copy(update={"lag": c.high, "lag_low": c.records}))
    return out


def read_part(row: Mapping[str, Any] | None) -> tuple[int, int, int] | None:
    """(start, end, records) of a sampled lag row (`FlowStatus.metrics`' partitions, or a replication sample's):
    the source offsets its count covers — from the connector's next offset to where the read stopped — and the
    records counted there. None for a row sampled before lag was counted in records, or that read nothing."""
    if row is None:
        return None
    try:
        hw, offsets, lag, low = (int(row[k]) for k in ("high_watermark", "offset_lag", "lag", "lag_low"))
    except (KeyError, TypeError, ValueError):
        return None
    start, end = hw - offsets, hw - (lag - low)
    return (start, end, low) if end > start else None


def shows_gaps(row: Mapping[str, Any] | None) -> bool:
    """Whether a sampled lag row counted fewer records than offsets (markers, aborted records, compaction)."""
    try:
        return row is not None and row.get("offset_lag") is not None and int(row["lag"]) < int(row["offset_lag"])
    except (KeyError, TypeError, ValueError):
        return False


__all__ = ["count_lag", "range_of", "read_part", "shows_gaps"]
