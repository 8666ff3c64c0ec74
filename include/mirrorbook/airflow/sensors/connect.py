"""ConnectorStateSensor: waits until the flow's replication shows the target state, deferring to the triggerer."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowException

from mirrorbook.airflow.operators.base import RunbookTask
from mirrorbook.runbooks.params import PauseResumeParams
from mirrorbook.airflow.triggers.connect import ConnectorStateTrigger
from mirrorbook.replication import ACTION_TARGET, backend_for

WAIT_S = 600.0


class ConnectorStateSensor(RunbookTask[PauseResumeParams], BaseSensorOperator):
    """Pokes once (the flow's backend: `in_state`); if the parts are not there yet, defers to
    `ConnectorStateTrigger`."""

    def __init__(self, *, poll_s: float = 1.0, **kwargs: Any) -> None:
        kwargs.setdefault("timeout", WAIT_S)
        kwargs.setdefault("poke_interval", poll_s)
        self.poll_s = poll_s
        super().__init__(**kwargs)

    def task_deadline_s(self, kwargs: dict[str, Any]) -> float:
        return float(kwargs["timeout"]) + 60

    def poke(self, context: Any) -> bool:
        params = self.runbook_params(context)
        backend = backend_for(self.hook.clients, params.flow_spec)
        return backend.in_state(ACTION_TARGET[params.action], parts=params.connectors)

    def execute(self, context: Any) -> Any:
        params = self.runbook_params(context)
        if params.dry_run:
            self.log.info("dry run: nothing was changed, nothing to wait for")
            return None
        if self.poke(context):
            return None
        self.defer(trigger=ConnectorStateTrigger(flow=params.flow, parts=params.connectors,
                                                 target=ACTION_TARGET[params.action], timeout_s=float(self.timeout),
                                                 poll_s=self.poll_s, topology_path=self.topology_path),
                   method_name="execute_complete", timeout=timedelta(seconds=float(self.timeout)))

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        if event.get("status") != "success":
            raise AirflowException(event.get("message", "connector state not reached"))
        self.log.info("reached: %s", event.get("states"))
        return event.get("states")
