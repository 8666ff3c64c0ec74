"""Sensors for the move gates (planned failover/failback); each defers to its trigger for the long wait.

They read the run's parameters like the operators do: `flow`, the group regex, `mode` (an unplanned
move does not wait: the cluster being left may be gone), `dry_run` (nothing will change: no wait),
and the timeout (`drain_timeout`).
"""

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
from mirrorbook.runbooks.move import PLAN_KEY
from mirrorbook.runbooks.plan import managed_groups
from mirrorbook.topology import FlowSpec


class _MoveGateSensor(BaseSensorOperator):
    template_fields: tuple[str, ...] = ("flow", "mode", "dry_run", "timeout_s", "direction")

    def __init__(self, *, flow: str = "{{ params.flow }}", mode: str = "{{ params.mode }}",
                 dry_run: Any = "{{ params.dry_run }}", timeout_s: Any = "{{ params.drain_timeout }}",
                 direction: str = "failover", deferrable: bool = True, topology_path: str | None = None,
                 poll_s: float = 2.0, **kwargs: Any) -> None:
        kwargs.setdefault("poke_interval", poll_s)
        super().__init__(**kwargs)
        self.flow, self.mode, self.dry_run, self.timeout_s = flow, mode, dry_run, timeout_s
        self.direction, self.deferrable, self.topology_path, self.poll_s = direction, deferrable, topology_path, poll_s

    @property
    def hook(self) -> MirrorbookHook:
        return MirrorbookHook(self.topology_path)

    def via(self) -> FlowSpec:
        """The flow whose replication the groups' data travels by (failback: the reverse flow)."""
        topo = self.hook.topology
        flow = topo.flow(self.flow)
        return flow if self.direction == "failover" else topo.reverse_of(flow) or flow

    def trigger(self) -> Any:
        raise NotImplementedError

    def execute(self, context: Any) -> Any:
        if as_bool(self.dry_run) or self.mode == "unplanned":
            self.log.info("not waiting (%s)", "dry run" if as_bool(self.dry_run) else "unplanned")
            return None
        if self.hook.audit().progress_get(context["dag_run"].run_id, PLAN_KEY) is not None:
            self.log.info("this run already translated its groups (a re-run): the gate was passed before")
            return None
        self.timeout = float(self.timeout_s)
        if self.poke(context):
            return None
        if not self.deferrable:
            return super().execute(context)
        self.defer(trigger=self.trigger(), method_name="execute_complete", timeout=timedelta(seconds=self.timeout + 30))

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        if event.get("status") != "success":
            raise AirflowException(event.get("message", f"{self.task_id} did not complete"))
        return {k: v for k, v in event.items() if k != "message"}


class ReplicationDrainedSensor(_MoveGateSensor):
    """Source high watermarks vs the source connector's offsets: every data partition within `max_lag`."""

    template_fields = (*_MoveGateSensor.template_fields, "max_lag")

    def __init__(self, *, max_lag: Any = "{{ params.max_lag }}", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_lag = max_lag

    def poke(self, context: Any) -> bool:
        ok, behind = drained(flow_status(self.hook.clients, self.via()), int(self.max_lag))
        if not ok:
            self.log.info("not drained yet: %s", behind)
        return ok

    def trigger(self) -> Any:
        return ReplicationDrainedTrigger(flow=self.via().name, max_lag=int(self.max_lag), timeout_s=self.timeout,
                                         poll_s=self.poll_s, topology_path=self.topology_path)


class GroupsInactiveSensor(_MoveGateSensor):
    """The managed groups stopped (EMPTY or absent) on the cluster they are leaving."""

    template_fields = (*_MoveGateSensor.template_fields, "groups")

    def __init__(self, *, groups: Any = "{{ params.groups }}", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.groups = groups

    def _regex(self) -> str:
        topo = self.hook.topology
        return self.groups or topo.managed_groups(topo.flow(self.flow))

    def poke(self, context: Any) -> bool:
        admin = self.hook.clients.admin(self.via().source)
        active = active_groups(admin, managed_groups(admin, self._regex()))
        if active:
            self.log.info("still active on %s: %s", self.via().source, sorted(active))
        return not active

    def trigger(self) -> Any:
        return GroupsInactiveTrigger(cluster=self.via().source, groups_regex=self._regex(), timeout_s=self.timeout,
                                     poll_s=self.poll_s, topology_path=self.topology_path)
