"""Scale: a move's report at 1,000 groups x 149,100 group-partitions — the report file, the report task's XCom,
and the time to build, write and render them. No stack: the plan, the record proof's boundaries and the dry
run's planned calls are synthetic, shaped as a real run makes them (1,000 groups each on 149 partitions of three
topics, the first 100 on one more; mostly precise, some MM2 checkpoints and fallbacks with their notes, a few
rows re-reading or skipping), and go through the code the report task runs.

Two runs of the same plan: a real one (its record proof read back from a boundaries file of every
group-partition) and a dry run (one planned offsets write per group in its audit trail) — each grows a different
part of the XCom.

And the DR drill's HTML report of the same estate (each group-partition an outcome: committed before, written
after, re-read, skipped), as `render_html` renders it.

Run: .venv/bin/python benchmarks/report_scale.py [--groups 1000]
The last lines are `RESULT <name>=<value> <unit>`: report_bytes_g<N>, report_xcom_bytes_g<N> (the larger of the
two runs'), report_s_g<N> (build + write + render the text, the real run), drill_html_bytes_g<N>,
drill_html_s_g<N>.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from mirrorbook.audit import AuditStore
from mirrorbook.audit.models import RequestSummary
from mirrorbook.mm2.counts import Count
from mirrorbook.runbooks import move_report, parity
from mirrorbook.core.engine import RunInfo, Runbook
from mirrorbook.runbooks.plan import FALLBACK_NOTES, PlanRow, TranslationPlan

TOPICS = {"orders": 50, "payments": 50, "events": 49}  # 149 partitions a group; the first 100 also on "audit-0"


def synthetic_plan(groups: int, seed: int = 13) -> TranslationPlan:
    rnd = random.Random(seed)
    rows = []
    for g in range(groups):
        group = f"app-{g:04d}-consumer"
        tps = [(t, p) for t, n in TOPICS.items() for p in range(n)] + ([("audit", 0)] if g < 100 else [])
        for topic, p in tps:
            offset = rnd.randrange(10_000, 5_000_000)
            kind = rnd.random()
            if kind < 0.9:
                method, re_read, skip, note = "precise:exact", Count.exact(0), Count.exact(0), None
            elif kind < 0.97:
                method, re_read, skip, note = "mm2", Count.exact(rnd.randrange(1, 500)), Count.exact(0), None
            else:
                method, re_read = "fallback:checkpoint", Count.between(0, rnd.randrange(100, 5000))
                skip, note = Count.exact(0), f"not proven (no sync near the offset): {FALLBACK_NOTES['checkpoint']}"
            if g % 97 == 0 and p == 0:
                skip = Count.exact(rnd.randrange(1, 50))
            rows.append(PlanRow(group=group, source_topic=topic, target_topic=f"A.{topic}", partition=p,
                                source_offset=offset, offset=offset - re_read.low, method=method,
                                mm2_offset=offset - 10, precise_offset=offset, re_read=re_read, skip=skip, note=note))
    names = sorted({r.group for r in rows})
    return TranslationPlan(flow="A->B", direction="failover", mode="planned", translation="precise",
                           from_cluster="A", to_cluster="B", groups=names, rows=rows)


def record_proof(rb: Runbook, plan: TranslationPlan, out: Path) -> None:
    """A passed record proof whose boundaries file holds every group-partition (as record_parity writes it)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"group": r.group, "source_topic": r.source_topic, "source_partition": r.partition,
             "target_topic": r.target_topic, "source_committed": r.source_offset, "target_offset": r.offset,
             "true_offset": r.precise_offset, "plan_offset": r.offset,
             "status": "RE-READ" if r.re_read.low else "OK", "n": r.re_read.low or None,
             "differs_from_plan": False} for r in plan.rows]
    (out / "boundaries").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), out / "boundaries" / "part-0.parquet")
    rb.audit.record(run_id=rb.info.run_id, action="step.parity.record_parity", kind="step", result="ok",
                    details={"status": "passed", "output": str(out)})


