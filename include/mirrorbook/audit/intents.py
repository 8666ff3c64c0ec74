"""Write-ahead records of mutating calls (rows of `audit_intents`): opened with the intent event, closed
with the outcome event, each in that event's own transaction — so a row still open is exactly a call
whose outcome no one recorded. The store adds the chain events; the runbook engine decides what to check."""

from __future__ import annotations

from typing import Any, Sequence

from sqlalchemy import Connection, Select, and_, bindparam, or_, select

from mirrorbook.audit import schema
from mirrorbook.audit.codec import loads, parse_time, stored, stored_row
from mirrorbook.audit.models import AuditRecord, OpenIntent

_c = schema.intents.c


def insert(conn: Connection, intent: AuditRecord, expect: dict[str, Any]) -> None:
    conn.execute(schema.intents.insert(), stored_row(schema.intents, {
        "event_id": intent.event_id, "flow": intent.flow, "run_id": intent.run_id or "", "task_id": intent.task_id,
        "action": intent.action, "expect": expect, "created_at": intent.started_at}))


def insert_many(conn: Connection, opened: Sequence[tuple[AuditRecord, dict[str, Any]]]) -> None:
    """`insert` of many intents, in one statement executed for all of them."""
    if opened:
        conn.execute(schema.intents.insert(), [stored_row(schema.intents, {
            "event_id": i.event_id, "flow": i.flow, "run_id": i.run_id or "", "task_id": i.task_id,
            "action": i.action, "expect": expect, "created_at": i.started_at}) for i, expect in opened])


def open_among(conn: Connection, event_ids: Sequence[str]) -> set[str]:
    """Which of `event_ids` are open intents (read under the write lock, so they stay open until it is released)."""
    out: set[str] = set()
    ids = list(dict.fromkeys(event_ids))
    for first in range(0, len(ids), 500):  # within any database's limit on bound parameters
        out.update(conn.execute(select(_c.event_id).where(_c.event_id.in_(ids[first:first + 500]))).scalars())
    return out


def delete_many(conn: Connection, event_ids: Sequence[str]) -> None:
    """Close many intents: a statement per 500 (one per intent, executed many times, cost a second a thousand)."""
    ids = list(event_ids)
    for first in range(0, len(ids), 500):
        conn.execute(schema.intents.delete().where(_c.event_id.in_(ids[first:first + 500])))


def delete(conn: Connection, event_id: str) -> bool:
    """Close the intent; False when it was closed already (another attempt recorded its outcome)."""
    return conn.execute(_DELETE, {"closing": event_id}).rowcount > 0


_DELETE = schema.intents.delete().where(_c.event_id == bindparam("closing"))  # built once (see chain._INSERT_EVENT)


def query(run_id: str | None, task_id: str | None, flows: list[str] | None) -> Select[Any]:
    """Open intents of (`run_id`, `task_id`), or — with `flows` — also every run's on those flows; oldest first."""
    mine = and_(_c.run_id == stored(_c.run_id, run_id or ""), _c.task_id == stored(_c.task_id, task_id))
    on_flows = _c.flow.in_([stored(_c.flow, f) for f in flows]) if flows else None
    cond = mine if on_flows is None else (on_flows if run_id is None else or_(mine, on_flows))
    return select(schema.intents).where(cond).order_by(_c.created_at, _c.event_id)


def to_intent(row: Any) -> OpenIntent:
    return OpenIntent(event_id=row.event_id, flow=row.flow, run_id=row.run_id, task_id=row.task_id,
                      action=row.action, expect=loads(row.expect), created_at=parse_time(row.created_at))
