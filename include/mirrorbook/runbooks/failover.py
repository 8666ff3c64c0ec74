"""mm2_failover: translating a flow's groups from its source to its target, and the RPO lower bound of an unplanned one."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from mirrorbook.audit import AuditStore
from mirrorbook.clients import Clients
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.internal_topics import read_checkpoints
from mirrorbook.mm2.lag import shows_gaps
from mirrorbook.mm2.loss import unreplicated_at_least
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.precise import translate_precise
from mirrorbook.runbooks import readiness, unplanned
from mirrorbook.runbooks.engine import Runbook
from mirrorbook.runbooks.health.results import known_loss
from mirrorbook.runbooks.move import Move
from mirrorbook.runbooks.plan import (PlanRow, PlanTable, TranslationPlan, add_earliest_fallback,
                                      earliest_rows, rows_from_precise)
from mirrorbook.runbooks.rpo_sampler import FlowSample
from mirrorbook.topology import FlowSpec



def _remote_committed(committed: dict[str, dict[TP, int]], policy: ReplicationPolicy, source_alias: str,
                      target_topics: dict[str, int]) -> dict[str, dict[TP, int]]:
    """Committed offsets on topics the flow mirrors (the remote topic exists on the target)."""
    out = {}
    for g, offs in committed.items():
        kept = {tp: o for tp, o in offs.items()
                if tp.partition < target_topics.get(policy.format_remote_topic(source_alias, tp.topic), 0)}
        if kept:
            out[g] = kept
    return out


def wait_checkpoints(clients: Clients, flow: FlowSpec, committed: dict[str, dict[TP, int]],
                     timeout_s: float) -> list[str]:
    """MM2 emits checkpoints on an interval: wait (bounded) until they reflect the final committed offsets."""
    policy = ReplicationPolicy.for_flow(flow)
    want = {(g, policy.format_remote_topic(flow.source, tp.topic), tp.partition): o
            for g, offs in committed.items() for tp, o in offs.items()}
    deadline = time.monotonic() + timeout_s
    while True:
        log = read_checkpoints(clients.kafka_config(flow.target), flow.source, policy=policy,
                               group_filter=set(committed).__contains__)
        stale = sorted(f"{g} {t}-{p}" for (g, t, p), o in want.items()
                       if (cp := log.latest.get((g, t, p))) is None or cp.upstream_offset != o)
        if not stale or time.monotonic() > deadline:
            return stale
        time.sleep(1.0)


def compute_plan(rb: Runbook, clients: Clients, move: Move, groups: list[str]) -> TranslationPlan:
    flow, params = move.via, move.params
    policy = ReplicationPolicy.for_flow(flow)
    target_admin = clients.admin(flow.target)
    notes: list[str] = []
    meta: dict[str, Any] = dict(flow=move.flow.name, direction=move.direction, mode=params.mode,
                                translation=params.translation, from_cluster=move.from_cluster,
                                to_cluster=move.to_cluster, groups=groups, notes=notes)
    if not move.planned:
        found = unplanned.survivors(clients, rb.audit, flow, move.regex)
        wanted_groups = set(groups)
        rows = [r for r in unplanned.plan_rows(clients, flow, found, datetime.now(timezone.utc))
                if r.group in wanted_groups]
        notes += [f"unplanned: positions from what survives on {flow.target}"] + found.notes
        return TranslationPlan(rows=sorted(rows, key=_row_key), **meta)
    committed = _remote_committed(clients.admin(flow.source).committed_offsets(groups), policy, flow.source,
                                  target_admin.topics())
    remote: dict[str, str] = {}  # each topic's name on the target, formatted once

    def wanted(left: dict[str, dict[TP, int]]) -> dict[str, dict[TP, int | None]]:
        return {g: {TP(remote.get(tp.topic) or remote.setdefault(tp.topic, policy.format_remote_topic(
            flow.source, tp.topic)), tp.partition): o for tp, o in offs.items()} for g, offs in left.items()}

    if params.translation == "precise":
        # What the health check proved and is still exactly true is reused, the rest proved now; a thousand groups
        # are 150,000 rows: the plan is made column by column.
        proved = readiness.prove_positions(clients, flow, move.regex, committed, rb.audit)
        table = readiness.plan_table(proved, datetime.now(timezone.utc))
        # Only pairs readiness does not manage (none: it keeps the same pairs) would start at the partition's start.
        pairs = sum(len(o) for o in committed.values())
        rows = earliest_rows(table.keys(), wanted(committed), target_admin) if pairs > len(proved.wanted) else []
        notes += proved.notes(flow.target)
    else:
        mapping = clients.replication(flow).offset_mapping()
        wait_s = 2 * mapping.checkpoint_interval_s + 5
        stale = wait_checkpoints(clients, flow, committed, timeout_s=wait_s)
        if stale:
            notes.append(f"checkpoints behind the committed offsets after {wait_s}s for: " + ", ".join(stale[:10]))
        report = translate_precise(clients.kafka_config(flow.source), clients.kafka_config(flow.target),
                                   flow.source, flow.target, move.regex, policy=policy,
                                   offset_syncs_location=mapping.offset_syncs_location, committed=committed,
                                   source_isolation=mapping.source_isolation)
        rows = add_earliest_fallback(rows_from_precise(report, params.translation), wanted(committed),
                                     target_admin)
        if report.malformed_records:
            notes.append(f"{report.malformed_records} malformed MM2 records were skipped while translating")
        table = PlanTable()
    for r in rows:
        if r.method == "fallback:earliest":
            r.source_topic = policy.source_topic_of(r.target_topic, flow.source) or r.source_topic
    return TranslationPlan.of_table(table.add_rows(rows), **meta)


def _row_key(r: PlanRow) -> tuple:
    return (r.group, r.target_topic, r.partition)


# -- RPO -------------------------------------------------------------------------------------------

SAMPLE_LOOKBACK = 20  # the flow's newest metrics samples searched for the health check's last one with partitions


def rpo_lower_bound(audit: AuditStore, clients: Clients, flow: FlowSpec) -> dict[str, Any]:
    """Records the source received that never reached the target — a LOWER BOUND, with its basis and age — and
    beside it an ESTIMATE, labelled so.

    With the source down, only the target side answers: the source connector's offsets (what MM2 has replicated,
    kept by Connect) are compared with the newest samples of the source: the RPO sampler's (`rpo_sampler`, seconds
    old when the source is lost) and the health check's (its schedule old). Per partition, the records a sample saw
    beyond Connect's offset (`mm2.loss.unreplicated_at_least`: counted in records, so markers and aborted records
    of a transactional partition never raise it), the larger of the two; and the offsets MM2's checkpoints show
    groups had consumed (a group cannot have consumed what the source did not hold — by offsets, so only on
    partitions no sample saw with offsets without records). What the source received after the newest sample is
    unknown until it is reachable again: the failback (or the next health check that reaches it) counts the exact
    figure (`runbooks/rpo.py`). The estimate adds the sampler's produce rate times the time from its sample to
    when the source stopped answering it (or to now). Connect flushes source offsets every
    `offset.flush.interval.ms`: a failover started later than that after the source died sees them complete.
    """
    policy = ReplicationPolicy.for_flow(flow)
    replicated = clients.replication(flow).replicated_offsets()
    now = datetime.now(timezone.utc)
    health = next((m for m in audit.metrics(flow.name, limit=SAMPLE_LOOKBACK) if m.metrics.get("partitions")), None)
    kept = audit.replication_sample(flow.name)
    fast = FlowSample.from_stored(flow.name, kept.metrics) if kept is not None else None
    per: dict[str, int] = {}
    transactional: set[str] = set()
    for sample in (health.metrics["partitions"] if health else []), (fast.partitions if fast else []):
        for p in sample:
            if policy.is_heartbeats_topic(p["topic"]) or policy.is_internal_topic(p["topic"]):
                continue
            tp = TP(p["topic"], int(p["partition"]))
            per[str(tp)] = max(per.get(str(tp), 0), unreplicated_at_least(p, replicated.get(tp, -1)))
            if shows_gaps(p) or p.get("by") in ("records", "not-counted"):
                transactional.add(str(tp))
    log = read_checkpoints(clients.kafka_config(flow.target), flow.source, policy=policy)
    for (_, topic, part), cp in log.latest.items():
        tp = TP(policy.source_topic_of(topic, flow.source) or topic, part)
        if str(tp) not in transactional:
            per[str(tp)] = max(per.get(str(tp), 0), cp.upstream_offset - 1 - replicated.get(tp, -1))
    newest = max((s for s in (fast, health) if s is not None), key=lambda s: s.observed_at, default=None)
    age = lambda at: f"{(now - at).total_seconds():.1f}s before this report"  # noqa: E731
    seen = []
    if fast is not None:
        lost_at = (f"; the source stopped answering the sampler at {fast.unreachable_since.isoformat()}, "
                   f"{(fast.unreachable_since - fast.observed_at).total_seconds():.1f}s after it"
                   if fast.unreachable_since else "")
        seen.append(f"the RPO sampler's source end offsets sampled at {fast.observed_at.isoformat()} "
                    f"({age(fast.observed_at)}{lost_at})")
    if health is not None:
        seen.append(f"the health check's sampled at {health.observed_at.isoformat()} ({age(health.observed_at)})")
    basis = ("the source connector's offsets as Connect keeps them (what MM2 replicated), against "
             + (" and ".join(seen) + ", counted in records (markers and aborted records are not), and "
                if seen else "no sample of the source end offsets (no RPO sampler or health check ran) — only ")
             + "the offsets MM2's checkpoints show groups had consumed")
    records = sum(per.values())
    after = newest.observed_at.isoformat() if newest else "the last checkpoint"
    unknown = (f"records the source received after {after}"
               " are not known until it is reachable again (then the failback, or the first health check that reaches it,"
               " counts the exact figure: `mirrorbook audit rpo`)")
    known = known_loss(audit, flow.name)
    return {"records": records, "kind": "lower-bound", "partitions": {k: v for k, v in sorted(per.items()) if v},
            "basis": basis, "unknown": unknown, "sampled_at": newest.observed_at.isoformat() if newest else None,
            "sample_age_s": round((now - newest.observed_at).total_seconds(), 3) if newest else None,
            "sample_source": ("rpo_sampler" if newest is fast else "health check") if newest else None,
            "estimate": rpo_estimate(fast, records, now),
            # Records lost before the failover (the health check's ledger): gone from the target whatever the RPO.
            "known_lost": {k: known[k] for k in ("records", "data_loss", "target_reset", "sampled_at", "partitions")}
            if known and known["records"] else None}


def rpo_estimate(sample: FlowSample | None, bound: int, now: datetime) -> dict[str, Any] | None:
    """An ESTIMATE of the records lost (not a bound): the lower bound plus the produce rate the sampler saw times the
    time from its newest sample to when the source stopped answering it (else to now). Records written in that
    window may have been replicated before the source died, or not; more may have been written faster."""
    if sample is None or sample.rate is None:
        return None
    until = min(sample.unreachable_since or now, now)
    window = max(0.0, (until - sample.observed_at).total_seconds())
    more = round(sample.rate * window)
    return {"records": bound + more, "kind": "estimate", "rate_per_s": sample.rate, "window_s": round(window, 3),
            "note": (f"an estimate, not a bound: the lower bound {bound} plus {sample.rate:g} source offsets/s (the "
                     f"rate the RPO sampler saw over {sample.rate_window_s:g}s) x {window:.1f}s from its newest sample "
                     + ("to when the source stopped answering it" if sample.unreachable_since else "to this report")
                     + " — some of those may have been replicated, and transaction markers count as offsets")}
