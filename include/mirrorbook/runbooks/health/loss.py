"""Records a flow can no longer replicate, as the health check finds them. Pure: from what a pass read and the
flow's previous health sample — no client, no clock (`now` is given).

- DATA_LOSS: on a source partition, the MirrorSourceConnector's next offset (its last replicated offset + 1,
  read through the replication backend) is below the partition's log start. Retention or delete-records took
  records before MM2 read them: they are on neither cluster any more. When the connector reads on, its
  consumer is moved to the log start (MM2 resets to earliest) and replication goes on without them. Counted
  exactly while the gap shows: log start - next offset.
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
    new: int = 0  # of the records in the gap, those no earlier pass counted

    @property
    def records(self) -> int:
        return self.log_start - self.next_offset

    def describe(self) -> str:
        return f"{self.topic}-{self.partition} {self.records} (offsets {self.next_offset}..{self.log_start - 1})"


class TargetReset(BaseModel):
    """TARGET_RESET of one target partition, found by comparing with the previous sample."""

    topic: str  # on the target
    partition: int
    change: Literal["re-created", "truncated", "deleted"]
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
    records: int
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
        return cls(gaps=_rows(SourceGap, metrics.get("data_loss")), resets=_rows(TargetReset, metrics.get("target_resets")),
                   ledger=_rows(LedgerRow, metrics.get("lost")),
                   target_topics=_rows(TargetTopic, metrics["target_topics"]) if "target_topics" in metrics else None)

    def violations(self, flow: str, source: str, target: str) -> list[str]:
        out = []
        if self.gaps:
            out.append(f"flow {flow}: {DATA_LOSS} — {sum(g.records for g in self.gaps)} record(s) were deleted from "
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


def source_gaps(status: FlowStatus, ledger: dict[tuple[str, str, int], LedgerRow]) -> list[SourceGap]:
    """Every source partition whose connector's next offset is below its log start; `new` counts what the
    ledger has not counted yet (only the part of the gap above its `through`)."""
    out = []
    for p in status.lag:
        if p.replicated_offset is None or p.log_start is None or p.log_start <= p.replicated_offset + 1:
            continue
        gap = SourceGap(topic=p.topic, partition=p.partition, next_offset=p.replicated_offset + 1, log_start=p.log_start)
        counted = ledger.get(("data_loss", p.topic, p.partition))
        start = max(gap.next_offset, counted.through) if counted and counted.through is not None else gap.next_offset
        gap.new = max(0, gap.log_start - start)
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
    gaps = source_gaps(status, ledger)
    resets = target_resets(before.target_topics, target_topics, listing)

    def count(cause: Cause, topic: str, partition: int, records: int, through: int | None = None) -> None:
        row = ledger.get((cause, topic, partition))
        if row is None:
            ledger[(cause, topic, partition)] = LedgerRow(cause=cause, topic=topic, partition=partition,
                                                          records=records, through=through, first_at=now, last_at=now)
            return
        row.records += records
        row.last_at = now
        if through is not None:
            row.through = max(through, row.through or through)

    for g in gaps:
        if g.new:
            count("data_loss", g.topic, g.partition, g.new, g.log_start)
    for r in resets:
        if r.records:
            count("target_reset", r.topic, r.partition, r.records)
    return FlowLoss(gaps=gaps, resets=resets, ledger=sorted(ledger.values(), key=lambda r: r.key),
                    target_topics=target_topics if target_topics is not None else before.target_topics,
                    compared_with=previous_at if before.target_topics is not None else None)
