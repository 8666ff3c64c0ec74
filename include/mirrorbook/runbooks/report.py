"""A run's story read back from the audit trail: what changed, what was planned, what was refused."""

from __future__ import annotations

from typing import Any

from mirrorbook.audit import AuditStore
from mirrorbook.audit.models import RequestSummary


def _call(req: RequestSummary | None) -> str:
    """A call's method and path (the engine records every call with its request)."""
    return f"{req.method} {req.path}" if req else "?"


def run_report(audit: AuditStore, run_id: str) -> dict[str, Any]:
    events = audit.events(run_id=run_id)
    calls = [e for e in events if e.kind == "call" and e.mutating]
    done = [e for e in calls if e.result in ("ok", "error")]
    planned = [e for e in calls if e.result == "planned"]
    steps = [e for e in events if e.kind == "step"]
    refused = [e for e in steps if e.result == "refused"]
    failed = [e for e in steps if e.result == "error"]
    lines = [f"run {run_id}: {len(steps)} step(s), {len(done)} mutating call(s), {len(planned)} planned"]
    if planned:
        lines.append("dry-run plan (nothing was changed):")
        for e in planned:
            req = e.request
            lines.append(f"  - {_call(req)}" + (f" {req.body}" if req and req.body else "")
                         + f"   [because: {e.details.get('precondition', '?')}]")
    for e in done:
        lines.append(f"  * {e.action}: {_call(e.request)} -> {e.result}"
                     + (f" ({e.error})" if e.error else ""))
    for e in refused + failed:
        lines.append(f"  ! {e.action} {e.result}: {e.error}")
    return {
        "run_id": run_id,
        "steps": len(steps),
        "mutating_calls": len(done),
        "planned_calls": [{"method": e.request.method, "path": e.request.path,
                           "body": e.request.body, "precondition": e.details.get("precondition")}
                          for e in planned if e.request],
        "refused": [e.error for e in refused],
        "errors": [e.error for e in failed],
        "snapshots": sorted({e.snapshot_id for e in events if e.snapshot_id}),
        "text": "\n".join(lines),
    }
