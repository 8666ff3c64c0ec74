"""GroupMoveOperator: one step of mm2_failover or mm2_failback (precheck, translate, write, verify, ...): a few lines
over the step table of `mirrorbook.runbooks.move_steps`."""

from __future__ import annotations

from typing import Any

from mirrorbook.airflow.operators.base import MirrorbookBaseOperator, guarded
from mirrorbook.runbooks import move as moves
from mirrorbook.runbooks import standing
from mirrorbook.runbooks.move_steps import STEPS, StepRun


class GroupMoveOperator(MirrorbookBaseOperator):
    """Runs `step` of mm2_failover or mm2_failback (the direction follows the runbook's parameters)."""

    def __init__(self, *, step: str, **kwargs: Any) -> None:
        if step not in STEPS:
            raise ValueError(f"step must be one of {tuple(STEPS)}")
        self.step = step
        super().__init__(**kwargs)

    def task_deadline_s(self, kwargs: dict[str, Any]) -> float:
        return float(STEPS[self.step][1])

    def execute(self, context: Any) -> Any:
        topology = self.hook.topology
        params = self.runbook_params(context)
        move = guarded(lambda: moves.move_for(params, topology))
        rb = self.runbook(context)
        # The flow this step drives first: the other direction's when it starts that one.
        other = topology.reverse_of(move.flow) if move.direction == "failover" else move.flow
        flows = [other, move.via] if self.step == "start_other_flow" and other is not None else [move.via]
        dag_run = context["dag_run"]
        run = StepRun(rb, self.hook.clients, topology, move,
                      getattr(dag_run, "queued_at", None) or getattr(dag_run, "start_date", None))
        def step() -> Any:
            out = STEPS[self.step][0](run)
            return out if self.step == "report" else self.log_outcomes(rb)

        return self.guarded_run(rb, flows, step, standing.move_rerun(rb, self.step, move.to_cluster))
