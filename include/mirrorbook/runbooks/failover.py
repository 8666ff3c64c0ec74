"""mm2_failover: translating a flow's groups from its source to its target, and the RTO/RPO report."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from mirrorbook.audit import AuditStore
from mirrorbook.clients import Clients
from mirrorbook.kafka.types import TP
from mirrorbook.mm2.counts import Count
from mirrorbook.mm2.internal_topics import read_checkpoints
from mirrorbook.mm2.policy import ReplicationPolicy
from mirrorbook.mm2.precise import translate_precise
from mirrorbook.runbooks.engine import Runbook
from mirrorbook.runbooks.move import Move
from mirrorbook.runbooks.plan import (PlanRow, TranslationPlan, add_earliest_fallback, rows_from_checkpoints,
                                      rows_from_precise)
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
    if move.planned:
        committed = _remote_committed(clients.admin(flow.source).committed_offsets(groups), policy, flow.source,
                                      target_admin.topics())
        mapping = clients.replication(flow).offset_mapping()
        if params.translation == "mm2":
            wait_s = 2 * mapping.checkpoint_interval_s + 5
            stale = wait_checkpoints(clients, flow, committed, timeout_s=wait_s)
            if stale:
                notes.append(f"checkpoints behind the committed offsets after {wait_s}s for: " + ", ".join(stale[:10]))
        report = translate_precise(clients.kafka_config(flow.source), clients.kafka_config(flow.target),
                                   flow.source, flow.target, move.regex, policy=policy,
                                   offset_syncs_location=mapping.offset_syncs_location, committed=committed)
        rows = rows_from_precise(report, params.translation)
        wanted = {g: {TP(policy.format_remote_topic(flow.source, tp.topic), tp.partition): o
                      for tp, o in offs.items()} for g, offs in committed.items()}
        rows = add_earliest_fallback(rows, wanted, target_admin)
        for r in rows:
            if r.method == "fallback:earliest":
                r.source_topic = policy.source_topic_of(r.target_topic, flow.source) or r.source_topic
        if report.malformed_records:
            notes.append(f"{report.malformed_records} malformed MM2 records were skipped while translating")
    else:
        log = read_checkpoints(clients.kafka_config(flow.target), flow.source, policy=policy,
                               group_filter=set(groups).__contains__)
        rows = rows_from_checkpoints(log, groups, policy, flow.source)
        notes.append(f"unplanned: translated from {log.records} checkpoint record(s) on {flow.target} alone")
    return TranslationPlan(flow=move.flow.name, direction=move.direction, mode=params.mode,
                           translation=params.translation, from_cluster=move.from_cluster,
                           to_cluster=move.to_cluster, groups=groups, rows=sorted(rows, key=_row_key), notes=notes)


def _row_key(r: PlanRow) -> tuple:
    return (r.group, r.target_topic, r.partition)


# -- RPO -------------------------------------------------------------------------------------------

def rpo_estimate(audit: AuditStore, clients: Clients, flow: FlowSpec) -> dict[str, Any]:
    """Records written to the source that never reached the target, per partition.

    From the health-check history when there is one: the last known source high watermark minus the
    last replicated offset. Otherwise a lower bound from the checkpoints: records the groups had
    already consumed on the source beyond what was replicated. Records produced after the last
    observation cannot be known while the source is down.
    """
    policy = ReplicationPolicy()
    replicated = clients.replication(flow).replicated_offsets()
    sample = audit.latest_metrics(flow.name)
    per: dict[str, int] = {}
    if sample and sample.metrics.get("partitions"):
        for p in sample.metrics["partitions"]:
            if policy.is_heartbeats_topic(p["topic"]):
                continue
            tp = TP(p["topic"], int(p["partition"]))
            per[str(tp)] = max(0, int(p["high_watermark"]) - 1 - replicated.get(tp, -1))
        age = (datetime.now(timezone.utc) - sample.observed_at).total_seconds()
        basis = f"health-check history at {sample.observed_at.isoformat()} ({age:.0f}s before this estimate)"
        kind = "estimate"
    else:
        log = read_checkpoints(clients.kafka_config(flow.target), flow.source, policy=ReplicationPolicy.for_flow(flow))
        for (g, topic, part), cp in log.latest.items():
            src = ReplicationPolicy.for_flow(flow).source_topic_of(topic, flow.source) or topic
            tp = TP(src, part)
            per[str(tp)] = max(per.get(str(tp), 0), cp.upstream_offset - 1 - replicated.get(tp, -1))
        basis = "checkpoints only (no health-check history): a lower bound"
        kind = "lower-bound"
    return {"records": sum(per.values()), "partitions": dict(sorted(per.items())), "basis": basis, "kind": kind}


# -- report ----------------------------------------------------------------------------------------

def _ts(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def move_report(rb: Runbook, plan: TranslationPlan | None, triggered_at: datetime | None,
                extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the operator and the drill report need: offsets written, re-reads, skips, RTO."""
    written, stopped = _ts(rb.progress_get("written_at")), _ts(rb.progress_get("flow_stopped_at"))
    rto = None
    if triggered_at and written and stopped:
        rto = round((max(written, stopped) - triggered_at).total_seconds(), 3)
    out: dict[str, Any] = {
        "run_id": rb.info.run_id,
        "dry_run": rb.dry_run,
        "rto_s": rto,
        "triggered_at": triggered_at.isoformat() if triggered_at else None,
        "offsets_written_at": written.isoformat() if written else None,
        "flow_stopped_at": stopped.isoformat() if stopped else None,
        **(extra or {}),
    }
    if plan is not None:
        out.update(plan=plan.totals(), direction=plan.direction, mode=plan.mode, translation=plan.translation,
                   flow=plan.flow, from_cluster=plan.from_cluster, to_cluster=plan.to_cluster, notes=plan.notes,
                   rows=[r.model_dump() for r in plan.rows])
    return out


def _range(low: int, high: int | None) -> str:
    return str(Count.between(low, high))


def render_report(report: dict[str, Any]) -> str:
    lines = [f"{report.get('direction', 'move')} of {report.get('flow')} "
             f"({report.get('mode')}, translation={report.get('translation')}): "
             f"RTO {report['rto_s']}s" if report.get("rto_s") is not None else
             f"{report.get('direction', 'move')} of {report.get('flow')}: RTO not measured (dry run or incomplete)"]
    totals = report.get("plan") or {}
    if totals:
        lines.append(f"  {totals['groups']} group(s), {totals['partitions']} partition(s): re-read "
                     f"{_range(totals['re_read'], totals['re_read_max'])}, skipped "
                     f"{_range(totals['skipped'], totals['skipped_max'])}"
                     + (f" ({totals['bounded']} row(s) bounded, not counted exactly)" if totals['bounded'] else "")
                     + f"; methods {totals['methods']}")
    if report.get("rpo"):
        lines.append(f"  RPO ({report['rpo']['kind']}): {report['rpo']['records']} record(s) not replicated — "
                     f"{report['rpo']['basis']}")
    if report.get("divergence"):
        d = report["divergence"]
        lines.append(f"  divergence: {d['records']} record(s) reached {d['cluster']} but never the other side")
    for r in report.get("rows", [])[:200]:
        lines.append(f"    {r['group']:<24} {r['target_topic']}-{r['partition']:<3} offset {r['offset']:<8} "
                     f"({r['method']}) re-read {Count.model_validate(r['re_read'])} "
                     f"skip {Count.model_validate(r['skip'])}")
    for n in report.get("notes", []):
        lines.append(f"  note: {n}")
    return "\n".join(lines)
