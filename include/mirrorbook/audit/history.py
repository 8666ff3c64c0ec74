"""Tables outside the chain: run progress (resume without repeating mutations), per-flow metrics
history (health check → RPO estimates), the newest replication sample per flow (the RPO sampler) and the
artifacts a run produced (reports, offset listings)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, Select, and_, bindparam, func, select

from mirrorbook.audit import schema
from mirrorbook.audit.codec import dumps, format_time, loads, lookup, parse_time, stored, stored_row, utcnow
from mirrorbook.audit.models import Artifact, GroupPosition, MetricsSample

_p, _m, _a, _r = schema.run_progress.c, schema.flow_metrics.c, schema.artifacts.c, schema.run_results.c
_s = schema.replication_samples.c


def progress_values(run_id: str, key: str, value: Any) -> dict[str, Any]:
    return stored_row(schema.run_progress, {"run_id": run_id, "key": key, "value": value, "updated_at": utcnow()})


def progress_get(conn: Connection, run_id: str, key: str) -> tuple[bool, Any]:
    row = conn.execute(select(_p.value).where(_p.run_id == stored(_p.run_id, run_id),
                                              _p.key == stored(_p.key, key))).first()
    return (False, None) if row is None else (True, loads(row.value))


def progress_has(conn: Connection, run_id: str, key: str) -> bool:
    return conn.execute(select(_p.key).where(_p.run_id == stored(_p.run_id, run_id),
                                             _p.key == stored(_p.key, key))).first() is not None


def progress_all(conn: Connection, run_id: str) -> dict[str, Any]:
    return {r.key: loads(r.value) for r in conn.execute(select(_p.key, _p.value)
                                                        .where(_p.run_id == stored(_p.run_id, run_id))
                                                        .order_by(_p.key))}


def insert_metrics(conn: Connection, flow: str, observed_at: datetime, metrics: dict[str, Any]) -> MetricsSample:
    row = stored_row(schema.flow_metrics, {"flow": flow, "observed_at": observed_at, "metrics": metrics})
    conn.execute(schema.flow_metrics.insert().values(**row))
    return MetricsSample(flow=row["flow"], observed_at=observed_at, metrics=loads(row["metrics"]))


def metrics_query(flow: str, since: datetime | None, until: datetime | None, limit: int | None,
                  newest_first: bool, source: str | None = None) -> Select[Any]:
    conds = [lookup(_m.flow, flow)]
    if source is not None:
        # The JSON is canonical text (codec.dumps): the key and its value appear exactly so. Callers check the
        # parsed sample too — the text could sit deeper in the JSON.
        conds.append(_m.metrics.contains(f'"source":{dumps(source)}', autoescape=True))
    if since is not None:
        conds.append(_m.observed_at >= format_time(since))
    if until is not None:
        conds.append(_m.observed_at <= format_time(until))
    order = (_m.observed_at.desc(), _m.id.desc()) if newest_first else (_m.observed_at, _m.id)
    stmt = select(schema.flow_metrics).where(and_(*conds)).order_by(*order)
    return stmt.limit(limit) if limit is not None else stmt


def to_metrics(row: Row[Any]) -> MetricsSample:
    return MetricsSample(flow=row.flow, observed_at=parse_time(row.observed_at), metrics=loads(row.metrics))


def replication_sample(conn: Connection, flow: str) -> MetricsSample | None:
    row = conn.execute(select(_s.flow, _s.observed_at, _s.sample).where(lookup(_s.flow, flow))).first()
    return None if row is None else MetricsSample(flow=row.flow, observed_at=parse_time(row.observed_at),
                                                  metrics=loads(row.sample))


def replication_sample_values(flow: str, observed_at: datetime, sample: dict[str, Any]) -> dict[str, Any]:
    return stored_row(schema.replication_samples, {"flow": flow, "observed_at": observed_at, "sample": sample})


def insert_artifact(conn: Connection, kind: str, run_id: str | None, path: str, summary: dict[str, Any]) -> Artifact:
    values = stored_row(schema.artifacts, {"kind": kind, "run_id": run_id, "path": path, "summary": summary,
                                           "created_at": utcnow()})
    result = conn.execute(schema.artifacts.insert().values(**values))
    key = result.inserted_primary_key
    assert key is not None, "artifacts has an autoincrement id"
    return to_artifact_values(key[0], values)


def artifacts_query(kind: str | None, run_id: str | None) -> Select[Any]:
    conds = [lookup(col, v) for col, v in ((_a.kind, kind), (_a.run_id, run_id)) if v is not None]
    return select(schema.artifacts).where(and_(True, *conds)).order_by(_a.id)


def to_artifact_values(artifact_id: int, values: dict[str, Any]) -> Artifact:
    return Artifact(artifact_id=artifact_id, kind=values["kind"], run_id=values["run_id"], path=values["path"],
                    summary=loads(values["summary"]), created_at=parse_time(values["created_at"]))


def to_artifact(row: Row[Any]) -> Artifact:
    return to_artifact_values(row.id, dict(row._mapping))


# -- run results ----------------------------------------------------------------------------------------

def insert_run_result(conn: Connection, dag_id: str, run_id: str, result: str) -> None:
    conn.execute(schema.run_results.insert().values(**stored_row(schema.run_results, {
        "dag_id": dag_id, "run_id": run_id, "result": result, "ended_at": utcnow()})))


def run_result(conn: Connection, run_id: str) -> str | None:
    row = conn.execute(select(_r.result).where(lookup(_r.run_id, run_id)).order_by(_r.id.desc()).limit(1)).first()
    return None if row is None else str(row.result)


def run_result_counts(conn: Connection) -> dict[tuple[str, str], int]:
    rows = conn.execute(select(_r.dag_id, _r.result, func.count()).group_by(_r.dag_id, _r.result))
    return {(r[0], r[1]): int(r[2]) for r in rows}


# -- readiness positions --------------------------------------------------------------------------------
_pos = schema.positions.c


def positions(conn: Connection, flow: str) -> list[GroupPosition]:
    rows = conn.execute(select(schema.positions).where(lookup(_pos.flow, flow))
                        .order_by(_pos.group, _pos.topic, _pos.partition))
    return [GroupPosition(group=r.group, topic=r.topic, partition=r.partition, source_topic=r.source_topic,
                          source_offset=r.source_offset, target_offset=r.target_offset, rule=r.rule, exact=r.exact,
                          observed_at=parse_time(r.observed_at)) for r in rows]


def position_rows(conn: Connection, flow: str) -> list[tuple[str, str, int, str, int, int, str, bool, str]]:
    """`positions` as plain tuples — (group, topic, partition, source_topic, source_offset, target_offset, rule,
    exact, observed_at as stored) — for a reader that checks a million of them and makes a model of none."""
    rows = conn.execute(select(_pos.group, _pos.topic, _pos.partition, _pos.source_topic, _pos.source_offset,
                               _pos.target_offset, _pos.rule, _pos.exact, _pos.observed_at)
                        .where(lookup(_pos.flow, flow)))
    return [tuple(r) for r in rows]


def positions_values(flow: str, positions: list[GroupPosition]) -> list[dict[str, Any]]:
    """The rows of many positions as the table keeps them (`stored_row`'s gate): their texts and times repeat (a
    few hundred group and topic names over 150,000 rows), so each distinct one passes the gate once."""
    gated: dict[tuple[str, Any], Any] = {}
    out = []
    for p in positions:
        row = {"flow": flow, "group": p.group, "topic": p.topic, "partition": p.partition,
               "source_topic": p.source_topic, "source_offset": p.source_offset, "target_offset": p.target_offset,
               "rule": p.rule, "exact": p.exact, "observed_at": p.observed_at}
        for name, value in row.items():
            if isinstance(value, (str, datetime)):
                key = (name, value)
                if key not in gated:
                    gated[key] = stored(_pos[name], value)
                row[name] = gated[key]
        out.append(row)
    return out


def delete_positions(conn: Connection, flow: str, keys: list[tuple[str, str, int]]) -> None:
    """One statement for all the keys (executed for each)."""
    if not keys:
        return
    stmt = schema.positions.delete().where(lookup(_pos.flow, flow), _pos.group == bindparam("g"),
                                           _pos.topic == bindparam("t"), _pos.partition == bindparam("p"))
    conn.execute(stmt, [{"g": stored(_pos.group, group), "t": stored(_pos.topic, topic), "p": partition}
                        for group, topic, partition in keys])