def planned_calls(rb: Runbook, plan: TranslationPlan) -> None:
    """What a dry run's write_offsets leaves in the audit: one planned call a group (as move.write_offsets)."""
    by_group: dict[str, list[PlanRow]] = {}
    for r in plan.rows:
        by_group.setdefault(r.group, []).append(r)
    for g, rows in by_group.items():
        rb.audit.record(run_id=rb.info.run_id, action="groups.alter_offsets", kind="call", mutating=True,
                        result="planned", details={"precondition": f"group {g} is Empty with no members on B"},
                        request=RequestSummary(method="AlterConsumerGroupOffsets", path=f"kafka://B/groups/{g}",
                                               body={"partitions": len(rows), "offsets": {
                                                   f"{r.target_topic}-{r.partition}": r.offset for r in rows[:5]}}))


def report_files(rb: Runbook, plan: TranslationPlan, out: Path) -> dict[str, Any]:
    """The report task's work (GroupMoveOperator._report without the clusters): build, write, render."""
    from mirrorbook.runbooks.report import run_report

    started = time.perf_counter()
    extra: dict[str, Any] = {}
    if not rb.dry_run:
        extra["proof"] = parity.move_proof(rb, plan)
    run = run_report(rb.audit, rb.info.run_id)
    extra["mutating_calls"] = run["mutating_calls"]
    extra["planned_calls"] = run["planned_calls"]
    report = move_report.move_report(rb, plan, None, extra)
    text = move_report.render_report(report)
    path = out / f"failover-{rb.info.run_id}.json"
    path.write_text(move_report.report_json(report))
    xcom = move_report.for_xcom(report, path)
    elapsed = time.perf_counter() - started
    return {"report_bytes": path.stat().st_size, "xcom_bytes": len(json.dumps(xcom, default=str)),
            "text_lines": len(text.splitlines()), "s": elapsed}


def drill_html(plan: TranslationPlan) -> dict[str, Any]:
    """The drill report's HTML of `plan`'s estate: bytes, table rows, seconds to render."""
    from datetime import datetime, timezone

    from mirrorbook.reports.drill_report import DrillSummary, PartitionOutcome, render_html

    parts = [PartitionOutcome(group=r.group, source_topic=r.source_topic, target_topic=r.target_topic,
                              partition=r.partition, a_next=r.source_offset or 0, a_high=(r.source_offset or 0) + 50,
                              b_offset=r.offset, read_on_b=50 + r.re_read.low, re_read=r.re_read.low,
                              skipped=r.skip.low) for r in plan.rows]
    summary = DrillSummary(run_id="bench", flow=plan.flow, from_cluster=plan.from_cluster, to_cluster=plan.to_cluster,
                           translation=plan.translation, groups=plan.groups, partitions=parts,
                           finished_at=datetime.now(timezone.utc))
    started = time.perf_counter()
    html = render_html(summary, "drill-bench.json")
    return {"bytes": len(html.encode()), "rows": html.count("<tr"), "s": time.perf_counter() - started}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=1000)
    args = ap.parse_args()
    plan = synthetic_plan(args.groups)
    print(f"plan: {len(plan.groups)} groups, {len(plan.rows)} group-partitions")
    with tempfile.TemporaryDirectory(prefix="mb-report-scale-") as tmp:
        out = Path(tmp)
        audit = AuditStore(f"sqlite:///{out / 'audit.db'}")
        real = Runbook(RunInfo(run_id="real"), audit)
        record_proof(real, plan, out / "proof")
        dry = Runbook(RunInfo(run_id="dry"), audit, dry_run=True)
        planned_calls(dry, plan)
        figures = {"real": report_files(real, plan, out), "dry": report_files(dry, plan, out)}
    drill = drill_html(plan)
    for name, f in figures.items():
        print(f"  {name} run: report file {f['report_bytes']:,} bytes, XCom {f['xcom_bytes']:,} bytes, "
              f"text {f['text_lines']} lines, {f['s']:.2f} s")
    g = args.groups
    print(f"  drill report HTML: {drill['bytes']:,} bytes, {drill['rows']:,} table rows, {drill['s']:.2f} s")
    print(f"RESULT report_bytes_g{g}={figures['real']['report_bytes']} bytes")
    print(f"RESULT report_xcom_bytes_g{g}={max(f['xcom_bytes'] for f in figures.values())} bytes")
    print(f"RESULT report_s_g{g}={figures['real']['s']:.2f} s")
    print(f"RESULT drill_html_bytes_g{g}={drill['bytes']} bytes")
    print(f"RESULT drill_html_s_g{g}={drill['s']:.2f} s")


if __name__ == "__main__":
    main()
