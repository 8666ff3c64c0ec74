"""ConnectorStateOperator: pause / resume / stop a flow's connectors (all or one)."""

from __future__ import annotations

from typing import Any

from mirrorbook.airflow.operators.base import MirrorbookBaseOperator
from mirrorbook.replication import backend_for
from mirrorbook.runbooks.connectors import ACTION_TARGET
from mirrorbook.runbooks.params import PauseResumeParams
from mirrorbook.runbooks.standing import set_state_rerun

WAIT_S = 120.0  # per connector


class ConnectorStateOperator(MirrorbookBaseOperator[PauseResumeParams]):
    """Moves the selected connectors toward the action's state; acts only where Connect is not there yet.

    With `wait=False` it only issues the calls (a `ConnectorStateSensor` then waits, deferring);
    with `wait=True` it waits inline up to `timeout` per connector.
    """

    def __init__(self, *, wait: bool = False, timeout: float = WAIT_S, **kwargs: Any) -> None:
        self.wait, self.timeout = wait, timeout
        super().__init__(**kwargs)

    def task_deadline_s(self, kwargs: dict[str, Any]) -> float:
        return 3 * self.timeout + 60 if self.wait else 120.0

    def execute(self, context: Any) -> dict[str, Any]:
        params = self.runbook_params(context)
        rb = self.runbook(context)
        flow = params.flow_spec
        backend = backend_for(self.hook.clients, flow)
        target = ACTION_TARGET[params.action]
        self.guarded_run(rb, [flow], lambda: backend.set_state(rb, target, parts=params.connectors, wait=self.wait,
                                                               timeout_s=self.timeout),
                         set_state_rerun(target, params.connectors))
        return self.log_outcomes(rb)
