"""mm2_failback: moving groups back from the DR cluster (B) to the primary (A), and the divergence report.

A group on B consumed two kinds of topics, and each goes back its own way:

1. remote topics from A (`A.orders` on B) go back to the original topic (`orders` on A). MM2 has no
   translation for this direction (the reverse flow never mirrors them: cycle detection), so we
   invert the original flow's offset-syncs: between two syncs MM2 copies source records one by one
   in order (a restarted task writes a new sync first), so the target record at L copies source
   record a >= u_lo + (L - d_lo), where (u_lo, d_lo) is the newest sync at or below L. Resuming A
   at u_lo + (L - d_lo) + 1 therefore never skips; in precise mode we also prove it by matching the
   content of B's record L with A's record at that offset (or, failing that, with exactly one
   record of the sync window), and say when we cannot.
2. topics local to B (written there during the outage) are mirrored to A by the reverse flow and go
   back through it, exactly like a failover of B->A (checkpoints, or precise translation).

The divergence report counts, per partition of the original topics, the records that reached A but
never B (A's high watermark minus what the original flow replicated): consumers did not see them on
B, and will see them on A after failback, late — the operator decides what to replay. It is taken
when the plan is computed, before the original flow resumes and mirrors them after all. Then too, the
original flow's unplanned failovers get their exact RPO (`runbooks/rpo.py`): the divergence counts what
A holds now, the RPO what was written before each failover began and never reached B.
"""

from __future__ import annotations

import bisect
from typing import Any

from mirrorbook.clients import Clients
from mirrorbook.kafka.admin import KafkaAdmin
from mirrorbook.kafka.records import count_records
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.counts import ZERO, Count
from mirrorbook.mm2.internal_topics import read_offset_syncs
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.precise import Rec, read_partitions, translate_precise
from mirrorbook.mm2.records import OffsetSync
from mirrorbook.replication import backend_for
from mirrorbook.runbooks import rpo
from mirrorbook.core.engine import Runbook
from mirrorbook.runbooks.move import Move
from mirrorbook.runbooks.plan import PlanRow, TranslationPlan, add_earliest_fallback, rows_from_precise
from mirrorbook.runbooks.user_topics import record_kind
from mirrorbook.topology import FlowSpec

WINDOW_MAX = 100_000
DIVERGENCE_KEY = "divergence"


def _split(committed: dict[str, dict[TP, int]], original: FlowSpec, via: FlowSpec,
           topics_on_to: dict[str, int]) -> tuple[dict[str, dict[TP, int]], dict[str, dict[TP, int]], list[str]]:
    """Partition a group's B offsets into: back-to-original (A.x -> x), through-reverse (x -> B.x), neither."""
    back_policy = ReplicationPolicy.for_flow(original)
    via_policy = ReplicationPolicy.for_flow(via)
    back: dict[str, dict[TP, int]] = {}
    forward: dict[str, dict[TP, int]] = {}
    ignored: list[str] = []
    for g, offs in committed.items():
        for tp, o in offs.items():
            origin = back_policy.source_topic_of(tp.topic, original.source) if not back_policy.identity else None
            if origin and origin in topics_on_to:
                back.setdefault(g, {})[tp] = o
            elif tp.partition < topics_on_to.get(via_policy.format_remote_topic(via.source, tp.topic), 0):
                forward.setdefault(g, {})[tp] = o
            else:
                ignored.append(f"{g} {tp}")
    return back, forward, ignored


def _syncs_by_downstream(syncs: list[OffsetSync]) -> list[OffsetSync]:
    return sorted(syncs, key=lambda s: (s.downstream_offset, s.upstream_offset))


def reverse_offset(last: int, syncs: list[OffsetSync]) -> tuple[int, int, int | None] | None:
    """(resume offset on the original, u_lo, u_hi) for a group whose last consumed remote record is `last`."""
    ordered = _syncs_by_downstream(syncs)
    downs = [s.downstream_offset for s in ordered]
    i = bisect.bisect_right(downs, last) - 1
    if i < 0:
        return None
    lo = ordered[i]
    hi = ordered[i + 1].upstream_offset if i + 1 < len(ordered) else None
    return lo.upstream_offset + (last - lo.downstream_offset) + 1, lo.upstream_offset, hi


