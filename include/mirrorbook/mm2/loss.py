"""The exact RPO of an unplanned failover: per source partition, the records the source holds that were
written before the failover began and never reached the target. Pure: the reads happen in
`runbooks/rpo.py`.

What "never reached the target" means, from what the failover kept (`AtFailover`) and the source's log
once it is reachable again:

- `replicated`: the source connector's last replicated offset as Connect kept it at the failover. MM2
  commits it only after the target acknowledged the record, but flushes it on an interval: records
  after it may have reached the target too. So it is where the search starts, not the answer.
- `target_end`: the target partition's end offset at the failover. Its last record below that end
  is the newest copy MM2 wrote before the flow was stopped; MM2 copies a partition in order, so every
  source record up to that record's original reached the target, and none after it.
- the original is found by content (key, value, headers, timestamp — what MM2 copies) among the source
  records from `replicated` on, aborted ones included (MM2's default source consumer copies them): exactly one
  match in the fully read range proves it (`unique-match`).
- `cutoff`: the first source offset whose timestamp is at or after the failover's start (Kafka's
  offsets-for-times; the log end when none is). Records from there on were written after the failover
  began (stragglers, or producers that reconnected once the source returned): not failover loss.

The loss is the committed records in (original, cutoff) — transaction markers and aborted records take offsets
and are no loss. Counted exactly where they were read; the source's log
start above the original (retention or compaction deleted records since) and ranges too long to read
leave a bounded count (`Count`), never a guess. Anything unproven (no copy on the target to look for,
the copy not found, found twice) bounds the figure by Connect's offset and says why.
"""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import BaseModel

from mirrorbook.mm2.counts import Count
from mirrorbook.mm2.lag import read_part
from mirrorbook.mm2.precise import Marks, PartitionData, Rec

MAX_READ = 100_000  # source records read per partition; beyond, the count is bounded by offsets
UNIQUE, NOTHING_REPLICATED, NOT_PROVEN = "unique-match", "nothing-replicated", "not-proven"


class AtFailover(BaseModel):
    """One source partition as the failover left it (kept in the audit with the RPO bound)."""

    replicated: int          # Connect's last replicated source offset; -1: none
    target_end: int          # the target partition's end offset; 0: it never held a record


class PartitionLoss(BaseModel):
    records: Count           # written before the failover began, never on the target
    reached: int | None      # the last source offset proven to be on the target (-1: none); None: not proven
    cutoff: int              # the first source offset written at or after the failover's start
    rule: str
    note: str | None = None


def unreplicated_at_least(row: Mapping[str, Any], replicated: int) -> int:
    """A lower bound, with the source gone, of one partition's records that never reached the target: those a
    sample of the partition saw on the source (`row`: its end offset then and the records counted from the
    connector's next offset on, `mm2/lag.py`) beyond `replicated`, Connect's last replicated offset now.

    Of n records counted in source offsets [s, e), at least n - (the offsets of [s, e) at or below
    `replicated`) lie beyond it (one record per offset at most): a true lower bound however many of its offsets
    are transaction markers or aborted records. A row sampled before lag was counted in records is counted by
    offsets, as it was."""
    part = read_part(row)
    if part is None:
        if row.get("offset_lag") is not None:
            return 0  # counted, and nothing read: nothing proven
        return max(0, int(row["high_watermark"]) - 1 - replicated)
    s, e, n = part
    return max(0, n - max(0, min(replicated + 1, e) - s))


def search_range(at: AtFailover, marks: Marks, cutoff: int) -> tuple[int, int]:
    """The source offsets to read: from Connect's offset (its record may be the newest copy) to the cutoff,
    at most MAX_READ of them."""
    start = max(at.replicated, marks.low)
    return start, max(start, min(cutoff, marks.high, start + MAX_READ))


def records_after(offset: int, source: PartitionData, marks: Marks, cutoff: int) -> Count:
    """Records in source offsets (offset, cutoff): those read, counted; deleted (below the log start) or
    unread offsets add to the upper bound only (compaction and transaction markers leave offsets without
    records)."""
    first, end = offset + 1, min(cutoff, marks.high)
    if first >= end:
        return Count.exact(0)
    deleted = max(0, min(marks.low, end) - first)
    start = max(first, marks.low)
    read = [(s, e) for s, e in source.ranges if s <= start < e]
    read_end = max(start, min(end, read[0][1])) if read else start
    n = source.count(start, read_end) or 0
    return Count.between(n, n + deleted + max(0, end - read_end))


def partition_loss(at: AtFailover, last_copy: Rec | None, source: PartitionData, marks: Marks,
                   cutoff: int, copied: PartitionData | None = None) -> PartitionLoss:
    """One source partition's loss, from what the failover kept, the target's newest copy at the failover
    (None: unreadable or none) and the source records read in `search_range`: `source` read committed (what is
    counted: aborted records are no loss), `copied` read uncommitted (where the newest copy's original is looked
    for: MM2's default source consumer copies aborted records too, so the newest copy may be one of them).
    Without `copied`, the original is looked for among `source`."""
    cutoff = marks.high if cutoff < 0 else cutoff

    def loss(reached: int | None, records: Count, rule: str, note: str | None = None) -> PartitionLoss:
        return PartitionLoss(records=records, reached=reached, cutoff=cutoff, rule=rule, note=note)

    if at.target_end == 0 and at.replicated < 0:
        return loss(-1, records_after(-1, source, marks, cutoff), NOTHING_REPLICATED)
    upper = records_after(at.replicated, source, marks, cutoff)
    if last_copy is None:
        return loss(None, Count.between(0, upper.high), NOT_PROVEN,
                    f"the target's newest copy (below offset {at.target_end}) could not be read: bounded by "
                    f"Connect's replicated offset {at.replicated}")
    start, end = search_range(at, marks, cutoff)
    among = copied if copied is not None else source
    matches = [r.offset for r in among.slice(start, end) if r.content == last_copy.content]
    # The original lies in [Connect's offset, cutoff): it may also be below the log start (deleted since) or
    # past what was read.
    deleted = marks.low > max(at.replicated, 0)
    read_to_end = end >= min(cutoff, marks.high) and among.covers(start, end) and source.covers(start, end)
    if len(matches) == 1 and read_to_end and not deleted:
        return loss(matches[0], records_after(matches[0], source, marks, cutoff), UNIQUE)
    if not matches:
        return loss(None, Count.between(0, upper.high), NOT_PROVEN,
                    f"the original of the target's newest copy (below offset {at.target_end}) is not among source "
                    f"offsets [{start}, {end}): bounded by Connect's replicated offset {at.replicated}")
    low = records_after(matches[-1], source, marks, cutoff).low if read_to_end else 0
    high = upper.high if deleted else records_after(matches[0], source, marks, cutoff).high
    return loss(None, Count.between(low, high), NOT_PROVEN,
                f"{len(matches)} source record(s) at offsets {matches[:5]} carry the content of the target's "
                f"newest copy" + ("" if read_to_end else f" (only [{start}, {end}) was read)")
                + (f"; records below the log start {marks.low} are deleted" if deleted else ""))
