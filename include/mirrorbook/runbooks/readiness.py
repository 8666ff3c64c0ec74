"""Readiness: where every managed group would resume on a flow's target, kept while the source is readable.

MM2 writes no checkpoint for a quarter of the group-partitions of a large estate (a group behind the
newest offset sync when the checkpoint task started — KAFKA-14666 —, a few records behind the end, at 0 —
KAFKA-12635). If the source cluster is lost, those groups would have no position on the target at all.
So every health pass, while the source is readable, proves each managed (group, partition)'s position
with precise translation — by content, not from MM2's checkpoints — and keeps it in the audit store:
- compact: a position is proved again only where a kept one is no longer exactly what a fresh proof would
  find (`still_true`), and written only when it changed; positions of groups that disappeared are dropped;
- an unplanned failover falls back on it (`runbooks/unplanned.py`), and a planned one reuses it for every
  group-partition whose committed offset has not moved since (`prove_positions`, shared by both), proving
  afresh only the rest; the flows page, the health check's result and its metrics show how fresh it is and
  what a failover now would cost.
The pass that last confirmed a flow's positions is its metrics sample's `readiness.checked_at`; the topics its
positions rest on are that sample's `readiness.topic_ids`.

Why a kept exact position (C -> P) stays exactly as true as a fresh proof: P holds a copy of r, the first
source record at or after C — records never change offset, and later records come after r on both sides.
A fresh proof names the first proven copy of r, and no record or sync written later can prove an earlier one.
So a kept position is reused only while: the group's committed offset is still C; both topics are the ones it
was proved on (their ids: not deleted and created again); the source still holds offsets from C (retention)
and the target still holds P; neither topic is compacted (a compaction can delete r and make a later record
the group's next); and, when it stood for the source's end (`aligned-end`, `both-empty`: the group had read
everything), both ends are where they were — the source's at C (no offset since, so no record: the group still has
nothing to read) and the target's at P (nothing copied or re-sent since: its last record still copies the source's
last). Not covered: a log truncated below its high watermark (unclean leader election), which rewrites offsets.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, NamedTuple

from pydantic import BaseModel, Field

from mirrorbook.audit import AuditStore
from mirrorbook.audit.codec import parse_time
from mirrorbook.audit.models import GroupPosition
from mirrorbook.clients import Clients
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.internal_topics import read_checkpoints, read_offset_syncs
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.precise import BOTH_EMPTY, END_RULES, Marks, PartitionTranslation, Item, translate_items
from mirrorbook.mm2.remote_cluster_utils import group_matcher
from mirrorbook.replication import backend_for
from mirrorbook.runbooks.plan import INTERNAL_GROUPS, PlanTable, rows_from_precise
from mirrorbook.topology import FlowSpec

Key = tuple[str, str, int]  # group, target topic, partition
READINESS_LOOKBACK = 50      # metrics samples searched for the last pass that confirmed the positions
SOURCE, TARGET = "source", "target"


class Readiness(BaseModel):
    """One flow's readiness as of `checked_at`: what an unplanned failover now could write, and its cost."""

    checked_at: datetime
    group_partitions: int = 0    # managed (group, partition)s committed on the source, on mirrored topics
    positions: int = 0           # of them with a position kept
    exact: int = 0               # proven by content
    recomputed: int = 0          # this pass (committed offset moved, not proven before, or no longer true)
    reused: int = 0              # kept positions confirmed exactly true this pass
    changed: int = 0             # written this pass
    removed: int = 0
    reread_max: int = 0          # records an unplanned failover now would re-read at most (to each target end)
    estimated_rto_s: float | None = None  # the last measured failover of this flow (None: none measured yet)
    error: str | None = None
    # What the kept positions rest on: the ids of the topics they were proved on, "source"/"target" -> topic -> id.
    topic_ids: dict[str, dict[str, str]] = Field(default_factory=dict)

    def sample(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class Kept(NamedTuple):
    """A kept position as the audit store returns it (`AuditStore.position_rows`), without a model per row."""

    source_topic: str
    source_offset: int
    target_offset: int
    rule: str           # precise:<proof> | fallback:<rule>
    exact: bool
    observed_at: str    # as stored (`audit.codec.TIME_FORMAT`)

    @property
    def proved_at(self) -> datetime:
        return parse_time(self.observed_at)


def kept_positions(audit: AuditStore, flow: FlowSpec) -> dict[Key, Kept]:
    make = Kept._make
    return {row[:3]: make(row[3:]) for row in audit.position_rows(flow.name)}


def still_true(kept: Kept, committed: int, source: Marks, target: Marks, same_topics: bool,
               compacted: bool) -> str | None:
    """None when the kept position is exactly what a fresh proof would find now, else why it is proved again
    (see the module's reasons)."""
    if not kept.exact:
        return "not proven when kept"
    if kept.source_offset != committed:
        return "the group committed since"
    rule = kept.rule.removeprefix("precise:")
    end = rule in END_RULES
    if end and not (source.high == committed and target.high == kept.target_offset):
        return "it stood for the source's end, which moved"
    # An end proof rests on the target's last record copying the source's last (or on both holding none).
    if end and (target.low == target.high) != (rule == BOTH_EMPTY or source.low == source.high):
        return "the target no longer holds the copy of the source's last record (retention)"
    if not same_topics:
        return "a topic was deleted and created again since"
    if compacted:
        return "a compacted topic (compaction can delete the record it names)"
    if committed < source.low:
        return "the source's log start passed the committed offset"
    if not target.low <= kept.target_offset < target.high and not end:
        return "the target no longer holds the copy (retention)"
    return None


def wanted_pairs(flow: FlowSpec, regex: str, committed: dict[str, dict[TP, int]], target_partitions: dict[str, int]
                 ) -> dict[Key, tuple[TP, int]]:
    """(group, target partition) -> (source partition, committed offset), for the managed groups on topics the flow
    mirrors."""
    policy = ReplicationPolicy.for_flow(flow)
    matches = group_matcher(regex)
    remote: dict[str, str] = {}
    out: dict[Key, tuple[TP, int]] = {}
    for g, offsets in committed.items():
        if not matches(g) or INTERNAL_GROUPS.match(g):
            continue
        for tp, c in offsets.items():
            topic = remote.get(tp.topic)
            if topic is None:
                topic = remote[tp.topic] = policy.format_remote_topic(flow.source, tp.topic)
            if tp.partition < target_partitions.get(topic, 0):
                out[(g, topic, tp.partition)] = (tp, c)
    return out


def last_topic_ids(audit: AuditStore, flow: FlowSpec) -> dict[str, dict[str, str]]:
    """The topic ids the flow's kept positions rest on: those of the newest pass that confirmed them ({} when
    none recorded any — every position is then proved again)."""
    for sample in audit.metrics(flow.name, limit=READINESS_LOOKBACK):
        r = sample.metrics.get("readiness")
        if isinstance(r, dict) and not r.get("error") and r.get("checked_at"):
            ids = r.get("topic_ids")
            return ids if isinstance(ids, dict) else {}
    return {}


@dataclass
class Proved:
    """Every wanted (group, partition)'s position now: the kept ones still exactly true, and fresh proofs of the
    rest (`fresh`, rows of precise translation: proven, or the best fallback)."""

    wanted: dict[Key, tuple[TP, int]]
    kept: dict[Key, Kept]
    reused: dict[Key, Kept]
    fresh: list[PartitionTranslation]
    topic_ids: dict[str, dict[str, str]]
    target_marks: dict[TP, Marks]
    why_again: dict[str, int] = field(default_factory=dict)  # reason -> kept positions proved again for it

    def notes(self, target: str) -> list[str]:
        out = []
        if self.reused:
            oldest = min(k.observed_at for k in self.reused.values())
            out.append(f"{len(self.reused)} position(s) reused from readiness (proved by the health check, the "
                       f"oldest at {parse_time(oldest).isoformat()}): each group's committed offset unchanged "
                       f"since, the topics the same, the copy still on {target}")
        if self.fresh:
            again = ", ".join(f"{n} {why}" for why, n in sorted(self.why_again.items()))
            out.append(f"{len(self.fresh)} position(s) proved now" + (f" (kept ones proved again: {again})"
                                                                      if again else ""))
        return out


def prove_positions(clients: Clients, flow: FlowSpec, regex: str, committed: dict[str, dict[TP, int]],
                    audit: AuditStore, *, reuse: bool = True, kept: dict[Key, Kept] | None = None) -> Proved:
    """The position of every managed (group, partition) committed on the flow's source (`committed`, read now):
    kept readiness positions still exactly true (`still_true`) reused, the rest proved now, partition by
    partition. What the health check keeps and what a planned failover writes, by the same rules. `kept`: the
    flow's kept positions (`kept_positions`) when the caller read them already."""
    source_admin, target_admin = clients.admin(flow.source), clients.admin(flow.target)
    wanted = wanted_pairs(flow, regex, committed, target_admin.topics())
    source_tps = {tp for tp, _ in wanted.values()}
    target_tps = {TP(t, p) for _, t, p in wanted}
    source_topics, target_topics = {tp.topic for tp in source_tps}, {tp.topic for tp in target_tps}
    # What the clusters say about those partitions and topics, asked side by side (each a round trip or two,
    # mostly waiting), while the kept positions are read from the audit store.
    with ThreadPoolExecutor(max_workers=6, thread_name_prefix="readiness") as pool:
        marks_asked = (pool.submit(source_admin.watermarks, source_tps),
                       pool.submit(target_admin.watermarks, target_tps))
        ids_asked = (pool.submit(source_admin.topic_ids, source_topics),
                     pool.submit(target_admin.topic_ids, target_topics))
        if kept is None:
            kept = kept_positions(audit, flow) if reuse else {}
        elif not reuse:
            kept = {}
        # Only a kept position asks whether its topics are compacted.
        compacted_asked = (pool.submit(_compacted, source_admin, source_topics),
                           pool.submit(_compacted, target_admin, target_topics)) if kept else None
        source_marks, target_marks = ({tp: Marks(w.low, w.high) for tp, w in f.result().items()} for f in marks_asked)
        ids = {SOURCE: ids_asked[0].result(), TARGET: ids_asked[1].result()}
        compacted = {SOURCE: compacted_asked[0].result(), TARGET: compacted_asked[1].result()} \
            if compacted_asked else {}
    reused: dict[Key, Kept] = {}
    why_again: dict[str, int] = {}
    if kept:
        basis = last_topic_ids(audit, flow)
        same = {(SOURCE, t): t in ids[SOURCE] and basis.get(SOURCE, {}).get(t) == ids[SOURCE][t]
                for t in source_topics}
        same.update({(TARGET, t): t in ids[TARGET] and basis.get(TARGET, {}).get(t) == ids[TARGET][t]
                     for t in target_topics})
        # A pair's topics decide the same for every group on them: asked once per pair of topics.
        topics_ok: dict[tuple[str, str], bool] = {}
        ends = {*END_RULES, *(f"precise:{r}" for r in END_RULES)}  # as `still_true` reads a rule
        for key, (tp, c) in wanted.items():
            k = kept.get(key)
            if k is None:
                continue
            _, topic, partition = key
            sm, tm = source_marks[tp], target_marks[TP(topic, partition)]
            ok = topics_ok.get((tp.topic, topic))
            if ok is None:
                ok = topics_ok[(tp.topic, topic)] = (same[(SOURCE, tp.topic)] and same[(TARGET, topic)] and
                                                     tp.topic not in compacted[SOURCE] and
                                                     topic not in compacted[TARGET])
            # The common case in a line — exactly what `still_true` answers None for a position that did not stand
            # for the source's end; any other case is asked of `still_true` itself (and says why).
            if (ok and k.exact and k.source_offset == c and k.rule not in ends and sm.low <= c
                    and tm.low <= k.target_offset < tm.high):
                reused[key] = k
                continue
            why = still_true(k, c, sm, tm, same[(SOURCE, tp.topic)] and same[(TARGET, topic)],
                             tp.topic in compacted[SOURCE] or topic in compacted[TARGET])
            if why is None:
                reused[key] = k
            elif k.exact:
                why_again[why] = why_again.get(why, 0) + 1
    todo = {k: v for k, v in wanted.items() if k not in reused} if len(reused) < len(wanted) else {}
    fresh = _prove(clients, flow, todo, source_marks, target_marks) if todo else []
    return Proved(wanted, kept, reused, fresh, ids, target_marks, why_again)


def _compacted(admin: KafkaAdmin, topics: Iterable[str]) -> set[str]:
    configs = admin.topic_configs(topics)
    return {t for t, c in configs.items() if "compact" in (c.get("cleanup.policy") or "")}


def _prove(clients: Clients, flow: FlowSpec, todo: dict[Key, tuple[TP, int]], source_marks: dict[TP, Marks],
           target_marks: dict[TP, Marks]) -> list[PartitionTranslation]:
    """Precise translation of `todo`, partition by partition. MM2's checkpoints matter only to a row not proven
    (its fallback): they are read, and those rows placed again with them, only when there are such rows."""
    policy = ReplicationPolicy.for_flow(flow)
    mapping = backend_for(clients, flow).offset_mapping()
    source, target = clients.kafka_config(flow.source), clients.kafka_config(flow.target)
    syncs = read_offset_syncs(source if mapping.offset_syncs_location == "source" else target, flow.source,
                              flow.target, location=mapping.offset_syncs_location, policy=policy)
    items = [Item(g, tp, TP(t, p), c, None) for (g, t, p), (tp, c) in sorted(todo.items())]
    src_admin, tgt_admin = clients.admin(flow.source), clients.admin(flow.target)

    def translate(these: list[Item]) -> list[PartitionTranslation]:
        return translate_items(source, target, these, syncs.syncs, src_admin, tgt_admin, source_marks=source_marks,
                               target_marks=target_marks, source_isolation=mapping.source_isolation,
                               fallbacks="unproven")

    rows = translate(items)
    unproven = [i for i, r in zip(items, rows) if r.precise_offset is None]
    if not unproven:
        return rows
    groups = {i.group for i in unproven}
    log = read_checkpoints(target, flow.source, policy=policy, group_filter=groups.__contains__)
    again = translate([Item(i.group, i.src, i.tgt, i.committed, log.latest.get((i.group, i.tgt.topic,
                                                                                  i.tgt.partition)))
                       for i in unproven])
    placed = {(r.group, r.target_topic, r.partition): r for r in again}
    return [placed.get((r.group, r.target_topic, r.partition), r) for r in rows]


def plan_table(proved: Proved, now: datetime) -> PlanTable:
    """A planned precise failover's rows: the reused positions as the health check proved them, with their age (the
    rule is the proof's), and the fresh ones as precise translation placed them — column by column."""
    table = PlanTable().add_rows(rows_from_precise(proved.fresh, "precise"))
    ages: dict[str, float] = {}
    for k in proved.reused.values():
        if k.observed_at not in ages:
            ages[k.observed_at] = round((now - k.proved_at).total_seconds(), 1)
    keys, kept = list(proved.reused), list(proved.reused.values())
    offsets = [k.target_offset for k in kept]
    return table.extend(group=[g for g, _, _ in keys], source_topic=[k.source_topic for k in kept],
                        target_topic=[t for _, t, _ in keys], partition=[p for _, _, p in keys],
                        source_offset=[k.source_offset for k in kept], offset=offsets, method=[k.rule for k in kept],
                        precise_offset=offsets, basis_age_s=[ages[k.observed_at] for k in kept])


def position_of(row: PartitionTranslation, now: datetime) -> GroupPosition | None:
    """What readiness keeps of a fresh row: the proven position, else the best fallback."""
    if row.offset is None:
        return None
    return GroupPosition(group=row.group, topic=row.target_topic, partition=row.partition,
                         source_topic=row.source_topic, source_offset=row.source_offset, target_offset=row.offset,
                         rule=f"precise:{row.proof}" if row.proven else f"fallback:{row.fallback_rule}",
                         exact=row.proven, observed_at=now)


def refresh(clients: Clients, flow: FlowSpec, regex: str, committed: dict[str, dict[TP, int]], audit: AuditStore,
            now: datetime) -> Readiness:
    """Bring the flow's kept positions up to date with `committed` (the groups' offsets on its source, read now)."""
    proved = prove_positions(clients, flow, regex, committed, audit)
    changed: list[GroupPosition] = []
    positions: dict[Key, tuple[int, bool]] = {k: (p.target_offset, p.exact) for k, p in proved.reused.items()}
    for row in proved.fresh:
        p = position_of(row, now)
        if p is None:
            continue
        old = proved.kept.get(p.key)
        if old is None or (old.source_offset, old.target_offset, old.rule) != (p.source_offset, p.target_offset,
                                                                                 p.rule):
            changed.append(p)
        positions[p.key] = (p.target_offset, p.exact)
    # Kept positions of pairs not proved this pass and still wanted stay (a pair with no position at all now).
    for key, k in proved.kept.items():
        if key in proved.wanted and key not in positions:
            positions[key] = (k.target_offset, k.exact)
    gone = [k for k in proved.kept if k not in proved.wanted]
    audit.update_positions(flow.name, changed, gone)
    marks = proved.target_marks
    return Readiness(checked_at=now, group_partitions=len(proved.wanted), positions=len(positions),
                     exact=sum(exact for _, exact in positions.values()), recomputed=len(proved.fresh),
                     reused=len(proved.reused), changed=len(changed), removed=len(gone),
                     estimated_rto_s=last_rto(audit, flow), topic_ids=proved.topic_ids,
                     reread_max=sum(max(0, marks[TP(t, p)].high - off) for (_, t, p), (off, _) in positions.items()))


def last_rto(audit: AuditStore, flow: FlowSpec) -> float | None:
    """The RTO the flow's newest measured failover took (its report, in the audit's artifacts)."""
    for art in reversed(audit.artifacts(kind="failover-report")):
        if art.summary.get("flow") == flow.name and isinstance(art.summary.get("rto_s"), (int, float)):
            return float(art.summary["rto_s"])
    return None
