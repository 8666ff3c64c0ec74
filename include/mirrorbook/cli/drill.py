"""`mirrorbook drill list|report`: the DR drill reports the audit store lists."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mirrorbook.audit import Artifact, AuditStore
from mirrorbook.cli.audit import store_command
from mirrorbook.audit.codec import format_time
from mirrorbook.errors import MirrorbookError
from mirrorbook.reports.drill_report import ARTIFACT_KIND, load_summary, render_html


class DrillNotFound(MirrorbookError):
    pass


def register(p: argparse.ArgumentParser) -> None:
    dr = p.add_subparsers(dest="drill_cmd", required=True)

    ls = store_command(dr, "list", "the drills with a stored report, oldest first", cmd_list)
    ls.add_argument("--json", action="store_true")
    rp = store_command(dr, "report", "write a drill's HTML report to a file", cmd_report)
    rp.add_argument("run_id")
    rp.add_argument("--out", required=True, help="the HTML file to write")


def drill_artifact(store: AuditStore, run_id: str) -> Artifact:
    found = store.artifacts(kind=ARTIFACT_KIND, run_id=run_id)
    if not found:
        raise DrillNotFound(f"No drill report for run {run_id!r} in the audit store {store.url}",
                            "list the stored drills with: mirrorbook drill list")
    return found[-1]


def report_html(artifact: Artifact) -> str:
    """The stored HTML; re-rendered from the stored JSON summary when only that is left."""
    html = Path(artifact.path)
    if html.is_file():
        return html.read_text()
    data = Path(str(artifact.summary.get("json") or ""))
    if data.is_file():
        return render_html(load_summary(data), data.name)
    raise DrillNotFound(f"The report files of drill {artifact.run_id} are gone ({html}, {data or 'no JSON'})",
                        "they live in the artifacts directory of the Airflow deployment that ran the drill")


def cmd_list(args: argparse.Namespace) -> int:
    found = AuditStore(args.url).artifacts(kind=ARTIFACT_KIND)
    if args.json:
        print(json.dumps([a.model_dump(mode="json") for a in found], indent=2))
        return 0
    for a in found:
        s = a.summary
        verdict = "PASSED" if s.get("ok") else "FAILED"
        print(f"{format_time(a.created_at)} {a.run_id} flow={s.get('flow')} {verdict} rto_s={s.get('rto_s')} "
              f"skipped={s.get('skipped')} re_read={s.get('re_read')} report={a.path}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    html = report_html(drill_artifact(AuditStore(args.url), args.run_id))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html)
    print(f"wrote the report of drill {args.run_id} to {out}")
    return 0
