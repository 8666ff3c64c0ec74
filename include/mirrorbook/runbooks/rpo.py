"""The RPO of an unplanned failover: the lower bound it reports with the source gone, and the exact figure
once the source is reachable again — both in the audit, linked to the failover run.

- `rpo_lower_bound` (the failover's approval and report steps): the bound with its basis and age, and beside it
  an estimate labelled so.
- `record_bound` (the failover's report step): the bound in one `rpo.bound`
  event of the failover run, and in its snapshot what the exact figure will need from the moment of the
  failover — per source partition, Connect's replicated offset and the target partition's end. The position
  is taken then: MM2 may resume after the source returns and replicate the lost records after all.
- `complete` (the failback, and the health check when it first reaches the source again): for each failover
  of the flow with a bound and no exact figure yet, reads the source's log and the target's newest copies,
  counts the loss per partition (`mm2/loss.py`) and records one `rpo.exact` event in the failover run (every
  partition's figure in its snapshot).
  Computed once per failover run: a later call finds the event and does not add another.
- `history` / `render`: both figures per failover run, for the reports and `mirrorbook audit rpo`.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from mirrorbook.audit import AuditStore
from mirrorbook.audit.models import AuditRecord
from mirrorbook.bounds import cut
from mirrorbook.clients import Clients
from mirrorbook.errors import MirrorbookError
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.counts import Count, total
from mirrorbook.mm2.loss import AtFailover, PartitionLoss, partition_loss, search_range
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.kafka.reader import Isolation, read_ranges
from mirrorbook.mm2.precise import Marks, PartitionData, Rec, read_partitions, rec
from mirrorbook.redaction import get_logger
from mirrorbook.core.engine import Runbook
from mirrorbook.mm2.internal_topics import read_checkpoints
from mirrorbook.mm2.lag import shows_gaps
from mirrorbook.mm2.loss import unreplicated_at_least
from mirrorbook.replication import backend_for
from mirrorbook.runbooks.health.results import known_loss
from mirrorbook.runbooks.rpo_sampler import FlowSample
from mirrorbook.runbooks.user_topics import record_kind
from mirrorbook.topology import FlowSpec

log = get_logger(__name__)

BOUND, EXACT = "rpo.bound", "rpo.exact"
POSITION_KIND, LOSS_KIND = "rpo-position", "rpo-loss"
COPY_LOOKBACK = 10  # target offsets read below a partition's end to find its newest copy
SHOWN_PARTITIONS = 50  # per-partition figures in the event itself; all of them in its snapshot
PENDING_LOOKBACK = 20  # the newest failovers of a flow whose exact figure is looked for


def _now() -> datetime:
    return datetime.now(timezone.utc)


# -- at the failover ------------------------------------------------------------------------------

def at_failover(clients: Clients, flow: FlowSpec) -> dict[str, AtFailover]:
    """Per user source partition MM2 replicates: Connect's replicated offset and the target partition's end
    (both readable with the source down)."""
    policy = ReplicationPolicy.for_flow(flow)
    replicated = {tp: o for tp, o in backend_for(clients, flow).replicated_offsets().items()
                  if record_kind(policy, tp.topic) is None}
    target = clients.admin(flow.target)
    on_target = target.topics()
    tps = set(replicated)
    if not policy.identity:  # remote partitions MM2 created but has no offset for yet
        tps |= {TP(src, p) for t, n in on_target.items()
                if (src := policy.source_topic_of(t, flow.source)) and record_kind(policy, src) is None
                for p in range(n)}
    remote = {tp: TP(policy.format_remote_topic(flow.source, tp.topic), tp.partition) for tp in tps}
    remote = {tp: r for tp, r in remote.items() if r.partition < on_target.get(r.topic, 0)}
    ends = target.high_watermarks(remote.values())
    return {str(tp): AtFailover(replicated=replicated.get(tp, -1), target_end=ends.get(remote[tp], 0))
            for tp in sorted(tps) if tp in remote}


def record_bound(rb: Runbook, clients: Clients, flow: FlowSpec, started_at: datetime | None) -> dict[str, Any]:
    """The failover run's RPO bound, recorded once (`rpo.bound`) with its position at the failover; a re-run of
    the report finds it."""
    kept = bound_event(rb.audit, rb.info.run_id)
    if kept is not None:
        recorded: dict[str, Any] = kept.details["rpo"]
        return recorded
    started = started_at or _run_start(rb.audit, rb.info.run_id)
    bound = rpo_lower_bound(rb.audit, clients, flow)
    position = at_failover(clients, flow)
    # A snapshot, not the event's details: those are cut to fit the store, and every partition is needed.
    snapshot = rb.audit.save_snapshot(POSITION_KIND, flow.name, f"{flow.target}:{flow.name}", {
        "failover_started_at": started.isoformat(), "partitions": {k: v.model_dump() for k, v in position.items()}},
        run_id=rb.info.run_id, note="replication position at the unplanned failover (its exact RPO is counted from it)")
    rb.audit.record(action=BOUND, kind="step", result="ok", run_id=rb.info.run_id, dag_id=rb.info.dag_id,
                    task_id=rb.info.task_id, user=rb.info.user, flow=flow.name, snapshot_id=snapshot,
                    details={"rpo": bound, "failover_started_at": started.isoformat(), "partitions": len(position)})
    return bound


def _run_start(audit: AuditStore, run_id: str) -> datetime:
    first = audit.events(run_id=run_id, limit=1)
    return first[0].started_at if first else _now()


def bound_event(audit: AuditStore, run_id: str) -> AuditRecord | None:
    found = audit.events(run_id=run_id, action=BOUND, limit=1)
    return found[0] if found else None


def exact_event(audit: AuditStore, run_id: str) -> AuditRecord | None:
    found = audit.events(run_id=run_id, action=EXACT, limit=1)
    return found[0] if found else None


# -- once the source is back ----------------------------------------------------------------------

def pending(audit: AuditStore, flow: FlowSpec) -> list[AuditRecord]:
    """The flow's recent unplanned failovers whose exact RPO is not known yet, oldest first."""
    bounds = audit.events(flow=flow.name, action=BOUND, limit=PENDING_LOOKBACK, newest_first=True)
    return [b for b in reversed(bounds) if b.run_id and exact_event(audit, b.run_id) is None]


