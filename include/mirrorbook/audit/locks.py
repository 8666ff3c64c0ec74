"""Per-flow locks (one runbook per flow at a time): row operations; the store adds policy and audit."""

from __future__ import annotations

from sqlalchemy import Connection, select

from mirrorbook.audit import schema
from mirrorbook.audit.codec import format_time, parse_time
from mirrorbook.audit.models import LockHolder
from mirrorbook.redaction import redact

_c = schema.flow_locks.c


def holder(conn: Connection, flow: str) -> LockHolder | None:
    row = conn.execute(select(schema.flow_locks).where(_c.flow == flow)).first()
    if row is None:
        return None
    return LockHolder(run_id=row.run_id, dag_id=row.dag_id, user=row.user, acquired_at=parse_time(row.acquired_at))


def _values(h: LockHolder) -> dict[str, str | None]:
    return redact({"run_id": h.run_id, "dag_id": h.dag_id, "user": h.user, "acquired_at": format_time(h.acquired_at)})


def insert(conn: Connection, flow: str, h: LockHolder) -> None:
    conn.execute(schema.flow_locks.insert().values(flow=flow, **_values(h)))


def replace(conn: Connection, flow: str, old: LockHolder, new: LockHolder) -> bool:
    """Compare-and-swap: hand the lock to `new` only if `old` still holds it."""
    result = conn.execute(schema.flow_locks.update()
                          .where(_c.flow == flow, _c.run_id == old.run_id,
                                 _c.acquired_at == format_time(old.acquired_at))
                          .values(**_values(new)))
    return result.rowcount == 1


def delete(conn: Connection, flow: str, run_id: str | None = None) -> bool:
    stmt = schema.flow_locks.delete().where(_c.flow == flow)
    if run_id is not None:
        stmt = stmt.where(_c.run_id == run_id)
    return conn.execute(stmt).rowcount > 0
