"""ConnectorStateSensor: waits until Connect shows the target state, deferring to the triggerer."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowException

from mirrorbook.airflow.hooks.mirrorbook import MirrorbookHook
from mirrorbook.airflow.operators.base import as_bool
from mirrorbook.airflow.triggers.connect import ConnectorStateTrigger
from mirrorbook.connect.wait import reached
from mirrorbook.runbooks.connectors import ACTION_TARGET, roles_for


class ConnectorStateSensor(BaseSensorOperator):
    template_fields = ("flow", "connectors", "action", "dry_run")

    def __init__(self, *, flow: str = "{{ params.flow }}", connectors: str = "{{ params.connectors }}",
                 action: str = "{{ params.action }}", dry_run: Any = False, deferrable: bool = True,
                 topology_path: str | None = None, poll_s: float = 1.0, **kwargs: Any) -> None:
        kwargs.setdefault("timeout", 600)
        kwargs.setdefault("poke_interval", poll_s)
        super().__init__(**kwargs)
        self.flow, self.connectors, self.action, self.dry_run = flow, connectors, action, dry_run
        self.deferrable, self.topology_path, self.poll_s = deferrable, topology_path, poll_s

    def _names(self, hook: MirrorbookHook) -> list[str]:
        flow = hook.topology.flow(self.flow)
        return [flow.connector(r) for r in roles_for(self.connectors, ACTION_TARGET[self.action])]

    def poke(self, context: Any) -> bool:
        hook = MirrorbookHook(self.topology_path)
        flow = hook.topology.flow(self.flow)
        target = ACTION_TARGET[self.action]
        with hook.clients.connect(flow) as client:
            return all(reached(client.status(n), target) for n in self._names(hook))

    def execute(self, context: Any) -> Any:
        if as_bool(self.dry_run):
            self.log.info("dry run: nothing was changed, nothing to wait for")
            return None
        if self.poke(context):
            return None
        if not self.deferrable:
            return super().execute(context)
        self.defer(trigger=ConnectorStateTrigger(flow=self.flow, connectors=self._names(MirrorbookHook(self.topology_path)),
                                                 target=ACTION_TARGET[self.action], timeout_s=float(self.timeout),
                                                 poll_s=self.poll_s, topology_path=self.topology_path),
                   method_name="execute_complete", timeout=timedelta(seconds=float(self.timeout)))

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        if event.get("status") != "success":
            raise AirflowException(event.get("message", "connector state not reached"))
        self.log.info("reached: %s", event.get("states"))
        return event.get("states")
