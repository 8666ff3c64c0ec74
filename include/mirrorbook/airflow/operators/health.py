"""HealthCheckOperator: one pass of mm2_health_check over the topology's flows."""

from __future__ import annotations

import asyncio
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from mirrorbook.airflow.hooks.mirrorbook import AsyncAirflowResolver
from mirrorbook.airflow.operators.base import MirrorbookBaseOperator, guarded
from mirrorbook.runbooks import health

HEALTH_XCOM_KEY = "health_report"


class HealthCheckOperator(MirrorbookBaseOperator[health.HealthParams]):
    """Checks every selected flow; records a metrics sample per flow; fails (naming flow and figure) on
    any threshold crossed. The findings are pushed to XCom under `health_report` before failing, so
    the alert notifier and the UI show them; how the run ended goes to the audit store (runs_total)."""

    ui_color = "#e8fbe8"
    deadline_s = 600.0

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(params_model=health.HealthParams, **kwargs)

    def execute(self, context: Any) -> dict[str, Any]:
        try:
            report = self._check(context)
        except Exception:
            self.record_run_result(context, failed=True)
            raise
        summary = report.summary()
        context["ti"].xcom_push(key=HEALTH_XCOM_KEY, value=summary)
        self.record_run_result(context, failed=not report.ok)
        if not report.ok:
            raise AirflowFailException(report.message())
        return summary

    def _check(self, context: Any) -> health.HealthReport:
        params = self.runbook_params(context)
        topology = self.hook.topology
        flows = guarded(lambda: params.select(topology))
        # Connections resolved up front: the check's worker threads never talk to Airflow.
        clients = asyncio.run(AsyncAirflowResolver(topology).aclients())
        audit = self.audit()
        rb = self.runbook(context, dry_run=False)
        report = guarded(lambda: health.run_health_check(clients, topology, flows, params, audit, rb))
        for line in report.lines():
            self.log.info("%s", line)
        return report
