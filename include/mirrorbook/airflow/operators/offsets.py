"""ConnectorOffsetsOperator: list / alter / reset / restore a flow connector's offsets (Strimzi 083)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mirrorbook.airflow.operators.base import MirrorbookBaseOperator, guarded
from mirrorbook.runbooks.offsets import list_offsets

WAIT_S = 120.0


class ConnectorOffsetsOperator(MirrorbookBaseOperator):
    def __init__(self, *, artifacts_dir: str | None = None, timeout: float = WAIT_S, **kwargs: Any) -> None:
        self.artifacts_dir, self.timeout = artifacts_dir, timeout
        super().__init__(**kwargs)

    def task_deadline_s(self, kwargs: dict[str, Any]) -> float:
        return 2 * self.timeout + 120  # stop_first: wait for STOPPED, then for the previous state

    def execute(self, context: Any) -> dict[str, Any]:
        params = self.runbook_params(context)
        rb = self.runbook(context)
        flow = params.flow_spec
        backend = self.hook.clients.replication(flow)
        if params.action == "list":
            out_dir = Path(self.artifacts_dir) if self.artifacts_dir else None
            guarded(lambda: list_offsets(rb, backend.own_offsets, flow, params.connector, out_dir))
        else:
            guarded(lambda: backend.change_own_offsets(rb, params.connector, params.action,
                                                       requested=params.parsed_offsets, snapshot_id=params.snapshot_id,
                                                       stop_first=params.stop_first, timeout_s=self.timeout,
                                                       effect=params.effect))
        return self.log_outcomes(rb)
