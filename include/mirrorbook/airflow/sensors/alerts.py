"""FlowsDownSensor: mm2_failover_on_alert's wait for a flow's NOT_REPLICATING episode to last enough checks."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import Asset, BaseSensorOperator
from airflow.sdk.exceptions import AirflowException

from mirrorbook.airflow.operators.base import RunbookTask, guarded
from mirrorbook.airflow.sensors.kafka import TRIGGER_MARGIN_S, longest_wait_s
from mirrorbook.airflow.triggers.alerts import FlowsDownTrigger
from mirrorbook.runbooks import alerts
from mirrorbook.runbooks.alerts import OnAlertParams
from mirrorbook.topology import FailoverOnAlert


def changes(context: Any) -> list[dict[str, Any]]:
    """The flow state changes that triggered this run: the extra of each Asset event (each once: an event that
    came through the health check's alias is listed under the alias too)."""
    found = context.get("triggering_asset_events") or {}
    return [dict(e.extra or {}) for key, events in found.items() if isinstance(key, Asset) for e in events]


class FlowsDownSensor(RunbookTask[OnAlertParams], BaseSensorOperator):
    """Returns the episodes (flow, since_run_id) that lasted `consecutive_checks` checks; waits (deferred) while
    any is still short of them; gives up on those at the topology's `max_wait_s`."""

    ui_color = "#fbe8e8"

    def __init__(self, *, poll_s: float = 5.0, **kwargs: Any) -> None:
        kwargs.setdefault("poke_interval", poll_s)
        self.poll_s = poll_s
        super().__init__(**kwargs)

    def task_deadline_s(self, kwargs: dict[str, Any]) -> float:
        """The longest wait a topology may ask for (the bound on `max_wait_s`), the deferral's margin and a poke —
        as the move gates do (sensors/kafka.py says why the timeout is not a run's own wait)."""
        return longest_wait_s(FailoverOnAlert, "max_wait_s") + 2 * TRIGGER_MARGIN_S

    def poke(self, context: Any) -> bool:
        raise NotImplementedError("execute decides and defers")  # never called: execute is this sensor's own

    def execute(self, context: Any) -> list[dict[str, Any]]:
        params = self.runbook_params(context)
        topology = self.hook.topology
        switch = topology.failover_on_alert
        if not switch.enabled:
            self.log.info("failover_on_alert is not enabled in the topology: nothing is proposed")
            return []
        seen = [] if params.flow else changes(context)
        watching = guarded(lambda: alerts.episodes(topology, seen, params.flow, self.audit()))
        for c in seen:
            self.log.info("%s: %s -> %s (check run %s)", c.get("flow"), c.get("old_state"), c.get("new_state"),
                          c.get("check_run_id"))
        if not watching:
            self.log.info("no watched flow of this run is NOT_REPLICATING: nothing to propose")
            return []
        found = alerts.sort_out(self.audit(), watching, switch.consecutive_checks)
        if not found["waiting"]:
            return self._down(found["down"], found["over"])
        self.log.info("waiting for %d check(s) in a row of %s", switch.consecutive_checks,
                      ", ".join(e.flow for e in found["waiting"]))
        self.defer(trigger=FlowsDownTrigger(episodes=[e.model_dump() for e in watching],
                                            checks=switch.consecutive_checks,
                                            timeout_s=switch.max_wait_s, poll_s=self.poll_s),
                   method_name="execute_complete", timeout=timedelta(seconds=switch.max_wait_s + TRIGGER_MARGIN_S))

    def execute_complete(self, context: Any, event: dict[str, Any]) -> list[dict[str, Any]]:
        if event.get("status") == "error":
            raise AirflowException(event.get("message", "the flows' health could not be read"))
        for e in event.get("waiting", []):
            self.log.warning("%s: still short of the checks in a row it needs after the wait: not proposed", e["flow"])
        return self._down([alerts.Episode.model_validate(e) for e in event.get("down", [])],
                          [alerts.Episode.model_validate(e) for e in event.get("over", [])])

    def _down(self, down: list[alerts.Episode], over: list[alerts.Episode]) -> list[dict[str, Any]]:
        for e in over:
            self.log.info("%s: changed again (recovered, or a new episode): not proposed", e.flow)
        for e in down:
            self.log.warning("%s: NOT_REPLICATING since check run %s, for enough checks in a row", e.flow,
                             e.since_run_id)
        return [e.model_dump() for e in down]
