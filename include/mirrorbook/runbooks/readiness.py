"""Readiness: where every managed group would resume on a flow's target, kept while the source is readable.

MM2 writes no checkpoint for a quarter of the group-partitions of a large estate (a group behind the
newest offset sync when the checkpoint task started — KAFKA-14666 —, a few records behind the end, at 0 —
KAFKA-12635). If the source cluster is lost, those groups would have no position on the target at all.
So every health pass, while the source is readable, proves each managed (group, partition)'s position
with precise translation — by content, not from MM2's checkpoints — and keeps it in the audit store:
- compact: a position is (re)computed only where the group's committed offset moved (or its last one was
  not proven), and written only when it changed; positions of groups that disappeared are dropped;
- an unplanned failover falls back on it (`runbooks/unplanned.py`), and the flows page, the health
  check's result and its metrics show how fresh it is and what a failover now would cost.
The pass that last confirmed a flow's positions is its metrics sample's `readiness.checked_at`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from mirrorbook.audit import AuditStore
from mirrorbook.audit.models import GroupPosition
from mirrorbook.clients import Clients
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.precise import translate_precise
from mirrorbook.mm2.remote_cluster_utils import group_matcher
from mirrorbook.runbooks.plan import INTERNAL_GROUPS
from mirrorbook.topology import FlowSpec

Key = tuple[str, str, int]  # group, target topic, partition


class Readiness(BaseModel):
    """One flow's readiness as of `checked_at`: what an unplanned failover now could write, and its cost."""

    checked_at: datetime
    group_partitions: int = 0    # managed (group, partition)s committed on the source, on mirrored topics
    positions: int = 0           # of them with a position kept
    exact: int = 0               # proven by content
    recomputed: int = 0          # this pass (committed offset moved, or not proven before)
    changed: int = 0             # written this pass
    removed: int = 0
    reread_max: int = 0          # records an unplanned failover now would re-read at most (to each target end)
    estimated_rto_s: float | None = None  # the last measured failover of this flow (None: none measured yet)
    error: str | None = None

    def sample(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def _wanted(flow: FlowSpec, regex: str, committed: dict[str, dict[TP, int]], target_partitions: dict[str, int]
            ) -> dict[Key, tuple[TP, int]]:
    """(group, target partition) -> (source partition, committed offset), on topics the flow mirrors."""
    policy = ReplicationPolicy.for_flow(flow)
    matches = group_matcher(regex)
    out: dict[Key, tuple[TP, int]] = {}
    for g, offsets in committed.items():
        if not matches(g) or INTERNAL_GROUPS.match(g):
            continue
        for tp, c in offsets.items():
            remote = policy.format_remote_topic(flow.source, tp.topic)
            if tp.partition < target_partitions.get(remote, 0):
                out[(g, remote, tp.partition)] = (tp, c)
    return out


def refresh(clients: Clients, flow: FlowSpec, regex: str, committed: dict[str, dict[TP, int]], audit: AuditStore,
            now: datetime) -> Readiness:
    """Bring the flow's kept positions up to date with `committed` (the groups' offsets on its source, read now)."""
    target_admin = clients.admin(flow.target)
    wanted = _wanted(flow, regex, committed, target_admin.topics())
    kept = {p.key: p for p in audit.positions(flow.name)}
    todo = {k: v for k, v in wanted.items() if k not in kept or kept[k].source_offset != v[1] or not kept[k].exact}
    changed: list[GroupPosition] = []
    if todo:
        by_group: dict[str, dict[TP, int]] = {}
        for (g, _, _), (tp, c) in todo.items():
            by_group.setdefault(g, {})[tp] = c
        mapping = clients.replication(flow).offset_mapping()
        report = translate_precise(clients.kafka_config(flow.source), clients.kafka_config(flow.target), flow.source,
                                   flow.target, regex, policy=ReplicationPolicy.for_flow(flow),
                                   offset_syncs_location=mapping.offset_syncs_location, committed=by_group)
        for r in report.rows:
            if r.offset is None:
                continue
            p = GroupPosition(group=r.group, topic=r.target_topic, partition=r.partition, source_topic=r.source_topic,
                              source_offset=r.source_offset, target_offset=r.offset,
                              rule=f"precise:{r.proof}" if r.proven else f"fallback:{r.fallback_rule}",
                              exact=r.proven, observed_at=now)
            old = kept.get(p.key)
            if old is None or (old.source_offset, old.target_offset, old.rule) != (p.source_offset, p.target_offset,
                                                                                     p.rule):
                changed.append(p)
            kept[p.key] = p
    gone = [k for k in kept if k not in wanted]
    audit.update_positions(flow.name, changed, gone)
    positions = [p for k, p in kept.items() if k in wanted]
    highs = target_admin.high_watermarks({TP(p.topic, p.partition) for p in positions})
    return Readiness(checked_at=now, group_partitions=len(wanted), positions=len(positions),
                     exact=sum(p.exact for p in positions), recomputed=len(todo), changed=len(changed),
                     removed=len(gone), estimated_rto_s=last_rto(audit, flow),
                     reread_max=sum(max(0, highs[TP(p.topic, p.partition)] - p.target_offset) for p in positions))


def last_rto(audit: AuditStore, flow: FlowSpec) -> float | None:
    """The RTO the flow's newest measured failover took (its report, in the audit's artifacts)."""
    for art in reversed(audit.artifacts(kind="failover-report")):
        if art.summary.get("flow") == flow.name and isinstance(art.summary.get("rto_s"), (int, float)):
            return float(art.summary["rto_s"])
    return None