def complete(rb: Runbook, clients: Clients, flow: FlowSpec) -> list[dict[str, Any]]:
    """Count and record (`rpo.exact`, in the failover's run) the loss of every failover of `flow` still without
    one. The source must answer; a failover whose figure cannot be read now is logged and left for next time."""
    done = []
    for b in pending(rb.audit, flow):
        try:
            figure = exact(rb.audit, clients, flow, b)
        except MirrorbookError as exc:
            log.warning("exact RPO of failover run %s not computed yet: %s", b.run_id, exc)
            continue
        figure |= {"computed_by_run_id": rb.info.run_id, "computed_at": _now().isoformat()}
        snapshot = rb.audit.save_snapshot(LOSS_KIND, flow.name, f"{flow.source}:{flow.name}", figure, run_id=b.run_id,
                                          note=f"exact RPO of failover run {b.run_id}, every partition")
        shown_parts = dict(list(figure["partitions"].items())[:SHOWN_PARTITIONS])
        rb.audit.record(action=EXACT, kind="step", result="ok", run_id=b.run_id, dag_id=rb.info.dag_id,
                        task_id=rb.info.task_id, user=rb.info.user, flow=flow.name, snapshot_id=snapshot,
                        details=figure | {"partitions": shown_parts, "partitions_lost": len(figure["partitions"])})
        done.append(figure)
    return done


