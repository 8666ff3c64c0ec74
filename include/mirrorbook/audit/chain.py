"""Appending to and verifying the hash chain of events (rows of `audit_events` plus the head row)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterator, Sequence

from sqlalchemy import Connection, Row, Select, and_, bindparam, func, select

from mirrorbook.audit import schema
from mirrorbook.audit.codec import format_time, loads, lookup, new_id, parse_time, stored_row, utcnow
from mirrorbook.audit.errors import AuditIntegrityError
from mirrorbook.audit.hashing import GENESIS_HASH, digest, event_hash
from mirrorbook.audit.models import CHANGING_RESULTS, AuditEvent, AuditRecord, BrokenLink, ChainHead, VerifyResult

VERIFY_BATCH = 1000


def event_row(event: AuditEvent) -> dict[str, Any]:
    """The event as stored (redacted, escaped, bounded, canonical), without its chain fields (seq, hashes)."""
    fields = event.model_dump(exclude={"event_id", "ended_at"})
    fields.update(event_id=event.event_id or new_id("evt"), ended_at=event.ended_at or utcnow())
    return stored_row(schema.events, fields)


def _count(head: Row[Any]) -> int:
    """The head row's `count` column (to a type checker, `head.count` is the tuple method of that name)."""
    count: int = head._mapping["count"]
    return count


def append(conn: Connection, event: AuditEvent) -> AuditRecord:
    """Link `event` to the head and move the head. `conn` must hold the write lock (Database.write)."""
    current = conn.execute(_HEAD).first()
    if current is None:
        raise AuditIntegrityError("the audit head row is missing, so nothing can be appended safely",
                                  "run `mirrorbook audit verify` and investigate who deleted it")
    row = event_row(event)
    row["seq"] = _count(current) + 1
    row["prev_hash"] = current.hash
    row["hash"] = event_hash(row, current.hash)
    conn.execute(_INSERT_EVENT, row)
    conn.execute(_MOVE_HEAD, {"new_count": row["seq"], "new_hash": row["hash"], "new_updated_at": row["ended_at"]})
    return to_record(row)


def append_many(conn: Connection, events: Sequence[AuditEvent], *, records: bool = True) -> list[AuditRecord]:
    """`append` of every event in turn, as the chain links them one after another, in three statements: the head
    read once, the rows inserted in one executemany, the head moved once (a thousand groups' write-ahead intents
    were 4,000 statements, a second and a half of a cutover). `conn` must hold the write lock. `records=False`:
    nothing read back (returns [])."""
    if not events:
        return []
    current = conn.execute(_HEAD).first()
    if current is None:
        raise AuditIntegrityError("the audit head row is missing, so nothing can be appended safely",
                                  "run `mirrorbook audit verify` and investigate who deleted it")
    rows, count, prev = [], _count(current), current.hash
    for event in events:
        row = event_row(event)
        count += 1
        row["seq"], row["prev_hash"] = count, prev
        row["hash"] = prev = event_hash(row, prev)
        rows.append(row)
    conn.execute(_INSERT_EVENT, rows)
    conn.execute(_MOVE_HEAD, {"new_count": count, "new_hash": prev, "new_updated_at": rows[-1]["ended_at"]})
    return [to_record(row) for row in rows] if records else []


# Built once, with their values as parameters: a statement built per event with its values inlined is
# compiled per event (SQLAlchemy's cache key covers the literals), which cost more than the insert itself.
_HEAD = select(schema.head).where(schema.head.c.id == schema.HEAD_ID)
_INSERT_EVENT = schema.events.insert()
_MOVE_HEAD = (schema.head.update().where(schema.head.c.id == schema.HEAD_ID)
              .values(count=bindparam("new_count"), hash=bindparam("new_hash"), updated_at=bindparam("new_updated_at")))


def to_record(row: Row[Any] | dict[str, Any]) -> AuditRecord:
    data = dict(row._mapping) if isinstance(row, Row) else dict(row)
    for k in schema.JSON_EVENT_COLUMNS:
        data[k] = loads(data[k])
    data["started_at"] = parse_time(data["started_at"])
    data["ended_at"] = parse_time(data["ended_at"])
    return AuditRecord.model_validate(data)


