"""GroupMoveOperator: one step of mm2_failover or mm2_failback (precheck, translate, write, verify, ...): a few lines
over the step table of `mirrorbook.runbooks.move_steps`."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Any, Iterator

from mirrorbook.airflow.operators.base import MirrorbookBaseOperator, guarded
from mirrorbook.runbooks import move as moves
from mirrorbook.runbooks import standing
from mirrorbook.runbooks.move_steps import STEPS, StepRun
from mirrorbook.runbooks.params import MoveParams


class GroupMoveOperator(MirrorbookBaseOperator[MoveParams]):
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

        with _gc_frozen():
            return self.guarded_run(rb, flows, step, standing.move_rerun(rb, self.step, move.to_cluster))


@contextmanager
def _gc_frozen() -> Iterator[None]:
    """The objects the task process holds before the step (Airflow's, the DAG's) left out of the cyclic GC's passes
    while it runs: a step at a thousand groups makes hundreds of thousands of small objects, each collection of the
    oldest generation walked all of the process's (gc.freeze; unfrozen after — unless the process had frozen objects
    of its own already, as a forking executor's worker may: those stay as they were, with ours)."""
    had = gc.get_freeze_count()
    gc.freeze()
    try:
        yield
    finally:
        if not had:
            gc.unfreeze()