def back_rows(clients: Clients, original: FlowSpec, back: dict[str, dict[TP, int]], translation: str,
              to_admin: KafkaAdmin) -> list[PlanRow]:
    """Translate offsets on remote topics (`A.x` on B) back to the original topic (`x` on A)."""
    if not back:
        return []
    policy = ReplicationPolicy.for_flow(original)
    location = backend_for(clients, original).offset_mapping().offset_syncs_location
    syncs = read_offset_syncs(clients.kafka_config(original.source if location == "source" else original.target),
                              original.source, original.target, location=location, policy=policy)
    from_admin = clients.admin(original.target)
    remote_tps = {tp for offs in back.values() for tp in offs}
    remote_marks = from_admin.watermarks(remote_tps)
    orig_tps = {TP(policy.source_topic_of(tp.topic, original.source) or tp.topic, tp.partition) for tp in remote_tps}
    orig_marks = to_admin.watermarks(orig_tps)

    plans: dict[tuple[str, TP], tuple[TP, int, int, tuple[int, int, int | None] | None]] = {}
    want_from: dict[TP, list[tuple[int, int]]] = {}
    want_to: dict[TP, list[tuple[int, int]]] = {}
    for g, offs in back.items():
        for tp, p in offs.items():
            orig = TP(policy.source_topic_of(tp.topic, original.source) or tp.topic, tp.partition)
            rev = reverse_offset(p - 1, syncs.syncs.get(orig, [])) if p > remote_marks[tp].low else None
            plans[(g, tp)] = (orig, p, remote_marks[tp].low, rev)
            if rev and translation == "precise":
                x, u_lo, u_hi = rev
                want_from.setdefault(tp, []).append((p - 1, p))
                end = min(u_hi if u_hi is not None else orig_marks[orig].high, u_lo + WINDOW_MAX)
                want_to.setdefault(orig, []).append((u_lo, min(max(end, x), orig_marks[orig].high)))
    from_data = read_partitions(clients.kafka_config(original.target), want_from) if want_from else {}
    to_data = read_partitions(clients.kafka_config(original.source), want_to) if want_to else {}

    rows = []
    for (g, tp), (orig, p, low, rev) in sorted(plans.items()):
        marks = orig_marks[orig]
        row = PlanRow(group=g, source_topic=tp.topic, target_topic=orig.topic, partition=tp.partition,
                      source_offset=p, offset=marks.low, method="fallback:earliest", skip=ZERO,
                      re_read=Count.between(0, marks.high - marks.low),
                      note="nothing consumed on the remote topic, or no offset-sync at or below it: "
                           "starts at the earliest offset (re-reads, never skips)")
        if rev:
            x, u_lo, u_hi = rev
            # Everything the group had not read lies after x; what it re-reads lies before the next sync.
            row.offset, row.method, row.mm2_offset = x, "reverse:sync", x
            row.re_read = Count.between(0, (u_hi if u_hi is not None else marks.high) - x)
            row.note = "from the original flow's offset-syncs (never skips; not verified by content)"
            if translation == "precise":
                _prove_back(row, tp, p, x, u_lo, u_hi if u_hi is not None else marks.high, from_data.get(tp),
                            to_data.get(orig))
        rows.append(row)
    return rows


def _prove_back(row: PlanRow, remote: TP, p: int, x: int, u_lo: int, ceiling: int, from_part: Any,
                to_part: Any) -> None:
    """Content proof that A's record x-1 is the copy of B's record p-1 (the group's last consumed)."""
    last = from_part.slice(p - 1, p) if from_part else []
    if not last:
        row.note = f"not proven: record {p - 1} of {remote} could not be read"
        return
    content = last[0].content
    window: list[Rec] = to_part.slice(u_lo, 1 << 62) if to_part else []
    at = [r for r in window if r.offset == x - 1]
    if at and at[0].content == content:
        row.method, row.precise_offset, row.re_read, row.note = "reverse:aligned", x, ZERO, None
        return
    matches = [r for r in window if r.content == content]
    if len(matches) == 1:
        row.offset = row.precise_offset = matches[0].offset + 1
        row.method, row.re_read, row.note = "reverse:unique-match", ZERO, None
        return
    row.offset = u_lo  # the anchor itself: re-reads more, still never skips
    row.re_read = Count.between(x - 1 - u_lo, ceiling - u_lo)
    row.note = (f"not proven ({len(matches)} records in the window carry the content of {remote}@{p - 1}): "
                "resumes at the offset-sync anchor")