def query(run_id: str | None = None, flow: str | None = None, action: str | None = None,
          mutating: bool | None = None, since: datetime | None = None, limit: int | None = None,
          newest_first: bool = False) -> Select[Any]:
    ev = schema.events.c
    conds = [lookup(c, v) for c, v in ((ev.run_id, run_id), (ev.flow, flow), (ev.action, action),
                                        (ev.mutating, mutating)) if v is not None]
    if since is not None:
        conds.append(ev.started_at >= format_time(since))
    stmt = select(schema.events).where(and_(True, *conds))
    stmt = stmt.order_by(ev.seq.desc() if newest_first else ev.seq)
    return stmt.limit(limit) if limit is not None else stmt


def count_changing(run_id: str) -> Select[Any]:
    ev = schema.events.c
    return (select(func.count()).select_from(schema.events)
            .where(lookup(ev.run_id, run_id), ev.mutating.is_(True), ev.result.in_(CHANGING_RESULTS)))


def hash_at(conn: Connection, seq: int) -> str | None:
    """The stored hash of the event at `seq`, or None if there is none."""
    return conn.execute(select(schema.events.c.hash).where(schema.events.c.seq == seq)).scalar_one_or_none()


def head_of(conn: Connection) -> ChainHead | None:
    """The head row with the store's identity (None if the head row is missing)."""
    current = conn.execute(select(schema.head).where(schema.head.c.id == schema.HEAD_ID)).first()
    if current is None:
        return None
    return ChainHead(seq=_count(current), hash=current.hash, updated_at=parse_time(current.updated_at),
                     store=hash_at(conn, 1))


def _rows(conn: Connection, table: Any, order: Any) -> Iterator[Row[Any]]:
    """All rows in `order`, streamed (server-side cursor on PostgreSQL): trails can be large."""
    result = conn.execution_options(yield_per=VERIFY_BATCH).execute(select(table).order_by(order))
    yield from result


def _check_event(row: Row[Any], expected_seq: int, expected_prev: str) -> BrokenLink | None:
    stored = dict(row._mapping)
    where = {"seq": row.seq, "event_id": row.event_id}
    if event_hash(stored, row.prev_hash) != row.hash:
        return BrokenLink(reason="hash mismatch (row edited)", **where)
    if row.seq != expected_seq:
        return BrokenLink(reason=f"missing predecessor (row deleted): expected seq {expected_seq}, "
                                 f"found seq {row.seq}", **where)
    if row.prev_hash != expected_prev:
        return BrokenLink(reason="prev_hash mismatch (predecessor edited and re-hashed, or replaced)", **where)
    return None


def _check_head(conn: Connection, checked: int, last_hash: str) -> tuple[int | None, BrokenLink | None]:
    current = conn.execute(select(schema.head).where(schema.head.c.id == schema.HEAD_ID)).first()
    if current is None:
        return None, (BrokenLink(reason="head row missing (audit_head deleted)") if checked else None)
    count = _count(current)
    if count != checked:
        return count, BrokenLink(
            seq=checked + 1,
            reason=f"chain ends at seq {checked} but the head records {count} events "
                   f"(rows deleted at the tail)" if count > checked else
                   f"chain has {checked} events but the head records only {count} (rows inserted)")
    if current.hash != last_hash:
        return count, BrokenLink(seq=checked, reason="last event's hash differs from the head's "
                                                    "(tail row replaced, or head edited)")
    return count, None


def _check_snapshots(conn: Connection) -> tuple[int, BrokenLink | None]:
    n = 0
    for row in _rows(conn, schema.snapshots, schema.snapshots.c.id):
        if digest(row.payload) != row.payload_sha256:
            return n, BrokenLink(snapshot_id=row.snapshot_id, reason="payload digest mismatch (snapshot edited)")
        n += 1
    return n, None


def verify(conn: Connection) -> VerifyResult:
    """Walk the chain from genesis; report the first broken link, then the head, then snapshot digests."""
    checked, last_hash = 0, GENESIS_HASH
    for row in _rows(conn, schema.events, schema.events.c.seq):
        broken = _check_event(row, checked + 1, last_hash)
        if broken:
            return VerifyResult(ok=False, checked=checked, broken=broken)
        checked, last_hash = checked + 1, row.hash
    head_count, broken = _check_head(conn, checked, last_hash)
    if broken:
        return VerifyResult(ok=False, checked=checked, head_count=head_count, broken=broken)
    snaps, broken = _check_snapshots(conn)
    return VerifyResult(ok=broken is None, checked=checked, head_count=head_count, snapshots_checked=snaps,
                        broken=broken)
