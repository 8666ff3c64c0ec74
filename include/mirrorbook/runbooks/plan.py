"""The translation plan a failover or failback writes: which offset each (group, partition) gets on
the new cluster, how it was obtained, and how many records the group re-reads or would skip.

The plan is computed once per run and kept in the audit's run progress (not XCom), so a cleared
and re-run task writes exactly the same offsets.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Iterable

from pydantic import BaseModel, Field

from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.internal_topics import CheckpointLog
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.precise import PreciseReport
from mirrorbook.mm2.remote_cluster_utils import group_matcher

# Groups that are plumbing, never application consumers (MM2's own groups.exclude, plus ours).
INTERNAL_GROUPS = re.compile(r"^(console-consumer-.*|connect-.*|__.*|mirrorbook-reader-.*|mirrorbook-connect-.*)$")


class PlanRow(BaseModel):
    group: str
    source_topic: str          # where the group consumed (on the cluster it leaves)
    target_topic: str          # where it will consume (on the cluster it moves to)
    partition: int
    source_offset: int | None  # its committed offset on the cluster it leaves (None: unknown, unplanned)
    offset: int                # what is written on the new cluster
    method: str                # precise:<rule> | mm2 | reverse:<rule> | fallback:earliest
    mm2_offset: int | None = None
    precise_offset: int | None = None
    re_read: int | None = None  # records the group reads again from `offset` (None: cannot be counted)
    skip: int | None = None     # records the group would never read from `offset` (must be 0)
    note: str | None = None

    @property
    def target_tp(self) -> TP:
        return TP(self.target_topic, self.partition)


class TranslationPlan(BaseModel):
    flow: str
    direction: str  # "failover" | "failback"
    mode: str
    translation: str
    from_cluster: str
    to_cluster: str
    groups: list[str]
    rows: list[PlanRow]
    computed_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    notes: list[str] = Field(default_factory=list)

    def offsets(self) -> dict[str, dict[TP, int]]:
        out: dict[str, dict[TP, int]] = {g: {} for g in self.groups}
        for r in self.rows:
            out.setdefault(r.group, {})[r.target_tp] = r.offset
        return {g: o for g, o in out.items() if o}

    def totals(self) -> dict[str, Any]:
        counted = [r for r in self.rows if r.re_read is not None]
        return {
            "groups": len({r.group for r in self.rows}),
            "partitions": len(self.rows),
            "re_read": sum(r.re_read or 0 for r in counted),
            "skipped": sum(r.skip or 0 for r in self.rows if r.skip is not None),
            "uncounted": len(self.rows) - len(counted),
            "methods": _count(r.method for r in self.rows),
        }

    def skipping(self) -> list[PlanRow]:
        return [r for r in self.rows if r.skip]


def _count(items: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return dict(sorted(out.items()))


def managed_groups(admin: KafkaAdmin, regex: str) -> list[str]:
    """Application consumer groups on a cluster matching `regex` (whole-id match, like MM2's `groups`)."""
    matches = group_matcher(regex)
    return sorted(g for g in admin.list_groups() if matches(g) and not INTERNAL_GROUPS.match(g))


def rows_from_precise(report: PreciseReport, translation: str) -> list[PlanRow]:
    """Precise mode writes the proven offset (MM2's where not proven); mm2 mode writes MM2's."""
    rows = []
    for r in report.rows:
        if translation == "precise" and r.precise_offset is not None:
            offset, method, re_read, skip = r.precise_offset, f"precise:{r.proof}", 0, 0
        elif r.mm2_offset is not None:
            offset, method, re_read, skip = r.mm2_offset, "mm2", r.mm2_re_read, r.mm2_skip
        else:
            continue  # left for the earliest-offset fallback
        rows.append(PlanRow(group=r.group, source_topic=r.source_topic, target_topic=r.target_topic,
                            partition=r.partition, source_offset=r.source_offset, offset=offset, method=method,
                            mm2_offset=r.mm2_offset, precise_offset=r.precise_offset, re_read=re_read, skip=skip,
                            note=None if r.precise_offset is not None else f"not proven: {r.reason}"))
    return rows


def rows_from_checkpoints(log: CheckpointLog, groups: list[str], policy: ReplicationPolicy,
                          source_alias: str) -> list[PlanRow]:
    """MM2's translation straight from the checkpoints (the source cannot be read: unplanned)."""
    wanted = set(groups)
    rows = []
    for (group, topic, partition), cp in sorted(log.latest.items()):
        if group not in wanted:
            continue
        source_topic = policy.source_topic_of(topic, source_alias) or topic
        rows.append(PlanRow(group=group, source_topic=source_topic, target_topic=topic, partition=partition,
                            source_offset=cp.upstream_offset, offset=cp.downstream_offset, method="mm2",
                            mm2_offset=cp.downstream_offset, re_read=None, skip=0,
                            note="checkpoint: skip 0 relative to the last checkpoint; re-reads not countable"))
    return rows


def add_earliest_fallback(rows: list[PlanRow], wanted: dict[str, dict[TP, int | None]],
                          target_admin: KafkaAdmin) -> list[PlanRow]:
    """(group, target partition) pairs nobody could translate start at the partition's earliest offset:
    the group re-reads what the new cluster holds, and never skips."""
    have = {(r.group, r.target_tp) for r in rows}
    missing = [(g, tp, src) for g, tps in wanted.items() for tp, src in tps.items() if (g, tp) not in have]
    if not missing:
        return rows
    lows = {tp: w.low for tp, w in target_admin.watermarks({tp for _, tp, _ in missing}).items()}
    for g, tp, src in sorted(missing):
        rows.append(PlanRow(group=g, source_topic="?", target_topic=tp.topic, partition=tp.partition,
                            source_offset=src, offset=lows[tp], method="fallback:earliest", skip=0,
                            note="no checkpoint and no proof: starts at the earliest offset (re-reads, never skips)"))
    return rows
