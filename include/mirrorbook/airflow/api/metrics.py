"""`GET /metrics`: the Prometheus exposition of `mirrorbook.metrics` — from the health check's samples and the
audit store only, never a call to Kafka or Connect — behind Airflow's auth or the scrape token (auth.py)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from mirrorbook.airflow.api.auth import MetricsReader
from mirrorbook.airflow.api.context import AuditDep, TopologyDep
from mirrorbook.metrics import exposition

router = APIRouter()


@router.get("/metrics", response_class=Response,
            summary="Prometheus metrics: every flow's state, lag, freshness and lost records as the health check "
                    "last sampled them; runbook RTOs and run counts",
            responses={200: {"content": {"text/plain": {}}}})
def metrics(_: MetricsReader, request: Request, topology: TopologyDep, audit: AuditDep) -> Response:
    # A plain def: FastAPI runs it in its thread pool, so the audit store's queries never block the event loop.
    body, content_type = exposition(topology, audit, request.headers.get("accept"))
    return Response(body, media_type=content_type)
