"""ConnectorOffsetsOperator: list / alter / reset / restore a flow connector's offsets (Strimzi 083)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mirrorbook.airflow.operators.base import MirrorbookBaseOperator, as_bool, guarded
from mirrorbook.mm2.offsets import validate_offsets
from mirrorbook.runbooks.offsets import change_offsets, list_offsets


class ConnectorOffsetsOperator(MirrorbookBaseOperator):
    template_fields = ("flow", "dry_run", "connector", "action", "offsets", "stop_first", "snapshot_id",
                       "artifacts_dir")

    def __init__(self, *, connector: str = "{{ params.connector }}", action: str = "{{ params.action }}",
                 offsets: Any = "{{ params.offsets }}", stop_first: Any = "{{ params.stop_first }}",
                 snapshot_id: Any = "{{ params.snapshot_id }}", artifacts_dir: str | None = None,
                 timeout: float = 120.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.connector = connector
        self.action = action
        self.offsets = offsets
        self.stop_first = stop_first
        self.snapshot_id = snapshot_id
        self.artifacts_dir = artifacts_dir
        self.timeout = timeout

    def execute(self, context: Any) -> dict[str, Any]:
        rb = self.runbook(context)
        flow = guarded(lambda: self.hook.topology.flow(self.flow))
        with self.hook.clients.connect(flow) as client:
            if self.action == "list":
                out_dir = Path(self.artifacts_dir) if self.artifacts_dir else None
                guarded(lambda: list_offsets(rb, client, flow, self.connector, out_dir))
            else:
                requested = guarded(lambda: validate_offsets(self.connector, self.offsets, flow)) \
                    if self.action == "alter" else None
                guarded(lambda: change_offsets(rb, client, flow, self.connector, self.action, requested=requested,
                                               snapshot_id=self.snapshot_id or None,
                                               stop_first=as_bool(self.stop_first), timeout_s=self.timeout))
        return self.log_outcomes(rb)
