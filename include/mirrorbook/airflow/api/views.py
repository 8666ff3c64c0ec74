"""What the plugin's pages show, as rows: a flow's live status (Connect and both clusters), the
freshness figures of the health check's latest metrics sample, and the audit trail.

The pages are read under stress, so every row says its unit and its age, the worst partitions come
first, and nothing grows with input: lists are capped (saying how many were left out) and every free
text (names, users, errors) is cut to `TEXT` characters here, before any template sees it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from mirrorbook.airflow.api.links import RUNBOOKS, RunbookLink, flow_page_path, flow_path
from mirrorbook.audit import AuditStore
from mirrorbook.audit.models import Artifact, AuditRecord, MetricsSample
from mirrorbook.bounds import cut
from mirrorbook.mm2.flows import FlowStatus
from mirrorbook.runbooks.health.results import latest_sample

TEXT = 200
RECENT_DRILLS = 10
RECENT_EVENTS = 25
MAX_PARTITIONS = 200      # the flow page lists the most lagging partitions first
MAX_GROUPS = 100          # checkpoint ages, oldest first
RUNBOOK_SCAN = 500        # audit events of a flow searched for its latest runbook runs


class Freshness(BaseModel):
    """How fresh replication was when the health check last sampled the flow, and how long ago that was."""

    heartbeat_age_s: float | None = None
    checkpoint_age_s_max: float | None = None
    observed_at: datetime | None = None
    sample_age_s: float | None = None
    readiness: dict[str, Any] | None = None  # what an unplanned failover now could write (runbooks/readiness.py)
    readiness_age_s: float | None = None


class CheckpointRow(BaseModel):
    group: str
    age_s: float | None
    behind: int  # source partitions the group committed past its newest checkpoint


class ConnectorRow(BaseModel):
    connector_class: str
    name: str
    state: str
    tasks: str
    trace: str | None


class PartitionRow(BaseModel):
    topic: str
    partition: int
    remote_topic: str
    high_watermark: int
    replicated_offset: int | None
    lag: int


class FlowRow(BaseModel):
    name: str
    source: str
    target: str
    state: str
    detailed_state: dict[str, bool | None]  # None: not known (the connectors could not be read)
    connectors: list[ConnectorRow]
    total_lag: int
    max_lag: int
    partitions: int
    errors: list[str]
    page_href: str
    api_href: str
    freshness: Freshness
    runbooks: list[RunbookLink]


class DrillRow(BaseModel):
    run_id: str | None
    at: datetime
    rto_s: float | None
    skipped: int | None
    re_read: int | None
    path: str


class EventRow(BaseModel):
    at: datetime
    user: str | None
    run_id: str | None
    dag_id: str | None
    action: str
    flow: str | None
    result: str
    mutating: bool


def _text(value: Any) -> str | None:
    return None if value is None else cut(str(value), TEXT)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def health_sample(audit: AuditStore, flow: str) -> MetricsSample | None:
    """The health check's newest metrics sample of `flow` (a drill samples its flow every second, without the
    freshness figures: those samples are passed over)."""
    return latest_sample(audit, flow)


def freshness(sample: MetricsSample | None, now: datetime) -> Freshness:
    if sample is None:
        return Freshness()
    m = sample.metrics
    ready = m.get("readiness") if isinstance(m.get("readiness"), dict) else None
    checked = ready.get("checked_at") if ready else None
    return Freshness(heartbeat_age_s=_number(m.get("heartbeat_age_s")),
                     checkpoint_age_s_max=_number(m.get("checkpoint_age_s_max")),
                     observed_at=sample.observed_at, sample_age_s=(now - sample.observed_at).total_seconds(),
                     readiness=ready, readiness_age_s=(now - datetime.fromisoformat(checked)).total_seconds()
                     if isinstance(checked, str) else None)


def checkpoint_rows(sample: MetricsSample | None) -> tuple[list[CheckpointRow], int]:
    """Per group, oldest checkpoint first (a group without one first of all); and how many were left out."""
    raw = sample.metrics.get("checkpoints") if sample else None
    rows = [CheckpointRow(group=_text(c.get("group")) or "?", age_s=_number(c.get("age_s")),
                          behind=len(c.get("behind") or []))
            for c in (raw if isinstance(raw, list) else []) if isinstance(c, dict)]
    rows.sort(key=lambda r: (r.age_s is not None, -(r.age_s or 0.0)))
    return rows[:MAX_GROUPS], max(0, len(rows) - MAX_GROUPS)


def connector_rows(status: FlowStatus) -> list[ConnectorRow]:
    return [ConnectorRow(connector_class=c.connector_class, name=_text(c.name) or "", state=c.state,
                         tasks=f"{c.tasks_running} of {len(c.tasks)} running", trace=_text(c.trace))
            for c in status.connectors.values()]


def partition_rows(status: FlowStatus) -> tuple[list[PartitionRow], int]:
    """The most lagging partitions first; and how many were left out."""
    ranked = sorted(status.lag, key=lambda p: (-p.lag, p.topic, p.partition))
    rows = [PartitionRow(topic=_text(p.topic) or "", partition=p.partition, remote_topic=_text(p.remote_topic) or "",
                         high_watermark=p.high_watermark, replicated_offset=p.replicated_offset, lag=p.lag)
            for p in ranked[:MAX_PARTITIONS]]
    return rows, max(0, len(ranked) - MAX_PARTITIONS)


def flow_row(status: FlowStatus, sample: MetricsSample | None, runbooks: list[RunbookLink], base: str,
             now: datetime) -> FlowRow:
    return FlowRow(name=_text(status.flow) or "", source=_text(status.source) or "", target=_text(status.target) or "",
                   state=status.state.value,
                   detailed_state=status.detailed_state.model_dump(by_alias=True),
                   connectors=connector_rows(status), total_lag=status.total_lag, max_lag=status.max_lag,
                   partitions=len(status.lag), errors=[_text(e) or "" for e in status.errors[:5]],
                   page_href=f"{base}{flow_page_path(status)}",
                   api_href=f"{base}{flow_path(status)}",
                   freshness=freshness(sample, now), runbooks=runbooks)


def drill_rows(artifacts: list[Artifact]) -> list[DrillRow]:
    """Newest first. The drill's summary carries rto_s, skipped, re_read and the report's path."""
    return [DrillRow(run_id=_text(a.run_id), at=a.created_at, rto_s=_number(a.summary.get("rto_s")),
                     skipped=_count(a.summary.get("skipped")), re_read=_count(a.summary.get("re_read")),
                     path=_text(a.summary.get("path") or a.path) or "")
            for a in reversed(artifacts[-RECENT_DRILLS:])]


def _count(value: Any) -> int | None:
    n = _number(value)
    return None if n is None else int(n)


def event_rows(events: list[AuditRecord]) -> list[EventRow]:
    return [EventRow(at=e.started_at, user=_text(e.user), run_id=_text(e.run_id), dag_id=_text(e.dag_id),
                     action=_text(e.action) or "", flow=_text(e.flow), result=e.result, mutating=e.mutating)
            for e in events]


def latest_runs(audit: AuditStore, flow: str) -> dict[str, str]:
    """The flow's newest run of each runbook, from its newest `RUNBOOK_SCAN` audit events."""
    found: dict[str, str] = {}
    for e in audit.iter_events(flow=flow, limit=RUNBOOK_SCAN, newest_first=True):
        if e.dag_id in RUNBOOKS and e.run_id and e.dag_id not in found:
            found[e.dag_id] = e.run_id
            if len(found) == len(RUNBOOKS):
                break
    return found
