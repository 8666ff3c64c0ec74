"""Records a flow can no longer replicate, as the health check finds them. Pure: from what a pass read and the
flow's previous health sample — no client, no clock (`now` is given).

- DATA_LOSS: on a source partition, the MirrorSourceConnector's next offset (its last replicated offset + 1,
  read through the replication backend) is below the partition's log start. Retention or delete-records took
  records before MM2 read them: they are on neither cluster any more. When the connector reads on, its
  consumer is moved to the log start (MM2 resets to earliest) and replication goes on without them. Counted
  in records, not offsets (`gap_records`): the deleted offsets cannot be read any more, so what the previous
  pass read of them (its lag, counted in records: `mm2/lag.py`) bounds them — transaction markers and aborted
  records take offsets and are no loss. Offsets the previous pass did not read count one record each on a
  partition that never showed an offset without a record; on one that did (a transactional topic), they
  bound the count from above only. The ledger counts what is proven (`records`) and keeps the upper bound
  beside it (`records_high`).
- TARGET_RESET: a mirrored topic on the target whose end offset went backwards (truncated), whose topic id
  changed (deleted and created again) or which is gone, since the previous sample. The copies it held are gone
  from the target and MM2 does not copy them again (its offsets are past them). Counted from the previous
  sample's log start and end of each partition; the pass that sees the change reports it.

Both fail the check. The ledger — records lost so far per (cause, topic, partition) — is carried from sample to
sample, so a record is counted once however many passes see the same gap (a gap is counted up to the highest
log start counted before: `through`). Its totals are what `mirrorbook_flow_records_lost_total` exports.

What a pass cannot see: a gap that opened and closed between two passes (the connector read on past it before
the next pass) leaves no trace in the connector's offsets. And Connect commits source offsets every
`offset.flush.interval.ms`: a topic whose retention is shorter than that can show a gap for records MM2 did
copy (their copies are on the target).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from mirrorbook.mm2.flows import FlowStatus
from mirrorbook.mm2.lag import read_part, shows_gaps

DATA_LOSS, TARGET_RESET = "DATA_LOSS", "TARGET_RESET"
Cause = Literal["data_loss", "target_reset"]
SHOWN = 5  # partitions named in one message


class TargetTopic(BaseModel):
    """A mirrored topic on the target as one pass saw it: what the next pass compares with."""

    topic: str
    topic_id: str | None = None
    partitions: list[tuple[int, int]]  # (log start, end offset), by partition number


class SourceGap(BaseModel):
    """DATA_LOSS on one source partition, as this pass sees it."""

    topic: str
    partition: int
    next_offset: int  # the source connector's next offset
    log_start: int
    new: int = 0  # of the records proven lost in the gap, those no earlier pass counted
    low: int | None = None  # records in the gap: at least (None: one per offset)
    high: int | None = None  # ... and at most
    new_high: int | None = None  # the most records `new` can be (None: `new`)

    @property
    def offsets(self) -> int:
        return self.log_start - self.next_offset

    @property
    def records(self) -> int:
        """The records proven lost in the gap."""
        return self.offsets if self.low is None else self.low

    @property
    def records_high(self) -> int:
        return self.offsets if self.high is None else self.high

    def describe(self) -> str:
        n = f"{self.records}" if self.records == self.records_high else f"{self.records}–{self.records_high}"
        return f"{self.topic}-{self.partition} {n} (offsets {self.next_offset}..{self.log_start - 1})"


Change = Literal["re-created", "truncated", "deleted"]


class TargetReset(BaseModel):
    """TARGET_RESET of one target partition, found by comparing with the previous sample."""

    topic: str  # on the target
    partition: int
    change: Change
    records: int  # copies gone from the target
    before: tuple[int, int]  # (log start, end) at the previous sample
    end_now: int | None = None

    def describe(self) -> str:
        return f"{self.topic}-{self.partition} {self.records}"


class LedgerRow(BaseModel):
    """Records lost so far on one partition (a source partition for data_loss, a target one for target_reset)."""

    cause: Cause
    topic: str
    partition: int
    records: int  # proven lost
    records_high: int | None = None  # at most this many (None: exactly `records`)
    through: int | None = None  # data_loss: the highest source log start counted
    first_at: datetime
    last_at: datetime

    @property
    def key(self) -> tuple[str, str, int]:
        return self.cause, self.topic, self.partition


class FlowLoss(BaseModel):
    """What a pass found of a flow's lost records, and the ledger it leaves for the next pass."""

    gaps: list[SourceGap] = Field(default_factory=list)
    resets: list[TargetReset] = Field(default_factory=list)
    ledger: list[LedgerRow] = Field(default_factory=list)
    target_topics: list[TargetTopic] | None = None  # None: the target's topics were not read this pass
    compared_with: datetime | None = None  # the previous sample's time (None: nothing to compare with)

    def total(self, cause: Cause | None = None) -> int:
        return sum(r.records for r in self.ledger if cause in (None, r.cause))

    def sample(self) -> dict[str, Any]:
        """What the flow's metrics sample keeps (lists, not dicts keyed by topic: the audit store masks values
        under secret-looking keys)."""
        out: dict[str, Any] = {
            "data_loss": [g.model_dump() | {"records": g.records} for g in self.gaps],
            "target_resets": [r.model_dump() for r in self.resets],
            "lost": [r.model_dump(mode="json") for r in self.ledger],
            "records_lost_total": self.total(),
        }
        if self.target_topics is not None:
            out["target_topics"] = [t.model_dump() for t in self.target_topics]
        return out

    @classmethod
    def from_sample(cls, metrics: dict[str, Any]) -> "FlowLoss":
        """The loss a health sample recorded (rows an older or damaged sample holds wrongly are left out)."""
        return cls(gaps=_rows(SourceGap, metrics.get("data_loss")),
                   resets=_rows(TargetReset, metrics.get("target_resets")),
                   ledger=_rows(LedgerRow, metrics.get("lost")),
                   target_topics=_rows(TargetTopic, metrics["target_topics"]) if "target_topics" in metrics else None)

    def violations(self, flow: str, source: str, target: str) -> list[str]:
        out = []
        if self.gaps:
            low, high = sum(g.records for g in self.gaps), sum(g.records_high for g in self.gaps)
            n = f"{low}" if low == high else (f"between {low} and {high}" + " (the partitions carry transactions: "
                                              "markers and aborted records take offsets too, and deleted offsets "
                                              "cannot be read)")
            out.append(f"flow {flow}: {DATA_LOSS} — {n} record(s) were deleted from "
                       f"{source} (retention or delete-records) before MM2 replicated them; they are on neither "
                       f"cluster: {_listed([g.describe() for g in self.gaps])}")
        by_topic: dict[tuple[str, str], list[TargetReset]] = {}
        for r in self.resets:
            by_topic.setdefault((r.topic, r.change), []).append(r)
        since = f" since the check at {self.compared_with.isoformat()}" if self.compared_with else ""
        for (topic, change), rows in sorted(by_topic.items()):
            what = {"re-created": "was deleted and created again (its topic id changed)",
                    "truncated": "was truncated (its end offset went backwards)", "deleted": "was deleted"}[change]
            out.append(f"flow {flow}: {TARGET_RESET} — {topic} on {target} {what}{since}: "
                       f"{sum(r.records for r in rows)} copied record(s) are gone from {target} and MM2 will not "
                       f"copy them again: {_listed([r.describe() for r in rows])}")
        return out

    def lines(self, flow: str) -> list[str]:
        if not self.ledger:
            return []
        parts = ", ".join(f"{cause} {n}" for cause in ("data_loss", "target_reset") if (n := self.total(cause)))
        return [f"{flow}: records lost so far {self.total()} ({parts})"]


