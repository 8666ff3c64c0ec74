"""HealthCheckOperator: one pass of mm2_health_check over the topology's flows."""

from __future__ import annotations

import asyncio
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from mirrorbook.airflow.hooks.mirrorbook import AsyncAirflowResolver, MirrorbookHook
from mirrorbook.airflow.operators.base import guarded, run_info
from mirrorbook.runbooks import health
from mirrorbook.runbooks.engine import Runbook
from mirrorbook.runbooks.params import parse

HEALTH_XCOM_KEY = "health_report"


class HealthCheckOperator(BaseOperator):
    """Checks every selected flow; records a metrics sample per flow; fails (naming flow and figure) on
    any threshold crossed. The findings are pushed to XCom under `health_report` before failing, so
    the alert notifier and the UI show them."""

    ui_color = "#e8fbe8"

    def __init__(self, *, topology_path: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.topology_path = topology_path

    def execute(self, context: Any) -> dict[str, Any]:
        hook = MirrorbookHook(self.topology_path)
        topology = guarded(lambda: hook.topology)
        params = guarded(lambda: parse(health.HealthParams, dict(context["params"]), topology))
        flows = guarded(lambda: params.select(topology))
        # Connections resolved up front: the check's worker threads never talk to Airflow.
        clients = asyncio.run(AsyncAirflowResolver(topology).aclients())
        audit = hook.audit()
        rb = Runbook(run_info(context, self.task_id), audit)
        report = guarded(lambda: health.run_health_check(clients, topology, flows, params, audit, rb))
        for line in report.lines():
            self.log.info("%s", line)
        summary = report.summary()
        context["ti"].xcom_push(key=HEALTH_XCOM_KEY, value=summary)
        if not report.ok:
            raise AirflowFailException(report.message())
        return summary
