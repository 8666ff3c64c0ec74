"""`mirrorbook trigger`: start a runbook DAG through Airflow's REST API, as incident tooling would.

Airflow 3's flow: `POST /auth/token` (JWT), unpause the DAG if needed (`PATCH /api/v2/dags/{id}`),
`POST /api/v2/dags/{id}/dagRuns` with an explicit `dag_run_id` and `"logical_date": null` (the API
requires the key and rejects unknown fields), then optionally poll the run to a terminal state.

The explicit run id makes triggering idempotent: repeating the command with the same `--run-id`
(an alert fired twice, a retried pipeline step) finds the run already there and waits on it instead
of starting a second failover. The password and the token are never printed or logged.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr

from mirrorbook.bounds import CONF_LIMITS, cut, loads
from mirrorbook.errors import MirrorbookError
from mirrorbook.runbooks.registry import check_conf

ENV_URL = "MIRRORBOOK_AIRFLOW_URL"
ENV_USER = "MIRRORBOOK_AIRFLOW_USER"
ENV_PASSWORD = "MIRRORBOOK_AIRFLOW_PASSWORD"
DEFAULT_URL = "http://localhost:8080"
TERMINAL = ("success", "failed")


class TriggerError(MirrorbookError):
    def __init__(self, message: str, hint: str | None = None, *, transient: bool = False) -> None:
        super().__init__(message, hint)
        self.transient = transient  # no answer, or a 5xx: polling may go on


class Credentials(BaseModel):
    model_config = ConfigDict(frozen=True)
    username: str
    password: SecretStr  # repr and str show '**********'


class DagRun(BaseModel):
    """The part of Airflow's DAGRunResponse the CLI uses."""

    model_config = ConfigDict(extra="ignore")
    dag_id: str
    dag_run_id: str
    state: str
    triggering_user_name: str | None = None

    @property
    def done(self) -> bool:
        return self.state in TERMINAL


def new_run_id() -> str:
    """Unique, sortable, and valid under Airflow's default run id pattern."""
    return f"mirrorbook__{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}__{uuid.uuid4().hex[:8]}"


def _detail(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:500]
    detail = body.get("detail", body) if isinstance(body, dict) else body
    return json.dumps(detail) if not isinstance(detail, str) else detail