def exact(audit: AuditStore, clients: Clients, flow: FlowSpec, bound: AuditRecord) -> dict[str, Any]:
    """The loss of the failover `bound` records, from its kept position and the source and target read now."""
    policy = ReplicationPolicy.for_flow(flow)
    if bound.snapshot_id is None:
        raise MirrorbookError(f"the RPO bound of failover run {bound.run_id} keeps no replication position",
                              "it was recorded by an older mirrorbook: only its bound is known")
    kept = audit.snapshot(bound.snapshot_id).payload
    started = datetime.fromisoformat(kept["failover_started_at"])
    position = {TP.parse(k): AtFailover.model_validate(v) for k, v in kept["partitions"].items()}
    source = clients.admin(flow.source)
    existing = source.topics()
    gone = sorted(str(tp) for tp in position if tp.partition >= existing.get(tp.topic, 0))
    tps = [tp for tp in position if str(tp) not in gone]
    marks = {tp: Marks(w.low, w.high) for tp, w in source.watermarks(tps).items()}
    cutoff = {tp: o if o >= 0 else marks[tp].high
              for tp, o in source.offsets_for_times(tps, int(started.timestamp() * 1000)).items()}
    copies = _newest_copies(clients, flow, policy, {tp: position[tp] for tp in tps})
    wanted = {tp: r for tp in tps if (r := search_range(position[tp], marks[tp], cutoff[tp]))[1] > r[0]}
    config = clients.kafka_config(flow.source)
    # Counted committed (aborted records are no loss), up to the last stable offset: an open transaction's
    # records are not counted yet (the upper bound keeps them). Searched uncommitted: MM2 may have copied an
    # aborted record last.
    stable = source.last_stable_offsets(wanted) if wanted else {}
    data = _read(config, {tp: (s, min(e, stable.get(tp, e))) for tp, (s, e) in wanted.items()}, "read_committed")
    seen = _read(config, wanted, "read_uncommitted")
    empty = PartitionData([], [])
    losses: dict[str, PartitionLoss] = {}
    for tp in sorted(tps):
        losses[str(tp)] = partition_loss(position[tp], copies.get(tp), data.get(tp, empty), marks[tp], cutoff[tp],
                                         seen.get(tp, empty))
    records = total(p.records for p in losses.values())
    return {"failover_run_id": bound.run_id, "flow": flow.name, "records": records.model_dump(),
            "exact": records.is_exact, "bound": bound.details["rpo"]["records"],
            "partitions": {k: p.model_dump() for k, p in losses.items() if p.records != Count.exact(0)},
            "checked_partitions": len(losses), "gone": gone,
            "basis": (f"{flow.source}'s log as read once reachable again, against the newest copy on "
                      f"{flow.target} of each partition and Connect's replicated offsets, both as the failover "
                      f"left them; records written at or after the failover began ({started.isoformat()}, by "
                      "record timestamp: offsets-for-times) are not counted")}


def _read(config: dict[str, Any], ranges: dict[TP, tuple[int, int]], isolation: Isolation) -> dict[TP, PartitionData]:
    """Each range read once at `isolation`: its records, and the range they cover."""
    ranges = {tp: r for tp, r in ranges.items() if r[1] > r[0]}
    found: dict[TP, list[Rec]] = {tp: [] for tp in ranges}
    for m in read_ranges(config, ranges, isolation=isolation) if ranges else ():
        found[TP(m.topic(), m.partition())].append(rec(m))
    return {tp: PartitionData([ranges[tp]], found[tp]) for tp in ranges}


def _newest_copies(clients: Clients, flow: FlowSpec, policy: ReplicationPolicy,
                   position: dict[TP, AtFailover]) -> dict[TP, Rec]:
    """Per source partition, the target's newest copy at the failover (its last record below `target_end`), where
    the target still holds it. A few offsets are read, not one: with exactly-once source support MM2 writes in
    transactions, and the last offsets can be their markers."""
    remote = {tp: TP(policy.format_remote_topic(flow.source, tp.topic), tp.partition)
              for tp, at in position.items() if at.target_end > 0}
    target = clients.admin(flow.target)
    existing = target.topics()
    remote = {tp: r for tp, r in remote.items() if r.partition < existing.get(r.topic, 0)}
    marks = target.watermarks(remote.values())
    # Deleted since (retention), or the topic recreated shorter: no copy to look for (never a read that waits).
    wanted = {r: [(max(marks[r].low, position[tp].target_end - COPY_LOOKBACK), position[tp].target_end)]
              for tp, r in remote.items() if marks[r].low < position[tp].target_end <= marks[r].high}
    read = read_partitions(clients.kafka_config(flow.target), wanted) if wanted else {}
    return {tp: read[r].records[-1] for tp, r in remote.items() if r in read and read[r].records}


