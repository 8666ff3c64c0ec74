"""The unplanned failover's plan: with the source cluster gone, every group lands somewhere stated and bounded.

Only what survives on the target side is read: MM2's checkpoints (on the target), the readiness positions
the health check proved while the source was readable (the audit store), MM2's offset-syncs when they live
on the target (`offset-syncs.topic.location=target`, KIP-716), and the target's own offsets. For every
(group, partition) any of them knows, the candidates are:

- checkpoint   MM2's translation of the last offset it saw the group commit (U -> D);
- readiness    the position proven for the committed offset C at the last health pass (C -> P, exact
               where proven by content);
- offset-sync  MM2's sync position of the newest commit known (U or C), from every sync on the target;
- earliest     the partition's start on the target, when nothing else is known.

The newest knowledge of the group's commit wins (the highest upstream offset; at equal upstream, the
highest target offset — every candidate is at or before the copy of that commit), so the position is never
newer than the group's last known commit: **no skip, by construction** (unless the group rewound after
it was last seen, which the note says). What it re-reads is bounded by the target's end: the group
committed at least that far, so at most everything after the position is read again.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import NamedTuple

from mirrorbook.audit import AuditStore
from mirrorbook.audit.models import GroupPosition
from mirrorbook.clients import Clients
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.counts import ZERO, Count
from mirrorbook.mm2.internal_topics import read_checkpoints, read_offset_syncs
from mirrorbook.mm2.offset_sync_store import SyncIndex
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.precise import Marks, sync_position
from mirrorbook.mm2.records import Checkpoint
from mirrorbook.mm2.remote_cluster_utils import group_matcher
from mirrorbook.replication import backend_for
from mirrorbook.runbooks.plan import INTERNAL_GROUPS, PlanRow
from mirrorbook.topology import FlowSpec

Key = tuple[str, str, int]  # group, target topic, partition
READINESS_LOOKBACK = 50      # metrics samples searched for the last pass that confirmed the positions


class Candidate(NamedTuple):
    upstream: int | None      # the source offset it stands for (None: none known)
    offset: int               # on the target
    basis: str                # checkpoint | readiness | offset-sync | earliest
    at: datetime | None       # when that knowledge was current


class Survivors(NamedTuple):
    """What the target side still knows about the flow's groups."""

    checkpoints: dict[Key, Checkpoint]
    checkpoint_at: dict[Key, datetime]
    positions: dict[Key, GroupPosition]
    positions_at: datetime | None        # the last health pass that confirmed them
    syncs: dict[TP, SyncIndex] | None    # per source partition, when the syncs live on the target
    notes: list[str]


def readiness_confirmed_at(audit: AuditStore, flow: FlowSpec) -> datetime | None:
    """When a health pass last brought the flow's readiness positions up to date (the source was readable)."""
    for sample in audit.metrics(flow.name, limit=READINESS_LOOKBACK):
        r = sample.metrics.get("readiness")
        if isinstance(r, dict) and not r.get("error") and r.get("checked_at"):
            return datetime.fromisoformat(r["checked_at"])
    return None


def survivors(clients: Clients, audit: AuditStore, flow: FlowSpec, regex: str) -> Survivors:
    policy = ReplicationPolicy.for_flow(flow)
    matches = group_matcher(regex)

    def wanted(group: str) -> bool:
        return matches(group) and not INTERNAL_GROUPS.match(group)

    target = clients.kafka_config(flow.target)
    log = read_checkpoints(target, flow.source, policy=policy, group_filter=wanted)
    notes = [f"{log.records} checkpoint record(s) read on {flow.target}"]
    positions = {p.key: p for p in audit.positions(flow.name) if wanted(p.group)}
    confirmed = readiness_confirmed_at(audit, flow)
    if positions:
        notes.append(f"{len(positions)} readiness position(s), last confirmed "
                     + (f"at {confirmed.isoformat()}" if confirmed else "at an unknown time"))
    mapping = backend_for(clients, flow).offset_mapping()
    syncs = None
    if mapping.offset_syncs_location == "target":
        found = read_offset_syncs(target, flow.source, flow.target, location="target", policy=policy)
        syncs = {tp: SyncIndex(s) for tp, s in found.syncs.items()}
        notes.append(f"{found.records} offset-sync record(s) read on {flow.target} "
                     "(offset-syncs.topic.location=target)")
    else:
        notes.append("offset-syncs live on the source cluster (the default): unreadable now; set "
                     "offset-syncs.topic.location=target on the flow's connectors to keep them for a disaster")
    at = {k: datetime.fromtimestamp(ms / 1000, timezone.utc) for k, ms in log.written_ms.items() if ms >= 0}
    return Survivors(dict(log.latest), at, positions, confirmed, syncs, notes)


