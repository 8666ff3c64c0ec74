"""ConnectorStateOperator: pause / resume / stop a flow's connectors (all or one)."""

from __future__ import annotations

from typing import Any

from mirrorbook.airflow.operators.base import MirrorbookBaseOperator, guarded
from mirrorbook.runbooks.connectors import ACTION_TARGET, set_flow_state


class ConnectorStateOperator(MirrorbookBaseOperator):
    """Moves the selected connectors toward the action's state; acts only where Connect is not there yet.

    With `wait=False` it only issues the calls (a `ConnectorStateSensor` then waits, deferring);
    with `wait=True` it waits inline up to `timeout`.
    """

    template_fields = ("flow", "dry_run", "action", "connectors")

    def __init__(self, *, action: str = "{{ params.action }}", connectors: str = "{{ params.connectors }}",
                 wait: bool = False, timeout: float = 120.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.action = action
        self.connectors = connectors
        self.wait = wait
        self.timeout = timeout

    def execute(self, context: Any) -> dict[str, Any]:
        rb = self.runbook(context)
        flow = guarded(lambda: self.hook.topology.flow(self.flow))
        target = ACTION_TARGET[self.action]
        with self.hook.clients.connect(flow) as client:
            guarded(lambda: set_flow_state(rb, client, flow, self.connectors, target, wait=self.wait,
                                           timeout_s=self.timeout))
        return self.log_outcomes(rb)
