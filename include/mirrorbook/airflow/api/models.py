"""The flows API's fixed response shapes (KIP-1144 names, camelCase as the KIP writes them).

The per-flow detail keeps the KIP's open shape (one key per connector class), so it is built by
`FlowStatus.kip1144_detail()` and not modelled here.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Caller(BaseModel):
    """Who is calling, as Airflow authenticated them; the audit records `name` as `user`."""

    name: str


class DetailedStateOut(BaseModel):
    """The KIP's flags; null when the flow's connectors could not be read (its state is then UNKNOWN)."""

    enabled: bool | None
    ready: bool | None
    allConnectorsRunning: bool | None
    sourceTaskRunning: bool | None


class FlowSummaryOut(BaseModel):
    """One entry of `GET /`'s `flows` map."""

    state: str
    detailedState: DetailedStateOut
    source: str
    target: str
    kafkaClusterId: str | None = None
    links: dict[str, str]


class OverviewOut(BaseModel):
    """`GET /`: every flow of the topology, and the Kafka clusters (alias -> bootstrap, or "hidden")."""

    flows: dict[str, FlowSummaryOut]
    clusters: dict[str, str]


class ConnectorChangeOut(BaseModel):
    connector: str
    result: str = Field(description="ok: a call was made; noop: it was already in the wanted state")
    before: Any = None
    after: Any = None


class FlowActionOut(BaseModel):
    """`PUT /{source}/{target}/pause|resume`: what was done to each connector, and the flow's state after."""

    flow: str
    action: str
    state: str
    mutations: int
    auditRunId: str
    connectors: dict[str, ConnectorChangeOut]
    links: dict[str, str]


class OffsetsChangeOut(BaseModel):
    """`PATCH|DELETE /{source}/{target}/offsets`: Connect's success message, plus the audit trail's ids."""

    message: str
    connector: str
    changed: bool
    snapshotId: str | None = None
    auditRunId: str
    links: dict[str, str]
