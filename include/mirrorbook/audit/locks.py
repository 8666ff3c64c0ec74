"""Per-flow locks (one runbook per flow at a time): row operations; the store adds policy and audit.

A lock row is found by its stored flow (`key`): the flow as a run names it, through the store's gate,
which keeps distinct flows distinct however long or strange. An operator may instead name a flow as a
listing showed it (`shown_key`). A holder read back carries its stored run id, compared as it is.
"""

from __future__ import annotations

from sqlalchemy import Connection, select

from mirrorbook.audit import schema
from mirrorbook.audit.codec import identity, parse_time, shown_form, stored, stored_row
from mirrorbook.audit.models import LockHolder

_c = schema.flow_locks.c


def key(flow: str) -> str:
    """The stored flow of `flow` as a run names it."""
    return stored(_c.flow, flow)


def shown_key(conn: Connection, flow: str) -> str:
    """The stored flow an operator means: `flow` itself when a lock row shows it (copied from a listing),
    else its stored form."""
    if shown_form(_c.flow, flow) and conn.execute(select(_c.flow).where(_c.flow == flow)).first():
        return flow
    return key(flow)


def holder(conn: Connection, flow_key: str) -> LockHolder | None:
    row = conn.execute(select(schema.flow_locks).where(_c.flow == flow_key)).first()
    if row is None:
        return None
    return LockHolder(run_id=row.run_id, dag_id=row.dag_id, user=row.user, acquired_at=parse_time(row.acquired_at))


def same_run(current: LockHolder, h: LockHolder) -> bool:
    """Whether `current` (as stored) is the run `h` (as the caller names it)."""
    return current.run_id == stored(_c.run_id, h.run_id)


def _values(h: LockHolder) -> dict[str, str | None]:
    return {"run_id": identity(_c.run_id, h.run_id),
            **stored_row(schema.flow_locks, {"dag_id": h.dag_id, "user": h.user, "acquired_at": h.acquired_at})}


def insert(conn: Connection, flow: str, h: LockHolder) -> None:
    conn.execute(schema.flow_locks.insert().values(flow=identity(_c.flow, flow), **_values(h)))


def replace(conn: Connection, flow_key: str, old: LockHolder, new: LockHolder) -> bool:
    """Compare-and-swap: hand the lock to `new` only if `old` (as read from the table) still holds it."""
    result = conn.execute(schema.flow_locks.update()
                          .where(_c.flow == flow_key, _c.run_id == old.run_id,
                                 _c.acquired_at == stored(_c.acquired_at, old.acquired_at))
                          .values(**_values(new)))
    return result.rowcount == 1


def delete(conn: Connection, flow_key: str, run_id: str | None = None) -> bool:
    stmt = schema.flow_locks.delete().where(_c.flow == flow_key)
    if run_id is not None:
        stmt = stmt.where(_c.run_id == stored(_c.run_id, run_id))
    return conn.execute(stmt).rowcount > 0
