"""Airflow's own authentication and authorization, applied to the flows API and the page.

Authentication is Airflow's `get_user` dependency (`GetUserDep`): a JWT in `Authorization: Bearer`
(from `POST /auth/token`) or the UI's `_token` session cookie. Without one it answers 401, with an
invalid one 403 — before any of our code runs.

Authorization asks Airflow's configured auth manager, so the flows API grants exactly what the
equivalent runbook would: reading flows needs read access to DAG runs; pausing/resuming a flow needs
permission to trigger `mm2_pause_resume`, changing its offsets permission to trigger `mm2_offsets`
(SimpleAuthManager: viewer reads, user and above act).

The metrics (`GET /metrics`) are read like flows, or by a scraper presenting the token in
`MIRRORBOOK_METRICS_TOKEN` as `Authorization: Bearer <token>` (Prometheus' `authorization` setting): compared in
constant time, and only when the variable is set and not empty.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated, Any, Callable, Literal

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.core_api.security import GetUserDep, bearer_scheme, get_user
from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials

from mirrorbook import settings
from mirrorbook.airflow.api.models import Caller

PAUSE_RESUME_DAG = "mm2_pause_resume"
OFFSETS_DAG = "mm2_offsets"


def _team_of(dag_id: str) -> str | None:
    from airflow.models.dag import DagModel

    return DagModel.get_team_name(dag_id)


def _allowed(user: Any, method: Literal["GET", "POST"], dag_id: str | None) -> bool:
    details = DagDetails(id=dag_id, team_name=_team_of(dag_id) if dag_id else None)
    return get_auth_manager().is_authorized_dag(method=method, access_entity=DagAccessEntity.RUN,
                                                details=details, user=user)


def _caller(user: Any) -> Caller:
    return Caller(name=user.get_name())


def reader(user: GetUserDep) -> Caller:
    """Any user who may read DAG runs may read flows, connectors, offsets, the pages and the API's schema."""
    if not _allowed(user, "GET", None):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "Forbidden: reading flows needs read access to DAG runs")
    return _caller(user)


def runbook_runner(dag_id: str) -> Callable[..., Caller]:
    """Acting on a flow needs permission to trigger the runbook DAG that does the same thing."""

    def check(user: GetUserDep) -> Caller:
        if not _allowed(user, "POST", dag_id):
            raise HTTPException(status.HTTP_403_FORBIDDEN,
                                f"Forbidden: this change needs permission to trigger the {dag_id} DAG")
        return _caller(user)

    return check


METRICS_TOKEN_ENV = settings.METRICS_TOKEN.env
SCRAPER = "metrics scraper (token)"


def same_secret(given: str, expected: str) -> bool:
    """Constant-time comparison; hashing first makes its time independent of the lengths too."""
    return hmac.compare_digest(hashlib.sha256(given.encode()).digest(), hashlib.sha256(expected.encode()).digest())


async def metrics_reader(request: Request,
                         bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)]) -> Caller:
    """The scrape token, else Airflow's own identity with the right to read flows (a wrong token that is no
    Airflow JWT is refused by Airflow: 403)."""
    token = settings.METRICS_TOKEN.get() or ""
    if token and bearer is not None and same_secret(bearer.credentials, token):
        return Caller(name=SCRAPER)
    return reader(await get_user(request, None, bearer))


may_pause_resume = runbook_runner(PAUSE_RESUME_DAG)
may_change_offsets = runbook_runner(OFFSETS_DAG)
GUARDS = (reader, may_pause_resume, may_change_offsets, metrics_reader)  # every route depends on exactly one

Reader = Annotated[Caller, Depends(reader)]
FlowOperator = Annotated[Caller, Depends(may_pause_resume)]
OffsetsOperator = Annotated[Caller, Depends(may_change_offsets)]
MetricsReader = Annotated[Caller, Depends(metrics_reader)]
