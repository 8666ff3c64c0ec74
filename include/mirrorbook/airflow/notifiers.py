"""Alerts for failed mirrorbook runs, as an Airflow notifier (on_failure_callback).

`MirrorbookAlertNotifier` always logs the alert; when a webhook URL is configured (argument, or the
environment variable `MIRRORBOOK_ALERT_WEBHOOK_URL`) it also POSTs it as JSON — Slack/Teams/PagerDuty
gateways and incident tooling accept that. The URL is treated as a secret (webhook URLs usually embed a
token): only its host is ever logged. A failing webhook is logged, never raised: the alert must not
change the task's outcome, and Airflow would only log it anyway.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

import httpx
from airflow.sdk import BaseNotifier
from pydantic import BaseModel, Field

from mirrorbook import settings

WEBHOOK_ENV = settings.ALERT_WEBHOOK_URL.env


class Alert(BaseModel):
    """What a receiver gets: which run failed, why (the task's error names the flow and the figure), details."""

    source: str = "mirrorbook"
    severity: str = "critical"
    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    try_number: int | None = None
    message: str
    details: Any = None
    sent_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))


def alert_from_context(context: Any, details_key: str | None) -> Alert:
    ti = context.get("ti") or context.get("task_instance")
    error = context.get("exception")
    details = None
    if ti is not None and details_key:
        try:
            details = ti.xcom_pull(task_ids=ti.task_id, key=details_key)
        except Exception:  # details are a bonus; the message carries the verdict
            details = None
    return Alert(dag_id=getattr(ti, "dag_id", None), run_id=getattr(ti, "run_id", None),
                 task_id=getattr(ti, "task_id", None), try_number=getattr(ti, "try_number", None),
                 message=str(error) if error else "task failed", details=details)


class MirrorbookAlertNotifier(BaseNotifier):
    """Log the failure and, if configured, POST it as JSON to a webhook."""

    template_fields = ()

    def __init__(self, *, webhook_url: str | None = None, details_key: str | None = None,
                 timeout_s: float = 10.0) -> None:
        super().__init__()
        self.webhook_url = webhook_url
        self.details_key = details_key  # XCom key the failing task pushed its findings under
        self.timeout_s = timeout_s

    def notify(self, context: Any) -> None:
        alert = alert_from_context(context, self.details_key)
        self.log.error("ALERT %s/%s/%s: %s", alert.dag_id, alert.run_id, alert.task_id, alert.message)
        post_alert(alert, self.webhook_url, self.log, self.timeout_s)


def post_alert(alert: Alert, webhook_url: str | None, log: Any, timeout_s: float = 10.0) -> None:
    """POST `alert` to the webhook (the argument, else MIRRORBOOK_ALERT_WEBHOOK_URL), if there is one."""
    url = webhook_url or settings.ALERT_WEBHOOK_URL.get()
    if not url:
        return
    host = urlsplit(url).netloc.rsplit("@", 1)[-1]
    try:
        resp = httpx.post(url, content=alert.model_dump_json(), timeout=timeout_s,
                          headers={"Content-Type": "application/json"})
        resp.raise_for_status()
        log.info("alert posted to webhook on %s (HTTP %d)", host, resp.status_code)
    except httpx.HTTPError as exc:
        log.error("could not post the alert to the webhook on %s: %s", host, type(exc).__name__)
