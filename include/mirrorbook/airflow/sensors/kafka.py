"""Sensors for the move gates (planned failover/failback); each pokes once, then defers to its trigger.

They read the run's parameters like every mirrorbook task: the flow, the group regex, the mode (an
unplanned move does not wait: the cluster being left may be gone), dry_run (nothing will change: no
wait), and the wait (`drain_timeout`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator
from pydantic import BaseModel
from airflow.sdk.exceptions import AirflowException
from airflow.triggers.base import BaseTrigger

from mirrorbook.airflow.operators.base import RunbookTask
from mirrorbook.airflow.triggers.kafka import GroupsInactiveTrigger, ReplicationDrainedTrigger
from mirrorbook.replication import backend_for
from mirrorbook.runbooks.checks import active_groups, drained
from mirrorbook.runbooks.move import FLOW_STOPPED_KEY, PLAN_KEY, Move, move_for
from mirrorbook.runbooks.params import MoveParams
from mirrorbook.runbooks.plan import managed_groups

TRIGGER_MARGIN_S = 30


def longest_wait_s(model: type[BaseModel], field: str = "drain_timeout") -> float:
    """The `le` bound of the model's `field` (a move's longest gate wait), read from the model itself."""
    return float(next(m.le for m in model.model_fields[field].metadata if getattr(m, "le", None) is not None))


class _MoveGateSensor(RunbookTask[MoveParams], BaseSensorOperator):
    def __init__(self, *, poll_s: float = 2.0, **kwargs: Any) -> None:
        kwargs.setdefault("poke_interval", poll_s)
        self.poll_s = poll_s
        self.longest_wait_s = longest_wait_s(kwargs["params_model"])
        super().__init__(**kwargs)

    def task_deadline_s(self, kwargs: dict[str, Any]) -> float:
        """The longest wait a run of this runbook can ask for — its model's bound on `drain_timeout` — plus the
        trigger's margin and one poke. Each run's own bound is its `drain_timeout`: the deferral times out
        at it (plus the margin), and so does the trigger. Airflow 3.3 applies `execution_timeout` to each
        execution (the poke before deferring, then `execute_complete`), not to the time deferred (its task
        runner: "TODO: handle timeout in case of deferral"); Airflow 2 also capped the deferral with it, so
        the timeout stays no shorter than the longest wait a run may ask for, or a future Airflow would cut
        an operator's `drain_timeout` short without a word."""
        return self.longest_wait_s + 2 * TRIGGER_MARGIN_S

    def move(self, context: Any) -> Move:
        return move_for(self.runbook_params(context), self.hook.topology)

    def trigger(self, context: Any, timeout_s: float) -> BaseTrigger:
        raise NotImplementedError

    def execute(self, context: Any) -> Any:
        params = self.runbook_params(context)
        if params.dry_run or params.mode == "unplanned":
            self.log.info("not waiting (%s)", "dry run" if params.dry_run else "unplanned")
            return None
        run_id = context["dag_run"].run_id
        if self.audit().progress_has(run_id, PLAN_KEY):
            self.log.info("this run already translated its groups (a re-run): the gate was passed before")
            return None
        if self.audit().progress_get(run_id, FLOW_STOPPED_KEY):
            self.log.info("this run stopped %s itself: nothing replicates to wait for", self.move(context).via.name)
            return None
        if self.poke(context):
            return None
        timeout_s = float(params.drain_timeout)
        self.defer(trigger=self.trigger(context, timeout_s), method_name="execute_complete",
                   timeout=timedelta(seconds=timeout_s + TRIGGER_MARGIN_S))

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        if event.get("status") != "success":
            raise AirflowException(event.get("message", f"{self.task_id} did not complete"))
        return {k: v for k, v in event.items() if k != "message"}


class ReplicationDrainedSensor(_MoveGateSensor):
    """Source high watermarks vs the source connector's offsets: every data partition within `max_lag` records
    (counted as records where the offsets exceed it: markers and aborted records take offsets)."""

    def poke(self, context: Any) -> bool:
        max_lag = self.runbook_params(context).max_lag
        ok, behind = drained(backend_for(self.hook.clients, self.move(context).via).status(count_above=max_lag),
                             max_lag)
        if not ok:
            self.log.info("not drained yet: %s", behind)
        return ok

    def trigger(self, context: Any, timeout_s: float) -> BaseTrigger:
        return ReplicationDrainedTrigger(flow=self.move(context).via.name, max_lag=self.runbook_params(context).max_lag,
                                         timeout_s=timeout_s, poll_s=self.poll_s, topology_path=self.topology_path)


class GroupsInactiveSensor(_MoveGateSensor):
    """The managed groups stopped (EMPTY or absent) on the cluster they are leaving."""

    def poke(self, context: Any) -> bool:
        move = self.move(context)
        admin = self.hook.clients.admin(move.from_cluster)
        active = active_groups(admin, managed_groups(admin, move.regex))
        if active:
            self.log.info("still active on %s: %s", move.from_cluster, sorted(active))
        return not active

    def trigger(self, context: Any, timeout_s: float) -> BaseTrigger:
        move = self.move(context)
        return GroupsInactiveTrigger(cluster=move.from_cluster, groups_regex=move.regex, timeout_s=timeout_s,
                                     poll_s=self.poll_s, topology_path=self.topology_path)
