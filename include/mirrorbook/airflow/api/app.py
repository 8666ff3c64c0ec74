"""The FastAPI app the Airflow plugin mounts: KIP-1144's flows API on top of Connect, and the page."""

from __future__ import annotations

from fastapi import FastAPI

from mirrorbook.airflow.api import control, errors, flows, metrics, page, runbook_form, schema


def create_app() -> FastAPI:
    app = FastAPI(
        title="mirrorbook flows API (KIP-1144)",
        description="MirrorMaker 2 replication flows on Kafka Connect: state, connectors, pause/resume, "
                    "source offsets; Prometheus metrics at /metrics. Authenticated by Airflow (JWT from "
                    "POST /auth/token, or the UI session); the metrics also by the scrape token.",
        version="1",
        openapi_url=None, docs_url=None, redoc_url=None,  # FastAPI's are public: ours (schema.py) need a reader
    )
    errors.install(app)
    app.include_router(schema.router)
    app.include_router(metrics.router)
    app.include_router(page.router)  # before the flow routes: /page/… must not read as a flow path
    app.include_router(runbook_form.router)
    app.include_router(flows.router)
    app.include_router(control.router)
    return app