class AirflowApi:
    """A minimal Airflow 3 REST client: a JWT from /auth/token, then /api/v2 calls with it."""

    def __init__(self, url: str, timeout_s: float = 30.0, token: SecretStr | None = None) -> None:
        """`token`: call as the holder of this JWT instead of logging in (the plugin's forms pass on their
        caller's own, so Airflow authorizes the call as that user)."""
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token.get_secret_value()}"} if token else None
        self._http = httpx.Client(base_url=self.url, timeout=timeout_s, headers=headers)

    def __enter__(self) -> "AirflowApi":
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def _call(self, method: str, path: str, what: str, ok: tuple[int, ...] = (200,), **kw: Any) -> httpx.Response:
        try:
            resp = self._http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise TriggerError(f"cannot reach Airflow at {self.url} ({what}): {type(exc).__name__}: {exc}",
                               f"check --url / ${ENV_URL} and that the Airflow API server is up", transient=True)
        if resp.status_code not in ok:
            raise TriggerError(f"{what}: Airflow answered {resp.status_code} to {method} {path}: {_detail(resp)}",
                               transient=resp.status_code >= 500)
        return resp

    def login(self, creds: Credentials) -> None:
        """POST /auth/token; the JWT is kept in the client's headers only."""
        try:
            resp = self._http.post("/auth/token", json={"username": creds.username,
                                                        "password": creds.password.get_secret_value()})
        except httpx.HTTPError as exc:
            raise TriggerError(f"cannot reach Airflow at {self.url}: {type(exc).__name__}: {exc}",
                               f"check --url / ${ENV_URL} and that the Airflow API server is up")
        if resp.status_code in (401, 403):
            raise TriggerError(f"Airflow refused the credentials of user {creds.username!r} ({resp.status_code})",
                               f"check --user/${ENV_USER} and ${ENV_PASSWORD}")
        if resp.status_code not in (200, 201):
            raise TriggerError(f"login: Airflow answered {resp.status_code} to POST /auth/token: {_detail(resp)}")
        self._http.headers["Authorization"] = f"Bearer {resp.json()['access_token']}"

    def dag(self, dag_id: str) -> dict[str, Any]:
        path = f"/api/v2/dags/{quote(dag_id, safe='')}"
        resp = self._call("GET", path, f"DAG {dag_id}", ok=(200, 404))
        if resp.status_code == 404:
            raise TriggerError(f"Airflow has no DAG {dag_id!r} (not parsed yet, or a typo)",
                               "list DAGs in the Airflow UI, or GET /api/v2/dags")
        return dict(resp.json())

    def unpause(self, dag_id: str) -> bool:
        """Unpause the DAG if it is paused (a paused DAG's runs would stay queued). True if it was."""
        if not self.dag(dag_id).get("is_paused"):
            return False
        self._call("PATCH", f"/api/v2/dags/{quote(dag_id, safe='')}", f"unpause {dag_id}",
                   json={"is_paused": False})
        return True

    def trigger(self, dag_id: str, run_id: str, conf: dict[str, Any]) -> tuple[DagRun, bool]:
        """Create the run; (run, created). An existing run with this id is returned, not duplicated."""
        body = {"dag_run_id": run_id, "logical_date": None, "conf": conf}
        resp = self._call("POST", f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns", f"trigger {dag_id}",
                          ok=(200, 409), json=body)
        if resp.status_code == 409:
            return self.run(dag_id, run_id), False
        return DagRun.model_validate(resp.json()), True

    def run(self, dag_id: str, run_id: str) -> DagRun:
        resp = self._call("GET", f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}",
                          f"run {run_id} of {dag_id}")
        return DagRun.model_validate(resp.json())

    def wait(self, dag_id: str, run_id: str, timeout_s: float, interval_s: float = 2.0,
             on_change: Callable[[DagRun], None] | None = None, seen: str | None = None) -> DagRun:
        """Poll until the run is success or failed (`on_change` hears each new state after `seen`);
        TriggerError at `timeout_s`. A restarting API server (no answer, 5xx) does not end the wait."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                run: DagRun | None = self.run(dag_id, run_id)
            except TriggerError as exc:
                if not exc.transient or time.monotonic() >= deadline:
                    raise
                run = None
            if run is not None:
                if run.state != seen and on_change:
                    on_change(run)
                seen = run.state
                if run.done:
                    return run
            if time.monotonic() >= deadline:
                raise TriggerError(f"run {run_id} of {dag_id} is still {seen} after {timeout_s:.0f}s",
                                   "wait longer with --timeout, or follow it in the Airflow UI")
            time.sleep(interval_s)


def parse_conf(text: str, dag_id: str | None = None) -> dict[str, Any]:
    """The run's conf; for one of mirrorbook's runbooks, refused here (before anything is sent) when a key is
    not one of its parameters or a value is too large — the runbook's first task would refuse it anyway."""
    try:
        raw = Path(text[1:]).read_text() if text.startswith("@") else text
    except OSError as exc:
        raise TriggerError(f"--conf {cut(text)}: cannot read the file: {exc.strerror}")
    try:
        conf = loads("--conf", raw, CONF_LIMITS)  # sizes, nesting and integers, bounded before Python converts
    except json.JSONDecodeError as exc:
        raise TriggerError(f"--conf is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    if not isinstance(conf, dict):
        raise TriggerError("--conf must be a JSON object, e.g. '{\"flow\": \"A->B\", \"mode\": \"planned\"}'")
    if dag_id is not None:
        check_conf(dag_id, conf)
    return conf
