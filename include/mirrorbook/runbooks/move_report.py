"""The report of a move (failover, failback, the drill's cutover): offsets written, re-reads, skips, RTO, RPO
(the unplanned failover's bound, and its exact figure once the source was reachable again), and the records the
health check knows the flow lost before the move (DATA_LOSS, TARGET_RESET)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

from mirrorbook.mm2.counts import Count
from mirrorbook.runbooks.engine import Runbook
from mirrorbook.runbooks.health.results import known_loss
from mirrorbook.runbooks.plan import TranslationPlan
from mirrorbook.runbooks.rpo import render_exact, render_known_lost
from mirrorbook.runbooks.standing import SoFar, so_far
from mirrorbook.topology import FlowSpec


def _ts(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def move_report(rb: Runbook, plan: TranslationPlan | None, triggered_at: datetime | None,
                extra: dict[str, Any] | None = None, flows: Sequence[FlowSpec] = ()) -> dict[str, Any]:
    """What the operator and the drill report need: offsets written, re-reads, skips, RTO. `flows`: those the
    run drives, so that an incomplete run's changes name their connectors by flow and role."""
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
    if rto is None and not rb.dry_run:
        # An incomplete run: what it did and what it already changed, so no one assumes nothing happened.
        out["so_far"] = so_far(rb.audit, rb.info.run_id, flows).model_dump(exclude={"written"})
    if plan is not None:
        out["known_loss"] = known_loss(rb.audit, plan.flow)
        out.update(plan=plan.totals(), direction=plan.direction, mode=plan.mode, translation=plan.translation,
                   flow=plan.flow, from_cluster=plan.from_cluster, to_cluster=plan.to_cluster, notes=plan.notes,
                   rows=[r.model_dump() for r in plan.rows])
    return out


def _range(low: int, high: int | None) -> str:
    return str(Count.between(low, high))


def render_report(report: dict[str, Any]) -> str:
    lines = [f"{report.get('direction', 'move')} of {report.get('flow')} "
             f"({report.get('mode')}, translation={report.get('translation')}): "
             + (f"RTO {report['rto_s']}s" if report.get("rto_s") is not None else
                "dry run, nothing changed: RTO not measured" if report.get("dry_run") else
                "incomplete (the offsets are not both written and the flow stopped): RTO not measured")]
    if report.get("so_far"):
        lines += [f"  {line}" for line in SoFar.model_validate(report["so_far"]).lines()]
    proof = report.get("proof") or {}
    if proof.get("source") == "record_parity":
        t = proof["totals"]
        lines.append(f"  proven from both clusters' records ({proof['status']}): {t['rows']} group-partition(s), "
                     f"re-read {t['re_read']}, skipped {t['skipped']}, missing {t['missing']}, "
                     f"unprovable {t['unprovable']}"
                     + (f"; {t['differs_from_plan']} position(s) differ from the plan" if t["differs_from_plan"] else ""))
        for r in proof["rows"]:
            if r["differs_from_plan"] or r["status"] != "OK":
                lines.append(f"    {r['group']:<24} {r['target_topic']}-{r['source_partition']:<3} {r['status']} "
                             f"{r['n'] or ''} committed {r['target_offset']}, true {r['true_offset']}, "
                             f"plan {r['plan_offset']}")
    elif proof.get("source") == "unprovable":
        lines.append(f"  UNPROVABLE: {proof['totals']['unprovable']} group-partition(s) — {proof['note']}")
    elif proof:
        lines.append(f"  {proof['note']}")
    totals = report.get("plan") or {}
    if totals:
        lines.append(f"  plan: {totals['groups']} group(s), {totals['partitions']} partition(s): re-read "
                     f"{_range(totals['re_read'], totals['re_read_max'])}, skipped "
                     f"{_range(totals['skipped'], totals['skipped_max'])}"
                     + (f" ({totals['bounded']} row(s) bounded, not counted exactly)" if totals['bounded'] else "")
                     + f"; methods {totals['methods']}")
    if report.get("rpo"):
        rpo = report["rpo"]
        back = report.get("direction") == "failback"
        of = f" of failover run {rpo['failover_run_id']}" if back else ""
        lines.append(f"  RPO{of}: at least {rpo['records']} record(s) never reached the target (a lower bound) — "
                     f"basis: {rpo['basis']}; unknown: {rpo['unknown']}")
        if (known := render_known_lost(rpo)) is not None:
            lines.append(f"  RPO{of}: {known}")
        if "exact" in rpo:
            lines.append(f"  RPO{of}, {render_exact(rpo['exact'], report.get('to_cluster' if back else 'from_cluster'))}")
    if report.get("known_loss") is not None:
        lines.append(f"  {report['known_loss']['text']}")
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
