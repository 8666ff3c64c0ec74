"""DrillOperator: one task of dr_drill (canary, the failover steps, resume on the target, restore, report)."""

from __future__ import annotations

import asyncio
from typing import Any

from mirrorbook.airflow.hooks.mirrorbook import AsyncAirflowResolver
from mirrorbook.airflow.operators.base import MirrorbookBaseOperator
from mirrorbook.runbooks import drill

MARGIN_S = 300.0
# Each step's own deadline, from the longest waits the drill's form accepts (DrillParams' bounds).
STEP_DEADLINES = {"canary": 2 * drill.WAIT_MAX_S, "wait_drained": drill.WAIT_MAX_S,
                  "resume_on_target": drill.WAIT_MAX_S}


class DrillOperator(MirrorbookBaseOperator[drill.DrillParams]):
    """Runs `step` of the drill (see mirrorbook.runbooks.drill) with the DAG run's parameters."""

    ui_color = "#fdf1e3"

    def __init__(self, *, step: str, **kwargs: Any) -> None:
        if step not in drill.STEPS:
            raise ValueError(f"step must be one of {', '.join(drill.STEPS)}")
        self.step = step
        super().__init__(params_model=drill.DrillParams, **kwargs)

    def task_deadline_s(self, kwargs: dict[str, Any]) -> float:
        return STEP_DEADLINES.get(self.step, 600.0) + MARGIN_S

    def execute(self, context: Any) -> dict[str, Any]:
        params = self.runbook_params(context)
        rb = self.runbook(context)
        # Connections resolved up front: the drill's producer/consumer threads never talk to Airflow.
        clients = asyncio.run(AsyncAirflowResolver(self.hook.topology).aclients())
        try:
            out = self.guarded_run(rb, [params.flow_spec],
                                   lambda: drill.STEPS[self.step](rb, clients, self.hook.topology, params))
        except Exception:
            if self.step == "report":
                self.record_run_result(context, failed=True)
            raise
        if self.step == "report":
            self.record_run_result(context)
        self.log_outcomes(rb)
        return out
