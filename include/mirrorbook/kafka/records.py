"""Counting records, not offsets, in offset ranges: bounded reads, and only where offsets cannot tell.

A transactional producer's commit and abort markers take an offset each and are never records; its aborted
records take offsets too and no `read_committed` consumer ever sees them; compaction leaves offsets without
records. So "end offset − next offset" over-counts what a consumer reads (a partition whose last offset is a
marker lags "1" by offsets forever). A record here is what a `read_committed` consumer receives: committed (or
non-transactional) data. Aborted records are never counted — not as lag, not as lost, not as re-read.

`count_records` establishes the count by reading (`read_committed`), which costs a fetch of the range, so:
- only ranges the caller could not settle by offsets are read (an empty range is 0; a caller that only needs
  to know "at most N" passes the ranges whose offsets exceed N);
- a range is read up to the partition's last stable offset (LSO): offsets in an open transaction may yet
  become records or not, and are left unread (counted only in the upper bound);
- at most `per_partition` offsets of a range, and `total` over all ranges (the shortest ranges first: those
  decide whether something is drained) are read. What is not read bounds the count from above only.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.reader import read_ranges
from mirrorbook.kafka.types import TP

PER_PARTITION = 10_000   # offsets of one range read at most
TOTAL = 200_000          # offsets read at most per call, over all ranges
READ_TIMEOUT_S = 30.0


class RecordCount(NamedTuple):
    """Committed records in source offsets [start, end): exactly `records` in [start, read_to), and at most one
    per offset in [read_to, end) (not read: an open transaction, or past the read budget)."""

    start: int
    end: int
    read_to: int
    records: int

    @property
    def exact(self) -> bool:
        return self.read_to >= self.end

    @property
    def high(self) -> int:
        """The most records the range can hold."""
        return self.records + max(0, self.end - self.read_to)

    @property
    def gaps(self) -> bool:
        """Whether the part read holds offsets without a record (markers, aborted records, compaction)."""
        return self.records < self.read_to - self.start

    @classmethod
    def unread(cls, start: int, end: int) -> "RecordCount":
        return cls(start, end, start, 0)


def plan_reads(ranges: Mapping[TP, tuple[int, int]], stable: Mapping[TP, int], *, per_partition: int = PER_PARTITION,
               total: int = TOTAL) -> dict[TP, tuple[int, int]]:
    """The part of each range to read: up to the partition's last stable offset, at most `per_partition`
    offsets, and `total` over all, the shortest ranges first. Pure (the property tests drive it)."""
    out: dict[TP, tuple[int, int]] = {}
    budget = total
    for tp, (s, e) in sorted(ranges.items(), key=lambda kv: (kv[1][1] - kv[1][0], kv[0])):
        stop = min(e, stable.get(tp, e), s + per_partition, s + max(0, budget))
        if stop > s:
            out[tp] = (s, stop)
            budget -= stop - s
    return out


def count_records(admin: KafkaAdmin, ranges: Mapping[TP, tuple[int, int]], *, per_partition: int = PER_PARTITION,
                  total: int = TOTAL, timeout_s: float = READ_TIMEOUT_S) -> dict[TP, RecordCount]:
    """Committed records in each [start, end) (see the module docstring): one ListOffsets for the last stable
    offsets, then one read of every range's readable part."""
    ranges = {tp: (s, e) for tp, (s, e) in ranges.items() if e > s}
    if not ranges:
        return {}
    stable = admin.last_stable_offsets(ranges)
    reads = plan_reads(ranges, stable, per_partition=per_partition, total=total)
    seen = {tp: 0 for tp in reads}
    for m in read_ranges(admin.config, reads, timeout_s=timeout_s, isolation="read_committed"):
        seen[TP(m.topic(), m.partition())] += 1
    return {tp: RecordCount(s, e, reads[tp][1], seen[tp]) if tp in reads else RecordCount.unread(s, e)
            for tp, (s, e) in ranges.items()}


TAIL = 50  # offsets at a partition's end looked at for markers


def tails_with_gaps(admin: KafkaAdmin, ends: Mapping[TP, tuple[int, int]], tail: int = TAIL) -> set[TP]:
    """The partitions (log start, end) whose last `tail` offsets hold fewer records than offsets: a transactional
    producer's markers (every transaction ends with one), aborted records, compaction. One bounded read."""
    counts = count_records(admin, {tp: (max(low, high - tail), high) for tp, (low, high) in ends.items()},
                           per_partition=tail, total=tail * max(1, len(ends)))
    return {tp for tp, c in counts.items() if c.gaps or (c.exact and c.records < c.end - c.start)}


__all__ = ["RecordCount", "count_records", "plan_reads", "tails_with_gaps", "PER_PARTITION", "TOTAL", "TAIL"]
