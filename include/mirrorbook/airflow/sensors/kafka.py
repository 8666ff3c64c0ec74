"""Sensors for the failover gates; each defers to its trigger for the long wait."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowException

from mirrorbook.airflow.hooks.mirrorbook import MirrorbookHook
from mirrorbook.airflow.operators.base import as_bool
from mirrorbook.airflow.triggers.kafka import GroupsInactiveTrigger, ReplicationDrainedTrigger
from mirrorbook.mm2.flows import flow_status
from mirrorbook.runbooks.checks import active_groups, drained


class _DeferringSensor(BaseSensorOperator):
    template_fields: tuple[str, ...] = ("dry_run",)

    def __init__(self, *, dry_run: Any = False, deferrable: bool = True, topology_path: str | None = None,
                 poll_s: float = 2.0, **kwargs: Any) -> None:
        kwargs.setdefault("timeout", 600)
        kwargs.setdefault("poke_interval", poll_s)
        super().__init__(**kwargs)
        self.dry_run, self.deferrable, self.topology_path, self.poll_s = dry_run, deferrable, topology_path, poll_s

    @property
    def hook(self) -> MirrorbookHook:
        return MirrorbookHook(self.topology_path)

    def trigger(self) -> Any:
        raise NotImplementedError

    def execute(self, context: Any) -> Any:
        if as_bool(self.dry_run) or self.poke(context):
            return None
        if not self.deferrable:
            return super().execute(context)
        self.defer(trigger=self.trigger(), method_name="execute_complete",
                   timeout=timedelta(seconds=float(self.timeout) + 30))

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        if event.get("status") != "success":
            raise AirflowException(event.get("message", f"{self.task_id} did not complete"))
        return {k: v for k, v in event.items() if k != "message"}


class ReplicationDrainedSensor(_DeferringSensor):
    template_fields = ("flow", "max_lag", "dry_run")

    def __init__(self, *, flow: str = "{{ params.flow }}", max_lag: Any = "{{ params.max_lag }}",
                 topics: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.flow, self.max_lag, self.topics = flow, max_lag, topics

    def poke(self, context: Any) -> bool:
        status = flow_status(self.hook.clients, self.hook.topology.flow(self.flow))
        ok, _ = drained(status, int(self.max_lag), set(self.topics) if self.topics else None)
        return ok

    def trigger(self) -> Any:
        return ReplicationDrainedTrigger(flow=self.flow, max_lag=int(self.max_lag), topics=self.topics,
                                         timeout_s=float(self.timeout), poll_s=self.poll_s,
                                         topology_path=self.topology_path)


class GroupsInactiveSensor(_DeferringSensor):
    template_fields = ("cluster", "groups", "dry_run")

    def __init__(self, *, cluster: str, groups: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster, self.groups = cluster, groups

    def _groups(self) -> list[str]:
        return list(self.groups) if not isinstance(self.groups, str) else [g for g in self.groups.split(",") if g]

    def poke(self, context: Any) -> bool:
        return not active_groups(self.hook.clients.admin(self.cluster), self._groups())

    def trigger(self) -> Any:
        return GroupsInactiveTrigger(cluster=self.cluster, groups=self._groups(), timeout_s=float(self.timeout),
                                     poll_s=self.poll_s, topology_path=self.topology_path)
