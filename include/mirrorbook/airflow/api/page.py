"""The operator's page: flows with state and lag, recent DR drills, recent audit events.

Rendered on the server from one Jinja template with inline CSS (no CDN, no script needed), so it works
offline, inside Airflow's UI as an external view (iframe, same origin: the session cookie
authenticates it), and in a headless browser.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from pathlib import Path
from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from pydantic import BaseModel

from mirrorbook.airflow.api.auth import Reader
from mirrorbook.airflow.api.context import AuditDep, BasePath, ClientsDep
from mirrorbook.audit import AuditStore
from mirrorbook.audit.models import Artifact, AuditRecord
from mirrorbook.mm2.flows import FlowStatus, async_all_flow_status

router = APIRouter()
DRILL_KIND = "drill-report"
RECENT_DRILLS = 10
RECENT_EVENTS = 25
_templates = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                         autoescape=select_autoescape(["html"]))


class FlowRow(BaseModel):
    name: str
    state: str
    connectors: dict[str, str]
    total_lag: int
    max_lag: int
    errors: list[str]
    href: str


class DrillRow(BaseModel):
    run_id: str | None
    at: str
    rto_s: float | None
    skipped: int | None
    re_read: int | None
    path: str


class EventRow(BaseModel):
    at: str
    user: str | None
    run_id: str | None
    action: str
    flow: str | None
    result: str
    mutating: bool


def flow_rows(statuses: list[FlowStatus], base: str) -> list[FlowRow]:
    return [FlowRow(name=s.flow, state=s.state.value,
                    connectors={c.connector_class: f"{c.state}, {c.tasks_running} task(s) running"
                                for c in s.connectors.values()},
                    total_lag=s.total_lag, max_lag=s.max_lag, errors=s.errors,
                    href=f"{base}/{s.source}/{s.target}") for s in statuses]


def drill_rows(artifacts: list[Artifact]) -> list[DrillRow]:
    """Newest first. The drill's summary carries rto_s, skipped, re_read and the report's path."""
    return [DrillRow(run_id=a.run_id, at=_when(a.created_at), rto_s=a.summary.get("rto_s"),
                     skipped=a.summary.get("skipped"), re_read=a.summary.get("re_read"),
                     path=str(a.summary.get("path") or a.path)) for a in reversed(artifacts[-RECENT_DRILLS:])]


def event_rows(events: list[AuditRecord]) -> list[EventRow]:
    return [EventRow(at=_when(e.started_at), user=e.user, run_id=e.run_id, action=e.action, flow=e.flow,
                     result=e.result, mutating=e.mutating) for e in events]


def _when(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def render(flows: list[FlowRow], drills: list[DrillRow], events: list[EventRow], user: str, base: str) -> str:
    return _templates.get_template("page.html").render(
        flows=flows, drills=drills, events=events, user=user, api=f"{base}/",
        now=_when(datetime.now(timezone.utc)))


@router.get("/page", response_class=HTMLResponse, summary="The flows, drills and audit page (HTML)")
async def page(caller: Reader, clients: ClientsDep, audit: AuditDep, base: BasePath) -> HTMLResponse:
    statuses = await async_all_flow_status(clients, with_lag=True)
    drills, events = await asyncio.to_thread(_audit_rows, audit)
    return HTMLResponse(render(flow_rows(statuses, base), drills, events, caller.name, base))


def _audit_rows(audit: AuditStore) -> tuple[list[DrillRow], list[EventRow]]:
    return (drill_rows(audit.artifacts(kind=DRILL_KIND)),
            event_rows(audit.events(limit=RECENT_EVENTS, newest_first=True)))