def _rows(model: type[Any], raw: Any) -> list[Any]:
    out = []
    for row in raw if isinstance(raw, list) else []:
        try:
            out.append(model.model_validate(row))
        except ValidationError:
            continue
    return out


def _listed(items: list[str]) -> str:
    return ", ".join(items[:SHOWN]) + (f" (+{len(items) - SHOWN} more partition(s))" if len(items) > SHOWN else "")


def _span(a: tuple[int, int], b: tuple[int, int]) -> int:
    """How many offsets two ranges share."""
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def gap_records(start: int, end: int, before: dict[str, Any] | None, now: dict[str, Any] | None) -> tuple[int, int]:
    """(at least, at most) records in the deleted source offsets [start, end), from what the previous pass counted
    of the partition (`before`: its sampled lag row, n records in [s, e)) and what this pass counts (`now`: m
    records in [q0, q1), above the gap). The gap's share of the n records is n less those outside it: the ones
    this pass still sees there (its count, less what it may have counted beyond e) and at most one per offset
    neither pass tells about. Offsets of the gap the previous pass did not read count one record each on a
    partition never seen with offsets without records; else they bound from above only."""
    gap = (start, max(start, end))
    offsets = gap[1] - gap[0]
    lo = hi = covered = 0
    read = read_part(before)
    if read is not None and offsets:
        s, e, n = read
        covered = _span(gap, (s, e))
        if covered:
            seen, beyond, shared = read_part(now), 0, 0  # this pass's count, and how much of it lies in [s, e)
            if seen is not None:
                q0, q1, m = seen
                shared, beyond = _span((q0, q1), (s, e)), (q1 - q0) - _span((q0, q1), (s, e))
                both = (max(0, m - beyond), min(m, shared))  # records of [s, e) outside the gap this pass saw
            else:
                both = (0, 0)
            unknown = (e - s) - covered - shared  # offsets of [s, e) outside the gap neither pass counted
            lo = max(0, n - both[1] - unknown)
            hi = min(covered, max(0, n - both[0]))
    rest = offsets - covered
    plain = not shows_gaps(before) and not shows_gaps(now)
    return lo + (rest if plain else 0), max(lo, hi) + rest


