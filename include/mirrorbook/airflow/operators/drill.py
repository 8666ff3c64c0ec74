"""DrillOperator: one task of dr_drill (canary, the failover steps, resume on the target, restore, report)."""

from __future__ import annotations

import asyncio
from typing import Any

from airflow.sdk import BaseOperator

from mirrorbook.airflow.hooks.mirrorbook import AsyncAirflowResolver, MirrorbookHook
from mirrorbook.airflow.operators.base import guarded, run_info
from mirrorbook.runbooks import drill
from mirrorbook.runbooks.engine import Runbook
from mirrorbook.runbooks.params import parse


class DrillOperator(BaseOperator):
    """Runs `step` of the drill (see mirrorbook.runbooks.drill) with the DAG run's parameters."""

    ui_color = "#fdf1e3"

    def __init__(self, *, step: str, topology_path: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if step not in drill.STEPS and step != "validate":
            raise ValueError(f"step must be one of validate, {', '.join(drill.STEPS)}")
        self.step, self.topology_path = step, topology_path

    def execute(self, context: Any) -> dict[str, Any]:
        hook = MirrorbookHook(self.topology_path)
        topology = guarded(lambda: hook.topology)
        rb = Runbook(run_info(context, self.task_id), hook.audit())
        raw = dict(context["params"])
        if self.step == "validate":
            with rb.step("params.validate", str(raw.get("flow"))) as step:
                params = guarded(lambda: parse(drill.DrillParams, raw, topology))
                step.note(runbook="dr_drill", params=params.model_dump(mode="json"))
            return params.model_dump(mode="json")
        params = guarded(lambda: parse(drill.DrillParams, raw, topology))
        # Connections resolved up front: the drill's producer/consumer threads never talk to Airflow.
        clients = asyncio.run(AsyncAirflowResolver(topology).aclients())
        out = guarded(lambda: drill.STEPS[self.step](rb, clients, topology, params))
        for o in rb.outcomes:
            self.log.info("%s on %s: %s (%d mutation(s))", o.step, o.flow, o.result, o.mutations)
        return out
