"""ConnectorOffsetsOperator: list / alter / reset / restore a flow connector's offsets (Strimzi 083)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mirrorbook.airflow.operators.base import MirrorbookBaseOperator
from mirrorbook.replication import backend_for
from mirrorbook.runbooks.offsets import list_offsets
from mirrorbook.runbooks.params import OffsetsParams
from mirrorbook.runbooks.parity import keep_connector_offsets
from mirrorbook.runbooks.standing import offsets_rerun

WAIT_S = 120.0


class ConnectorOffsetsOperator(MirrorbookBaseOperator[OffsetsParams]):
    def __init__(self, *, artifacts_dir: str | None = None, timeout: float = WAIT_S, **kwargs: Any) -> None:
        self.artifacts_dir, self.timeout = artifacts_dir, timeout
        super().__init__(**kwargs)

    def task_deadline_s(self, kwargs: dict[str, Any]) -> float:
        return 2 * self.timeout + 120  # stop_first: wait for STOPPED, then for the previous state

    def execute(self, context: Any) -> dict[str, Any]:
        params = self.runbook_params(context)
        rb = self.runbook(context)
        flow = params.flow_spec
        backend = backend_for(self.hook.clients, flow)
        rerun = offsets_rerun(rb, flow, params.connector, params.action)
        if params.action == "list":
            out_dir = Path(self.artifacts_dir) if self.artifacts_dir else None
            self.guarded_run(rb, [flow], lambda: list_offsets(rb, backend.own_offsets, flow, params.connector, out_dir),
                             rerun)
        else:
            action = params.action  # not "list" here: a name for the closure, which does not see narrowing
            self.guarded_run(rb, [flow], lambda: backend.change_own_offsets(
                rb, params.connector, action, requested=params.parsed_offsets, snapshot_id=params.snapshot_id,
                stop_first=params.stop_first, timeout_s=self.timeout, effect=params.effect,
                on_read_back=lambda name, expected, found: keep_connector_offsets(rb, flow, name, expected, found)),
                rerun)
        return self.log_outcomes(rb)