def compute_plan(rb: Runbook, clients: Clients, move: Move, groups: list[str]) -> TranslationPlan:
    original, via, params = move.flow, move.via, move.params
    to_admin = clients.admin(move.to_cluster)
    notes: list[str] = []
    committed = clients.admin(move.from_cluster).committed_offsets(groups) if move.planned else {}
    back, forward, ignored = _split(committed, original, via, to_admin.topics())
    if ignored:
        notes.append(f"not moved (neither mirrored from {original.source} nor by {via.name}): "
                     f"{', '.join(ignored[:10])}")
    rows = back_rows(clients, original, back, params.translation, to_admin)
    if forward:
        policy = ReplicationPolicy.for_flow(via)
        location = backend_for(clients, via).offset_mapping().offset_syncs_location
        report = translate_precise(clients.kafka_config(via.source), clients.kafka_config(via.target), via.source,
                                   via.target, move.regex, policy=policy, committed=forward,
                                   offset_syncs_location=location)
        fwd = rows_from_precise(report, params.translation)
        wanted = {g: {TP(policy.format_remote_topic(via.source, tp.topic), tp.partition): o for tp, o in offs.items()}
                  for g, offs in forward.items()}
        rows += add_earliest_fallback(fwd, wanted, to_admin)
    if not move.planned:
        notes.append("unplanned failback: the groups' positions on the DR cluster cannot be read; nothing to move")
    # Taken now, while the original flow is still stopped: once it resumes it mirrors the diverged records.
    rb.progress_set(DIVERGENCE_KEY, divergence(clients, original))
    # The original's source answers again: the exact RPO of its unplanned failovers can be counted.
    if not rb.dry_run:
        rpo.complete(rb, clients, original)
    return TranslationPlan(flow=original.name, direction="failback", mode=params.mode, translation=params.translation,
                           from_cluster=move.from_cluster, to_cluster=move.to_cluster, groups=groups,
                           rows=sorted(rows, key=lambda r: (r.group, r.target_topic, r.partition)), notes=notes)


def run_rpo(rb: Runbook, clients: Clients, original: FlowSpec) -> dict[str, Any] | None:
    """The RPO of the original flow's newest unplanned failover: its bound and the exact figure (counted when
    this run translated, or now when it did not get to it), None when it had none."""
    rpo.complete(rb, clients, original)
    return rpo.latest(rb.audit, original)


def run_divergence(rb: Runbook, clients: Clients, original: FlowSpec) -> dict[str, Any]:
    """The divergence this run took before the original flow resumed (when it translated), else as it is now."""
    return rb.progress_get(DIVERGENCE_KEY) or divergence(clients, original)


def divergence(clients: Clients, original: FlowSpec) -> dict[str, Any]:
    """Per partition of the original flow's topics: records on its source that never reached its target — records,
    as a read_committed consumer counts them (`kafka.records`: markers and aborted records are not), exact unless a
    range was past the read budget (`exact`: false, and the figure is then at most that).

    Only user records count: Connect's storage topics, MM2's internal topics and heartbeats, Kafka's `__`
    topics and mirrorbook's audit anchors keep being written on the source (a Connect worker there writes
    its status as it comes back) without anyone having missed them; they are listed apart, under `internal`."""
    policy = ReplicationPolicy.for_flow(original)
    replicated = backend_for(clients, original).replicated_offsets()
    admin = clients.admin(original.source)
    existing = admin.topics()
    tps = [tp for tp in replicated if tp.partition < existing.get(tp.topic, 0)]
    highs = admin.high_watermarks(tps)
    user: dict[TP, tuple[int, int]] = {}
    internal: dict[str, int] = {}
    for tp in sorted(tps):
        # mirrorbook's own audit anchors are written to A as runs end, while A->B may be stopped.
        kind = record_kind(policy, tp.topic)
        if kind == "mm2" and policy.is_heartbeats_topic(tp.topic):
            continue  # heartbeats are written every second by design: not worth listing
        if kind is None:
            user[tp] = (replicated[tp] + 1, highs[tp])
        else:
            internal[str(tp)] = max(0, highs[tp] - 1 - replicated[tp])
    # Records, not offsets: a transactional partition's markers (and aborted records) take offsets past the last
    # record MM2 copied without anyone missing them. Counted where the offsets say something may be missing.
    counts = count_records(admin, user)
    diverged = {str(tp): counts[tp].high if tp in counts else 0 for tp in user}
    return {"cluster": original.source, "records": sum(diverged.values()),
            "partitions": {k: v for k, v in diverged.items() if v}, "checked_partitions": len(user),
            "exact": all(c.exact for c in counts.values()),
            "internal": {"records": sum(internal.values()), "partitions": {k: v for k, v in internal.items() if v}}}