def known_groups(found: Survivors) -> list[str]:
    return sorted({k[0] for k in found.checkpoints} | {k[0] for k in found.positions})


def candidates(key: Key, found: Survivors, marks: Marks, source_tp: TP) -> list[Candidate]:
    out = [Candidate(None, marks.low, "earliest", None)]
    cp = found.checkpoints.get(key)
    if cp is not None:
        out.append(Candidate(cp.upstream_offset, cp.downstream_offset, "checkpoint", found.checkpoint_at.get(key)))
    pos = found.positions.get(key)
    if pos is not None:
        out.append(Candidate(pos.source_offset, pos.target_offset, "readiness", found.positions_at or pos.observed_at))
    newest = max(((c.upstream, c) for c in out if c.upstream is not None), key=lambda uc: uc[0], default=None)
    if newest is not None and found.syncs is not None and source_tp in found.syncs:
        upstream, basis = newest
        x = sync_position(found.syncs[source_tp].window(upstream), marks)
        if x is not None:
            out.append(Candidate(upstream, x, "offset-sync", basis.at))
    return out


def choose(options: list[Candidate], marks: Marks) -> Candidate:
    """The newest knowledge of the commit, then the furthest position for it, kept within the target's log."""
    best = max(options, key=lambda c: (-1 if c.upstream is None else c.upstream, c.offset))
    return best._replace(offset=min(max(best.offset, marks.low), marks.high))


def plan_rows(clients: Clients, flow: FlowSpec, found: Survivors, now: datetime) -> list[PlanRow]:
    policy = ReplicationPolicy.for_flow(flow)
    keys = sorted(set(found.checkpoints) | set(found.positions))
    tps = {TP(t, p) for _, t, p in keys}
    marks = {tp: Marks(w.low, w.high) for tp, w in clients.admin(flow.target).watermarks(tps).items()}
    rows = []
    for key in keys:
        group, topic, partition = key
        tp = TP(topic, partition)
        source_tp = TP(policy.source_topic_of(topic, flow.source) or topic, partition)
        pick = choose(candidates(key, found, marks[tp], source_tp), marks[tp])
        age = round((now - pick.at).total_seconds(), 1) if pick.at else None
        cp = found.checkpoints.get(key)
        rows.append(PlanRow(
            group=group, source_topic=source_tp.topic, target_topic=topic, partition=partition,
            source_offset=pick.upstream, offset=pick.offset, method=f"unplanned:{pick.basis}",
            # No precise_offset: a readiness position was exact for an older commit, not for the group now.
            mm2_offset=cp.downstream_offset if cp else None,
            re_read=Count.between(0, marks[tp].high - pick.offset), skip=ZERO, basis_age_s=age,
            note=_note(pick, age)))
    return rows


def _note(pick: Candidate, age: float | None) -> str:
    when = f", {age:g}s old" if age is not None else ""
    if pick.basis == "earliest":
        return ("nothing known of this group's position on the target side: the partition's start (re-reads "
                "everything the target holds, never skips)")
    return (f"{pick.basis} for source offset {pick.upstream}{when}: never past the group's last known commit "
            "(skip 0 unless it rewound since); re-reads at most the rest of the partition")