# -- showing both ---------------------------------------------------------------------------------

def history(audit: AuditStore, flow: str | None = None, run_id: str | None = None,
            limit: int | None = None) -> list[dict[str, Any]]:
    """Per unplanned failover run (oldest first): its bound and, once known, its exact figure."""
    if run_id is not None:
        bounds = audit.events(run_id=run_id, action=BOUND, limit=1)
    else:
        bounds = list(reversed(audit.events(flow=flow, action=BOUND, limit=limit, newest_first=True)))
    out = []
    for b in bounds:
        e = exact_event(audit, b.run_id) if b.run_id else None
        out.append({"failover_run_id": b.run_id, "flow": b.flow, "failover_started_at":
                    b.details.get("failover_started_at"), "bound": b.details.get("rpo"),
                    "exact": e.details if e else None})
    return out


def report_entry(row: dict[str, Any]) -> dict[str, Any]:
    """A `history` row as a move report's `rpo`: the bound's fields, the failover run and the exact figure."""
    return {**(row["bound"] or {}), "failover_run_id": row["failover_run_id"], "exact": row["exact"]}


def for_failover(rb: Runbook, clients: Clients, flow: FlowSpec, started_at: datetime | None) -> dict[str, Any]:
    """The failover report's `rpo`: its bound (recorded once), and the exact figure if already known."""
    record_bound(rb, clients, flow, started_at)
    return report_entry(history(rb.audit, run_id=rb.info.run_id)[0])


def latest(audit: AuditStore, flow: FlowSpec) -> dict[str, Any] | None:
    """The newest unplanned failover of `flow`, as a report's `rpo` (None: there was none)."""
    found = history(audit, flow=flow.name, limit=1)
    return report_entry(found[-1]) if found else None


def render_known_lost(bound: dict[str, Any]) -> str | None:
    """One line for the records the health check knew the flow had lost before the failover (the bound's
    `known_lost`), or None when it knew of none."""
    known = bound.get("known_lost")
    if not known:
        return None
    return (f"besides, {known['records']} record(s) known lost before the failover (health check, as of "
            f"{known['sampled_at']}: {known['data_loss']} DATA_LOSS, {known['target_reset']} TARGET_RESET): gone "
            "from the target whatever the figures above")


def render_exact(figure: dict[str, Any] | None, source: str | None = None) -> str:
    """One line: the exact figure, or why it is not known yet."""
    where = source or "the source"
    if figure is None:
        return (f"exact figure: not known yet — counted once {where} is reachable again "
                "(the failback, or the next health check that reaches it)")
    records = Count.model_validate(figure["records"])
    parts = ", ".join(f"{k} {Count.model_validate(v['records'])}" + (f" ({cut(v['note'])})" if v.get("note") else "")
                      for k, v in list(figure["partitions"].items())[:20])
    more = figure.get("partitions_lost", len(figure["partitions"])) - min(20, len(figure["partitions"]))
    return (f"exact figure ({'exact' if records.is_exact else 'bounded'}, counted {figure['computed_at']} by run "
            f"{figure['computed_by_run_id']}): {records} record(s) written before the failover began never reached "
            f"the target" + (f" — {parts}" + (f" (+{more} more)" if more > 0 else "") if parts else "")
            + f"; basis: {figure['basis']}"
            + (f"; partitions gone from the source: {', '.join(figure['gone'][:10])}" if figure.get("gone") else ""))


# -- the lower bound, with the source gone ------------------------------------------------------------

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
    replicated = backend_for(clients, flow).replicated_offsets()
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

    def age(at: datetime) -> str:
        return f"{(now - at).total_seconds():.1f}s before this report"

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
               " are not known until it is reachable again (then the failback, or the first health check that reaches"
               " it, counts the exact figure: `mirrorbook audit rpo`)")
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
