"""The report of a move (failover, failback, the drill's cutover): offsets written, re-reads, skips, RTO, RPO
(the unplanned failover's bound, and its exact figure once the source was reachable again), and the records the
health check knows the flow lost before the move (DATA_LOSS, TARGET_RESET).

It stays readable at a thousand groups (150,000 group-partitions): the summary comes first — the run's figures,
then one line per group, the groups to look at first on top —, and the group-partitions last, column by column
(`plan.to_columns`: at 1,000 groups 69 MB of one indented object per row became 9.9 MB,
benchmarks/report_scale.py). The report task's XCom is the summary with every list cut to its first few items
(`for_xcom`); the whole is in the file (`read_report`).
"""

from __future__ import annotations

from datetime import datetime
import json
from pathlib import Path
from typing import Any, Sequence

from mirrorbook.mm2.counts import Count
from mirrorbook.core.engine import Runbook
from mirrorbook.runbooks.health.results import known_loss
from mirrorbook.runbooks.plan import PlanRow, TranslationPlan, from_columns, group_totals
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
                   groups=[t.model_dump() for t in group_totals(plan.columns())], rows=plan.columns())
    return out


# -- the report file and the XCom ---------------------------------------------------------------------------
XCOM_LISTED = 10  # items of each list the report task's XCom carries (the rest: in the file)


def report_json(report: dict[str, Any]) -> str:
    """The report file: the summary indented, to read as it is; the rows' columns last and compact — indented,
    they would be one line per number, 150,000 rows times 15."""
    head = {k: v for k, v in report.items() if k != "rows"}
    text = json.dumps(head, indent=2, default=str)
    if "rows" not in report:
        return text
    rows = json.dumps(report["rows"], separators=(",", ":"), default=str)
    return f'{text[:-2]}{"," if head else ""}\n  "rows": {rows}\n}}'


def read_report(path: Path | str) -> dict[str, Any]:
    """A report file as `move_report` made it, its rows one dict each (as a report kept before the columns)."""
    report: dict[str, Any] = json.loads(Path(path).read_text())
    if "rows" in report:
        report["rows"] = [r.model_dump() for r in report_rows(report)]
    return report


def report_rows(report: dict[str, Any], limit: int | None = None) -> list[PlanRow]:
    """The report's group-partitions (the first `limit`), from its columns or from rows kept one dict each."""
    rows = report.get("rows") or []
    if isinstance(rows, list):
        return [PlanRow.model_validate(r) for r in rows[:limit]]
    return from_columns(rows, limit)


def for_xcom(report: dict[str, Any], path: Path | str) -> dict[str, Any]:
    """What the report task returns (Airflow keeps it in its database, the UI shows it): the report without its
    rows, each list cut to its first `XCOM_LISTED` items with `<key>_count` beside it — a dry run's planned calls
    are one per group, a proof's listed rows two hundred —, and where the whole report is."""
    return {**_listed({k: v for k, v in report.items() if k != "rows"}), "report_path": str(path)}


def _listed(value: Any) -> Any:
    if isinstance(value, list):
        return [_listed(v) for v in value[:XCOM_LISTED]]
    if not isinstance(value, dict):
        return value
    out = {k: _listed(v) for k, v in value.items()}
    out.update({f"{k}_count": len(v) for k, v in value.items() if isinstance(v, list) and len(v) > XCOM_LISTED})
    return out


LISTED_GROUPS = 20  # groups the text lists (a task log, the CLI), then rows
LISTED_ROWS = 200


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
    lines += _proof_lines(report.get("proof") or {})
    totals = report.get("plan") or {}
    if totals:
        lines.append(f"  plan: {totals['groups']} group(s), {totals['partitions']} partition(s): re-read "
                     f"{_range(totals['re_read'], totals['re_read_max'])}, skipped "
                     f"{_range(totals['skipped'], totals['skipped_max'])}"
                     + (f" ({totals['bounded']} row(s) bounded, not counted exactly)" if totals['bounded'] else "")
                     + f"; methods {totals['methods']}")
    lines += _rpo_lines(report)
    if report.get("known_loss") is not None:
        lines.append(f"  {report['known_loss']['text']}")
    if report.get("divergence"):
        d = report["divergence"]
        most = "at most " if d.get("exact") is False else ""  # a range past the read budget: its offsets
        lines.append(f"  divergence: {most}{d['records']} record(s) reached {d['cluster']} but never the other side")
    groups = report.get("groups") or []
    if len(groups) > 1:
        lines.append(f"  groups, those that may skip or have notes first ({min(len(groups), LISTED_GROUPS)} of "
                     f"{len(groups)}):")
        lines += [f"    {g['group']:<24} {g['partitions']} partition(s): "
                  f"re-read {_range(g['re_read'], g['re_read_max'])}"
                  f", skip {_range(g['skipped'], g['skipped_max'])}; methods {g['methods']}"
                  + (f"; {g['noted']} note(s)" if g["noted"] else "") for g in groups[:LISTED_GROUPS]]
    for r in report_rows(report, LISTED_ROWS):
        lines.append(f"    {r.group:<24} {r.target_topic}-{r.partition:<3} offset {r.offset:<8} "
                     f"({r.method}) re-read {r.re_read} skip {r.skip}")
    for n in report.get("notes", []):
        lines.append(f"  note: {n}")
    return "\n".join(lines)


def _proof_lines(proof: dict[str, Any]) -> list[str]:
    """What the record proof established, if it ran."""
    lines: list[str] = []
    if proof.get("source") == "record_parity":
        t = proof["totals"]
        lines.append(f"  proven from both clusters' records ({proof['status']}): {t['rows']} group-partition(s), "
                     f"re-read {t['re_read']}, skipped {t['skipped']}, missing {t['missing']}, "
                     f"unprovable {t['unprovable']}"
                     + (f"; {t['differs_from_plan']} position(s) differ from the plan" if t["differs_from_plan"]
                        else ""))
        for r in proof["rows"]:
            if r["differs_from_plan"] or r["status"] != "OK":
                lines.append(f"    {r['group']:<24} {r['target_topic']}-{r['source_partition']:<3} {r['status']} "
                             f"{r['n'] or ''} committed {r['target_offset']}, true {r['true_offset']}, "
                             f"plan {r['plan_offset']}")
    elif proof.get("source") == "unprovable":
        lines.append(f"  UNPROVABLE: {proof['totals']['unprovable']} group-partition(s) — {proof['note']}")
    elif proof:
        lines.append(f"  {proof['note']}")
    return lines


def _rpo_lines(report: dict[str, Any]) -> list[str]:
    """The RPO of an unplanned failover (the failback shows its failover's): the bound, the estimate, the exact
    figure once counted."""
    lines: list[str] = []
    if report.get("rpo"):
        rpo = report["rpo"]
        back = report.get("direction") == "failback"
        of = f" of failover run {rpo['failover_run_id']}" if back else ""
        lines.append(f"  RPO{of}: at least {rpo['records']} record(s) never reached the target (a lower bound) — "
                     f"basis: {rpo['basis']}; unknown: {rpo['unknown']}")
        if rpo.get("estimate"):
            est = rpo["estimate"]
            lines.append(f"  RPO{of} estimate: about {est['records']} record(s) — {est['note']}")
        if (known := render_known_lost(rpo)) is not None:
            lines.append(f"  RPO{of}: {known}")
        if "exact" in rpo:
            cluster = report.get("to_cluster" if back else "from_cluster")
            lines.append(f"  RPO{of}, {render_exact(rpo['exact'], cluster)}")
    return lines
