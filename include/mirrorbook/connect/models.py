"""Pydantic models of Connect's REST payloads: statuses, connector info, KIP-875 offsets."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

State = Literal["RUNNING", "PAUSED", "STOPPED", "FAILED", "UNASSIGNED", "RESTARTING", "DESTROYED"]


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class WorkerState(_Loose):
    state: str
    worker_id: str | None = None
    trace: str | None = None


class TaskState(WorkerState):
    id: int


class ConnectorStatus(_Loose):
    name: str
    connector: WorkerState
    tasks: list[TaskState] = Field(default_factory=list)
    type: str | None = None

    @property
    def state(self) -> str:
        return self.connector.state

    def running_tasks(self) -> int:
        return sum(1 for t in self.tasks if t.state == "RUNNING")

    def summary(self) -> str:
        tasks = ", ".join(f"{t.id}:{t.state}" for t in self.tasks) or "none"
        return f"connector={self.connector.state}, tasks=[{tasks}]"


class TaskId(_Loose):
    connector: str
    task: int


class ConnectorInfo(_Loose):
    name: str
    config: dict[str, str]
    tasks: list[TaskId] = Field(default_factory=list)
    type: str | None = None


class ConnectorView(_Loose):
    """One entry of `GET /connectors?expand=status&expand=info`."""

    status: ConnectorStatus | None = None
    info: ConnectorInfo | None = None


class OffsetEntry(BaseModel):
    """One KIP-875 entry. A `None` offset means "reset this partition" in PATCH bodies."""

    model_config = ConfigDict(extra="forbid")
    partition: dict[str, Any]
    offset: dict[str, Any] | None

    @field_validator("partition")
    @classmethod
    def _non_empty(cls, v: dict[str, Any]) -> dict[str, Any]:
        if not v:
            raise ValueError("the 'partition' object must not be empty")
        return v


class ConnectorOffsets(BaseModel):
    """`{"offsets": [...]}` — the shape GET returns and PATCH accepts (KIP-875)."""

    model_config = ConfigDict(extra="forbid")
    offsets: list[OffsetEntry]

    def to_body(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def by_partition(self) -> dict[str, Any]:
        """Offset per source partition, keyed by the partition as canonical JSON (comparable across reads)."""
        import json
        return {json.dumps(e.partition, sort_keys=True): e.offset for e in self.offsets}

    def sorted(self) -> "ConnectorOffsets":
        """A canonical order, so two listings of the same offsets compare equal."""
        import json
        return ConnectorOffsets(offsets=sorted(self.offsets, key=lambda e: json.dumps(e.partition, sort_keys=True)))