def source_gaps(status: FlowStatus, ledger: dict[tuple[str, str, int], LedgerRow],
                previous: dict[str, Any] | None = None) -> list[SourceGap]:
    """Every source partition whose connector's next offset is below its log start, in records (`gap_records`);
    `new` counts what the ledger has not counted yet (only the part of the gap above its `through`).
    `previous`: the previous sample's metrics (its lag rows)."""
    before = {(r.get("topic"), r.get("partition")): r for r in (previous or {}).get("partitions") or []
              if isinstance(r, dict)}
    out = []
    for p in status.lag:
        if p.replicated_offset is None or p.log_start is None or p.log_start <= p.replicated_offset + 1:
            continue
        gap = SourceGap(topic=p.topic, partition=p.partition, next_offset=p.replicated_offset + 1,
                        log_start=p.log_start)
        prev, now = before.get((p.topic, p.partition)), p.model_dump()
        gap.low, gap.high = gap_records(gap.next_offset, gap.log_start, prev, now)
        counted = ledger.get(("data_loss", p.topic, p.partition))
        start = max(gap.next_offset, counted.through) if counted and counted.through is not None else gap.next_offset
        gap.new, gap.new_high = gap_records(start, gap.log_start, prev, now)
        out.append(gap)
    return out


def target_resets(before: list[TargetTopic] | None, now: list[TargetTopic] | None,
                  listing: set[str] | None) -> list[TargetReset]:
    """Each partition of a topic the previous sample saw that is now truncated, re-created or gone. Nothing
    is compared when either side was not read (`listing`: the target's topic names now)."""
    if before is None or now is None or listing is None:
        return []
    seen = {t.topic: t for t in now}
    out = []
    for old in before:
        new = seen.get(old.topic)
        change: Change
        if old.topic not in listing:
            change = "deleted"
        elif new is None:
            continue  # there, but not a topic this flow mirrors any more: not ours to judge
        elif old.topic_id and new.topic_id and old.topic_id != new.topic_id:
            change = "re-created"
        else:
            change = "truncated"
        for p, (start, end) in enumerate(old.partitions):
            now_end = new.partitions[p][1] if new is not None and p < len(new.partitions) else None
            if change == "truncated":
                if now_end is None or now_end >= end:
                    continue
                records = end - max(now_end, start)
            else:
                records = end - start
            out.append(TargetReset(topic=old.topic, partition=p, change=change, records=max(0, records),
                                   before=(start, end), end_now=now_end if change != "deleted" else None))
    return out


def assess(status: FlowStatus, target_topics: list[TargetTopic] | None, listing: set[str] | None,
           previous: dict[str, Any] | None, previous_at: datetime | None, now: datetime) -> FlowLoss:
    """This pass's DATA_LOSS and TARGET_RESET findings for one flow, and its ledger brought up to date."""
    before = FlowLoss.from_sample(previous) if previous else FlowLoss()
    ledger = {r.key: r for r in before.ledger}
    gaps = source_gaps(status, ledger, previous)
    resets = target_resets(before.target_topics, target_topics, listing)

    def count(cause: Cause, topic: str, partition: int, records: int, through: int | None = None,
              high: int | None = None) -> None:
        high = records if high is None else high
        row = ledger.get((cause, topic, partition))
        if row is None:
            ledger[(cause, topic, partition)] = LedgerRow(cause=cause, topic=topic, partition=partition,
                                                          records=records, records_high=high if high != records
                                                          else None, through=through, first_at=now, last_at=now)
            return
        total_high = (row.records if row.records_high is None else row.records_high) + high
        row.records += records
        row.records_high = total_high if total_high != row.records else None
        row.last_at = now
        if through is not None:
            row.through = max(through, row.through or through)

    for g in gaps:
        if g.new or g.new_high:
            count("data_loss", g.topic, g.partition, g.new, g.log_start, g.new_high)
    for r in resets:
        if r.records:
            count("target_reset", r.topic, r.partition, r.records)
    return FlowLoss(gaps=gaps, resets=resets, ledger=sorted(ledger.values(), key=lambda r: r.key),
                    target_topics=target_topics if target_topics is not None else before.target_topics,
                    compared_with=previous_at if before.target_topics is not None else None)
