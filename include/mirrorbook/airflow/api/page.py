"""The operator's pages: every flow (state, lag, freshness, runbooks), recent DR drills and audit events
at `/page`; one flow in full at `/page/flows/{source}/{target}` (its JSON stays at `/{source}/{target}`).

Rendered on the server from Jinja templates with inline CSS (no CDN, no script needed), so they work
offline, inside Airflow's UI as an external view (iframe, same origin: the session cookie
authenticates them), and in a headless browser. Links into Airflow's UI open in the top window.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from mirrorbook.airflow.api import views
from mirrorbook.airflow.api.auth import Reader
from mirrorbook.airflow.api.context import AuditDep, BasePath, ClientsDep, FlowDep
from mirrorbook.airflow.api.links import PAGE_ROUTE, Endpoints, RunbookLink, runbook_links
from mirrorbook.audit import AuditStore
from mirrorbook.audit.models import MetricsSample
from mirrorbook.bounds import cut
from mirrorbook.replication import all_status, backend_for
from mirrorbook.reports.html import environment

router = APIRouter()
DRILL_KIND = "drill-report"
_templates = environment(Path(__file__).parent / "templates")


def render(template: str, caller: str, base: str, **values: Any) -> str:
    now = datetime.now(timezone.utc)
    return _templates.get_template(template).render(now=now, user=cut(caller, views.TEXT), api=f"{base}/",
                                                    home=f"{base}{PAGE_ROUTE}", **values)


def _flow_extras(audit: AuditStore, name: str, ends: Endpoints,
                 base: str) -> tuple[MetricsSample | None, list[RunbookLink]]:
    return views.health_sample(audit, name), runbook_links(base, ends, views.latest_runs(audit, name))


@router.get(PAGE_ROUTE, response_class=HTMLResponse, summary="Every flow, recent drills and audit events (HTML)")
async def page(caller: Reader, clients: ClientsDep, audit: AuditDep, base: BasePath) -> HTMLResponse:
    statuses = await all_status(clients, with_lag=True)

    def from_audit() -> tuple[list[Any], list[views.DrillRow], list[views.EventRow]]:
        extras = [_flow_extras(audit, s.flow, s, base) for s in statuses]
        return (extras, views.drill_rows(audit.artifacts(kind=DRILL_KIND)),
                views.event_rows(audit.events(limit=views.RECENT_EVENTS, newest_first=True)))

    extras, drills, events = await asyncio.to_thread(from_audit)
    now = datetime.now(timezone.utc)
    flows = [views.flow_row(s, sample, links, base, now) for s, (sample, links) in zip(statuses, extras)]
    return HTMLResponse(render("page.html", caller.name, base, flows=flows, drills=drills, events=events))


@router.get(f"{PAGE_ROUTE}/flows/{{source}}/{{target}}", response_class=HTMLResponse,
            summary="One flow: state, connectors, lag per partition, freshness, runbooks, its audit events (HTML)")
async def flow_page(caller: Reader, flow: FlowDep, clients: ClientsDep, audit: AuditDep,
                    base: BasePath) -> HTMLResponse:
    status = await backend_for(clients, flow).astatus(with_lag=True)

    def from_audit() -> tuple[MetricsSample | None, list[RunbookLink], list[views.EventRow]]:
        sample, links = _flow_extras(audit, flow.name, flow, base)
        return sample, links, views.event_rows(audit.events(flow=flow.name, limit=views.RECENT_EVENTS,
                                                             newest_first=True))

    sample, links, events = await asyncio.to_thread(from_audit)
    row = views.flow_row(status, sample, links, base, datetime.now(timezone.utc))
    partitions, hidden_partitions = views.partition_rows(status)
    checkpoints, hidden_groups = views.checkpoint_rows(sample)
    return HTMLResponse(render("flow.html", caller.name, base, flow=row, partitions=partitions,
                               hidden_partitions=hidden_partitions, checkpoints=checkpoints,
                               hidden_groups=hidden_groups, events=events))
