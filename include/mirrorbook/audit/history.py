"""Tables outside the chain: run progress (resume without repeating mutations), per-flow metrics
history (health check → RPO estimates) and the artifacts a run produced (reports, offset listings)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, Select, and_, select

from mirrorbook.audit import schema
from mirrorbook.audit.codec import format_time, loads, parse_time, stored_json, utcnow
from mirrorbook.audit.models import Artifact, MetricsSample
from mirrorbook.redaction import redact


def progress_values(run_id: str, key: str, value: Any) -> dict[str, Any]:
    return {"run_id": run_id, "key": key, "value": stored_json(value, key), "updated_at": format_time(utcnow())}


def progress_get(conn: Connection, run_id: str, key: str) -> tuple[bool, Any]:
    c = schema.run_progress.c
    row = conn.execute(select(c.value).where(c.run_id == run_id, c.key == key)).first()
    return (False, None) if row is None else (True, loads(row.value))


def progress_all(conn: Connection, run_id: str) -> dict[str, Any]:
    c = schema.run_progress.c
    return {r.key: loads(r.value) for r in conn.execute(select(c.key, c.value).where(c.run_id == run_id)
                                                        .order_by(c.key))}


def insert_metrics(conn: Connection, flow: str, observed_at: datetime, metrics: dict[str, Any]) -> MetricsSample:
    text = stored_json(metrics, "metrics")
    conn.execute(schema.flow_metrics.insert().values(flow=flow, observed_at=format_time(observed_at), metrics=text))
    return MetricsSample(flow=flow, observed_at=observed_at, metrics=loads(text))


def metrics_query(flow: str, since: datetime | None, until: datetime | None, limit: int | None,
                  newest_first: bool) -> Select[Any]:
    c = schema.flow_metrics.c
    conds = [c.flow == flow]
    if since is not None:
        conds.append(c.observed_at >= format_time(since))
    if until is not None:
        conds.append(c.observed_at <= format_time(until))
    order = (c.observed_at.desc(), c.id.desc()) if newest_first else (c.observed_at, c.id)
    stmt = select(schema.flow_metrics).where(and_(*conds)).order_by(*order)
    return stmt.limit(limit) if limit is not None else stmt


def to_metrics(row: Row[Any]) -> MetricsSample:
    return MetricsSample(flow=row.flow, observed_at=parse_time(row.observed_at), metrics=loads(row.metrics))


def insert_artifact(conn: Connection, kind: str, run_id: str | None, path: str, summary: dict[str, Any]) -> Artifact:
    values = redact({"kind": kind, "run_id": run_id, "path": path})
    values.update(summary=stored_json(summary, "summary"), created_at=format_time(utcnow()))
    result = conn.execute(schema.artifacts.insert().values(**values))
    return to_artifact_values(result.inserted_primary_key[0], values)


def artifacts_query(kind: str | None, run_id: str | None) -> Select[Any]:
    c = schema.artifacts.c
    conds = [col == v for col, v in ((c.kind, kind), (c.run_id, run_id)) if v is not None]
    return select(schema.artifacts).where(and_(True, *conds)).order_by(c.id)


def to_artifact_values(artifact_id: int, values: dict[str, Any]) -> Artifact:
    return Artifact(artifact_id=artifact_id, kind=values["kind"], run_id=values["run_id"], path=values["path"],
                    summary=loads(values["summary"]), created_at=parse_time(values["created_at"]))


def to_artifact(row: Row[Any]) -> Artifact:
    return to_artifact_values(row.id, dict(row._mapping))
