"""RpoSamplerOperator: one period of the RPO sampler, deferred to the triggerer (`triggers/rpo.py`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk.exceptions import AirflowException

from mirrorbook.airflow.operators.base import MirrorbookBaseOperator, guarded
from mirrorbook.airflow.triggers.rpo import RpoSamplerTrigger
from mirrorbook.runbooks.rpo_sampler import MAX_PERIOD_S, SamplerParams

TRIGGER_MARGIN_S = 60


class RpoSamplerOperator(MirrorbookBaseOperator[SamplerParams]):
    """Defers at once: the sampling runs in the triggerer for the run's `period_s`, then the task ends with what it
    sampled (polls, failed polls, each flow's newest sample, the partitions it counts in records)."""

    ui_color = "#f3ecfb"
    deadline_s = MAX_PERIOD_S + 2 * TRIGGER_MARGIN_S  # Airflow 3.3 applies it to execute and execute_complete

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(params_model=SamplerParams, **kwargs)

    def execute(self, context: Any) -> None:
        params = self.runbook_params(context)
        flows = guarded(lambda: params.select(self.hook.topology))
        self.log.info("sampling %s every %gs for %ds", ", ".join(f.name for f in flows), params.poll_s,
                      params.period_s)
        self.defer(trigger=RpoSamplerTrigger(flows=[f.name for f in flows], duration_s=float(params.period_s),
                                             poll_s=params.poll_s, topology_path=self.topology_path),
                   method_name="execute_complete", timeout=timedelta(seconds=params.period_s + TRIGGER_MARGIN_S))

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != "success":
            raise AirflowException(event.get("message", f"{self.task_id} did not complete"))
        self.log.info("%d poll(s), %d that could not reach a source; newest samples %s; counted in records: %s",
                      event["polls"], event["failures"], event["newest"], event["transactional"] or "none")
        return {k: v for k, v in event.items() if k != "status"}
